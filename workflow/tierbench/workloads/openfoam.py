"""openfoam: the real OpenFOAM solver writing its results on a tier (document 001).

One job runs one point: ``ensemble`` independent simpleFoam runs (kOmegaSST,
so the fields written are those of document 001: U p k omega nut phi) of
``ranks`` ranks each, on the same tier, each in its own case folder of the run
folder (``member<i>/``). The case is rendered at run time from the templates
in ``openfoam_case/`` (``string.Template``): a straight 3D duct meshed by
blockMesh with ``cells_per_rank`` x ``ranks`` hexahedra, cut by decomposePar
(method simple, slabs along the duct: Debian's scotch and metis are stubs)
into ``ranks`` equal pieces. Every member's ``simpleFoam -parallel`` is
started through the launcher Snakemake gives the rule (``mpiexec`` here,
``srun --mpi=pmix`` under Slurm; :func:`cfd_launch.launch_command`), back to
back: the real solver has no start gate, so each member's start and end are
recorded (``job.extra["overlap"]``: the share of the run all members ran at
once). One rank runs serially (v1912 refuses ``-parallel`` on one processor,
so there is no decomposePar) and writes its time folders in the case itself,
the same 9 files and 3 folders per write; serial collated output is ordinary
files.

The run does exactly ``steps`` iterations: fvSolution has no residualControl.
``write_interval: none`` is the no-I/O baseline: controlDict's writeInterval
is then ``steps + 1`` time steps, so no iteration is a write time, and
simpleFoam writes nothing at endTime either (the run checks that no file was
created and fails the point otherwise). Collated output is unthreaded
(``-opt-switch maxThreadFileBufferSize=0``) unless ``thread_buffer`` says
otherwise. OpenFOAM neither fsyncs nor renames: its writes are buffered, they
land in the page cache.

Measured, per iteration: the CPU time from the log's ``ExecutionTime`` (v1912
counts it in 10 ms ticks) and the wall time as the gap between the arrivals of
consecutive ``ExecutionTime = ... ClockTime = ...`` lines, timestamped as the
solver's output reaches the job through a pipe (v1912 prints ClockTime in
whole seconds, too coarse for an iteration; it is kept as a check). The log is
saved as ``member<i>/log.simpleFoam``. The first iteration has no start in the
log (it includes reading the mesh) and is never measured; neither are the
first ``warmup_steps``. The cost of a write within the run, ``write_cost``
(and its standard error ``write_cost_se``), is the write steps' extra time
once the solver's own work is taken out: an iteration's time varies by more
than a write costs, with the iterations its linear solvers took (the log's
``No Iterations`` per solved field, which fall as the flow settles), so the
step times are fitted by least squares to a constant, those iteration counts
and whether the step wrote. Files, folders and bytes written are counted in the
write trees after the run against a listing taken before the solver started;
with ``purge_write`` the purged time folders are gone, so totals are the kept
folders' counts per write times the writes (``job.extra["members"][i]["tree"]``
says what was counted; ``job.extra["write_tree"]`` lists one write time's
files and folders with their sizes, per writer). blockMesh and decomposePar
times are recorded apart, they are not the measured loop. The figures derive
the I/O bandwidth as document 001 does, from the no-I/O baseline of the same
shape; the metric names are cfd_proxy's where the meaning is the same.

Getting OpenFOAM: the job spec may hold ``openfoam`` (from the hardware file),
one of::

    openfoam: {bashrc: /opt/OpenFOAM/OpenFOAM-v2312/etc/bashrc}  # sourced by bash
    openfoam: {module: openfoam/2312}       # `module load` in a login bash
    openfoam: {module: [gcc/12, openfoam/2312]}

The environment that results is captured once and used for every tool and
launch. Without the key: Debian's package (``apt-get install openfoam``),
binaries on PATH, ``WM_PROJECT_DIR=/usr/share/openfoam`` (its bashrc prints
errors, that variable is all it needs). The case's dictionaries are written
for v1912 (``constant/turbulenceProperties``); a release that wants
``momentumTransport`` (OpenFOAM.org 8 and later) is not supported.

A case of your own (``case``: a folder; :mod:`tierbench.foamcase` reads and
edits its dictionaries): each member gets a copy of it (timed,
``case_copy_time``), the controlDict entries the study overrides are
set and nothing else (``steps``: endTime = start + steps x deltaT at a fixed
time step; ``write_interval``: writeControl timeStep; ``purge_write``;
``write_format``; ``file_handler`` on the command line), ``prepare`` runs (the
case's own script or utilities, e.g. blockMesh then setFields; untimed by the
solver's clock, logged, ``prepare_time``), else blockMesh where the case has a
system/blockMeshDict and no constant/polyMesh; ``0.orig/`` becomes ``0/`` where the
case has no ``0/`` (as the tutorials' restore0Dir), and decomposePar cuts it for ``ranks``
with the case's own method, or ``simple`` where that fails here (Debian's
v1912 scotch, metis and kahip are stubs). The application the controlDict
names runs; a "step" is its time step (a transient solver's deltaT, a steady
one's iteration), timed from its ExecutionTime lines as the duct's. Which
steps wrote is worked out from the log as OpenFOAM's Time decides it
(writeControl timeStep, runTime, adjustableRunTime); a case writing by
cpuTime or clockTime must be given ``write_interval``. What it creates beside
its time folders (a function object's ``postProcessing/``) is counted in its
files, folders and bytes.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from decimal import Decimal
from pathlib import Path
from statistics import mean
from string import Template

from .. import foamcase, syscalls
from ..cluster import in_job_step
from ..errors import PointFailed, PointNotApplicable
from ..foam import block_shape
from ..job import Job
from ..records import metric
from ..schemas import schema_defaults
from . import Tool, Workload
from .cfd_launch import (
    DEFAULT_LAUNCHER,
    OPEN_MPI_LAUNCHERS,
    SESSION_VARS,
    alone_first,
    check_write_interval,
    copy_output,
    error_of_mean,
    launch_command,
    launch_env,
    member_nodes,
    page_cache_rule,
    spans_nodes,
    under_slurm,
)
from .openfoam_log import (
    EXECUTION_LINE,
    FATAL,
    build_of,
    check_log,
    check_stamps,
    fatal_error,
    last_lines,
    log_per_step,
    step_statistics,
    writing_steps,
)
from .openfoam_tree import (
    per_rank_layout,
    tree,
    write_tree,
)
from .openfoam_usercase import (
    BYTES_PER_RANK_WRITE,
    OVERRIDABLE,
    OWN,
    CasePlan,
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
INSTALL_HINT = "apt-get install openfoam (Debian/Ubuntu), or 'openfoam' in the hardware file"
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


def write_interval(params: dict) -> int | None:
    """Iterations between writes, or None for the no-I/O baseline."""
    value = params["write_interval"]
    return None if value == "none" else int(value)


def write_steps(params: dict) -> list[int]:
    """The iterations that write (controlDict: writeControl timeStep)."""
    interval = write_interval(params)
    return [] if interval is None else list(range(interval, params["steps"] + 1, interval))


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
        return (kept_writes(len(write_steps(p)), p["purge_write"]) + 4) * bytes_per_write(p)
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


# ------------------------------------------------------------------ the run


@dataclass
class Member:
    """One simulation of the ensemble: its case, its launch and when its lines arrived."""

    index: int
    case: Path
    command: list[str] | None = None
    process: subprocess.Popen | None = None
    reader: threading.Thread | None = None
    session: str | None = None
    started: float = 0.0
    ended: float | None = None
    stamps: list[float] = field(default_factory=list)


def tee(stream, log_path: Path, stamps: list[float], origin: float) -> None:
    """Copy the solver's output into its log, noting when each ExecutionTime line arrives."""

    def note(line: bytes) -> None:
        if EXECUTION_LINE.search(line):
            stamps.append(time.perf_counter() - origin)

    copy_output(stream, log_path, note)


