"""command: any command line, run in a fresh folder on each tier.

The user's own application, whatever it is (a solver, a build, a script), is
the workload: a point copies its inputs into its run folder on the tier, runs
the command there and times it, so the report ranks the tiers for that
application with intervals, as for every other workload. What a user reads
about it (what it measures, what it cannot see) is the ``notes`` of its
parameter schema, printed in docs/workloads.md.

What can be known before any job runs is checked when the study is planned
(:func:`check_params`): the inputs exist, a string parses as bash, and its
first program is found. Everything else ends as a failed point whose reason
ends with the command's last lines of output.
"""

from __future__ import annotations

import collections
import os
import re
import resource
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from functools import lru_cache
from pathlib import Path

from .. import rundir, syscalls
from ..errors import PointFailed, PointNotApplicable
from ..job import Job
from ..records import metric
from ..units import format_size, parse_size
from . import Tool, Workload

#: lines of the command's output kept for the reason of a failure
TAIL_LINES = 8
#: characters of one kept line
LINE_CHARS = 240
#: seconds to wait for the output of a command that was killed
DRAIN_S = 5.0
#: exit statuses bash gives a meaning of its own
BASH_STATUS = {126: "a program could not be executed", 127: "a command was not found"}
#: characters that make a shell word more than a literal name (expansions, globs, operators)
NOT_LITERAL = set("$`*?[]{}()<>|;&!~\\\"'")
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
#: a copy of a slow shared file system, for the job's time estimate (bytes per second)
SLOW_COPY_BYTES_PER_S = 20e6


# --- parameters, checked when the study is planned -------------------------------------------


def input_paths(params: dict) -> list[Path]:
    """The inputs as absolute paths: ~ and $VARIABLES expanded, relative to the working
    folder (Snakemake's, where a study is planned and its jobs run)."""
    found = []
    for entry in params.get("inputs") or []:
        expanded = os.path.expanduser(os.path.expandvars(entry))
        if "$" in expanded:
            raise ValueError(f"inputs: {entry} names an unset variable")
        found.append(Path(os.path.abspath(expanded)))
    return found


def check_inputs(paths: list[Path]) -> None:
    names = collections.Counter(path.name for path in paths)
    twice = sorted(name for name, count in names.items() if count > 1)
    if twice:
        raise ValueError(f"inputs: {', '.join(twice)} named twice (each is copied by its name)")
    for path in paths:
        if not path.exists():
            raise ValueError(f"inputs: {path} does not exist")
        if not (path.is_file() or path.is_dir()):
            raise ValueError(f"inputs: {path} is neither a file nor a folder")
        if path.name == rundir.MARKER:
            raise ValueError(f"inputs: {path} has the name of tierbench's run folder marker")
        if not os.access(path, os.R_OK):
            raise ValueError(f"inputs: {path} cannot be read")


def command_env(params: dict, base: dict | None = None) -> dict[str, str]:
    """The command's environment: the job's, the point's threads as TIERBENCH_THREADS and
    OMP_NUM_THREADS, then ``env`` with its $NAMES taken from the job's environment."""
    base = dict(os.environ if base is None else base)
    threads = str(params.get("threads", 1))
    env = {**base, "TIERBENCH_THREADS": threads, "OMP_NUM_THREADS": threads}
    for name, value in (params.get("env") or {}).items():
        env[name] = expand(str(value), base)
    return env


def expand(value: str, env: dict) -> str:
    """$NAME and ${NAME} from ``env``; a name it does not have is left as written."""

    def lookup(match: re.Match) -> str:
        name = match.group(1) or match.group(2)
        return env.get(name, match.group(0))

    return re.sub(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))", lookup, value)


def first_program(command) -> str | None:
    """The first program a command runs, where it is a literal name; None where the
    shell decides it only when it runs (an expansion, a group, an operator)."""
    if isinstance(command, list):
        return command[0]
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        return None
    words = [word for word in words if not ASSIGNMENT.match(word)] if words else []
    if not words or NOT_LITERAL & set(words[0]):
        return None
    return words[0]


