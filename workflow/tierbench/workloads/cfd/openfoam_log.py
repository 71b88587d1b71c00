"""simpleFoam's log read: its iterations with their times, fatal errors, the build, the
steps that wrote and their cost. Pure functions of the log's text (and the time stamps
the tee took of its lines), so they are tried on logs of any OpenFOAM case.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from decimal import Decimal
from statistics import mean, median

import numpy as np

from ...errors import PointFailed

#: ClockTime is whole seconds: the arrivals may differ from it by up to ~1 s, and a bit
STAMP_TOLERANCE_S = 1.5
ITERATION = re.compile(r"^Time = (\S+)\s*$")
TIMES = re.compile(r"^ExecutionTime = (\S+) s\s+ClockTime = (\S+) s")
FATAL = re.compile(r"FOAM FATAL (?:IO )?ERROR")
SOLVE = re.compile(r"^\w+:\s+Solving for (\w+),.*No Iterations (\d+)")
EXECUTION_LINE = re.compile(rb"^(?:\[\d+\]\s*)*ExecutionTime = ")
#: the same lines found in a whole log's text, each with its line end
EXECUTION_LINES = re.compile(EXECUTION_LINE.pattern.decode() + r".*\n", re.MULTILINE)
#: a crash on a floating point exception (not the banner's "trapFpe: ... enabled" line)
SIGFPE = re.compile(
    r"sigFpe::sigHandler|signal 8 \(Floating point exception\)|^Floating point exception \(core",
    re.MULTILINE,
)
RANK_PREFIX = re.compile(r"^(?:\[\d+\]\s*)+")


@dataclass(frozen=True)
class Iteration:
    """One iteration's totals as the log prints them after it (seconds since the start)."""

    time: str
    cpu: float
    clock: float
    #: iterations of each linear solve in the iteration (field -> iterations)
    solves: dict = field(default_factory=dict)


def _strip_ranks(line: str) -> str:
    return RANK_PREFIX.sub("", line).strip()


def fatal_error(text: str) -> str | None:
    """The first FOAM FATAL (IO) ERROR's reason in one line, or None when there is none."""
    lines = [_strip_ranks(line) for line in text.splitlines()]
    for i, line in enumerate(lines):
        found = FATAL.search(line)
        if not found:
            continue
        words = []
        for follow in lines[i + 1 :]:
            if not follow:
                if words:
                    break
                continue
            if follow.startswith(("From ", "in file", "file:", "FOAM exiting", "FOAM parallel")):
                break
            words.append(follow)
        return f"{found.group(0)}: {' '.join(words)[:300] or 'no reason given'}"
    if SIGFPE.search(text):
        return "the solver stopped on a floating point exception (sigFpe)"
    return None


def build_of(text: str) -> str | None:
    """The solver's build line (``OPENFOAM=1912 patch=200626``), for the record."""
    found = re.search(r"^Build\s*:\s*(.+?)\s*$", text, re.MULTILINE)
    return found.group(1) if found else None


def parse_iterations(text: str) -> list[Iteration]:
    """Every complete iteration of a simpleFoam log: its time name and its totals."""
    found, current, solves = [], None, {}
    for raw in text.splitlines():
        line = _strip_ranks(raw)
        started = ITERATION.match(line)
        if started:
            current, solves = started.group(1), {}
            continue
        solve = SOLVE.match(line)
        if solve and current is not None:
            name = solve.group(1)
            solves[name] = solves.get(name, 0) + int(solve.group(2))
            continue
        totals = TIMES.match(line)
        if totals and current is not None:
            cpu, clock = float(totals.group(1)), float(totals.group(2))
            found.append(Iteration(current, cpu, clock, solves))
            current = None
    return found