def run_tool(command: list[str], case: Path, name: str, env: dict) -> float:
    """Run a preprocessing tool on the case, its output in log.<name>; its wall time."""
    start = time.perf_counter()
    with open(case / f"log.{name}", "wb") as log:
        try:
            done = subprocess.run(
                command, cwd=case, stdout=log, stderr=subprocess.STDOUT, env=env, timeout=3600
            )
        except FileNotFoundError:
            raise PointFailed(f"{name}: {command[0]} not found (in {case})") from None
        except subprocess.TimeoutExpired:
            raise PointFailed(f"{name} ran longer than 3600 s") from None
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        text = (case / f"log.{name}").read_text(errors="replace")
        reason = fatal_error(text)
        fatal = FATAL.search(text)  # what it printed before its error, not the error's trailer
        shown = text[: text.rfind("\n", 0, fatal.start()) + 1] if fatal else text
        lines = f"its last lines: {last_lines(shown)}"
        raise PointFailed(
            f"{name} exited with {done.returncode}: {f'{reason}; {lines}' if reason else lines}"
        )
    return elapsed


def handler_args(p: dict) -> list[str]:
    """The file handler on the command line; collated writes unthreaded unless asked.

    The duct's uncollated runs give none (OpenFOAM's default); a case's give
    the one the study asks for, since the case may set another, and none when
    the study keeps the case's own (``case``).
    """
    if p["file_handler"] == OWN:
        return []
    if p["file_handler"] != "collated":
        return ["-fileHandler", "uncollated"] if p["case"] is not None else []
    return [
        "-fileHandler", "collated",
        "-opt-switch", f"maxThreadFileBufferSize={int(p['thread_buffer'])}",
    ]  # fmt: skip


