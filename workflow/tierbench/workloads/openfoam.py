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
``srun --mpi=pmix`` under Slurm; :func:`cfd_proxy.launch_command`), back to
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
"""

from __future__ import annotations

import math
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from statistics import mean, median
from string import Template

import numpy as np

from ..errors import PointFailed, PointNotApplicable
from ..foam import block_shape
from ..matrix import schema_defaults
from ..records import metric
from ..runner import Job
from . import Tool, Workload
from .cfd_proxy import (
    DEFAULT_LAUNCHER,
    OPEN_MPI_LAUNCHERS,
    SESSION_VARS,
    check_write_interval,
    error_of_mean,
    launch_command,
    launch_env,
    under_slurm,
)

CASE_TEMPLATE = Path(__file__).resolve().parent / "openfoam_case"
DEBIAN_PROJECT_DIR = "/usr/share/openfoam"
#: the writer name of a serial (1-rank) run's time folders, in the case itself
SERIAL = "case"
INSTALL_HINT = "apt-get install openfoam (Debian/Ubuntu), or 'openfoam' in the hardware file"
DEFAULTS = schema_defaults("openfoam")
#: a block of one rank's cells may be at most this many times longer than wide
MAX_ASPECT = 16
#: the duct's larger cross-section side (m), inflow velocity (m/s), viscosity (m2/s):
#: Re = 1e4; k and omega from 5 % turbulence intensity and a 7 mm mixing length
DUCT_SIDE = 0.1
FLOW = {"velocity": 1, "nu": 1e-05, "k": 0.00375, "omega": 16}
SOLVER_TIMEOUT_S = 3600.0
#: ClockTime is whole seconds: the arrivals may differ from it by up to ~1 s, and a bit
STAMP_TOLERANCE_S = 1.5
ITERATION = re.compile(r"^Time = (\S+)\s*$")
TIMES = re.compile(r"^ExecutionTime = (\S+) s\s+ClockTime = (\S+) s")
FATAL = re.compile(r"FOAM FATAL (?:IO )?ERROR")
SOLVE = re.compile(r"^\w+:\s+Solving for (\w+),.*No Iterations (\d+)")
EXECUTION_LINE = re.compile(rb"^(?:\[\d+\]\s*)*ExecutionTime = ")
#: a crash on a floating point exception (not the banner's "trapFpe: ... enabled" line)
SIGFPE = re.compile(
    r"sigFpe::sigHandler|signal 8 \(Floating point exception\)|^Floating point exception \(core",
    re.MULTILINE,
)
RANK_PREFIX = re.compile(r"^(?:\[\d+\]\s*)+")


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
    """What the schema cannot say: the run must write, measure, and make a proper block."""
    p = with_defaults(params)
    check_write_interval(p, "iteration")
    first = max(2, p["warmup_steps"] + 1)
    if first > p["steps"]:
        raise ValueError(
            f"steps {p['steps']} leaves no measured iteration: the first iteration (it reads "
            f"the mesh) and warmup_steps {p['warmup_steps']} are not measured"
        )
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
#: a rank's boundary values, headers and uniform/ files, generously (per rank per write)
BYTES_PER_RANK_WRITE = 64 * 1024


def bytes_per_write(params: dict) -> int:
    """An estimate of the bytes all ranks of all members write at one write time."""
    p = with_defaults(params)
    per_rank = p["cells_per_rank"] * BYTES_PER_CELL[p["write_format"]] + BYTES_PER_RANK_WRITE
    return per_rank * p["ranks"] * p["ensemble"]


def planned_bytes(params: dict) -> int:
    """Bytes on the tier at the peak: the mesh and initial fields, and every kept time folder.

    The case holds the undecomposed mesh and fields and the decomposed copy
    (about twice one write each, counting the mesh as a write); with purgeWrite
    N the newest time is written before the oldest is removed.
    """
    p = with_defaults(params)
    writes = len(write_steps(p))
    kept = writes if p["purge_write"] == 0 else min(writes, p["purge_write"] + 1)
    return (kept + 4) * bytes_per_write(p)


def tasks(params: dict) -> int:
    """MPI tasks of the job: every rank of every member runs at once."""
    return int(params["ranks"]) * int(with_defaults(params)["ensemble"])


def runtime_s(params: dict) -> float:
    """A generous guess: 20 us per cell and iteration on one core, plus start-up."""
    p = with_defaults(params)
    return 30 + 20e-6 * p["cells_per_rank"] * p["steps"] * p["ensemble"]


# ------------------------------------------------------------------ the log


@dataclass(frozen=True)
class Iteration:
    """One iteration's totals as the log prints them after it (seconds since the start)."""

    time: str
    cpu: float
    clock: float
    #: iterations of each linear solve in the iteration (field -> iterations)
    solves: dict = field(default_factory=dict)


