"""The one lock helper: an fcntl lock on one host, a folder made with mkdir across hosts."""

from __future__ import annotations

import json
import multiprocessing
import os
import socket
import subprocess
import sys
import time

import pytest
from conftest import REPO
from tierbench import locks

# --- across hosts: the folder lock ---------------------------------------------------


def _count_under_lock(path, counter, times, barrier):
    """Read, wait, write: without mutual exclusion two workers lose each other's counts."""
    barrier.wait()
    for _ in range(times):
        with locks.HostLock(path, timeout_s=60):
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
            target=_count_under_lock, args=(tmp_path / "db.sqlite.lock", counter, 40, barrier)
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
    (folder / locks.OWNER_FILE).write_text(json.dumps(owner))


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_folder_another_host_makes_at_once_is_waited_for(tmp_path, monkeypatch):
    """On GlusterFS two nodes made the database's folder at once; the loser's mkdir saw it
    exist, but not yet as a folder, and exist_ok raised FileExistsError (test_slurm)."""
    made, real_mkdir = [], locks.Path.mkdir

    def raced(self, *args, **kwargs):
        if self == tmp_path / "results" and len(made) < 3:
            made.append(self)
            raise FileExistsError(17, "File exists", str(self))
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(locks.Path, "mkdir", raced)
    with locks.HostLock(tmp_path / "results" / "db.sqlite.lock", timeout_s=5):
        assert (tmp_path / "results" / "db.sqlite.lock").is_dir()
    assert len(made) == 3


def test_a_lock_whose_process_is_gone_is_broken_with_a_log_line(tmp_path):
    folder = tmp_path / "db.sqlite.lock"
    pid = _dead_pid()
    _leave_lock(folder, {"host": socket.gethostname(), "pid": pid, "since": time.time()})
    said = []
    with locks.HostLock(tmp_path / "db.sqlite.lock", timeout_s=5, log=said.append):
        owner = json.loads((folder / locks.OWNER_FILE).read_text())
        assert owner["pid"] == os.getpid()
    assert len(said) == 1 and f"pid {pid}" in said[0] and "is gone" in said[0]
    assert [p.name for p in tmp_path.iterdir()] == []  # nothing moved aside is left


def test_an_old_lock_of_another_host_is_broken(tmp_path):
    folder = tmp_path / "db.sqlite.lock"
    old = time.time() - 2 * locks.LOCK_STALE_S
    _leave_lock(folder, {"host": "node-that-died", "pid": 1, "since": old, "token": "x"})
    said = []
    with locks.HostLock(tmp_path / "db.sqlite.lock", timeout_s=5, log=said.append):
        pass
    assert len(said) == 1 and "node-that-died" in said[0] and "s old" in said[0]


def test_a_lock_folder_without_its_owner_file_is_broken_once_old(tmp_path):
    folder = tmp_path / "db.sqlite.lock"
    folder.mkdir()
    then = time.time() - 2 * locks.OWNERLESS_STALE_S
    os.utime(folder, (then, then))
    said = []
    with locks.HostLock(tmp_path / "db.sqlite.lock", timeout_s=5, log=said.append):
        pass
    assert len(said) == 1 and "no owner file" in said[0]


def test_a_held_lock_times_out_saying_who_holds_it(tmp_path):
    folder = tmp_path / "db.sqlite.lock"
    _leave_lock(folder, {"host": "node2", "pid": 4242, "since": time.time(), "token": "t"})
    started = time.monotonic()
    with pytest.raises(locks.LockError) as error:
        with locks.HostLock(tmp_path / "db.sqlite.lock", timeout_s=0.5):
            pass
    assert 0.5 <= time.monotonic() - started < 5
    message = str(error.value)
    assert "node2 pid 4242" in message and f"remove {folder}" in message
    assert "\n" not in message
    assert folder.is_dir()  # a live lock is left alone


def test_a_lock_taken_away_while_held_is_an_error(tmp_path):
    lock = locks.HostLock(tmp_path / "db.sqlite.lock")
    with pytest.raises(locks.LockError, match="taken from this writer"):
        with lock:
            owner = {"host": "node2", "pid": 1, "since": time.time(), "token": "other"}
            (lock.folder / locks.OWNER_FILE).write_text(json.dumps(owner))


# --- the helper: both kinds --------------------------------------------------------


@pytest.mark.parametrize("across_hosts", [False, True])
def test_the_lock_nests_within_one_process(tmp_path, across_hosts):
    """The results store takes its lock again inside a write; only the outer release frees it."""
    lock = tmp_path / "db.sqlite.lock"
    with locks.exclusive(lock, across_hosts=across_hosts):
        with locks.exclusive(lock, wait=False, across_hosts=across_hosts):
            assert lock.exists()
        assert lock.exists()
        assert _refused(lock, across_hosts)  # still held against another process
    assert not lock.exists()


@pytest.mark.parametrize("across_hosts", [False, True])
def test_a_held_lock_is_refused_at_once_naming_it_and_what_its_holder_does(tmp_path, across_hosts):
    lock = tmp_path / "cluster.lock"
    with locks.exclusive(lock, across_hosts=across_hosts):
        message = _refused(lock, across_hosts, held="a test runs its own cluster")
    assert str(lock) in message and message.endswith("; a test runs its own cluster")
    assert "\n" not in message
    assert not lock.exists()


def _refused(lock, across_hosts, held=""):
    """The refusal another process gets for ``lock`` without waiting ("" when it got it)."""
    argv = [sys.executable, "-c", TRY_LOCK, str(lock), str(across_hosts), held]
    env = {**os.environ, "PYTHONPATH": str(REPO / "workflow")}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60, check=True)
    return done.stdout.strip()


TRY_LOCK = """
import sys
from tierbench import locks
try:
    with locks.exclusive(sys.argv[1], wait=False, across_hosts=sys.argv[2] == "True",
                         held=sys.argv[3]):
        pass
except locks.LockError as error:
    print(error)
"""

HOLD_LOCK = """
import sys
from tierbench import locks
with locks.exclusive(sys.argv[1]):
    print("held", flush=True)
    sys.stdin.readline()
"""


def test_lock_file_is_removed_and_a_waiter_locks_the_new_one(tmp_path):
    """The lock on one host leaves no file behind, and never lets two holders in.

    A waits on B's file while B removes it on release; A must then hold the lock
    at the path, so a third process is refused rather than let in beside it.
    """
    lock = tmp_path / "cluster.lock"
    env = {**os.environ, "PYTHONPATH": str(REPO / "workflow")}

    def holder():
        argv = [sys.executable, "-c", HOLD_LOCK, str(lock)]
        return subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
        )

    first = holder()
    second = None
    try:
        assert first.stdout.readline() == "held\n"
        second = holder()
        deadline = time.monotonic() + 30
        while not any(
            os.path.realpath(f"/proc/{second.pid}/fd/{fd}") == str(lock)
            for fd in os.listdir(f"/proc/{second.pid}/fd")
        ):
            assert time.monotonic() < deadline, "the second holder never opened the lock file"
            time.sleep(0.05)
        first.communicate("\n", timeout=30)  # releases and removes the file the second waits on
        assert second.stdout.readline() == "held\n"
        assert lock.exists()
        with pytest.raises(locks.LockError, match="holds"):
            with locks.exclusive(lock, wait=False):
                pass
        second.communicate("\n", timeout=30)
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
    assert first.returncode == 0 and second.returncode == 0
    assert not lock.exists()
    with locks.exclusive(lock, wait=False):
        assert lock.exists()
    assert not lock.exists()
