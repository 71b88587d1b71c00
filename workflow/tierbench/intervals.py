"""95% intervals for the ratios a verdict rests on, by a seeded bootstrap.

A verdict compares points by a ratio of their medians (disk / shm, or a ratio
of two such ratios). A median of 3 repetitions alone cannot say whether 1.11x
differs from 1.0x, so each ratio gets a percentile-bootstrap interval: the
repetitions of every point are resampled with replacement, the ratio of the
resampled medians is taken many times, and the middle 95% is the interval.

Repetitions are resampled together (the same repetition numbers for every
point of a group) when they are *paired*: two points with the same repetition
numbers whose runs went back to back, repetition by repetition, so a drift of
the machine between repetitions hits both alike. Otherwise each point is
resampled on its own.

A repetition's value may itself be an estimate with a standard error of its
own (a write's cost fitted from the steps of one run): such a sample carries
its ``errors``, and every resample draws each picked value from a normal
around it with that error, so three runs whose costs are each known to
+-1.5 ms cannot decide a ratio their bare values would seem to.

With one repetition of a point there is nothing to resample: the interval is
unknown and says so; with few repetitions it is wide, which is the point. The
percentile bootstrap of a median is known to cover somewhat less than its
nominal 95% when a point has very few repetitions (3 to 5); it is still far
more honest than a bare median, and the band decision treats a wide interval
as undecided rather than guessing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

RESAMPLES = 4000
LEVEL = 0.95
SEED = 0
MIN_REPETITIONS = 2


@dataclass(frozen=True)
class Sample:
    """The measured values of one point: one per repetition.

    ``repetitions`` and ``started`` (start time of each run, seconds) decide
    whether two points are paired; without them a point is resampled alone.
    """

    values: tuple[float, ...]
    repetitions: tuple[int, ...] | None = None
    started: tuple[float, ...] | None = None
    #: each value's own standard error, where a run's value is an estimate (see above)
    errors: tuple[float, ...] | None = None

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def median(self) -> float | None:
        return float(np.median(self.values)) if self.values else None


def epoch_seconds(stamps) -> list[float]:
    """Each ISO 8601 start time (a record's ``started_at``; UTC when it names no zone) in
    seconds since the epoch, NaN where missing or unreadable: the ``started`` of sample."""
    seconds = []
    for stamp in stamps:
        try:
            when = datetime.fromisoformat(str(stamp))
        except ValueError:
            seconds.append(math.nan)
            continue
        seconds.append((when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp())
    return seconds


def sample(values, repetitions=None, started=None) -> Sample:
    """A Sample from any sequences, ordered by repetition number when given."""
    values = [float(v) for v in values]
    if repetitions is None:
        return Sample(tuple(values))
    order = np.argsort(np.asarray(repetitions), kind="stable")
    reps = tuple(int(repetitions[i]) for i in order)
    times = None
    if started is not None and all(np.isfinite(float(started[i])) for i in order):
        times = tuple(float(started[i]) for i in order)
    return Sample(tuple(values[i] for i in order), reps, times)


def per_run(own: Sample, base: Sample) -> Sample | None:
    """Each run of ``own`` divided by the same run's ``base`` (another metric of the same
    jobs): the machine's speed, which drifts from job to job on a shared machine, cancels.
    None: the two do not hold the same runs, or a base is not above zero."""
    same_runs = own.n and own.repetitions is not None and own.repetitions == base.repetitions
    if not same_runs or min(base.values) <= 0:
        return None
    values = tuple(v / b for v, b in zip(own.values, base.values, strict=True))
    return Sample(values, own.repetitions, own.started)


@dataclass(frozen=True)
class Interval:
    """A ratio, its interval, and why the interval is missing when it is."""

    estimate: float | None
    low: float | None
    high: float | None
    #: fewest repetitions of any point in the ratio
    n: int
    paired: bool = False
    reason: str = ""
    #: what the ratio was computed from (the caller's names of its samples)
    of: tuple[str, ...] = ()

    @property
    def known(self) -> bool:
        return self.low is not None and self.high is not None


def paired(first: Sample, second: Sample) -> bool:
    """Whether two points ran back to back, repetition by repetition.

    True when both have the same repetition numbers and start times, and in
    the time order of their runs each repetition of one point sits next to
    the same repetition of the other (A1 B1 A2 B2 ..., or B1 A1 A2 B2 ...).
    """
    if first.repetitions is None or second.repetitions is None:
        return False
    if first.started is None or second.started is None:
        return False
    if first.repetitions != second.repetitions or len(set(first.repetitions)) != first.n:
        return False
    runs = sorted(
        [(t, r) for t, r in zip(first.started, first.repetitions, strict=True)]
        + [(t, r) for t, r in zip(second.started, second.repetitions, strict=True)]
    )
    order = [r for _, r in runs]
    return all(order[i] == order[i + 1] for i in range(0, len(order), 2))


def _groups(samples: list[Sample]) -> list[list[int]]:
    """Indices of samples resampled together: connected by :func:`paired`."""
    parent = list(range(len(samples)))

    def root(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    for i in range(len(samples)):
        for j in range(i + 1, len(samples)):
            if root(i) != root(j) and paired(samples[i], samples[j]):
                parent[root(j)] = root(i)
    groups: dict[int, list[int]] = {}
    for i in range(len(samples)):
        groups.setdefault(root(i), []).append(i)
    return list(groups.values())


def _apply(medians: np.ndarray, powers: np.ndarray) -> np.ndarray:
    """Each row's product of medians ** powers, as numerator / denominator (exact for a/b)."""
    up, down = powers > 0, powers < 0
    numerator = np.prod(medians[:, up] ** powers[up], axis=1)
    return numerator / np.prod(medians[:, down] ** -powers[down], axis=1)


