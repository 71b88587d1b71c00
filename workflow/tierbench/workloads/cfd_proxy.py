"""cfd_proxy: an OpenFOAM-style MPI solver writing its results (document 001).

One job runs one point: ``ensemble`` independent simulations of ``ranks``
ranks each, started together on the same tier, each in its own case folder
of the run folder (``member<i>/processor<rank>/<time>/...``). Each simulation
is one launch of :mod:`tierbench.cfd_writer` through the launcher Snakemake
gives the rule as its ``mpi`` resource (``mpiexec`` here, ``srun --mpi=pmix``
under Slurm). The launches wait at a start gate until all of them are up, so
their measured steps overlap.

What a write puts on disk is ``file_set``'s (:mod:`tierbench.foam`):
``v1912`` (the default) the 9 files per rank per write of OpenFOAM v1912's
simpleFoam, sized as the openfoam workload's duct of the same cells per rank
writes them (boundary patches included), or ``document_001`` the 8 files
document 001 lists, for a study that reproduces the document's own file
count (cfd_dcpmm).

How much a step computes is the application's time per step at that shape,
not a count of the proxy's own work: ``compute_per_cell_step`` seconds per
cell and step (by default simpleFoam's, as measured on the machine the schema
names) times ``cells_per_rank``, or with ``from_application`` the time per
step of the openfoam workload at the same shape without writes: the run just
before this one where the pipeline gives one (:func:`partner_step_time`), else
the median of three runs by the study's first job of the shape
(:func:`application_step_time`).
The ranks turn that target into Jacobi sweeps on the node
(:mod:`tierbench.cfd_writer`); an ensemble's members get the sweeps a launch
of one member's shape found alone first, so a member computes what one
application run would. Each record holds the target
(``compute_target_per_step``), the sweeps and the compute time its measured
steps took (``compute_per_step``).

A point with ``write_interval: none`` is the no-I/O baseline: the same solver
with no writes. The figures derive the I/O bandwidth as document 001 does,
bytes written per step / (time per step - time per step without I/O),
pairing each point with the baseline of the same tier, ranks and ensemble.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from .. import compute, foam, native, syscalls
from ..errors import PointFailed, PointNotApplicable
from ..job import Job
from ..records import metric, utc_now
from ..rundir import RunFolder
from ..schemas import complete, schema_defaults
from ..units import parse_size
from . import Pair, Tool, Workload, openfoam
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

#: the schema's defaults, for callers that pass a point's parameters as written
DEFAULTS = schema_defaults("cfd_proxy")
START_TIMEOUT_S = 300.0
#: runs of the application a ``from_application`` target is the median of
APPLICATION_TIMINGS = 3
#: where Open MPI 4 (orte) and 5 (prrte) put a launch's session folder
#: the rounds of launches of a job: the ensemble's members, and member 0 alone before them
MEMBER, ALONE = "member", "alone"


def with_defaults(params: dict) -> dict:
    return {**DEFAULTS, **params}


def write_interval(params: dict) -> int | None:
    """Steps between writes, or None for the no-I/O baseline."""
    value = params["write_interval"]
    return None if value == "none" else int(value)


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
        openfoam.check_params(application_params(params))


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
    """What :mod:`tierbench.cfd_writer` needs, from the point's parameters (``target``: the
    compute per step, when the point does not give it)."""
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


def control_folder(job: Job) -> Path:
    """Where the launches' start gate and results go: a folder every rank sees.

    That is the run folder on the tier, unless the ranks span nodes of a
    node-local tier: then a folder beside the job's record, which the
    cluster's nodes share as they share the workflow's results.
    """
    shared = job.spec.get("tier_shared") or not spans_nodes(job)
    if shared or not job.spec.get("control_dir"):
        return job.folder.path
    return Path(job.spec["control_dir"])


def clear_control_folder(job: Job) -> None:
    """Remove the control folder where it is not the run folder (that one goes with the run)."""
    control = control_folder(job)
    if control != job.folder.path:
        shutil.rmtree(control, ignore_errors=True)


def start_members(
    job: Job, launcher: str, config: dict, p: dict, members: list, label: str = MEMBER
) -> None:
    """Start one launch per ensemble member; ``members`` gets each as soon as it runs.

    Concurrent ``mpiexec`` (Open MPI 4) race to make the same session folder
    in /tmp ("mkdir ... File exists" and orte_init fails), so each launch gets
    a private one in the system's temp folder, never on the tier measured.
    ``label`` names the round: ``alone`` is member 0 run by itself before the
    ensemble (:func:`run_alone`), in case, log and gate folders of its own.
    """
    folder = job.folder.path
    control = control_folder(job)
    gate = control / f"gate-{label}"
    gate.mkdir(parents=True)
    local = not under_slurm()
    env, added = launch_env(launcher, local)
    own_session = os.path.basename(shlex.split(launcher)[0]) in OPEN_MPI_LAUNCHERS
    if own_session:
        added = {**added, SESSION_VARS[0]: "<a private temp folder per launch>"}
    job.extra.update({"launcher": launcher, "launcher_env": added, "local": local})
    for i in range(1 if label == ALONE else p["ensemble"]):
        command = [
            *launch_command(launcher, p["ranks"], p["ensemble"], local, member_nodes(job), i),
            *syscalls.rank_prefix(job),
            sys.executable, "-m", "tierbench.cfd_writer",
            "--case", str(folder / f"{label}{i}"),
            "--config", json.dumps(config, sort_keys=True),
            "--out", str(control / f"result-{label}{i}.json"),
            "--gate", str(gate),
            "--name", str(i),
            "--run-folder", str(folder),
        ]  # fmt: skip
        session = tempfile.mkdtemp(prefix="tierbench-mpi-") if own_session else None
        member_env = {**env, **dict.fromkeys(SESSION_VARS, session)} if session else env
        member = {
            "index": i,
            "label": label,
            "command": command,
            "session": session,
            "process": None,
            "reader": None,
        }
        members.append(member)
        try:
            member["process"] = subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=member_env
            )
        except FileNotFoundError:
            raise PointFailed(f"the mpi launcher {command[0]!r} is not installed") from None
        member["reader"] = threading.Thread(
            target=copy_output,
            args=(member["process"].stdout, folder / f"{label}{i}.log"),
            daemon=True,
        )
        member["reader"].start()
    job.extra["commands"] = [shlex.join(m["command"]) for m in members]


def calibration_file(job: Job) -> Path | None:
    """Where a study's calibrations on this node are kept: one file per host in the study's
    results folder (so nodes never write the same file), or None outside a pipeline run."""
    study = job.spec.get("study_dir")
    return Path(study) / "calibration" / f"{socket.gethostname()}.json" if study else None


def calibration_key(config: dict, p: dict) -> str:
    """What a sweep count holds for: the ranks of one member, its cells, its target, and
    what else its step does."""
    extras = f"log {config['log_writes']}/{config['log_bytes']} B, fresh {config['fresh_bytes']} B"
    return f"{p['ranks']}x{config['cells']}@{config['compute_target']:.6g} ({extras})"


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


def calibration_for(job: Job, launcher: str, config: dict, p: dict) -> dict:
    """The sweeps per step of the point's target: the study's on this node, else found now.

    Every point of a study on one node with the same target does the same work
    per step, so the difference between a point that writes and one that does
    not is the writes, not two calibrations' noise; the first point of a shape
    finds it. A target taken from the run just before (:func:`partner_step_time`)
    is its job's own: :func:`run` then calibrates alone and keeps nothing, as no
    later point asks for the same target.
    """
    key = calibration_key(config, p)
    known = known_calibration(job, key)
    if known is not None:
        job.log(f"calibrated earlier in this study on this node: {known['sweeps']} sweeps per step")
        return {**known, "reused": True}
    found = calibrate_alone(job, launcher, config, p)
    keep_calibration(job, key, found)
    return found


def calibrate_alone(job: Job, launcher: str, config: dict, p: dict) -> dict:
    """The sweeps per step for ``config``'s target, found by one launch of a member's shape
    before the members start. Side by side, each member would find what the node gives it
    under the others' load, and would then compute less than one application run does."""
    folder, control = job.folder.path, control_folder(job)
    control.mkdir(parents=True, exist_ok=True)
    out, log_path = control / "calibration.json", folder / "calibration.log"
    local = not under_slurm()
    env, _ = launch_env(launcher, local)
    own_session = os.path.basename(shlex.split(launcher)[0]) in OPEN_MPI_LAUNCHERS
    session = tempfile.mkdtemp(prefix="tierbench-mpi-") if own_session else None
    if session:
        env = {**env, **dict.fromkeys(SESSION_VARS, session)}
    command = launch_command(launcher, p["ranks"], p["ensemble"], local, member_nodes(job), 0) + [
        sys.executable, "-m", "tierbench.cfd_writer", "--calibrate",
        "--case", str(folder / "calibration"),
        "--config", json.dumps(config, sort_keys=True),
        "--out", str(out),
    ]  # fmt: skip
    try:  # its output through a pipe, as the members' is, kept in the log once it ends
        done = subprocess.run(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            timeout=START_TIMEOUT_S,
        )
        log_path.write_bytes(done.stdout)
    except FileNotFoundError:
        raise PointFailed(f"the mpi launcher {command[0]!r} is not installed") from None
    except subprocess.TimeoutExpired:
        raise PointFailed(f"the calibration took longer than {START_TIMEOUT_S:.0f} s") from None
    finally:
        if session:
            shutil.rmtree(session, ignore_errors=True)
    output = log_path.read_text(errors="replace")
    if done.returncode != 0 or not out.exists():
        raise PointFailed(
            f"the calibration launch exited with {done.returncode}: {_last_error(output)}"
        )
    found = json.loads(out.read_text())
    out.unlink()
    job.log(f"calibrated alone: {found['sweeps']} sweeps per step ({shlex.join(command)})")
    return found


