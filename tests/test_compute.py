"""A proxy's compute from a target time: the choice of work on synthetic timings."""

from __future__ import annotations

import numpy as np
import pytest
from tierbench import compute

#: a step of simpleFoam at 2 ranks x 25,000 cells here, and a proxy's sweep there:
#: seconds = 0.4 ms + 0.07 ms x sweeps
TARGET, FIXED, PER_UNIT = 0.045, 0.0004, 0.00007


def clock(noise: float, seed: int = 0, fixed: float = FIXED, per_unit: float = PER_UNIT):
    """A timed(n) of seconds = fixed + per_unit x n with relative Gaussian noise; its calls."""
    rng = np.random.default_rng(seed)
    calls = []

    def timed(units: int) -> float:
        calls.append(units)
        return (fixed + per_unit * units) * (1 + noise * rng.standard_normal())

    return timed, calls


def took(units: int, fixed: float = FIXED, per_unit: float = PER_UNIT) -> float:
    return fixed + per_unit * units


def test_a_line_through_exact_timings_gives_the_target_exactly():
    samples = [(n, took(n)) for n in (100, 300, 600)]
    units = compute.work_for(samples, TARGET)
    assert units == round((TARGET - FIXED) / PER_UNIT) == 637
    assert took(units) == pytest.approx(TARGET, rel=0.002)


@pytest.mark.parametrize("seed", range(5))
def test_noisy_timings_reproduce_the_target_within_a_few_percent(seed):
    timed, _ = clock(noise=0.05, seed=seed)
    samples = [(n, timed(n)) for n in (320, 640) * 3]
    units = compute.work_for(samples, TARGET)
    assert took(units) == pytest.approx(TARGET, rel=0.04)


def test_an_interrupted_run_does_not_move_the_choice():
    """A run the scheduler interrupted takes far longer; the median of each amount counts."""
    samples = [(n, took(n)) for n in (300, 600) * 3] + [(600, 10 * took(600))]
    assert took(compute.work_for(samples, TARGET)) == pytest.approx(TARGET, rel=0.01)


def test_a_target_below_the_fixed_cost_asks_for_no_work():
    samples = [(n, took(n)) for n in (10, 20)]
    assert compute.work_for(samples, FIXED / 2) == 0


def test_timings_that_cannot_decide_are_refused():
    with pytest.raises(ValueError, match="two amounts"):
        compute.work_for([(100, 0.01), (100, 0.011)], TARGET)
    with pytest.raises(ValueError, match="does not grow"):
        compute.work_for([(100, 0.02), (200, 0.01)], TARGET)


@pytest.mark.parametrize(
    ("fixed", "per_unit", "target"),
    [(FIXED, PER_UNIT, TARGET), (0.015, 2e-5, 0.2), (0.0, 1e-3, 0.003), (0.0, 1e-8, 0.5)],
)
def test_calibration_finds_the_work_of_the_target_from_its_own_samples(fixed, per_unit, target):
    """The driver: no work, a probe doubling the work, then the guess and its half."""
    timed, calls = clock(noise=0.03, fixed=fixed, per_unit=per_unit)
    units, samples = compute.calibrate(timed, target)
    assert took(units, fixed, per_unit) == pytest.approx(target, rel=0.05)
    assert len(samples) == 3 * compute.REPEATS
    assert calls[0] == 1 and [n for n, _ in samples[: compute.REPEATS]] == [0] * compute.REPEATS
    assert [n for n, _ in samples[compute.REPEATS :]] == calls[-2 * compute.REPEATS :]
    # it costs a few targets' time, not more
    assert sum(took(n, fixed, per_unit) for n in calls) < 10 * target