def parallel(p: dict) -> bool:
    """More than one rank: decomposed and run with -parallel (one rank runs serially:
    v1912 refuses ``-parallel`` on 1 processor)."""
    return p["ranks"] > 1


def prepare(member: Member, p: dict, env: dict) -> dict:
    """Render, mesh and decompose one member's case; the preprocessing times."""
    write_case(member.case, p)
    times = {"blockMesh": run_tool(["blockMesh"], member.case, "blockMesh", env)}
    if parallel(p):
        times["decomposePar"] = run_tool(
            ["decomposePar", "-force", *handler_args(p)], member.case, "decomposePar", env
        )
    return times


def prepare_case(job: Job, member: Member, p: dict, plan: CasePlan, env: dict) -> dict:
    """Copy the user's case into the member's folder, set what the study overrides, prepare
    it (``prepare``, else blockMesh where it has no mesh), make its ``0/`` from ``0.orig/``
    where it has none, decompose it; the preprocessing times (the copy's too). Each
    command's output is in the copy's ``log.<name>``; one that fails fails the point with
    its last lines."""
    began = time.perf_counter()
    shutil.copytree(plan.folder, member.case)
    times = {"copy": time.perf_counter() - began}
    if plan.entries:
        foamcase.edit_control(member.case, plan.entries)
    ready = run_functions_env(env, job.folder.path / PROJECT_VIEW) if p["prepare"] else env
    steps = {name: run_tool(list(argv), member.case, name, ready) for name, argv in plan.prepare}
    original = member.case / "0.orig"
    if not (member.case / "0").exists() and original.is_dir():
        # as the tutorials' restore0Dir, after the meshing (createBaffles must not find a 0/)
        shutil.copytree(original, member.case / "0")
    if p["prepare"] is None:
        times.update(steps)  # blockMesh where the case had no mesh: blockmesh_time
    elif steps:
        times["prepare"] = sum(steps.values())
        times["prepare_steps"] = steps
    if parallel(p):
        times["decomposePar"] = decompose_case(job, member.case, p, env)
    return times


def run_functions_env(env: dict, view: Path) -> dict:
    """The environment a study's ``prepare`` runs in: OpenFOAM's, and where its
    installation has no ``bin/tools/RunFunctions`` (Debian's), WM_PROJECT_DIR naming
    ``view``: the installation's folders linked, and tierbench's stand-in for that file
    (``openfoam_tools/RunFunctions``), which the tutorials' Allrun scripts source. Made
    once per job, in its run folder beside the members' cases."""
    project = Path(env.get("WM_PROJECT_DIR", DEBIAN_PROJECT_DIR))
    if (project / RUN_FUNCTIONS).is_file():
        return env
    if not view.is_dir():
        tools = view / RUN_FUNCTIONS.parent
        tools.mkdir(parents=True)
        for here, made in (
            (project, view),
            (project / "bin", view / "bin"),
            (project / "bin/tools", tools),
        ):
            for entry in sorted(here.iterdir()) if here.is_dir() else []:
                if not (made / entry.name).exists():
                    (made / entry.name).symlink_to(entry)
        shutil.copyfile(STAND_IN, view / RUN_FUNCTIONS)
    return {**env, "WM_PROJECT_DIR": str(view)}


def decompose_case(job: Job, case: Path, p: dict, env: dict) -> float:
    """decomposePar with the case's own method for ``ranks``; where that fails here (Debian's
    v1912 ships scotch, metis and kahip as stubs that stop with "dummy ... stub library"),
    once more with ``simple``, slabs along x. The method used is in ``job.extra``."""
    command = ["decomposePar", "-force", *handler_args(p)]
    method = foamcase.decompose_for(case, p["ranks"])
    try:
        took = run_tool(command, case, "decomposePar", env)
        job.extra["decomposition"] = {"method": method}
    except PointFailed as error:
        if method == "simple":
            raise
        foamcase.decompose_for(case, p["ranks"], "simple")
        took = run_tool(command, case, "decomposePar", env)
        job.extra["decomposition"] = {
            "method": "simple",
            "instead_of": method,
            "because": str(error),
        }
    return took


