"""A small HPC cluster on one machine: Slurm nodes in namespaces and a shared GlusterFS volume.

    python -m tierbench.minicluster up|status|down|env [--nodes N] [--state DIR] [--local-size 2G]

So the pipeline's Slurm path, its MPI launches and its shared-versus-local
tiers can be tried where no cluster is at hand. ``up`` (as root) makes, under
one state folder (``--state``, else ``$TIERBENCH_MINICLUSTER``, else
/var/tmp/tierbench-minicluster):

- ``node1``..``nodeN``: each a network namespace with its own address on a
  private /24 behind the bridge ``tbmc0``, its own host name and its own mount
  namespace, running one ``slurmd``; the partition ``compute`` holds them all.
  ``slurmctld`` and ``munged`` run on the host, which is the submit host.
- ``<state>/shared``: a GlusterFS volume served from a namespace of its own
  (the storage node), mounted with FUSE by every node and by the host. The
  client caches are off, so every metadata call is a round trip, as on a
  coherent cluster file system.
- ``<state>/local``: each node's own tmpfs, which no other node sees; on the
  host an empty folder.
- ``<state>/bin``: Slurm clients that find this cluster (SLURM_CONF), and
  ``<state>/env``: the variables a shell or a pipeline run needs, the same as
  :attr:`MiniCluster.env`.

Every thing ``up`` creates is written to ``<state>/state.json`` before it is
created (process ids right after), so ``down`` removes it all from any
process, after a failed or killed start too, and a second ``down`` finds
nothing to do.
"""

from .base import (
    DEFAULT_LOCAL_SIZE,
    DEFAULT_NODES,
    DEFAULT_STATE,
    LOCK_HELD_ENV,
    STATE_ENV,
    Ledger,
    MiniClusterError,
    alive,
    cluster_lock,
    mount_at,
    start_time,
    state_path,
)
from .cluster import MiniCluster
from .host import install, install_command, missing_packages, preflight

__all__ = [
    "DEFAULT_LOCAL_SIZE",
    "DEFAULT_NODES",
    "DEFAULT_STATE",
    "LOCK_HELD_ENV",
    "STATE_ENV",
    "Ledger",
    "MiniCluster",
    "MiniClusterError",
    "alive",
    "cluster_lock",
    "install",
    "install_command",
    "missing_packages",
    "mount_at",
    "preflight",
    "start_time",
    "state_path",
]
