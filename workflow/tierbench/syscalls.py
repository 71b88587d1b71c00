"""Count the system calls of one job with ``strace -f -C``, grouped by what they do to files.

A proxy stands for an application only if it asks the file system for the
same things: as many creates, folders, writes, renames and fsyncs per output
step. An experiment with ``count_syscalls: true`` runs each job under
``strace -f -C`` attached to the runner itself for the duration of
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

strace prints every call as well as its table (``-C``), so the same trace
also gives the job's profile in the metadata workload's operations
(:data:`OPERATIONS`): opens with O_CREAT apart from other opens, rmdir apart
from unlink, a stat of a path apart from one of an open file, and the
writes by size. ``ops_<phase>`` times the metadata workload's
``<phase>_cost`` on a tier is what those calls cost the job there. Given the
job's run folder (``within``), a call whose path is absolute and outside it
(a library loaded from /usr, /proc) is counted apart, in ``ops_elsewhere``:
the tier does not answer it. A relative path is the job's own (it runs in its
run folder). Writes are counted by size whatever file they go to (a log on a
pipe too): strace names the descriptor, not the file.
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

from .packages import package_of
from .records import metric

STRACE = "strace"
#: why nothing was counted where strace is missing
STRACE_MISSING = f"strace missing: not found on PATH (Debian package {package_of(STRACE)})"
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
#: strace's options: follow children, its table and every call (-C, which the profile
#: reads), no bytes of the buffers (paths are printed whole)
OPTIONS = ("-f", "-C", "-s", "0")
#: the metadata workload's phases (tierbench.workloads.metadata) a call is counted in: an
#: open with O_CREAT or creat (file_create), any other open (file_read: the phase opens and
#: closes), a stat of a path (file_stat; of an open file, not counted: no lookup), rename,
#: unlink (file_remove), mkdir (dir_create), rmdir or unlinkat(AT_REMOVEDIR) (dir_remove),
#: fsync and fdatasync; a failed call too, as in the table, where the file system answered it
#: (ENOENT: a lookup), not where it was refused before (:data:`REFUSED`)
OPERATIONS = (
    "file_create", "file_read", "file_stat", "file_rename", "file_remove",
    "dir_create", "dir_remove", "fsync",
)  # fmt: skip
#: a job's count of an operation is the metric ``ops_<operation>`` (calls)
OPS_PREFIX = "ops_"
#: calls of those operations on a path outside the job's run folder (not on its tier)
ELSEWHERE = f"{OPS_PREFIX}elsewhere"
#: upper bounds of the write sizes counted apart (bytes a write returned), with their names;
#: the last class is every write above the last bound
WRITE_CLASSES = ((512, "512B"), (4096, "4KiB"), (65536, "64KiB"), (1 << 20, "1MiB"))
_CALL_OPERATION = {
    "mkdir": "dir_create", "mkdirat": "dir_create", "rmdir": "dir_remove",
    "unlink": "file_remove", "rename": "file_rename", "renameat": "file_rename",
    "renameat2": "file_rename", "fsync": "fsync", "fdatasync": "fsync",
    "stat": "file_stat", "lstat": "file_stat", "stat64": "file_stat", "lstat64": "file_stat",
}  # fmt: skip
_OPENS = ("open", "openat", "openat2")
_AT_STATS = ("newfstatat", "fstatat64", "statx")
_WRITES = ("write", "writev", "pwrite64", "pwritev", "pwritev2")
#: a call's first string argument: the path it names (strace prints paths whole)
_PATH = re.compile(r'"((?:[^"\\]|\\.)*)"')
#: one line of strace -f: its pid, then the call, or a part of it
_LINE = re.compile(r"^(?P<pid>\d+)\s+(?P<rest>.*)$")
_RESUMED = re.compile(r"^<\.\.\. \w+ resumed>(?P<rest>.*)$")
_UNFINISHED = " <unfinished ...>"
_COMPLETE = re.compile(
    r"^(?P<name>\w+)\((?P<args>.*)\)\s+=\s+(?P<result>-?\d+|\?)(?:\s+(?P<errno>E[A-Z0-9]+))?"
)
#: a call that failed with one of these was refused before the file system was asked (or
#: by a FUSE file system that had said once it cannot): it costs no tier time
REFUSED = frozenset(
    {"EINVAL", "ENOSYS", "EOPNOTSUPP", "ENOTSUP", "EXDEV", "EBADF", "EFAULT", "ENAMETOOLONG"}
)
#: calls of the operations that were refused (:data:`REFUSED`), apart from ``ops_<phase>``
REFUSED_OPS = f"{OPS_PREFIX}refused"
#: renameat2 calls with RENAME_NOREPLACE (coreutils' mv), in ``ops_file_rename`` or
#: ``ops_refused`` as well; and those refused (GlusterFS's FUSE client refuses every one,
#: after a round trip, and mv then looks the new name up and renames without the flag)
NOREPLACE_OPS = f"{OPS_PREFIX}rename_noreplace"
NOREPLACE_REFUSED_OPS = f"{OPS_PREFIX}rename_noreplace_refused"
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


def calls_of(text: str):
    """Each complete call of strace -f's output, as (name, arguments, result or None, errno
    or ""): a call another process interrupted (``<unfinished ...>``) is joined to its
    resumption."""
    pending: dict[str, str] = {}
    for line in text.splitlines():
        parts = _LINE.match(line)
        if parts is None:
            continue
        pid, rest = parts["pid"], parts["rest"]
        if rest.endswith(_UNFINISHED):
            pending[pid] = rest[: -len(_UNFINISHED)]
            continue
        resumed = _RESUMED.match(rest)
        if resumed is not None:
            if pid not in pending:
                continue
            rest = pending.pop(pid) + resumed["rest"]
        call = _COMPLETE.match(rest)
        if call is not None:
            result = None if call["result"] == "?" else int(call["result"])
            yield call["name"], call["args"], result, call["errno"] or ""


def operation(name: str, args: str) -> str | None:
    """The metadata workload's phase a call is counted in (:data:`OPERATIONS`), or None."""
    if name == "creat" or (name in _OPENS and "O_CREAT" in args):
        return "file_create"
    if name in _OPENS:
        return "file_read"
    if name in _AT_STATS:
        # fstat is newfstatat(fd, "", ..., AT_EMPTY_PATH) in glibc: no path, no lookup
        return None if "AT_EMPTY_PATH" in args and ', "",' in args else "file_stat"
    if name == "unlinkat":
        return "dir_remove" if "AT_REMOVEDIR" in args else "file_remove"
    return _CALL_OPERATION.get(name)