def _strip_ranks(line: str) -> str:
    return RANK_PREFIX.sub("", line).strip()


def fatal_error(text: str) -> str | None:
    """The first FOAM FATAL (IO) ERROR's reason in one line, or None when there is none."""
    lines = [_strip_ranks(line) for line in text.splitlines()]
    for i, line in enumerate(lines):
        found = FATAL.search(line)
        if not found:
            continue
        words = []
        for follow in lines[i + 1 :]:
            if not follow:
                if words:
                    break
                continue
            if follow.startswith(("From ", "in file", "file:", "FOAM exiting", "FOAM parallel")):
                break
            words.append(follow)
        return f"{found.group(0)}: {' '.join(words)[:300] or 'no reason given'}"
    if SIGFPE.search(text):
        return "the solver stopped on a floating point exception (sigFpe)"
    return None


def build_of(text: str) -> str | None:
    """The solver's build line (``OPENFOAM=1912 patch=200626``), for the record."""
    found = re.search(r"^Build\s*:\s*(.+?)\s*$", text, re.MULTILINE)
    return found.group(1) if found else None


def parse_iterations(text: str) -> list[Iteration]:
    """Every complete iteration of a simpleFoam log: its time name and its totals."""
    found, current, solves = [], None, {}
    for raw in text.splitlines():
        line = _strip_ranks(raw)
        started = ITERATION.match(line)
        if started:
            current, solves = started.group(1), {}
            continue
        solve = SOLVE.match(line)
        if solve and current is not None:
            name = solve.group(1)
            solves[name] = solves.get(name, 0) + int(solve.group(2))
            continue
        totals = TIMES.match(line)
        if totals and current is not None:
            cpu, clock = float(totals.group(1)), float(totals.group(2))
            found.append(Iteration(current, cpu, clock, solves))
            current = None
    return found


def check_log(text: str, steps: int) -> list[Iteration]:
    """The iterations of a finished run; PointFailed when it failed or was cut short."""
    reason = fatal_error(text)
    if reason:
        raise PointFailed(f"simpleFoam: {reason}")
    iterations = parse_iterations(text)
    if len(iterations) != steps or not re.search(r"^End\s*$", text, re.MULTILINE):
        done = f"after iteration {iterations[-1].time}" if iterations else "before iteration 1"
        raise PointFailed(
            f"simpleFoam's log ends {done} of {steps}, without 'End' (killed or crashed)"
        )
    names = [it.time for it in iterations]
    if names != [str(i) for i in range(1, steps + 1)]:
        raise PointFailed(f"simpleFoam ran iterations {names[0]}..{names[-1]}, not 1..{steps}")
    return iterations


def step_times(iterations: list[Iteration], stamps: list[float]) -> list[tuple[int, float, float]]:
    """(iteration, wall s, CPU s) of every iteration after the first.

    The wall time is the gap between the arrivals of two consecutive
    ``ExecutionTime`` lines (``stamps``): v1912 prints ClockTime in whole
    seconds. The CPU time is the gap between their ExecutionTimes (10 ms ticks).
    """
    if len(stamps) != len(iterations):
        raise PointFailed(
            f"{len(stamps)} timestamps for {len(iterations)} iterations of simpleFoam's log"
        )
    return [
        (i + 1, stamps[i] - stamps[i - 1], iterations[i].cpu - iterations[i - 1].cpu)
        for i in range(1, len(iterations))
    ]


def check_stamps(iterations: list[Iteration], stamps: list[float]) -> None:
    """The arrival times must agree with the solver's own (whole-second) ClockTime.

    A launcher that holds the output back (buffering it, or sending it at the
    end) would make every iteration look instantaneous: a failed point, not a number.
    """
    if len(stamps) != len(iterations) or len(iterations) < 2:
        return
    solver = iterations[-1].clock - iterations[0].clock
    seen = stamps[-1] - stamps[0]
    if abs(solver - seen) > STAMP_TOLERANCE_S + 0.1 * solver:
        raise PointFailed(
            f"the solver's output arrived over {seen:.2f} s but its ClockTime advanced "
            f"{solver:.0f} s: the launcher buffers the output, so iterations cannot be timed"
        )


