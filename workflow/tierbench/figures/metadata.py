"""What each file-system operation costs per tier: the metadata workload's figure.

One panel per point (one folder or a tree, with or without fsync), the phases
along x in the order the loop runs them, the cost per operation on a log axis
(a RAM tier's stat and a network tier's fsync'd create lie 1000x apart), a
marker per tier with its min-max range. Lower is faster.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from .. import plotting
from ..workloads.metadata import CYCLE, NOREPLACE, TREE_PHASES, refuses

#: how a phase reads on an axis
PHASE_LABELS = {name: name.replace("_", "\n") for name in (*CYCLE, *TREE_PHASES)}
COST_SUFFIX = "_cost"


def make(summary: plotting.Table, out_dir: str, study: str | None = None) -> list[Path]:
    plotting.setup()
    summary = plotting.table(summary, study)
    for workload in plotting.family_workloads("metadata"):
        rows = summary[summary["workload"] == workload]
        if not rows.empty:
            cost_per_operation(rows, out_dir)
    return plotting.finish(out_dir)


def point_title(point: str) -> str:
    """``layout=flat+fsync=false`` as a person says it: ``one folder, no fsync``."""
    values = dict(part.split("=", 1) for part in point.split("+") if "=" in part)
    layout = {"flat": "one folder", "tree": "a tree of folders"}.get(values.get("layout", ""), "")
    fsync = {"true": "fsync before close", "false": "no fsync"}.get(
        values.get("fsync", "").lower(), ""
    )
    said = ", ".join(part for part in (layout, fsync) if part)
    return said or point


def refusing_tiers(ok, point: str) -> set[str]:
    """The tiers that refused the rename without replacing at this point: their cost of
    it is the refusal's (mv then looks the name up and renames)."""
    share = ok[(ok["point"] == point) & (ok["metric"] == f"{NOREPLACE}_refused")]
    return set(share[share["median"].map(refuses)]["tier"])


def cost_per_operation(rows, out_dir: str) -> None:
    ok = plotting.ok_rows(rows)
    costs = ok[ok["metric"].str.endswith(COST_SUFFIX)].copy()
    if costs.empty:
        return
    costs["phase"] = costs["metric"].str.removesuffix(COST_SUFFIX)
    points = sorted(set(costs["point"]))
    tiers = sorted(set(costs["tier"]))
    columns = min(2, len(points))
    lines = math.ceil(len(points) / columns)
    fig, axes = plt.subplots(
        lines,
        columns,
        figsize=(6.5 * columns, 3.6 * lines),
        squeeze=False,
        sharey=True,
        layout="constrained",
    )
    palette = dict(zip(tiers, plt.rcParams["axes.prop_cycle"].by_key()["color"], strict=False))
    width = 0.8 / max(1, len(tiers))
    for index, (ax, point) in enumerate(zip(axes.flat, points, strict=False)):
        part = costs[costs["point"] == point]
        phases = [p for p in (*CYCLE, *TREE_PHASES) if p in set(part["phase"])]
        refusing = refusing_tiers(ok, point)
        for i, tier in enumerate(tiers):
            mine = part[part["tier"] == tier].set_index("phase").reindex(phases)
            x = np.arange(len(phases)) + (i - (len(tiers) - 1) / 2) * width
            low = (mine["median"] - mine["min"]).clip(lower=0)
            high = (mine["max"] - mine["median"]).clip(lower=0)
            ax.errorbar(
                x, mine["median"], yerr=[low, high], fmt="o", ms=5, capsize=2,
                color=palette.get(tier), label=tier,
            )  # fmt: skip
            if tier in refusing and NOREPLACE in phases:
                at = phases.index(NOREPLACE)
                ax.annotate(
                    "refused", (x[at], mine["median"].iloc[at]), xytext=(0, 8),
                    textcoords="offset points", ha="center", fontsize=7, color=palette.get(tier),
                )  # fmt: skip
        ax.set_xticks(range(len(phases)), [PHASE_LABELS[p] for p in phases], fontsize=8)
        ax.set_yscale("log")
        ax.set_title(point_title(point), fontsize=10)
        ax.grid(axis="x", visible=False)
        ax.set_ylabel("µs per operation (log)" if index % columns == 0 else "")
    for ax in list(axes.flat)[len(points) :]:
        ax.set_visible(False)
    handles, labels = plotting.unique_handles(axes)
    plotting.legend_outside(axes[0][-1], handles, labels, title="tier")
    reps = int(costs["n"].max())
    plotting.save(
        fig,
        out_dir,
        "metadata_cost_per_operation",
        "What each file-system operation costs, per tier (lower is faster)",
        f"Median time per operation of each phase, {reps} measured repetitions per point and "
        "tier (bars: min to max); log scale. Phases in the order the loop runs them: "
        "folders made, stat'ed, removed; files created (written), stat'ed, read, renamed, "
        "renamed back without replacing (as mv asks; 'refused': the tier refused it, and its "
        "cost is the refusal's), removed; in a tree, its folders made and removed."
        + plotting.describe_problems(rows),
    )
