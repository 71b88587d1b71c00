"""The file system under the results database, and a lock that holds across hosts.

SQLite's WAL journal keeps its index in memory shared by the processes of one
host. On a GlusterFS volume written from two nodes, WAL lost one node's
commits in 3 runs of 3 while every commit reported success. So a database on
a network file system gets a rollback (DELETE) journal, and each write to it
is made under :class:`HostLock`: a folder ``<db>.lock`` made with ``mkdir``,
which is atomic on NFS, Lustre, GPFS and GlusterFS, unlike the POSIX
byte-range locks SQLite itself uses, which many network file systems get
wrong. A few file systems (object stores mounted through FUSE) cannot hold a
database at all.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from .mounts import mounts
from .probe import mount_of
from .rundir import pid_alive

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

#: seconds a writer waits for the lock before giving up
LOCK_TIMEOUT_S = 300.0
#: a lock older than this is taken to be left by a writer that died on another host
LOCK_STALE_S = 900.0
#: a lock folder without its owner file (a writer died between mkdir and writing it)
OWNERLESS_STALE_S = 60.0
OWNER_FILE = "owner.json"


class LockError(Exception):
    """The lock could not be taken or was lost; the message says which and why."""


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


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)

    return True


def _describe(owner: dict | None) -> str:
    if owner is None:
        return "a writer that left no owner file"
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(owner.get("since", 0)))
    return f"{owner.get('host')} pid {owner.get('pid')} since {since}"


class HostLock:
    """An exclusive lock across hosts: the folder ``<path>.lock``, made with ``mkdir``.

    The folder holds the writer's host, pid and time. A waiter retries until
    ``timeout_s``; a lock whose writer's pid is gone (same host) or that is
    older than ``stale_s`` is broken, with a line to ``log``. Taking it again
    in the same process only counts the nesting.
    """

    _depth: dict[str, int] = {}

    def __init__(
        self,
        path: str | os.PathLike,
        timeout_s: float | None = None,
        stale_s: float | None = None,
        log: Callable[[str], None] = _stderr,
    ):
        self.folder = Path(os.path.abspath(f"{os.fspath(path)}.lock"))
        self.timeout_s = LOCK_TIMEOUT_S if timeout_s is None else timeout_s
        self.stale_s = LOCK_STALE_S if stale_s is None else stale_s
        self.log = log
        self.token = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex}"

    def __enter__(self) -> HostLock:
        key = str(self.folder)
        if self._depth.get(key):
            self._depth[key] += 1
            return self
        self.acquire()
        self._depth[key] = 1
        return self

    def __exit__(self, *exc_info) -> None:
        key = str(self.folder)
        self._depth[key] -= 1
        if not self._depth[key]:
            del self._depth[key]
            self.release()

    def acquire(self) -> None:
        self.folder.parent.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + self.timeout_s
        delay = 0.02
        while not self._take():
            owner = self._owner(self.folder)
            reason = self._stale_reason(owner)
            if reason:
                self._break(owner, reason)
                continue
            if time.monotonic() > deadline:
                raise LockError(
                    f"waited {self.timeout_s:.0f} s for {self.folder}, held by "
                    f"{_describe(owner)}: if that writer is gone, remove {self.folder}"
                )
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 1.5, 0.5)

    def release(self) -> None:
        owner = self._owner(self.folder)
        if owner is None or owner.get("token") != self.token:
            raise LockError(
                f"{self.folder} was taken from this writer while it wrote (now held by "
                f"{_describe(owner)}): another writer may have written at the same time"
            )
        (self.folder / OWNER_FILE).unlink(missing_ok=True)
        self.folder.rmdir()

    def _take(self) -> bool:
        """mkdir, then the owner file (written aside and renamed, so it is never half there)."""
        try:
            self.folder.mkdir()
        except FileExistsError:
            return False
        now = time.time()
        owner = {"host": socket.gethostname(), "pid": os.getpid(), "since": now}
        owner["token"] = self.token
        aside = self.folder / f"{OWNER_FILE}.{os.getpid()}"
        aside.write_text(json.dumps(owner))
        os.replace(aside, self.folder / OWNER_FILE)
        return True

    @staticmethod
    def _owner(folder: Path) -> dict | None:
        try:
            return json.loads((folder / OWNER_FILE).read_text())
        except (OSError, ValueError):
            return None

    def _stale_reason(self, owner: dict | None) -> str | None:
        """Why the lock is left over by a dead writer, or None while it may be alive."""
        if owner is None:
            try:
                age = time.time() - self.folder.stat().st_mtime
            except FileNotFoundError:
                return None  # released meanwhile: try again
            return (
                f"it has no owner file and is {age:.0f} s old" if age > OWNERLESS_STALE_S else None
            )
        pid = int(owner.get("pid") or 0)
        if owner.get("host") == socket.gethostname() and pid > 0 and not pid_alive(pid):
            return f"process {pid} on {owner.get('host')} is gone"
        age = time.time() - float(owner.get("since") or 0)
        return (
            f"it is {age:.0f} s old (more than {self.stale_s:.0f} s)"
            if age > self.stale_s
            else None
        )

    def _break(self, owner: dict | None, reason: str) -> None:
        """Move the stale lock aside (atomic), then make sure it was the one judged stale."""
        aside = self.folder.with_name(f"{self.folder.name}.stale-{uuid.uuid4().hex[:12]}")
        try:
            os.rename(self.folder, aside)
        except FileNotFoundError:
            return  # another waiter broke it first
        moved = self._owner(aside)
        judged = owner and owner.get("token")
        if (moved and moved.get("token")) != judged:
            try:  # a new writer took the lock in between: give it back
                os.rename(aside, self.folder)
            except OSError:
                pass
            return
        shutil.rmtree(aside, ignore_errors=True)
        self.log(f"broke the stale lock {self.folder} of {_describe(owner)}: {reason}")
