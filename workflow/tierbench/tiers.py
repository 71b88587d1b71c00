"""What backs a tier, by its class: memory, a local device, or a network file system.

The page-cache rule (:mod:`tierbench.pagecache`), the verdicts
(:mod:`tierbench.verdicts`) and the fidelity table (:mod:`tierbench.fidelity`)
all take a tier's role from here, so a class added here counts the same way
in each of them. ``fuse`` and ``void`` have no role: what backs a FUSE mount
decides, and the void stores nothing.
"""

from __future__ import annotations

RAM, LOCAL_DEVICE, NETWORK = "ram", "local_device", "network"
#: backed by memory: there is no device behind the page cache
RAM_CLASSES = ("shm", "tmpfs", "pmem-fsdax")
#: a device in the node: the page cache absorbs data and metadata alike
LOCAL_DEVICE_CLASSES = ("disk", "nvme", "ssd", "hdd")
#: a file system served over the network: every create and mkdir is a round trip to a server
NETWORK_CLASSES = ("nfs", "lustre", "gpfs", "beegfs", "glusterfs")
#: every tier with something behind the page cache
DEVICE_CLASSES = LOCAL_DEVICE_CLASSES + NETWORK_CLASSES

_ROLES = {
    **dict.fromkeys(RAM_CLASSES, RAM),
    **dict.fromkeys(LOCAL_DEVICE_CLASSES, LOCAL_DEVICE),
    **dict.fromkeys(NETWORK_CLASSES, NETWORK),
}


def role(tier_class: str) -> str | None:
    """RAM, LOCAL_DEVICE or NETWORK; None for a class none of them covers (fuse, void)."""
    return _ROLES.get(tier_class)
