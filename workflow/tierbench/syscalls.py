"""Count the system calls of one job with ``strace -f -c``, grouped by what they do to files.

A proxy stands for an application only if it asks the file system for the
same things: as many creates, folders, writes, renames and fsyncs per output
step. An experiment with ``count_syscalls: true`` runs each job under
``strace -f -c`` attached to the runner itself for the duration of
``run(job)`` only, so the runner's start-up and the record it writes are not
counted, and every process the workload starts (MPI launchers, ranks, solver
processes) is followed.

What is counted is every call of the job's processes, not only those on the
tier: loading libraries, pipes, the launcher's own polling. A comparison
subtracts the counts of a no-output baseline of the same shape (see
:mod:`tierbench.fidelity`). ptrace stops every process at every call, so a
traced run is far slower than an untraced one: its times mean nothing, and a
traced experiment is never the timed one.

Where the MPI ranks are not the runner's processes (``srun`` starts them
from slurmstepd, :func:`outside_the_trace`), each rank runs under an strace
of its own (:func:`rank_prefix`) and the tables are added up. Where strace
is missing or may not attach (ptrace forbidden), or a rank's table is
missing, the job's calls are not counted and its record says why
(``extra["syscalls"]``, ``counted: false``).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from .records import metric

STRACE = "strace"
#: file-system calls by what they do; the metric of a category is ``syscalls_<category>``
CATEGORIES = {
    "open": ("open", "openat", "openat2", "creat"),
    "mkdir": ("mkdir", "mkdirat"),
    "write": ("write", "writev", "pwrite64", "pwritev", "pwritev2"),
    "read": ("read", "readv", "pread64", "preadv", "preadv2"),
    "close": ("close", "close_range"),
    "unlink": ("unlink", "unlinkat", "rmdir"),
    "rename": ("rename", "renameat", "renameat2"),
    "fsync": ("fsync", "fdatasync", "sync_file_range", "syncfs"),
    "stat": (
        "stat", "lstat", "fstat", "newfstatat", "fstatat64", "statx",
        "stat64", "lstat64", "fstat64",
    ),
}  # fmt: skip
#: what each category stands for, for tables
CATEGORY_LABELS = {
    "open": "open/create",
    "mkdir": "mkdir",
    "write": "write",
    "read": "read",
    "close": "close",
    "unlink": "unlink/rmdir",
    "rename": "rename",
    "fsync": "fsync",
    "stat": "stat",
}
METRIC_PREFIX = "syscalls_"
ATTACH_TIMEOUT_S = 10.0
DETACH_TIMEOUT_S = 60.0
#: prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY): lets a child trace us under Yama ptrace_scope 1
PR_SET_PTRACER = 0x59616D61
PR_SET_PTRACER_ANY = -1

# A row of strace's -c table: % time, seconds, usecs/call, calls, [errors], syscall
_ROW = re.compile(
    r"^\s*(?P<percent>[\d.]+)\s+(?P<seconds>[\d.]+)\s+(?P<usecs>\d+)\s+"
    r"(?P<calls>\d+)\s+(?:(?P<errors>\d+)\s+)?(?P<name>[A-Za-z_][\w]*)\s*$"
)


def parse_table(text: str) -> dict[str, dict]:
    """strace -c output -> {syscall: {"calls", "errors", "seconds"}}.

    Tables of several personalities (64- and 32-bit) are added up; the
    ``total`` row and strace's own messages are left out.
    """
    table: dict[str, dict] = {}
    for line in text.splitlines():
        row = _ROW.match(line)
        if row is None or row["name"] == "total":
            continue
        entry = table.setdefault(row["name"], {"calls": 0, "errors": 0, "seconds": 0.0})
        entry["calls"] += int(row["calls"])
        entry["errors"] += int(row["errors"] or 0)
        entry["seconds"] += float(row["seconds"])
    return table


def categorise(table: dict[str, dict]) -> dict[str, int]:
    """Calls per category (failed calls included: a failed open still asked the file system)."""
    return {
        category: sum(table.get(name, {}).get("calls", 0) for name in names)
        for category, names in CATEGORIES.items()
    }


def metrics_of(table: dict[str, dict]) -> list[dict]:
    return [
        metric(f"{METRIC_PREFIX}{category}", count, "calls")
        for category, count in categorise(table).items()
    ]


class NotCounted(Exception):
    """strace could not count this job's calls; the message says why in one line."""


