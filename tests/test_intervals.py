"""Bootstrap intervals of ratios: exact on constant data, honest on noisy data, seeded."""

import math

import numpy as np
import pytest
from tierbench import intervals
from tierbench.intervals import sample


def test_constant_samples_give_a_zero_width_interval_at_the_exact_ratio():
    found = intervals.ratio(sample([6.0, 6.0, 6.0]), sample([2.0, 2.0, 2.0]))
    assert found.known and found.estimate == found.low == found.high == 3.0


def test_the_estimate_is_the_ratio_of_medians_inside_its_interval():
    found = intervals.ratio(sample([10.0, 12.0, 30.0]), sample([4.0, 5.0, 6.0]))
    assert found.estimate == pytest.approx(12.0 / 5.0)
    assert found.low < found.estimate < found.high


def test_seeded_the_same_data_gives_the_same_interval():
    rng = np.random.default_rng(3)
    a, b = sample(rng.uniform(1, 2, 12)), sample(rng.uniform(2, 3, 12))
    assert intervals.ratio(a, b) == intervals.ratio(a, b)
    # the seed is what makes it repeatable: another seed resamples otherwise
    assert intervals.ratio(a, b, seed=1) != intervals.ratio(a, b, seed=2)


def test_one_repetition_has_no_interval_and_says_why():
    found = intervals.ratio(sample([5.0]), sample([2.0, 2.0]))
    assert found.estimate == 2.5 and not found.known and found.n == 1
    assert found.reason == "needs at least 2 repetitions of each point"


def test_no_repetition_or_a_zero_median_has_no_ratio():
    assert intervals.ratio(sample([]), sample([1.0, 2.0])).estimate is None
    zero = intervals.ratio(sample([1.0, 2.0]), sample([0.0, 0.0]))
    assert zero.estimate is None and "zero" in zero.reason


def test_ratio_of_ratios_is_a_over_b_over_c_over_d():
    a, b, c, d = (sample([v, v]) for v in (8.0, 2.0, 3.0, 1.5))
    found = intervals.ratio_of_ratios(a, b, c, d)
    assert found.estimate == pytest.approx((8 / 2) / (3 / 1.5))
    assert found.low == found.high == pytest.approx(2.0)


def timed(values, reps, starts):
    return sample(values, repetitions=reps, started=starts)


def test_back_to_back_repetitions_are_paired_and_a_shared_drift_cancels():
    """A1 B1 A2 B2 A3 B3 with a drift hitting both alike: paired, the ratio is exact."""
    drift = np.array([1.0, 1.5, 0.7])
    a = timed(2 * drift, [1, 2, 3], [0, 10, 20])
    b = timed(1 * drift, [1, 2, 3], [1, 11, 21])
    assert intervals.paired(a, b)
    found = intervals.ratio(a, b)
    assert found.paired and found.low == pytest.approx(2.0) and found.high == pytest.approx(2.0)


def test_points_run_one_after_the_other_are_resampled_independently():
    drift = np.array([1.0, 1.5, 0.7])
    a = timed(2 * drift, [1, 2, 3], [0, 1, 2])
    b = timed(1 * drift, [1, 2, 3], [10, 11, 12])
    assert not intervals.paired(a, b)
    found = intervals.ratio(a, b)
    assert not found.paired and found.low < 2.0 < found.high


def test_pairing_needs_the_same_repetitions_and_start_times():
    a = timed([1.0, 2.0], [1, 2], [0, 10])
    assert not intervals.paired(a, timed([1.0, 2.0], [1, 3], [1, 11]))
    assert not intervals.paired(a, sample([1.0, 2.0], repetitions=[1, 2]))
    assert not intervals.paired(a, sample([1.0, 2.0]))
    # values are kept in repetition order whatever order they came in
    assert sample([3.0, 1.0], repetitions=[2, 1]).values == (1.0, 3.0)


@pytest.mark.parametrize("n", [5, 10])
def test_coverage_of_a_known_ratio_is_about_95_percent(n):
    """Lognormal noise of 10% on both points, true ratio 2: the interval covers it ~95%."""
    rng = np.random.default_rng(7)
    trials, hits = 200, 0
    for trial in range(trials):
        a = 2.0 * np.exp(rng.normal(0, 0.1, n))
        b = 1.0 * np.exp(rng.normal(0, 0.1, n))
        found = intervals.ratio(sample(a), sample(b), seed=trial, resamples=1000)
        hits += found.low <= 2.0 <= found.high
    assert 0.88 <= hits / trials <= 0.995


def test_coverage_of_a_known_ratio_of_ratios():
    rng = np.random.default_rng(11)
    trials, hits = 150, 0
    for trial in range(trials):
        a, b, c, d = (m * np.exp(rng.normal(0, 0.1, 6)) for m in (4.0, 1.0, 1.0, 1.0))
        found = intervals.ratio_of_ratios(*(sample(x) for x in (a, b, c, d)), seed=trial)
        hits += found.low <= 4.0 <= found.high
    assert 0.88 <= hits / trials <= 0.995


def test_runs_that_each_know_their_value_only_roughly_widen_the_interval():
    """simpleFoam's cost per write at 1 rank on /dev/shm, three runs, each fitted from its
    own steps with a standard error of about 1.5 ms, beside the proxy's. On the bare
    values every proxy run lies above every real one and the interval, [1.13, 38], said
    'differs'; within their errors the two are the same cost."""
    real = intervals.Sample((0.069e-3, 0.657e-3, 1.878e-3))
    proxy = intervals.Sample((2.621e-3, 2.583e-3, 2.121e-3))
    bare = intervals.ratio(proxy, real)
    assert bare.low > 1.1
    real = intervals.Sample(real.values, errors=(1.560e-3, 1.062e-3, 1.537e-3))
    proxy = intervals.Sample(proxy.values, errors=(1.755e-3, 1.950e-3, 2.032e-3))
    within = intervals.ratio(proxy, real)
    assert within.estimate == bare.estimate
    assert within.low < 1.0 < within.high


def test_coverage_with_each_runs_own_error_is_at_least_95_percent():
    """Three runs a point, each an estimate with a standard error as large as half the
    value: the runs' spread alone under-covers; with their errors the interval covers."""
    rng = np.random.default_rng(5)
    trials, bare, within = 200, 0, 0
    for trial in range(trials):
        a = 2.0 + rng.normal(0, 1.0, 3)
        b = 4.0 + rng.normal(0, 2.0, 3)
        found = intervals.ratio(sample(a), sample(b), seed=trial, resamples=1000)
        bare += found.known and found.low <= 0.5 <= found.high
        a_err = intervals.Sample(tuple(a), errors=(1.0,) * 3)
        b_err = intervals.Sample(tuple(b), errors=(2.0,) * 3)
        found = intervals.ratio(a_err, b_err, seed=trial, resamples=1000)
        within += found.known and found.low <= 0.5 <= found.high
    assert bare / trials < 0.93 and within / trials >= 0.95, (bare, within)  # 179, 199


def test_start_times_read_as_seconds_with_or_without_a_zone():
    stamps = ["1970-01-01T00:01:00+00:00", "1970-01-01T00:01:00Z", "1970-01-01T01:01:00+01:00"]
    assert intervals.epoch_seconds(stamps) == [60.0, 60.0, 60.0]
    assert intervals.epoch_seconds(["1970-01-01T00:00:01.5"]) == [1.5]  # no zone: UTC
    assert all(math.isnan(s) for s in intervals.epoch_seconds([None, "", "nan", float("nan")]))