def step_statistics(
    iterations: list[Iteration], stamps: list[float], warmup_steps: int, writing: list[int]
) -> dict[str, float]:
    """Per-iteration statistics (seconds) of the iterations after the warm-up and the first."""
    measured = [s for s in step_times(iterations, stamps) if s[0] > warmup_steps]
    if not measured:
        raise PointFailed("no measured iteration: steps must exceed warmup_steps + 1")
    wall = [s[1] for s in measured]
    wrote = [s[1] for s in measured if s[0] in writing]
    quiet = [s[1] for s in measured if s[0] not in writing]
    stats = {
        "time_per_step": mean(wall),
        "time_per_step_median": median(wall),
        "time_per_step_min": min(wall),
        "time_per_step_max": max(wall),
        "cpu_time_per_step": mean(s[2] for s in measured),
        "run_time": sum(wall),
        "measured_steps": len(measured),
        # v1912's own wall clock over the whole run (whole seconds), against the stamps
        "clock_time_total": iterations[-1].clock,
        "stamped_time_total": stamps[-1] - stamps[0],
    }
    if wrote:
        stats["time_per_step_write"] = mean(wrote)
    if quiet:
        stats["time_per_step_nowrite"] = mean(quiet)
    solves = {int(it.time): it.solves for it in iterations}
    fitted = write_cost(
        [(wall, step in writing, solves.get(step, {})) for step, wall, _ in measured]
    )
    if fitted is not None:
        stats["write_cost"], stats["write_cost_se"] = fitted
    return stats


def write_cost(steps: list[tuple[float, bool, dict]]) -> tuple[float, float] | None:
    """(cost, standard error) of a write from (step time, wrote, solver iterations) per step.

    Least squares of the step time on a constant, the write flag and the
    iterations of each solved field (those that vary); None when the steps
    cannot separate a write from the rest (no step of one kind, too few steps).
    """
    fields = sorted({name for _, _, solves in steps for name in solves})
    columns = [[1.0] * len(steps), [float(wrote) for _, wrote, _ in steps]]
    for name in fields:
        column = [float(solves.get(name, 0)) for _, _, solves in steps]
        if len(set(column)) > 1:
            columns.append(column)
    x = np.array(columns).T
    y = np.array([wall for wall, _, _ in steps])
    free = len(steps) - x.shape[1]
    if not 0 < x[:, 1].sum() < len(steps) or free < 2 or np.linalg.matrix_rank(x) < x.shape[1]:
        return None
    beta, *_ = np.linalg.lstsq(x, y, rcond=None)
    residual = y - x @ beta
    variance = float(residual @ residual) / free * np.linalg.inv(x.T @ x)[1, 1]
    return float(beta[1]), math.sqrt(max(variance, 0.0))


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


def is_time_name(name: str) -> bool:
    try:
        float(name)
    except ValueError:
        return False
    return True


def tree(root: Path) -> dict[str, int]:
    """Every file (size in bytes) and folder (-1) the solver may write in, by writer.

    A parallel run writes in ``processor<N>/`` (uncollated) or
    ``processors<N>/`` (collated); a 1-rank run is serial and writes its time
    folders in the case itself, listed as ``case/<time>/...``.
    """
    tops = [(top, top.name) for top in sorted(root.glob("processor*")) if top.is_dir()]
    tops += [
        (top, f"{SERIAL}/{top.name}")
        for top in sorted(root.iterdir())
        if top.is_dir() and is_time_name(top.name)
    ]
    found = {}
    for top, label in tops:
        found[label + "/"] = -1
        for here, dirs, files in os.walk(top):
            rel = os.path.relpath(here, top)
            prefix = label if rel == "." else f"{label}/{Path(rel).as_posix()}"
            for name in dirs:
                found[f"{prefix}/{name}/"] = -1
            for name in files:
                found[f"{prefix}/{name}"] = os.stat(os.path.join(here, name)).st_size
    return found


def time_of(path: str) -> str | None:
    """The time folder a path in a processor tree belongs to (``processor0/3/U`` -> ``3``)."""
    parts = path.rstrip("/").split("/")
    return parts[1] if len(parts) > 1 else None


def counts(paths: dict[str, int]) -> dict[str, int]:
    """Files, folders and the files' bytes of a listing made by :func:`tree`."""
    return {
        "files": sum(size >= 0 for size in paths.values()),
        "dirs": sum(size < 0 for size in paths.values()),
        "bytes": sum(size for size in paths.values() if size >= 0),
    }


