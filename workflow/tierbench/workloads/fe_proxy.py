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

import math
import multiprocessing
import os
import shutil
import statistics
import struct
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ..errors import PointNotApplicable, PointSkipped
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
    """Every file-system call of an evaluation, timed, counted, and kept inside ``root``."""

    def __init__(self, root: Path, fsync: str):
        self.root = Path(root)
        self.fsync_policy = fsync
        self.seconds = 0.0
        self.bytes = 0
        self.files = 0
        self._paths: set[Path] = set()

    def _inside(self, path: Path) -> Path:
        path = Path(path)
        if self.root not in path.parents:
            raise RuntimeError(f"refusing to write {path}: outside the evaluation folder")
        return path

    def mkdir(self) -> None:
        start = time.perf_counter()
        self.root.mkdir()
        self.seconds += time.perf_counter() - start

    def open(self, path: Path, mode: str = "ab"):
        path = self._inside(path)
        start = time.perf_counter()
        handle = open(path, mode)
        self.seconds += time.perf_counter() - start
        if path not in self._paths:
            self._paths.add(path)
            self.files += 1
        return handle

    def write(self, handle, data: bytes | memoryview, flush: bool = True) -> None:
        start = time.perf_counter()
        handle.write(data)
        if flush:
            handle.flush()
        self.seconds += time.perf_counter() - start
        self.bytes += len(data)

    def sync(self, handle) -> None:
        start = time.perf_counter()
        handle.flush()
        os.fsync(handle.fileno())
        self.seconds += time.perf_counter() - start

    def close(self, handle) -> None:
        start = time.perf_counter()
        handle.close()
        self.seconds += time.perf_counter() - start

    def write_file(self, path: Path, *chunks: bytes | memoryview) -> None:
        """Create or replace a whole file (the deck, a restart record)."""
        handle = self.open(path, "wb")
        try:
            for chunk in chunks:
                self.write(handle, chunk, flush=False)
            if self.fsync_policy != "none":
                self.sync(handle)
        finally:
            self.close(handle)

    def read(self, path: Path) -> bytes:
        path = self._inside(path)
        start = time.perf_counter()
        with open(path, "rb") as handle:
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


def _frame_bytes(elements: int) -> int:
    """Bytes of the real field data of one frame: header, U, S, LE, PE, PEEQ."""
    return 32 + 8 * ((elements + 1) + 4 * elements)


def _frame(increment: fe_model.Increment) -> bytes:
    header = struct.pack("<4sIdd8x", b"FRM1", increment.number, increment.time, increment.force)
    arrays = (
        increment.displacement,
        increment.stress,
        increment.strain,
        increment.plastic_strain,
        increment.alpha,
    )
    return header + b"".join(np.ascontiguousarray(a, dtype="<f8").tobytes() for a in arrays)


