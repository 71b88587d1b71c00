"""What a job asks a cluster for: partition, wall time, memory, MPI launcher.

The rules declare their resources with the names snakemake-executor-plugin-slurm
understands (``runtime``, ``mem_mb``, ``slurm_partition``, ``slurm_extra``,
``mpi``, ``tasks``, ``nodes``); the input functions in ``common.smk`` compute
them with the helpers below, so the rules are the one place resources come
from. Nothing here is specific to one workload: a workload module may define
``runtime_s(params)`` (an upper bound of one run, in seconds) and
``mem_mb(params)`` (memory beyond what it writes), and everything else is
derived from the point and its tier.

Inside a benchmark job, :func:`partition_problem` compares the partition the
point was meant for with the one the job really runs in, so a hardware file
naming a partition the cluster does not have gives a failed point with the
reason, not a silent measurement of other nodes.
"""

from __future__ import annotations

import math
import os
import shutil
import socket
import subprocess
from functools import cache

from .units import parse_duration_minutes

#: executor plugins that run jobs as Slurm jobs (the submitting side and the job side)
SLURM_EXECUTORS = ("slurm", "slurm-jobstep")
#: MPI launcher inside a Slurm allocation: PMIx works with Debian's and most
#: sites' Open MPI (pmi2 does not with Debian's). Ensembles add ``--exact`` per
#: launch and the job asks for memory per CPU (``mem_mb_per_cpu``), so each
#: member gets only its own cores and memory and all members run side by side.
SLURM_MPI = "srun --mpi=pmix"
LOCAL_MPI = "mpiexec"
#: wall time of a job that its workload does not estimate
DEFAULT_RUNTIME_MIN = 30
#: start-up inside a job (Snakemake parses the workflow, the probe runs)
JOB_OVERHEAD_S = 120
#: what a job needs besides the data it writes (Python, Snakemake, the tool)
BASE_MEM_MB = 1000


def on_slurm(executor: str | None) -> bool:
    """Jobs go to Slurm (the Slurm executor submits them, or runs them as a job step)."""
    return executor in SLURM_EXECUTORS


def in_slurm_job() -> bool:
    return bool(os.environ.get("SLURM_JOB_ID"))


def in_job_step() -> bool:
    """Is this process inside a Slurm job step (srun's), not the job's batch script?

    A step holds the job's CPUs: an srun started inside it needs ``--overlap``,
    or its new step waits for them forever.
    """
    return os.environ.get("SLURM_STEP_ID", "batch") not in ("batch", "extern", "")


def mpi_launcher(executor: str | None, hardware: dict) -> str:
    """The command before ``-n <ranks> program``: the hardware file's, else by where it runs.

    The shell command of a Slurm job is formatted by a Snakemake running inside
    the job with the local executor, so "inside a Slurm job" counts as Slurm
    too. Open MPI's own mpiexec does not work there: the job step executor
    removes SLURM_NODELIST, which its Slurm support needs.
    """
    if hardware.get("mpi"):
        return hardware["mpi"]
    return SLURM_MPI if on_slurm(executor) or in_slurm_job() else LOCAL_MPI


def runtime_minutes(estimate_s: float | None) -> int:
    """Slurm time limit: twice the workload's own estimate plus start-up, in whole minutes."""
    if estimate_s is None:
        return DEFAULT_RUNTIME_MIN
    return max(5, math.ceil((2 * float(estimate_s) + JOB_OVERHEAD_S) / 60))


