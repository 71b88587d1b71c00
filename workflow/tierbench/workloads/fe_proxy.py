"""fe_proxy: a genetic algorithm fitting a non-linear FE model, writing solver output.

Document 000 fitted material parameters of a small non-linear FE model with a
genetic algorithm (population 30, 2 generations = 60 analyses) and timed the
whole optimisation on an HDD, an SSD and tmpfs. This workload does the same
with a real, if small, implicit solve (``fe_model``: a tapered elasto-plastic
bar, finite strain, Newton-Raphson with a residual tolerance) and a seeded GA
(``ga``). The target force-displacement curve is computed by the same model
from known parameters (``TRUTH``, plus optional noise), so the fit can be
checked against the truth.

Every evaluation runs in its own folder on the tier under test and writes what
an implicit code writes (see ``OUTPUT DEFAULTS`` below): an input deck that
the solver reads back, a status file (.sta) and a message file (.msg) appended
and flushed every increment, a results database (.odb) that grows by one
field-output frame every increment, a restart file (.res) rewritten every
``restart_interval`` increments, and the pre-processor's files. ``fsync`` sets
what reaches the device: ``none`` (flush to the OS only, as solvers do),
``increment`` (fsync every file written in an increment) or ``end`` (fsync
every file once before closing). The folder is deleted after the evaluation,
also when the solve fails.

Evaluations of one generation run in parallel on ``cores`` worker processes,
one evaluation per worker at a time. Times per evaluation: ``io_time`` is the
time in file-system calls (create, write, flush, fsync, close, read of the
deck, delete); ``compute_time`` is the rest of the evaluation (the solve and
the formatting of its output).
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing
import os
import shutil
import statistics
import struct
import time
from dataclasses import dataclass, fields, replace
from io import StringIO
from pathlib import Path

import numpy as np

from .. import native
from ..errors import PointNotApplicable, PointSkipped
from ..files import APPEND, CREATE, write_all
from ..records import metric
from ..runner import Job, main
from ..units import parse_size
from . import fe_model, ga

# OUTPUT DEFAULTS, from what Abaqus/Standard writes for a small job (an
# estimate for a model of tens of elements, not a measurement: compare with
# `ls -l` of a real job folder and set the parameters to match):
# - files: 10, the files a job leaves in its folder: .com (job commands),
#   .inp (the deck), .dat (printed output), .msg (messages, every iteration),
#   .sta (one status line per increment), .odb (results database), .res
#   (restart), .prt (part information), .mdl and .stt (model and state written
#   by the pre-processor for the analysis). More files are named job.0NN,
#   like Abaqus' scratch units.
# - increment_bytes: 16 KiB, one field-output frame in the .odb. Field output
#   is written every increment by default (*OUTPUT, FIELD, FREQUENCY=1) and a
#   frame holds the preselected variables (S, E, PE, PEEQ, U, RF, ...) at every
#   integration point and node plus the frame's own bookkeeping, some
#   kilobytes to tens of kilobytes for a model this small.
# - model_bytes: 512 KiB, written once before the first increment: the
#   pre-processor's .mdl, .stt, .prt, .dat and .com (for a small model the
#   .mdl and .stt alone are a few hundred KiB each).
# - restart_interval: 10, restart_bytes: 256 KiB: *RESTART, WRITE,
#   FREQUENCY=10; a restart record holds the model and the state, so it is of
#   the order of the .mdl and .stt.
# The .sta and .msg lines are real text of this solve (tens to hundreds of
# bytes per increment) and are always written.
DEFAULTS = {
    "population": 30,
    "generations": 2,
    "elite": 2,
    "seed": 1,
    "elements": 10,
    "increments": 40,
    "max_strain": 0.02,
    "tolerance": 1e-8,
    "noise": 0.0,
    "fsync": "none",
    "increment_bytes": "16KiB",
    "model_bytes": "512KiB",
    "restart_interval": 10,
    "restart_bytes": "256KiB",
    "files": 10,
    "oversubscribe": False,
}
FSYNC = ("none", "increment", "end")
SIZES = ("increment_bytes", "model_bytes", "restart_bytes")
KNOWN = set(DEFAULTS) | {"cores"}
#: pre-processor files, in the order they are added when ``files`` allows
EXTRA_SUFFIXES = (".com", ".dat", ".prt", ".mdl", ".stt")
#: the known material of the target curve, and what the GA fits (MPa)
TRUTH = fe_model.Material()
BOUNDS = {"E": (150_000.0, 250_000.0), "sigma_y": (150.0, 350.0), "Q": (50.0, 300.0)}
UNITS = {"E": "MPa", "sigma_y": "MPa", "Q": "MPa"}
#: worst-case text per increment (.sta line + .msg lines), for the space estimate
TEXT_BYTES_PER_INCREMENT = 2048


@dataclass(frozen=True)
class Output:
    """What an evaluation writes, and how hard it pushes it to the device."""

    fsync: str = "none"
    increment_bytes: int = 16 * 1024
    model_bytes: int = 512 * 1024
    restart_interval: int = 10
    restart_bytes: int = 256 * 1024
    files: int = 10

    @property
    def core_files(self) -> int:
        """.inp, .msg, .sta, .odb, and .res when restarts are written."""
        return 4 + (1 if self.restart_interval > 0 else 0)


@dataclass(frozen=True)
class Settings:
    cores: int
    ga: ga.Settings
    bar: fe_model.Bar
    output: Output
    noise: float
    oversubscribe: bool


def _count(params: dict, name: str, minimum: int) -> int:
    value = params[name]
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer (got {value!r})")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum} (got {value})")
    return value


def _number(params: dict, name: str, low: float, high: float | None = None) -> float:
    value = params[name]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} must be a number (got {value!r})")
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise ValueError(f"{name} must be {bound} (got {value})")
    return float(value)


def _size(params: dict, name: str) -> int:
    value = params[name]
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
        raise ValueError(f"{name} must not be negative (got {value})")
    if isinstance(value, str) and value.strip().startswith("-"):
        raise ValueError(f"{name} must not be negative (got {value})")
    try:
        return parse_size(value)
    except ValueError as error:
        raise ValueError(f"{name}: {error}") from None


def settings(params: dict) -> Settings:
    """Parameters with defaults filled in, checked; ValueError names the parameter."""
    unknown = sorted(set(params) - KNOWN)
    if unknown:
        raise ValueError(f"unknown parameters {unknown} (known: {sorted(KNOWN)})")
    if "cores" not in params:
        raise ValueError("cores is required: the number of worker processes")
    p = {**DEFAULTS, **params}
    cores = _count(p, "cores", 1)
    population = _count(p, "population", 2)
    generations = _count(p, "generations", 1)
    elite = _count(p, "elite", 0)
    if elite >= population:
        raise ValueError(f"elite must be smaller than population (got {elite} >= {population})")
    seed = _count(p, "seed", 0)
    bar = fe_model.Bar(
        elements=_count(p, "elements", 1),
        increments=_count(p, "increments", 1),
        max_strain=_number(p, "max_strain", 1e-9, 0.5),
        tolerance=_number(p, "tolerance", 1e-14, 0.1),
    )
    if p["fsync"] not in FSYNC:
        raise ValueError(f"fsync must be one of {', '.join(FSYNC)} (got {p['fsync']!r})")
    output = Output(
        fsync=p["fsync"],
        increment_bytes=_size(p, "increment_bytes"),
        model_bytes=_size(p, "model_bytes"),
        restart_interval=_count(p, "restart_interval", 0),
        restart_bytes=_size(p, "restart_bytes"),
        files=_count(p, "files", 1),
    )
    if output.files < output.core_files:
        raise ValueError(
            f"files must be at least {output.core_files} (.inp .msg .sta .odb"
            f"{' .res' if output.restart_interval else ''}), got {output.files}"
        )
    if not isinstance(p["oversubscribe"], bool):
        raise ValueError(f"oversubscribe must be true or false (got {p['oversubscribe']!r})")
    return Settings(
        cores=cores,
        ga=ga.Settings(population=population, generations=generations, elite=elite, seed=seed),
        bar=bar,
        output=output,
        noise=_number(p, "noise", 0.0, 1.0),
        oversubscribe=p["oversubscribe"],
    )


def check_params(params: dict) -> None:
    settings(params)


def threads(params: dict) -> int:
    """One worker process per core: the job asks the scheduler for ``cores`` threads."""
    return int(params["cores"])


def evaluation_bytes(output: Output, bar: fe_model.Bar) -> int:
    """An upper estimate of what one evaluation has on the tier at its end."""
    frame = _frame_bytes(bar.elements)
    deck = 4096 + 64 * (2 * bar.elements + 1)
    restart = max(output.restart_bytes, frame) if output.restart_interval else 0
    per_increment = max(output.increment_bytes, frame) + TEXT_BYTES_PER_INCREMENT
    return output.model_bytes + deck + restart + bar.increments * per_increment


def planned_bytes(params: dict) -> int:
    """Bytes on the tier at once: one evaluation per worker, each deleted when done."""
    config = settings(params)
    return config.cores * evaluation_bytes(config.output, config.bar)


# ---------------------------------------------------------------- solver output


class Disk:
    """Every file-system call of an evaluation, timed, counted, and kept inside ``root``.

    Files are written with one system call per write, without buffers in
    between: what an increment writes has reached the OS when the increment
    ends, as a solver flushes its files. The calls are made by ``io``, the C
    helper (``tierbench.native``) where it is built, else its Python twin
    (:class:`PythonFeio`); the files are the same either way. With a model
    this small, Python between the calls would cost as much as the calls
    on a fast tier: paths are plain strings and a job's start and end are one
    call each.
    """

    def __init__(self, root: str | os.PathLike, fsync: str, io=None):
        self.root = os.fspath(root)
        self.fsync_policy = fsync
        self.io = io or native.feio() or PythonFeio
        self.seconds = 0.0
        self.bytes = 0
        self.files = 0
        self._paths: set[str] = set()

    def path(self, name: str) -> str:
        return self.root + os.sep + name

    def target(self, path: str) -> str:
        """Where ``path`` is opened: the path itself, once checked to be in the folder."""
        path = os.fspath(path)
        if path.rpartition(os.sep)[0] != self.root:
            raise RuntimeError(f"refusing to write {path}: outside the evaluation folder")
        return path

    def claim(self, path: str) -> str:
        """Count a file the evaluation writes (once); returns where it is opened."""
        target = self.target(path)
        if path not in self._paths:
            self._paths.add(path)
            self.files += 1
        return target

    def account(self, written: int, seconds: float) -> None:
        """Count bytes and seconds of calls made by the helper."""
        self.bytes += written
        self.seconds += seconds

    def mkdir(self) -> None:
        start = time.perf_counter()
        os.mkdir(self.root)
        self.seconds += time.perf_counter() - start

    def start(self, create: list[tuple[str, tuple]], append: list[tuple[str, tuple]]) -> tuple:
        """Make whole files (fsync'd unless ``none``); open, write and keep the ``append`` ones.

        Returns the descriptors of the files kept open, in order.
        """
        fds, written, seconds = self.io.start(
            [(self.claim(path), chunks) for path, chunks in create],
            [(self.claim(path), chunks) for path, chunks in append],
            self.fsync_policy != "none",
        )
        self.account(written, seconds)
        return fds

    def finish(self, fds: tuple, texts: tuple) -> None:
        """Append the last texts, fsync (with ``end``) and close every file."""
        self.account(*self.io.finish(fds, texts, self.fsync_policy == "end"))

    def read(self, path: str) -> bytes:
        target = self.target(path)
        start = time.perf_counter()
        with open(target, "rb") as handle:
            data = handle.read()
        self.seconds += time.perf_counter() - start
        return data

    def remove(self) -> None:
        """Delete the evaluation folder (close anything still open first)."""
        start = time.perf_counter()
        shutil.rmtree(self.root, ignore_errors=True)
        self.seconds += time.perf_counter() - start


_ZEROS = b""


def _padding(size: int) -> memoryview:
    global _ZEROS
    if len(_ZEROS) < size:
        _ZEROS = bytes(size)
    return memoryview(_ZEROS)[:size]


#: a field-output frame: tag, increment number, time, force, 8 bytes reserved
FRAME_HEADER = struct.Struct("<4sIdd8x")


def _frame_bytes(elements: int) -> int:
    """Bytes of the real field data of one frame: header, U, S, LE, PE, PEEQ."""
    return FRAME_HEADER.size + 8 * ((elements + 1) + 4 * elements)


def _frame_parts(inc: fe_model.Increment) -> tuple:
    """A frame as its header and its arrays (little-endian float64), written back to back."""
    header = FRAME_HEADER.pack(b"FRM1", inc.number, inc.time, inc.force)
    arrays = (inc.displacement, inc.stress, inc.strain, inc.plastic_strain, inc.alpha)
    return (header, *(np.ascontiguousarray(a, dtype="<f8") for a in arrays))


def _write_file(path: str | bytes, chunks, sync: bool) -> int:
    """Create or empty ``path`` and write ``chunks``; an OSError names the path, as C's does."""
    fd = os.open(path, CREATE, 0o666)
    try:
        written = write_all(fd, chunks)
        if sync:
            os.fsync(fd)
    except OSError as error:
        error.filename = path
        raise
    finally:
        os.close(fd)
    return written


def write_increment(
    fds: tuple[int, int, int],
    inc: fe_model.Increment,
    frame_bytes: int,
    sync: bool,
    restart: bytes | None,
    restart_bytes: int,
    restart_sync: bool,
) -> tuple[int, float]:
    """One increment's .msg lines, .sta line and .odb frame, and the restart file if given.

    Returns the bytes written and the seconds spent in the calls.
    """
    msg = [
        f" INCREMENT {inc.number:5d} STARTS. ATTEMPT NUMBER {inc.attempts:2d}, "
        f"TIME INCREMENT {inc.time_increment:.3E}\n"
    ]
    msg += [
        f"   EQUILIBRIUM ITERATION {i:3d}: LARGEST RELATIVE RESIDUAL {r:.3E}\n"
        for i, r in enumerate(inc.residuals)
    ]
    msg.append(f"   CONVERGED AFTER {inc.iterations} ITERATIONS; FORCE {inc.force:.6E} N\n")
    sta = (
        f"   1 {inc.number:5d} {inc.attempts:3d} {inc.iterations:6d} "
        f"{inc.time:12.5E} {inc.time:12.5E} {inc.time_increment:12.5E}\n"
    )
    frame = _frame_parts(inc)
    size = sum(memoryview(part).nbytes for part in frame)
    padding = _padding(max(frame_bytes - size, 0))
    text = "".join(msg).encode()
    start = time.perf_counter()
    written = write_all(fds[0], (text,)) + write_all(fds[1], (sta.encode(),))
    written += write_all(fds[2], (*frame, padding) if padding else frame)
    if sync:
        for fd in fds:
            os.fsync(fd)
    if restart is not None:
        padding = _padding(max(restart_bytes - size, 0))
        written += _write_file(restart, (*frame, padding) if padding else frame, restart_sync)
    return written, time.perf_counter() - start


class IncrementWriter:
    """The Python twin of ``Writer`` in ``csrc/feio.c`` (its comment says what it does)."""

    def __init__(self, fds, frame_bytes, sync, restart, restart_interval, restart_bytes,
                 restart_sync):  # fmt: skip
        self.fds, self.frame_bytes, self.sync = tuple(fds), frame_bytes, sync
        self.restart, self.restart_interval = restart, restart_interval
        self.restart_bytes, self.restart_sync = restart_bytes, restart_sync
        self.written, self.seconds, self.restarts = 0, 0.0, 0

    def __call__(self, inc: fe_model.Increment) -> None:
        due = self.restart is not None and self.restart_interval > 0
        due = due and inc.number % self.restart_interval == 0
        written, seconds = write_increment(
            self.fds, inc, self.frame_bytes, self.sync,
            self.restart if due else None, self.restart_bytes, self.restart_sync,
        )  # fmt: skip
        self.written += written
        self.seconds += seconds
        self.restarts += due


def start_files(create, append, sync: bool) -> tuple[tuple, int, float]:
    """The Python twin of ``start`` in ``csrc/feio.c``."""
    begin, written, fds = time.perf_counter(), 0, []
    try:
        for path, chunks in create:
            written += _write_file(path, chunks, sync)
        for path, chunks in append:
            fd = os.open(path, APPEND, 0o666)
            fds.append(fd)
            try:
                written += write_all(fd, chunks)
            except OSError as error:
                error.filename = path
                raise
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return tuple(fds), written, time.perf_counter() - begin


def finish_files(fds: tuple, texts: tuple, sync: bool) -> tuple[int, float]:
    """The Python twin of ``finish`` in ``csrc/feio.c``: every file is closed, whatever fails."""
    begin, written, failure = time.perf_counter(), 0, None
    for fd, text in zip(fds, texts, strict=True):
        try:
            if failure is None:
                written += write_all(fd, (text,))
                if sync:
                    os.fsync(fd)
        except OSError as error:
            failure = error
        try:
            os.close(fd)
        except OSError as error:
            failure = failure or error
    if failure is not None:
        raise failure
    return written, time.perf_counter() - begin


class PythonFeio:
    """The C helper's interface, in Python, where the helper is not built."""

    Writer = IncrementWriter
    start = staticmethod(start_files)
    finish = staticmethod(finish_files)


def input_deck(label: str, bar: fe_model.Bar, material: fe_model.Material, output: Output) -> str:
    """An Abaqus-like input deck of the bar; the solver reads its *PARAMETER block back."""
    return _deck_head(label, bar, material) + _deck_model(bar, output)


#: the material's parameters, in the order the deck lists them
MATERIAL_FIELDS = tuple(f.name for f in fields(fe_model.Material))


def _deck_head(label: str, bar: fe_model.Bar, material: fe_model.Material) -> str:
    """The deck up to its *PARAMETER block: what differs between evaluations."""
    return (
        f"*HEADING\ntierbench fe_proxy {label}: tapered elasto-plastic bar, "
        f"{bar.elements} elements\n*PARAMETER\n"
    ) + "".join(f"{name} = {getattr(material, name):.12e}\n" for name in MATERIAL_FIELDS)


def _deck_model(bar: fe_model.Bar, output: Output) -> str:
    """The deck after *PARAMETER: the same for every evaluation of a run."""
    lines = [
        "*NODE, NSET=ALL",
        *(f"{i + 1}, {x:.6f}" for i, x in enumerate(bar.nodes)),
        "*ELEMENT, TYPE=T2D2, ELSET=BAR",
        *(f"{e + 1}, {e + 1}, {e + 2}" for e in range(bar.elements)),
        "** cross-section of every element (reference area, mm2)",
        *(
            f"*SOLID SECTION, ELSET=E{e + 1}, MATERIAL=FIT\n{a:.6f}"
            for e, a in enumerate(bar.element_areas)
        ),
        "*MATERIAL, NAME=FIT",
        "*ELASTIC",
        "<E>, 0.3",
        "*PLASTIC, HARDENING=COMBINED (linear + Voce): <sigma_y>, <H>, <Q>, <b>",
        f"*STEP, NLGEOM=YES, INC={bar.increments * 2**bar.max_cutbacks}",
        "*STATIC",
        f"{1 / bar.increments}, 1.0",
        "*BOUNDARY",
        "1, 1, 1, 0.0",
        f"{bar.elements + 1}, 1, 1, {bar.max_strain * bar.length:.6f}",
        f"*CONTROLS, PARAMETERS=FIELD\n{bar.tolerance:.1e}",
        "*OUTPUT, FIELD, FREQUENCY=1",
        f"*RESTART, WRITE, FREQUENCY={output.restart_interval}",
        "*END STEP",
    ]
    return "\n".join(lines) + "\n"


def read_parameters(deck: str) -> fe_model.Material:
    """The *PARAMETER block of a deck, as the solver's material."""
    values, inside = {}, False
    for line in StringIO(deck):  # line by line: the block is near the top
        if line[0] == "*":
            if inside:
                break  # the block has ended
            inside = line.rstrip().upper() == "*PARAMETER"
        elif inside and "=" in line:
            name, _, value = line.partition("=")
            values[name.strip()] = float(value)
    return fe_model.Material(**values)


class SolverOutput:
    """The files an implicit solver writes, keeps open and extends during an analysis.

    Once started, :attr:`on_increment` is what the solve calls with every
    converged increment: the C helper's ``Writer`` itself where it is built, so
    no Python runs between the solve and the system calls.
    """

    SUFFIXES = (".msg", ".sta", ".odb")

    def __init__(self, disk: Disk, label: str, output: Output):
        self.disk, self.label, self.output = disk, label, output
        self.fds: tuple[int, ...] = ()
        self.restart = disk.path("job.res")
        self.on_increment = None

    def start(self, files: list[tuple[str, tuple]]) -> None:
        """Write ``files`` (the deck, the pre-processor's), open the files kept open."""
        disk, out = self.disk, self.output
        headers = (
            f" ANALYSIS {self.label}: NEWTON-RAPHSON, FORCE RESIDUAL TEST\n".encode(),
            f" tierbench fe_proxy {self.label}\n"
            " STEP  INC ATT  ITERS   TOTAL TIME   STEP TIME    INC OF TIME\n".encode(),
            b"",
        )
        kept = [(disk.path(f"job{s}"), (h,)) for s, h in zip(self.SUFFIXES, headers, strict=True)]
        self.fds = disk.start(files, kept)
        self.on_increment = disk.io.Writer(
            self.fds, out.increment_bytes, out.fsync == "increment",
            disk.target(self.restart), out.restart_interval,
            out.restart_bytes, out.fsync != "none",
        )  # fmt: skip

    def finish(self, message: str) -> None:
        """The analysis' last line in .msg and .sta; every file closed (fsync'd with ``end``)."""
        writer = self.on_increment
        self.disk.account(writer.written, writer.seconds)
        if writer.restarts:
            self.disk.claim(self.restart)
        text = (message + "\n").encode()
        fds, self.fds = self.fds, ()
        self.disk.finish(fds, (text, text, b""))

    def close(self) -> None:
        """After an error: close what is still open, quietly."""
        fds, self.fds = self.fds, ()
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)