def write_class(size: int) -> str:
    for bound, label in WRITE_CLASSES:
        if size <= bound:
            return f"upto_{label}"
    return f"over_{WRITE_CLASSES[-1][1]}"


def on_the_tier(args: str, within: tuple[str, ...]) -> bool:
    """Whether a call's path (its first string argument) is the job's: relative, or under
    one of ``within``; a call without a path is."""
    path = _PATH.search(args)
    if path is None or not path[1].startswith("/"):
        return True
    return any(path[1] == top or path[1].startswith(top.rstrip("/") + "/") for top in within)


def run_folders(folder) -> tuple[str, ...]:
    """The run folder as the job's calls may name it: as given and with links resolved."""
    return tuple(dict.fromkeys([os.path.abspath(folder), os.path.realpath(folder)]))


def profile(text: str, within: tuple[str, ...] = ()) -> dict[str, int]:
    """A job's calls from strace -f's output: ``ops_<operation>`` and, per write size,
    ``writes_<class>`` (writes that returned that many bytes) and ``written_<class>``
    (their bytes); every key present, zero when none. A call refused before the file
    system was asked counts in ``ops_refused``; renames without replacing also in
    :data:`NOREPLACE_OPS` (and :data:`NOREPLACE_REFUSED_OPS`); with ``within`` (the run folder,
    :func:`run_folders`), one on a path outside it in ``ops_elsewhere``."""
    classes = [f"upto_{label}" for _, label in WRITE_CLASSES] + [f"over_{WRITE_CLASSES[-1][1]}"]
    found = {f"{OPS_PREFIX}{op}": 0 for op in OPERATIONS}
    found[REFUSED_OPS] = found[NOREPLACE_OPS] = found[NOREPLACE_REFUSED_OPS] = 0
    if within:
        found[ELSEWHERE] = 0
    found |= {f"{kind}_{c}": 0 for c in classes for kind in ("writes", "written")}
    for name, args, result, errno in calls_of(text):
        if name in _WRITES:
            if result is not None and result >= 0:
                found[f"writes_{write_class(result)}"] += 1
                found[f"written_{write_class(result)}"] += result
            continue
        op = operation(name, args)
        if op is None:
            continue
        if within and not on_the_tier(args, within):
            found[ELSEWHERE] += 1
            continue
        noreplace = name == "renameat2" and "RENAME_NOREPLACE" in args
        found[NOREPLACE_OPS] += noreplace
        if errno in REFUSED:
            found[REFUSED_OPS] += 1
            found[NOREPLACE_REFUSED_OPS] += noreplace
        else:
            found[f"{OPS_PREFIX}{op}"] += 1
    return found


