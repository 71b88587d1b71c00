"""fe_proxy: a genetic algorithm fitting a non-linear FE model, writing solver output.

Document 000 fitted material parameters of a small non-linear FE model with a
genetic algorithm (population 30, 2 generations = 60 analyses) and timed the
whole optimisation on an HDD, an SSD and tmpfs. This workload does the same
with a real, if small, implicit solve (``fe_model``: a tapered elasto-plastic
bar, finite strain, Newton-Raphson with a residual tolerance) and the seeded
GA the calculix workload runs too (``fe_optimisation``). The target
force-displacement curve is computed by the same model from known parameters
(``fe_optimisation.TRUTH``, plus optional noise), so the fit can be checked
against the truth.

Every evaluation runs in its own folder on the tier under test: the GA writes
the bar's CalculiX deck (``fe_deck``: the bytes the calculix workload hands
ccx for the same individual), the solver reads it back, solves, and writes
what CalculiX 2.20 (``ccx``) writes for that deck, with its system calls and
sizes, measured with strace (see CALCULIX OUTPUT below).

``fsync`` sets what reaches the device: ``none`` (written to the OS only, as
the solvers do), ``increment`` (fsync every file written in an increment) or
``end`` (fsync every file once, before its last close). Writes are plain
``write`` calls, without a buffer of this process in between. The folder is
deleted after the evaluation, also when the solve fails.

How long an analysis computes is the application's time, not the proxy's:
the bar's solve here takes milliseconds where ccx takes a large part of a
second for the same model, and with that little compute the output would be
most of an evaluation. ``compute_per_evaluation`` is the time an evaluation
takes without field output (by default ccx's, measured on the machine the
schema names; ``from_application``: ccx's at this model, timed in the job;
0: the bar's solve alone). The job finds the units of extra work
(:func:`busy`) that bring the proxy's own analysis without field output to
that time (:func:`calibrate_compute`, by :func:`tierbench.compute.calibrate`)
and every analysis does them, spread over its increments as a solver's
compute is, with or without output.

Evaluations of one generation run in parallel on ``cores`` worker processes,
one evaluation per worker at a time. Times per evaluation: ``cpu_time`` is
the worker's CPU time (on a RAM tier the output is all CPU work, and unlike
the wall time it leaves out waiting for a core); ``io_time`` is the
time in file-system calls (create, open, write, fsync, close, unlink, read of
the deck, delete); ``sys_time`` is the part of ``cpu_time`` in the kernel
(system calls and page faults: where the file system's work is);
``compute_time`` is the rest of the wall time (the solve, and making the text
it writes: the .frd's results are the solve's own, formatted as ccx
formats them (``frd``), as formatting is most of what ccx's field output
costs; the .sta, .cvg and .dat lines carry the solve's numbers, written as
ccx's Fortran writes them; ccx's standard output is modelled by its size).
"""

from __future__ import annotations

import itertools
import math
import statistics
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ... import compute
from ...errors import PointFailed, PointNotApplicable
from ...job import Job
from ...records import metric
from ...schemas import complete
from .. import Pair, Workload
from . import calculix, fe_deck, fe_model, fe_optimisation, frd, ga
from .fe_output import (
    CALLS,
    CVG_HEAD,
    DAT_BYTES,
    JOB,
    LOG_BANNER,
    LOG_END,
    LOG_FIRST,
    LOG_INCREMENT,
    LOG_ITERATION,
    STA_HEAD,
    CalculixLayout,
    CalculixOutput,
    Disk,
)


@dataclass(frozen=True)
class Output:
    """What an evaluation writes, and how hard it pushes it to the device."""

    fsync: str = "none"
    frd_every: int = 1


@dataclass(frozen=True)
class Settings:
    cores: int
    ga: ga.Settings
    bar: fe_model.Bar
    output: Output
    noise: float
    oversubscribe: bool
    paired_baseline: bool = False
    #: seconds of an evaluation without field output; None: the application's, timed in the job
    compute: float | None = 0.0


