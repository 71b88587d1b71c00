"""calculix: document 000's optimisation with the real solver, CalculiX's ``ccx``.

With a ``deck``, a point runs the user's own input deck instead, once per
repetition (:mod:`tierbench.workloads.fe.calculix_deck`); without one, the
optimisation below.

The same optimisation as ``fe_proxy`` (``fe_optimisation``: the GA's
population, generations, elite and seed, the evaluations of a generation on
``cores`` worker processes) fits the same parameters (E, yield stress, Voce
saturation stress; same bounds and true values) of an elasto-plastic bar, but
every evaluation is a real CalculiX analysis:

1. its own folder under the job's run folder on the tier, with the deck
   ``job.inp`` written into it (one buffered write, no fsync);
2. ``ccx job`` in that folder, single-threaded (``OMP_NUM_THREADS=1`` and
   CalculiX's own ``CCX_NPROC_*`` set to 1), its standard output in ``job.log``
   in the folder (``solver_log: file``, as a batch script redirects it) or
   captured in memory (``pipe``);
3. the force-displacement curve read back from ``job.dat`` (``*NODE PRINT``
   of the total reaction force on the loaded face and of the displacement of
   one loaded node, every increment) and scored against the target curve;
4. the folder listed (every file ccx left, with its size) and deleted.

The model is the bar's deck (``fe_deck``, which ``fe_proxy`` writes too):
C3D8 bricks, ``NLGEOM``, a ``*PLASTIC`` table of the hardening law, loaded to
``max_strain`` and back in ``increments`` increments under ccx's automatic
incrementation, so a hard evaluation takes, and writes, more increments;
field output every ``frd_every`` increments. The curve is interpolated in
step time onto the ``increments`` grid before scoring. The target curve is
made once per job by the same ccx with the true parameters (plus optional
``noise``), before the optimisation's clock starts.

Failures: an evaluation whose ccx fails (non-zero exit, ``*ERROR`` lines, no
or truncated ``job.dat``) is a *failed evaluation*: infinite misfit (the GA
ranks it last, as an optimiser treats an aborted analysis), its one-line
reason kept in the record and counted in ``failed_evaluations``. The point
fails (``PointFailed``) when the target run fails or every evaluation does.
A file-system error (a full tier) propagates; the folder is deleted either way.

Times per evaluation: ``cpu_time`` is the CPU time of the evaluation (this
worker's and the ``ccx`` process's, from its rusage: on a RAM tier the output
is all CPU work, and unlike the wall time this leaves out waiting for a core
on a shared machine), of which ``sys_time`` in the kernel (both processes');
``solver_time`` is the wall time of the ``ccx`` process
(start to exit); ``fs_time`` is this workload's own file-system calls around
it (mkdir, deck write, opening the log, reading ``job.dat`` back, listing the
folder, deleting it); ``eval_time`` is the whole evaluation. ccx's own writes
(.frd, .dat, .sta, .cvg, its log) happen inside its process time and cannot be
separated from its computation without tracing it (``strace -f -c``); its
kernel CPU time (``solver_sys_time``, from the child's rusage) is an upper
hint of them, as it also holds thread start-up and page faults. Nothing is
fsync'd: ccx does not, and neither does this workload, so the writes land in
the page cache. ``bytes_written`` counts the final size of every file in the
folder (the deck, the log and ccx's files: ccx only appends, so this is what
it wrote); ``files_written`` counts them. The listing does not see the
scratch files ccx makes and deletes at its start (.fcv, .cel,
job_WarnNodeMissMultiStage.nam) nor its reopening of files: traced with
``strace -f`` (ccx 2.20, 1 element, 10 increments, full .frd every increment),
one analysis made 91 write calls (67 KB: .frd 22, .cvg 22, log 26, .sta 10,
.dat 10, .nam 1), reopened .frd in append mode every increment and
spooles.out (empty) 22 times, unlinked 7 files, and never called fsync,
rename or mkdir.
"""

from __future__ import annotations

import math
import os
import re
import resource
import shutil
import statistics
import subprocess
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ...errors import PointFailed, PointNotApplicable, PointSkipped
from ...job import Job
from ...packages import package_of
from ...records import metric
from ...schemas import complete
from .. import Tool, Workload
from . import calculix_deck, fe_deck, fe_model, fe_optimisation, ga

