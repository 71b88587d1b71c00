"""Run one repetition of one point and write its raw JSON record.

Every workload declares ``run(job: Job) -> list[dict]`` (metric dicts from
:mod:`tierbench.records`) in its registry entry; a job is

    python -m tierbench.runner --plan <study>/plan.json --point fio/worst_case/shm/single \
        --rep 1 --out rep1.json

The runner owns what all workloads share: the run folder on the tier,
the probe of the node the job runs on, timing, and turning expected failures
(not applicable, skipped, tier full) into records a reader sees in the report
instead of a failed job.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

from . import cluster, mounts, pagecache, probe
from .errors import ConfigError, PointFailed, PointNotApplicable, PointSkipped
from .job import Job
from .matrix import plan_spec
from .records import FAILED, NOT_APPLICABLE, SKIPPED, no_value, utc_now
from .rundir import RunFolder, sweep_stale
from .workloads import get


def _run(job: Job, run: Callable[[Job], list[dict]]) -> list[dict]:
    """The workload's run, with its system calls counted when the experiment asks for it."""
    if not job.spec.get("count_syscalls") or get(job.spec["workload"]).traces_itself:
        return run(job)
    from . import syscalls

    return syscalls.counted(job, run, get(job.spec["workload"]).estimate("tasks", job.params))


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
            metrics = _run(job, run)
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
                metrics = _run(job, run)
        else:
            # A run killed earlier (SIGKILL, node failure) left its folder; a re-run
            # does not repeat the preflight, so every job sweeps its tier first.
            for stale in sweep_stale(spec["tier_path"]):
                job.log(f"removed {stale}, left by an interrupted run")
            with RunFolder(spec["tier_path"], label) as folder:
                job.folder = folder
                job.log(f"run folder {folder.path}")
                metrics = _run(job, run)
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
    # could what it measured have stayed in the page cache instead of reaching the device?
    page_cache = pagecache.for_spec(spec, get(spec["workload"]))
    if job.extra.get("page_cache_note"):
        # what the workload found only while running (STREAM's capped arrays), where the
        # summary tables carry a point's caveats
        page_cache["page_cache_reason"] += "; " + job.extra["page_cache_note"]
    return {
        "spec": spec,
        "context": context,
        "started_at": started_at,
        "duration_s": round(time.perf_counter() - start, 6),
        "metrics": metrics,
        "extra": job.extra,
        "page_cache": page_cache,
    }


class Stopped(BaseException):
    """SIGTERM reached the job: its Slurm allocation ended (time limit, ``scancel``, a node
    lost) or Snakemake was stopped. A BaseException, so no workload's handler turns it into
    a measured or failed point: the repetition has no result and the next run measures it."""


def stop_on_sigterm() -> None:
    """Turn SIGTERM into :class:`Stopped`, so the run folder on the tier is removed on the
    way out and the log's last line says why the point has no record. Only in the runner:
    a worker it forks (a process pool's) inherits the handler, and a pool ends its
    workers with SIGTERM, where an exception raised while holding the pool's queue lock
    left the next worker waiting for it forever."""

    runner = os.getpid()

    def stop(signum, frame):
        if os.getpid() != runner:  # a forked worker (a pool's) ends as it would have
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        raise Stopped()

    signal.signal(signal.SIGTERM, stop)


STOPPED_MESSAGE = (
    "stopped by SIGTERM before this repetition finished: its Slurm allocation ended (time "
    "limit, scancel or a lost node) or the run was stopped. It has no record; the same "
    "command again measures it and what else has no result yet."
)


def load_spec(args: argparse.Namespace) -> dict:
    if args.spec is not None:
        return json.loads(args.spec)
    try:
        plan = json.loads(Path(args.plan).read_text())
    except (OSError, ValueError) as error:
        raise SystemExit(f"cannot read the plan {args.plan}: {error}") from None
    return plan_spec(plan, args.point, args.rep)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run one repetition of one tierbench point.")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--plan", help="the study's plan.json (from the pipeline)")
    source.add_argument("--spec", help="instead of --plan and --point: the whole spec as JSON")
    parser.add_argument("--point", help="workload/experiment/tier/point, a key of the plan")
    parser.add_argument("--rep", type=int, default=1, help="repetition (0 is the warm-up)")
    parser.add_argument("--launcher", help="MPI launcher of an MPI workload (mpiexec, srun ...)")
    parser.add_argument(
        "--member-nodes",
        type=int,
        help="under Slurm: nodes of its own each member of an MPI point spans",
    )
    parser.add_argument(
        "--partner", help="a proxy's: its application's record of the run just before its own"
    )
    parser.add_argument("--out", required=True, help="raw JSON record to write")
    args = parser.parse_args(argv)
    if args.plan and not args.point:
        parser.error("--plan needs --point")
    try:
        spec = load_spec(args)
    except ConfigError as error:
        raise SystemExit(str(error)) from None
    if args.launcher:
        spec["launcher"] = args.launcher
    if args.member_nodes:
        spec["member_nodes"] = args.member_nodes
    if args.partner:
        spec["partner_record"] = args.partner
    out = Path(args.out)
    # beside the record, so on the file system the cluster's nodes share for the workflow
    spec["control_dir"] = str(out.with_name(f".{out.stem}.control"))
    if args.plan:
        # the study's results folder: what its points share on a node (a proxy's calibration)
        spec["study_dir"] = str(Path(args.plan).parent)
    stop_on_sigterm()
    try:
        record = run_job(spec, get(spec["workload"]).run)
    except Stopped:
        where = f"{spec['experiment']} on {spec['tier']}"
        print(f"tierbench: {where}: {STOPPED_MESSAGE}", file=sys.stderr)
        return 128 + signal.SIGTERM
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    tmp.replace(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