def on_member_nodes(job: Job, member: Member, argv: list[str]) -> list[str]:
    """What ``argv`` printed on each node of a member's (one line each), run there by
    ``srun``; PointFailed with its last line where it failed on any of them."""
    each = member_nodes(job)
    command = ["srun", "-N", str(each), f"--relative={member.index * each}"]
    command += ["--ntasks-per-node=1", *(["--overlap"] if in_job_step() else []), *argv]
    env, _ = launch_env(job.spec.get("launcher") or DEFAULT_LAUNCHER, local=False)
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=3600)
    if done.returncode != 0:
        raise PointFailed(
            f"on the nodes of member {member.index}: {shlex.join(argv[:2])} exited with "
            f"{done.returncode}: {last_lines(done.stderr + done.stdout, 1)}"
        )
    return done.stdout.splitlines()


def on_node_local_tier_across_nodes(job: Job, member: Member) -> bool:
    """Does a member's solver run on nodes that do not see the case it was prepared in?
    (On a node-local tier, its ranks span nodes or it runs on nodes other than the job's
    own; a member of one node that is the job's first node needs no copy.)"""
    if not spans_nodes(job) or job.spec.get("tier_shared"):
        return False
    return member_nodes(job) > 1 or member.index > 0


def stage_to_member_nodes(job: Job, member: Member) -> float:
    """The prepared case copied to the same path on every node the member runs on, as
    document 001 staged its cases to node-local storage: each rank reads its own
    ``processor<N>`` there. Untimed; through an archive in the job's control folder, which
    every node sees. Its seconds."""
    began = time.perf_counter()
    archive = Path(job.spec["control_dir"]) / f"{member.case.name}.tar"
    archive.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-cf", str(archive), "-C", str(member.case), "."], check=True)
    unpack = 'mkdir -p "$1" && tar -xf "$2" -C "$1"'
    on_member_nodes(job, member, ["sh", "-c", unpack, "sh", str(member.case), str(archive)])
    archive.unlink()
    job.extra.setdefault("staged_to_nodes", []).append(member.case.name)
    return time.perf_counter() - began


def member_tree(job: Job, member: Member, everything: bool) -> dict[str, int]:
    """:func:`tree` of the member's case over all of its nodes (each writes its ranks')."""
    if not on_node_local_tier_across_nodes(job, member):
        return tree(member.case, everything)
    code = (
        "import json, sys; from pathlib import Path; "
        "from tierbench.workloads.openfoam import tree; "
        "print(json.dumps(tree(Path(sys.argv[1]), sys.argv[2] == '1')))"
    )
    found: dict[str, int] = {}
    argv = [sys.executable, "-c", code, str(member.case), "1" if everything else "0"]
    for line in on_member_nodes(job, member, argv):
        found.update(json.loads(line))
    return found


def remove_from_member_nodes(job: Job, member: Member) -> None:
    """The run folder removed from the member's nodes other than the job's own, where the
    case was copied to (on the job's own node it goes with the job, after its log is kept)."""
    if not on_node_local_tier_across_nodes(job, member):
        return
    remove = '[ "$(hostname)" = "$2" ] || rm -rf "$1"'
    folder, here = str(job.folder.path), socket.gethostname()
    try:
        on_member_nodes(job, member, ["sh", "-c", remove, "sh", folder, here])
    except (PointFailed, subprocess.SubprocessError) as error:
        job.log(f"could not remove member {member.index}'s copies on its nodes: {error}")


@dataclass(frozen=True)
class Solver:
    """What the members run and how their logs are read: the duct's simpleFoam, or the
    application a case's controlDict names."""

    name: str
    #: time steps the run must do; None: as many as it takes (a case adjusting its time step)
    steps: int | None
    #: which steps write (:func:`writing_steps`)
    write: tuple
    start: Decimal
    #: the log's time names are the iteration numbers (the duct)
    numbered: bool
    timeout_s: float
    #: the run writes elsewhere than its time folders too (a case's function objects)
    everything: bool