CCX = "ccx"
JOB = "job"
INSTALL_HINT = (
    f"install CalculiX (Debian: apt-get install {package_of(CCX)}) or load a site module "
    f"providing {CCX}"
)
#: ccx's threads: OpenMP's and CalculiX's own counts
THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "CCX_NPROC_EQUATION_SOLVER",
    "CCX_NPROC_STIFFNESS",
    "CCX_NPROC_RESULTS",
)


def solver_env(threads: int) -> dict[str, str]:
    """The environment that gives ccx ``threads`` threads."""
    return dict.fromkeys(THREAD_VARIABLES, str(threads))


#: the GA's ccx runs single-threaded
SOLVER_ENV = solver_env(1)


@dataclass(frozen=True)
class Settings:
    cores: int
    ga: ga.Settings
    model: fe_deck.Model
    noise: float
    solver_log: str
    oversubscribe: bool
    paired_baseline: bool = False


def settings(params: dict) -> Settings:
    """A point's parameters as the run uses them (the schema's defaults filled in where
    missing); the schema checks them when the study is expanded, ``check_params`` the rest."""
    p = complete("calculix", params)
    return Settings(
        cores=p["cores"],
        ga=fe_optimisation.ga_settings(p),
        model=fe_deck.Model(
            elements=p["elements"],
            increments=p["increments"],
            max_strain=float(p["max_strain"]),
            frd_every=p["frd_every"],
            frd_fields=p["frd_fields"],
        ),
        noise=float(p["noise"]),
        solver_log=p["solver_log"],
        oversubscribe=p["oversubscribe"],
        paired_baseline=p["paired_baseline"],
    )


def check_params(params: dict) -> None:
    """The rules the schema cannot state: a deck ccx can read (and the files it includes),
    or, for the GA, elite below population."""
    if params.get("deck") is not None:
        calculix_deck.check_params(params)
        return
    if params.get("output_bytes") is not None:
        raise ValueError("output_bytes is what ccx writes for a deck: give it with deck only")
    fe_optimisation.check_elite(params)


# ---------------------------------------------------------------- reading ccx's output

_FORCE = re.compile(r"^\s*total force \(fx,fy,fz\) for set LOAD and time\s+(\S+)", re.IGNORECASE)
_DISPLACEMENT = re.compile(
    r"^\s*displacements \(vx,vy,vz\) for set TIP and time\s+(\S+)", re.IGNORECASE
)


@dataclass
class Curve:
    time: np.ndarray
    displacement: np.ndarray
    force: np.ndarray


def _floats(line: str, count: int) -> list[float] | None:
    try:
        values = [float(v) for v in line.split()]
    except ValueError:
        return None
    return values if len(values) == count else None


def read_curve(dat: str) -> Curve:
    """The force-displacement curve in ccx's ``job.dat``; PointFailed when it is incomplete.

    Every converged increment prints two blocks: the total force on set LOAD
    (fx fy fz) and the displacement of the TIP node (node vx vy vz). A block
    whose data line is missing or cut short, force and displacement blocks at
    different times, or a last block before the step's end (time 1) is a
    truncated file.
    """
    force: dict[float, float] = {}
    displacement: dict[float, float] = {}
    lines = dat.splitlines()
    for i, line in enumerate(lines):
        for pattern, into, count, column in (
            (_FORCE, force, 3, 0),
            (_DISPLACEMENT, displacement, 4, 1),
        ):
            match = pattern.match(line)
            if not match:
                continue
            data = next((text for text in lines[i + 1 : i + 4] if text.strip()), "")
            values = _floats(data, count)
            if values is None:
                raise PointFailed(f"ccx's .dat is truncated: no data after '{line.strip()}'")
            into[float(match.group(1))] = values[column]
    times = sorted(force)
    if not times:
        raise PointFailed("ccx's .dat holds no force output")
    if sorted(displacement) != times:
        raise PointFailed(
            f"ccx's .dat is truncated: {len(times)} force but {len(displacement)} "
            "displacement blocks"
        )
    if abs(times[-1] - 1.0) > 1e-6:
        raise PointFailed(
            f"ccx's .dat is truncated: its last increment ends at {times[-1]:g}, not 1"
        )
    return Curve(
        time=np.array(times),
        displacement=np.array([displacement[t] for t in times]),
        force=np.array([force[t] for t in times]),
    )


