"""Staging: what copying the case to a node-local tier costs, and after how many steps it pays.

Document 001 staged its case from Lustre to every node's DCPMM (208 s to
fsdax0, 93 s to fsdax1, on 20 nodes) and then gained at every step that
wrote: at write interval 1 on 20 nodes a step took 29.77 s on Lustre and
2.23 s on fsdax. Staging pays once the steps run on the local tier have
gained back the copy. Which reference tables hold those numbers, and on how many
nodes, the study file's ``staging:`` says: no document's tables are named here.

For each point of the ``stage`` workload this module sets its copy time
beside that gain measured in the same study: the shared tier's (the stage
point's source) time per step minus the point's tier's, at write interval 1,
from the points of the workload the case was made for (cfd_proxy or
openfoam) with the same ranks and cells per rank (and file set, for the
proxy), one simulation (ensemble 1), uncollated, not traced (the
single_vs_ensemble experiment of cfd_dcpmm). Then

    break-even steps = staging time / gain per step

Both get a 95% bootstrap interval over the points' repetitions
(:func:`tierbench.intervals.of_medians`). :func:`break_even` decides:

- the gain's interval lies wholly above 0: staging pays after the break-even
  number of steps (an interval, whose upper end is missing when some
  resamples gain nothing);
- it lies wholly at or below 0: staging never pays as measured;
- it includes 0, or there is no interval (one repetition): undecided.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from . import intervals
from .intervals import Interval, Sample
from .tiers import NETWORK_CLASSES
from .units import format_value
from .verdicts import matches

PAYS, NEVER_PAYS, UNDECIDED = "pays", "never_pays", "undecided"
#: what the step points must share with the stage point, beside the case's workload
SHAPE = ("ranks", "cells_per_rank")


@dataclass(frozen=True)
class BreakEven:
    """Staging time against the gain per step: the decision and its numbers."""

    status: str
    #: time per step gained (s): the shared tier's minus the local tier's
    gain: Interval
    #: steps after which staging pays: staging time / gain
    steps: Interval
    text: str


def _gain(medians: np.ndarray) -> np.ndarray:
    """Columns: the shared tier's time per step, the local tier's."""
    return medians[:, 0] - medians[:, 1]


def _steps(medians: np.ndarray) -> np.ndarray:
    """Columns: staging time, the shared tier's time per step, the local tier's. A row
    that gains nothing never pays: inf."""
    gain = medians[:, 1] - medians[:, 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(gain > 0, medians[:, 0] / np.where(gain > 0, gain, 1.0), np.inf)


def _shown(interval: Interval, unit: str) -> str:
    estimate = format_value(interval.estimate, unit)
    if interval.low is None and interval.high is None:
        return f"{estimate} (no interval: {interval.reason})"
    high = "no upper end" if interval.high is None else format_value(interval.high, unit)
    return f"{estimate} [{format_value(interval.low, unit)}, {high}]"


def break_even(stage: Sample, shared: Sample, local: Sample, **options) -> BreakEven:
    """Does staging pay? ``stage``: copy times; ``shared``/``local``: time per step there."""
    gain = intervals.of_medians([shared, local], _gain, **options)
    steps = intervals.of_medians([stage, shared, local], _steps, **options)
    shown = _shown(gain, "s")
    if gain.estimate is None:
        return BreakEven(UNDECIDED, gain, steps, f"undecided: {gain.reason}")
    if gain.low is None or gain.high is None:
        return BreakEven(
            UNDECIDED, gain, steps, f"undecided: the gain per step is {shown}; {gain.reason}"
        )
    if gain.low > 0:
        return BreakEven(
            PAYS,
            gain,
            steps,
            f"staging pays after {_shown(steps, 'steps')}: the tier gains {shown} per step",
        )
    if gain.high <= 0:
        return BreakEven(
            NEVER_PAYS,
            gain,
            steps,
            f"staging never pays as measured: the tier gains {shown} per step",
        )
    return BreakEven(
        UNDECIDED,
        gain,
        steps,
        f"undecided: the gain per step, {shown}, includes 0 (more repetitions would decide it)",
    )


# --- the study's points ------------------------------------------------------------------


def step_rows(ok: pd.DataFrame, stage_row: pd.Series, traced: set[str]) -> pd.DataFrame:
    """time_per_step rows of the case's workload in the stage point's shape, at write
    interval 1, ensemble 1, uncollated and not traced; empty when there are none."""
    workload = str(stage_row.get("case", "cfd_proxy"))
    wanted = {key: stage_row[key] for key in SHAPE}
    if workload == "cfd_proxy":
        wanted["file_set"] = stage_row.get("file_set")
    wanted.update(write_interval=1, ensemble=1)
    rows = ok[(ok["workload"] == workload) & (ok["metric"] == "time_per_step")]
    rows = rows[~rows["experiment"].isin(traced)]
    if "file_handler" in rows.columns:
        rows = rows[rows["file_handler"].astype(str) == "uncollated"]
    for key, value in wanted.items():
        if key not in rows.columns:
            return rows.iloc[0:0]
        rows = rows[matches(rows[key], value)]
    # one experiment's points: the first by name when several have this shape
    first = sorted(rows["experiment"].unique())[:1]
    return rows[rows["experiment"].isin(first)]


def _tier_row(rows: pd.DataFrame, tier: str | None) -> pd.Series | None:
    found = rows[rows["tier"] == tier] if tier else rows.iloc[0:0]
    return found.iloc[0] if len(found) == 1 else None


def published(ref: pd.DataFrame | None, paper: dict | None) -> list[dict]:
    """The document's staging per tier, with the break-even its own numbers give: the
    reference tables and nodes its study file's ``staging:`` names (``paper``: the study's
    lessons.json). Its shared tier is the network one of the steps table; each copy's
    local tier, the one of the copy's class."""
    declared = (paper or {}).get("staging")
    if ref is None or ref.empty or not declared:
        return []
    ref = ref[ref["document"].astype(str) == str(paper["document"])]
    copies = ref[ref["table"] == declared["copy_table"]]
    steps = ref[(ref["table"] == declared["steps_table"]) & (ref["metric"] == "time_per_step")]
    steps = steps[steps["write_interval"].astype(str) == "1"]
    per_class = dict(zip(steps["tier_class"].astype(str), steps["canonical_value"], strict=True))
    shared = next((v for c, v in per_class.items() if c in NETWORK_CLASSES), np.nan)
    found = []
    for row in copies.itertuples():
        time, local = float(row.canonical_value), per_class.get(str(row.tier_class), np.nan)
        gain = None if np.isnan(shared - local) else float(shared - local)
        found.append(
            {
                "tier": row.tier,
                "nodes": declared["nodes"],
                "stage_time": time,
                "gain": gain,
                "steps": time / gain if gain else None,
                "shared": float(shared),
                "local": float(local),
            }
        )
    return found


