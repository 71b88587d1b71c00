"""Item 11: does capping STREAM's arrays to a few seconds a run change what it measures?

A VM that reports a 480 MiB last-level cache makes STREAM's rule (each array 4x
all caches) 1,920 MiB an array: 19 s a run. The workload caps the arrays where
a run would pass ``RUN_BUDGET_S`` (tierbench.workloads.stream.plan_arrays). Here
both sizes run on this machine as the workload's job, with the sizes that cache
report would give (``REPORTED`` below, whatever this machine's own cache is),
alternating, round after round: the capped run's triad over the rule's, median
of the per-round ratios, with its 95 % bootstrap interval against 0.95-1.05; and
the capped run's time (goal: at most 5 s). Where the machine's real cache is
smaller than the capped arrays, the two should read the same memory bandwidth.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from harness import TIER, job_spec, log, rotated, row, within
from tierbench.runner import run_job
from tierbench.workloads import stream

MiB = 1 << 20
#: the last-level cache the issue's machine reported
REPORTED = 480 * MiB
SIZES = {
    "full": {"rounds": 20, "reported": REPORTED, "threads": 2},
    # the smallest reported cache whose rule passes the budget on one thread: a few seconds
    "tiny": {"rounds": 1, "reported": 48 * MiB, "threads": 1},
}
KINDS = ("capped", "rule")


def elements_of(size: dict) -> dict[str, int]:
    """Elements per array: as the workload caps them for the reported cache, and the rule's."""
    params = {"threads": size["threads"], "ntimes": 10}
    capped, why = stream.plan_arrays(params, size["reported"], size["threads"], None)
    rule = stream.array_elements(params, size["reported"])
    if why is None or capped >= rule:
        raise RuntimeError(f"no cap at a reported {size['reported'] // MiB} MiB cache")
    return {"capped": capped, "rule": rule}


def one_run(elements: int, threads: int) -> tuple[float, float]:
    """The triad's best rate (MB/s) and the job's wall time (s) of one STREAM job."""
    # sizes from the reported cache, not this machine's: held only to the workload's own
    # floor for a cap (three arrays together larger than this machine's caches), not to
    # STREAM's rule for its cache, which a 105 MiB cache puts above the tiny capped size
    params = {
        "threads": threads, "ntimes": 10, "array_size": elements,
        "llc_factor": 1 / stream.ARRAYS,
    }  # fmt: skip
    spec = job_spec("stream", "stream_cap", params, TIER, "void", tier="void")
    record = run_job(spec, stream.run)
    found = {m["metric"]: m["value"] for m in record["metrics"] if m["status"] == "ok"}
    if "triad_bandwidth" not in found:
        raise RuntimeError(f"STREAM failed: {record['metrics']}")
    return found["triad_bandwidth"], record["duration_s"]


def measure(mode: str, scratch: Path, goal) -> list[dict]:
    size = SIZES[mode]
    ratio_goal, time_goal = goal
    elements = elements_of(size)
    found = {kind: {"rate": [], "seconds": []} for kind in KINDS}
    one_run(elements["capped"], size["threads"])  # warm-up, not counted
    for round_ in range(size["rounds"]):
        for kind in rotated(KINDS, round_):
            rate, seconds = one_run(elements[kind], size["threads"])
            found[kind]["rate"].append(rate)
            found[kind]["seconds"].append(seconds)
        log(
            f"11 round {round_ + 1}: triad capped {found['capped']['rate'][-1]:,.0f} MB/s in "
            f"{found['capped']['seconds'][-1]:.1f} s, rule {found['rule']['rate'][-1]:,.0f} MB/s "
            f"in {found['rule']['seconds'][-1]:.1f} s"
        )
    ratios = [a / b for a, b in zip(found["capped"]["rate"], found["rule"]["rate"], strict=True)]
    sizes = {k: f"{v * stream.ELEMENT_BYTES // MiB} MiB" for k, v in elements.items()}
    where = f"{size['reported'] // MiB} MiB reported, arrays {sizes['capped']} vs {sizes['rule']}"
    return [
        row(
            11, "stream_cap_triad", f"STREAM triad, capped / rule's arrays, {where}", "ratio",
            ratios, ratio_goal,
            f"{within(ratios, 0.95, 1.05)}; medians "
            f"{statistics.median(found['capped']['rate']):,.0f} and "
            f"{statistics.median(found['rule']['rate']):,.0f} MB/s",
            capped_mb_s=found["capped"]["rate"], rule_mb_s=found["rule"]["rate"],
        ),
        row(
            11, "stream_cap_seconds", f"STREAM job with capped arrays, {where}", "s",
            found["capped"]["seconds"], time_goal,
            f"the rule's arrays: median {statistics.median(found['rule']['seconds']):.1f} s a run",
            rule_seconds=found["rule"]["seconds"],
        ),
    ]  # fmt: skip