def _allow_tracing_by_children() -> None:
    """Under Yama ptrace_scope 1 a child may not trace its parent unless the parent allows it."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0)


def _forbid_tracing_by_children() -> None:
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PTRACER, 0, 0, 0, 0)


def _tracer_pids(pid: int) -> set[int]:
    """TracerPid of every thread of ``pid`` (0 for an untraced thread)."""
    pids = set()
    for status in Path(f"/proc/{pid}/task").glob("*/status"):
        with contextlib.suppress(OSError):
            for line in status.read_text().splitlines():
                if line.startswith("TracerPid:"):
                    pids.add(int(line.split()[1]))
    return pids


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


class Tracer:
    """``strace -f -c`` attached to this process from :meth:`start` until :meth:`stop`."""

    def __init__(self, strace: str | None = None):
        self.strace = strace or shutil.which(STRACE)
        self.folder = Path(tempfile.mkdtemp(prefix="tierbench-strace-"))
        self.table_path = self.folder / "table.txt"
        self.stderr_path = self.folder / "stderr.txt"
        self.process: subprocess.Popen | None = None
        self.command: list[str] = []

    def start(self) -> None:
        """Start strace and return once it traces every thread of this process."""
        if not self.strace:
            raise NotCounted("strace missing: not found on PATH (Debian package strace)")
        pid = os.getpid()
        self.command = [self.strace, "-f", "-c", "-o", str(self.table_path), "-p", str(pid)]
        _allow_tracing_by_children()
        with open(self.stderr_path, "wb") as stderr:
            self.process = subprocess.Popen(
                self.command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr
            )
        deadline = time.monotonic() + ATTACH_TIMEOUT_S
        try:
            while _tracer_pids(pid) != {self.process.pid}:
                if self.process.poll() is not None:
                    raise NotCounted(f"strace could not attach: {self._stderr()}")
                if time.monotonic() > deadline:
                    self._kill()
                    raise NotCounted(f"strace did not attach within {ATTACH_TIMEOUT_S:.0f} s")
                time.sleep(0.01)
        finally:
            _forbid_tracing_by_children()

    def stop(self) -> dict[str, dict]:
        """Detach strace (SIGINT: it prints its table and lets go) and parse its table."""
        if self.process is None:
            return {}
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=DETACH_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._kill()
            raise NotCounted(f"strace did not detach within {DETACH_TIMEOUT_S:.0f} s") from None
        finally:
            self.process = None
        text = self.table_path.read_text(errors="replace") if self.table_path.exists() else ""
        table = parse_table(text)
        if not table:
            raise NotCounted(f"strace wrote no table: {self._stderr()}")
        return table

    def _kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def _stderr(self) -> str:
        try:
            return _first_line(self.stderr_path.read_text(errors="replace"))
        except OSError:
            return "no output"

    def close(self) -> None:
        self._kill()
        shutil.rmtree(self.folder, ignore_errors=True)


def version(strace: str) -> str:
    try:
        done = subprocess.run([strace, "-V"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return _first_line(done.stdout.splitlines()[0] if done.stdout else "") or "unknown"


def outside_the_trace(spec: dict, environ=os.environ) -> str:
    """Why a job's MPI ranks would not be processes of the traced runner, else "".

    ``strace -f`` follows the runner's own children only: ``srun`` has each
    node's slurmstepd start the ranks, and any launcher of a job on several
    nodes starts the other nodes' ranks there. The runner's counts alone would
    be the launcher's, the same with writes and without; such ranks are each
    traced on their own (:func:`rank_prefix`).
    """
    argv = shlex.split(spec.get("launcher") or "")
    if not argv:
        return ""
    tool = os.path.basename(argv[0])
    if tool == "srun":
        return "srun starts the ranks from slurmstepd, outside the runner's process tree"
    nodes = environ.get("SLURM_JOB_NUM_NODES", "1")
    if nodes.isdigit() and int(nodes) > 1:
        return f"{tool} starts the ranks of the job's other {int(nodes) - 1} node(s) there"
    return ""


def rank_prefix(job) -> list[str]:
    """What a workload puts between the launcher and a rank's program: where the ranks are
    outside the runner's trace, ``strace -f -c`` of that rank, its table in a file of its
    own in the job's ``rank_tables`` folder (a folder every node sees); else nothing. A node
    without strace runs the rank untraced, and the job then lacks that rank's table."""
    if getattr(job, "rank_tables", None) is None:
        return []
    strace = shlex.quote(STRACE)
    wrapper = (
        f'out=$1; shift; command -v {strace} >/dev/null || exec "$@"; '
        f'exec {strace} -f -c -o "$out.$(uname -n).$$" "$@"'
    )
    return ["sh", "-c", wrapper, "sh", str(job.rank_tables / "rank")]