def on_grid(curve: Curve, increments: int) -> np.ndarray:
    """The force at the end of each of ``increments`` equal increments (linear in step time)."""
    grid = np.arange(1, increments + 1) / increments
    return np.interp(
        grid, np.concatenate(([0.0], curve.time)), np.concatenate(([0.0], curve.force))
    )


def solver_failure(returncode: int, log: str) -> str | None:
    """Why a ccx run failed, in one line (its first ``*ERROR`` message), or None if it did not.

    ccx exits with status 201 after an ``*ERROR``; the message may continue on
    the lines after it, up to the next blank line.
    """
    lines = log.splitlines()
    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith("*ERROR")), None)
    if returncode == 0 and start is None:
        return None
    if start is not None:
        words = []
        for line in lines[start : start + 4]:
            if not line.strip() or (words and line.lstrip().startswith("*")):
                break
            words.append(line.strip())
        message = " ".join(" ".join(words).split())
        return f"ccx: {message[:240]}"
    if returncode < 0:
        return f"ccx was killed by signal {-returncode}"
    return f"ccx exited with status {returncode} without an *ERROR message"


# ---------------------------------------------------------------- one ccx run


@dataclass
class Run:
    """What one ccx run in its own folder left and cost."""

    returncode: int = -1
    log: str = ""
    dat: str | None = None
    files: dict[str, int] = field(default_factory=dict)
    solver_time: float = 0.0
    solver_user_time: float = 0.0
    solver_sys_time: float = 0.0
    fs_time: float = 0.0


def solver_command() -> list[str]:
    return [CCX, JOB]


def run_ccx(folder: str, deck_text: str, solver_log: str) -> Run:
    """Write the deck into a new ``folder``, run ccx there, read back, list and delete the folder.

    The folder is gone afterwards whatever happens; a file-system error propagates.
    """
    run = Run()
    env = {**os.environ, **SOLVER_ENV}
    log_handle = None
    try:
        began = time.perf_counter()
        os.mkdir(folder)
        with open(os.path.join(folder, f"{JOB}.inp"), "w") as handle:
            handle.write(deck_text)
        if solver_log == "file":
            log_handle = open(os.path.join(folder, f"{JOB}.log"), "wb")  # noqa: SIM115
        run.fs_time += time.perf_counter() - began

        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        began = time.perf_counter()
        done = subprocess.run(
            solver_command(),
            cwd=folder,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log_handle if log_handle is not None else subprocess.PIPE,
            stderr=subprocess.STDOUT,
            check=False,
        )
        run.solver_time = time.perf_counter() - began
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        run.solver_user_time = after.ru_utime - usage.ru_utime
        run.solver_sys_time = after.ru_stime - usage.ru_stime
        run.returncode = done.returncode

        began = time.perf_counter()
        if log_handle is not None:
            log_handle.close()
            log_handle = None
            with open(os.path.join(folder, f"{JOB}.log"), "rb") as handle:
                run.log = handle.read().decode(errors="replace")
        else:
            run.log = done.stdout.decode(errors="replace")
        try:
            with open(os.path.join(folder, f"{JOB}.dat")) as handle:
                run.dat = handle.read()
        except FileNotFoundError:
            run.dat = None
        with os.scandir(folder) as entries:
            run.files = {e.name: e.stat().st_size for e in entries if e.is_file()}
        run.fs_time += time.perf_counter() - began
    finally:
        if log_handle is not None:
            log_handle.close()
        began = time.perf_counter()
        shutil.rmtree(folder, ignore_errors=True)
        run.fs_time += time.perf_counter() - began
    return run


def curve_of(run: Run) -> Curve:
    """The run's force-displacement curve, or PointFailed with the one-line reason."""
    reason = solver_failure(run.returncode, run.log)
    if reason:
        raise PointFailed(reason)
    if run.dat is None:
        raise PointFailed(f"ccx wrote no {JOB}.dat")
    return read_curve(run.dat)


# ---------------------------------------------------------------- one evaluation

_WORKER: dict = {}


def init_worker(
    model: fe_deck.Model, target: np.ndarray, solver_log: str, paired: bool = False
) -> None:
    """Pool initializer: what every evaluation of a run shares (with ``paired``, the model of
    the baseline without field output, ``paired_baseline``)."""
    baseline = replace(model, frd_every=0) if paired else None
    _WORKER.update(model=model, target=target, solver_log=solver_log, baseline=baseline)