def preprocessor_files(output: Output) -> tuple[tuple[str, int], ...]:
    """The files a pre-processor writes before the analysis, sharing ``model_bytes``."""
    extras = output.files - output.core_files
    names = [f"job{s}" for s in EXTRA_SUFFIXES[:extras]]
    names += [f"job.{23 + i:03d}" for i in range(extras - len(names))]
    if not names:  # no room for separate files: the model data opens the .odb
        names = ["job.odb"]
    share, rest = divmod(output.model_bytes, len(names))
    return tuple((name, share + (1 if i < rest else 0)) for i, name in enumerate(names))


# ---------------------------------------------------------------- one evaluation

_WORKER: dict = {}


def init_worker(bar: fe_model.Bar, output: Output, target: np.ndarray) -> None:
    """Pool initializer: what every evaluation of a run shares, made once."""
    _WORKER.update(
        bar=bar,
        output=output,
        target=target,
        deck_model=_deck_model(bar, output).encode(),
        preprocessor=[(name, (_padding(size),)) for name, size in preprocessor_files(output)],
    )


def evaluate(task: dict) -> dict:
    """One FE analysis in ``task['folder']`` (created, then deleted); returns its record.

    A solve that does not converge is a failed evaluation (infinite misfit, as
    an optimiser treats an aborted analysis); a file-system error (a full tier)
    propagates. Either way the folder is gone afterwards.
    """
    bar, output, target = _WORKER["bar"], _WORKER["output"], _WORKER["target"]
    label = task["label"]
    material = replace(TRUTH, **task["parameters"])
    start = time.perf_counter()
    disk = Disk(task["folder"], output.fsync)
    record = {
        "label": label,
        "parameters": task["parameters"],
        "ok": False,
        "error": "",
        "misfit": math.inf,
        "iterations": 0,
        "cutbacks": 0,
    }
    solver = None
    try:
        disk.mkdir()
        deck = disk.path("job.inp")
        deck_text = (_deck_head(label, bar, material).encode(), _WORKER["deck_model"])
        solver = SolverOutput(disk, label, output)
        solver.start(
            [(deck, deck_text)]
            + [(disk.path(name), chunks) for name, chunks in _WORKER["preprocessor"]]
        )
        parsed = read_parameters(disk.read(deck).decode())
        try:
            solution = fe_model.solve(bar, parsed, solver.on_increment)
        except fe_model.ConvergenceError as error:
            solver.finish(f" THE ANALYSIS HAS NOT BEEN COMPLETED: {error}")
            record["error"] = str(error)
        else:
            solver.finish(" THE ANALYSIS HAS COMPLETED SUCCESSFULLY")
            record.update(
                ok=True,
                misfit=fe_model.misfit(solution.force, target),
                iterations=sum(solution.iterations),
                cutbacks=solution.cutbacks,
            )
    finally:
        if solver is not None:
            solver.close()  # after an error: nothing may stay open
        disk.remove()
    record["eval_time"] = time.perf_counter() - start
    record["io_time"] = disk.seconds
    record["compute_time"] = record["eval_time"] - disk.seconds
    record["bytes"] = disk.bytes
    record["files"] = disk.files
    return record


