"""A fidelity comparison's inputs: a study's points (one per experiment, tier and
parameters), which proxy point imitates which application point at the same shape, and
the quantities compared (per write, per evaluation, per rank), with their samples.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache

import numpy as np
import pandas as pd

from .. import intervals
from ..intervals import Interval, Sample
from ..matrix import param_text as _norm
from ..schemas import schema_defaults
from ..syscalls import METRIC_PREFIX
from ..workloads import Pair, registry

FAITHFUL, DIFFERS, WITHIN_NOISE = "faithful", "differs", "within noise"
NOT_COMPARED = "not compared"
#: a verdict in a sentence about the proxy
FOUND = {
    FAITHFUL: "was faithful", DIFFERS: "differed", WITHIN_NOISE: "was within noise",
    NOT_COMPARED: "was not compared",
}  # fmt: skip
#: a ratio proxy/real agrees when its interval lies within this band
BAND = intervals.Band("within", low=0.9, high=1.1)
BAND_TEXT = f"{BAND.low}-{BAND.high}"
#: a comparison's decision, in this table's words, from where its interval lies
DECISIONS = {intervals.INSIDE: "agrees", intervals.OUTSIDE: DIFFERS, intervals.ACROSS: WITHIN_NOISE}
#: files or folders per writer and write differing by less than this are the same count
COUNT_TOLERANCE = 0.5


@cache
def pairs() -> tuple[Pair, ...]:
    """Every proxy of the registry with the application it stands for, in name order."""
    return tuple(w.stands_for for w in registry().values() if w.stands_for is not None)


# ------------------------------------------------------------------ points of a study


@dataclass
class Point:
    """One point of the study: its parameters and, per metric, its repetitions."""

    workload: str
    experiment: str
    tier: str
    tier_class: str
    name: str
    params: dict
    #: metric -> its values by repetition, with each run's start time for pairing
    samples: dict[str, Sample]
    traced: bool = False

    def param(self, key: str) -> str:
        return _norm(self.params.get(key))

    def sample(self, metric: str) -> Sample | None:
        return self.samples.get(metric)

    def median(self, metric: str) -> float | None:
        found = self.sample(metric)
        return found.median if found is not None else None

    def estimated(self, metric: str) -> Sample | None:
        """The metric's sample with each run's standard error (``<metric>_se``) where the
        workload gives one: a cost fitted from one run's steps is itself uncertain."""
        found, errors = self.sample(metric), self.sample(f"{metric}_se")
        if found is None or errors is None or errors.repetitions != found.repetitions:
            return found
        return replace(found, errors=errors.values)


def load_points(results: pd.DataFrame, traced_experiments: set[str]) -> list[Point]:
    """Measured, successful values of every point, by repetition."""
    if results.empty:
        return []
    ok = results[(results["status"] == "ok") & (results["phase"] == "measured")].copy()
    if ok.empty:
        return []
    ok["started_s"] = pd.to_datetime(ok["started_at"], utc=True, errors="coerce").map(
        lambda t: t.timestamp() if not pd.isna(t) else float("nan")
    )
    fixed = {"study", "experiment", "workload", "tier", "tier_class", "host", "point"}
    trailing = {"repetition", "phase", "started_at", "duration_s", "slurm_job_id", "metric"}
    trailing |= {"value", "unit", "status", "reason", "started_s"}
    param_columns = [c for c in ok.columns if c not in fixed | trailing]
    points = []
    keys = ["workload", "experiment", "tier", "point"]
    for (workload, experiment, tier, name), rows in ok.groupby(keys, sort=True):
        first = rows.iloc[0]
        values: dict = {}
        for row in rows.itertuples(index=False):
            values.setdefault(row.metric, {})[int(row.repetition)] = float(row.value)
        started = dict(zip(rows["repetition"].astype(int), rows["started_s"], strict=True))
        samples = {
            metric: intervals.sample(list(reps.values()), list(reps), [started[r] for r in reps])
            for metric, reps in values.items()
        }
        params = {c: first[c] for c in param_columns}
        counted_calls = any(m.startswith(METRIC_PREFIX) for m in values)
        traced = experiment in traced_experiments or counted_calls
        names = (workload, experiment, tier, first["tier_class"], name)
        points.append(Point(*names, params, samples, traced))
    return points


# ------------------------------------------------------------------ matching


def _is_baseline(point: Point, pair: Pair) -> bool:
    wanted = pair.baseline.get(point.workload, {})
    return bool(wanted) and all(point.param(k) == _norm(v) for k, v in wanted.items())


def _imitates(point: Point, pair: Pair) -> bool:
    """A proxy point set to imitate the pair's application (a missing value is the default)."""
    if point.workload != pair.proxy:
        return True
    defaults = schema_defaults(pair.proxy)
    return all(
        (point.param(k) or _norm(defaults.get(k))) == _norm(v) for k, v in pair.imitates.items()
    )


