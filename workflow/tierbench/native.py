"""Small C helpers of the instruments, built at run time with gcc and cached.

:func:`foamio` returns the ``_foamio`` extension (``csrc/foamio.c``: one write
time of an OpenFOAM rank in one call), or None where it cannot be built (no C or
C++ compiler, no Python headers, or ``TIERBENCH_NATIVE=0``); callers then make the
same system calls in Python, and the files are the same byte for byte.
Helpers are built against this Python's headers and numpy's; ``_foamio``
formats ascii numbers through libstdc++'s streams (``csrc/foamtext.cpp``), as
OpenFOAM does, so it also needs g++. A build lands in
``$XDG_CACHE_HOME/tierbench`` (``~/.cache/tierbench``) under a name keyed by
the sources (the shared ``csrc/*.h`` too), the Python and numpy builds and the
platform, so a machine builds once; concurrent builds (MPI ranks, worker
processes) each compile to a file of their own and rename it into place.
:func:`status` says which one a run used, and why.
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

import numpy

SOURCES = Path(__file__).resolve().parent / "csrc"
SWITCH = "TIERBENCH_NATIVE"

#: per helper name: the C++ sources built into it beside ``<name>.c`` (gcc
#: compiles them as C++ where g++ is installed)
PARTS = {"foamio": ("foamtext.cpp",)}
#: per helper name: the loaded module (or None) and the status line
_state: dict = {}


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tierbench"


def helper(name: str):
    """The built ``_<name>`` extension of ``csrc/<name>.c``, or None (:func:`status` says why)."""
    if name not in _state:
        try:
            _state[name] = (_load(name, _build(name)), "c")
        except (OSError, ImportError, subprocess.SubprocessError) as error:
            _state[name] = (None, f"python ({error})")
    return _state[name][0]


def foamio():
    """The OpenFOAM rank writer, or None."""
    return helper("foamio")


def status(name: str) -> str:
    """``c``, or ``python (<why the C helper is not used>)``."""
    helper(name)
    return _state[name][1]


def _build(name: str) -> Path:
    if os.environ.get(SWITCH, "1") == "0":
        raise ImportError(f"{SWITCH}=0")
    include = sysconfig.get_paths()["include"]
    if not os.path.isfile(os.path.join(include, "Python.h")):
        raise ImportError(f"no Python.h in {include} (install the Python headers)")
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        raise ImportError("no C compiler (gcc) on PATH")
    paths = [SOURCES / f"{name}.c", *(SOURCES / part for part in PARTS.get(name, ()))]
    cpp = any(path.suffix == ".cpp" for path in paths)
    if cpp and shutil.which("g++") is None:
        raise ImportError("no C++ compiler (g++) on PATH (install g++)")
    source = b"".join(p.read_bytes() for p in [*paths, *sorted(SOURCES.glob("*.h"))])
    build = [sys.version, include, platform.machine(), numpy.__version__, numpy.get_include()]
    key = hashlib.sha256(b"\0".join([source, *(part.encode() for part in build)])).hexdigest()[:16]
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    target = cache_dir() / f"_{name}-{key}{suffix}"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    command = [compiler, "-O2", "-shared", "-fPIC", f"-I{include}", f"-I{numpy.get_include()}"]
    command += [*map(str, paths), "-o", str(partial)]
    if cpp:
        command.append("-lstdc++")
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise ImportError(f"{' '.join(command)} failed: {done.stderr.strip()[-300:]}")
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return target


def _load(name: str, path: Path):
    loader = importlib.machinery.ExtensionFileLoader(f"_{name}", str(path))
    spec = importlib.util.spec_from_loader(f"_{name}", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module
