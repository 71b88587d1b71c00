"""Item 3: does fe_proxy's output code cost more than the output of the application it models?

Each evaluation of the ``fe_tmpfs`` optimisation (population 30 x 2
generations, 10 elements, 40 increments, 1 worker) runs five times back to
back, in an order that turns from one evaluation to the next: with every file
written to /dev/null through fe_proxy's own Disk (the void: the same calls,
no storage), the same without field output, with output off (the same solve,
no files), with the rest of the output made from C in place (below), and
with the same calls into C making no file call. The
void run makes the application's output: every file-system call of its
pattern (CalculiX's: ~1,000 calls an evaluation) and the numbers of its
results formatted into its .frd (~35,000 an evaluation).

The reference is the solve plus that output as the application pays for it,
measured in the same rounds:

- the field output (the .frd's results, every increment) at CalculiX's own
  cost per increment: each of a few parameter sets analysed by ccx with
  field output and without, back to back, on CPU time (bench item 8's way),
  times the evaluation's increments. ccx deletes and reopens its .frd, so it
  cannot write to /dev/null: it writes to /dev/shm, and what filling the
  tmpfs pages of its field bytes costs beyond /dev/null, measured in the same
  round, is taken off its cost;
- the rest (the deck, .dat, .sta, .cvg and the .frd's mesh, which ccx cannot
  turn off, so its own cost of them cannot be measured) made from C:
  ``bench/fe_replay.c``, loaded as a library, replays on /dev/null the calls
  of the same evaluation traced without field output, formats the mesh's
  numbers as ccx's frd.c does and writes the .cvg, .sta and .dat lines from
  the solve's numbers as ccx's Fortran does (``bench/ccx_lines.f90``:
  gfortran's runtime, ccx's formats), each call at the point of the solve
  where the proxy makes it (before the solve, at each increment, at its
  end). The solve runs
  between them as it does between the proxy's calls, so the reference pays
  what calls between solver iterations cost a compiled program ("from C" in
  the rows: compiled, the application's way, its lines through Fortran's
  runtime). The calls
  into C (one a point) are the bench's own: their cost in place (the run
  with the same calls making no file call, less output off; the round's
  median per call) is taken off.

Goal: void / (the solve with the rest from C in place + ccx's field output)
at most 1.05, on CPU time, median over the evaluations. Beside it, for the
reader: where the gap is (the proxy's rest of the output against the same
calls from C, each in place; its field output per increment against ccx's);
the same ratio with the rest made from C in a tight loop after output off
(a floor: no solve between the calls); the whole output made from C in a
tight loop (the same calls, the same numbers formatted as ccx formats them),
which no program that costs what ccx's output costs reaches, and what ccx
itself scores against it; void / off; whole optimisation runs of each mode
(seconds apart, so the machine's drift is in them); the compute share of an
evaluation as fe_proxy reports it and as the solve's own compute; and what
/dev/shm costs next to output off.
"""

from __future__ import annotations

import ctypes
import math
import os
import resource
import shutil
import statistics
import subprocess
import time
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import numpy as np
import proxy_fidelity
from harness import REPO, TIER, log, rotated, row
from tierbench import intervals
from tierbench.rundir import RunFolder
from tierbench.workloads import fe_model, fe_proxy, frd

SIZES = {
    # the fe_tmpfs study's optimisation: population 30, 2 generations; the C replay
    # runs every evaluation's calls `repeats` times a round (the median counts)
    "full": {"fe": {"cores": 1}, "rounds": 15, "repeats": 5, "ccx_sets": 20},
    "tiny": {
        "fe": {"cores": 1, "population": 4, "generations": 1, "elements": 3, "increments": 10},
        "rounds": 2,
        "repeats": 3,
        "ccx_sets": 3,
    },
}


class VoidDisk(fe_proxy.Disk):
    """fe_proxy's Disk with every file opened on /dev/null: the same calls, no storage.

    No folder is made or removed; the deck, the only file the solver reads
    back, is kept in memory for that.
    """

    def __init__(self, root, fsync):
        super().__init__(root, fsync)
        self.kept: dict[str, bytes] = {}

    def target(self, path) -> str:
        super().target(path)  # the same check
        return os.devnull

    def mkdir(self) -> None:
        pass

    def remove(self) -> None:
        pass

    def create(self, path, parts) -> int:
        if path.endswith(".inp"):
            self.kept[path] = b"".join(bytes(p) for p in parts)
        return super().create(path, parts)

    def read(self, path) -> bytes:
        start = time.perf_counter()
        data = self.kept[path]
        self.seconds += time.perf_counter() - start
        return data


def evaluate_output_off(task: dict) -> dict:
    """Output off: the same solve (parameters rounded as the deck writes them), no files."""
    return solve_only(task)


def solve_only(task: dict, on_increment=None) -> dict:
    """The evaluation's solve without fe_proxy's files, ``on_increment`` called at every
    increment; its record."""
    bar, target = fe_proxy._WORKER["bar"], fe_proxy._WORKER["target"]
    parameters = {k: float(f"{v:.12e}") for k, v in task["parameters"].items()}
    material = replace(fe_proxy.TRUTH, **parameters)
    start = time.perf_counter()
    record = {
        "label": task["label"], "parameters": task["parameters"], "ok": False, "error": "",
        "misfit": math.inf, "iterations": 0, "cutbacks": 0,
    }  # fmt: skip
    try:
        solution = fe_model.solve(bar, material, on_increment)
    except fe_model.ConvergenceError as error:
        record["error"] = str(error)
    else:
        record.update(
            ok=True,
            misfit=fe_model.misfit(solution.force, target),
            iterations=sum(solution.iterations),
            increments=len(solution.iterations),
            cutbacks=solution.cutbacks,
        )
    seconds = time.perf_counter() - start
    record.update(eval_time=seconds, io_time=0.0, compute_time=seconds, bytes=0, files=0)
    return record


