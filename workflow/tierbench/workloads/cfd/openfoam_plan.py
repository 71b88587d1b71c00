"""The openfoam workload's parameters and what they plan: defaults and checks, the duct
case (its mesh from a cell count, its files from the templates), bytes per write, tasks
and runtime, and the OpenFOAM environment a job runs in (a site's module, Debian's).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path
from string import Template

from ...errors import PointFailed
from ...packages import package_of
from ...schemas import schema_defaults
from .cfd_launch import (
    alone_first,
    check_write_interval,
    write_interval,
    write_steps,
)
from .foam import block_shape
from .openfoam_usercase import (
    BYTES_PER_RANK_WRITE,
    OVERRIDABLE,
    OWN,
    case_plan,
    check_measured_steps,
)

CASE_TEMPLATE = Path(__file__).resolve().parent / "openfoam_case"
#: where an OpenFOAM installation keeps the functions its tutorials' Allrun scripts source
RUN_FUNCTIONS = Path("bin/tools/RunFunctions")
#: tierbench's stand-in for them, where the installation has none (Debian's)
STAND_IN = Path(__file__).resolve().parent / "openfoam_tools" / "RunFunctions"
#: the installation's folder with the stand-in added, in a job's run folder
PROJECT_VIEW = "openfoam_project"
DEBIAN_PROJECT_DIR = "/usr/share/openfoam"
INSTALL_HINT = (
    f"apt-get install {package_of('simpleFoam')} (Debian/Ubuntu), "
    "or 'openfoam' in the hardware file"
)
DEFAULTS = schema_defaults("openfoam")
#: a block of one rank's cells may be at most this many times longer than wide
MAX_ASPECT = 16
#: the duct's larger cross-section side (m), inflow velocity (m/s), viscosity (m2/s):
#: Re = 1e4; k and omega from 5 % turbulence intensity and a 7 mm mixing length
DUCT_SIDE = 0.1
FLOW = {"velocity": 1, "nu": 1e-05, "k": 0.00375, "omega": 16}
SOLVER_TIMEOUT_S = 3600.0


def with_defaults(params: dict) -> dict:
    return {**DEFAULTS, **params}


# ------------------------------------------------------------------ case


def aspect(shape: tuple[int, int, int]) -> float:
    return max(shape) / min(shape)


def nearby_blockable(cells: int) -> int:
    """The nearest cell count whose block is no longer than MAX_ASPECT (for the error)."""
    for offset in range(1, cells):
        for candidate in (cells - offset, cells + offset):
            if candidate >= 1 and aspect(block_shape(candidate)) <= MAX_ASPECT:
                return candidate
    return cells


def mesh(params: dict) -> dict:
    """The duct's cell counts and size: ranks slabs of one rank's block along x, cubic cells."""
    p = with_defaults(params)
    x, y, z = block_shape(p["cells_per_rank"])
    h = DUCT_SIDE / max(y, z)
    nx = x * p["ranks"]
    return {
        "nx": nx,
        "ny": y,
        "nz": z,
        "length": _number(nx * h),
        "height": _number(y * h),
        "width": _number(z * h),
    }


def _number(value: float) -> str:
    return f"{value:.9g}"


def case_values(params: dict) -> dict:
    """Every ``$name`` the case templates use, from the point's parameters."""
    p = with_defaults(params)
    interval = write_interval(p)
    return {
        **mesh(p),
        **{name: _number(value) for name, value in FLOW.items()},
        "ranks": p["ranks"],
        "steps": p["steps"],
        # no writes: a write interval longer than the run, so no iteration is a write time
        "write_interval": p["steps"] + 1 if interval is None else interval,
        "purge_write": p["purge_write"],
        "write_format": p["write_format"],
    }


def case_files(params: dict) -> dict[str, str]:
    """The case's files (relative path -> text), rendered from the templates."""
    values = case_values(params)
    files = {}
    for path in sorted(CASE_TEMPLATE.rglob("*")):
        if path.is_file():
            rel = path.relative_to(CASE_TEMPLATE).as_posix()
            files[rel] = Template(path.read_text()).substitute(values)
    return files


def write_case(folder: Path, params: dict) -> None:
    for rel, text in case_files(params).items():
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


# ------------------------------------------------------------------ params and estimates


def check_params(params: dict) -> None:
    """What the schema cannot say: the run must write, measure, and make a proper block
    (the duct), or the case must be a case this workload can run."""
    p = with_defaults(params)
    if p["case"] is not None:
        case_plan(p)
        return
    if p["prepare"] is not None:
        raise ValueError("prepare: the generated duct prepares itself; it is for a case of yours")
    own = [name for name in OVERRIDABLE if p[name] == OWN]
    if own:
        raise ValueError(
            f"{', '.join(own)}: 'case' keeps a case's own setting, and no case is given "
            "(parameter case: a case folder)"
        )
    check_write_interval(p, "iteration")
    check_measured_steps(p["steps"], p["warmup_steps"])
    shape = block_shape(p["cells_per_rank"])
    if aspect(shape) > MAX_ASPECT:
        raise ValueError(
            f"cells_per_rank {p['cells_per_rank']} only makes a block of "
            f"{' x '.join(map(str, shape))} cells, more than {MAX_ASPECT} times longer than "
            f"wide; choose a number with more factors, e.g. "
            f"{nearby_blockable(p['cells_per_rank'])}"
        )


