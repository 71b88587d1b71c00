"""A proxy's compute in physical terms: the work that takes a target time on this node.

A proxy stands for an application only if its compute per step (CFD) or per
evaluation (FE) takes what the application's does: the share of a step that a
write is, and so the tier ratio, follow from that balance. So a proxy is given
a time (``compute_per_cell_step``, ``compute_per_evaluation``), not a count of
its own units of work, and turns it into units on the node it runs on:
:func:`calibrate` times its work at a few amounts and :func:`work_for` picks
the amount whose time is the target. The two are apart so the choice, a pure
function of (units, seconds) samples, can be tested on synthetic timings.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from statistics import median

import numpy as np

#: the parameter value that asks for the application's own time, measured in the job
FROM_APPLICATION = "from_application"
#: timed runs of each of the two amounts the choice rests on (and of no work)
REPEATS = 4
#: the doubling probe stops at this share of the target (or at MAX_PROBE units)
PROBE_SHARE = 0.25
MAX_PROBE = 1 << 24
#: rounds of samples taken at most while they cannot tell more work from less
MAX_ROUNDS = 4


def seconds(value) -> float | None:
    """A time parameter as a number of seconds ("3.6e-6" too); None for from_application."""
    if value == FROM_APPLICATION:
        return None
    return float(value)


def typical(samples: Iterable[tuple[float, float]]) -> dict[float, float]:
    """The median time of each amount of work, by amount. Not the fastest: the run that
    follows takes its typical time (on a shared 2-core VM some steps of the same sweeps ran
    twice as fast as most), and a rare interruption does not move a median."""
    by_units: dict[float, list[float]] = {}
    for units, took in samples:
        by_units.setdefault(float(units), []).append(float(took))
    return {units: median(by_units[units]) for units in sorted(by_units)}


def fit(samples: Iterable[tuple[float, float]]) -> tuple[float, float]:
    """(a, b) of seconds = a + b x units through the median time of each amount of work:
    a is what a step or evaluation costs besides the work, b a unit's cost."""
    times = typical(samples)
    if len(times) < 2:
        raise ValueError("the work must be timed at two amounts at least")
    slope, intercept = np.polyfit(list(times), list(times.values()), 1)
    return float(intercept), float(slope)


def tells_apart(samples: Iterable[tuple[float, float]]) -> bool:
    """Does more work take longer, amount by amount? (Not on a machine too busy to time.)"""
    times = list(typical(samples).values())
    return all(a < b for a, b in zip(times, times[1:], strict=False))


def work_for(samples: Iterable[tuple[float, float]], target: float) -> int:
    """The units of work that take ``target`` seconds, from timed (units, seconds) samples:
    where the line of :func:`fit` meets the target, never below 0 units."""
    samples = list(samples)
    intercept, slope = fit(samples)
    if slope <= 0:
        raise ValueError(f"the time does not grow with the work: {sorted(samples)}")
    return max(0, round((target - intercept) / slope))


def calibrate(
    timed: Callable[[int], float], target: float, repeats: int = REPEATS
) -> tuple[int, list[tuple[int, float]]]:
    """The units whose time is ``target`` s, and the samples taken: ``timed(n)`` runs n units.

    One untimed run first (first touch, clocks), then no work ``repeats`` times:
    what a step or evaluation costs besides the work (a target below that needs
    none). Then amounts doubling from 1 until the work adds a quarter of what
    the target asks of it (timed again, up to as often as no work was, before
    the probe ends on it: interruptions must not end it early), for a first
    guess; then the guess and its half, ``repeats`` times each, alternating,
    and another round, of no work too (up to MAX_ROUNDS), while more work does
    not take longer (a busy machine). The answer lies between or near the amounts timed, where
    a line fits best. It costs six targets' time and the probe's, seven to
    nine in all.
    """
    if target <= 0:
        return 0, []
    timed(1)
    samples = [(0, timed(0)) for _ in range(repeats)]
    fixed = min(took for _, took in samples)
    if fixed >= target:
        return 0, samples
    enough, units = PROBE_SHARE * (target - fixed), 1
    while True:
        added = timed(units) - fixed
        for _ in range(repeats - 1):  # confirmed as often as no work was timed, or it was
            if added < enough:  # an interruption (a busy node interrupts runs in a row)
                break
            added = min(added, timed(units) - fixed)
        if added >= enough or units >= MAX_PROBE:
            break
        units *= 2
    guess = max(1, round(units * (target - fixed) / max(added, 1e-12)))
    amounts = (guess // 2, guess)
    for _ in range(MAX_ROUNDS):
        samples += [(n, timed(n)) for _ in range(repeats) for n in amounts]
        if tells_apart(samples):
            break
        # a busy spell may have held any amount's runs, no work's first of all (they are
        # the first timed): every amount is timed again
        amounts = (0, guess // 2, guess)
    return work_for(samples, target), samples