def run_alone(job: Job, launcher: str, config: dict, p: dict) -> dict:
    """Member 0 by itself, launched as in the ensemble, just before it: its result.

    The single run an ensemble's time per step is set against, back to back with
    it in one job, so the drift of a shared machine between jobs cancels in the
    ratio. Its case is removed before the ensemble starts.
    """
    members: list[dict] = []
    try:
        start_members(job, launcher, config, p, members, ALONE)
        open_gate(job, members)
        (result,) = collect(job, members)
    finally:
        stop(members)
    check_counts([result], p)
    shutil.rmtree(job.folder.path / f"{ALONE}0", ignore_errors=True)
    job.log(f"member 0 alone: {result['time_per_step']:.4g} s per step")
    return result


def open_gate(job: Job, members: list[dict]) -> None:
    """Let every member start its measured steps once all of them are ready."""
    gate = control_folder(job) / f"gate-{members[0]['label']}"
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        ready = sum((gate / f"ready-{m['index']}").exists() for m in members)
        if ready == len(members):
            break
        if any(m["process"].poll() is not None for m in members):
            break  # one ended before starting: collect() reports why
        if time.monotonic() > deadline:
            raise PointFailed(f"only {ready} of {len(members)} launches started in time")
        time.sleep(0.005)
    (gate / "go").touch()
    job.log(f"{len(members)} launch(es) of {members[0]['command'][0]} started together")