_SOLVE = fe_model.solve
_EVALUATE = fe_proxy.evaluate
_LAST_SOLVE: dict = {}


def _solve_watched(*args, **kwargs):
    solution = _SOLVE(*args, **kwargs)
    _LAST_SOLVE["compute_time"] = solution.compute_time  # the solve alone, output excluded
    return solution


def _evaluate_watched(task: dict) -> dict:
    _LAST_SOLVE.clear()
    record = _EVALUATE(task)
    record["solve_time"] = _LAST_SOLVE.get("compute_time", math.nan)
    return record


#: the traced rest of the output, made from C in place (see evaluate_c_rest)
_C_REST: dict = {}


def load_c_rest(library: Path, trace: Path) -> None:
    """The C replay of ``trace`` loaded for :func:`evaluate_c_rest`, before the pool forks."""
    lib = ctypes.CDLL(str(library))
    lib.fe_replay_open.argtypes = [ctypes.c_char_p] * 4
    lib.fe_replay_segments.argtypes = [ctypes.c_int]
    lib.fe_replay_segment.argtypes = [ctypes.c_int, ctypes.c_int]
    lib.fe_replay_segment.restype = None
    lib.fe_replay_made.restype = ctypes.c_long
    paths = (trace, values_path(trace), printed_path(trace), os.devnull)
    count = lib.fe_replay_open(*(os.fsencode(p) for p in paths))
    labels = traced_labels(trace)
    if count != len(labels):
        raise RuntimeError(f"the C replay read {count} evaluations of {len(labels)} in {trace}")
    _C_REST.update(lib=lib, index={label: i for i, label in enumerate(labels)})


def evaluate_c_rest(task: dict) -> dict:
    """The same solve with the rest of the output (its traced calls without field output, the
    mesh's numbers formatted and ccx's lines written as ccx does) made from C where the proxy
    makes it: before the solve, at every increment, at its end. The record counts the calls
    into C, one a point (``calls_into_c``): their cost is the bench's, taken off by
    :func:`c_rest_times` (see :func:`evaluate_c_calls`)."""
    return solve_with_c_segments(task, _C_REST["index"][task["label"]])


def evaluate_c_calls(task: dict) -> dict:
    """The same solve with the same calls into C as :func:`evaluate_c_rest`, none of them
    making a file call: what those calls cost in place (more than in a tight loop, as
    everything between solver iterations does), which C would not pay."""
    return solve_with_c_segments(task, -1)


def solve_with_c_segments(task: dict, e: int) -> dict:
    """The solve, calling the C replay's segment of evaluation ``e`` (of the task's label) at
    each of its points; a negative ``e`` makes no file call."""
    label = task["label"]
    lib = _C_REST["lib"]
    segment, segments = lib.fe_replay_segment, lib.fe_replay_segments(_C_REST["index"][label])
    increments = iter(range(1, segments - 1))

    def at_increment(inc):
        point = next(increments, None)
        if point is None:
            raise RuntimeError(f"{label}: more increments than the C replay's segments")
        segment(e, point)

    segment(e, 0)
    record = solve_only(task, at_increment)
    segment(e, segments - 1)
    if next(increments, None) is not None:
        raise RuntimeError(f"{label}: fewer increments than the C replay's segments")
    record["calls_into_c"] = segments
    return record


def evaluate_void_rest(task: dict) -> dict:
    """The proxy's output to the void without field output (``frd_every`` 0): the rest alone,
    the same calls the C replay of :func:`evaluate_c_rest` makes."""
    output, deck = _C_REST["quiet"]
    return fe_proxy.analyse(task, output, deck)


#: each evaluation's runs in pair mode, by name, with the function that makes them
PAIRED = {
    "off": evaluate_output_off, "void": None, "void_rest": evaluate_void_rest,
    "c_rest": evaluate_c_rest, "c_calls": evaluate_c_calls,
}  # fmt: skip


def evaluate_paired(task: dict) -> dict:
    """One evaluation run five times back to back: output off, output to the void, the void
    without field output, the rest of the output from C in place, and the same calls into C
    making no file call.

    The order turns from one evaluation to the next. The runs see the same
    state of a noisy machine, which whole runs of each mode, seconds apart, do
    not. Returns the void run's record with each run's wall and CPU time, the
    calls into C, and the calls and bytes of the void without field output.
    """
    if "quiet" not in _C_REST:  # once a worker
        worker = fe_proxy._WORKER
        _C_REST["quiet"] = fe_proxy.without_field_output(worker["bar"], worker["output"])
    records, times = {}, {}
    for mode in rotated(tuple(PAIRED), int(task["label"][-3:])):
        start, cpu = time.perf_counter(), time.process_time()
        records[mode] = (PAIRED[mode] or _EVALUATE)(task)
        times[f"{mode}_wall"] = time.perf_counter() - start
        times[f"{mode}_cpu"] = time.process_time() - cpu
    if len({r["misfit"] for r in records.values()}) != 1:
        raise RuntimeError(f"{task['label']}: the runs of one evaluation solved differently")
    made = made_by(records["void_rest"])
    calls = records["c_rest"]["calls_into_c"]
    return {**records["void"], **times, "calls_into_c": calls, "rest_made": made}


