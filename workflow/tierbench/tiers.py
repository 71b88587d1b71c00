"""Every tier class a study may name, declared once: what backs it and what it is mounted as.

A tier's role (memory, a local device, or a network file system) decides how
the page-cache rule (:mod:`tierbench.pagecache`), the verdicts
(:mod:`tierbench.verdicts`), the fidelity table (:mod:`tierbench.fidelity`) and
the figures count it; the file system types are what the preflight expects to
find at its path. So a class added to :data:`CLASSES` (and to the config
schema's ``tier.class``, which a test holds equal to it) counts the same way
everywhere. ``fuse`` and ``void`` have no role: what backs a FUSE mount
decides, and the void stores nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

RAM, LOCAL_DEVICE, NETWORK = "ram", "local_device", "network"
#: file systems a local device is usually formatted with
_LOCAL_FS = frozenset({"ext4", "xfs", "btrfs", "zfs", "f2fs"})


@dataclass(frozen=True)
class TierClass:
    """What backs a tier of this class, and the file system types it is expected on."""

    #: RAM (no device behind the page cache), LOCAL_DEVICE (the page cache absorbs data and
    #: metadata alike), NETWORK (every create and mkdir is a round trip to a server), or None
    role: str | None
    #: a tier on another type gets a preflight warning; empty: nothing to expect
    fs_types: frozenset[str] = frozenset()


CLASSES = {
    "shm": TierClass(RAM, frozenset({"tmpfs"})),
    "tmpfs": TierClass(RAM, frozenset({"tmpfs"})),
    "pmem-fsdax": TierClass(RAM, frozenset({"ext4", "xfs"})),
    "disk": TierClass(LOCAL_DEVICE, _LOCAL_FS | {"ext3", "bcachefs", "overlay"}),
    "nvme": TierClass(LOCAL_DEVICE, _LOCAL_FS),
    "ssd": TierClass(LOCAL_DEVICE, _LOCAL_FS),
    "hdd": TierClass(LOCAL_DEVICE, frozenset({"ext4", "xfs", "btrfs", "zfs", "ext3"})),
    "nfs": TierClass(NETWORK, frozenset({"nfs", "nfs4"})),
    "lustre": TierClass(NETWORK, frozenset({"lustre"})),
    "gpfs": TierClass(NETWORK, frozenset({"gpfs"})),
    "beegfs": TierClass(NETWORK, frozenset({"beegfs"})),
    # the native client is a FUSE mount
    "glusterfs": TierClass(NETWORK, frozenset({"fuse.glusterfs"})),
    "fuse": TierClass(None, frozenset({"fuse", "fuse.bindfs", "fuseblk"})),
    "void": TierClass(None),
}


def classes_of(wanted_role: str) -> tuple[str, ...]:
    """The classes with this role, in declaration order."""
    return tuple(name for name, declared in CLASSES.items() if declared.role == wanted_role)


#: backed by memory: there is no device behind the page cache
RAM_CLASSES = classes_of(RAM)
#: a device in the node
LOCAL_DEVICE_CLASSES = classes_of(LOCAL_DEVICE)
#: a file system served over the network
NETWORK_CLASSES = classes_of(NETWORK)
#: every tier with something behind the page cache
DEVICE_CLASSES = LOCAL_DEVICE_CLASSES + NETWORK_CLASSES


def role(tier_class: str) -> str | None:
    """RAM, LOCAL_DEVICE or NETWORK; None for a class none of them covers (fuse, void)."""
    declared = CLASSES.get(tier_class)
    return declared.role if declared is not None else None


def fs_types(tier_class: str) -> frozenset[str]:
    """The file system types a tier of this class is expected on (empty: no expectation)."""
    declared = CLASSES.get(tier_class)
    return declared.fs_types if declared is not None else frozenset()
