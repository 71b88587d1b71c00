"""Small C helpers of the instruments, built at run time with gcc and cached.

:func:`foamio` returns the ``_foamio`` extension (``csrc/foamio.c``: one write
time of an OpenFOAM rank in one call), or None where it cannot be built (no C
compiler, no Python headers, or ``TIERBENCH_NATIVE=0``); callers then make the
same system calls in Python, and the files are the same byte for byte. The
build lands in ``$XDG_CACHE_HOME/tierbench`` (``~/.cache/tierbench``) under a
name keyed by the source, the Python build and the platform, so a machine
builds once; concurrent builds (MPI ranks) each compile to a file of their own
and rename it into place. :func:`status` says which one a run used, and why.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import platform
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

SOURCE = Path(__file__).resolve().parent / "csrc" / "foamio.c"
SWITCH = "TIERBENCH_NATIVE"

_state: dict = {}


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tierbench"


def foamio():
    """The built extension, or None (see :func:`status` for why)."""
    if "module" not in _state:
        try:
            _state["module"] = _load(_build())
            _state["status"] = "c"
        except (OSError, ImportError, subprocess.SubprocessError) as error:
            _state["module"] = None
            _state["status"] = f"python ({error})"
    return _state["module"]


def status() -> str:
    """``c``, or ``python (<why the C helper is not used>)``."""
    foamio()
    return _state["status"]


def _build() -> Path:
    if os.environ.get(SWITCH, "1") == "0":
        raise ImportError(f"{SWITCH}=0")
    include = sysconfig.get_paths()["include"]
    if not os.path.isfile(os.path.join(include, "Python.h")):
        raise ImportError(f"no Python.h in {include} (install the Python headers)")
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        raise ImportError("no C compiler (gcc) on PATH")
    source = SOURCE.read_bytes()
    key = hashlib.sha256(
        b"\0".join([source, sys.version.encode(), include.encode(), platform.machine().encode()])
    ).hexdigest()[:16]
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    target = cache_dir() / f"_foamio-{key}{suffix}"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    command = [compiler, "-O2", "-shared", "-fPIC", f"-I{include}", str(SOURCE), "-o", str(partial)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise ImportError(f"{' '.join(command)} failed: {done.stderr.strip()[-300:]}")
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return target


def _load(path: Path):
    loader = importlib.machinery.ExtensionFileLoader("_foamio", str(path))
    spec = importlib.util.spec_from_loader("_foamio", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module
