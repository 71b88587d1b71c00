"""Which Debian/Ubuntu package installs each program tierbench runs, written once.

The set-up (``./tierbench`` through tierbench.needs), the preflight, the
workloads' own messages and the cluster on one machine all name packages from
this table, so a package renamed or split is changed here only. A workload's
tools are listed by command (``Tool("dd")``); a command it is the first to
run is added here. The ``tierbench`` script keeps its own few entries: what
Python itself needs, before any Python runs.
"""

from __future__ import annotations

#: command -> the Debian/Ubuntu package that provides it
PACKAGES = {
    # the workloads' tools
    "bash": "bash",
    "cp": "coreutils",
    "dd": "coreutils",
    "fio": "fio",
    "gcc": "gcc",
    "pv": "pv",
    "mpiexec": "openmpi-bin",
    "simpleFoam": "openfoam",
    "ccx": "calculix-ccx",
    # beside the workloads: tiers mounted for each job, counted system calls
    "bindfs": "bindfs",
    "strace": "strace",
    # the cluster on one machine
    "slurmctld": "slurm-wlm",
    "slurmd": "slurm-wlm",
    "srun": "slurm-wlm",
    "munged": "munge",
    "glusterd": "glusterfs-server",
    "gluster": "glusterfs-server",
    "mount.glusterfs": "glusterfs-client",
    "mpirun": "openmpi-bin",
    "mpicc": "libopenmpi-dev",
    "unshare": "util-linux",
    "nsenter": "util-linux",
    "ip": "iproute2",
}


def package_of(command: str) -> str:
    """The package that installs ``command``; a command not in the table says where it goes."""
    if command not in PACKAGES:
        raise LookupError(f"no Debian package known for {command}: add it to {__file__}")
    return PACKAGES[command]


def packages_of(commands) -> dict[str, str]:
    """Command -> package for each of ``commands``."""
    return {command: package_of(command) for command in commands}


def install_hint(command: str) -> str:
    """The command line that installs ``command`` on Debian/Ubuntu."""
    return f"sudo apt-get install -y {package_of(command)}"
