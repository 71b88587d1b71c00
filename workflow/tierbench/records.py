"""One tidy record per measured value, the same columns for every workload."""

from __future__ import annotations

import functools
import math
import resource
import time
from datetime import UTC, datetime

#: Columns of results/<study>/results.csv, in order. Workload parameters
#: (block_size, write_interval, cores, ...) go between ``host`` and
#: ``repetition``; which ones depends on the study.
LEADING_COLUMNS = ["study", "experiment", "workload", "tier", "tier_class", "host", "point"]
TRAILING_COLUMNS = [
    "repetition",
    "phase",
    "metric",
    "value",
    "unit",
    "status",
    "reason",
    "started_at",
    "duration_s",
    "slurm_job_id",
]

#: Status of a point: measured, or why there is no number.
OK, NOT_APPLICABLE, SKIPPED, FAILED = "ok", "not_applicable", "skipped", "failed"


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def metric(name: str, value: float, unit: str) -> dict:
    """A measured value; refuses NaN and infinities so a bad parse cannot pass as a number."""
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"metric {name} is not a finite number: {value}")
    return {"metric": name, "value": value, "unit": unit, "status": OK, "reason": ""}


def no_value(status: str, reason: str) -> dict:
    """A point that has no number, with the reason a reader will see in the report."""
    if status not in (NOT_APPLICABLE, SKIPPED, FAILED):
        raise ValueError(f"unknown status {status!r}")
    return {"metric": "status", "value": math.nan, "unit": "", "status": status, "reason": reason}


#: the metrics of :func:`whole_run_timed`
JOB_TIME = "job_time"
JOB_CPU_TIME = "job_cpu_time"
#: a run's CPU time in processes that are not this one's children (an srun step's ranks),
#: as they report it themselves: added to its ``job_cpu_time``
CPU_TIME_ELSEWHERE = "cpu_time_elsewhere"


def cpu_seconds() -> float:
    """User and system CPU time of this process and the children it has waited for."""
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def whole_run_timed(run, cpu: bool = True):
    """``run(job)`` that also reports its own wall time as ``job_time`` (s): the span over
    which a traced run counts the job's calls, setup and all (a case copied, meshed and
    decomposed as well as solved), so that its time and its calls are of the same work.
    With ``cpu``, its CPU time over the same span (``job_cpu_time``, s: its own, its
    children's and what ``run`` reports as ``cpu_time_elsewhere``), the time a slow tier's
    waits do not add to (tierbench.predict); without, for a run whose processes cannot tell."""

    @functools.wraps(run)
    def timed(job):
        start, used = time.perf_counter(), cpu_seconds()
        metrics = run(job)
        if metrics and all(m["status"] == OK for m in metrics):
            metrics = [*metrics, metric(JOB_TIME, time.perf_counter() - start, "s")]
            if cpu:
                elsewhere = sum(m["value"] for m in metrics if m["metric"] == CPU_TIME_ELSEWHERE)
                metrics.append(metric(JOB_CPU_TIME, cpu_seconds() - used + elsewhere, "s"))
        return metrics

    return timed
