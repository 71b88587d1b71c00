"""One holder at a time: the lock the results store and the cluster on one machine share.

:func:`exclusive` holds the lock at a path for a block, waiting for it or
refusing at once, and says who holds it when it refuses. Where the lock's
takers run decides how it is made:

- on one host, an fcntl lock on a file: the kernel drops it when its holder
  dies, however it dies (the cluster on one machine, one per machine);
- across hosts, a folder made with ``mkdir`` holding the owner's host, pid and
  time (:class:`HostLock`): atomic on NFS, Lustre, GPFS and GlusterFS, unlike
  the POSIX byte-range locks many network file systems get wrong (the results
  database there, see ``tierbench.sharedfs``).

Either is removed when released, so the machine is left as it was, and taking
a lock again in the process that holds it only counts the nesting.
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import shutil
import socket
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .rundir import pid_alive

#: seconds a waiter for a lock across hosts waits before giving up
LOCK_TIMEOUT_S = 300.0
#: a lock across hosts older than this is taken to be left by a holder that died elsewhere
LOCK_STALE_S = 900.0
#: a lock folder without its owner file (a holder died between mkdir and writing it)
OWNERLESS_STALE_S = 60.0
OWNER_FILE = "owner.json"

#: the locks this process holds (absolute path -> depth), so a nested take only counts
_HELD: dict[str, int] = {}


def make_folder(path: Path, tries: int = 40) -> None:
    """``mkdir -p`` that another host making the same folder at once cannot fail: on a
    network file system (GlusterFS) a folder another client has just made may not yet be
    one here, so that ``exist_ok`` raises FileExistsError for a while."""
    for _ in range(tries - 1):
        try:
            path.mkdir(parents=True, exist_ok=True)
            return
        except FileExistsError:
            time.sleep(0.05)
    path.mkdir(parents=True, exist_ok=True)


class LockError(Exception):
    """The lock could not be taken or was lost; the message says which and why."""


@contextmanager
def exclusive(
    path: str | os.PathLike, *, wait: bool = True, across_hosts: bool = False, held: str = ""
) -> Iterator[None]:
    """Hold the lock at ``path`` for the block: a file, or with ``across_hosts`` a folder.

    ``wait=False`` refuses at once when another process holds it; waiting
    lasts on one host until the holder lets go (the kernel sees it die), across
    hosts up to LOCK_TIMEOUT_S (a holder on another host may have died unseen).
    The refusal is a :class:`LockError` naming the lock, then ``held``: what
    its holder is likely doing and what to do about it.
    """
    key = os.path.abspath(path)
    if key in _HELD:
        _HELD[key] += 1
        try:
            yield
        finally:
            _HELD[key] -= 1
        return
    if across_hosts:
        lock = HostLock(key, timeout_s=None if wait else 0.0)
    else:
        lock = _FileLock(Path(key), wait)
    try:
        lock.acquire()
    except LockError as error:
        raise LockError(f"{error}; {held}" if held else str(error)) from None
    _HELD[key] = 1
    try:
        yield
    finally:
        del _HELD[key]
        lock.release()


class _FileLock:
    """An fcntl lock on a file of one host, the file removed by its holder on release."""

    def __init__(self, path: Path, wait: bool):
        self.path = path
        self.wait = wait
        self.handle = None

    def acquire(self) -> None:
        make_folder(self.path.parent)
        self.handle = self._lock_current()

    def release(self) -> None:
        self.path.unlink(missing_ok=True)
        self.handle.close()

    def _lock_current(self):
        """The open, locked lock file that is still the one at its path.

        Locking and the path can part: a holder removes the file on release,
        and a process that waited on that file then holds the lock of a file no
        one else can open. It opens the path again until the file it locked is
        the one there.
        """
        operation = fcntl.LOCK_EX if self.wait else fcntl.LOCK_EX | fcntl.LOCK_NB
        while True:
            handle = open(self.path, "a")
            try:
                fcntl.lockf(handle, operation)
            except OSError as error:
                handle.close()
                raise LockError(f"another process holds {self.path}") from error
            try:
                there = os.stat(self.path)
            except FileNotFoundError:
                there = None
            held = os.fstat(handle.fileno())
            if there is not None and (there.st_dev, there.st_ino) == (held.st_dev, held.st_ino):
                return handle
            handle.close()


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


def _describe(owner: dict | None) -> str:
    if owner is None:
        return "a writer that left no owner file"
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(owner.get("since", 0)))
    return f"{owner.get('host')} pid {owner.get('pid')} since {since}"


class HostLock:
    """An exclusive lock across hosts: the folder ``folder``, made with ``mkdir``.

    The folder holds the writer's host, pid and time. A waiter retries until
    ``timeout_s``; a lock whose writer's pid is gone (same host) or that is
    older than ``stale_s`` is broken, with a line to ``log``.
    """

    def __init__(
        self,
        folder: str | os.PathLike,
        timeout_s: float | None = None,
        stale_s: float | None = None,
        log: Callable[[str], None] = _stderr,
    ):
        self.folder = Path(os.path.abspath(folder))
        self.timeout_s = LOCK_TIMEOUT_S if timeout_s is None else timeout_s
        self.stale_s = LOCK_STALE_S if stale_s is None else stale_s
        self.log = log
        self.token = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex}"

    def __enter__(self) -> HostLock:
        self.acquire()
        return self

    def __exit__(self, *exc_info) -> None:
        self.release()

    def acquire(self) -> None:
        make_folder(self.folder.parent)
        deadline = time.monotonic() + self.timeout_s
        delay = 0.02
        while not self._take():
            owner = self._owner(self.folder)
            reason = self._stale_reason(owner)
            if reason:
                self._break(owner, reason)
                continue
            if time.monotonic() >= deadline:
                waited = f" (waited {self.timeout_s:.0f} s)" if self.timeout_s else ""
                raise LockError(
                    f"{self.folder} is held by {_describe(owner)}{waited}: "
                    f"if that writer is gone, remove {self.folder}"
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