def _interval(interval: Interval) -> dict:
    return {key: value for key, value in asdict(interval).items() if key != "of"}


def tables(
    summary: pd.DataFrame,
    results: pd.DataFrame | None,
    plan: dict | None,
    ref: pd.DataFrame | None = None,
    paper: dict | None = None,
) -> list[dict]:
    """One table per measured stage point: its copy time, the gain per step and break-even.

    ``plan`` (the study's plan.json) names each stage point's source tier and
    which experiments were traced; ``ref`` the published numbers (read from
    config/reference when None); ``paper`` (the study's lessons.json) the document
    and its staging tables, whose numbers each table shows beside this run's.
    """
    from .verdicts import POINT_METRIC, Runs

    ok = summary[summary["status"] == "ok"]
    stages = ok[(ok["workload"] == "stage") & (ok["metric"] == "stage_time")]
    if stages.empty:
        return []
    if ref is None:
        from . import reference

        ref = reference.load()
    plan = plan or {"points": {}}
    traced = {p["experiment"] for p in plan["points"].values() if p.get("count_syscalls")}
    runs = Runs(results)
    document = published(ref, paper)
    found = []
    for _, row in stages.sort_values(["experiment", "tier", "point"]).iterrows():
        key = "/".join(str(row[c]) for c in ("workload", "experiment", "tier", "point"))
        named = plan["points"].get(key, {}).get("named_tiers", {}).get("source", {})
        source = named.get("tier")
        steps = step_rows(ok, row, traced)
        shared, local = _tier_row(steps, source), _tier_row(steps, row["tier"])

        def metric(name: str, row=row):
            match = ok[
                (ok[POINT_METRIC[:-1]] == row[POINT_METRIC[:-1]]).all(axis=1)
                & (ok["metric"] == name)
            ]
            return float(match["median"].iloc[0]) if len(match) else None

        entry = {
            "experiment": row["experiment"],
            "tier": row["tier"],
            "tier_class": row["tier_class"],
            "point": row["point"],
            "source": source,
            "nodes": metric("nodes"),
            "bytes": metric("stage_bytes"),
            "files": metric("stage_files"),
            "bandwidth": metric("stage_bandwidth"),
            "stage": {
                key: (None if pd.isna(row[key]) else float(row[key]))
                for key in ("median", "min", "max", "ci_low", "ci_high", "rel_spread")
            },
            "n": int(row["n"]),
            "noisy": bool(row.get("noisy", False)),
            "page_cache": str(row.get("page_cache", "") or ""),
            "page_cache_reason": str(row.get("page_cache_reason", "") or ""),
            "steps_experiment": sorted(steps["experiment"].unique())[0] if len(steps) else None,
            "published": document,
        }
        if shared is None or local is None:
            missing = source if shared is None else row["tier"]
            entry.update(
                status=UNDECIDED,
                shared_step=None,
                local_step=None,
                gain=None,
                steps=None,
                text=(
                    f"no time per step to set it against: no write-interval-1 point of "
                    f"{row.get('case', 'cfd_proxy')} with {row['ranks']} ranks x "
                    f"{row['cells_per_rank']} cells per rank on {missing or 'a shared tier'}"
                ),
            )
        else:
            decided = break_even(runs.sample(row), runs.sample(shared), runs.sample(local))
            entry.update(
                status=decided.status,
                shared_step=float(shared["median"]),
                local_step=float(local["median"]),
                gain=_interval(decided.gain),
                steps=_interval(decided.steps),
                text=decided.text,
            )
        found.append(entry)
    return found
