"""Figures of any workload: each headline metric's median per point and tier, with its range.

The family of a workload that declares no figures of its own (the registry's
default), so a new workload is plotted the moment it runs; a family of its own
can come later.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import seaborn as sns

from .. import plotting
from ..syscalls import METRIC_PREFIX
from ..workloads import registry


def make(summary: plotting.Table, out_dir: str, study: str | None = None) -> list[Path]:
    """One figure per workload of the family: its headline metrics (or every metric) per tier."""
    plotting.setup()
    summary = plotting.table(summary, study)
    for workload in plotting.family_workloads("generic"):
        rows = summary[summary["workload"] == workload]
        if not rows.empty:
            per_workload(workload, rows, out_dir)
    return plotting.finish(out_dir)


def traced_experiments(rows) -> list[str]:
    """Experiments counted under strace (count_syscalls): they have syscalls_ metrics."""
    return sorted(set(rows.loc[rows["metric"].str.startswith(METRIC_PREFIX), "experiment"]))


def per_tier(ax, where, part) -> None:
    """Each tier's median at each point with its min-max range, side by side in the tier's
    colour, so that overlapping ranges stay apart."""
    points = list(dict.fromkeys(where))
    tiers = sorted(set(part["tier"]))
    colours = sns.color_palette(n_colors=len(tiers))
    for j, (tier, colour) in enumerate(zip(tiers, colours, strict=True)):
        mine = part["tier"] == tier
        x = [points.index(w) + 0.15 * (j - (len(tiers) - 1) / 2) for w in where[mine]]
        median = part.loc[mine, "median"]
        spread = [median - part.loc[mine, "min"], part.loc[mine, "max"] - median]
        ax.errorbar(x, median, yerr=spread, fmt="o", color=colour, capsize=3, label=tier)
    ax.set_xticks(range(len(points)), points, rotation=30, fontsize=7)
    ax.set_xlim(-0.5, len(points) - 0.5)
    ax.grid(False, axis="x")


def per_workload(workload: str, rows, out_dir: str) -> None:
    ok = plotting.ok_rows(rows)
    headline = registry()[workload].headline
    traced = traced_experiments(ok) if headline else []
    # a traced run's times mean nothing: its headline is not plotted beside the timed ones
    ok = ok[~ok["experiment"].isin(traced)]
    metrics = [m for m in headline if m in set(ok["metric"])] or sorted(set(ok["metric"]))
    if not metrics:
        return
    fig, axes = plt.subplots(
        1, len(metrics), figsize=(5 * len(metrics), 4), squeeze=False, layout="constrained"
    )
    for ax, name in zip(axes[0], metrics, strict=True):
        part = ok[ok["metric"] == name]
        per_tier(ax, part["experiment"] + "\n" + part["point"], part)
        ax.set_ylabel(f"{name} ({part['unit'].iloc[0]})")
    plotting.legend_outside(axes[0][-1], *axes[0][-1].get_legend_handles_labels(), fontsize=None)
    reps = int(ok["n"].max())
    plotting.save(
        fig,
        out_dir,
        f"{workload}_per_tier",
        f"{workload}: {', '.join(metrics)} per point and tier",
        f"Median of {reps} measured repetitions per point and tier (lines: min to max)."
        + (
            f" Left out, counted under strace (their times mean nothing): {', '.join(traced)}."
            if traced
            else ""
        )
        + plotting.describe_problems(rows),
    )
