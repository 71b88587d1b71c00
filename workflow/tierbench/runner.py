"""Run one repetition of one point and write its raw JSON record.

Every workload module exposes ``run(job: Job) -> list[dict]`` (metric dicts
from :mod:`tierbench.records`) and calls :func:`main` from its ``__main__``
block. The runner owns what all workloads share: the run folder on the tier,
the probe of the node the job runs on, timing, and turning expected failures
(not applicable, skipped, tier full) into records a reader sees in the report
instead of a failed job.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from . import cluster, mounts, probe
from .errors import PointFailed, PointNotApplicable, PointSkipped
from .records import FAILED, NOT_APPLICABLE, SKIPPED, no_value, utc_now
from .rundir import RunFolder, sweep_stale


@dataclass
class Job:
    """What a workload needs to run one repetition of a point."""

    spec: dict
    folder: RunFolder | None
    extra: dict = field(default_factory=dict)

    @property
    def params(self) -> dict:
        return self.spec["params"]

    @property
    def tier_path(self) -> str:
        return self.spec["tier_path"]

    @property
    def max_bytes(self) -> int | None:
        return self.spec.get("max_bytes")

    def log(self, message: str) -> None:
        """Progress line on stderr (the rule's log), with a timestamp."""
        print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def run_job(spec: dict, run: Callable[[Job], list[dict]]) -> dict:
    """Run one job; returns the raw record (spec, context, metrics, timing)."""
    label = f"{spec['experiment']}-{spec['tier']}-rep{spec['repetition']}"
    started_at, start = utc_now(), time.perf_counter()
    context = probe.job_context(spec["tier_path"])
    job = Job(spec=spec, folder=None)
    try:
        wrong_partition = cluster.partition_problem(
            spec.get("slurm_partition"), f"tier {spec['tier']}"
        )
        if wrong_partition:
            raise PointFailed(wrong_partition)
        if spec["tier_class"] == "void":
            metrics = run(job)
        elif spec.get("backing_path"):
            # a view of another tier (bindfs, mount --bind): mounted for this job only
            for stale in mounts.sweep_stale_mounts(spec["tier_path"]):
                job.log(f"unmounted {stale}, left mounted by an interrupted run")
            for path in (spec["tier_path"], spec["backing_path"]):
                for stale in sweep_stale(path):
                    job.log(f"removed {stale}, left by an interrupted run")
            with mounts.MountedFolder(spec, label, job.log) as folder:
                job.folder = folder
                job.extra["mount"] = folder.record
                job.log(f"run folder {folder.path}, mounted from {folder.record['backing_folder']}")
                metrics = run(job)
        else:
            # A run killed earlier (SIGKILL, node failure) left its folder; a re-run
            # does not repeat the preflight, so every job sweeps its tier first.
            for stale in sweep_stale(spec["tier_path"]):
                job.log(f"removed {stale}, left by an interrupted run")
            with RunFolder(spec["tier_path"], label) as folder:
                job.folder = folder
                job.log(f"run folder {folder.path}")
                metrics = run(job)
    except PointNotApplicable as error:
        metrics = [no_value(NOT_APPLICABLE, str(error))]
    except PointSkipped as error:
        metrics = [no_value(SKIPPED, str(error))]
    except PointFailed as error:
        metrics = [no_value(FAILED, str(error))]
    except OSError as error:
        if error.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EROFS):
            raise
        metrics = [no_value(FAILED, f"{os.strerror(error.errno)}: {error.filename or ''}")]
    for metric in metrics:
        if metric["status"] != "ok":
            job.log(f"point {metric['status']}: {metric['reason']}")
    return {
        "spec": spec,
        "context": context,
        "started_at": started_at,
        "duration_s": round(time.perf_counter() - start, 6),
        "metrics": metrics,
        "extra": job.extra,
    }


def main(run: Callable[[Job], list[dict]], argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run one repetition of one tierbench point.")
    parser.add_argument("--spec", required=True, help="the point as JSON (from the pipeline)")
    parser.add_argument("--out", required=True, help="raw JSON record to write")
    args = parser.parse_args(argv)
    spec = json.loads(args.spec)
    record = run_job(spec, run)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    tmp.replace(out)
    return 0