def c_rest_times(paired: list[dict]) -> tuple[list[float], float]:
    """The CPU time of each evaluation's solve with the rest from C in place, less what its
    calls into C cost in place; and that cost per call: over the round's evaluations, the
    median of (the same calls making no file call - output off) / the calls."""
    per_call = statistics.median(
        (e["c_calls_cpu"] - e["off_cpu"]) / e["calls_into_c"] for e in paired
    )
    return [e["c_rest_cpu"] - per_call * e["calls_into_c"] for e in paired], per_call


def made_by(record: dict) -> dict:
    """The file calls and bytes of an evaluation's record, as the C replay reports them."""
    return {"calls": sum(record["calls"].values()), "bytes": record["bytes"]}


# ---------------------------------------------------------------- the calls, traced for C

#: the file calls fe_proxy makes through ``os``, wrapped while an evaluation is traced
TRACED = (
    "open", "write", "writev", "read", "lseek", "fstat", "fsync", "close", "unlink", "mkdir",
)  # fmt: skip


class CallTrace:
    """Every file call made while active, as lines of bench/fe_replay.c's trace, and
    every block of .frd numbers formatted (a line, and its numbers in ``values``).
    A write of a line ccx writes from Fortran (announced by :meth:`expect`) is traced
    with its kind and numbers, so that the replay writes it as ccx does, and its bytes
    are kept (``printed``): the replay checks that they are what ccx writes.

    Descriptors are renumbered to the lowest free slot, so the trace does not
    depend on what else the process has open. A call the replay cannot make
    on /dev/null (a path elsewhere, an unlink, a mkdir) stops the trace: the
    void tier must have sent everything to /dev/null.
    """

    active: CallTrace | None = None

    def __init__(self):
        self.lines: list[str] = []
        self.values: list[bytes] = []
        self.printed: list[bytes] = []
        self.slots: dict[int, int] = {}
        self.real = {name: getattr(os, name) for name in TRACED}
        #: per descriptor, the printed lines its next writes are, in order
        self.expected: dict[int, list[tuple[int, tuple]]] = {}

    def expect(self, fd: int, kind: int, numbers: tuple) -> None:
        """The next write on ``fd`` is the line of ``kind`` (fe_replay.c's KIND) that ccx
        writes from ``numbers``."""
        self.expected.setdefault(fd, []).append((kind, numbers))

    def unwritten(self) -> list:
        """The announced lines not written (none, when the proxy wrote ccx's lines)."""
        return [line for lines in self.expected.values() for line in lines]

    def block(self, table: np.ndarray) -> None:
        """A block formatted: (nodes, 1 + values) of node numbers and values."""
        self.lines.append(f"f {table.shape[0]} {table.shape[1] - 1}")
        self.values.append(np.ascontiguousarray(table, dtype="<f4").tobytes())

    def __enter__(self) -> CallTrace:
        CallTrace.active = self
        wrappers = {
            "open": self._open, "write": self._sized("w", "write"),
            "read": self._sized("r", "read"), "writev": self._writev, "lseek": self._lseek,
            "fsync": self._plain("s", "fsync"), "fstat": self._plain("t", "fstat"),
            "close": self._close,
            "unlink": self._refused("unlink"), "mkdir": self._refused("mkdir"),
        }  # fmt: skip
        for name, wrapper in wrappers.items():
            setattr(os, name, wrapper)
        return self

    def __exit__(self, *exc) -> None:
        CallTrace.active = None
        for name, real in self.real.items():
            setattr(os, name, real)

    def _slot(self, fd: int) -> int:
        if fd not in self.slots:
            raise RuntimeError(f"traced call on descriptor {fd}, not opened while tracing")
        return self.slots[fd]

    def _open(self, path, flags, mode=0o777, **kwargs):
        if os.fspath(path) != os.devnull:
            raise RuntimeError(f"traced open of {path}: the void sends every file to /dev/null")
        fd = self.real["open"](path, flags, mode, **kwargs)
        used = set(self.slots.values())
        self.slots[fd] = next(i for i in range(len(used) + 1) if i not in used)
        self.lines.append(f"o {flags} {self.slots[fd]}")
        return fd

    def _sized(self, letter: str, name: str):
        def call(fd, data):
            result = self.real[name](fd, data)
            size = result if isinstance(result, int) else len(result)
            if letter == "w" and self.expected.get(fd):
                self.lines.append(self._printed(fd, data, size))
            else:
                self.lines.append(f"{letter} {self._slot(fd)} {size}")
            return result

        return call

    def _printed(self, fd: int, data, size: int) -> str:
        """The trace line of a write announced as a printed line; its bytes kept."""
        kind, numbers = self.expected[fd].pop(0)
        if size != len(data):
            raise RuntimeError("a short write of a printed line on /dev/null")
        self.printed.append(bytes(data))
        printed = (repr(float(x)) if isinstance(x, float) else str(int(x)) for x in numbers)
        return f"p {self._slot(fd)} {size} {kind} " + " ".join(printed)

    def _writev(self, fd, buffers):
        sizes = [memoryview(b).nbytes for b in buffers]
        result = self.real["writev"](fd, buffers)
        if result != sum(sizes):
            raise RuntimeError("a short writev on /dev/null")
        self.lines.append(f"v {self._slot(fd)} {len(sizes)} {' '.join(map(str, sizes))}")
        return result

    def _lseek(self, fd, offset, whence):
        result = self.real["lseek"](fd, offset, whence)
        self.lines.append(f"l {self._slot(fd)} {offset} {whence}")
        return result

    def _plain(self, letter: str, name: str):
        def call(fd):
            self.lines.append(f"{letter} {self._slot(fd)}")
            return self.real[name](fd)

        return call

    def _close(self, fd):
        slot = self._slot(fd)
        self.real["close"](fd)
        del self.slots[fd]
        self.lines.append(f"c {slot}")

    @staticmethod
    def _refused(name: str):
        def call(path, *args, **kwargs):
            raise RuntimeError(f"traced {name} of {path}: not a call of the void tier")

        return call