def rank_tables(folder: Path, tasks: int) -> tuple[dict[str, dict] | None, str]:
    """The ranks' tables added up, or None and why: one table per rank is expected."""
    found = sorted(folder.glob("rank.*"))
    if len(found) != tasks:
        return (
            None,
            f"{len(found)} of the job's {tasks} ranks counted their calls (strace on every node?)",
        )
    return added(*(parse_table(path.read_text(errors="replace")) for path in found)), ""


def counted(job, run: Callable, tasks: int = 1) -> list[dict]:
    """``run(job)`` with its system calls counted; the counts join its metrics.

    ``tasks``: the job's ranks, each traced on its own where the runner's trace
    would miss them (:func:`outside_the_trace`). The raw table goes to
    ``job.extra["syscalls"]``; when the calls cannot be counted the job still
    runs, and the record and the log say why.
    """
    command = "strace -f -c -p <runner pid>, from before run(job) until it returned"
    if outside := outside_the_trace(job.spec):
        job.rank_tables = Path(tempfile.mkdtemp(prefix=".tierbench-strace-", dir=Path.cwd()))
        command += f"; and strace -f -c of each rank ({outside})"
    tracer = Tracer()
    try:
        job.log(f"counting system calls with {tracer.strace or STRACE} -f -c (a slow run)")
        try:
            tracer.start()
        except NotCounted as reason:
            job.rank_tables = None
            return _uncounted(job, run, str(reason))
        try:
            metrics = run(job)
        finally:
            try:
                table, failure = tracer.stop(), ""
            except NotCounted as reason:
                table, failure = None, str(reason)
        if table is not None and outside:
            ranks, failure = rank_tables(job.rank_tables, tasks)
            table = None if ranks is None else added(table, ranks)
        if table is None:
            job.extra["syscalls"] = {"counted": False, "reason": failure}
            job.log(f"system calls not counted: {failure}")
            return metrics
        job.extra["syscalls"] = {
            "counted": True,
            "command": command,
            "strace": version(tracer.strace),
            "categories": categorise(table),
            "table": table,
        }
        if any(m["status"] != "ok" for m in metrics):
            return metrics
        return metrics + metrics_of(table)
    finally:
        tracer.close()
        if getattr(job, "rank_tables", None) is not None:
            shutil.rmtree(job.rank_tables, ignore_errors=True)


def added(*tables: dict[str, dict]) -> dict[str, dict]:
    """Tables of several processes (the runner's, each rank's) as one."""
    total: dict[str, dict] = {}
    for table in tables:
        for name, row in table.items():
            entry = total.setdefault(name, {"calls": 0, "errors": 0, "seconds": 0.0})
            for key in entry:
                entry[key] += row[key]
    return total


def _uncounted(job, run: Callable, reason: str) -> list[dict]:
    job.extra["syscalls"] = {"counted": False, "reason": reason}
    job.log(f"system calls not counted: {reason}")
    return run(job)
