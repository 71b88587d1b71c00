"""calculix with the user's deck: ccx once per repetition on an input deck of the user's own.

The ``calculix`` workload runs this instead of its genetic algorithm when a
point names a ``deck``. A module of its own: reading a user's deck (its
``*INCLUDE`` files as ccx finds them), copying it and telling a finished run
from a failed one have nothing in common with the GA over the bar.

One repetition:

1. the deck and every file it ``*INCLUDE``s (nested ones too) are copied into
   a fresh folder on the tier, keeping their layout relative to the deck's
   folder, so ccx finds each where it found it before (``stage_time``,
   ``stage_bytes``; not part of the solver's times); a gzipped deck
   (``name.inp.gz``) is unpacked there as ``name.inp``, which ccx reads;
2. ``ccx -i <deck name>`` runs in the copy of the deck's folder with ``cores``
   threads (OMP_NUM_THREADS and CalculiX's CCX_NPROC_*), its standard output in
   ``<deck name>.log`` there (``solver_log: file``) or in memory (``pipe``);
3. its wall time (``wall_time``, start to exit) and CPU time (``cpu_time``,
   user and kernel, from its rusage; ``sys_time`` the kernel's alone) are
   kept, and what it left in the folder beyond the copied inputs is counted:
   ``files_created``, ``dirs_created``, ``bytes_written`` (final sizes), the
   names of the command workload's;
4. its own progress: ``steps`` (the ``STEP n`` headers of its standard output:
   a frequency step runs no increment), ``increments`` (converged increments,
   the rows of its ``.sta`` file without the ``U`` that marks an attempt that
   did not converge), ``cutbacks`` (those ``U`` rows) and ``iterations`` (the
   ``.sta``'s ITRS column summed over every attempt).

A run is finished when ccx exits with status 0 *and* prints ``Job finished``:
ccx 2.20 exits with 0 on some input errors (an include it cannot open), and
prints ``*ERROR`` lines on increments it then cuts back and completes. Anything
else is a failed point whose reason ends with ccx's last lines.

How ccx reads ``*INCLUDE`` (its readinput.c and includefilename.f, checked
against ccx 2.20): one line per card, blanks and tabs removed everywhere
(inside quotes too), lines starting ``**`` are comments, the lines after
``*HEADING`` are text up to the next card; the keyword is case-insensitive and
the file name keeps its case; the name is what follows the first ``=`` to the
end of the line, or up to the closing ``"``; there is no continuation line
(``*INCLUDE,`` alone is a syntax error); includes nest at most 9 deep; and a
relative name, wherever it is written, is opened from ccx's working directory,
the deck's folder. A name given as an absolute path is read where it is, not
copied (the deck would have to be edited to point elsewhere).

Nothing is fsync'd: ccx's writes are buffered and land in the page cache.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import os
import re
import resource
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import PointFailed
from ...records import metric
from ...units import format_size, parse_size

SUFFIX = ".inp"
#: a deck gzipped (CalculiX's own test decks, as Debian ships them): unpacked in the copy
PACKED = ".gz"
#: where Debian's calculix-ccx-test installs CalculiX's own test decks
TEST_DECKS = "/usr/share/doc/calculix-ccx-test/examples/test"
#: ccx's limits: includes nested deeper than this stop it, names longer than this do not fit
MAX_INCLUDE_DEPTH = 9
MAX_NAME = 132
#: parameters whose value ccx leaves in its case (file names), up to the next comma
FILE_PARAMETERS = (b"FILE=", b"INPUT=", b"OUTPUT=", b"FILENAME=", b"MASSFILE=", b"STIFFNESSFILE=")
#: what ccx writes, as a multiple of its deck and includes, when a study does not say
#: (output_bytes): above what 9 in 10 of CalculiX's own test decks wrote. Measured with
#: ccx 2.20 on the 68 decks of Debian's calculix-ccx-test 2.11 (80 drawn at random) that
#: finished: bytes written / deck bytes had a median of 6, a 90th percentile of 42, and
#: reached 465 (field output every increment of a long transient)
OUTPUT_FACTOR = 50
#: ccx's standard output: a step's header, its own timing, a finished run
_STEP = re.compile(rb"^\s*STEP\s+(\d+)\s*$", re.MULTILINE)
_TOTAL_TIME = re.compile(rb"Total CalculiX Time:\s*(\S+)")
FINISHED = b"Job finished"
#: a row of the .sta file: step, increment, attempt (U: did not converge), iterations
_STA_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)(U?)\s+(\d+)\s", re.MULTILINE)
#: lines of ccx's output that end a failed point's reason
LAST_LINES = 4


class DeckError(ValueError):
    """A deck ccx could not read: one line saying what and where."""


# ---------------------------------------------------------------- where the deck is


def deck_path(value: str, workdir: str | None = None) -> Path:
    """The deck a point names: ~ and $VARIABLES expanded, a relative path taken from the
    folder Snakemake runs in (as the tiers' paths are)."""
    expanded = os.path.expanduser(os.path.expandvars(value))
    if "$" in expanded:
        raise DeckError(f"deck {value} names an unset variable")
    return Path(os.path.normpath(os.path.join(workdir or os.getcwd(), expanded)))


def where_from(value: str) -> str:
    """How a deck's path was read, for a message about a missing one."""
    if os.path.isabs(os.path.expanduser(os.path.expandvars(value))):
        return ""
    return f"; a relative path is taken from {os.getcwd()}, the folder Snakemake runs in"


# ---------------------------------------------------------------- reading it as ccx does


def ccx_case(card: bytes) -> bytes:
    """A card upper-cased as ccx does it: every character but a file name's (what follows
    INPUT= and the like, up to the next comma)."""
    out, name = bytearray(), False
    for char in card:
        if not name and out.endswith(FILE_PARAMETERS):
            name = True
        if name and char == ord(","):
            name = False
        out += bytes((char,)) if name else bytes((char,)).upper()
    return bytes(out)


def include_name(card: bytes) -> bytes:
    """The file an ``*INCLUDE`` card names (its blanks already removed), as ccx reads it:
    after the first ``=`` to the end, or between double quotes."""
    _, equals, value = card.partition(b"=")
    if not equals:
        raise DeckError("has no INPUT=<file> on its line (ccx reads an *INCLUDE from one line)")
    if value.startswith(b'"'):
        value, quote, _ = value[1:].partition(b'"')
        if not quote:
            raise DeckError("has no closing quote after its file name")
    if not value:
        raise DeckError("names no file")
    if len(value) > MAX_NAME:
        raise DeckError(f"names a file of {len(value)} characters; ccx reads at most {MAX_NAME}")
    return value


@dataclass
class Inputs:
    """A deck and what ccx reads with it."""

    deck: Path
    #: the files to copy: the deck, then each relative include once, as named (unnormalised:
    #: the operating system resolves ``..`` and links, as for ccx)
    files: list[Path] = field(default_factory=list)
    #: includes named by an absolute path: ccx reads them where they are
    in_place: list[Path] = field(default_factory=list)
    #: every byte ccx reads, deck and includes, in order: one digest of what was measured
    digest: str = ""
    #: the deck's bytes as ccx reads them (unpacked, where it is gzipped)
    deck_bytes: int = 0

    @property
    def job_name(self) -> str:
        """ccx's job name: the deck's name without .inp (and .gz)."""
        return self.deck.name.removesuffix(PACKED).removesuffix(SUFFIX)

    @property
    def folder(self) -> Path:
        return self.deck.parent

    def layout(self) -> dict[Path, str]:
        """Each file to copy -> where it goes, relative to the copy's root: the deck's folder,
        or the folder as many levels above it as the ``..`` of an include climbs."""
        relative = {f: os.path.normpath(os.path.relpath(f, self.folder)) for f in self.files}
        above = max(_climbs(r) for r in relative.values())
        names = self.folder.parts[1:]  # without the root, /
        if above > len(names):
            raise DeckError(f"deck {self.deck}: an *INCLUDE climbs above {self.folder.anchor}")
        base = names[len(names) - above :]
        relative[self.deck] = relative[self.deck].removesuffix(PACKED)  # unpacked in the copy
        return {f: os.path.normpath(os.path.join(*base, r)) for f, r in relative.items()}

    def workdir(self) -> str:
        """Where ccx runs in the copy: the deck's place in the layout."""
        return os.path.dirname(self.layout()[self.deck]) or "."

    def size(self) -> int:
        return self.deck_bytes + sum(_size(f) for f in self.files if f != self.deck)


def _climbs(relative: str) -> int:
    """How many folders up a relative path starts (its leading ``..``)."""
    parts = relative.split(os.sep)
    return next((i for i, part in enumerate(parts) if part != os.pardir), len(parts))


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


class _Reader:
    """Walks a deck and its includes line by line, as ccx's readinput does."""

    def __init__(self, deck: Path):
        self.found = Inputs(deck=deck, files=[deck])
        self.heading = False  # ccx's iheading: one flag across every file it reads
        self.hash = hashlib.sha256()

    def read(self, path: Path, depth: int) -> None:
        data = path.read_bytes()
        if path == self.found.deck:
            data = gzip.decompress(data) if path.name.endswith(PACKED) else data
            self.found.deck_bytes = len(data)
        self.hash.update(data)
        for number, raw in enumerate(data.split(b"\n"), 1):
            line = raw.split(b"\r", 1)[0].split(b"\0", 1)[0]
            if self.heading:
                if not (line.startswith(b"*") and not line.startswith(b"**")):
                    continue  # a line of the heading's text, kept as it is
                self.heading = False
            card = line.replace(b" ", b"").replace(b"\t", b"")
            if not card or card.startswith(b"**"):
                continue
            card = ccx_case(card)
            if card.startswith(b"*HEADING"):
                self.heading = True
            elif card.startswith(b"*INCLUDE"):
                self.include(card, path, number, depth + 1)

    def include(self, card: bytes, source: Path, number: int, depth: int) -> None:
        where = f"deck {self.found.deck}: *INCLUDE on line {number}"
        where += "" if source == self.found.deck else f" of {source}"
        try:
            name = os.fsdecode(include_name(card))
        except DeckError as error:
            raise DeckError(f"{where} {error}") from None
        if depth > MAX_INCLUDE_DEPTH:
            raise DeckError(
                f"{where} nests includes {depth} deep; ccx reads at most {MAX_INCLUDE_DEPTH} "
                "(does a file include itself?)"
            )
        path = Path(name) if os.path.isabs(name) else self.found.folder / name
        if not path.is_file():
            what = "is not a file" if path.exists() else "does not exist"
            relative = "" if os.path.isabs(name) else " (ccx opens it from the deck's folder)"
            raise DeckError(f"{where} names {name}, which {what}{relative}")
        if os.path.isabs(name):
            if path not in self.found.in_place:
                self.found.in_place.append(path)
        elif os.path.normpath(path) not in {os.path.normpath(f) for f in self.found.files}:
            self.found.files.append(path)
        self.read(path, depth)


def inputs(deck: Path) -> Inputs:
    """The deck and every file ccx would read with it; DeckError names the first one missing."""
    deck = Path(os.path.abspath(deck))
    if not deck.is_file():
        raise DeckError(f"deck {deck} does not exist")
    if not deck.name.removesuffix(PACKED).endswith(SUFFIX):
        raise DeckError(
            f"deck {deck} does not end in {SUFFIX} (or {SUFFIX}{PACKED}): ccx reads "
            f"<jobname>{SUFFIX}"
        )
    reader = _Reader(deck)
    reader.read(deck, 0)
    reader.found.digest = reader.hash.hexdigest()
    reader.found.layout()  # an include that climbs above / has no place in a copy
    return reader.found


def check_params(params: dict) -> None:
    """A deck that exists, ends in .inp (or .inp.gz), and whose includes ccx would find."""
    try:
        inputs(deck_path(params["deck"]))
    except DeckError as error:
        reason = str(error)
        if reason.endswith("does not exist"):
            reason += where_from(params["deck"])
        raise DeckError(reason) from None


# ---------------------------------------------------------------- space on the tier


def planned_bytes(params: dict) -> int:
    """The copy of the deck and its includes, and what ccx will write (:func:`plan`). 0 where
    the deck is missing: such a point stops before writing (check_params refuses it before
    any job runs)."""
    try:
        deck = deck_path(params["deck"])
        stat = deck.stat()
        copy = _copy_bytes(str(deck), stat.st_mtime_ns, stat.st_size)
    except (DeckError, OSError):
        return 0
    return plan(copy, params)


@functools.lru_cache(maxsize=64)
def _copy_bytes(deck: str, _mtime_ns: int, _size: int) -> int:
    """The deck's and its includes' bytes; read once per version of the deck in a process
    (Snakemake asks for every job's memory, the preflight for every point)."""
    return inputs(Path(deck)).size()


def plan(copy: int, params: dict) -> int:
    """Bytes a run puts on the tier: the copy, and ``output_bytes`` or OUTPUT_FACTOR x copy."""
    output = params.get("output_bytes")
    return copy + (parse_size(output) if output is not None else OUTPUT_FACTOR * copy)


def plan_text(params: dict, copy: int) -> str:
    if params.get("output_bytes") is not None:
        return f"the deck and includes ({format_size(copy)}) and output_bytes"
    return (
        f"the deck and includes ({format_size(copy)}) and {OUTPUT_FACTOR} times that for "
        "ccx's output; set output_bytes to what this deck writes"
    )


# ---------------------------------------------------------------- one run


@dataclass
class Staged:
    root: Path
    workdir: Path
    #: the copied files, relative to the root, with their sizes
    files: dict[str, int]
    seconds: float


def stage(found: Inputs, root: Path) -> Staged:
    """Copy the deck and its includes under ``root`` in their layout (timed)."""
    began = time.perf_counter()
    files = {}
    for source, place in found.layout().items():
        target = root / place
        target.parent.mkdir(parents=True, exist_ok=True)
        if source == found.deck and source.name.endswith(PACKED):
            with gzip.open(source) as packed, open(target, "wb") as unpacked:
                shutil.copyfileobj(packed, unpacked)
        else:
            shutil.copyfile(source, target)
        files[place] = target.stat().st_size
    seconds = time.perf_counter() - began
    return Staged(root, root / found.workdir(), files, seconds)


@dataclass
class Solved:
    returncode: int
    log: bytes
    wall: float
    user: float
    system: float


def solve(staged: Staged, job_name: str, env: dict, solver_log: str) -> Solved:
    """``ccx -i <job>`` in the copy of the deck's folder: its times and standard output."""
    log_path = staged.workdir / f"{job_name}.log"
    handle = open(log_path, "wb") if solver_log == "file" else None  # noqa: SIM115
    try:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        began = time.perf_counter()
        done = subprocess.run(
            ["ccx", "-i", job_name],
            cwd=staged.workdir,
            env={**os.environ, **env},
            stdin=subprocess.DEVNULL,
            stdout=handle if handle is not None else subprocess.PIPE,
            stderr=subprocess.STDOUT,
            check=False,
        )
        wall = time.perf_counter() - began
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    finally:
        if handle is not None:
            handle.close()
    log = log_path.read_bytes() if handle is not None else done.stdout
    return Solved(
        done.returncode, log, wall, after.ru_utime - usage.ru_utime, after.ru_stime - usage.ru_stime
    )


@dataclass
class Written:
    files: dict[str, int]
    dirs: list[str]

    @property
    def bytes(self) -> int:
        return sum(self.files.values())


def written(staged: Staged) -> Written:
    """What the run left under the copy's root beyond the copied inputs (unchanged)."""
    files, dirs = {}, []
    for folder, subfolders, names in os.walk(staged.root):
        relative = os.path.relpath(folder, staged.root)
        for name in subfolders:
            place = os.path.normpath(os.path.join(relative, name))
            if not any(p == place or p.startswith(place + os.sep) for p in staged.files):
                dirs.append(place)
        for name in names:
            place = os.path.normpath(os.path.join(relative, name))
            size = os.lstat(os.path.join(folder, name)).st_size
            if staged.files.get(place) != size:
                files[place] = size
    return Written(dict(sorted(files.items())), sorted(dirs))


@dataclass
class Progress:
    """The solver's own account of its run."""

    steps: int = 0
    increments: int = 0
    cutbacks: int = 0
    iterations: int = 0
    last_step: int = 0
    reported_time: float | None = None


def progress(log: bytes, sta: str) -> Progress:
    """Steps from ccx's standard output; increments, cutbacks and iterations from its .sta."""
    steps = {int(s) for s in _STEP.findall(log)}
    found = Progress(steps=len(steps))
    for step, _inc, _attempt, unconverged, iterations in _STA_ROW.findall(sta):
        found.last_step = int(step)
        found.iterations += int(iterations)
        if unconverged:
            found.cutbacks += 1
        else:
            found.increments += 1
    found.last_step = max([found.last_step, *steps])
    reported = _TOTAL_TIME.search(log)
    if reported:
        try:
            found.reported_time = float(reported.group(1))
        except ValueError:
            pass
    return found


def last_lines(log: bytes, count: int = LAST_LINES) -> str:
    """ccx's last non-blank lines, one after another on one line."""
    lines = [" ".join(line.split()) for line in log.decode(errors="replace").splitlines()]
    return " | ".join([line for line in lines if line][-count:]) or "(no output)"


def failure(solved: Solved, done: Progress) -> str | None:
    """Why a run failed, ending with ccx's last lines; None for a finished run."""
    if solved.returncode == 0 and FINISHED in solved.log:
        return None
    if solved.returncode < 0:
        how = f"killed by signal {-solved.returncode}"
    elif solved.returncode == 0:
        how = "exit status 0 without 'Job finished'"
    else:
        how = f"exit status {solved.returncode}"
    where = (
        f"in step {done.last_step}, {done.increments} increments done"
        if done.last_step
        else "before its first step"
    )
    return f"ccx did not finish the deck ({how}, {where}); its last lines: {last_lines(solved.log)}"


# ---------------------------------------------------------------- the job


def run(job, env: dict) -> list[dict]:
    """One repetition: copy, solve, count. ``env``: the solver's thread settings."""
    try:
        found = inputs(deck_path(job.params["deck"]))
    except DeckError as error:
        raise PointFailed(f"{error} on {os.uname().nodename}") from None
    copy = found.size()
    planned = plan(copy, job.params)
    if job.max_bytes is not None and planned > job.max_bytes:
        raise PointFailed(
            f"the deck's run is planned at {format_size(planned)}, more than the tier's "
            f"max_bytes ({format_size(job.max_bytes)}): {plan_text(job.params, copy)}"
        )
    job.folder.ensure_space(planned, job.max_bytes)
    job.extra.update(
        deck=str(found.deck),
        deck_sha256=found.digest,
        includes_in_place=[str(p) for p in found.in_place],
        solver_env=dict(env),
        planned_bytes=planned,
    )
    staged = stage(found, Path(job.folder.path) / "deck")
    job.extra["deck_inputs"] = staged.files
    job.log(
        f"ccx -i {found.job_name} in {staged.workdir} ({len(staged.files)} input files, "
        f"{format_size(copy)}, copied in {staged.seconds:.3f} s), {env['OMP_NUM_THREADS']} "
        f"threads; planned {format_size(planned)}"
    )
    solved = solve(staged, found.job_name, env, job.params["solver_log"])
    sta = staged.workdir / f"{found.job_name}.sta"
    done = progress(solved.log, sta.read_text(errors="replace") if sta.is_file() else "")
    left = written(staged)
    job.extra["written_files"] = left.files
    reason = failure(solved, done)
    if reason:
        raise PointFailed(reason)
    if left.bytes + copy > planned:
        job.extra["over_plan"] = left.bytes + copy - planned
        plan_of = plan_text(job.params, copy)
        job.log(f"ccx wrote {format_size(left.bytes)}, more than planned ({plan_of})")
    job.log(
        f"ccx took {solved.wall:.3f} s: {done.steps} steps, {done.increments} increments, "
        f"{done.cutbacks} cut back; wrote {len(left.files)} files, {format_size(left.bytes)}"
    )
    return metrics(solved, done, staged, left)


def metrics(solved: Solved, done: Progress, staged: Staged, left: Written) -> list[dict]:
    found = [
        metric("wall_time", solved.wall, "s"),
        metric("cpu_time", solved.user + solved.system, "s"),
        metric("sys_time", solved.system, "s"),
        metric("stage_time", staged.seconds, "s"),
        metric("stage_bytes", sum(staged.files.values()), "B"),
        metric("stage_files", len(staged.files), "files"),
        metric("bytes_written", left.bytes, "B"),
        metric("files_created", len(left.files), "files"),
        metric("dirs_created", len(left.dirs), "dirs"),
        metric("steps", done.steps, "steps"),
        metric("increments", done.increments, "increments"),
        metric("cutbacks", done.cutbacks, "attempts"),
        metric("iterations", done.iterations, "iterations"),
    ]
    if done.reported_time is not None:
        found.append(metric("solver_reported_time", done.reported_time, "s"))
    return found