# ---------------------------------------------------------------- the optimisation


def target_curve(bar: fe_model.Bar, noise: float, seed: int) -> np.ndarray:
    """The 'measured' curve: the model with the true parameters, plus relative noise."""
    force = fe_model.force_curve(bar, TRUTH)
    if noise:
        rng = np.random.default_rng(seed + 7919)
        force = force + rng.normal(0.0, noise * float(np.max(np.abs(force))), force.shape)
    return force


def available_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def optimise(config: Settings, root: Path, log=lambda message: None) -> dict:
    """The whole GA with evaluations in ``root``; returns the timings and every evaluation."""
    names = list(BOUNDS)
    low = [BOUNDS[n][0] for n in names]
    high = [BOUNDS[n][1] for n in names]
    target = target_curve(config.bar, config.noise, config.ga.seed)
    evaluations: list[dict] = []
    context = multiprocessing.get_context("fork")
    start = time.perf_counter()
    with context.Pool(
        config.cores, initializer=init_worker, initargs=(config.bar, config.output, target)
    ) as pool:

        def batch(rows: np.ndarray, generation: int) -> list[float]:
            tasks = [
                {
                    "folder": str(root / f"g{generation + 1:02d}-e{i + 1:03d}"),
                    "label": f"g{generation + 1:02d}-e{i + 1:03d}",
                    "parameters": {n: float(v) for n, v in zip(names, row, strict=True)},
                }
                for i, row in enumerate(rows)
            ]
            began = time.perf_counter()
            done = pool.map(evaluate, tasks, chunksize=1)
            evaluations.extend(done)
            failed = sum(not r["ok"] for r in done)
            best = min(r["misfit"] for r in done)
            log(
                f"generation {generation + 1}/{config.ga.generations}: {len(done)} evaluations "
                f"on {config.cores} workers in {time.perf_counter() - began:.2f} s, "
                f"best misfit {best:.3f} %, {failed} failed"
            )
            return [r["misfit"] for r in done]

        result = ga.optimise(batch, low, high, config.ga)
    wall = time.perf_counter() - start
    best = dict(zip(names, (float(v) for v in result.best), strict=True))
    return {
        "wall_time": wall,
        "evaluations": evaluations,
        "best": best,
        "best_misfit": result.best_fitness,
        "history": result.history,
    }