def log_per_step(text: str) -> dict | None:
    """Bytes and lines the solver logs per time step, between its first and last
    ExecutionTime lines (None below two): what cfd_proxy's ``log_bytes_per_step`` and
    ``log_writes_per_step`` stand for. OpenFOAM flushes each line as one write call,
    but "Time = N" and the blank line after it go in one."""
    ends = [m.end() for m in EXECUTION_LINES.finditer(text)]
    if len(ends) < 2:
        return None
    between = text[ends[0] : ends[-1]]
    steps = len(ends) - 1
    return {
        "bytes": round(len(between.encode()) / steps, 1),
        "lines": round(between.count("\n") / steps, 2),
        "steps": steps,
    }


def check_log(
    text: str, steps: int | None, solver: str = "simpleFoam", numbered: bool = True
) -> list[Iteration]:
    """The time steps of a finished run; PointFailed when it failed or was cut short.

    ``steps`` None: as many as the run took (a case that adjusts its time
    step). ``numbered``: the time names are the iterations 1..steps (the duct:
    deltaT 1 from 0); a case's are its simulated times (``0.005``, ...).
    """
    reason = fatal_error(text)
    if reason:
        raise PointFailed(f"{solver}: {reason}")
    iterations = parse_iterations(text)
    ended = re.search(r"^End\s*$", text, re.MULTILINE)
    if not ended or (steps is not None and len(iterations) != steps):
        done = f"after iteration {iterations[-1].time}" if iterations else "before iteration 1"
        of = f" of {steps}" if steps is not None else ""
        raise PointFailed(f"{solver}'s log ends {done}{of}, without 'End' (killed or crashed)")
    names = [it.time for it in iterations]
    if numbered and names != [str(i) for i in range(1, len(names) + 1)]:
        raise PointFailed(f"{solver} ran iterations {names[0]}..{names[-1]}, not 1..{steps}")
    if len(iterations) < 2:
        raise PointFailed(f"{solver} ran {len(iterations)} time step(s): none can be timed")
    return iterations


def last_lines(text: str, count: int = 3) -> str:
    """The solver's last lines, for a failed point's reason: its own words, not the stack
    trace of a crash (``#0 ...``) nor what the launcher adds (Open MPI's messages framed
    by lines of dashes, ``srun:`` lines)."""
    kept, framed = [], False
    for raw in text.splitlines():
        line = _strip_ranks(raw)
        if re.match(r"^-{10,}$", line):
            framed = not framed
            continue
        if line and not framed and not re.match(r"^(#\d+\s|srun: )", line):
            kept.append(line)
    return " | ".join(line[:200] for line in kept[-count:]) or "no output"


def writing_steps(rule: tuple, iterations: list[Iteration], start: Decimal) -> list[int]:
    """The steps (1 = the run's first) that wrote, as OpenFOAM's Time decides.

    ``("timeStep", n)``: every n-th step. ``("runTime", interval)``: the steps
    whose write index ``(t - start + deltaT / 2) / interval`` (t and deltaT
    from the log's time names) passes the last one, as v1912's Time does for
    runTime and adjustableRunTime.
    """
    kind, every = rule
    if kind == "none":
        return []
    if kind == "timeStep":
        return [i for i in range(1, len(iterations) + 1) if i % int(every) == 0]
    found, last, previous = [], 0, start
    for i, iteration in enumerate(iterations, 1):
        now = Decimal(iteration.time)
        index = int((now - start + (now - previous) / 2) / every)
        if index > last:
            found.append(i)
            last = index
        previous = now
    return found


def step_times(iterations: list[Iteration], stamps: list[float]) -> list[tuple[int, float, float]]:
    """(iteration, wall s, CPU s) of every iteration after the first.

    The wall time is the gap between the arrivals of two consecutive
    ``ExecutionTime`` lines (``stamps``): v1912 prints ClockTime in whole
    seconds. The CPU time is the gap between their ExecutionTimes (10 ms ticks).
    """
    if len(stamps) != len(iterations):
        raise PointFailed(
            f"{len(stamps)} timestamps for {len(iterations)} iterations of simpleFoam's log"
        )
    return [
        (i + 1, stamps[i] - stamps[i - 1], iterations[i].cpu - iterations[i - 1].cpu)
        for i in range(1, len(iterations))
    ]