def resampled_medians(
    samples: list[Sample], groups: list[list[int]], seed: int = SEED, resamples: int = RESAMPLES
) -> np.ndarray:
    """Bootstrap medians, a row per resample and a column per sample; the samples of a
    group (paired: they ran back to back) are resampled with the same picks. A sample
    with ``errors`` has each picked value drawn within its own standard error."""
    rng = np.random.default_rng(seed)
    resampled = np.empty((resamples, len(samples)))
    for group in groups:
        size = samples[group[0]].n
        picks = rng.integers(0, size, size=(resamples, size))
        for i in group:
            values = np.asarray(samples[i].values)[picks]
            if samples[i].errors is not None:
                spread = np.asarray(samples[i].errors)[picks]
                values = values + spread * rng.standard_normal(picks.shape)
            resampled[:, i] = np.median(values, axis=1)
    return resampled


def product(
    terms: list[tuple[Sample, int]],
    *,
    seed: int = SEED,
    level: float = LEVEL,
    resamples: int = RESAMPLES,
) -> Interval:
    """Interval of prod(median(sample) ** power): a ratio is [(a, 1), (b, -1)]."""
    samples = [s for s, _ in terms]
    powers = np.array([p for _, p in terms], dtype=float)
    n = min(s.n for s in samples)
    if n == 0:
        return Interval(None, None, None, 0, reason="a point has no measured repetition")
    medians = np.array([s.median for s in samples])
    with np.errstate(divide="ignore", invalid="ignore"):
        estimate = float(_apply(medians[np.newaxis, :], powers)[0])
    if not np.isfinite(estimate) or estimate <= 0:
        return Interval(None, None, None, n, reason="a median is zero or negative")
    if n < MIN_REPETITIONS:
        return Interval(
            estimate, None, None, n, reason="needs at least 2 repetitions of each point"
        )
    groups = _groups(samples)
    resampled = resampled_medians(samples, groups, seed, resamples)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = _apply(resampled, powers)
    if not np.all(np.isfinite(ratios)):
        return Interval(estimate, None, None, n, reason="a resampled median is zero")
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(ratios, [tail, 100 - tail])
    is_paired = any(len(g) > 1 for g in groups)
    # the estimate lies inside its interval even when resampling is lopsided
    return Interval(estimate, min(float(low), estimate), max(float(high), estimate), n, is_paired)


def ratio(numerator: Sample, denominator: Sample, **options) -> Interval:
    """median(numerator) / median(denominator) with its interval."""
    return product([(numerator, 1), (denominator, -1)], **options)


def ratio_of_ratios(a: Sample, b: Sample, c: Sample, d: Sample, **options) -> Interval:
    """(a / b) / (c / d), e.g. how much more an ensemble slows the slow tier than the fast."""
    return product([(a, 1), (b, -1), (c, -1), (d, 1)], **options)