def settings(params: dict) -> Settings:
    """A point's parameters as the run uses them (schema defaults filled in where missing)."""
    p = complete("fe_proxy", params)
    bar = fe_model.Bar(
        elements=p["elements"],
        increments=p["increments"],
        max_strain=float(p["max_strain"]),
        tolerance=float(p["tolerance"]),
    )
    output = Output(fsync=p["fsync"], frd_every=p["frd_every"])
    return Settings(
        cores=p["cores"],
        ga=fe_optimisation.ga_settings(p),
        bar=bar,
        output=output,
        noise=float(p["noise"]),
        oversubscribe=p["oversubscribe"],
        paired_baseline=p["paired_baseline"],
        compute=compute.seconds(p["compute_per_evaluation"]),
    )


def evaluation_bytes(output: Output, bar: fe_model.Bar) -> int:
    """An upper estimate of what one evaluation has on the tier at its end."""
    shared = fe_deck.Deck(fe_deck.Model.of(bar, output.frd_every))
    deck = len(shared.mesh) + len(shared.step) + 2048  # the heading and material: at most 2 KiB
    n = bar.increments
    iterations = n * (bar.max_iterations + 1) * (bar.max_cutbacks + 1)
    outputs = n // output.frd_every if output.frd_every else 0
    frd_bytes = frd.header_bytes() + frd.mesh_bytes(bar.elements)
    frd_bytes += outputs * frd.results_bytes(bar.elements)
    text = len(STA_HEAD) + 72 * n + len(CVG_HEAD) + 82 * iterations
    log = LOG_BANNER + LOG_FIRST + LOG_INCREMENT * n + LOG_ITERATION * iterations
    return deck + frd_bytes + len(frd.END) + DAT_BYTES * n + text + log + sum(LOG_END)


def planned_bytes(params: dict) -> int:
    """Bytes on the tier at once: one evaluation per worker, each deleted when done."""
    config = settings(params)
    return config.cores * evaluation_bytes(config.output, config.bar)


# ---------------------------------------------------------------- one evaluation

_WORKER: dict = {}


def init_worker(
    bar: fe_model.Bar, output: Output, target: np.ndarray, paired: bool = False, units: int = 0
) -> None:
    """Pool initializer: what every evaluation of a run shares, made once; with ``paired``,
    the same for the baseline without field output (``paired_baseline``); ``units`` of
    :func:`busy` work every analysis does."""
    _WORKER.update(
        bar=bar,
        output=output,
        target=target,
        deck=fe_deck.Deck(fe_deck.Model.of(bar, output.frd_every)),
        layout=CalculixLayout.of(bar),
        baseline=None,
        units=units,
    )
    if paired:
        _WORKER["baseline"] = without_field_output(bar, output)


def without_field_output(bar: fe_model.Bar, output: Output) -> tuple[Output, fe_deck.Deck]:
    """The output and the deck of the same analysis with no field output (``frd_every`` 0):
    what a paired baseline analyses."""
    return replace(output, frd_every=0), fe_deck.Deck(fe_deck.Model.of(bar, 0))


#: the extra compute's unit: solving a dense system of the size of a solid element's
#: (24 degrees of freedom, as document 000's), some microseconds of CPU
BUSY_SIZE = 24
_BUSY = np.eye(BUSY_SIZE) * BUSY_SIZE + np.random.default_rng(0).random((BUSY_SIZE, BUSY_SIZE))


def busy(units: int) -> None:
    """``units`` units of compute (CPU only: no memory beyond a few kB, no system call)."""
    rhs = np.ones(BUSY_SIZE)
    for _ in range(units):
        rhs = np.linalg.solve(_BUSY, rhs) * BUSY_SIZE