def evaluate(task: dict) -> dict:
    """One CalculiX analysis (and its paired baseline, with ``paired_baseline``); its record."""
    quiet = _WORKER["baseline"]
    if quiet is None:
        return analyse(task, _WORKER["model"])
    return fe_optimisation.with_baseline(
        task, lambda t: analyse(t, _WORKER["model"]), lambda t: analyse(t, quiet)
    )


def analyse(task: dict, model: fe_deck.Model) -> dict:
    """One CalculiX analysis in ``task['folder']``; returns its record (a failure included)."""
    target = _WORKER["target"]
    start, cpu, kernel = time.perf_counter(), time.process_time(), fe_optimisation.kernel_time()
    text = fe_deck.deck(model, fe_optimisation.individual(task["parameters"]), task["label"])
    run = run_ccx(task["folder"], text, _WORKER["solver_log"])
    record = {
        "label": task["label"],
        "parameters": task["parameters"],
        "ok": False,
        "error": "",
        "misfit": math.inf,
        "increments": 0,
    }
    try:
        curve = curve_of(run)
    except PointFailed as error:
        record["error"] = str(error)
    else:
        force = on_grid(curve, model.increments)
        record.update(ok=True, misfit=fe_model.misfit(force, target), increments=len(curve.time))
    record.update(
        eval_time=time.perf_counter() - start,
        # this worker's CPU time and ccx's (its threads included)
        cpu_time=time.process_time() - cpu + run.solver_user_time + run.solver_sys_time,
        solver_time=run.solver_time,
        solver_user_time=run.solver_user_time,
        solver_sys_time=run.solver_sys_time,
        sys_time=fe_optimisation.kernel_time() - kernel + run.solver_sys_time,
        fs_time=run.fs_time,
        bytes=sum(run.files.values()),
        files=len(run.files),
        file_sizes=run.files,
    )
    return record


# ---------------------------------------------------------------- the optimisation


def target_curve(config: Settings, root: Path) -> np.ndarray:
    """The 'measured' curve: ccx with the true parameters, plus relative noise."""
    text = fe_deck.deck(config.model, fe_optimisation.TRUTH, "target")
    run = run_ccx(str(root / "target"), text, config.solver_log)
    try:
        force = on_grid(curve_of(run), config.model.increments)
    except PointFailed as error:
        raise PointFailed(f"the target run with the true parameters failed: {error}") from None
    return fe_optimisation.with_noise(force, config.noise, config.ga.seed)


def optimise(config: Settings, root: Path, target: np.ndarray, log=lambda message: None) -> dict:
    """The whole GA, every evaluation a ccx run in its own folder under ``root``."""
    worker = (init_worker, (config.model, target, config.solver_log, config.paired_baseline))
    return fe_optimisation.optimise_in_pool(
        config.ga, config.cores, root, evaluate, worker, "ccx runs", log
    )


def summary_metrics(outcome: dict) -> list[dict]:
    """fe_proxy's names where the meaning is the same; solver/fs split under their own names."""
    evals = outcome["evaluations"]

    def median(key: str) -> float:
        return statistics.median(e[key] for e in evals)

    fs_sum = sum(e["fs_time"] for e in evals)
    eval_sum = sum(e["eval_time"] for e in evals)
    metrics = [
        *fe_optimisation.run_metrics(outcome),
        # the target curve's run too: a traced job's calls are those of every ccx run
        metric("solver_runs", len(evals) + 1, "runs"),
        metric("eval_time_max", max(e["eval_time"] for e in evals), "s"),
        metric("eval_solver_time_median", median("solver_time"), "s"),
        metric("eval_solver_sys_time_median", median("solver_sys_time"), "s"),
        metric("eval_fs_time_median", median("fs_time"), "s"),
        metric("eval_fs_time_max", max(e["fs_time"] for e in evals), "s"),
        metric("solver_time_sum", sum(e["solver_time"] for e in evals), "s"),
        metric("fs_time_sum", fs_sum, "s"),
        metric("fs_share", 100.0 * fs_sum / max(eval_sum, 1e-12), "%"),
        *fe_optimisation.written_metrics(evals),
    ]
    return metrics + fe_optimisation.fit_metrics(outcome)


# ---------------------------------------------------------------- space on the tier