def write_tree(before: dict[str, int], after: dict[str, int], writes: list[int]) -> dict:
    """What the solver created in the processor trees, per write time kept.

    Returns the totals (over the writes, the purged ones counted as the kept
    ones' mean) and, for the fidelity comparison, the names and sizes of one
    kept write time.
    """
    new = {path: size for path, size in after.items() if path not in before}
    times = sorted({time_of(p) for p in new} - {None}, key=float)
    wrote = [str(w) for w in writes]
    strays = [t for t in times if t not in wrote]
    if strays:
        raise PointFailed(f"simpleFoam wrote time folders {strays} that are not write times")
    per_time = {
        name: counts({p: s for p, s in new.items() if time_of(p) == name}) for name in times
    }
    other = {p: s for p, s in new.items() if time_of(p) is None}
    counted = len(writes) / len(times) if times else 0.0
    extra = counts(other)
    totals = {
        key: sum(t[key] for t in per_time.values()) * counted + extra[key]
        for key in ("files", "dirs", "bytes")
    }
    sample = times[-1] if times else None
    listing = {p: s for p, s in new.items() if sample is not None and time_of(p) == sample}
    return {
        "writes": len(writes),
        "kept_times": times,
        "purged_writes": len(writes) - len(times),
        "per_kept_time": per_time,
        "other_created": other,
        "totals": totals,
        "sample_time": sample,
        "sample": dict(sorted(listing.items())),
    }


def per_rank_layout(sample: dict[str, int], collated: bool) -> dict:
    """Files and folders one writer makes per write, with their sizes (by processor)."""
    writers: dict[str, dict] = {}
    for path, size in sample.items():
        top, _, rest = path.partition("/")
        name = rest.split("/", 1)[1] if "/" in rest.rstrip("/") else ""
        entry = writers.setdefault(top, {"files": {}, "dirs": []})
        if size < 0:
            entry["dirs"].append(name.rstrip("/") or ".")
        else:
            entry["files"][name] = size
    return {"collated": collated, "writers": dict(sorted(writers.items()))}


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
    with open(log_path, "wb") as log:
        for line in iter(stream.readline, b""):
            if EXECUTION_LINE.search(line):
                stamps.append(time.perf_counter() - origin)
            log.write(line)
    stream.close()


def run_tool(command: list[str], case: Path, name: str, env: dict) -> float:
    """Run a preprocessing tool on the case, its output in log.<name>; its wall time."""
    start = time.perf_counter()
    with open(case / f"log.{name}", "wb") as log:
        done = subprocess.run(
            command, cwd=case, stdout=log, stderr=subprocess.STDOUT, env=env, timeout=3600
        )
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        text = (case / f"log.{name}").read_text(errors="replace")
        reason = fatal_error(text) or _last_line(text)
        raise PointFailed(f"{name} exited with {done.returncode}: {reason}")
    return elapsed


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][-300:] if lines else "no output"


def handler_args(p: dict) -> list[str]:
    """The file handler on the command line; collated writes unthreaded unless asked."""
    if p["file_handler"] != "collated":
        return []
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


def solver_command(p: dict) -> list[str]:
    return ["simpleFoam", *(["-parallel"] if parallel(p) else []), *handler_args(p)]


def start(job: Job, launcher: str, members: list[Member], p: dict, env: dict) -> None:
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
        member.command = launch_command(launcher, p["ranks"], p["ensemble"], local)
        member.command += solver_command(p)
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
        member.reader = threading.Thread(
            target=tee,
            args=(member.process.stdout, member.case / "log.simpleFoam", member.stamps, origin),
            daemon=True,
        )
        member.reader.start()
    job.extra["commands"] = [shlex.join(m.command) for m in members]
    job.log(f"{len(members)} launch(es) of simpleFoam started back to back")
    deadline = time.monotonic() + SOLVER_TIMEOUT_S
    for member in members:
        try:
            member.process.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            raise PointFailed(f"simpleFoam ran longer than {SOLVER_TIMEOUT_S:.0f} s") from None
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