def test_an_interruption_during_the_probe_does_not_end_it_early():
    """A run of the probe slowed by 30 ms would look like the work of a quarter target."""
    timed, calls = clock(noise=0.0)
    interrupted = set()

    def once_slow(units: int) -> float:
        slow = units == 8 and units not in interrupted
        interrupted.add(units)
        return timed(units) + (0.03 if slow else 0.0)

    units, _ = compute.calibrate(once_slow, TARGET)
    assert took(units) == pytest.approx(TARGET, rel=0.01)
    assert calls[calls.index(8) : calls.index(8) + 3] == [8, 8, 16]  # timed again, went on


def test_interruptions_in_a_row_during_the_probe_do_not_end_it_early():
    """A busy node interrupts runs in a row: the probe's amount is timed as often as no
    work was before the probe ends on it."""
    timed, calls = clock(noise=0.0)
    slow_runs = iter([0.03] * (compute.REPEATS - 1))

    def slow_at_8(units: int) -> float:
        return timed(units) + (next(slow_runs, 0.0) if units == 8 else 0.0)

    units, _ = compute.calibrate(slow_at_8, TARGET)
    assert took(units) == pytest.approx(TARGET, rel=0.01)
    assert calls.count(8) == compute.REPEATS and 16 in calls  # timed until quiet, went on


def test_a_target_below_what_no_work_takes_asks_for_none():
    timed, calls = clock(noise=0.0, fixed=0.05)
    units, samples = compute.calibrate(timed, 0.04)
    assert units == 0 and [n for n, _ in samples] == [0] * compute.REPEATS
    assert calls == [1] + [0] * compute.REPEATS


def test_samples_that_cannot_tell_more_work_from_less_get_another_round():
    """A busy machine: every run of the smaller amount in the first round after the probe
    was interrupted, so that it took longer than the larger amount. A second round leaves
    its median between the two, a third makes it a quiet run's."""
    _, quiet = clock(noise=0.0)
    compute.calibrate(lambda n: quiet.append(n) or took(n), TARGET)
    first_round = range(len(quiet) - 2 * compute.REPEATS, len(quiet))  # half, guess, ...
    calls = []

    def busy_at_first(units: int) -> float:
        calls.append(units)
        at = len(calls) - 1
        garbled = at in first_round and (at - first_round.start) % 2 == 0
        return took(units) + (0.1 if garbled else 0.0)

    units, samples = compute.calibrate(busy_at_first, TARGET)
    # the first round times the half and the guess; the two after it no work too
    assert len(samples) == compute.REPEATS + (2 + 3 + 3) * compute.REPEATS
    assert took(units) == pytest.approx(TARGET, rel=0.01)
    never, calls = clock(noise=0.0, per_unit=-1e-6, fixed=0.01)
    with pytest.raises(ValueError, match="does not grow"):
        compute.calibrate(never, TARGET)
    assert calls.count(0) == compute.MAX_ROUNDS * compute.REPEATS


def test_no_work_timed_in_a_busy_spell_is_timed_again():
    """A busy spell while no work was timed (its runs come first) made no work look slower
    than some work, so that no line through the amounts rose: seen on a loaded 2-core VM."""
    calls, spell = [], [0.03]

    def busy_until_the_rounds(units: int) -> float:
        calls.append(units)
        if units & (units - 1):  # the rounds' amounts; the probe's are powers of two
            spell[0] = 0.0
        return took(units) + spell[0]

    units, _ = compute.calibrate(busy_until_the_rounds, TARGET)
    assert calls.count(0) > compute.REPEATS  # timed again after the first round
    assert took(units) == pytest.approx(TARGET, rel=0.01)


def test_no_target_means_no_work_and_no_timing():
    timed, calls = clock(noise=0.0)
    assert compute.calibrate(timed, 0.0) == (0, [])
    assert calls == []


def test_a_time_parameter_reads_numbers_and_text_alike():
    assert compute.seconds("3.6e-6") == compute.seconds(3.6e-6) == 3.6e-6
    assert compute.seconds(0) == 0.0
    assert compute.seconds(compute.FROM_APPLICATION) is None