def summary_metrics(outcome: dict) -> list[dict]:
    evals = outcome["evaluations"]
    ok = [e for e in evals if e["ok"]]

    def median(key: str, rows=evals) -> float:
        return statistics.median(e[key] for e in rows)

    io_sum = sum(e["io_time"] for e in evals)
    compute_sum = sum(e["compute_time"] for e in evals)
    metrics = [
        metric("wall_time", outcome["wall_time"], "s"),
        metric("evaluations", len(evals), "evaluations"),
        metric("failed_evaluations", len(evals) - len(ok), "evaluations"),
        metric("eval_time_median", median("eval_time"), "s"),
        metric("eval_compute_time_median", median("compute_time"), "s"),
        metric("eval_io_time_median", median("io_time"), "s"),
        metric("eval_io_time_max", max(e["io_time"] for e in evals), "s"),
        metric("compute_time_sum", compute_sum, "s"),
        metric("io_time_sum", io_sum, "s"),
        metric("io_share", 100.0 * io_sum / max(io_sum + compute_sum, 1e-12), "%"),
        metric("bytes_written", sum(e["bytes"] for e in evals), "B"),
        metric("bytes_per_evaluation", median("bytes"), "B"),
        metric("files_written", sum(e["files"] for e in evals), "files"),
        metric("files_per_evaluation", median("files"), "files"),
    ]
    if ok:
        metrics.append(metric("newton_iterations_median", median("iterations", ok), "iterations"))
    if math.isfinite(outcome["best_misfit"]):
        metrics.append(metric("best_misfit", outcome["best_misfit"], "%"))
        for name, value in outcome["best"].items():
            truth = getattr(TRUTH, name)
            metrics.append(metric(f"best_{name}", value, UNITS[name]))
            metrics.append(metric(f"error_{name}", 100.0 * (value - truth) / truth, "%"))
    return metrics


