"""Document 000's optimisation, whatever evaluates an individual: fe_proxy's and calculix's.

Both workloads fit the same parameters of the same bar (E, yield stress and
Voce saturation stress, within ``BOUNDS``, against a target curve made from
``TRUTH``) with the same seeded GA (``ga``), its evaluations spread over
``cores`` forked workers, and report the same metrics, so their runs differ
only in how an evaluation is computed: the proxy's own solve and output, or
a ccx run. What they share is here; each workload module keeps its
evaluation and what it writes.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import resource
import signal
import statistics
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np

from ... import pagecache
from ...errors import PointSkipped
from ...job import Job
from ...records import metric
from . import fe_model, ga

#: the known material of the target curve, and what the GA fits (MPa)
TRUTH = fe_model.Material()
BOUNDS = {"E": (150_000.0, 250_000.0), "sigma_y": (150.0, 350.0), "Q": (50.0, 300.0)}
UNITS = {"E": "MPa", "sigma_y": "MPa", "Q": "MPa"}
#: offsets the target noise's seed from the GA's, so the two draw different numbers
NOISE_SEED_OFFSET = 7919


def ga_settings(params: dict) -> ga.Settings:
    """The GA of a point's (complete) parameters."""
    return ga.Settings(
        population=params["population"],
        generations=params["generations"],
        elite=params["elite"],
        seed=params["seed"],
    )


def check_elite(params: dict) -> None:
    """The rule the schemas cannot state: the elite is smaller than the population."""
    if params["elite"] >= params["population"]:
        raise ValueError(
            f"elite must be smaller than population (got {params['elite']} >= "
            f"{params['population']})"
        )


def threads(params: dict) -> int:
    """``cores``: one worker process per core (with calculix's own deck, ccx's threads)."""
    return int(params["cores"])


def individual(parameters: dict) -> fe_model.Material:
    """The material an evaluation analyses: the truth with the GA's parameters."""
    return replace(TRUTH, **parameters)


def with_noise(force: np.ndarray, noise: float, seed: int) -> np.ndarray:
    """The target curve ``force`` plus Gaussian noise of ``noise`` times its peak."""
    if not noise:
        return force
    rng = np.random.default_rng(seed + NOISE_SEED_OFFSET)
    return force + rng.normal(0.0, noise * float(np.max(np.abs(force))), force.shape)


def available_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def check_cores(cores: int, oversubscribe: bool, what: str = "workers") -> int:
    """The CPUs this job may use; PointSkipped when ``cores`` is more and not allowed."""
    cpus = available_cpus()
    if cores > cpus and not oversubscribe:
        raise PointSkipped(
            f"cores={cores} is more than the {cpus} CPUs this job may use; set "
            f"oversubscribe: true to run more {what} than cores"
        )
    return cpus


def describe(settings: ga.Settings, cores: int) -> str:
    """The GA's part of a job's log line."""
    return (
        f"GA: population {settings.population}, {settings.generations} generations, {cores} workers"
    )