_NUMBERS, _MESH = frd.Writer.numbers, frd.Writer.mesh_block
_INCREMENT, _FINISH = fe_proxy.CalculixOutput.__call__, fe_proxy.CalculixOutput.finish


def _increment_traced(output: fe_proxy.CalculixOutput, inc) -> None:
    trace = CallTrace.active
    trace.lines.append("i")  # the start's calls, or the last increment's, end
    for line in printed_lines(output, inc):
        trace.expect(*line)
    _INCREMENT(output, inc)
    if trace.unwritten():
        raise RuntimeError(f"increment {inc.number}: ccx's lines not written: {trace.unwritten()}")


def printed_lines(output: fe_proxy.CalculixOutput, inc) -> list[tuple[int, int, tuple]]:
    """The lines ccx writes into .cvg, .sta and .dat at this increment, each as (descriptor,
    fe_replay.c's KIND, the numbers it writes): all of ccx's fields, its constant ones too,
    which the proxy formats once."""
    first, (dat, sta, cvg) = output.first, output.fds
    number, attempts, now = inc.number, inc.attempts, inc.time
    residuals = inc.residuals or (0.0,)
    lines = []
    for k, residual in enumerate(residuals, 1):
        numbers = (1, number, attempts, k, 0, 100.0 * residual, 0.0, 0.0, 0.0)
        lines.append((cvg, int(first and k == 1), numbers))
    lines.append(
        (sta, 2 + first, (1, number, attempts, len(residuals), now, now, inc.time_increment))
    )
    tip = output.layout.tip
    lines.append((dat, 4, (now, inc.force, 0.0, 0.0, now, tip, inc.tip_displacement, 0.0, 0.0)))
    return lines


def _finish_traced(output: fe_proxy.CalculixOutput, message: str) -> None:
    CallTrace.active.lines.append("i")
    _FINISH(output, message)


def _numbers_traced(writer: frd.Writer, inc) -> np.ndarray:
    numbers = _NUMBERS(writer, inc)
    for a, b in writer.spans:
        CallTrace.active.block(numbers[a:b].reshape(writer.mesh.nodes, -1))
    return numbers


def _mesh_traced(writer: frd.Writer, when=None) -> bytes:
    text = _MESH(writer, when)
    ids = np.arange(1, writer.mesh.nodes + 1)[:, None]
    CallTrace.active.block(np.hstack([ids, writer.mesh.coordinates]))
    return text


def evaluate_traced(task: dict) -> dict:
    """An evaluation to the void with its output traced (timing: none of its figures)."""
    with CallTrace() as trace:
        record = _EVALUATE(task)
    return {
        **record, "trace": trace.lines, "values": b"".join(trace.values),
        "printed": b"".join(trace.printed),
    }  # fmt: skip


def record_trace(config, path: Path) -> list[dict]:
    """Trace every evaluation of the optimisation to the void into ``path`` (its numbers into
    ``path.values``, its printed lines' bytes into ``path.printed``); the calls and bytes
    each made."""
    with fe_mode("traced"):
        outcome = fe_proxy.optimise(config, path.parent)
    evaluations = outcome["evaluations"]
    path.write_text(
        "".join(f"e {e['label']}\n" + "".join(f"{x}\n" for x in e["trace"]) for e in evaluations)
    )
    values_path(path).write_bytes(b"".join(e["values"] for e in evaluations))
    printed_path(path).write_bytes(b"".join(e["printed"] for e in evaluations))
    # a formatted block (f) and a segment's end (i) are no file calls
    calls = [sum(1 for x in e["trace"] if x[0] not in "fi") for e in evaluations]
    return [{"calls": n, "bytes": e["bytes"]} for n, e in zip(calls, evaluations, strict=True)]


def values_path(trace: Path) -> Path:
    return trace.with_suffix(".values")


def printed_path(trace: Path) -> Path:
    return trace.with_suffix(".printed")


def traced_labels(trace: Path) -> list[str]:
    """The labels of the traced evaluations, in the trace's order."""
    return [line[2:] for line in trace.read_text().splitlines() if line.startswith("e ")]


def compile_replay(folder: Path, library: bool = False) -> Path:
    """bench/fe_replay.c with bench/ccx_lines.f90 built as a program, or with ``library`` as
    a shared library."""
    binary = folder / ("fe_replay.so" if library else "fe_replay")
    sources = [str(REPO / "bench" / name) for name in ("fe_replay.c", "ccx_lines.f90")]
    shared = ["-shared", "-fPIC"] if library else []
    if shutil.which("gfortran") is None:
        raise RuntimeError("bench item 3 needs gfortran (Debian/Ubuntu: apt-get install gfortran)")
    # as Debian builds ccx: its fprintf is the fortified one, and it runs with gfortran's
    # runtime, which loads libquadmath: its printf modifier sends every printf through
    # glibc's slower positional path
    subprocess.run(
        ["gfortran", "-O2", "-D_FORTIFY_SOURCE=2", *shared, "-J", str(folder), "-o", str(binary),
         *sources],
        check=True,
        capture_output=True,
        text=True,
    )  # fmt: skip
    return binary


