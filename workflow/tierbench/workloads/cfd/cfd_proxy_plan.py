"""The CFD proxy's parameters and what they plan: defaults and checks, its sizes, writes
and bytes per write, tasks and runtime, and the compute of a step (given, or its
application's, taken from the run just before or timed in the job).
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

from ... import compute
from ...job import Job
from ...records import utc_now
from ...rundir import RunFolder
from ...schemas import complete, schema_defaults
from ...units import parse_size
from . import foam, openfoam, openfoam_plan
from .cfd_launch import (
    check_write_interval,
    write_interval,
)

#: the schema's defaults, for callers that pass a point's parameters as written
DEFAULTS = schema_defaults("cfd_proxy")
START_TIMEOUT_S = 300.0
#: runs of the application a ``from_application`` target is the median of
APPLICATION_TIMINGS = 3


def with_defaults(params: dict) -> dict:
    return {**DEFAULTS, **params}


def cells_per_rank(params: dict) -> int:
    """Cells of each rank: given, or from the bytes a rank writes per write."""
    if "cells_per_rank" in params:
        return int(params["cells_per_rank"])
    p = with_defaults(params)
    per_cell = foam.approx_bytes_per_cell(p["write_format"], p["file_set"])
    return max(1, parse_size(params["bytes_per_rank"]) // per_cell)


def check_params(params: dict) -> None:
    """What the schema cannot say; types, ranges and the one-of size keys are the schema's."""
    check_write_interval(params)
    if with_defaults(params)["compute_per_cell_step"] == compute.FROM_APPLICATION:
        # the application must be able to mesh this shape
        openfoam_plan.check_params(application_params(params))


def compute_target(params: dict) -> float | None:
    """Seconds of compute per step of each rank; None: the application's, measured in the job."""
    p = with_defaults(params)
    per_cell = compute.seconds(p["compute_per_cell_step"])
    return None if per_cell is None else per_cell * cells_per_rank(p)


def application_params(params: dict) -> dict:
    """The openfoam point of the same shape, steps and warm-up, without writes."""
    p = with_defaults(params)
    shape = {k: p[k] for k in ("ranks", "steps", "warmup_steps")}
    return complete(
        "openfoam",
        {**shape, "cells_per_rank": cells_per_rank(p), "ensemble": 1, "write_interval": "none"},
    )


def application_key(params: dict) -> str:
    """What the application's time per step holds for: one member's shape, steps, warm-up."""
    a = application_params(params)
    return f"application {a['ranks']}x{a['cells_per_rank']} {a['steps']}+{a['warmup_steps']} steps"


def application_step_time(job: Job) -> tuple[float, dict]:
    """The application's time per step at the point's shape, without writes, and its record:
    the study's on this node if a point of the shape timed it already, else timed now.

    Shared like the sweeps (:func:`calibration_for`): a point that writes and its no-write
    baseline must do the same compute per step, so their difference is the writes and not
    two runs of the application on a machine whose speed drifts between jobs.
    """
    key = application_key(job.params)
    known = known_calibration(job, key)
    if known is not None:
        seconds = known["time_per_step"]
        job.log(f"application timed earlier in this study on this node: {seconds:.4g} s a step")
        return seconds, {**known["record"], "reused": True}
    job.log("timing the application at this shape, without writes, for the compute per step")
    time_per_step, record = time_application(job)
    keep_calibration(job, key, {"time_per_step": time_per_step, "record": record})
    return time_per_step, record


def partner_step_time(job: Job) -> tuple[float, dict] | None:
    """The application's time per step without writes in the run just before this one (the
    partner the pipeline gives a proxy's repetition), and its record; None: no partner, or
    its record cannot be read. A partner that wrote at every step has no step without
    writes: the application is then timed now, right after it.

    Where a slow spell of a shared machine lasts minutes, a timing kept from the shape's
    first job sets every later job's compute from that spell (target / real 1.3-1.6 in one
    sweep here); the run just before is the application at this job's moment.

    An ensemble's steps are its members' under each other's load, which the proxy's members
    must add themselves: its member alone is taken where it wrote nothing, and otherwise
    the shape's timing (None here).
    """
    path = job.spec.get("partner_record")
    if not path:
        return None
    try:
        record = json.loads(Path(path).read_text())
    except (OSError, ValueError) as error:
        job.log(f"the application's run before this one cannot be read ({error})")
        return None
    params = record["spec"]["params"]
    wrote = params.get("write_interval") not in (None, "none")
    name = "time_per_step_nowrite" if wrote else "time_per_step"
    if int(params.get("ensemble", 1)) > 1:
        if wrote:
            job.log("the application's run just before was an ensemble that wrote")
            return None
        name = "time_per_step_alone"
    values = {m["metric"]: m["value"] for m in record["metrics"] if m.get("status") == "ok"}
    if not values.get(name):
        job.log(f"the application's run just before has no {name}: timing it now")
        seconds, timed = time_application(job)
        return seconds, {**timed, "after_partner": str(path)}
    job.log(f"the application's run just before: {values[name]:.4g} s a step without writes")
    return values[name], {
        "partner": str(path),
        "metric": name,
        "started_at": record.get("started_at"),
    }