def program_problem(program: str, params: dict, inputs: list[Path]) -> str | None:
    """Why ``program`` cannot start in the job, or None (also where it cannot be known)."""
    if "/" in program:
        return path_problem(program, inputs)
    env = command_env(params)
    if isinstance(params["command"], str):
        kind = shell_kind(program, env.get("PATH", ""))
        if kind is None or kind:
            return None
    elif shutil.which(program, path=env.get("PATH", "")):
        return None
    return (
        f"command: {program} is not found on the PATH the jobs get ({shown_path(env)}); "
        "install it, give its full path, or set PATH in env"
    )


def shown_path(env: dict, most: int = 200) -> str:
    path = env.get("PATH", "")
    return path if len(path) <= most else path[:most] + "..."


def path_problem(program: str, inputs: list[Path]) -> str | None:
    """A program named by a path: absolute, or relative to the run folder, where only the
    inputs are before the command runs."""
    if os.path.isabs(program):
        target = Path(program)
    else:
        parts = Path(program).parts
        parts = parts[1:] if parts and parts[0] == "." else parts
        staged = {path.name: path for path in inputs}
        if not parts or parts[0] not in staged:
            return (
                f"command: {program} is relative to the run folder, which holds only the "
                f"inputs ({', '.join(staged) or 'none'}) when it starts; add it to inputs "
                "or give its absolute path"
            )
        target = staged[parts[0]].joinpath(*parts[1:])
    if not target.is_file():
        return f"command: {program} is not a file ({target})"
    if not os.access(target, os.X_OK):
        return f"command: {program} is not executable ({target}); chmod +x it or run it with bash"
    return None