def stop(members: list[dict]) -> None:
    """End what still runs, close the logs, remove the MPI session folders (idempotent)."""
    running = [m["process"] for m in members if m["process"] is not None]
    for process in running:
        if process.poll() is None:
            process.terminate()
    for process in running:
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    for m in members:
        if m["reader"] is not None:
            m["reader"].join()
        if m["session"]:
            shutil.rmtree(m["session"], ignore_errors=True)


def collect(job: Job, members: list[dict]) -> list[dict]:
    results, failures = [], []
    for m in members:
        m["process"].wait()
        m["reader"].join()
    folder, control = job.folder.path, control_folder(job)
    for m in members:
        i, code, label = m["index"], m["process"].returncode, m["label"]
        output = (folder / f"{label}{i}.log").read_text(errors="replace").strip()
        if output:
            job.log(f"{label} {i} output:\n{output[-2000:]}")
        out = control / f"result-{label}{i}.json"
        result = json.loads(out.read_text()) if out.exists() else None
        if result and result["problems"]:
            failures.append(f"{label} {i}: " + "; ".join(result["problems"]))
        elif code != 0 or result is None:
            failures.append(f"{label} {i} exited with {code}: {_last_error(output)}")
        else:
            results.append(result)
    if failures:
        raise PointFailed(" | ".join(failures))
    return results


