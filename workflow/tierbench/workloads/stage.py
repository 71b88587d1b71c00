"""stage: copy a case from the shared tier to the point's tier, timed (document 001).

Document 001 staged its OpenFOAM case from Lustre to each node's DCPMM before
running there (``time srun -n 4 -N 4 cp -fr caseDir .`` in
/mnt/pmem_fsdax0), and found that this is not free: 208 s to one namespace
and 93 s to the other, on 20 nodes. A point of this workload measures that
cost on this machine, so the report can set it against the time per step
the local tier gains (tierbench.staging).

One job runs one repetition:

1. The case is built in a run folder of its own on the ``source`` tier
   (``source_path`` of the spec, resolved when the study was planned),
   untimed: ``case: cfd_proxy`` writes the decomposed case as cfd_proxy lays
   it out, ``processor<rank>/0/`` with the files of one write of
   ``file_set`` for ``ranks`` x ``cells_per_rank`` (tierbench.workloads.cfd.foam);
   ``case: openfoam`` makes a real one with the openfoam workload's own case
   builder (the duct, blockMesh, decomposePar), skipped with the reason where
   OpenFOAM is not installed. Its files, folders and bytes are counted.
2. The copy is timed: the wall time of one command. Under Slurm
   (``SLURM_JOB_ID`` set) it is ``srun -N <nodes> -w <hosts> --ntasks-per-node=1
   cp -r <case> <run folder>``, so each node copies the case into its own run
   folder on the tier, as the document did. The hosts are this node and the
   job's next ones, named so that every step of the point (claim, copy, tally,
   removal) runs on the same nodes (``--overlap`` is added inside a
   job step, whose CPUs a new step would otherwise wait for, and the step's
   own layout is left out of srun's environment: :func:`srun_env`); outside Slurm a
   single ``cp -r``. srun's own start is inside the time, as it was in the
   document's ``time srun``.
3. Every node's copy is counted and checked against the case, then removed
   (under Slurm ``srun ... rm -rf <copy>`` on the same hosts), and so
   is the case on the source tier.

Caches: nothing is dropped from the page cache, since a job cannot drop it
(that needs root, and a file server's memory is out of its reach). The case
was written moments before the copy, so the copy reads warm data: from this
node's page cache, and on other nodes through a file server that may still
hold it in memory. Document 001's case had sat on Lustre, so its copy read
cold data; the record says so (``extra.source_page_cache``). The copy's
writes are buffered (cp does not fsync): on a local device tier they may end
in the page cache (the record's ``page_cache``); on a network tier every file
and folder the copy creates reaches the server.

On nodes other than the job's first, a node-local tier has no run folder:
before the copy, each node makes one where it has none, with the marker of
:mod:`tierbench.rundir` (so a killed run's folder is swept by the next job on
that node), and removes it afterwards; the job's own folder is left to the
runner. These steps are ``python -m tierbench.workloads.stage claim|tally|release
<folder>`` started by srun on every node, untimed. The marker names the
short-lived process that made the folder: no other job sweeps the tier of
those nodes meanwhile, since benchmarks hold their nodes alone (one at a time,
or whole nodes with ``exclusive: true``).

Metrics: ``stage_time`` (s), ``stage_bytes`` and ``stage_files`` (of one
copy), ``stage_dirs``, ``stage_bandwidth`` (MB/s, bytes x nodes / time) and
``nodes`` (how many nodes received a copy).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .. import cluster, pagecache, rundir
from ..cluster import in_job_step, in_slurm_job
from ..errors import PointFailed, PointNotApplicable, PointSkipped
from ..records import metric, utc_now
from ..schemas import schema_defaults
from . import Tool, Workload
from .cfd import foam, foam_write

if TYPE_CHECKING:
    from ..job import Job

PACKAGE_DIR = str(Path(__file__).resolve().parents[2])
DEFAULTS = schema_defaults("stage")
#: the case's folder, in the run folder on the source tier and in each copy
CASE = "case"
#: the time folder of the proxy's case: the initial fields, as a decomposed case holds them
CASE_TIME = "0"
#: seconds a claim, tally or release step on the nodes may take
HELPER_TIMEOUT_S = 600.0
#: a rough floor of a copy's rate from a busy shared file system, for the job's time limit
SLOW_COPY_BYTES_PER_S = 20e6
#: what a new job step keeps of the Slurm environment (:func:`srun_env`)
SLURM_IDENTITY = (
    "SLURM_JOB_ID", "SLURM_JOBID", "SLURM_CLUSTER_NAME", "SLURM_CONF", "SLURM_SUBMIT_DIR",
    "SLURM_SUBMIT_HOST", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID",
)  # fmt: skip


def with_defaults(params: dict) -> dict:
    return {**DEFAULTS, **params}


def srun_env() -> dict:
    """The environment of a new step: the job's identity, not the enclosing step's layout.

    srun reads SLURM_NTASKS, SLURM_NNODES, SLURM_CPUS_PER_TASK ... as options:
    inside a one-task job step they would shrink ``-N <nodes>`` to one node.
    As snakemake-executor-plugin-slurm-jobstep does for its own srun, only
    what names the job (and the cluster's configuration) is kept.
    """
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("SLURM_", "SRUN_", "SBATCH_")) or key in SLURM_IDENTITY
    }
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_DIR, env.get("PYTHONPATH")]))
    return env


# ------------------------------------------------------------------ params and estimates


def proxy_case_bytes(params: dict) -> int:
    """Bytes of the proxy's case: one write time of every rank (exact, uncollated)."""
    p = with_defaults(params)
    return foam.write_bytes(
        p["cells_per_rank"], p["write_format"], CASE_TIME, 0, p["ranks"], p["file_set"]
    )


def planned_bytes(params: dict) -> int:
    """Bytes of one copy on the tier (the case on the source tier is as large)."""
    p = with_defaults(params)
    if p["case"] == "cfd_proxy":
        return proxy_case_bytes(p)
    from .cfd import openfoam_plan

    # the mesh and initial fields, undecomposed and decomposed: about 4 writes' worth
    return 4 * openfoam_plan.bytes_per_write(openfoam_params(p))


def nodes(params: dict) -> int:
    """Nodes of the job: each receives a copy."""
    return int(with_defaults(params)["nodes"])


def runtime_s(params: dict) -> float:
    """A generous guess: building the case, then every node's copy at a slow shared rate."""
    return 60 + 2 * planned_bytes(params) * nodes(params) / SLOW_COPY_BYTES_PER_S


def openfoam_params(p: dict) -> dict:
    """The openfoam workload's parameters of the case: its shape, one member."""
    from .cfd import openfoam_plan

    shape = {key: p[key] for key in ("ranks", "cells_per_rank", "write_format")}
    return openfoam_plan.with_defaults({**shape, "ensemble": 1, "file_handler": "uncollated"})


def check_params(params: dict) -> None:
    """A real case needs a block blockMesh can mesh (openfoam's rule)."""
    p = with_defaults(params)
    if p["case"] == "openfoam":
        from .cfd import openfoam_plan

        shape = foam.block_shape(p["cells_per_rank"])
        if openfoam_plan.aspect(shape) > openfoam_plan.MAX_ASPECT:
            raise ValueError(
                f"case openfoam: cells_per_rank {p['cells_per_rank']} only makes a block of "
                f"{' x '.join(map(str, shape))} cells, more than {openfoam_plan.MAX_ASPECT} times "
                f"longer than wide; e.g. {openfoam_plan.nearby_blockable(p['cells_per_rank'])}"
            )


# ------------------------------------------------------------------ commands


def point_hosts(nodes: int) -> list[str]:
    """The nodes every step of a point runs on: this one and the job's next ``nodes - 1``.

    ``srun -N 2`` in a job of 4 nodes picks its 2 anew at each step, so a copy could land
    where no run folder was claimed, and be tallied on a node that has none.
    """
    hosts, here = cluster.job_hosts(), cluster.this_host()
    ordered = ([here] if here in hosts else []) + [host for host in hosts if host != here]
    if len(ordered) < nodes:
        raise PointFailed(
            f"nodes {nodes}: the Slurm job holds {len(hosts)} "
            f"({', '.join(hosts) or 'none found: neither SLURM_JOB_NODELIST nor squeue said'})"
        )
    return ordered[:nodes]


def srun_prefix(hosts: list[str], in_step: bool = False) -> list[str]:
    """``srun`` with one task on each of the named nodes."""
    argv = ["srun", "-N", str(len(hosts)), "-w", ",".join(hosts), "--ntasks-per-node=1"]
    return argv + (["--overlap"] if in_step else [])


def copy_command(
    case: Path, folder: Path, hosts: list[str] | None = None, in_step: bool = False
) -> list[str]:
    """The timed command: ``cp -r <case> <folder>``, on each of ``hosts`` under Slurm."""
    cp = ["cp", "-r", str(case), str(folder)]
    return srun_prefix(hosts, in_step) + cp if hosts else cp


def remove_command(copy: Path, hosts: list[str], in_step: bool = False) -> list[str]:
    """Every node's copy removed: ``srun -N <n> -w <hosts> --ntasks-per-node=1 rm -rf <copy>``."""
    return srun_prefix(hosts, in_step) + ["rm", "-rf", str(copy)]


# ------------------------------------------------------------------ the case


def tally(root: Path) -> dict[str, int]:
    """Files, folders (root not counted) and the files' bytes below ``root``."""
    files = dirs = size = 0
    for here, subdirs, names in os.walk(root):
        dirs += len(subdirs)
        files += len(names)
        size += sum(os.lstat(os.path.join(here, name)).st_size for name in names)
    return {"files": files, "dirs": dirs, "bytes": size}


def build_proxy_case(case: Path, params: dict) -> None:
    """cfd_proxy's decomposed case: ``processor<rank>/0/`` with one write's files per rank."""
    from .cfd.cfd_writer import static_fields

    p = with_defaults(params)
    cells, ranks = p["cells_per_rank"], p["ranks"]
    for rank in range(ranks):
        fields = static_fields(cells, rank, p["file_set"])
        fields["p"] = np.random.default_rng(2000 + rank).standard_normal(cells)
        root = case / f"processor{rank}"
        root.mkdir(parents=True)
        foam_write.write_uncollated(
            root, CASE_TIME, 0, fields, p["write_format"], False, p["file_set"], rank, ranks
        )


def build_openfoam_case(job: Job, case: Path, params: dict) -> dict:
    """A real case: the openfoam workload's duct, meshed and decomposed; the tools' times."""
    from .cfd import openfoam, openfoam_plan

    env, how = openfoam_plan.openfoam_environment(job.spec.get("openfoam"))
    try:
        openfoam_plan.find_tools(env, ("blockMesh", "decomposePar"))
    except PointFailed as error:
        raise PointSkipped(f"case openfoam: {error}") from None
    job.extra["openfoam_env"] = how
    case.mkdir()
    return openfoam.prepare(openfoam.Member(0, case), openfoam_params(params), env)


def build_case(job: Job, case: Path, params: dict) -> dict:
    """Build the case (untimed as far as the copy goes); what it took, for the record."""
    p = with_defaults(params)
    start = time.perf_counter()
    tools = {}
    if p["case"] == "cfd_proxy":
        build_proxy_case(case, p)
    else:
        tools = build_openfoam_case(job, case, p)
    return {
        "build_s": round(time.perf_counter() - start, 6),
        **({"tools_s": tools} if tools else {}),
    }


def source_page_cache(spec: dict, nodes: int) -> dict:
    """Whether the copy may read the case from memory: it does (it was just written)."""
    where = f"{spec['source_tier']} ({spec['source_class']})"
    reason = (
        f"warm: the case was written on {where} by this job just before the copy, and "
        "nothing was dropped from the page cache (a job cannot: that needs root, and a file "
        "server's memory is out of its reach), so the copy may read it from memory"
    )
    if nodes > 1:
        reason += (
            "; the other nodes read it through the file system, whose server may still hold "
            "it in memory"
        )
    reason += "; document 001's case had sat on Lustre: its copy read cold data"
    return {"page_cache": "may_stay_in_memory", "page_cache_reason": reason}


# ------------------------------------------------------------------ copying


def run_command(command: list[str], what: str, timeout: float | None = None):
    """Run a command (srun's in a new step's environment); PointFailed with its last line
    when it fails."""
    env = srun_env() if command[0] == "srun" else None
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
    except FileNotFoundError:
        raise PointFailed(f"{what}: {command[0]} is not installed") from None
    except subprocess.TimeoutExpired:
        raise PointFailed(
            f"{what}: no answer after {timeout:.0f} s ({shlex.join(command)})"
        ) from None
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines() or ["no output"]
        raise PointFailed(f"{what} exited with {done.returncode}: {lines[-1][-300:]}")
    return done


def timed_copy(job: Job, command: list[str]) -> float:
    """The wall time of the copy command, which must succeed."""
    job.extra["copy_command"] = shlex.join(command)
    job.log(f"copying: {shlex.join(command)}")
    start = time.perf_counter()
    run_command(command, "the copy")
    return time.perf_counter() - start


def check_copy(found: dict, case: dict, where: str) -> None:
    if found != case:
        raise PointFailed(
            f"the copy on {where} holds {found['files']} files, {found['dirs']} folders, "
            f"{found['bytes']} B; the case {case['files']}, {case['dirs']}, {case['bytes']} B"
        )


def copy_here(job: Job, case: Path, size: dict) -> float:
    """Outside Slurm: one ``cp -r`` into the run folder; checked, then removed."""
    folder = job.folder.path
    try:
        elapsed = timed_copy(job, copy_command(case, folder))
        check_copy(tally(folder / CASE), size, socket.gethostname())
    finally:
        shutil.rmtree(folder / CASE, ignore_errors=True)
    return elapsed


def on_nodes(
    action: str, folder: Path, hosts: list[str], extra: tuple[str, ...] = ()
) -> list[dict]:
    """One line of JSON from each node: ``python -m tierbench.workloads.stage <action>``."""
    nodes = len(hosts)
    command = srun_prefix(hosts, in_job_step()) + [
        sys.executable, "-m", "tierbench.workloads.stage", action, str(folder), *extra,
    ]  # fmt: skip
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, env=srun_env(), timeout=HELPER_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        raise PointFailed(
            f"{action} on {nodes} nodes: no answer in {HELPER_TIMEOUT_S:.0f} s"
        ) from None
    except FileNotFoundError:
        raise PointFailed("srun is not installed, though SLURM_JOB_ID is set") from None
    found = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    errors = [f"{f['host']}: {f['error']}" for f in found if f.get("error")]
    if errors or done.returncode != 0 or len(found) != nodes:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1][-300:]
        raise PointFailed(
            f"{action} on {nodes} nodes: "
            + ("; ".join(errors) or f"exit {done.returncode}: {last}")
        )
    return found