def duct_solver(p: dict) -> Solver:
    interval = write_interval(p)
    write = ("none", None) if interval is None else ("timeStep", Decimal(interval))
    return Solver("simpleFoam", p["steps"], write, Decimal(0), True, SOLVER_TIMEOUT_S, False)


def case_solver(p: dict, plan: CasePlan) -> Solver:
    timeout = max(SOLVER_TIMEOUT_S, 10 * runtime_s(p))
    start = plan.start if plan.start is not None else Decimal(0)
    return Solver(plan.application, plan.steps, plan.write, start, False, timeout, True)


def solver_command(p: dict, solver: str = "simpleFoam") -> list[str]:
    return [solver, *(["-parallel"] if parallel(p) else []), *handler_args(p)]


def start(
    job: Job, launcher: str, members: list[Member], p: dict, env: dict, solver: Solver
) -> None:
    """Start every member's solver back to back, each with its own MPI session folder.

    The output comes through a pipe so that each iteration's end is timestamped
    as it arrives; OpenFOAM flushes its log at every line.
    """
    local = not under_slurm()
    _, added = launch_env(launcher, local)
    added.pop("PYTHONPATH", None)  # for cfd_proxy's Python ranks; the solver needs none
    launch = {**env, **added}
    own_session = os.path.basename(shlex.split(launcher)[0]) in OPEN_MPI_LAUNCHERS
    job.extra.update({"launcher": launcher, "launcher_env": added, "local": local})
    origin = time.perf_counter()
    for member in members:
        each = member_nodes(job)
        member.command = launch_command(
            launcher, p["ranks"], p["ensemble"], local, each, member.index
        )
        member.command += syscalls.rank_prefix(job) + solver_command(p, solver.name)
        member.session = tempfile.mkdtemp(prefix="tierbench-mpi-") if own_session else None
        member_env = {**launch, **dict.fromkeys(SESSION_VARS, member.session)}
        member.started = time.perf_counter() - origin
        try:
            member.process = subprocess.Popen(
                member.command,
                cwd=member.case,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=member_env if member.session else launch,
            )
        except FileNotFoundError:
            raise PointFailed(f"the mpi launcher {member.command[0]!r} is not installed") from None
        log = member.case / f"log.{solver.name}"
        member.reader = threading.Thread(
            target=tee, args=(member.process.stdout, log, member.stamps, origin), daemon=True
        )
        member.reader.start()
    job.extra["commands"] = [shlex.join(m.command) for m in members]
    job.log(f"{len(members)} launch(es) of {solver.name} started back to back")
    deadline = time.monotonic() + solver.timeout_s
    for member in members:
        try:
            member.process.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            raise PointFailed(f"{solver.name} ran longer than {solver.timeout_s:.0f} s") from None
        member.ended = time.perf_counter() - origin
        member.reader.join()


def stop(members: list[Member]) -> None:
    """End what still runs and remove the MPI session folders (idempotent)."""
    for member in members:
        if member.process is not None and member.process.poll() is None:
            member.process.terminate()
            try:
                member.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                member.process.kill()
                member.process.wait()
        if member.reader is not None:
            member.reader.join(timeout=10)
        if member.session:
            shutil.rmtree(member.session, ignore_errors=True)


#: the nodes of a parallel run in the solver's log header: ``Hosts :`` then ``(node ranks)``
HOSTS = re.compile(r"^Hosts\s*:\s*\n\(\s*\n(.*?)\n\)", re.MULTILINE | re.DOTALL)
#: a serial run's one node
HOST = re.compile(r"^Host\s*:\s*\"?([^\s\"]+)", re.MULTILINE)


def rank_hosts(text: str) -> list[str]:
    """The nodes the solver's ranks ran on, as its log header names them."""
    found = HOSTS.search(text)
    if found:
        rows = (line.strip().strip("()").split() for line in found.group(1).splitlines())
        return sorted({row[0] for row in rows if row})
    host = HOST.search(text)
    return [host.group(1)] if host else []