def c_replay(binary: Path, trace: Path, repeats: int) -> list[dict]:
    """The traced output made the application's way (C, and Fortran for ccx's lines) on
    /dev/null, in a tight loop: per evaluation, seconds, calls, bytes."""
    done = subprocess.run(
        [
            str(binary),
            *(str(p) for p in (trace, values_path(trace), printed_path(trace))),
            os.devnull,
            str(repeats),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    rows = [line.split() for line in done.stdout.splitlines()]
    return [
        {"seconds": float(t), "calls": int(c), "bytes": int(b), "numbers": int(n)}
        for t, c, b, n in rows
    ]


# ---------------------------------------------------------------- the modes


@contextmanager
def fe_mode(mode: str):
    """fe_proxy set up for a mode before the pool forks: output off, to the void, or to a tier.

    With output on, each evaluation also reports the solve's own compute time
    (fe_model's, the output callbacks excluded) beside fe_proxy's figures;
    ``paired`` runs every evaluation output off and to the void, back to back;
    ``traced`` records the void's file calls for the C replay.
    """
    disk, evaluate, solve = fe_proxy.Disk, fe_proxy.evaluate, fe_model.solve
    if mode == "off":
        fe_proxy.evaluate = evaluate_output_off
    elif mode == "paired":  # no watching: nothing of the bench's own in the measured runs
        fe_proxy.evaluate, fe_proxy.Disk = evaluate_paired, VoidDisk
    elif mode == "traced":
        fe_proxy.evaluate, fe_proxy.Disk = evaluate_traced, VoidDisk
        frd.Writer.numbers, frd.Writer.mesh_block = _numbers_traced, _mesh_traced
        fe_proxy.CalculixOutput.__call__ = _increment_traced
        fe_proxy.CalculixOutput.finish = _finish_traced
    else:
        fe_proxy.evaluate, fe_model.solve = _evaluate_watched, _solve_watched
        if mode == "void":
            fe_proxy.Disk = VoidDisk
    try:
        yield
    finally:
        fe_proxy.Disk, fe_proxy.evaluate, fe_model.solve = disk, evaluate, solve
        frd.Writer.numbers, frd.Writer.mesh_block = _NUMBERS, _MESH
        fe_proxy.CalculixOutput.__call__, fe_proxy.CalculixOutput.finish = _INCREMENT, _FINISH


def fe_run(config, mode: str) -> dict:
    with RunFolder(TIER, f"bench-fe-{mode}") as folder, fe_mode(mode):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        outcome = fe_proxy.optimise(config, folder.path)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the pool's workers, reaped
    evaluations = outcome["evaluations"]
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    paired = [e for e in evaluations if "off_wall" in e]
    c_rest, call_cost = c_rest_times(paired) if paired else ([], None)
    return {
        "wall": outcome["wall_time"],
        "cpu": cpu,
        "misfit": outcome["best_misfit"],
        "compute_share": statistics.median(e["compute_time"] / e["eval_time"] for e in evaluations),
        "solve_share": statistics.median(
            e.get("solve_time", e["compute_time"]) / e["eval_time"] for e in evaluations
        ),
        "eval_time": statistics.median(e["eval_time"] for e in evaluations),
        "bytes": statistics.median(e["bytes"] for e in evaluations),
        "pairs": [(e["off_wall"], e["void_wall"]) for e in paired],
        "cpu_pairs": [(e["off_cpu"], e["void_cpu"]) for e in paired],
        "c_rest_cpu": c_rest,
        "void_rest_cpu": [e["void_rest_cpu"] for e in paired],
        "rest_made": [e["rest_made"] for e in paired],
        "call_cost": call_cost,
        "increments": [e.get("increments", 0) for e in paired],
        "made": [made_by(e) for e in paired],
    }


FE_MODES = ("off", "void", "shm", "paired", "replay", "replay_rest", "ccx")


def ccx_costs(shape: dict, sets: int, round_: int) -> dict[str, list[float]]:
    """ccx's own field-output cost per increment (CPU seconds) and field bytes per increment,
    each of ``sets`` parameter sets analysed with field output and without, back to back
    (bench item 8's way), on the tier; with what the tier's pages cost beyond /dev/null."""
    rng = np.random.default_rng(2000 + round_)
    with RunFolder(TIER, f"bench-ccx-r{round_}") as folder:
        evaluate = proxy_fidelity.Evaluator("calculix", {**shape, "evaluations": sets}, folder.path)
        found = {"costs": [], "bytes": []}
        for i in range(sets):
            parameters = {n: float(rng.uniform(*b)) for n, b in fe_proxy.BOUNDS.items()}
            with_, without = evaluate.pair(parameters, i, "ccx")
            found["costs"].append(proxy_fidelity.per_increment(with_, without))
            found["bytes"].append(proxy_fidelity.per_increment(with_, without, "bytes"))
        found["sink_per_byte"] = sink_cost_per_byte(folder.path)
    return found


def sink_cost_per_byte(folder: Path, size: int = 8 << 20, block: int = 4096) -> float:
    """CPU seconds per byte that a fresh file in ``folder`` costs beyond /dev/null.

    ``size`` bytes in writes of ``block`` (stdio's buffer, as ccx writes), to
    each sink in turn three times; the median of the differences. It is what
    ccx pays on the tier and the void does not.
    """
    chunk, sink = b"x" * block, folder / "sink-probe"
    differences = []
    for attempt in range(3):
        spent = {}
        for target in rotated([os.devnull, str(sink)], attempt):
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                start = time.process_time()
                for _ in range(size // block):
                    os.write(fd, chunk)
                spent[target] = time.process_time() - start
            finally:
                os.close(fd)
        sink.unlink()
        differences.append(spent[str(sink)] - spent[os.devnull])
    return max(0.0, statistics.median(differences)) / size


def measure(mode: str, scratch: Path, goal) -> list[dict]:
    size = SIZES[mode]
    config = fe_proxy.settings(size["fe"])
    trace, rest = scratch / "calls.trace", scratch / "rest.trace"
    made = record_trace(config, trace)
    # the same optimisation without field output: what is left of the output when ccx's
    # own field-output cost stands in for the proxy's
    made_rest = record_trace(fe_proxy.settings({**size["fe"], "frd_every": 0}), rest)
    if len(made_rest) != len(made):
        raise RuntimeError("the optimisation without field output made other evaluations")
    binary = compile_replay(scratch)
    load_c_rest(compile_replay(scratch, library=True), rest)
    replays = {"replay": (binary, trace, size["repeats"]),
               "replay_rest": (binary, rest, size["repeats"])}  # fmt: skip
    ccx = ({"elements": config.bar.elements, "increments": config.bar.increments}, size["ccx_sets"])
    runs = run_rounds(config, size["rounds"], replays, ccx)
    checks = [(r["made"], made) for r in runs["paired"] + runs["replay"]]
    checks += [(r["rest_made"], made_rest) for r in runs["paired"]]
    checks += [(r["made"], made_rest) for r in runs["replay_rest"]]
    if any(found != expected for found, expected in checks):
        raise RuntimeError("the C replay and the proxy's evaluations made different calls")
    return overhead_rows(config, runs, goal)


def replayed(replay: tuple) -> dict:
    done = c_replay(*replay)
    return {
        "seconds": [e["seconds"] for e in done],
        "made": [{"calls": e["calls"], "bytes": e["bytes"]} for e in done],
        "numbers": [e["numbers"] for e in done],
    }


def run_rounds(config, rounds: int, replays: dict, ccx: tuple) -> dict[str, list[dict]]:
    """Every mode once a round, in a different order each round; the runs per mode."""
    runs = {fe: [] for fe in FE_MODES}
    for round_ in range(rounds):
        for fe in rotated(FE_MODES, round_):
            if fe == "ccx":
                runs[fe].append(ccx_costs(*ccx, round_))
            elif fe in replays:
                runs[fe].append(replayed(replays[fe]))
            else:
                runs[fe].append(fe_run(config, fe))
        misfits = {fe: runs[fe][-1]["misfit"] for fe in runs if "misfit" in runs[fe][-1]}
        if len(set(misfits.values())) != 1:
            raise RuntimeError(f"the runs found different optima: {misfits}")
        log(
            f"3 round {round_ + 1}: wall off {runs['off'][-1]['wall']:.3f} s, "
            f"void {runs['void'][-1]['wall']:.3f} s, shm {runs['shm'][-1]['wall']:.3f} s, "
            f"paired {runs['paired'][-1]['wall']:.3f} s, C output "
            f"{sum(runs['replay'][-1]['seconds']) * 1e3:.1f} ms, ccx field output "
            f"{statistics.median(runs['ccx'][-1]['costs']) * 1e3:.3f} ms per increment"
        )
    return runs


def ccx_field_costs(runs: dict[str, list[dict]]) -> list[float | None]:
    """Per round, ccx's field-output cost per increment as on /dev/null: the median over its
    parameter sets, less the tmpfs pages of its field bytes; None when not above zero (at
    toy sizes its output can cost less than its runs vary)."""
    costs = []
    for r in runs["ccx"]:
        cost = statistics.median(r["costs"]) - r["sink_per_byte"] * statistics.median(r["bytes"])
        costs.append(cost if cost > 0 else None)
    return costs


def references(runs: dict[str, list[dict]]) -> dict[int, list[dict[str, float]]]:
    """Per round with a ccx cost, per evaluation (CPU seconds): output off, the void, and
    output off plus the application's output two ways: ccx's field output for the
    evaluation's increments plus the rest of the output from C, in place (the solve with the
    rest made between its increments) or in a tight loop (after output off, a floor)."""
    found = {}
    for r, cost in enumerate(ccx_field_costs(runs)):
        if cost is None:
            continue
        paired, loop = runs["paired"][r], runs["replay_rest"][r]["seconds"]
        found[r] = [
            {"off": off, "void": void, "in_place": c + cost * n, "loop": off + t + cost * n}
            for (off, void), c, t, n in zip(
                paired["cpu_pairs"], paired["c_rest_cpu"], loop, paired["increments"], strict=True
            )
        ]
    return found


def against(rounds: dict[int, list[dict]], reference: str, goal=None) -> tuple[list, str, list]:
    """void / ``reference`` per evaluation of ``rounds`` (:func:`references`), a detail with
    the ratio of the round totals, its interval and what that says of ``goal``, and the
    interval (None when there is none)."""
    kept = list(rounds)
    values = [e["void"] / e[reference] for evaluations in rounds.values() for e in evaluations]
    if not kept:
        return values, "0 evaluations in 0 rounds; no round measured", None
    totals = {
        key: intervals.sample([sum(e[key] for e in rounds[r]) for r in kept], kept)
        for key in ("void", reference)
    }
    found = intervals.ratio(totals["void"], totals[reference])
    detail = (
        f"{len(values)} evaluations in {len(kept)} rounds; ratio of the round totals "
        f"{found.estimate:.3f}, "
    )
    if not found.known:
        return values, detail + f"no interval ({found.reason or 'too few rounds'})", None
    detail += f"95% interval [{found.low:.3f}, {found.high:.3f}] (bootstrap over rounds, paired)"
    if goal is not None:
        detail += f", {goal.decided(found.low, found.high)}"
    return values, detail, [found.low, found.high]


def goal_row(runs: dict[str, list[dict]], goal) -> dict:
    """void / (the solve with the rest of the output from C in place + ccx's field output for
    the evaluation's increments), CPU time, per evaluation; with the ratio of the round
    totals and its interval."""
    ccx = ccx_field_costs(runs)
    rounds = references(runs)
    kept = list(rounds)
    values, detail, interval = against(rounds, "in_place", goal)
    measured = [c for c in ccx if c is not None]
    skipped = len(ccx) - len(measured)
    c_rest = [t for r in kept for t in runs["paired"][r]["c_rest_cpu"]]
    sink = statistics.median(r["sink_per_byte"] for r in runs["ccx"])
    if measured:
        calls = statistics.median(r["call_cost"] for r in runs["paired"])
        detail += (
            f"; ccx's field output {statistics.median(measured) * 1e3:.3f} ms per increment "
            f"(median of the rounds' medians, /dev/shm's pages taken off at "
            f"{sink * 1e9:.3f} ms per MB); the solve with the rest of the output from C in "
            f"place {statistics.median(c_rest) * 1e3:.2f} ms per evaluation (median; the "
            f"calls into C taken off at {calls * 1e6:.2f} us each, as they cost in place)"
        )
    if skipped:
        detail += f"; {skipped} round(s) without a ratio: ccx's field output not above zero"
    found_row = row(
        3,
        "fe_harness_overhead",
        "FE proxy evaluation CPU time, output to the void (/dev/null) / (the same solve with "
        "the rest of the output made from C where the proxy makes it + CalculiX's own "
        "field-output cost for the same increments), back to back",
        "ratio",
        values,
        goal,
        detail,
        interval=interval,
        off_cpu_s=[e["off"] for r in kept for e in rounds[r]],
        void_cpu_s=[e["void"] for r in kept for e in rounds[r]],
        c_rest_in_place_s=c_rest,
        increments=[n for r in kept for n in runs["paired"][r]["increments"]],
        ccx_field_cost_per_increment_s=ccx,
        sink_s_per_byte=[r["sink_per_byte"] for r in runs["ccx"]],
    )
    if not values:  # as item 8: a goal nothing measured is not met
        found_row["met"] = False
    return found_row


def loop_row(runs: dict[str, list[dict]]) -> dict:
    """void / (output off + the rest from C in a tight loop + ccx's field output): a floor."""
    rounds = references(runs)
    kept = list(rounds)
    values, detail, interval = against(rounds, "loop")
    rest = [t for r in kept for t in runs["replay_rest"][r]["seconds"]]
    if rest:
        detail += (
            f"; the rest of the output from C {statistics.median(rest) * 1e3:.2f} ms per "
            "evaluation (median), in a loop of the evaluations' output without their solves"
        )
    return row(
        3,
        "fe_over_c_rest_loop",
        "FE proxy evaluation CPU time, output to the void / (output off + CalculiX's own "
        "field-output cost + the rest of the output made from C in a tight loop): a floor, "
        "not a goal",
        "ratio",
        values,
        None,
        detail,
        interval=interval,
        c_rest_s=rest,
    )


def split_rows(runs: dict[str, list[dict]]) -> list[dict]:
    """Where the goal row's gap is, in place, per round (medians of its evaluations): the
    proxy's rest of the output (the void without field output - off) against the same calls
    from C (C in place - off), and its field output per increment (void - the void without
    it) against ccx's."""
    rest = {"python": [], "c": []}
    field = {"proxy": [], "ccx": []}
    for r, cost in enumerate(ccx_field_costs(runs)):
        paired = runs["paired"][r]
        off, void = zip(*paired["cpu_pairs"], strict=True)
        quiet, n = paired["void_rest_cpu"], paired["increments"]
        rest["python"].append(statistics.median(q - o for q, o in zip(quiet, off, strict=True)))
        rest["c"].append(
            statistics.median(c - o for c, o in zip(paired["c_rest_cpu"], off, strict=True))
        )
        if cost is not None:
            per = zip(void, quiet, n, strict=True)
            field["proxy"].append(statistics.median((v - q) / k for v, q, k in per))
            field["ccx"].append(cost)
    return [
        compared(
            "fe_rest_python_over_c",
            "FE proxy's rest of the output (no field output) from Python / the same calls from "
            "C, each in place (its evaluation's CPU time - output off's)",
            rest["python"], rest["c"], "per evaluation",
        ),
        compared(
            "fe_field_over_ccx",
            "FE proxy's field output per increment (void - the void without field output) / "
            "ccx's (with - without, its tmpfs pages taken off), CPU time",
            field["proxy"], field["ccx"], "per increment",
        ),
    ]  # fmt: skip


def compared(key: str, what: str, top: list, bottom: list, per: str) -> dict:
    """A row of ``top`` / ``bottom`` per round, with the ratio of their medians over the
    rounds and its interval."""
    values = [a / b for a, b in zip(top, bottom, strict=True) if b > 0]
    detail, interval = f"{len(values)} rounds", None
    if values:
        detail += (
            f": {statistics.median(top) * 1e3:.3f} ms against "
            f"{statistics.median(bottom) * 1e3:.3f} ms {per} (medians of the rounds)"
        )
        rounds = list(range(len(top)))
        found = intervals.ratio(intervals.sample(top, rounds), intervals.sample(bottom, rounds))
        if found.known:
            interval = [found.low, found.high]
            detail += (
                f"; ratio of the medians {found.estimate:.3f} [{found.low:.3f}, "
                f"{found.high:.3f}] (95%, bootstrap over the rounds)"
            )
    return row(3, key, what, "ratio", values, None, detail, interval=interval)


def c_floor_rows(runs: dict[str, list[dict]]) -> list[dict]:
    """The whole output made from C in a tight loop, for the proxy and for ccx itself."""
    pairs = [pair for r in runs["paired"] for pair in r["cpu_pairs"]]
    calls_s = [t for r in runs["replay"] for t in r["seconds"]]  # in the GA's order, per round
    made, numbers = runs["replay"][0]["made"], runs["replay"][0]["numbers"]
    off_sum, void_sum, calls_sum = sum(p[0] for p in pairs), sum(p[1] for p in pairs), sum(calls_s)
    increments = [n for r in runs["paired"] for n in r["increments"]]
    # CalculiX in the proxy's place: (off + its field output + the rest from C) / the floor
    application = [
        e["loop"] / (e["off"] + whole)
        for r, evaluations in references(runs).items()
        for e, whole in zip(evaluations, runs["replay"][r]["seconds"], strict=True)
    ]
    return [
        row(
            3,
            "fe_over_c_output",
            "FE proxy evaluation CPU time, output to the void / (output off + the whole output "
            "made from C: its file calls on /dev/null, its .frd's numbers formatted as ccx "
            "does), back to back: a floor, not a goal",
            "ratio",
            [void / (off + t) for (off, void), t in zip(pairs, calls_s, strict=True)],
            None,
            f"summed: void {void_sum:.2f} s / (off {off_sum:.2f} s + C output "
            f"{calls_sum:.3f} s) = {void_sum / (off_sum + calls_sum):.3f}; "
            f"{statistics.median(m['calls'] for m in made):.0f} file calls and the .frd's "
            f"{statistics.median(numbers):.0f} numbers per evaluation (medians), made from C in "
            f"{statistics.median(calls_s) * 1e3:.2f} ms (median), "
            f"{statistics.median(calls_s) / statistics.median(increments) * 1e3:.3f} ms "
            "per increment",
            off_cpu_s=[p[0] for p in pairs],
            void_cpu_s=[p[1] for p in pairs],
            c_calls_s=calls_s,
        ),
        row(
            3,
            "fe_application_over_c",
            "CalculiX in the proxy's place on the floor: (output off + ccx's own field output "
            "+ the rest from C) / (output off + the whole output made from C), per evaluation",
            "ratio",
            application,
            None,
            "what the application itself scores against the C floor: formatting between "
            "solver iterations, on colder caches, costs it more than a tight loop",
        ),
    ]


def overhead_rows(config, runs: dict[str, list[dict]], goal) -> list[dict]:
    """The item's rows: the goal, the C floor, then whole runs and compute shares."""

    def of(mode, key):
        return [r[key] for r in runs[mode]]

    def ratios(key, mode="void"):
        return [a / b for a, b in zip(of(mode, key), of("off", key), strict=True)]

    def median(mode, key):
        return statistics.median(of(mode, key))

    pairs = [pair for r in runs["paired"] for pair in r["pairs"]]
    off_sum, void_sum = sum(p[0] for p in pairs), sum(p[1] for p in pairs)
    calls_sum = sum(t for r in runs["replay"] for t in r["seconds"])
    c, b = config.ga, config.bar
    what = (
        f"GA population {c.population} x {c.generations} generations on {config.cores} worker, "
        f"{b.elements} elements, {b.increments} increments, "
        f"{median('shm', 'bytes') / 1e6:.2f} MB per evaluation, output as "
        f"{config.output.model}"
    )
    first = goal_row(runs, goal)
    first["detail"] += f"; {what}"
    return [
        first,
        *split_rows(runs),
        loop_row(runs),
        *c_floor_rows(runs),
        row(
            3,
            "fe_void_over_off",
            "FE proxy evaluation wall time, void / output off, back to back: includes the "
            "application's own output",
            "ratio",
            [void / off for off, void in pairs],
            None,
            f"summed: void {void_sum:.2f} s / off {off_sum:.2f} s = {void_sum / off_sum:.3f}; "
            f"the output alone, from C, is {100 * calls_sum / off_sum:.1f} % of output off",
        ),
        row(
            3,
            "fe_harness_overhead_runs",
            "FE proxy optimisation wall time, void / output off, whole runs of each",
            "ratio",
            ratios("wall"),
            None,
            f"off {median('off', 'wall'):.2f} s, void {median('void', 'wall'):.2f} s (medians); "
            "the runs are a second apart, so the machine's noise between runs is in the ratio",
            off_s=of("off", "wall"),
            void_s=of("void", "wall"),
            off_cpu_s=of("off", "cpu"),
            void_cpu_s=of("void", "cpu"),
        ),
        row(
            3,
            "fe_compute_share_void",
            "FE proxy compute share of an evaluation as it reports it "
            "(compute_time / eval_time), void",
            "share",
            of("void", "compute_share"),
            None,
            "the rest: time in file-system calls, here on /dev/null; formatting the "
            "output counts as compute",
        ),
        row(
            3,
            "fe_solve_share_void",
            "FE solve's own share of an evaluation (its compute, output callbacks "
            "excluded / eval_time), void",
            "share",
            of("void", "solve_share"),
            None,
            f"evaluation off {statistics.median(p[0] for p in pairs) * 1e3:.1f} ms, void "
            f"{statistics.median(p[1] for p in pairs) * 1e3:.1f} ms (medians of the pairs)",
        ),
        row(
            3,
            "fe_compute_share_shm",
            f"FE proxy compute share of an evaluation, {TIER}",
            "share",
            of("shm", "compute_share"),
            None,
            f"solve's own share {median('shm', 'solve_share'):.3f}; {TIER} / off wall time "
            f"{statistics.median(ratios('wall', 'shm')):.3f} (what the tier costs, not a goal)",
            shm_over_off=ratios("wall", "shm"),
            shm_s=of("shm", "wall"),
        ),
    ]
