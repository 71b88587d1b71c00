"""The report's first screen: per experiment, the tiers ranked by what each buys a job.

For every workload the registry gives headline metrics (a job's wall time, a
time per step, a bandwidth). For each point of the workload measured on two or
more tiers, a tier's *speedup* is how much faster it did the point's work than
the slowest tier of that point (times: slow / fast; rates: fast / slow). A
tier's speedup for the workload is the geometric mean over the points it ran,
and its 95% interval comes from a seeded bootstrap that resamples every
point's measured repetitions at once. The sentence that goes with it says
only what the interval decides: "no measurable difference" when it holds 1.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from .records import OK

BOOTSTRAP = 2000
SEED = 0
#: units of a time (lower is better); anything else is a rate (higher is better)
TIME_UNITS = {"s", "ms", "us", "ns", "min", "h"}
#: a speedup whose interval lies wholly above this buys a job something worth moving for
WORTH_IT = 1.1


@dataclass
class TierSpeedup:
    tier: str
    tier_class: str
    speedup: float
    low: float
    high: float
    points: int


@dataclass
class Answer:
    workload: str
    family: str
    experiment: str
    summary: str
    metric: str
    unit: str
    slowest: str
    tiers: list[TierSpeedup]
    sentence: str

    def as_dict(self) -> dict:
        return asdict(self)


def lower_is_better(unit: str) -> bool:
    return unit in TIME_UNITS


def headline_rows(measured: pd.DataFrame, headline: tuple[str, ...]) -> pd.DataFrame:
    """Per point, the rows of the first headline metric it measured."""
    keep = []
    for _, rows in measured.groupby(["experiment", "point"], sort=True):
        for metric in headline:
            chosen = rows[rows["metric"] == metric]
            if not chosen.empty:
                keep.append(chosen)
                break
    return pd.concat(keep) if keep else measured.iloc[0:0]


def _resampled_medians(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """BOOTSTRAP medians of ``values`` resampled with replacement (the median itself first)."""
    picks = rng.integers(0, len(values), size=(BOOTSTRAP, len(values)))
    return np.concatenate([[np.median(values)], np.median(values[picks], axis=1)])


def rank_tiers(rows: pd.DataFrame) -> tuple[str, list[TierSpeedup]]:
    """The slowest tier and each tier's geometric-mean speedup over it, with its interval.

    ``rows``: measured repetitions of one headline metric (one unit), columns
    experiment, point, tier, tier_class, value. The slowest tier is the one
    with the lowest geometric-mean speed over the points; every tier is then
    compared with it on the points both ran, so it stands at exactly 1.
    """
    rng = np.random.default_rng(SEED)
    lower = lower_is_better(str(rows["unit"].iloc[0]))
    classes = dict(zip(rows["tier"], rows["tier_class"], strict=False))
    points = []
    for _, point in rows.groupby(["experiment", "point", "metric"], sort=True):
        by_tier = {t: g["value"].to_numpy(float) for t, g in point.groupby("tier")}
        if len(by_tier) >= 2:
            points.append({t: _resampled_medians(v, rng) for t, v in by_tier.items()})
    if not points:
        return "", []
    # speed on a log scale, higher is faster; a tier's mean over its points ranks it
    speed = [{t: (-1 if lower else 1) * np.log(m) for t, m in p.items()} for p in points]
    score = {t: np.mean([s[t][0] for s in speed if t in s]) for t in classes}
    slowest = min(score, key=score.get)
    ranked = []
    for tier in classes:
        gains = [s[tier] - s[slowest] for s in speed if tier in s and slowest in s]
        if not gains:
            continue
        mean = np.mean(gains, axis=0)  # geometric mean over points, per bootstrap sample
        low, high = np.exp(np.percentile(mean[1:], [2.5, 97.5]))
        ranked.append(
            TierSpeedup(
                tier, classes[tier], float(np.exp(mean[0])), float(low), float(high), len(gains)
            )
        )
    ranked.sort(key=lambda t: -t.speedup)
    return slowest, ranked


def sentence(slowest: str, tiers: list[TierSpeedup]) -> str:
    """What the ranking means for a job like this, saying only what the intervals decide."""
    best = tiers[0]
    if best.tier == slowest or len(tiers) < 2:
        return f"No tier did this work faster than {slowest}."
    interval = f"{best.speedup:.2f}x [{best.low:.2f}, {best.high:.2f}]"
    if best.low <= 1.0:
        return (
            f"{best.tier} vs {slowest}: {interval}, no measurable difference: a job like this "
            "gains nothing it can count on from the faster tier here."
        )
    if best.low >= WORTH_IT:
        return f"{best.tier} does this work {interval} as fast as {slowest}: worth moving to."
    if best.high < WORTH_IT:
        return (
            f"{best.tier} beats {slowest} by {interval}: measurable, but less than "
            f"{WORTH_IT:.1f}x, so a job like this gains little by moving."
        )
    return (
        f"{best.tier} beats {slowest} by {interval}: faster for sure, by how much the "
        "repetitions cannot yet say (more repetitions would narrow it)."
    )


def answers(
    results: pd.DataFrame,
    workloads: dict,
    descriptions: dict | None = None,
    untimed: set[str] = frozenset(),
) -> list[Answer]:
    """One answer per experiment whose headline metric was measured on two or more tiers.

    ``workloads``: name -> registry entry (``summary``, ``family``, ``headline``);
    ``descriptions``: experiment -> what it does, shown instead of the name;
    ``untimed``: experiments whose times mean nothing (traced under strace).
    """
    measured = results[(results["status"] == OK) & (results["phase"] == "measured")]
    found = []
    for (name, experiment), rows in measured.groupby(["workload", "experiment"], sort=False):
        entry = workloads.get(name)
        if entry is None or not entry.headline or experiment in untimed:
            continue
        rows = headline_rows(rows, entry.headline)
        if rows.empty:
            continue
        rows = rows[rows["unit"] == rows["unit"].iloc[0]]
        slowest, tiers = rank_tiers(rows)
        if not tiers:
            continue
        found.append(
            Answer(
                workload=name,
                family=entry.family,
                experiment=experiment,
                summary=(descriptions or {}).get(experiment) or entry.summary,
                metric=", ".join(sorted(set(rows["metric"]))),
                unit=str(rows["unit"].iloc[0]),
                slowest=slowest,
                tiers=tiers,
                sentence=sentence(slowest, tiers),
            )
        )
    return sorted(found, key=lambda a: (a.family, a.workload))