def _json_value(value):
    if isinstance(value, dict):
        return {k: _json_value(v) for k, v in value.items()}
    if isinstance(value, float):
        return round(value, 9) if math.isfinite(value) else None
    return value


def run(job: Job) -> list[dict]:
    config = settings(job.params)
    if job.folder is None:
        raise PointNotApplicable("fe_proxy writes solver files; the void tier has no folder")
    cpus = available_cpus()
    if config.cores > cpus and not config.oversubscribe:
        raise PointSkipped(
            f"cores={config.cores} is more than the {cpus} CPUs this job may use; "
            "set oversubscribe: true to run more workers than cores"
        )
    job.folder.ensure_space(planned_bytes(job.params), job.max_bytes)
    # who writes the solver output: the C helper ("c") or Python, and why; asked
    # before the workers fork, so a first build happens once
    job.extra["file_writer"] = native.status("feio")
    job.log(
        f"GA: population {config.ga.population}, {config.ga.generations} generations, "
        f"{config.cores} workers; FE: {config.bar.elements} elements, "
        f"{config.bar.increments} increments; fsync={config.output.fsync}; "
        f"about {evaluation_bytes(config.output, config.bar)} B per evaluation"
    )
    outcome = optimise(config, job.folder.path, job.log)
    job.log(
        f"optimisation took {outcome['wall_time']:.2f} s; best misfit "
        f"{outcome['best_misfit']:.3f} %, parameters {outcome['best']}"
    )
    job.extra["truth"] = {n: getattr(TRUTH, n) for n in BOUNDS}
    job.extra["best"] = outcome["best"]
    job.extra["history"] = outcome["history"]
    job.extra["cpus"] = cpus
    job.extra["evaluations"] = [
        {k: _json_value(v) for k, v in e.items()} for e in outcome["evaluations"]
    ]
    return summary_metrics(outcome)


if __name__ == "__main__":
    raise SystemExit(main(run))
