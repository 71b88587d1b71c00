"""The file system under the results database, and the journal and lock it gets.

SQLite's WAL journal keeps its index in memory shared by the processes of one
host. On a GlusterFS volume written from two nodes, WAL lost one node's
commits in 3 runs of 3 while every commit reported success. So a database on
a network file system gets a rollback (DELETE) journal, and each write to it
is made under a lock across hosts (``tierbench.locks``): a folder
``<db>.lock`` made with ``mkdir``, which is atomic on NFS, Lustre, GPFS and
GlusterFS, unlike the POSIX byte-range locks SQLite itself uses, which many
network file systems get wrong. A few file systems (object stores mounted
through FUSE) cannot hold a database at all.
"""

from __future__ import annotations

import os

from .mounts import mounts
from .probe import mount_of

LOCAL, NETWORK, UNTRUSTED = "local", "network", "untrusted"

#: file systems that several hosts write at once
NETWORK_TYPES = frozenset(
    {
        "nfs", "nfs4", "lustre", "gpfs", "beegfs", "ceph", "fuse.ceph", "fuse.ceph-fuse",
        "cifs", "smb3", "smbfs", "glusterfs", "fuse.glusterfs", "fuse.sshfs", "sshfs", "9p",
        "afs", "ocfs2", "gfs2", "orangefs", "pvfs2", "panfs", "wekafs", "quobyte",
        "fuse.quobyte", "fuse.lizardfs", "fuse.mfs", "fuse.moosefs", "fuse.juicefs",
        "virtiofs", "vboxsf", "fuse.vmhgfs-fuse",
    }
)  # fmt: skip
#: file systems without the write, rename and lock semantics a database needs
UNTRUSTED_TYPES = frozenset(
    {
        "fuse.s3fs", "fuse.goofys", "fuse.gcsfuse", "fuse.rclone", "fuse.mountpoint-s3",
        "fuse.blobfuse", "fuse.blobfuse2", "davfs", "fuse.davfs2",
    }
)  # fmt: skip


def fs_type_of(path: str | os.PathLike, table: list[dict] | None = None) -> str:
    """Type of the file system holding ``path`` ("" when unknown): the longest mount point.

    ``table`` is a parsed mountinfo (see probe.parse_mountinfo); by default this
    process's own. Tests replace this function to put a folder on any file system.
    """
    return mount_of(path, mounts() if table is None else table).get("fs_type", "")


def kind_of(fs_type: str) -> str:
    """LOCAL, NETWORK (written from several hosts) or UNTRUSTED (cannot hold a database)."""
    fs_type = fs_type.lower()
    if fs_type in UNTRUSTED_TYPES:
        return UNTRUSTED
    if fs_type in NETWORK_TYPES or fs_type.startswith("nfs"):
        return NETWORK
    return LOCAL


def journal_mode(fs_type: str) -> str:
    """WAL where one host writes; a rollback journal where several may."""
    return "wal" if kind_of(fs_type) == LOCAL else "delete"