def profile_metrics(found: dict[str, int]) -> list[dict]:
    """The profile as metrics: counts in calls, bytes in B."""
    return [
        metric(key, value, "B" if key.startswith("written_") else "calls")
        for key, value in found.items()
    ]


def added_profiles(*profiles: dict[str, int]) -> dict[str, int]:
    total: dict[str, int] = {}
    for one in profiles:
        for key, value in one.items():
            total[key] = total.get(key, 0) + value
    return total


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
    """``strace -f -C`` attached to this process from :meth:`start` until :meth:`stop`;
    :attr:`profile` is the job's profile once stopped."""

    def __init__(self, strace: str | None = None, within: tuple[str, ...] = ()):
        self.strace = strace or shutil.which(STRACE)
        self.within = within
        self.folder = Path(tempfile.mkdtemp(prefix="tierbench-strace-"))
        self.table_path = self.folder / "table.txt"
        self.stderr_path = self.folder / "stderr.txt"
        self.process: subprocess.Popen | None = None
        self.command: list[str] = []
        self.profile: dict[str, int] = {}

    def start(self) -> None:
        """Start strace and return once it traces every thread of this process."""
        if not self.strace:
            raise NotCounted(STRACE_MISSING)
        pid = os.getpid()
        self.command = [self.strace, *OPTIONS, "-o", str(self.table_path), "-p", str(pid)]
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
        self.profile = profile(text, self.within)
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
    outside the runner's trace, ``strace -f -C`` of that rank, its table in a file of its
    own in the job's ``rank_tables`` folder (a folder every node sees); else nothing. A node
    without strace runs the rank untraced, and the job then lacks that rank's table."""
    if getattr(job, "rank_tables", None) is None:
        return []
    strace = shlex.quote(STRACE)
    wrapper = (
        f'out=$1; shift; command -v {strace} >/dev/null || exec "$@"; '
        f'exec {strace} {" ".join(OPTIONS)} -o "$out.$(uname -n).$$" "$@"'
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


def rank_profiles(folder: Path, within: tuple[str, ...] = ()) -> dict[str, int]:
    """The ranks' profiles added up (:func:`rank_tables` says whether every rank is there)."""
    return added_profiles(
        *(
            profile(path.read_text(errors="replace"), within)
            for path in sorted(folder.glob("rank.*"))
        )
    )


def counted(job, run: Callable, tasks: int = 1) -> list[dict]:
    """``run(job)`` with its system calls counted; the counts join its metrics.

    ``tasks``: the job's ranks, each traced on its own where the runner's trace
    would miss them (:func:`outside_the_trace`). The raw table goes to
    ``job.extra["syscalls"]``; when the calls cannot be counted the job still
    runs, and the record and the log say why.
    """
    options = " ".join(OPTIONS)
    command = f"strace {options} -p <runner pid>, from before run(job) until it returned"
    if outside := outside_the_trace(job.spec):
        job.rank_tables = Path(tempfile.mkdtemp(prefix=".tierbench-strace-", dir=Path.cwd()))
        command += f"; and strace {options} of each rank ({outside})"
    within = run_folders(job.folder.path) if getattr(job, "folder", None) else ()
    tracer = Tracer(within=within)
    try:
        job.log(f"counting system calls with {tracer.strace or STRACE} {options} (a slow run)")
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
        found = getattr(tracer, "profile", {})
        if table is not None and outside:
            ranks, failure = rank_tables(job.rank_tables, tasks)
            table = None if ranks is None else added(table, ranks)
            found = added_profiles(found, rank_profiles(job.rank_tables, within))
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
            "profile": found,
        }
        if any(m["status"] != "ok" for m in metrics):
            return metrics
        return metrics + metrics_of(table) + profile_metrics(found)
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