def _last_error(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    for line in reversed(lines):
        if "Error" in line or "error" in line:
            return line.strip()[-300:]
    return (lines[-1].strip()[-300:]) if lines else "no output"


def ensemble_metrics(results: list[dict], p: dict) -> list[dict]:
    """Ensemble averages of the members' times; totals of bytes, files and folders."""

    def mean(key: str) -> float | None:
        values = [r[key] for r in results if r.get(key) is not None]
        return sum(values) / len(values) if values else None

    writes = results[0]["writes"]
    found = [
        metric("compute_per_step", mean("compute_per_step"), "s"),
        metric("sweeps_per_step", results[0]["sweeps"], "sweeps"),
        metric("time_per_step", mean("time_per_step"), "s"),
        metric("time_per_step_max_member", max(r["time_per_step"] for r in results), "s"),
        metric("run_time", mean("loop_time"), "s"),
    ]
    if results[0].get("compute_target_per_step") is not None:
        found.append(metric("compute_target_per_step", results[0]["compute_target_per_step"], "s"))
    for own in ("time_per_step_nowrite", "time_per_step_baseline"):
        if mean(own) is not None:
            found.append(metric(own, mean(own), "s"))
    if mean("write_cost") is not None:  # the members' mean, and its standard error
        found.append(metric("write_cost", mean("write_cost"), "s"))
        found.append(
            metric("write_cost_se", error_of_mean(r["write_cost_se"] for r in results), "s")
        )
    total_bytes = sum(r["bytes_written"] for r in results)
    found += [
        metric("bytes_written", total_bytes, "B"),
        metric("files_created", sum(r["files_created"] for r in results), "files"),
        metric("dirs_created", sum(r["dirs_created"] for r in results), "dirs"),
    ]
    if writes:
        phase = mean("write_phase_time")
        per_member_write = total_bytes / len(results) / writes
        found += [
            metric("time_per_step_write", mean("time_per_step_write"), "s"),
            metric("write_phase_time", phase, "s"),
            metric("bytes_per_write", total_bytes / writes, "B"),
            metric("write_phase_bandwidth", per_member_write / phase / 1e6, "MB/s"),
        ]
    if p["purge_write"]:
        found += [
            metric("files_removed", sum(r["files_removed"] for r in results), "files"),
            metric("dirs_removed", sum(r["dirs_removed"] for r in results), "dirs"),
        ]
    return found


def check_counts(results: list[dict], p: dict) -> None:
    """Files and folders created must be what the layout of the file set prescribes."""
    writes = writes_of(p)
    writers = p["ranks"] if p["file_handler"] == "uncollated" else 1
    per_write = foam.files_per_write(p["file_set"]), foam.dirs_per_write(p["file_set"])
    files, dirs = writers * writes * per_write[0], writers * writes * per_write[1]
    for i, r in enumerate(results):
        if (r["files_created"], r["dirs_created"], r["writes"]) != (files, dirs, writes):
            raise PointFailed(
                f"member {i} created {r['files_created']} files and {r['dirs_created']} folders "
                f"in {r['writes']} writes; expected {files} and {dirs} in {writes}"
            )


def run(job: Job) -> list[dict]:
    if job.folder is None:
        raise PointNotApplicable("cfd_proxy writes files; the void tier has no folder")
    p = with_defaults(job.params)
    launcher = job.spec.get("launcher") or DEFAULT_LAUNCHER
    job.folder.ensure_space(planned_bytes(p), job.max_bytes)
    # built here once (cached), so the ranks only load it
    job.extra["file_writer"] = native.status("foamio")
    note = {"compute_per_cell_step": p["compute_per_cell_step"]}
    target = compute_target(p)
    traced = bool(job.spec.get("count_syscalls"))
    from_partner = False
    if target is None and not traced:
        found = partner_step_time(job)
        from_partner = found is not None
        target, note["application"] = found or application_step_time(job)
    config = writer_config(p, target)
    if traced:  # its times are never used, and the sweeps make no system call
        job.log("traced: the compute is not calibrated (a traced run's times are not used)")
        config["sweeps"], note["calibrated"] = 0, False
    job.log(
        f"{p['ensemble']} x {p['ranks']} ranks, {config['cells']} cells per rank, "
        f"{p['steps']} steps, write interval {p['write_interval']}, {p['file_handler']}, "
        f"{p['write_format']}, file set {p['file_set']}: {bytes_per_write(p)} B per write; "
        f"files made by {job.extra['file_writer']}; compute per step "
        + ("not calibrated" if traced else f"{target:.4g} s")
    )
    members: list[dict] = []
    clear_control_folder(job)  # a killed run's may be there
    try:
        shared_calibration = p["ensemble"] > 1 or job.spec.get("study_dir")
        if config["sweeps"] is None and target > 0 and shared_calibration:
            find = calibrate_alone if from_partner else calibration_for
            note["calibration"] = find(job, launcher, config, p)
            config["sweeps"] = note["calibration"]["sweeps"]
        alone = run_alone(job, launcher, config, p) if alone_first(p) else None
        start_members(job, launcher, config, p, members)
        open_gate(job, members)
        results = collect(job, members)
    finally:
        stop(members)
        clear_control_folder(job)
    check_counts(results, p)
    note.setdefault("calibration", results[0]["calibration"])
    job.extra["compute"] = {"target_per_step": target, **note}
    job.extra["members"] = results
    job.extra["rank_hosts"] = sorted({host for r in results for host in r.get("hosts", [])})
    job.extra["cells_per_rank"] = config["cells"]
    metrics = ensemble_metrics(results, p)
    if alone is not None:
        job.extra["alone"] = alone
        metrics.append(metric("time_per_step_alone", alone["time_per_step"], "s"))
    job.log(
        "time per step "
        + ", ".join(f"{m['metric']}={m['value']:.4g}" for m in metrics if m["unit"] == "s")
    )
    return metrics


WORKLOAD = Workload(
    name="cfd_proxy",
    summary="OpenFOAM-style MPI output: ranks x steps, write interval, ensembles",
    headline=("time_per_step",),
    stands_for=Pair(
        proxy="cfd_proxy",
        real="openfoam",
        unit="write",
        shape=(
            "ranks", "cells_per_rank", "write_interval", "file_handler",
            "ensemble", "write_format", "purge_write",
        ),
        baseline={"cfd_proxy": {"write_interval": "none"}, "openfoam": {"write_interval": "none"}},
        time_metric="time_per_step",
        headline="time_per_step",
        files="files_created",
        dirs="dirs_created",
        imitates={"file_set": "v1912"},
        cost_metric="write_cost",
        compute=("time per step without writes", "time_per_step", "time_per_step_nowrite"),
        compute_target="compute_target_per_step",
        size=("cells_per_rank",),
        own_input=("case",),
        alone="time_per_step_alone",
    ),
    run=run,
    family="cfd",
    env="cfd",
    tools=(Tool("mpiexec", "openmpi-bin"),),
    mpi=True,
    check_params=check_params,
    planned_bytes=planned_bytes,
    creates_files=True,
    created_per_write=created_per_write,
    tasks=tasks,
    nodes=nodes,
    runtime_s=runtime_s,
    page_cache=page_cache_rule("cfd_proxy", planned_bytes),
)  # fmt: skip