def copy_on_nodes(job: Job, case: Path, size: dict, nodes: int) -> float:
    """Under Slurm: every node copies the case into its own run folder; checked, removed."""
    folder = job.folder.path
    in_step = in_job_step()
    owner = f"{socket.gethostname()}:{os.getpid()}"
    hosts = point_hosts(nodes)
    try:
        claimed = on_nodes("claim", folder, hosts)
        job.extra["nodes"] = [c["host"] for c in claimed]
        elapsed = timed_copy(job, copy_command(case, folder, hosts, in_step))
        for found in on_nodes("tally", folder / CASE, hosts):
            check_copy({k: found[k] for k in size}, size, found["host"])
    finally:
        remove_copies(job, folder, hosts, in_step, owner)
    return elapsed


def remove_copies(job: Job, folder: Path, hosts: list[str], in_step: bool, owner: str) -> None:
    """Every node's copy, then the run folders claimed for it (not the job's own)."""
    try:
        run_command(remove_command(folder / CASE, hosts, in_step), "removing the copies")
    except PointFailed as error:
        job.log(f"clean-up: {error}")
    try:
        on_nodes("release", folder, hosts, ("--owner", owner))
    except PointFailed as error:
        job.log(f"clean-up: {error}")


def run(job: Job) -> list[dict]:
    if job.folder is None:
        raise PointNotApplicable("stage copies files; the void tier has no folder")
    spec, p = job.spec, with_defaults(job.params)
    if not spec.get("source_tier"):
        raise PointNotApplicable(spec.get("source_missing") or "no source tier in the job's spec")
    if spec["source_tier"] == spec["tier"] or spec["source_path"] == spec["tier_path"]:
        raise PointNotApplicable(f"{spec['tier']} is the source tier: there is nothing to stage")
    slurm, count = in_slurm_job(), p["nodes"]
    if count > 1 and not slurm:
        raise PointNotApplicable(f"nodes {count}: copies to several nodes need Slurm")
    if count > 1 and spec.get("tier_shared"):
        raise PointNotApplicable(
            f"nodes {count}: {spec['tier']} is shared by the nodes, so every node would copy "
            "into the same folder; staging copies to node-local tiers"
        )
    for stale in rundir.sweep_stale(spec["source_path"]):
        job.log(f"removed {stale}, left by an interrupted run")
    label = f"{spec['experiment']}-source-rep{spec['repetition']}"
    with rundir.RunFolder(spec["source_path"], label) as origin:
        needed = planned_bytes(p)
        origin.ensure_space(needed, spec.get("source_max_bytes"))
        job.folder.ensure_space(needed, job.max_bytes)
        case = origin.path / CASE
        job.log(
            f"building the {p['case']} case ({p['ranks']} ranks x {p['cells_per_rank']} cells, "
            f"{p['write_format']}) in {origin.path}"
        )
        job.extra["case_build"] = build_case(job, case, p)
        size = tally(case)
        job.extra.update(
            case=size,
            source={key: spec[f"source_{key}"] for key in ("tier", "path", "class")},
            source_page_cache=source_page_cache(spec, count),
        )
        if slurm:
            elapsed = copy_on_nodes(job, case, size, count)
        else:
            elapsed = copy_here(job, case, size)
    job.log(
        f"copied {size['files']} files, {size['bytes']} B to {count} node(s) in {elapsed:.3f} s"
    )
    return [
        metric("stage_time", elapsed, "s"),
        metric("stage_bytes", size["bytes"], "B"),
        metric("stage_files", size["files"], "files"),
        metric("stage_dirs", size["dirs"], "dirs"),
        metric("stage_bandwidth", size["bytes"] * count / elapsed / 1e6, "MB/s"),
        metric("nodes", count, "nodes"),
    ]