def member_result(job: Job, member: Member, p: dict, before: dict) -> dict:
    text = (member.case / "log.simpleFoam").read_text(errors="replace")
    code = member.process.returncode
    try:
        iterations = check_log(text, p["steps"])
    except PointFailed as error:
        job.log(f"member {member.index} log (end):\n{text[-2000:]}")
        raise PointFailed(f"member {member.index}: {error}") from None
    if code != 0:
        raise PointFailed(f"member {member.index}: simpleFoam exited with {code}")
    check_stamps(iterations, member.stamps)
    job.extra["openfoam_build"] = build_of(text)
    writes = write_steps(p)
    found = write_tree(before, tree(member.case), writes)
    return {
        "steps": step_statistics(iterations, member.stamps, p["warmup_steps"], writes),
        "tree": found,
        "started_s": round(member.started, 4),
        "ended_s": round(member.ended, 4),
    }


def check_writes(results: list[dict], p: dict) -> None:
    """The files the run must have made: none without writes, every write time's otherwise."""
    kept_expected = len(write_steps(p))
    if p["purge_write"]:
        kept_expected = min(kept_expected, p["purge_write"])
    for i, r in enumerate(results):
        tree_ = r["tree"]
        if write_interval(p) is None and (tree_["totals"]["files"] or tree_["totals"]["dirs"]):
            raise PointFailed(
                f"member {i} wrote {tree_['totals']['files']:.0f} files in a run without writes"
            )
        if len(tree_["kept_times"]) != kept_expected:
            raise PointFailed(
                f"member {i} kept time folders {tree_['kept_times']}, expected {kept_expected}"
            )
        counts = {(t["files"], t["dirs"]) for t in tree_["per_kept_time"].values()}
        if len(counts) > 1:
            raise PointFailed(f"member {i} wrote different trees at different times: {counts}")


def ensemble_metrics(results: list[dict], p: dict) -> list[dict]:
    """Ensemble means of the members' times; totals of bytes, files and folders.

    Names and meanings are those of cfd_proxy where they agree.
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
    writes = len(write_steps(p))
    if writes:
        writers = p["ranks"] if p["file_handler"] == "uncollated" else 1
        per = writes * writers * len(results)
        found += [
            metric("bytes_per_write", totals["bytes"] / writes, "B"),
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
    launcher = job.spec.get("launcher") or DEFAULT_LAUNCHER
    env, how = openfoam_environment(job.spec.get("openfoam"))
    job.extra["openfoam_env"] = how
    job.extra["openfoam_tools"] = find_tools(env, ("blockMesh", "decomposePar", "simpleFoam"))
    job.folder.ensure_space(planned_bytes(p), job.max_bytes)
    layout = mesh(p)
    job.extra["mesh"] = layout
    job.log(
        f"{p['ensemble']} x simpleFoam on {p['ranks']} ranks, {p['cells_per_rank']} cells per "
        f"rank (duct {layout['nx']} x {layout['ny']} x {layout['nz']}), {p['steps']} "
        f"iterations, write interval {p['write_interval']}, {p['file_handler']}, "
        f"{p['write_format']}, purgeWrite {p['purge_write']}; OpenFOAM: {how}"
    )
    members = [Member(i, job.folder.path / f"member{i}") for i in range(p["ensemble"])]
    preprocessing = [prepare(m, p, env) for m in members]
    job.extra["preprocessing_s"] = preprocessing
    before = [tree(m.case) for m in members]
    try:
        start(job, launcher, members, p, env)
        results = [member_result(job, m, p, b) for m, b in zip(members, before, strict=True)]
    finally:
        stop(members)
    check_writes(results, p)
    job.extra["members"] = results
    job.extra["write_tree"] = per_rank_layout(
        results[0]["tree"]["sample"], p["file_handler"] == "collated"
    )
    job.extra["overlap"] = overlap(results)
    metrics = ensemble_metrics(results, p)
    metrics.append(metric("blockmesh_time", mean(t["blockMesh"] for t in preprocessing), "s"))
    if parallel(p):
        metrics.append(
            metric("decompose_time", mean(t["decomposePar"] for t in preprocessing), "s")
        )
    job.log(
        "per step "
        + ", ".join(f"{m['metric']}={m['value']:.4g}" for m in metrics if m["unit"] == "s")
    )
    return metrics


WORKLOAD = Workload(
    name="openfoam",
    summary="the real OpenFOAM (simpleFoam, kOmegaSST) on a generated duct: ranks x steps, writes",
    run=run,
    family="cfd",
    env="openfoam",
    tools=(
        Tool("simpleFoam", "openfoam", version=None),
        Tool("mpiexec", "openmpi-bin"),
    ),
    mpi=True,
    check_params=check_params,
    planned_bytes=planned_bytes,
    creates_files=True,
    tasks=tasks,
    runtime_s=runtime_s,
)