def member_result(job: Job, member: Member, p: dict, before: dict, solver: Solver) -> dict:
    """One member's statistics and what it wrote; PointFailed ending with the solver's
    last lines where it failed."""
    text = (member.case / f"log.{solver.name}").read_text(errors="replace")
    code = member.process.returncode
    try:
        iterations = check_log(text, solver.steps, solver.name, solver.numbered)
        if code != 0:
            raise PointFailed(f"{solver.name} exited with {code}")
    except PointFailed as error:
        job.log(f"member {member.index} log (end):\n{text[-2000:]}")
        raise PointFailed(
            f"member {member.index}: {error}; its last lines: {last_lines(text)}"
        ) from None
    check_stamps(iterations, member.stamps)
    job.extra["openfoam_build"] = build_of(text)
    writes = writing_steps(solver.write, iterations, solver.start)
    names = [iterations[step - 1].time for step in writes]
    found = write_tree(before, member_tree(job, member, solver.everything), names)
    return {
        "steps": step_statistics(iterations, member.stamps, p["warmup_steps"], writes),
        "tree": found,
        "writes": len(writes),
        "time_steps": len(iterations),
        "log_per_step": log_per_step(text),
        "started_s": round(member.started, 4),
        "ended_s": round(member.ended, 4),
        "hosts": rank_hosts(text),
    }


def check_writes(results: list[dict], purge: int | None, strict: bool = True) -> None:
    """The files the run must have made: none without writes, every write time's otherwise.

    ``purge`` None: not known (a case's own purgeWrite, computed as it is read):
    the kept time folders are not checked. ``strict`` (the duct): every write
    time holds the same tree.
    """
    for i, r in enumerate(results):
        tree_ = r["tree"]
        written = tree_["totals"]["files"] + tree_["totals"]["dirs"]
        if not r["writes"] and strict and written:
            raise PointFailed(
                f"member {i} wrote {tree_['totals']['files']:.0f} files in a run without writes"
            )
        kept_expected = min(r["writes"], purge) if purge else r["writes"]
        if purge is not None and len(tree_["kept_times"]) != kept_expected:
            raise PointFailed(
                f"member {i} kept time folders {tree_['kept_times']}, expected {kept_expected}"
            )
        counts = {(t["files"], t["dirs"]) for t in tree_["per_kept_time"].values()}
        if strict and len(counts) > 1:
            raise PointFailed(f"member {i} wrote different trees at different times: {counts}")


def ensemble_metrics(results: list[dict]) -> list[dict]:
    """Ensemble means of the members' times; totals of bytes, files and folders.

    Names and meanings are those of cfd_proxy where they agree. Per write:
    per write time of one run (bytes: of all members together; files and
    folders: of one writer, a rank's processor folder or the collated one).
    """

    def avg(key: str) -> float | None:
        values = [r["steps"][key] for r in results if key in r["steps"]]
        if key.endswith("_se") and values:  # of the members' mean
            return error_of_mean(values)
        return sum(values) / len(values) if values else None

    found = [
        metric(name, avg(name), "s")
        for name in (
            "time_per_step", "time_per_step_median", "cpu_time_per_step",
            "cpu_time_per_step_median", "run_time", "time_per_step_write",
            "time_per_step_nowrite", "write_cost", "write_cost_se",
        )
        if avg(name) is not None
    ]  # fmt: skip
    found.append(
        metric("time_per_step_max_member", max(r["steps"]["time_per_step"] for r in results), "s")
    )
    totals = {k: sum(r["tree"]["totals"][k] for r in results) for k in ("files", "dirs", "bytes")}
    found += [
        metric("bytes_written", totals["bytes"], "B"),
        metric("files_created", totals["files"], "files"),
        metric("dirs_created", totals["dirs"], "dirs"),
    ]
    writes = sum(r["writes"] for r in results)
    if writes:
        writers = len(per_rank_layout(results[0]["tree"]["sample"], False)["writers"])
        per = writes * max(writers, 1)
        found += [
            metric("bytes_per_write", totals["bytes"] * len(results) / writes, "B"),
            metric("files_per_write", totals["files"] / per, "files"),
            metric("dirs_per_write", totals["dirs"] / per, "dirs"),
        ]
    return found


def overlap(results: list[dict]) -> float:
    """Share of the longest member's run during which every member was running."""
    start = max(r["started_s"] for r in results)
    end = min(r["ended_s"] for r in results)
    longest = max(r["ended_s"] - r["started_s"] for r in results)
    return max(0.0, end - start) / longest if longest > 0 else 0.0


def case_path_problem(path: str | os.PathLike) -> str | None:
    """Why OpenFOAM cannot run a case in ``path``, or None.

    Its fileName refuses whitespace and quotes, the working folder's too: blockMesh
    in ``/tmp/a dir/case`` stops with only "For debug level (= 2) > 1 this is
    considered fatal".
    """
    bad = sorted({c for c in str(path) if c.isspace() or c in "'\""})
    if not bad:
        return None
    return f"OpenFOAM refuses a case path with {' or '.join(map(repr, bad))}, as in {path}"