def page_cache(params: dict, limits: dict | None) -> dict:
    """cp's buffered copy of the case (no fsync), its bytes against the limit. What the
    copy reads was just written, so it is warm too (the record's ``source_page_cache``)."""
    what = "stage: cp's buffered copy (no fsync) of the case"
    return pagecache.buffered_write(what, int(planned_bytes(params)), limits)


WORKLOAD = Workload(
    name="stage",
    summary="a decomposed case copied from the shared tier to the tier (srun cp -r on each node)",
    # no headline: a copy's speed is not what a tier buys a job; the report's staging
    # section sets it against the time per step the tier gains (tierbench.staging)
    run=run,
    tools=(Tool("cp"),),
    check_params=check_params,
    tier_params=("source",),
    planned_bytes=planned_bytes,
    creates_files=True,
    nodes=nodes,
    runtime_s=runtime_s,
    page_cache=page_cache,
)


# ------------------------------------------------------------------ on each node (srun)


def claim(folder: Path) -> dict:
    """This node's run folder: made with our marker where the node has none."""
    made = False
    if not folder.is_dir():
        if not folder.parent.is_dir():
            raise OSError(f"tier path {folder.parent} is not a directory on this node")
        folder.mkdir()
        marker = {"created_at": utc_now(), "host": socket.gethostname(), "pid": os.getpid()}
        (folder / rundir.MARKER).write_text(json.dumps(marker) + "\n")
        made = True
    return {"made": made}


def release(folder: Path, owner: str) -> dict:
    """Remove this node's run folder if we claimed it (the job's own is the runner's)."""
    try:
        marker = json.loads((folder / rundir.MARKER).read_text())
    except (OSError, ValueError):
        return {"removed": False}
    if f"{marker.get('host')}:{marker.get('pid')}" == owner:
        return {"removed": False}
    return {"removed": rundir.remove_run_folder(folder)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="stage's steps on each node, under srun")
    parser.add_argument("action", choices=("claim", "tally", "release"))
    parser.add_argument("folder", type=Path)
    parser.add_argument("--owner", default="", help="host:pid of the job's own run folder")
    args = parser.parse_args(argv)
    answer = {"host": socket.gethostname()}
    try:
        if args.action == "claim":
            answer.update(claim(args.folder))
        elif args.action == "tally":
            answer.update(tally(args.folder))
        else:
            answer.update(release(args.folder, args.owner))
    except OSError as error:
        answer["error"] = str(error)
    print(json.dumps(answer), flush=True)
    return 1 if "error" in answer else 0


if __name__ == "__main__":
    raise SystemExit(main())