def input_deck(label: str, bar: fe_model.Bar, material: fe_model.Material, output: Output) -> str:
    """An Abaqus-like input deck of the bar; the solver reads its *PARAMETER block back."""
    lines = [
        "*HEADING",
        f"tierbench fe_proxy {label}: tapered elasto-plastic bar, {bar.elements} elements",
        "*PARAMETER",
        *(f"{name} = {value:.12e}" for name, value in material.as_dict().items()),
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
    for line in deck.splitlines():
        if line.startswith("*"):
            inside = line.strip().upper() == "*PARAMETER"
            continue
        if inside and "=" in line:
            name, value = (part.strip() for part in line.split("=", 1))
            values[name] = float(value)
    return fe_model.Material(**values)


class SolverOutput:
    """The files an implicit solver keeps open and extends during an analysis."""

    def __init__(self, disk: Disk, folder: Path, label: str, output: Output):
        self.disk, self.folder, self.label, self.output = disk, folder, label, output
        self.handles = {}
        self.restart = folder / "job.res"

    def start(self) -> None:
        """Open the files kept open during the analysis and write their headers."""
        for suffix in (".msg", ".sta", ".odb"):
            self.handles[suffix] = self.disk.open(self.folder / f"job{suffix}", "ab")
        self._text(
            ".sta",
            f" tierbench fe_proxy {self.label}\n"
            " STEP  INC ATT  ITERS   TOTAL TIME   STEP TIME    INC OF TIME\n",
        )
        self._text(".msg", f" ANALYSIS {self.label}: NEWTON-RAPHSON, FORCE RESIDUAL TEST\n")

    def _text(self, suffix: str, text: str) -> None:
        self.disk.write(self.handles[suffix], text.encode())

    def increment(self, inc: fe_model.Increment) -> None:
        out = self.output
        msg = [
            f" INCREMENT {inc.number:5d} STARTS. ATTEMPT NUMBER {inc.attempts:2d}, "
            f"TIME INCREMENT {inc.time_increment:.3E}\n"
        ]
        msg += [
            f"   EQUILIBRIUM ITERATION {i:3d}: LARGEST RELATIVE RESIDUAL {r:.3E}\n"
            for i, r in enumerate(inc.residuals)
        ]
        msg.append(f"   CONVERGED AFTER {inc.iterations} ITERATIONS; FORCE {inc.force:.6E} N\n")
        self._text(".msg", "".join(msg))
        self._text(
            ".sta",
            f"   1 {inc.number:5d} {inc.attempts:3d} {inc.iterations:6d} "
            f"{inc.time:12.5E} {inc.time:12.5E} {inc.time_increment:12.5E}\n",
        )
        frame = _frame(inc)
        padding = _padding(max(out.increment_bytes - len(frame), 0))
        self.disk.write(self.handles[".odb"], frame, flush=not padding)
        if padding:
            self.disk.write(self.handles[".odb"], padding)
        if out.fsync == "increment":
            for handle in self.handles.values():
                self.disk.sync(handle)
        if out.restart_interval and inc.number % out.restart_interval == 0:
            padding = _padding(max(out.restart_bytes - len(frame), 0))
            self.disk.write_file(self.restart, frame, padding)

    def finish(self, message: str) -> None:
        self._text(".sta", message + "\n")
        self._text(".msg", message + "\n")

    def close(self, quiet: bool = False) -> None:
        """Close every file (fsync first with ``fsync: end``); ``quiet`` ignores errors."""
        for handle in self.handles.values():
            if handle.closed:
                continue
            try:
                if self.output.fsync == "end":
                    self.disk.sync(handle)
                self.disk.close(handle)
            except OSError:
                if not quiet:
                    raise
                handle.close()


def write_preprocessor_files(disk: Disk, folder: Path, output: Output) -> None:
    """The files a pre-processor writes before the analysis, sharing ``model_bytes``."""
    extras = output.files - output.core_files
    names = [f"job{s}" for s in EXTRA_SUFFIXES[:extras]]
    names += [f"job.{23 + i:03d}" for i in range(extras - len(names))]
    if not names:  # no room for separate files: the model data opens the .odb
        names = ["job.odb"]
    share, rest = divmod(output.model_bytes, len(names))
    for i, name in enumerate(names):
        size = share + (1 if i < rest else 0)
        path = folder / name
        if name == "job.odb":
            handle = disk.open(path, "ab")
            try:
                disk.write(handle, _padding(size))
            finally:
                disk.close(handle)
        else:
            disk.write_file(path, _padding(size))


# ---------------------------------------------------------------- one evaluation

_WORKER: dict = {}


def init_worker(bar: fe_model.Bar, output: Output, target: np.ndarray) -> None:
    """Pool initializer: what every evaluation of a run shares."""
    _WORKER.update(bar=bar, output=output, target=target)


def evaluate(task: dict) -> dict:
    """One FE analysis in ``task['folder']`` (created, then deleted); returns its record.

    A solve that does not converge is a failed evaluation (infinite misfit, as
    an optimiser treats an aborted analysis); a file-system error (a full tier)
    propagates. Either way the folder is gone afterwards.
    """
    bar, output, target = _WORKER["bar"], _WORKER["output"], _WORKER["target"]
    folder, label = Path(task["folder"]), task["label"]
    material = replace(TRUTH, **task["parameters"])
    start = time.perf_counter()
    disk = Disk(folder, output.fsync)
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
        deck = folder / "job.inp"
        disk.write_file(deck, input_deck(label, bar, material, output).encode())
        write_preprocessor_files(disk, folder, output)
        solver = SolverOutput(disk, folder, label, output)
        solver.start()
        parsed = read_parameters(disk.read(deck).decode())
        try:
            solution = fe_model.solve(bar, parsed, solver.increment)
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
        solver.close()
    finally:
        if solver is not None:
            solver.close(quiet=True)  # after an error: nothing may stay open
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
