"""The file system under a path and the journal it gets."""

from __future__ import annotations

import pytest
from tierbench import sharedfs
from tierbench.probe import parse_mountinfo

#: a cluster node's mounts: nested network mounts, a path with a space, an object store
MOUNTINFO = r"""22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
26 22 0:24 / /dev/shm rw,nosuid,nodev shared:5 - tmpfs tmpfs rw
30 22 0:40 / /cluster rw,relatime shared:20 - nfs4 filer:/export rw,vers=4.2,hard
31 30 0:41 / /cluster/scratch rw,relatime shared:21 - lustre 10.1.0.1@o2ib:/scratch rw,flock
32 30 0:42 / /cluster/home/my\040results rw,relatime shared:22 - fuse.glusterfs gl1:/v rw
33 22 0:43 / /cluster2 rw,relatime shared:23 - ext4 /dev/sdb1 rw
34 22 0:44 / /buckets/runs rw,nosuid shared:24 - fuse.s3fs s3fs rw,user_id=0
35 22 0:45 / /gpfs/work rw,relatime shared:25 - gpfs work rw
36 35 0:46 / /gpfs/work rw,relatime shared:26 - beegfs beegfs_nodev rw
"""


@pytest.mark.parametrize(
    "path, fs_type, kind",
    [
        ("/home/me/results/tierbench.sqlite", "ext4", sharedfs.LOCAL),
        ("/dev/shm/tierbench.sqlite", "tmpfs", sharedfs.LOCAL),
        ("/cluster/projects/results/tierbench.sqlite", "nfs4", sharedfs.NETWORK),
        ("/cluster/scratch/me/tierbench.sqlite", "lustre", sharedfs.NETWORK),
        ("/cluster/home/my results/tierbench.sqlite", "fuse.glusterfs", sharedfs.NETWORK),
        ("/cluster/home/my", "nfs4", sharedfs.NETWORK),
        ("/cluster2/results/tierbench.sqlite", "ext4", sharedfs.LOCAL),  # not under /cluster
        ("/buckets/runs/tierbench.sqlite", "fuse.s3fs", sharedfs.UNTRUSTED),
        ("/gpfs/work/x.sqlite", "beegfs", sharedfs.NETWORK),  # mounted over: the last one wins
    ],
)
def test_the_longest_mount_point_gives_the_file_system(path, fs_type, kind):
    table = parse_mountinfo(MOUNTINFO)
    assert sharedfs.fs_type_of(path, table) == fs_type
    assert sharedfs.kind_of(fs_type) == kind


def test_this_processes_own_mounts_are_read():
    assert sharedfs.fs_type_of("/proc/self") == "proc"


@pytest.mark.parametrize(
    "fs_type, mode",
    [
        ("ext4", "wal"), ("xfs", "wal"), ("btrfs", "wal"), ("tmpfs", "wal"), ("overlay", "wal"),
        ("", "wal"), ("fuse", "wal"), ("nfs", "delete"), ("nfs4", "delete"), ("lustre", "delete"),
        ("gpfs", "delete"), ("beegfs", "delete"), ("ceph", "delete"), ("cifs", "delete"),
        ("smb3", "delete"), ("fuse.glusterfs", "delete"), ("glusterfs", "delete"),
        ("fuse.sshfs", "delete"), ("9p", "delete"), ("NFS4", "delete"),
    ],
)  # fmt: skip
def test_wal_only_where_one_host_writes(fs_type, mode):
    assert sharedfs.journal_mode(fs_type) == mode


@pytest.mark.parametrize("fs_type", ["fuse.s3fs", "fuse.gcsfuse", "fuse.rclone", "davfs"])
def test_object_stores_cannot_hold_a_database(fs_type):
    assert sharedfs.kind_of(fs_type) == sharedfs.UNTRUSTED
