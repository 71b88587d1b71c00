"""cfd_proxy: an OpenFOAM-style MPI solver writing its results (document 001).

One job runs one point: ``ensemble`` independent simulations of ``ranks``
ranks each, started together on the same tier, each in its own case folder
of the run folder (``member<i>/processor<rank>/<time>/...``). Each simulation
is one launch of :mod:`tierbench.workloads.cfd.cfd_writer` through the launcher Snakemake
gives the rule as its ``mpi`` resource (``mpiexec`` here, ``srun --mpi=pmix``
under Slurm). The launches wait at a start gate until all of them are up, so
their measured steps overlap.

What a write puts on disk is ``file_set``'s (:mod:`tierbench.workloads.cfd.foam`):
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
(:mod:`tierbench.workloads.cfd.cfd_writer`); an ensemble's members get the sweeps a launch
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
import shlex
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from ... import native, syscalls
from ...errors import PointFailed, PointNotApplicable
from ...job import Job
from ...records import JOB_TIME, metric, whole_run_timed
from .. import Pair, Tool, Workload
from . import foam
from .cfd_launch import (
    DEFAULT_LAUNCHER,
    alone_first,
    copy_output,
    error_of_mean,
    launch_command,
    launch_env,
    member_nodes,
    page_cache_rule,
    private_folders,
    private_folders_said,
    remove_private_folders,
    spans_nodes,
    under_slurm,
)
from .cfd_proxy_plan import (
    START_TIMEOUT_S,
    application_step_time,
    bytes_per_write,
    check_params,
    compute_target,
    created_per_write,
    keep_calibration,
    known_calibration,
    nodes,
    partner_step_time,
    planned_bytes,
    runtime_s,
    tasks,
    with_defaults,
    writer_config,
    writes_of,
)

#: the rounds of launches of a job: the ensemble's members, and member 0 alone before them
MEMBER, ALONE = "member", "alone"


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

    Each launch has folders of its own (:func:`private_folders`), never on the
    tier measured.
    ``label`` names the round: ``alone`` is member 0 run by itself before the
    ensemble (:func:`run_alone`), in case, log and gate folders of its own.
    """
    folder = job.folder.path
    control = control_folder(job)
    gate = control / f"gate-{label}"
    gate.mkdir(parents=True)
    local = not under_slurm()
    env, added = launch_env(launcher, local)
    added = {**added, **private_folders_said(launcher, local)}
    job.extra.update({"launcher": launcher, "launcher_env": added, "local": local})
    for i in range(1 if label == ALONE else p["ensemble"]):
        command = [
            *launch_command(launcher, p["ranks"], p["ensemble"], local, member_nodes(job), i),
            *syscalls.rank_prefix(job),
            sys.executable, "-m", "tierbench.workloads.cfd.cfd_writer",
            "--case", str(folder / f"{label}{i}"),
            "--config", json.dumps(config, sort_keys=True),
            "--out", str(control / f"result-{label}{i}.json"),
            "--gate", str(gate),
            "--name", str(i),
            "--run-folder", str(folder),
        ]  # fmt: skip
        folders = private_folders(launcher, local)
        member = {
            "index": i,
            "label": label,
            "command": command,
            "folders": folders,
            "process": None,
            "reader": None,
        }
        members.append(member)
        try:
            member["process"] = subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={**env, **folders}
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


def calibration_key(config: dict, p: dict) -> str:
    """What a sweep count holds for: the ranks of one member, its cells, its target, and
    what else its step does."""
    extras = f"log {config['log_writes']}/{config['log_bytes']} B, fresh {config['fresh_bytes']} B"
    return f"{p['ranks']}x{config['cells']}@{config['compute_target']:.6g} ({extras})"


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
    folders = private_folders(launcher, local)
    env = {**env, **folders}
    command = launch_command(launcher, p["ranks"], p["ensemble"], local, member_nodes(job), 0) + [
        sys.executable, "-m", "tierbench.workloads.cfd.cfd_writer", "--calibrate",
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
        remove_private_folders(folders)
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
    """End what still runs, close the logs, remove the launches' own folders (idempotent)."""
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
        remove_private_folders(m["folders"])


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
    run_time=JOB_TIME,
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
    # its ranks, under srun a job step's, do not report their CPU time
    run=whole_run_timed(run, cpu=False),
    family="cfd",
    env="cfd",
    tools=(Tool("mpiexec"),),
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