def default_sigterm(initializer: Callable | None, initargs: tuple) -> None:
    """A pool worker's initializer: SIGTERM ends it at once (the runner's handler, which
    it inherits by fork, unwinds the run instead), then the workload's own."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if initializer is not None:
        initializer(*initargs)


def optimise_in_pool(
    settings: ga.Settings,
    cores: int,
    root: Path,
    evaluate: Callable[[dict], dict],
    worker: tuple[Callable, tuple],
    noun: str = "evaluations",
    log: Callable[[str], None] = lambda message: None,
) -> dict:
    """The GA over ``BOUNDS`` with each generation's evaluations spread over ``cores`` forked
    workers.

    ``evaluate`` gets a task (its own ``folder`` under ``root``, a ``label``, the
    ``parameters`` by name) and returns a dict with at least ``ok`` and
    ``misfit``; ``worker`` is the pool's (initializer, initargs). Returns the
    wall time, every evaluation, the best parameters by name and the best
    misfit after each generation.
    """
    names = list(BOUNDS)
    low = [BOUNDS[n][0] for n in names]
    high = [BOUNDS[n][1] for n in names]
    evaluations: list[dict] = []
    initializer, initargs = worker
    start = time.perf_counter()
    context = multiprocessing.get_context("fork")
    with context.Pool(cores, default_sigterm, (initializer, initargs)) as pool:

        def batch(rows: np.ndarray, generation: int) -> list[float]:
            tasks = [
                {
                    "folder": str(root / f"g{generation + 1:02d}-e{i + 1:03d}"),
                    "label": f"g{generation + 1:02d}-e{i + 1:03d}",
                    "parameters": {n: float(v) for n, v in zip(names, row, strict=True)},
                }
                for i, row in enumerate(rows)
            ]
            began = time.perf_counter()
            done = pool.map(evaluate, tasks, chunksize=1)
            evaluations.extend(done)
            failed = sum(not r["ok"] for r in done)
            log(
                f"generation {generation + 1}/{settings.generations}: {len(done)} {noun} "
                f"on {cores} workers in {time.perf_counter() - began:.2f} s, "
                f"best misfit {min(r['misfit'] for r in done):.3f} %, {failed} failed"
            )
            return [r["misfit"] for r in done]

        result = ga.optimise(batch, low, high, settings)
        # workers end on the pool's sentinels: its terminate() (the with block's exit)
        # signals workers, one of which may hold the task queue's lock, and the pool
        # then waits for the other forever
        pool.close()
        pool.join()
    return {
        "wall_time": time.perf_counter() - start,
        "evaluations": evaluations,
        "best": dict(zip(names, (float(v) for v in result.best), strict=True)),
        "best_misfit": result.best_fitness,
        "history": result.history,
    }


def with_baseline(
    task: dict, measured: Callable[[dict], dict], baseline: Callable[[dict], dict]
) -> dict:
    """An evaluation and its baseline (the same analysis without field output, in the
    evaluation's folder + ``-baseline``) back to back, the order alternating with the
    evaluation's number: the evaluation's record, with the baseline's times, increments and
    bytes under ``baseline`` (None when the baseline failed).

    Both see the same state of the machine, which two jobs minutes apart do not: the
    difference is what the output costs (``paired_baseline``).
    """
    odd = int(task["label"][-3:]) % 2
    quiet_task = {**task, "folder": task["folder"] + "-baseline"}
    runs = ((measured, task), (baseline, quiet_task))
    done = [run(t) for run, t in (runs if odd else runs[::-1])]
    record, quiet = (done[0], done[1]) if odd else (done[1], done[0])
    keep = ("cpu_time", "sys_time", "eval_time", "increments", "bytes")
    record["baseline"] = {k: quiet[k] for k in keep} if quiet.get("ok") else None
    return record


# ---------------------------------------------------------------- what a run reports


def run_metrics(outcome: dict) -> list[dict]:
    """What every GA run reports, whatever evaluates an individual.

    The increments a solver took per evaluation are the unit the fidelity check
    compares output per (tierbench.fidelity): ccx cuts back where the proxy does not.
    """
    evals = outcome["evaluations"]
    ok = [e for e in evals if e["ok"]]
    found = [
        metric("wall_time", outcome["wall_time"], "s"),
        metric("evaluations", len(evals), "evaluations"),
        metric("failed_evaluations", len(evals) - len(ok), "evaluations"),
        metric("eval_time_median", statistics.median(e["eval_time"] for e in evals), "s"),
        metric("eval_cpu_time_median", statistics.median(e["cpu_time"] for e in evals), "s"),
    ]
    if ok:
        increments = statistics.median(e["increments"] for e in ok)
        found.append(metric("solver_increments_median", increments, "increments"))
    paired = [e for e in ok if e.get("baseline")]
    if paired:  # paired_baseline: the compute, and the output's cost per increment, in the job
        eval_time = statistics.median(e["baseline"]["eval_time"] for e in paired)
        found.append(metric("eval_time_baseline_median", eval_time, "s"))
        for name, key in (("output_cost_per_increment", "cpu_time"),
                          ("output_cost_per_increment_wall", "eval_time"),
                          ("output_kernel_cost_per_increment", "sys_time")):  # fmt: skip
            costs = [(e[key] - e["baseline"][key]) / e["increments"] for e in paired]
            found.append(metric(name, statistics.median(costs), "s"))
            if key == "cpu_time" and len(costs) > 1:
                found.append(metric(f"{name}_se", median_error(costs), "s"))
    return found


def median_error(values: list[float]) -> float:
    """The standard error of the values' median: the job's cost per increment is known only
    as well as its evaluations agree. 1.2533 sigma / sqrt(n) for normal values, sigma from
    the median absolute deviation: the difference of two analyses of a few seconds each
    is mostly their noise, with the odd outlier a standard deviation would follow."""
    found = np.asarray(values, dtype=float)
    spread = 1.4826 * np.median(np.abs(found - np.median(found)))
    return float(1.2533 * spread / np.sqrt(found.size))


def kernel_time() -> float:
    """This process's CPU time in the kernel so far: an evaluation's share of it holds its
    system calls and page faults, the file system's work among them (the rest of its CPU
    time is the solve and formatting the output)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_stime