def time_application(job: Job) -> tuple[float, dict]:
    """The openfoam workload at the point's shape without writes, run ``APPLICATION_TIMINGS``
    times back to back, each in a run folder of its own inside the job's, then removed: the
    median of their times per step, and its record (every timing, the median one's metrics).

    The median of several runs, because on a shared machine one run can fall in a slow
    minute, and the proxy would then compute that minute's steps in every job of the shape.
    As many iterations as the point has steps: simpleFoam's iterations get cheaper as the
    flow settles, so a shorter run would ask the proxy for more than the run it stands for.
    """
    params = application_params(job.params)
    runs = []
    for i in range(APPLICATION_TIMINGS):
        with RunFolder(job.folder.path, f"application{i}") as folder:
            found = openfoam.run(Job(spec={**job.spec, "params": params}, folder=folder))
        runs.append({m["metric"]: m["value"] for m in found})
        job.log(f"application timing {i + 1}: {runs[-1]['time_per_step']:.4g} s a step")
    runs.sort(key=lambda values: values["time_per_step"])
    values = runs[(len(runs) - 1) // 2]
    return values["time_per_step"], {
        "params": params,
        "metrics": values,
        "timings": [r["time_per_step"] for r in runs],
        "host": socket.gethostname(),
        "timed_at": utc_now(),
    }


def writer_config(params: dict, target: float | None = None) -> dict:
    """What :mod:`tierbench.workloads.cfd.cfd_writer` needs, from the point's parameters
    (``target``: the compute per step, when the point does not give it)."""
    p = with_defaults(params)
    target = compute_target(p) if target is None else target
    return {
        "cells": cells_per_rank(p),
        "steps": p["steps"],
        "write_interval": write_interval(p),
        "file_handler": p["file_handler"],
        "write_format": p["write_format"],
        "purge_write": p["purge_write"],
        "compute_target": target,
        "sweeps": None,  # found by the ranks for compute_target
        "warmup_steps": p["warmup_steps"],
        "baseline_steps": p["baseline_steps"],
        "fsync": bool(p["fsync"]),
        "file_set": p["file_set"],
        **step_extras(p, target),
    }


def step_extras(p: dict, target: float | None) -> dict:
    """The log and fresh memory of each step (cfd_writer's StepExtras): the application's,
    as a part of its time per step, so none where the point computes nothing."""
    if target == 0:
        return {"log_writes": 0, "log_bytes": 0, "fresh_bytes": 0}
    return {
        "log_writes": p["log_writes_per_step"],
        "log_bytes": p["log_bytes_per_step"],
        "fresh_bytes": p["fresh_memory_per_cell_step"] * cells_per_rank(p),
    }


def writes_of(params: dict) -> int:
    interval = write_interval(params)
    return 0 if interval is None else params["steps"] // interval


def bytes_per_write(params: dict) -> int:
    """Bytes all ranks of all members write at one write time (uncollated sizes).

    Exact for the last write time when uncollated; collated files of v1912
    are a little smaller (a block of a rank other than the master has no
    header), apart from each container's header.
    """
    p = with_defaults(params)
    cells, steps = cells_per_rank(p), p["steps"]
    time = foam.time_name(steps)
    member = foam.write_bytes(cells, p["write_format"], time, steps, p["ranks"], p["file_set"])
    return member * p["ensemble"]


def planned_bytes(params: dict) -> int:
    """Bytes on the tier at the peak: every kept time folder of every member.

    With purgeWrite N the newest time is written before the oldest is
    removed, so N + 1 time folders exist for a moment.
    """
    p = with_defaults(params)
    writes = writes_of(p)
    kept = writes if p["purge_write"] == 0 else min(writes, p["purge_write"] + 1)
    # collated blocks add a few bytes of framing per rank and field, and each field's
    # container a header (v1912's names the file's absolute path)
    framing = 64 * len(foam.FIELDS) * p["ranks"] * p["ensemble"]
    if p["file_handler"] == "collated":
        framing += (1024 + 4096) * len(foam.FIELDS) * p["ensemble"]
    return kept * (bytes_per_write(p) + framing)


def created_per_write(params: dict) -> tuple[int, int]:
    """Files and folders one write time creates on the tier, every writer of every member."""
    p = with_defaults(params)
    writers = (p["ranks"] if p["file_handler"] == "uncollated" else 1) * p["ensemble"]
    file_set = p["file_set"]
    return writers * foam.files_per_write(file_set), writers * foam.dirs_per_write(file_set)


def tasks(params: dict) -> int:
    """MPI tasks of the job: every rank of every member runs at once."""
    return int(params["ranks"]) * int(with_defaults(params)["ensemble"])


def runtime_s(params: dict) -> float:
    """A generous guess for a time limit: start-up, then 20 us per cell and step (or the
    compute target, if longer) for the measured, warm-up and baseline steps of every launch
    (member 0 alone first, then the ensemble)."""
    p = with_defaults(params)
    per_step = max(compute_target(p) or 0.0, 20e-6 * cells_per_rank(p))
    steps = sum(int(p.get(key) or 0) for key in ("steps", "warmup_steps", "baseline_steps"))
    return 30 + per_step * steps * (int(p["ensemble"]) + 1)


def nodes(params: dict) -> int | None:
    """Nodes of the job: ``nodes`` for each member, members side by side; None if unset."""
    p = with_defaults(params)
    return int(p["nodes"]) * int(p["ensemble"]) if p.get("nodes") else None


def calibration_file(job: Job) -> Path | None:
    """Where a study's calibrations on this node are kept: one file per host in the study's
    results folder (so nodes never write the same file), or None outside a pipeline run."""
    study = job.spec.get("study_dir")
    return Path(study) / "calibration" / f"{socket.gethostname()}.json" if study else None


def known_calibration(job: Job, key: str) -> dict | None:
    """This study's calibration ``key`` on this node, if a point found it already."""
    path = calibration_file(job)
    if path is None or not path.is_file():
        return None
    try:
        return json.loads(path.read_text()).get(key)
    except (OSError, ValueError):
        return None


def keep_calibration(job: Job, key: str, found: dict) -> None:
    """Record a calibration for the study's later points of the shape on this node."""
    path = calibration_file(job)
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        known = json.loads(path.read_text()) if path.is_file() else {}
    except ValueError:
        known = {}
    known[key] = found
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(known, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)