class Computing:
    """An analysis' increment callback with its extra compute, ``units`` spread evenly
    over the increments before each increment's output."""

    def __init__(self, on_increment, units: int, increments: int):
        self.on_increment, self.units, self.increments = on_increment, units, increments

    def __call__(self, inc: fe_model.Increment) -> None:
        done = self.units * (inc.number - 1) // self.increments
        busy(self.units * inc.number // self.increments - done)
        self.on_increment(inc)


def evaluate(task: dict) -> dict:
    """One FE analysis (and its paired baseline, with ``paired_baseline``); its record."""
    if _WORKER["baseline"] is None:
        return analyse(task, _WORKER["output"], _WORKER["deck"])
    quiet, quiet_deck = _WORKER["baseline"]
    return fe_optimisation.with_baseline(
        task,
        lambda t: analyse(t, _WORKER["output"], _WORKER["deck"]),
        lambda t: analyse(t, quiet, quiet_deck),
    )


def analyse(task: dict, output: Output, deck: fe_deck.Deck) -> dict:
    """One FE analysis in ``task['folder']`` (created, then deleted); returns its record.

    A solve that does not converge is a failed evaluation (infinite misfit, as
    an optimiser treats an aborted analysis); a file-system error (a full tier)
    propagates. Either way the folder is gone afterwards.
    """
    bar, target = _WORKER["bar"], _WORKER["target"]
    label = task["label"]
    material = fe_optimisation.individual(task["parameters"])
    start, cpu, kernel = time.perf_counter(), time.process_time(), fe_optimisation.kernel_time()
    disk = Disk(task["folder"], output.fsync)
    record = {
        "label": label,
        "parameters": task["parameters"],
        "ok": False,
        "error": "",
        "misfit": math.inf,
        "iterations": 0,
        "increments": 0,  # as calculix's record: the same keys whether it finished or not
        "cutbacks": 0,
    }
    solver = None
    try:
        disk.mkdir()
        path = disk.path(f"{JOB}.inp")
        disk.create(path, deck.parts(material, label))
        solver = CalculixOutput(disk, _WORKER["layout"], output.frd_every)
        solver.start(path)
        on_increment = solver
        if _WORKER.get("units"):
            on_increment = Computing(solver, _WORKER["units"], bar.increments)
        try:
            solution = fe_model.solve(bar, material, on_increment)
        except fe_model.ConvergenceError as error:
            record["error"] = str(error)
        else:
            record.update(
                ok=True,
                misfit=fe_model.misfit(solution.force, target),
                iterations=sum(solution.iterations),
                increments=len(solution.iterations),
                cutbacks=solution.cutbacks,
            )
        solver.finish()
    finally:
        if solver is not None:
            solver.close()  # after an error: nothing may stay open
        disk.remove()
    record["eval_time"] = time.perf_counter() - start
    record["cpu_time"] = time.process_time() - cpu
    record["sys_time"] = fe_optimisation.kernel_time() - kernel
    record["io_time"] = disk.seconds
    record["compute_time"] = record["eval_time"] - disk.seconds
    record["bytes"] = disk.bytes
    record["files"] = disk.files
    record["files_created"] = len(disk.names)
    record["calls"] = dict(disk.calls)
    return record


# ---------------------------------------------------------------- the optimisation


def target_curve(bar: fe_model.Bar, noise: float, seed: int) -> np.ndarray:
    """The 'measured' curve: the model with the true parameters, plus relative noise."""
    force = fe_model.force_curve(bar, fe_optimisation.TRUTH)
    return fe_optimisation.with_noise(force, noise, seed)


def optimise(config: Settings, root: Path, log=lambda message: None, units: int = 0) -> dict:
    """The whole GA with evaluations in ``root``, each analysis doing ``units`` of extra
    compute; returns the timings and every evaluation."""
    target = target_curve(config.bar, config.noise, config.ga.seed)
    worker = (init_worker, (config.bar, config.output, target, config.paired_baseline, units))
    return fe_optimisation.optimise_in_pool(
        config.ga, config.cores, root, evaluate, worker, log=log
    )


def calibrate_compute(config: Settings, root: Path, target: float) -> dict:
    """The units of extra compute that make the proxy's analysis without field output take
    ``target`` s of CPU here: analyses of the true material timed in ``root`` (each folder
    removed), in this process, before the workers start. CPU time, not wall: the amount of
    work must not depend on what else the machine ran while it was timed."""
    curve = target_curve(config.bar, config.noise, config.ga.seed)
    init_worker(config.bar, config.output, curve)
    quiet, quiet_deck = without_field_output(config.bar, config.output)
    count = itertools.count(1)

    def timed(units: int) -> float:
        _WORKER["units"] = units
        label = f"calibration-{next(count):03d}"
        record = analyse({"label": label, "parameters": {}, "folder": str(root / label)},
                         quiet, quiet_deck)  # fmt: skip
        if not record["ok"]:
            raise PointFailed(f"the calibration's analysis failed: {record['error']}")
        return record["cpu_time"]

    units, samples = compute.calibrate(timed, target)
    _WORKER.clear()
    return {"target": target, "units": units, "samples": [list(s) for s in samples]}


def compute_of(job: Job, config: Settings) -> dict:
    """The point's compute per evaluation and the units of extra work that take it here.

    A traced job (``count_syscalls``) does not calibrate: its times are never used, and
    the calibration's analyses would add their calls, a varying number of them, to its
    counts. The compute makes no system call, so the counts do not depend on it.
    """
    p = complete("fe_proxy", job.params)
    target, note = config.compute, {"compute_per_evaluation": p["compute_per_evaluation"]}
    if job.spec.get("count_syscalls"):
        job.log("traced: the compute is not calibrated (a traced run's times are not used)")
        return {**note, "target": target, "units": 0, "calibrated": False}
    if target is None:
        job.log("timing ccx at this model, without field output, for the compute per evaluation")
        target, note["application"] = application_evaluation_time(p, job.folder.path)
    note.update(calibrate_compute(config, job.folder.path, target))
    job.log(
        f"compute: {note['units']} units per analysis for {target:.4g} s per evaluation "
        "without field output"
    )
    return note


def application_evaluation_time(params: dict, root: Path, runs: int = 5) -> tuple[float, dict]:
    """ccx's evaluation time at the point's model without field output: the median CPU time
    (this process's and ccx's) of ``runs`` analyses of the true material after an untimed
    one, by the calculix workload's own evaluation, in ``root``; and every run's times."""
    shape = {k: params[k] for k in ("elements", "increments", "max_strain")}
    cx = calculix.settings({**shape, "cores": 1, "frd_every": 0})
    calculix.init_worker(cx.model, np.ones(cx.model.increments), cx.solver_log)  # misfit unused
    records = []
    for i in range(runs + 1):
        label = f"application-{i:03d}"
        record = calculix.analyse(
            {"label": label, "parameters": {}, "folder": str(root / label)}, cx.model
        )
        if not record["ok"]:
            raise PointFailed(f"ccx without field output failed: {record['error']}")
        records.append(record)
    calculix._WORKER.clear()
    timed = records[1:]
    note = {k: [r[k] for r in timed] for k in ("cpu_time", "eval_time", "increments")}
    return statistics.median(note["cpu_time"]), {"runs": runs, **note}


def summary_metrics(outcome: dict) -> list[dict]:
    evals = outcome["evaluations"]
    ok = [e for e in evals if e["ok"]]

    def median(key: str, rows=evals) -> float:
        return statistics.median(e[key] for e in rows)

    io_sum = sum(e["io_time"] for e in evals)
    compute_sum = sum(e["compute_time"] for e in evals)
    metrics = [
        *fe_optimisation.run_metrics(outcome),
        metric("eval_compute_time_median", median("compute_time"), "s"),
        metric("eval_io_time_median", median("io_time"), "s"),
        metric("eval_io_time_max", max(e["io_time"] for e in evals), "s"),
        metric("compute_time_sum", compute_sum, "s"),
        metric("io_time_sum", io_sum, "s"),
        metric("io_share", 100.0 * io_sum / max(io_sum + compute_sum, 1e-12), "%"),
        *fe_optimisation.written_metrics(evals),
    ]
    if ok:
        metrics.append(metric("newton_iterations_median", median("iterations", ok), "iterations"))
    return metrics + fe_optimisation.fit_metrics(outcome)


def per_evaluation(evaluations: list[dict]) -> dict:
    """What an evaluation wrote, median over the run: files, bytes and file calls."""
    calls = {name: statistics.median(e["calls"][name] for e in evaluations) for name in CALLS}
    return {
        "files": statistics.median(e["files"] for e in evaluations),
        "files_created": statistics.median(e["files_created"] for e in evaluations),
        "bytes": statistics.median(e["bytes"] for e in evaluations),
        "calls": calls,
    }


def run(job: Job) -> list[dict]:
    config = settings(job.params)
    if job.folder is None:
        raise PointNotApplicable("fe_proxy writes solver files; the void tier has no folder")
    cpus = fe_optimisation.check_cores(config.cores, config.oversubscribe)
    job.folder.ensure_space(planned_bytes(job.params), job.max_bytes)
    note = compute_of(job, config)
    job.extra["compute"] = note
    job.log(
        f"{fe_optimisation.describe(config.ga, config.cores)}; FE: {config.bar.elements} elements, "
        f"{config.bar.increments} increments; CalculiX's output, fsync={config.output.fsync}; "
        f"at most {evaluation_bytes(config.output, config.bar)} B per evaluation"
    )
    outcome = optimise(config, job.folder.path, job.log, note["units"])
    written = per_evaluation(outcome["evaluations"])
    job.log(
        f"optimisation took {outcome['wall_time']:.2f} s; best misfit "
        f"{outcome['best_misfit']:.3f} %, parameters {outcome['best']}; per evaluation "
        f"{written['files']:g} files, {written['bytes']:g} B, {written['calls']['write']:g} writes"
    )
    job.extra["per_evaluation"] = written
    fe_optimisation.keep_outcome(job, outcome, cpus)
    found = summary_metrics(outcome)
    found.append(metric("compute_units_per_evaluation", note["units"], "units"))
    if note["target"] is not None:
        found.append(metric("compute_target_per_evaluation", note["target"], "s"))
    return found


WORKLOAD = Workload(
    name="fe_proxy",
    summary="a genetic algorithm over a small non-linear FE model writing solver output",
    headline=("wall_time",),
    run_time="wall_time",
    stands_for=Pair(
        proxy="fe_proxy",
        real="calculix",
        unit="evaluation",
        shape=(
            "population", "generations", "elite", "seed", "cores",
            "elements", "increments", "max_strain",
        ),
        # neither can run with no output at all: the baseline is no field output (.frd)
        baseline={"fe_proxy": {"frd_every": 0}, "calculix": {"frd_every": 0}},
        time_metric="eval_time_median",
        headline="wall_time",
        files="files_written",
        dirs=None,
        imitates={"output_model": "calculix"},
        increments="solver_increments_median",
        increment_bytes="bytes_per_increment",
        cost_metric="output_cost_per_increment",
        cost_kernel_metric="output_kernel_cost_per_increment",
        compute=(
            "evaluation time without field output", "eval_time_median",
            "eval_time_baseline_median",
        ),
        size=("elements",),
        own_input=("deck",),
    ),
    run=run,
    family="fe",
    env="fe",
    check_params=fe_optimisation.check_elite,
    planned_bytes=planned_bytes,
    creates_files=True,
    threads=fe_optimisation.threads,
    page_cache=fe_optimisation.page_cache_rule("fe_proxy", planned_bytes),
)  # fmt: skip
