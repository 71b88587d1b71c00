"""What the openfoam workload and its proxy, cfd_proxy, share: how their ranks are
launched (launcher, its environment, the nodes each member spans), how a launch's output
reaches its log, the write interval and the steps it writes, and the page-cache rule of
their output.

The application imports this module and never its proxy; the proxy imports both (it can
time the application in its own job).
"""

from __future__ import annotations

import math
import os
import shlex
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from ... import pagecache, rundir
from ...cluster import in_job_step
from ...errors import PointFailed
from ...job import Job

PACKAGE_DIR = str(Path(__file__).resolve().parents[3])
DEFAULT_LAUNCHER = "mpiexec"
OPEN_MPI_LAUNCHERS = ("mpiexec", "mpirun", "orterun")
#: where Open MPI 4 (orte) and 5 (prrte) put a launch's session folder
SESSION_VARS = ("OMPI_MCA_orte_tmpdir_base", "PRTE_MCA_prte_tmpdir_base")
#: where Open MPI 4 (vader) and 5 (sm) put the ranks' shared-memory segments (/dev/shm)
SEGMENT_VARS = ("OMPI_MCA_btl_vader_backing_directory", "OMPI_MCA_btl_sm_backing_directory")
SHM = "/dev/shm"


def write_interval(params: dict) -> int | None:
    """Steps (iterations) between writes, or None for the no-I/O baseline (``none``)."""
    value = params["write_interval"]
    return None if value == "none" else int(value)


def write_steps(steps: int, interval: int | None) -> list[int]:
    """The steps (iterations, from 1) that write: every ``interval``-th of ``steps``; none
    for the no-I/O baseline (None)."""
    return list(range(interval, steps + 1, interval)) if interval else []


def check_write_interval(params: dict, step: str = "step") -> None:
    """A write interval longer than the run would write nothing: a cross-field rule."""
    interval, steps = write_interval(params), params["steps"]
    if interval is not None and interval > steps:
        raise ValueError(
            f"write_interval {interval} is longer than the run (steps {steps}): "
            f"no {step} would write"
        )


def under_slurm() -> bool:
    return bool(os.environ.get("SLURM_JOB_ID"))


def member_nodes(job: Job) -> int | None:
    """Nodes each member's ranks span: the point's ``nodes``, else those the pipeline gave
    each member of its own under Slurm (``member_nodes`` of the spec); None: Slurm places
    the ranks where the allocation has room."""
    return job.params.get("nodes") or job.spec.get("member_nodes")


def spans_nodes(job: Job) -> bool:
    """Do the job's ranks run on more than one node (so not all of them see its folder)?"""
    each = member_nodes(job)
    return under_slurm() and bool(each) and each * int(job.params.get("ensemble", 1)) > 1


def launch_command(
    launcher: str,
    ranks: int,
    ensemble: int,
    local: bool,
    nodes_each: int | None = None,
    member: int = 0,
) -> list[str]:
    """The launcher as argv, with the rank count and what this machine needs.

    Open MPI outside Slurm gets ``--oversubscribe`` (more ranks than cores)
    and ``--bind-to none`` (concurrent launches would otherwise pin their ranks
    to the same cores). ``srun`` gets ``--exact`` for ensembles, so
    concurrent steps share the allocation instead of waiting for each other,
    and with ``nodes_each`` its own nodes of the allocation for each member
    (``-N`` of them from node ``member x nodes_each`` on). Inside a job step
    (a one-task job runs in one, see common.smk's ``bench_mpi``) ``srun``
    gets ``--overlap``: the step holds the job's CPUs, and a new step would
    wait for them forever.
    """
    argv = shlex.split(launcher)
    if not argv:
        raise PointFailed("the mpi launcher is empty")
    tool = os.path.basename(argv[0])
    argv += ["-n", str(ranks)]
    if tool in OPEN_MPI_LAUNCHERS and local:
        argv += ["--oversubscribe", "--bind-to", "none"]
    if tool == "srun" and ensemble > 1:
        argv += ["--exact"]
    if tool == "srun" and nodes_each and not local:
        argv += ["-N", str(nodes_each), f"--relative={member * nodes_each}"]
    if tool == "srun" and in_job_step():
        argv += ["--overlap"]
    return argv


def launcher_tool(launcher: str) -> str:
    """The launcher's program (``srun``, ``mpiexec``, ...), without its path and options."""
    return os.path.basename(shlex.split(launcher)[0])