#: bytes of one .frd field block per node and its header (measured on ccx 2.20: a U or RF
#: line is 49 bytes a node, S and E 85, PEEQ 25; a block header about 400 bytes), with margin
FRD_NODE_BYTES = {"nodal": 2 * 64, "full": 2 * 64 + 2 * 100 + 40}
FRD_BLOCK_BYTES = 600
#: increments ccx may take in all, per increment asked (cutbacks: 1.5x was seen at the bounds)
CUTBACK_MARGIN = 2
#: per increment: .dat blocks, a .sta line, .cvg lines and the solver log, with margin
TEXT_BYTES_PER_INCREMENT = 4096
FIXED_BYTES = 64 * 1024


def evaluation_bytes(model: fe_deck.Model) -> int:
    """An upper estimate of what one evaluation has on the tier at its end."""
    increments = CUTBACK_MARGIN * model.increments
    frames = increments // model.frd_every if model.frd_every else 0
    blocks = len(fe_deck.FRD_FIELDS[model.frd_fields][0].split(",")) + (
        3 if model.frd_fields == "full" else 0
    )
    frame = model.nodes * FRD_NODE_BYTES[model.frd_fields] + blocks * FRD_BLOCK_BYTES
    mesh = 200 * (model.nodes + model.elements)  # the deck and the .frd's mesh
    return FIXED_BYTES + mesh + frames * frame + increments * TEXT_BYTES_PER_INCREMENT


def planned_bytes(params: dict) -> int:
    """Bytes on the tier at once: one analysis per worker, and the target run before them;
    with a deck, its copy and what ccx is expected to write (calculix_deck.planned_bytes)."""
    if params.get("deck") is not None:
        return calculix_deck.planned_bytes(params)
    config = settings(params)
    return config.cores * evaluation_bytes(config.model)


# ---------------------------------------------------------------- the job


def run(job: Job) -> list[dict]:
    config = settings(job.params)
    if job.folder is None:
        raise PointNotApplicable("calculix writes solver files; the void tier has no folder")
    if shutil.which(CCX) is None:
        raise PointSkipped(f"{CCX} is not on PATH: {INSTALL_HINT}")
    own_deck = job.params.get("deck") is not None
    what = "threads" if own_deck else "workers"
    cpus = fe_optimisation.check_cores(config.cores, config.oversubscribe, what)
    if own_deck:
        return calculix_deck.run(job, solver_env(config.cores))
    job.folder.ensure_space(planned_bytes(job.params), job.max_bytes)
    model = config.model
    job.log(
        f"{fe_optimisation.describe(config.ga, config.cores)}; ccx: {model.elements} C3D8 "
        f"elements, {model.increments} "
        f"increments, .frd every {model.frd_every} ({model.frd_fields}); "
        f"at most about {evaluation_bytes(model)} B per evaluation"
    )
    root = Path(job.folder.path)
    target = target_curve(config, root)
    outcome = optimise(config, root, target, job.log)
    evals = outcome["evaluations"]
    ok = [e for e in evals if e["ok"]]
    if not ok:
        raise PointFailed(
            f"all {len(evals)} ccx evaluations failed; the first: {evals[0]['error']}"
        )
    job.log(
        f"optimisation took {outcome['wall_time']:.2f} s; {len(evals) - len(ok)} of "
        f"{len(evals)} evaluations failed; best misfit {outcome['best_misfit']:.3f} %, "
        f"parameters {outcome['best']}"
    )
    job.extra["evaluation_files"] = dict(sorted(ok[0]["file_sizes"].items()))
    job.extra["solver_env"] = dict(SOLVER_ENV)
    job.extra["deck_lines"] = fe_deck.deck(model, fe_optimisation.TRUTH).count("\n")
    fe_optimisation.keep_outcome(job, outcome, cpus, leave_out=("file_sizes",))
    return summary_metrics(outcome)


WORKLOAD = Workload(
    name="calculix",
    summary="document 000's GA with the real solver: every evaluation one CalculiX (ccx) "
    "analysis; or ccx on the user's own deck",
    run=run,
    family="fe",
    env="calculix",
    tools=(Tool(CCX, version=("-v",)),),
    packaged_paths=((calculix_deck.TEST_DECKS, "calculix-ccx-test"),),
    check_params=check_params,
    planned_bytes=planned_bytes,
    creates_files=True,
    threads=fe_optimisation.threads,
    headline=("wall_time",),
    run_time="wall_time",
    page_cache=fe_optimisation.page_cache_rule("calculix", planned_bytes),
)