def memory_mb(planned_bytes: int, extra_mb: float = 0, node_memory_bytes: int | None = None) -> int:
    """Memory limit of a benchmark job.

    What a point writes counts in full: on tmpfs or /dev/shm the data itself is
    memory, and on a disk the page cache that buffered I/O goes through is
    charged to the job's cgroup too; a smaller limit would turn "fits in the
    page cache" into "does not" and change what is measured. Capped at 90% of
    the node's memory (from the hardware file), where the node's own page
    cache limit is the one the study means.
    """
    wanted = BASE_MEM_MB + float(extra_mb) + 1.1 * planned_bytes / 1e6
    if node_memory_bytes:
        wanted = min(wanted, 0.9 * node_memory_bytes / 1e6)
    return max(BASE_MEM_MB // 2, math.ceil(wanted))


def slurm_extra(exclusive: bool, tasks_per_node: int | None = None) -> str:
    """Options the plugin has no resource for: whole nodes with ``exclusive: true``, and
    in an allocation the tasks each node holds (``--ntasks-per-node``), so that a step of
    two ranks finds them on one node where the allocation also spans two.

    Benchmarks need no option to keep apart: they run one at a time inside an
    allocation, and allocations one after another (tierbench.allocations).
    """
    options = ["--exclusive"] if exclusive else []
    if tasks_per_node:
        options.append(f"--ntasks-per-node={tasks_per_node}")
    return " ".join(options)


#: why the last Slurm command asked failed (its last line of errors), for slurm_problem
_LAST_FAILURE: dict[str, str] = {}


def _missing_slurm_conf() -> str | None:
    """SLURM_CONF when it names no file (a hardware file's `env` for a cluster that is
    not up): Slurm's commands then retry for a minute before they fail."""
    conf = os.environ.get("SLURM_CONF")
    return conf if conf and not os.path.isfile(conf) else None


def _ask_slurm(command: list[str]) -> str | None:
    """What a Slurm command prints, or None when it is missing or fails. After one
    time-out no command is asked again: each would wait as long."""
    if shutil.which(command[0]) is None or _missing_slurm_conf() or "timeout" in _LAST_FAILURE:
        return None
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=True)
    except subprocess.TimeoutExpired:
        _LAST_FAILURE["timeout"] = f"{command[0]} did not answer in 60 s"
        return None
    except subprocess.CalledProcessError as failed:
        lines = (failed.stderr or "").strip().splitlines()
        _LAST_FAILURE["error"] = lines[-1] if lines else f"{command[0]} failed"
        return None
    except OSError as failed:
        _LAST_FAILURE["error"] = f"{command[0]}: {failed}"
        return None
    return done.stdout


def slurm_problem() -> str | None:
    """Why jobs cannot be submitted from here (no sbatch, no slurm.conf, sinfo failing),
    or None: asked once before a run submits, so that it stops at once with the reason
    instead of failing its first job minutes later with none."""
    if shutil.which("sbatch") is None:
        return "sbatch is not on PATH"
    conf = _missing_slurm_conf()
    if conf:
        return f"SLURM_CONF names {conf}, which does not exist"
    if slurm_partitions() is None:
        reason = _LAST_FAILURE.get("timeout") or _LAST_FAILURE.get("error") or "sinfo failed"
        return f"Slurm does not answer: {reason}"
    return None


def _partition_values(field: str, partition: str | None) -> list[str]:
    """A ``sinfo`` field (``%l``, ``%D``) on each line of the partitions in ``partition``
    (``a,b``), or of the default one if None; [] when Slurm cannot be asked."""
    found = _ask_slurm(["sinfo", "--noheader", f"--format=%P {field}"])
    wanted = partition.split(",") if partition else None
    values = []
    for line in (found or "").splitlines():
        name, _, value = line.partition(" ")
        if (wanted and name.rstrip("*") in wanted) or (not wanted and name.endswith("*")):
            values.append(value.strip())
    return values


@cache
def partition_time_limit(partition: str | None) -> int | None:
    """Minutes a job may run in the partition (the default one if None), or None when
    unlimited or when Slurm cannot be asked."""
    for limit in _partition_values("%l", partition)[:1]:
        try:
            return parse_duration_minutes(limit)
        except ValueError:  # "infinite"
            return None
    return None