def _shape(point: Point, keys: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(point.param(k) for k in keys)


def shape_keys(pair: Pair, points: list[Point]) -> tuple[str, ...]:
    """The pair's shape parameters that both workloads have (a missing one cannot be matched)."""
    have = [
        {k for p in points if p.workload == w for k, v in p.params.items() if _norm(v)}
        for w in (pair.proxy, pair.real)
    ]
    return tuple(k for k in pair.shape if all(k in held for held in have))


def baseline_of(
    point: Point, pair: Pair, points: list[Point], keys: tuple[str, ...]
) -> Point | None:
    """A point's no-output baseline (same workload, tier, shape, tracing), own experiment first."""
    free = set(pair.baseline.get(point.workload, {}))
    same = tuple(k for k in keys if k not in free)
    found = [
        b
        for b in points
        if (b.workload, b.tier, b.traced) == (point.workload, point.tier, point.traced)
        and _is_baseline(b, pair)
        and _shape(b, same) == _shape(point, same)
    ]
    found.sort(key=lambda b: (b.experiment != point.experiment, b.experiment, b.name))
    return found[0] if found else None


@dataclass
class Match:
    proxy: Point
    real: Point
    proxy_base: Point | None
    real_base: Point | None

    @property
    def tier(self) -> str:
        return self.proxy.tier


def matches(pair: Pair, points: list[Point], traced: bool) -> list[Match]:
    """Proxy and real points on the same tier with the same shape, none a baseline."""
    keys = shape_keys(pair, points)
    chosen = [
        p for p in points if p.traced == traced and not _is_baseline(p, pair) and _imitates(p, pair)
    ]
    return [
        Match(p, r, baseline_of(p, pair, points, keys), baseline_of(r, pair, points, keys))
        for p in chosen
        if p.workload == pair.proxy
        for r in chosen
        if r.workload == pair.real and (r.tier, _shape(r, keys)) == (p.tier, _shape(p, keys))
    ]


def shape_text(point: Point, keys: tuple[str, ...]) -> str:
    return ", ".join(f"{k}={point.param(k)}" for k in keys)


# ------------------------------------------------------------------ quantities


def units_of(point: Point, pair: Pair) -> float | None:
    """Writes (CFD: steps // write_interval) or evaluations (FE) of one run of the point."""
    if pair.unit == "write":
        interval, steps = point.param("write_interval"), point.param("steps")
        if not interval or interval == "none" or not steps:
            return None
        return float(int(float(steps)) // int(float(interval)))
    evaluations = point.median("evaluations")
    if evaluations:
        return evaluations
    try:
        return float(point.param("population")) * float(point.param("generations"))
    except ValueError:
        return None


def writers_of(point: Point, pair: Pair) -> float:
    """Who writes at one write: every rank of every member (uncollated), or each member's master."""
    if pair.unit != "write":
        return 1.0
    ensemble = float(point.param("ensemble") or 1)
    if point.param("file_handler") == "collated":
        return ensemble
    return float(point.param("ranks") or 1) * ensemble


def per_unit(point: Point, pair: Pair, metric: str) -> float | None:
    total, units = point.median(metric), units_of(point, pair)
    if total is None or not units:
        return None
    return total / units


def _scaled(found: Sample, factor: float) -> Sample:
    return Sample(tuple(v * factor for v in found.values), found.repetitions, found.started)


def per_unit_sample(point: Point, pair: Pair, metric: str) -> Sample | None:
    """A metric's repetitions divided by the point's units (bytes per write of each run)."""
    found, units = point.sample(metric), units_of(point, pair)
    if found is None or not units:
        return None
    return _scaled(found, 1.0 / units)


def _groups(samples: list[Sample]) -> list[list[int]]:
    """Samples resampled together: those whose repetitions ran back to back (intervals.paired)
    with the first of a group; unlike intervals' groups, not through another member."""
    groups: list[list[int]] = []
    for i, s in enumerate(samples):
        group = next((g for g in groups if intervals.paired(samples[g[0]], s)), None)
        if group is None:
            groups.append(group := [])
        group.append(i)
    return groups


def difference_ratio(a: Sample, b: Sample, c: Sample, d: Sample, *, scale: float = 1.0) -> Interval:
    """(median a - median b) / (median c - median d) x scale, with a bootstrap interval.

    The I/O cost ratio: (proxy with writes - without) / (real with writes -
    without). Resampled as :func:`tierbench.intervals.product` does (seeded,
    paired repetitions together). When a difference is not positive the
    output cost is not measurable at that point and the interval says so.
    """
    samples = [a, b, c, d]
    n = min(s.n for s in samples)
    if n == 0:
        return Interval(None, None, None, 0, reason="a point has no measured repetition")
    top, bottom = a.median - b.median, c.median - d.median
    if top <= 0 or bottom <= 0:
        which = "the proxy's" if top <= 0 else "the real application's"
        reason = f"{which} time with output is not above its baseline's"
        return Interval(None, None, None, n, reason=reason)
    estimate = top / bottom * scale
    if n < intervals.MIN_REPETITIONS:
        reason = "needs at least 2 repetitions of each point"
        return Interval(estimate, None, None, n, reason=reason)
    groups = _groups(samples)
    medians = intervals.resampled_medians(samples, groups)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = (medians[:, 0] - medians[:, 1]) / (medians[:, 2] - medians[:, 3]) * scale
    if np.any(medians[:, 2] - medians[:, 3] <= 0):
        noise = "the real application's output cost is within the noise of its baseline"
        return Interval(estimate, None, None, n, reason=noise)
    tail = (1 - intervals.LEVEL) / 2 * 100
    low, high = np.percentile(ratios, [tail, 100 - tail])
    is_paired = any(len(g) > 1 for g in groups)
    return Interval(estimate, min(low, estimate), max(high, estimate), n, is_paired)


def decide(interval: Interval) -> str:
    """agrees, differs or within noise: where the ratio's interval lies against the band.
    An interval that reaches zero is within noise: some resamples put a cost at or below
    zero (a write below the steps' noise), and a ratio of such a cost says nothing."""
    if _reaches_zero(interval):
        return WITHIN_NOISE
    return DECISIONS[BAND.place(interval)]


def _reaches_zero(interval: Interval) -> bool:
    return interval.known and interval.low <= 0