def launch_env(launcher: str, local: bool) -> tuple[dict, dict]:
    """Environment of the launches, and the settings added to it (for the record)."""
    added = {"PYTHONPATH": PACKAGE_DIR}
    if launcher_tool(launcher) in OPEN_MPI_LAUNCHERS and os.geteuid() == 0:
        added["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
        added["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    if local and "OMPI_MCA_mpi_yield_when_idle" not in os.environ:
        # a shared workstation: ranks waiting in a barrier give the core back
        added["OMPI_MCA_mpi_yield_when_idle"] = "1"
    env = dict(os.environ)
    for key, value in added.items():
        if key == "PYTHONPATH" and env.get(key):
            value = os.pathsep.join([value, env[key]])
        env[key] = value
    return env, added


def private_folders(launcher: str, local: bool) -> dict[str, str]:
    """Folders of one Open MPI launch's own, as the variables that name them (none for
    other launchers); :func:`remove_private_folders` removes them after the launch.

    Its session folder is in the system's temp folder: concurrent ``mpiexec`` (Open MPI
    4) race to make the same one in /tmp ("mkdir ... File exists" and orte_init fails).
    On this machine its ranks' shared-memory segments (4 MiB a rank) are in a folder of
    /dev/shm: in /dev/shm itself, those of a killed launch stay there for good, and those
    made while a command ran on the /dev/shm tier were taken for that command's writes
    outside its run folder. Under Slurm, /dev/shm of the other nodes has no such folder.
    Both are marked as run folders are: those of a job killed outright are swept by the
    next job on their tier.
    """
    names = private_folder_vars(launcher, local)
    folders = dict.fromkeys(SESSION_VARS, marked_folder(None)) if names else {}
    if SEGMENT_VARS[0] in names:
        folders.update(dict.fromkeys(SEGMENT_VARS, marked_folder(SHM)))
    return folders


def private_folder_vars(launcher: str, local: bool) -> tuple[str, ...]:
    """The variables that name a launch's own folders (:func:`private_folders`)."""
    if launcher_tool(launcher) not in OPEN_MPI_LAUNCHERS:
        return ()
    shm = local and os.path.isdir(SHM) and os.access(SHM, os.W_OK)
    return SESSION_VARS + (SEGMENT_VARS if shm else ())


def marked_folder(parent: str | None) -> str:
    """A new folder of this process's own in ``parent`` (None: the system's temp folder)."""
    folder = tempfile.mkdtemp(prefix=f"{rundir.PREFIX}mpi-", dir=parent)
    rundir.mark(Path(folder))
    return folder


def private_folders_said(launcher: str, local: bool) -> dict[str, str]:
    """The variables of a launch's own folders as its record gives them: not their paths,
    which differ per launch and are gone after it."""
    return dict.fromkeys(private_folder_vars(launcher, local), "<a folder of its own per launch>")


def remove_private_folders(folders: dict[str, str]) -> None:
    """Remove a launch's own folders, with what a killed launch left in them."""
    for folder in set(folders.values()):
        shutil.rmtree(folder, ignore_errors=True)


def alone_first(p: dict) -> bool:
    """Whether the job runs member 0 by itself before its ensemble (``single_first``)."""
    return p["ensemble"] > 1 and bool(p["single_first"])


def copy_output(stream, log_path: Path, each_line: Callable[[bytes], None] | None = None) -> None:
    """A launch's output into its log as it comes, the file written buffered; the
    openfoam workload's tee copies simpleFoam's with it (``each_line`` sees every line as
    it arrives). A log line flushed by the proxy then reaches the tier a buffer at a time,
    as the application's does, and not as one write each: so written, on the cluster's
    GlusterFS tier, the proxy's members slowed each other 1.23x without writes where
    simpleFoam's slowed each other 1.13x."""
    with open(log_path, "wb") as log:
        for line in iter(stream.readline, b""):
            if each_line is not None:
                each_line(line)
            log.write(line)
    stream.close()


def error_of_mean(errors) -> float:
    """The standard error of the members' mean, from each member's (independent runs)."""
    errors = list(errors)
    return math.sqrt(sum(e * e for e in errors)) / len(errors)


def page_cache_rule(workload: str, planned: Callable[[dict], int]):
    """cfd_proxy's and openfoam's rule: buffered output unless fsync'd, the peak on the tier
    (``planned``, the workload's planned_bytes) against the dirty limit."""

    def rule(params: dict, limits: dict | None) -> dict:
        if params.get("fsync") in (True, "true", "True", 1):
            return pagecache.result(pagecache.DEVICE, f"{workload} fsyncs every file it writes")
        if str(params.get("write_interval")) == "none":
            return pagecache.result(
                pagecache.NOT_APPLICABLE, f"{workload} no-I/O baseline: writes nothing"
            )
        # purged time folders are deleted before writeback: the peak on the tier is what counts
        what = f"{workload} buffered output (no fsync), peak on the tier"
        return pagecache.buffered_write(what, int(planned(params)), limits)

    return rule