def run(job: Job) -> list[dict]:
    if job.folder is None:
        raise PointNotApplicable("openfoam writes files; the void tier has no folder")
    problem = case_path_problem(job.folder.path)
    if problem:
        raise PointNotApplicable(f"{problem}: give tier {job.spec['tier']} a path without it")
    p = with_defaults(job.params)
    plan = None
    if p["case"] is not None:
        try:
            plan = case_plan(p)
        except ValueError as error:  # checked when planned; the case changed since
            raise PointFailed(str(error)) from None
    solver = case_solver(p, plan) if plan else duct_solver(p)
    job.folder.ensure_space(planned_bytes(p), job.max_bytes)
    launcher = job.spec.get("launcher") or DEFAULT_LAUNCHER
    env, how = openfoam_environment(job.spec.get("openfoam"))
    job.extra["openfoam_env"] = how
    tools = ("blockMesh", "decomposePar", solver.name, *prepare_tools(plan))
    job.extra["openfoam_tools"] = find_tools(env, tools)
    job.log(f"{p['ensemble']} x {solver.name} on {p['ranks']} ranks, {describe(p, plan)}; "
            f"OpenFOAM: {how}")  # fmt: skip
    if plan is None:
        job.extra["mesh"] = mesh(p)
    else:
        job.extra["case"] = case_record(plan)

    def prepared(member: Member) -> dict:
        if plan is None:
            made = prepare(member, p, env)
        else:
            made = prepare_case(job, member, p, plan, env)
            prepared_cells(job, member.case, p, plan)
        if on_node_local_tier_across_nodes(job, member):
            made["stage_to_nodes"] = stage_to_member_nodes(job, member)
        return made

    alone = None
    if alone_first(p):
        alone = run_alone(job, launcher, prepared, p, env, solver, plan)
    members = [Member(i, job.folder.path / f"member{i}") for i in range(p["ensemble"])]
    preprocessing = [prepared(m) for m in members]
    job.extra["preprocessing_s"] = preprocessing
    try:
        before = [member_tree(job, m, solver.everything) for m in members]
        start(job, launcher, members, p, env, solver)
        results = [
            member_result(job, m, p, b, solver) for m, b in zip(members, before, strict=True)
        ]
    finally:
        stop(members)
        for member in members:
            remove_from_member_nodes(job, member)
    check_writes(results, plan.purge if plan else p["purge_write"], strict=plan is None)
    job.extra["members"] = results
    job.extra["rank_hosts"] = sorted({host for r in results for host in r["hosts"]})
    sample = results[0]["tree"]["sample"]
    collated = any(path.startswith("processors") for path in sample)
    job.extra["write_tree"] = per_rank_layout(sample, collated)
    job.extra["overlap"] = overlap(results)
    metrics = ensemble_metrics(results) + preprocessing_metrics(preprocessing)
    if alone is not None:
        job.extra["alone"] = alone
        metrics.append(metric("time_per_step_alone", alone["steps"]["time_per_step"], "s"))
    job.log(
        "per step "
        + ", ".join(f"{m['metric']}={m['value']:.4g}" for m in metrics if m["unit"] == "s")
    )
    return metrics


def run_alone(
    job: Job, launcher: str, prepared, p: dict, env: dict, solver: Solver, plan: CasePlan | None
) -> dict:
    """Member 0 by itself, launched as in the ensemble, just before it: its result.

    The single run an ensemble's time per step is set against, in the same job,
    so the drift of a shared machine between jobs cancels in the ratio. Its case
    (``prepared`` makes it as a member's) is removed before the members' are made,
    so the tier never holds more than the ensemble's.
    """
    alone = Member(0, job.folder.path / "alone0")
    preprocessing = prepared(alone)
    try:
        before = member_tree(job, alone, solver.everything)
        start(job, launcher, [alone], p, env, solver)
        result = member_result(job, alone, p, before, solver)
    finally:
        stop([alone])
        remove_from_member_nodes(job, alone)
    check_writes([result], plan.purge if plan else p["purge_write"], strict=plan is None)
    shutil.copy2(alone.case / f"log.{solver.name}", job.folder.path / "alone0.log")
    shutil.rmtree(alone.case, ignore_errors=True)
    job.log(f"member 0 alone: {result['steps']['time_per_step']:.4g} s per step")
    return {**result, "preprocessing_s": preprocessing}