def check_stamps(iterations: list[Iteration], stamps: list[float]) -> None:
    """The arrival times must agree with the solver's own (whole-second) ClockTime.

    A launcher that holds the output back (buffering it, or sending it at the
    end) would make every iteration look instantaneous: a failed point, not a number.
    """
    if len(stamps) != len(iterations) or len(iterations) < 2:
        return
    solver = iterations[-1].clock - iterations[0].clock
    seen = stamps[-1] - stamps[0]
    if abs(solver - seen) > STAMP_TOLERANCE_S + 0.1 * solver:
        raise PointFailed(
            f"the solver's output arrived over {seen:.2f} s but its ClockTime advanced "
            f"{solver:.0f} s: the launcher buffers the output, so iterations cannot be timed"
        )


def step_statistics(
    iterations: list[Iteration], stamps: list[float], warmup_steps: int, writing: list[int]
) -> dict[str, float]:
    """Per-iteration statistics (seconds) of the iterations after the warm-up and the first."""
    measured = [s for s in step_times(iterations, stamps) if s[0] > warmup_steps]
    if not measured:
        raise PointFailed("no measured iteration: steps must exceed warmup_steps + 1")
    wall = [s[1] for s in measured]
    wrote = [s[1] for s in measured if s[0] in writing]
    quiet = [s[1] for s in measured if s[0] not in writing]
    stats = {
        "time_per_step": mean(wall),
        "time_per_step_median": median(wall),
        "time_per_step_min": min(wall),
        "time_per_step_max": max(wall),
        "cpu_time_per_step": mean(s[2] for s in measured),
        "run_time": sum(wall),
        # the master rank's CPU time from its start to its last iteration (ExecutionTime)
        "solver_cpu_time": iterations[-1].cpu,
        "measured_steps": len(measured),
        # v1912's own wall clock over the whole run (whole seconds), against the stamps
        "clock_time_total": iterations[-1].clock,
        "stamped_time_total": stamps[-1] - stamps[0],
    }
    if wrote:
        stats["time_per_step_write"] = mean(wrote)
    if quiet:
        stats["time_per_step_nowrite"] = mean(quiet)
    solves = {i: it.solves for i, it in enumerate(iterations, 1)}
    fitted = write_cost(
        [(wall, step in writing, solves.get(step, {})) for step, wall, _ in measured]
    )
    if fitted is not None:
        stats["write_cost"], stats["write_cost_se"] = fitted
    return stats


def write_cost(steps: list[tuple[float, bool, dict]]) -> tuple[float, float] | None:
    """(cost, standard error) of a write from (step time, wrote, solver iterations) per step.

    Least squares of the step time on a constant, the write flag and the
    iterations of each solved field that adds to what the others say (a field
    that does not vary, or one that moves with another: on one rank the duct's
    Uy and Uz take the same iterations every step); None when the steps cannot
    separate a write from the rest (no step of one kind, too few steps).
    """
    fields = sorted({name for _, _, solves in steps for name in solves})
    columns = [[1.0] * len(steps), [float(wrote) for _, wrote, _ in steps]]
    for name in fields:
        column = [float(solves.get(name, 0)) for _, _, solves in steps]
        if np.linalg.matrix_rank(np.array([*columns, column])) > len(columns):
            columns.append(column)
    x = np.array(columns).T
    y = np.array([wall for wall, _, _ in steps])
    free = len(steps) - x.shape[1]
    if not 0 < x[:, 1].sum() < len(steps) or free < 2 or np.linalg.matrix_rank(x) < x.shape[1]:
        return None
    beta, *_ = np.linalg.lstsq(x, y, rcond=None)
    residual = y - x @ beta
    variance = float(residual @ residual) / free * np.linalg.inv(x.T @ x)[1, 1]
    return float(beta[1]), math.sqrt(max(variance, 0.0))