#: bytes per cell per write, binary: U 3 doubles, p k omega nut 1, phi ~3 faces per cell
BYTES_PER_CELL = {"binary": 80, "ascii": 160}


def bytes_per_write(params: dict) -> int:
    """An estimate of the bytes all ranks of all members write at one write time."""
    p = with_defaults(params)
    if p["case"] is not None:
        return case_plan(p).bytes_per_write(p["ranks"], p["ensemble"])
    per_rank = p["cells_per_rank"] * BYTES_PER_CELL[p["write_format"]] + BYTES_PER_RANK_WRITE
    return per_rank * p["ranks"] * p["ensemble"]


def kept_writes(writes: int, purge: int | None) -> int:
    """Time folders on the tier at once: with purgeWrite N the newest is written before
    the oldest is removed."""
    return writes if not purge else min(writes, purge + 1)


def planned_bytes(params: dict) -> int:
    """Bytes on the tier at the peak: the mesh and initial fields, and every kept time folder.

    The duct holds the undecomposed mesh and fields and the decomposed copy
    (about twice one write each, counting the mesh as a write). A case adds
    its own files, copied for every member, and may be meshed here (a write's
    worth more).
    """
    p = with_defaults(params)
    if p["case"] is None:
        writes = len(write_steps(p["steps"], write_interval(p)))
        return (kept_writes(writes, p["purge_write"]) + 4) * bytes_per_write(p)
    plan = case_plan(p)
    kept = kept_writes(plan.writes, plan.purge)
    return plan.size * p["ensemble"] + (kept + 3) * plan.bytes_per_write(p["ranks"], p["ensemble"])


def tasks(params: dict) -> int:
    """MPI tasks of the job: every rank of every member runs at once."""
    return int(params["ranks"]) * int(with_defaults(params)["ensemble"])


def runtime_s(params: dict) -> float:
    """A generous guess: 20 us per cell and iteration on one core, plus start-up."""
    p = with_defaults(params)
    runs = p["ensemble"] + alone_first(p)  # member 0 alone first, then the ensemble
    if p["case"] is None:
        return 30 + 20e-6 * p["cells_per_rank"] * p["steps"] * runs
    plan = case_plan(p)
    if plan.cells is None:  # its preparation makes the mesh: only a generous limit is known
        return SOLVER_TIMEOUT_S
    return 60 + 20e-6 * plan.cells * plan.estimated_steps * runs


# ------------------------------------------------------------------ the environment


def openfoam_environment(setting: dict | None, base: dict | None = None) -> tuple[dict, str]:
    """The environment OpenFOAM's tools run in, and how it was made (for the record).

    Without PWD: OpenFOAM takes it as a file name before it looks at the folder it
    runs in, and refuses it with a space ("/tmp/x y", where snakemake was started):
    blockMesh then stopped on a case whose own path was fine.
    """
    base = {k: v for k, v in (os.environ if base is None else base).items() if k != "PWD"}
    if not setting:
        base.setdefault("WM_PROJECT_DIR", DEBIAN_PROJECT_DIR)
        return base, f"Debian's (WM_PROJECT_DIR={base['WM_PROJECT_DIR']}, tools on PATH)"
    unknown = set(setting) - {"bashrc", "module"}
    if unknown or len(setting) != 1:
        raise PointFailed(
            f"openfoam setting {setting!r}: give exactly one of 'bashrc' (a path) or 'module'"
        )
    if "bashrc" in setting:
        bashrc = str(setting["bashrc"])
        if not os.path.isfile(bashrc):
            raise PointFailed(f"openfoam bashrc {bashrc} does not exist")
        script, how = f"source {shlex.quote(bashrc)} >/dev/null 2>&1", f"bashrc {bashrc}"
    else:
        modules = setting["module"]
        modules = [modules] if isinstance(modules, str) else list(modules)
        script = "module load " + " ".join(map(shlex.quote, modules)) + " >&2"
        how = f"module load {' '.join(modules)}"
    done = subprocess.run(
        ["bash", "-lc", f"{script} && env -0"], capture_output=True, env=base, timeout=120
    )
    if done.returncode != 0:
        last = (done.stderr.decode(errors="replace").strip().splitlines() or ["no output"])[-1]
        raise PointFailed(f"openfoam {how} failed: {last[-300:]}")
    env = dict(item.split("=", 1) for item in done.stdout.decode().split("\0") if "=" in item)
    env.pop("PWD", None)  # bash sets it again
    return env, how


def find_tools(env: dict, names: tuple[str, ...]) -> dict[str, str]:
    found = {name: shutil.which(name, path=env.get("PATH")) for name in names}
    missing = [name for name, path in found.items() if path is None]
    if missing:
        raise PointFailed(f"{', '.join(missing)} not found on PATH; install: {INSTALL_HINT}")
    return found