def prepare_tools(plan: CasePlan | None) -> tuple[str, ...]:
    """The commands a case's preparation runs from PATH (checked before any runs)."""
    if plan is None:
        return ()
    return tuple(dict.fromkeys(argv[0] for _, argv in plan.prepare if "/" not in argv[0]))


def prepared_cells(job: Job, case: Path, p: dict, plan: CasePlan) -> None:
    """The cells of the prepared mesh, in the job's record (the first member's); where the
    plan could not know them, the tier's space and max_bytes are checked again with them."""
    if "cells_prepared" in job.extra["case"]:
        return
    owner = foamcase.existing(case, f"{foamcase.POLY_MESH}/owner")
    if owner is None:
        raise PointFailed(
            f"the case has no mesh (constant/polyMesh) once prepared: its prepare "
            f"{p['prepare']!r} must make one"
        )
    try:
        cells = foamcase.mesh_cells(owner)
    except foamcase.CaseError as error:
        raise PointFailed(str(error)) from None
    job.extra["case"]["cells_prepared"] = cells
    if plan.cells is None and cells:
        meshed = replace(plan, cells=cells)
        kept = kept_writes(plan.writes, plan.purge)
        writes = (kept + 3) * meshed.bytes_per_write(p["ranks"], p["ensemble"])
        job.folder.ensure_space(plan.size * p["ensemble"] + writes, job.max_bytes)


def describe(p: dict, plan: CasePlan | None) -> str:
    """The point in one line of the job's log."""
    if plan is None:
        layout = mesh(p)
        return (
            f"{p['cells_per_rank']} cells per rank (duct {layout['nx']} x {layout['ny']} x "
            f"{layout['nz']}), {p['steps']} iterations, write interval {p['write_interval']}, "
            f"{p['file_handler']}, {p['write_format']}, purgeWrite {p['purge_write']}"
        )
    steps = plan.steps if plan.steps is not None else "the case's own"
    cells = f"{plan.cells} cells" if plan.cells is not None else "cells as prepared"
    prepare = "; ".join(shlex.join(argv) for _, argv in plan.prepare) or "nothing"
    return (
        f"case {plan.folder} ({cells}), prepared by {prepare}, {steps} time steps, "
        f"writes {plan.write[0]} "
        f"{plan.write[1] if plan.write[1] is not None else ''}, {plan.write_format}, "
        f"purgeWrite {plan.purge}; controlDict set: {plan.entries or 'nothing'}"
    )


def case_record(plan: CasePlan) -> dict:
    """What the job's record says of the case it ran."""
    return {
        "folder": str(plan.folder.resolve()),
        "application": plan.application,
        "cells": plan.cells,
        "steps": plan.steps,
        "write": [plan.write[0], None if plan.write[1] is None else str(plan.write[1])],
        "controlDict_set": {
            k: v if not isinstance(v, Decimal) else str(v) for k, v in plan.entries.items()
        },
        "size_bytes": plan.size,
        "prepare": [shlex.join(argv) for _, argv in plan.prepare],
    }


def preprocessing_metrics(preprocessing: list[dict]) -> list[dict]:
    """The times of what ran before the solver, each member's mean: the case's copy onto
    the tier, blockMesh or the study's ``prepare`` (its commands together), decomposePar
    (a step that did not run has no metric)."""
    names = {"copy": "case_copy_time", "blockMesh": "blockmesh_time"}
    names.update(prepare="prepare_time", decomposePar="decompose_time")
    return [
        metric(name, mean(t[step] for t in preprocessing), "s")
        for step, name in names.items()
        if step in preprocessing[0]
    ]


#: where Debian's openfoam-examples installs the tutorial cases
TUTORIALS = "/usr/share/doc/openfoam-examples/examples"


WORKLOAD = Workload(
    name="openfoam",
    summary=(
        "the real OpenFOAM (simpleFoam, kOmegaSST) on a generated duct, or a case of your own "
        "(case): ranks x steps, writes"
    ),
    run=run,
    family="cfd",
    env="openfoam",
    tools=(
        Tool("simpleFoam", "openfoam", version=None),
        Tool("mpiexec", "openmpi-bin"),
    ),
    packaged_paths=((TUTORIALS, "openfoam-examples"),),
    list_params=("prepare",),
    headline=("time_per_step",),
    mpi=True,
    check_params=check_params,
    planned_bytes=planned_bytes,
    creates_files=True,
    tasks=tasks,
    runtime_s=runtime_s,
    page_cache=page_cache_rule("openfoam", planned_bytes),
)
