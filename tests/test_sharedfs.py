"""The file system under a path, the journal it gets, and the lock that holds across hosts."""

from __future__ import annotations

import json
import multiprocessing
import os
import socket
import subprocess
import sys
import time

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


# --- the lock ----------------------------------------------------------------------


def _count_under_lock(path, counter, times, barrier):
    """Read, wait, write: without mutual exclusion two workers lose each other's counts."""
    barrier.wait()
    for _ in range(times):
        with sharedfs.HostLock(path, timeout_s=60):
            value = int(counter.read_text())
            time.sleep(0.002)
            counter.write_text(str(value + 1))


def test_two_processes_at_once_never_hold_the_lock_together(tmp_path):
    counter = tmp_path / "counter"
    counter.write_text("0")
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(2)
    workers = [
        context.Process(
            target=_count_under_lock, args=(tmp_path / "db.sqlite", counter, 40, barrier)
        )
        for _ in range(2)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    assert [w.exitcode for w in workers] == [0, 0]
    assert counter.read_text() == "80"
    assert not (tmp_path / "db.sqlite.lock").exists()


def _leave_lock(folder, owner):
    folder.mkdir()
    (folder / sharedfs.OWNER_FILE).write_text(json.dumps(owner))


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_lock_whose_process_is_gone_is_broken_with_a_log_line(tmp_path):
    folder = tmp_path / "db.sqlite.lock"
    pid = _dead_pid()
    _leave_lock(folder, {"host": socket.gethostname(), "pid": pid, "since": time.time()})
    said = []
    with sharedfs.HostLock(tmp_path / "db.sqlite", timeout_s=5, log=said.append):
        owner = json.loads((folder / sharedfs.OWNER_FILE).read_text())
        assert owner["pid"] == os.getpid()
    assert len(said) == 1 and f"pid {pid}" in said[0] and "is gone" in said[0]
    assert [p.name for p in tmp_path.iterdir()] == []  # nothing moved aside is left


def test_an_old_lock_of_another_host_is_broken(tmp_path):
    folder = tmp_path / "db.sqlite.lock"
    old = time.time() - 2 * sharedfs.LOCK_STALE_S
    _leave_lock(folder, {"host": "node-that-died", "pid": 1, "since": old, "token": "x"})
    said = []
    with sharedfs.HostLock(tmp_path / "db.sqlite", timeout_s=5, log=said.append):
        pass
    assert len(said) == 1 and "node-that-died" in said[0] and "s old" in said[0]


def test_a_lock_folder_without_its_owner_file_is_broken_once_old(tmp_path):
    folder = tmp_path / "db.sqlite.lock"
    folder.mkdir()
    then = time.time() - 2 * sharedfs.OWNERLESS_STALE_S
    os.utime(folder, (then, then))
    said = []
    with sharedfs.HostLock(tmp_path / "db.sqlite", timeout_s=5, log=said.append):
        pass
    assert len(said) == 1 and "no owner file" in said[0]


def test_a_held_lock_times_out_saying_who_holds_it(tmp_path):
    folder = tmp_path / "db.sqlite.lock"
    _leave_lock(folder, {"host": "node2", "pid": 4242, "since": time.time(), "token": "t"})
    started = time.monotonic()
    with pytest.raises(sharedfs.LockError) as error:
        with sharedfs.HostLock(tmp_path / "db.sqlite", timeout_s=0.5):
            pass
    assert 0.5 <= time.monotonic() - started < 5
    message = str(error.value)
    assert "node2 pid 4242" in message and f"remove {folder}" in message
    assert "\n" not in message
    assert folder.is_dir()  # a live lock is left alone


def test_a_lock_taken_away_while_held_is_an_error(tmp_path):
    lock = sharedfs.HostLock(tmp_path / "db.sqlite")
    with pytest.raises(sharedfs.LockError, match="taken from this writer"):
        with lock:
            owner = {"host": "node2", "pid": 1, "since": time.time(), "token": "other"}
            (lock.folder / sharedfs.OWNER_FILE).write_text(json.dumps(owner))


def test_the_lock_nests_within_one_process(tmp_path):
    with sharedfs.HostLock(tmp_path / "db.sqlite", timeout_s=0.2):
        with sharedfs.HostLock(tmp_path / "db.sqlite", timeout_s=0.2):
            assert (tmp_path / "db.sqlite.lock").is_dir()
        assert (tmp_path / "db.sqlite.lock").is_dir()
    assert not (tmp_path / "db.sqlite.lock").exists()