def written_metrics(evals: list[dict]) -> list[dict]:
    """Bytes and files the evaluations left on the tier, in all and per evaluation; and per
    increment, over the evaluations that finished: their bytes over their increments. ccx
    cuts back on some individuals and not on others, so the bytes of all evaluations over
    the median evaluation's increments is not what one increment writes."""
    found = [
        metric("bytes_written", sum(e["bytes"] for e in evals), "B"),
        metric("bytes_per_evaluation", statistics.median(e["bytes"] for e in evals), "B"),
        metric("files_written", sum(e["files"] for e in evals), "files"),
        metric("files_per_evaluation", statistics.median(e["files"] for e in evals), "files"),
    ]
    finished = [e for e in evals if e["ok"] and e.get("increments")]
    if finished:
        increments = sum(e["increments"] for e in finished)
        per_increment = sum(e["bytes"] for e in finished) / increments
        found.append(metric("bytes_per_increment", per_increment, "B"))
    return found


def fit_metrics(outcome: dict) -> list[dict]:
    """The best fit found and its error against the known truth (none when every run failed)."""
    if not math.isfinite(outcome["best_misfit"]):
        return []
    metrics = [metric("best_misfit", outcome["best_misfit"], "%")]
    for name, value in outcome["best"].items():
        truth = getattr(TRUTH, name)
        metrics.append(metric(f"best_{name}", value, UNITS[name]))
        metrics.append(metric(f"error_{name}", 100.0 * (value - truth) / truth, "%"))
    return metrics


def _json_value(value):
    if isinstance(value, dict):
        return {k: _json_value(v) for k, v in value.items()}
    if isinstance(value, float):
        return round(value, 9) if math.isfinite(value) else None
    return value


def keep_outcome(job: Job, outcome: dict, cpus: int, leave_out: tuple[str, ...] = ()) -> None:
    """The run's fit and every evaluation (but the ``leave_out`` keys) in the job's record."""
    job.extra["truth"] = {n: getattr(TRUTH, n) for n in BOUNDS}
    job.extra["best"] = outcome["best"]
    job.extra["history"] = outcome["history"]
    job.extra["cpus"] = cpus
    job.extra["evaluations"] = [
        {k: _json_value(v) for k, v in e.items() if k not in leave_out}
        for e in outcome["evaluations"]
    ]


def page_cache_rule(workload: str, planned: Callable[[dict], int]):
    """fe_proxy's and calculix's rule: each evaluation's folder, written buffered and deleted
    after it (calculix's run of a user's deck, written buffered too), its peak on the tier
    (``planned``, the workload's planned_bytes) against the dirty limit."""

    def rule(params: dict, limits: dict | None) -> dict:
        if str(params.get("fsync", "none")) != "none":
            return pagecache.result(
                pagecache.DEVICE, f"{workload} fsyncs its output (fsync: {params['fsync']})"
            )
        whose = "its deck's run" if params.get("deck") else "the evaluations at once"
        what = f"{workload} buffered output (no fsync) of {whose}"
        return pagecache.buffered_write(what, int(planned(params)), limits)

    return rule