def of_medians(
    samples: list[Sample],
    function,
    *,
    seed: int = SEED,
    level: float = LEVEL,
    resamples: int = RESAMPLES,
) -> Interval:
    """Interval of any ``function`` of the samples' medians, e.g. a difference.

    ``function`` takes an array of medians, one row per resample and a column
    per sample, and returns one value per row; a row it cannot give a number
    for may be ``inf`` (a percentile that lands there is not finite, and the
    interval then lacks that end). Resampled as :func:`product` resamples;
    unlike a ratio's, the value may be zero or negative.
    """
    n = min(s.n for s in samples)
    if n == 0:
        return Interval(None, None, None, 0, reason="a point has no measured repetition")
    medians = np.array([[s.median for s in samples]])
    estimate = float(function(medians)[0])
    if n < MIN_REPETITIONS:
        return Interval(
            estimate, None, None, n, reason="needs at least 2 repetitions of each point"
        )
    groups = _groups(samples)
    resampled = resampled_medians(samples, groups, seed, resamples)
    values = np.asarray(function(resampled), dtype=float)
    tail = (1 - level) / 2 * 100
    # linear between resamples as product's; the nearest resample where some are inf
    method = "linear" if np.all(np.isfinite(values)) else "nearest"
    low, high = np.percentile(values, [tail, 100 - tail], method=method)
    is_paired = any(len(g) > 1 for g in groups)
    ends = [float(v) if np.isfinite(v) else None for v in (low, high)]
    if ends[0] is not None and np.isfinite(estimate):
        ends[0] = min(ends[0], estimate)
    if ends[1] is not None and np.isfinite(estimate):
        ends[1] = max(ends[1], estimate)
    reason = "" if None not in ends else "an end of the interval is not finite"
    return Interval(estimate, ends[0], ends[1], n, is_paired, reason)


#: where an interval lies against a band: wholly inside, wholly outside, or across an edge
INSIDE, OUTSIDE, ACROSS = "inside", "outside", "across"


@dataclass(frozen=True)
class Band:
    """The values a ratio is claimed to take: above, below or between thresholds.

    One band for every claim about a ratio (a lesson's, a proxy's fidelity),
    so that an interval is placed against it the same way everywhere.
    """

    kind: str  # "greater" | "less" | "within"
    threshold: float | None = None
    low: float | None = None
    high: float | None = None

    def __str__(self) -> str:
        if self.kind == "greater":
            return f"above {self.threshold:g}x"
        if self.kind == "less":
            return f"below {self.threshold:g}x"
        return f"within {self.low:g}-{self.high:g}x"

    def repetitions_to_decide(self, interval: Interval) -> float | None:
        """About how many repetitions a point would place an interval that reaches across
        an edge wholly on one side of it: its half-width (on a log scale) shrinks as one over
        the square root of the repetitions, and must come under the estimate's distance to
        the nearest edge. None where the interval or the estimate is not known; infinity
        where the estimate sits on an edge (no number of repetitions decides it)."""
        if not interval.known or not interval.estimate or interval.low <= 0 or interval.n < 2:
            return None
        edges = [self.threshold] if self.kind in ("greater", "less") else [self.low, self.high]
        reach = min(abs(math.log(interval.estimate / edge)) for edge in edges)
        half = math.log(interval.high / interval.low) / 2
        if reach == 0:
            return math.inf
        return interval.n * (half / reach) ** 2

    def place(self, interval: Interval) -> str:
        """INSIDE or OUTSIDE when the whole interval lies there; ACROSS when it reaches over an
        edge, or is unknown (then nothing is known of where the ratio lies)."""
        if not interval.known:
            return ACROSS
        low, high = interval.low, interval.high
        if self.kind == "greater":
            inside, outside = low > self.threshold, high <= self.threshold
        elif self.kind == "less":
            inside, outside = high < self.threshold, low >= self.threshold
        elif self.kind == "within":
            inside = self.low <= low and high <= self.high
            outside = high < self.low or low > self.high
        else:
            raise ValueError(f"unknown band kind {self.kind!r}")
        return INSIDE if inside else OUTSIDE if outside else ACROSS