@lru_cache(maxsize=256)
def shell_kind(word: str, path: str) -> str | None:
    """What bash runs for ``word`` (file, builtin, keyword, ...), "" when nothing,
    None when bash cannot be asked."""
    bash = shutil.which("bash")
    if bash is None:
        return None
    try:
        done = subprocess.run(
            [bash, "-c", 'type -t -- "$1" || true', "bash", word],
            capture_output=True,
            text=True,
            timeout=10,
            env={**os.environ, "PATH": path},
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip()


@lru_cache(maxsize=256)
def syntax_problem(command: str) -> str | None:
    """bash's own complaint about a command string it cannot parse (bash -n), or None."""
    bash = shutil.which("bash")
    if bash is None:
        return None
    try:
        done = subprocess.run(
            [bash, "-n", "-c", command], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode == 0:
        return None
    said = " ".join(done.stderr.split()) or f"bash -n exited with status {done.returncode}"
    return f"command: bash cannot parse it: {said}"


def check_params(params: dict) -> None:
    """What can be known before any job runs: inputs, bash syntax, the first program."""
    inputs = input_paths(params)
    check_inputs(inputs)
    command = params["command"]
    if isinstance(command, str) and not command.strip():
        raise ValueError("command is empty")
    problem = syntax_problem(command) if isinstance(command, str) else None
    program = first_program(command)
    problem = problem or (program_problem(program, params, inputs) if program else None)
    if problem:
        raise ValueError(problem)


@lru_cache(maxsize=256)
def _tree_size(path: str) -> int:
    """Bytes of a file, or of every file below a folder (0 where it is gone)."""
    root = Path(path)
    if root.is_file():
        return root.stat().st_size
    total = 0
    for here, _dirs, names in os.walk(root):
        for name in names:
            try:
                total += os.lstat(os.path.join(here, name)).st_size
            except OSError:
                pass
    return total


def planned_bytes(params: dict) -> int:
    """The inputs' size, plus output_bytes where the study gives it."""
    try:
        inputs = input_paths(params)
    except ValueError:
        inputs = []
    return sum(_tree_size(str(path)) for path in inputs) + parse_size(params.get("output_bytes", 0))


def runtime_s(params: dict) -> float:
    """The time limit, the staging at a slow shared file system's rate, and a start-up."""
    return float(params["time_limit"]) + planned_bytes(params) / SLOW_COPY_BYTES_PER_S + 60


def threads(params: dict) -> int:
    return int(params.get("threads", 1))


# --- staging and the folder's contents --------------------------------------------------------


def tally(root: Path) -> dict[str, int]:
    """Files (symbolic links included), folders and the files' bytes of a file or a tree."""
    if not root.is_dir() or root.is_symlink():
        return {"files": 1, "dirs": 0, "bytes": root.lstat().st_size}
    files, dirs, size = 0, 1, 0
    for here, subdirs, names in os.walk(root):
        dirs += len(subdirs)
        files += len(names)
        size += sum(os.lstat(os.path.join(here, name)).st_size for name in names)
    return {"files": files, "dirs": dirs, "bytes": size}


def stage(inputs: list[Path], folder: Path) -> tuple[float, dict[str, int]]:
    """Copy the inputs into ``folder``: (seconds, what was copied)."""
    total = {"files": 0, "dirs": 0, "bytes": 0}
    start = time.perf_counter()
    for source in inputs:
        target = folder / source.name
        if source.is_dir():
            shutil.copytree(source, target, symlinks=True)
        else:
            shutil.copy2(source, target)
    elapsed = time.perf_counter() - start
    for source in inputs:
        for key, value in tally(folder / source.name).items():
            total[key] += value
    return elapsed, total


Entry = tuple[int, int, int, int]  # file type, size, mtime (ns), inode


def snapshot(root: Path) -> dict[str, Entry]:
    """Every entry below ``root`` (relative path -> type, size, mtime, inode), the run
    folder's marker left out."""
    found = {}
    for here, subdirs, names in os.walk(root):
        for name in subdirs + names:
            path = os.path.join(here, name)
            relative = os.path.relpath(path, root)
            if relative == rundir.MARKER:
                continue
            try:
                info = os.lstat(path)
            except FileNotFoundError:
                continue
            found[relative] = (
                stat.S_IFMT(info.st_mode),
                info.st_size,
                info.st_mtime_ns,
                info.st_ino,
            )
    return found


def written(before: dict[str, Entry], after: dict[str, Entry]) -> dict:
    """What a command left in its folder: files created or changed, folders created, the
    bytes of those files, and what it removed."""
    created = [p for p in after if p not in before]
    changed = [
        p for p in after if p in before and after[p] != before[p] and not stat.S_ISDIR(after[p][0])
    ]
    files = [p for p in created if not stat.S_ISDIR(after[p][0])]
    return {
        "files_created": len(files),
        "files_changed": len(changed),
        "dirs_created": len(created) - len(files),
        "bytes_written": sum(after[p][1] for p in files + changed),
        "removed": len([p for p in before if p not in after]),
    }


#: names tierbench itself uses next to run folders (run folders, the preflight's test file)
OWN_NAMES = (rundir.PREFIX, ".tierbench-")


def outside(parent: Path, own: str) -> dict[str, Entry]:
    """The entries of this user next to the run folder (the tier's top level), run folders
    left out: what the command's processes could have made there."""
    found = {}
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return found
    for entry in entries:
        if entry.name == own or entry.name.startswith(OWN_NAMES):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue
        if info.st_uid != os.getuid():
            continue
        found[entry.name] = (stat.S_IFMT(info.st_mode), info.st_size, info.st_mtime_ns, info.st_ino)
    return found


def shortened(names: list[str], most: int = 5) -> str:
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


def holders(parent: Path) -> dict[str, str]:
    """Entries of the tier's top level that a living process holds open or mapped (name ->
    "pid (program)"): after the command's processes are gone, another process's, such as
    the shared-memory segments of an MPI job running beside it."""
    top = os.path.realpath(parent)
    held = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        paths = []
        try:
            fds = f"/proc/{pid}/fd"
            paths += [os.readlink(f"{fds}/{fd}") for fd in os.listdir(fds)]
            with open(f"/proc/{pid}/maps") as maps:
                fields = (line.split(None, 5) for line in maps)  # a path may hold spaces
                paths += [field[5].strip() for field in fields if len(field) == 6]
            program = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:  # another user's process, or one that ended meanwhile
            continue
        for path in paths:
            if os.path.dirname(path) == top:
                held.setdefault(os.path.basename(path), f"{pid} ({program})")
    return held


#: how long an entry of the tier's top level that no process holds is given to go again:
#: an MPI launcher removes its ranks' shared-memory segments only after they have exited
SETTLE_S = 2.0


def others_settled(parent: Path, names: list[str]) -> tuple[dict[str, Entry], dict[str, str]]:
    """The tier's top level and what living processes hold there, once each of ``names``
    is held or gone again, or after SETTLE_S."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        now, held = outside(parent, ""), holders(parent)
        if all(n in held or n not in now for n in names) or time.monotonic() > deadline:
            return now, held
        time.sleep(0.2)


def outside_problem(
    parent: Path, before: dict[str, Entry], after: dict[str, Entry], log=print
) -> str | None:
    """The reason a point fails when the command created or changed an entry of the tier's
    top level. Run after its processes are gone: what a living process holds open, or what
    is gone again within SETTLE_S, was another process's; removals are logged only (they
    leave nothing)."""
    removed = sorted(set(before) - set(after))
    if removed:
        log(f"removed from {parent} while the command ran: {shortened(removed)}")
    changes = {
        "created": sorted(set(after) - set(before)),
        "changed": sorted(n for n in set(before) & set(after) if before[n] != after[n]),
    }
    if not any(changes.values()):
        return None
    now, held = others_settled(parent, changes["created"] + changes["changed"])
    others = sorted(n for names in changes.values() for n in names if n in held or n not in now)
    if others:
        why = [f"{n} (held by {held[n]})" if n in held else f"{n} (gone again)" for n in others]
        log(f"not the command's, in {parent}: {shortened(why)}")
    said = [
        f"{what} {shortened([n for n in names if n not in others])}"
        for what, names in changes.items()
        if set(names) - set(others)
    ]
    if not said:
        return None
    return (
        f"the command wrote outside its run folder: in {parent}, {'; '.join(said)} while it "
        "ran (no living process holds them; another process of yours that wrote there and "
        "closed them would be named too); a command must write only in its working folder. "
        "Nothing there was removed: clean it up by hand"
    )


def keep_marker(folder: Path, marker: bytes) -> None:
    """Put back the run folder's marker if the command removed or changed it, so the
    folder is still removed after the job (rundir removes only marked folders)."""
    path = folder / rundir.MARKER
    try:
        if path.read_bytes() == marker:
            return
    except OSError:
        pass
    try:
        path.write_bytes(marker)
    except OSError:
        pass


# --- running it -------------------------------------------------------------------------------


class Tail:
    """The command's output: copied to the job's log as it comes, the last lines kept."""

    def __init__(self, stream, log=None):
        self.lines: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        self.log = log if log is not None else sys.stderr
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream) -> None:
        for raw in iter(stream.readline, b""):
            text = raw.decode(errors="replace")
            try:
                self.log.write(text if text.endswith("\n") else text + "\n")
                self.log.flush()
            except (OSError, ValueError):
                pass
            line = text.rstrip("\r\n").rsplit("\r", 1)[-1].strip()
            if line:
                self.lines.append(line[:LINE_CHARS])
        stream.close()

    def join(self, timeout: float = DRAIN_S) -> None:
        self.thread.join(timeout)

    def text(self) -> str:
        return " | ".join(self.lines) if self.lines else "(it printed nothing)"


def argv_of(command) -> list[str]:
    return list(command) if isinstance(command, list) else ["bash", "-c", command]


def kill_group(pgid: int) -> bool:
    """SIGKILL every process of the group; True when there was one to kill."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def children_cpu() -> tuple[float, float]:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime, usage.ru_stime


def execute(argv: list[str], folder: Path, env: dict, time_limit: float, log=None) -> dict:
    """Run ``argv`` in ``folder`` in a process group of its own, at most ``time_limit`` s."""
    user0, sys0 = children_cpu()
    start = time.perf_counter()
    try:
        process = subprocess.Popen(
            argv,
            cwd=folder,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except FileNotFoundError:
        raise PointFailed(
            f"command not found: {argv[0]} (on the job's PATH {shown_path(env)})"
        ) from None
    except PermissionError:
        raise PointFailed(f"command {argv[0]} cannot be executed (permission denied)") from None
    tail = Tail(process.stdout, log)
    timed_out = False
    try:
        status = process.wait(timeout=time_limit)
    except subprocess.TimeoutExpired:
        timed_out = True
        kill_group(process.pid)
        status = process.wait()
    wall = time.perf_counter() - start
    user1, sys1 = children_cpu()
    # after a time-out the group was killed already; else, what it left in the background
    left_running = not timed_out and kill_group(process.pid)
    tail.join()
    return {
        "status": status,
        "timed_out": timed_out,
        "left_running": left_running,
        "wall_time": wall,
        "user_time": user1 - user0,
        "sys_time": sys1 - sys0,
        "tail": tail.text(),
    }


def failure(done: dict, time_limit: float) -> str | None:
    """Why the run failed, ending with its last lines; None when it succeeded."""
    if done["timed_out"]:
        return (
            f"the command did not finish within its time_limit of {time_limit:g} s: its "
            f"process group was killed; its last lines: {done['tail']}"
        )
    status = done["status"]
    if status == 0:
        return None
    if status < 0:
        name = signal.Signals(-status).name if -status in signal.valid_signals() else -status
        why = f"was killed by signal {name}"
    else:
        meaning = BASH_STATUS.get(status)
        why = f"exited with status {status}" + (f" ({meaning})" if meaning else "")
    return f"the command {why}; its last lines: {done['tail']}"


# --- system calls, counted for the command's processes only -----------------------------------


def tracing(job: Job) -> tuple[str | None, str | None]:
    """(strace, None) where this job counts its command's calls; (None, why not) where it
    should and cannot; (None, None) where the experiment does not ask."""
    if not job.spec.get("count_syscalls"):
        return None, None
    strace = shutil.which(syscalls.STRACE)
    if strace is None:
        return None, syscalls.STRACE_MISSING
    try:
        done = subprocess.run(
            [strace, *syscalls.OPTIONS, "-o", os.devnull, "true"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError) as error:
        return None, f"strace could not run: {error}"
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return None, f"strace cannot trace here: {said}"
    return strace, None


def traced_argv(strace: str, table: Path, argv: list[str]) -> list[str]:
    return [strace, *syscalls.OPTIONS, "-o", str(table), "--", *argv]


def counted_calls(job: Job, strace: str, table: Path, folder: Path) -> list[dict]:
    """The command's calls as metrics (its operations on paths outside its run ``folder``
    apart); the table and categories go to the record."""
    text = table.read_text(errors="replace") if table.exists() else ""
    found = syscalls.parse_table(text)
    if not found:
        job.extra["syscalls"] = {"counted": False, "reason": "strace wrote no table"}
        job.log("system calls not counted: strace wrote no table")
        return []
    job.extra["syscalls"] = {
        "counted": True,
        "command": f"strace {' '.join(syscalls.OPTIONS)} -o <table> -- <the command>: its "
        "processes only, not the staging copy",
        "strace": syscalls.version(strace),
        "categories": syscalls.categorise(found),
        "table": found,
        "profile": syscalls.profile(text, syscalls.run_folders(folder)),
    }
    return syscalls.metrics_of(found) + syscalls.profile_metrics(job.extra["syscalls"]["profile"])


# --- one repetition ---------------------------------------------------------------------------


def stage_metrics(elapsed: float, copied: dict) -> list[dict]:
    return [
        metric("stage_time", elapsed, "s"),
        metric("stage_bytes", copied["bytes"], "B"),
        metric("stage_files", copied["files"], "files"),
        metric("stage_dirs", copied["dirs"], "dirs"),
    ]


def run_metrics(done: dict, wrote: dict) -> list[dict]:
    return [
        metric("wall_time", done["wall_time"], "s"),
        metric("cpu_time", done["user_time"] + done["sys_time"], "s"),
        metric("sys_time", done["sys_time"], "s"),
        metric("files_created", wrote["files_created"], "files"),
        metric("files_changed", wrote["files_changed"], "files"),
        metric("dirs_created", wrote["dirs_created"], "dirs"),
        metric("bytes_written", wrote["bytes_written"], "B"),
    ]


def run(job: Job) -> list[dict]:
    if job.folder is None:
        raise PointNotApplicable("a command runs in a folder; the void tier has none")
    params = job.params
    folder = job.folder.path
    try:
        inputs = input_paths(params)
        check_inputs(inputs)
    except ValueError as error:
        raise PointFailed(str(error)) from None
    job.folder.ensure_space(planned_bytes(params), job.max_bytes)
    metrics: list[dict] = []
    if inputs:
        job.log(f"staging {len(inputs)} input(s) into {folder}")
        elapsed, copied = stage(inputs, folder)
        job.extra["stage"] = {"inputs": [str(p) for p in inputs], **copied}
        job.log(
            f"staged {copied['files']} files, {format_size(copied['bytes'])} in {elapsed:.3f} s"
        )
        metrics += stage_metrics(elapsed, copied)
    env, argv = command_env(params), argv_of(params["command"])
    strace, not_counted = tracing(job)
    if not_counted:
        job.extra["syscalls"] = {"counted": False, "reason": not_counted}
        job.log(f"system calls not counted: {not_counted}")
    job.extra.update(command=argv, env=params.get("env") or {}, folder=str(folder))
    marker = (folder / rundir.MARKER).read_bytes() if (folder / rundir.MARKER).exists() else None
    before, around = snapshot(folder), outside(folder.parent, folder.name)
    with tempfile.TemporaryDirectory(prefix="tierbench-command-") as scratch:
        table = Path(scratch) / "strace.txt"
        started = traced_argv(strace, table, argv) if strace else argv
        job.log(f"running {shlex.join(argv)} in {folder} (time limit {params['time_limit']:g} s)")
        done = execute(started, folder, env, float(params["time_limit"]))
        calls = counted_calls(job, strace, table, folder) if strace else []
    if marker is not None:
        keep_marker(folder, marker)
    job.extra["run"] = {k: done[k] for k in ("status", "timed_out", "left_running", "tail")}
    if done["left_running"]:
        job.log("killed the processes the command left running in the background")
    problem = failure(done, float(params["time_limit"]))
    if problem:
        raise PointFailed(problem)
    problem = outside_problem(
        folder.parent, around, outside(folder.parent, folder.name), log=job.log
    )
    if problem:
        raise PointFailed(problem)
    wrote = written(before, snapshot(folder))
    job.extra["written"] = wrote
    job.log(
        f"done in {done['wall_time']:.3f} s: {wrote['files_created']} files created, "
        f"{wrote['files_changed']} changed, {format_size(wrote['bytes_written'])}"
    )
    return metrics + run_metrics(done, wrote) + calls


WORKLOAD = Workload(
    name="command",
    summary="any command line, run in a fresh folder on the tier after its inputs are copied in",
    headline=("wall_time",),
    run_time="wall_time",
    run_cpu_time="cpu_time",
    run=run,
    tools=(Tool("bash"),),
    check_params=check_params,
    planned_bytes=planned_bytes,
    threads=threads,
    runtime_s=runtime_s,
    list_params=("command", "inputs"),
    traces_itself=True,
)