@cache
def job_nodes() -> int | None:
    """Nodes of the Slurm job this process runs in, or None outside one. Snakemake's job
    step executor hands its jobs SLURM_JOB_ID but not SLURM_JOB_NUM_NODES: ask squeue."""
    job = os.environ.get("SLURM_JOB_ID")
    if not job:
        return None
    if os.environ.get("SLURM_JOB_NUM_NODES"):
        return int(os.environ["SLURM_JOB_NUM_NODES"])
    found = _ask_slurm(["squeue", "--noheader", "--format=%D", "--jobs", job])
    return int(found.strip()) if found and found.strip().isdigit() else None


@cache
def job_hosts() -> tuple[str, ...]:
    """Host names of the Slurm job this process runs in, in Slurm's order; () outside one.
    A job step may not see SLURM_JOB_NODELIST (Snakemake's job step executor): ask squeue."""
    job = os.environ.get("SLURM_JOB_ID")
    if not job:
        return ()
    listed = (
        os.environ.get("SLURM_JOB_NODELIST")
        or (_ask_slurm(["squeue", "--noheader", "--format=%N", "--jobs", job]) or "").strip()
    )
    if "[" not in listed:  # node1,node2: no ranges to expand
        return tuple(filter(None, listed.split(",")))
    return tuple((_ask_slurm(["scontrol", "show", "hostnames", listed]) or "").split())


def this_host() -> str:
    """This node's name as Slurm knows it (SLURMD_NODENAME), else the short host name."""
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def nodes_to_spread_over(hardware: dict) -> int:
    """Nodes an MPI point's members may spread over: inside an allocation its own, else
    the hardware file's `nodes`, else the partition's (sinfo); 1 when nothing says."""
    return job_nodes() or hardware.get("nodes") or partition_nodes(hardware.get("partition")) or 1


@cache
def partition_nodes(partition: str | None) -> int | None:
    """Nodes of the partition (the default one if None), or None when Slurm cannot be asked."""
    # sinfo prints a line per partition and node state: add them up
    return sum(int(count) for count in _partition_values("%D", partition)) or None


@cache
def slurm_partitions() -> frozenset[str] | None:
    """Partition names of the cluster (``sinfo``), or None when Slurm cannot be asked."""
    found = _ask_slurm(["sinfo", "--noheader", "--format=%R"])
    return None if found is None else frozenset(found.split())


def missing_partitions(wanted: str | None, known: frozenset[str] | None) -> list[str]:
    """Names in a partition list (``a,b``) the cluster does not have ([] if unknown)."""
    if not wanted or known is None:
        return []
    return [name for name in wanted.split(",") if name and name not in known]


def _job_partition() -> str | None:
    partition = os.environ.get("SLURM_JOB_PARTITION")
    job_id = os.environ.get("SLURM_JOB_ID")
    if partition or not job_id:
        return partition
    found = _ask_slurm(["squeue", "--noheader", "--format=%P", "--jobs", job_id])
    return (found or "").strip() or None


def job_partition() -> str | None:
    """The partition the current Slurm job runs in (None outside Slurm)."""
    if not os.environ.get("SLURM_JOB_ID"):
        return None
    return _job_partition()


def partition_problem(wanted: str | None, where: str = "") -> str | None:
    """Inside a Slurm job: why it must not measure (wrong or missing partition), else None."""
    if not wanted or not os.environ.get("SLURM_JOB_ID"):
        return None
    actual = job_partition()
    if actual is None or actual in wanted.split(","):
        return None
    missing = missing_partitions(wanted, slurm_partitions())
    subject = f"Slurm partition '{wanted}'" + (f" ({where})" if where else "")
    if missing:
        known = ", ".join(sorted(slurm_partitions() or ())) or "none"
        return (
            f"{subject} does not exist on this cluster (partitions: {known}); "
            f"not measured, this job only records the error (it ran in '{actual}')"
        )
    return f"{subject} was asked for, but the job ran in partition '{actual}'; not measured"
