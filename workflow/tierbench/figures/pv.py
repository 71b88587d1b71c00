"""pv: throughput per sink (document 002).

``pv -aSs<size> < /dev/zero > test`` into the void, the disk, a RAM disk, a
RAM-disk folder mounted over a folder (mount --bind) and one mounted with bindfs
(FUSE): every measured repetition, its median, the FUSE sink highlighted, and the
same ratios as the document published them.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from .. import plotting
from ..tiers import LOCAL_DEVICE_CLASSES, RAM_CLASSES
from ..units import format_size, parse_size

#: the document's sinks, by the class of the tier that plays them here
ROLE = {"void": "the void", "fuse": "bindfs, FUSE"}
ROLE.update({c: "RAM disk" for c in RAM_CLASSES})
ROLE.update({c: "disk" for c in LOCAL_DEVICE_CLASSES})
#: the document's sink names (config/reference/002_*.csv) for each role
PUBLISHED_SINK = {
    "the void": "void",
    "disk": "SSD",
    "RAM disk": "RAM disk",
    "bindfs, FUSE": "bindfs",
}
FUSE_COLOR, OTHER_COLOR = "#d55e00", "#0072b2"


def make(
    results: plotting.Table,
    summary: plotting.Table,
    out_dir: str,
    reference_csvs=None,
    study: str | None = None,
    document: str | None = None,
) -> list[Path]:
    """pv_sinks (from results.csv and summary.csv) and pv_vs_document (with the document's rows).

    ``reference_csvs``: a folder, file or list of the published CSVs; ``document``: the one
    the study re-runs (document 002 for ramdisk_macos), whose rows are drawn; without them
    the second figure is left out and the first one's caption says so.
    """
    plotting.setup()
    results = plotting.table(results, study)
    summary = plotting.table(summary, study)
    c = context(results, summary, out_dir)
    c["document"] = document
    published = plotting.load_reference(reference_csvs, document)
    published = published[published["table"] == "pv_throughput"]
    if len(c["rates"]):
        sinks(c, has_reference=len(published) > 0)
        if c["disk"] and len(published):
            versus_document(c, published)
    return plotting.finish(out_dir)


def context(results: pd.DataFrame, summary: pd.DataFrame, out_dir: str) -> dict:
    """What both figures share: the pv rows, the runs, the sizes and which tier plays which sink."""
    pv_summary = summary[summary["workload"] == "pv"]
    pv_ok = plotting.ok_rows(pv_summary)
    rates = pv_ok[pv_ok["metric"] == "throughput"].copy()
    runs = results[
        (results["workload"] == "pv")
        & (results["status"] == "ok")
        & (results["metric"] == "throughput")
    ]
    sizes = (
        sorted({parse_size(s) for s in pv_summary["size"].dropna()}) if "size" in pv_summary else []
    )
    by_tier = rates.set_index("tier")
    classes = by_tier["tier_class"] if len(by_tier) else pd.Series(dtype=str)
    disk_tiers = sorted(t for t in by_tier.index if ROLE.get(classes[t]) == "disk")
    return {
        "summary": summary,
        "pv_summary": pv_summary,
        "pv_ok": pv_ok,
        "rates": rates,
        "by_tier": by_tier,
        "measured": runs[runs["phase"] == "measured"],
        "warmups": runs[runs["phase"] == "warmup"],
        "reps": int(rates["n"].max()) if len(rates) else 0,
        "size_text": " and ".join(f"{format_size(s)} ({s:,} B)" for s in sizes),
        "ceiling": plotting.stream_ceiling(summary),
        "fuse_tiers": sorted(t for t in by_tier.index if classes[t] == "fuse"),
        "disk": disk_tiers[0] if disk_tiers else None,
        "out_dir": out_dir,
    }


def rate(value) -> str:
    if value is None or not np.isfinite(value):
        return ""
    return f"{value / 1000:.2f} GB/s" if value >= 1000 else f"{value:.0f} MB/s"


def color_of(tier_class: str) -> str:
    return FUSE_COLOR if tier_class == "fuse" else OTHER_COLOR


def sinks(c: dict, has_reference: bool) -> None:
    """Every measured repetition per sink, its median and warm-up, slowest sink at the bottom."""
    rates, by_tier, pv_summary = c["rates"], c["by_tier"], c["pv_summary"]
    order = rates.sort_values("median", ascending=True)["tier"].tolist()
    missing = pv_summary[pv_summary["status"] != "ok"].drop_duplicates("tier")
    labels = order + missing["tier"].tolist()
    fig, ax = plt.subplots(figsize=(8.5, 0.75 * len(labels) + 1.8))
    rng = np.random.default_rng(0)
    for y, tier in enumerate(order):
        row = by_tier.loc[tier]
        color = color_of(row["tier_class"])
        values = c["measured"][c["measured"]["tier"] == tier]["value"].to_numpy()
        jitter = y + rng.uniform(-0.15, 0.15, len(values))
        ax.scatter(values, jitter, s=22, color=color, alpha=0.75, zorder=3)
        ax.plot([row["median"]] * 2, [y - 0.32, y + 0.32], color="0.1", linewidth=2.4, zorder=4)
        warm = c["warmups"][c["warmups"]["tier"] == tier]["value"]
        if len(warm):
            ax.scatter(
                warm, [y] * len(warm), s=40, marker="o", facecolors="none", edgecolors="0.35"
            )
        ax.annotate(
            rate(row["median"]),
            xy=(max(row["max"], warm.max() if len(warm) else row["max"]), y),
            xytext=(8, 0),
            textcoords="offset points",
            va="center",
            fontsize=9,
            color=color,
            fontweight="bold" if row["tier_class"] == "fuse" else "normal",
        )
    for y, row in enumerate(missing.itertuples(), start=len(order)):
        ax.annotate(
            f"{row.status}: {row.reason}",
            xy=(0.01, y),
            xycoords=("axes fraction", "data"),
            va="center",
            fontsize=8,
            color="0.3",
            bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.85},
        )
    ticks = [
        f"{t}\n({by_tier.loc[t, 'tier_class']})" if t in by_tier.index else f"{t}\n(no number)"
        for t in labels
    ]
    ax.set_yticks(range(len(labels)), ticks)
    for tick, tier in zip(ax.get_yticklabels(), labels, strict=True):
        if tier in c["fuse_tiers"]:
            tick.set_color(FUSE_COLOR)
            tick.set_fontweight("bold")
    ax.set_ylim(-0.6, len(labels) - 0.4)
    ax.set_xscale("log")
    ax.set_xlabel("pv average rate (MB/s = 1e6 B/s, log scale)")
    handles = [
        Line2D([], [], marker="o", linestyle="", color="0.45", label="measured repetition"),
        Line2D([], [], color="0.1", linewidth=2.4, label="median"),
        Line2D(
            [],
            [],
            marker="o",
            linestyle="",
            markerfacecolor="none",
            markeredgecolor="0.35",
            label="warm-up (not in the median)",
        ),
    ]
    ceiling = c["ceiling"]
    if ceiling is not None:
        ax.axvline(ceiling, color="0.25", linestyle="--", linewidth=1.2, zorder=1)
        handles.append(
            Line2D(
                [],
                [],
                color="0.25",
                linestyle="--",
                label=f"memory ceiling: STREAM copy {rate(ceiling)}",
            )
        )
    ax.set_xlim(right=max(ax.get_xlim()[1], rates["max"].max() * 3))
    plotting.legend_outside(ax, handles, [h.get_label() for h in handles])
    ax.set_title(sinks_title(c, missing))
    plotting.save(
        fig, c["out_dir"], "pv_sinks", "pv throughput per sink (document 002)",
        sinks_caption(c, order, has_reference),
    )  # fmt: skip


def sinks_title(c: dict, missing: pd.DataFrame) -> str:
    fuse_tiers, disk, by_tier = c["fuse_tiers"], c["disk"], c["by_tier"]
    if fuse_tiers and disk:
        ratio = by_tier.loc[fuse_tiers[0], "median"] / by_tier.loc[disk, "median"]
        word = "slower" if ratio < 1 else "faster"
        return f"FUSE ({fuse_tiers[0]}) is {ratio:.2f}x the plain disk ({disk}): {word}"
    if (missing["tier_class"] == "fuse").any():
        return "pv throughput per sink; the FUSE sink has no number (see its row)"
    return "pv throughput per sink"


def sinks_caption(c: dict, order: list[str], has_reference: bool) -> str:
    rates, by_tier, fuse_tiers, ceiling = c["rates"], c["by_tier"], c["fuse_tiers"], c["ceiling"]
    noisy = plotting.noisy_points(rates)["tier"].tolist()
    noisy_text = (
        f" Flagged noisy (min-max spread above the study's threshold): {', '.join(noisy)}."
        if noisy
        else ""
    )
    cross = []
    wall = c["pv_ok"][c["pv_ok"]["metric"] == "wall_throughput"].set_index("tier")["median"]
    for tier in order:
        if tier in wall.index and wall[tier] > 0:
            cross.append(f"{tier} {by_tier.loc[tier, 'median'] / wall[tier]:.2f}")
    if ceiling is not None:
        ceiling_text = (
            f" Dashed line: STREAM copy, {rate(ceiling)} (median), the memory bandwidth a "
            "RAM-backed sink can at best reach; the void only reads /dev/zero, so it may pass it."
        )
    else:
        ceiling_text = " No STREAM measurement in this study, so no memory ceiling is drawn."
    fuse = (", ".join(fuse_tiers) + " (highlighted)") if fuse_tiers else "The FUSE sink"
    reference_text = (
        ""
        if has_reference or not c["disk"]
        else f" {plotting.no_published(c['document'])}, so its comparison is not drawn."
    )
    return (
        f"pv -aSs<size> < /dev/zero > test, {c['size_text']} per run (document 002: 450m = 450 "
        "MiB), into /dev/null (void) or a file in a fresh run folder on each tier, removed after "
        "the run. Writes are buffered, no fsync: pv measures how fast the page cache, or the FUSE "
        "daemon in front of it, accepts the data, not the device; a file below the kernel's "
        "dirty-page limit ends in the page cache on the disk sink too (document 004's cliff shows "
        f"where that stops). Dots: each of the {c['reps']} measured repetitions (pv's own average "
        "rate, printed in binary units and converted to MB/s); bar: their median; hollow circle: "
        f"the warm-up repetition, excluded from the median. {fuse} is a RAM-tier folder mounted "
        "with bindfs for each job; a mount --bind sink is the same kind of folder through the "
        "kernel's bind mount. Cross-check, pv's rate / bytes over our wall-clock time of the pv "
        f"process (start-up included, so small runs read lower): {', '.join(cross)}."
        + ceiling_text
        + noisy_text
        + reference_text
        + plotting.describe_problems(c["pv_summary"])
    )


def versus_document(c: dict, published: pd.DataFrame) -> None:
    """Each sink's median over the disk's, with its range, beside document 002's same ratio."""
    by_tier, disk, fuse_tiers = c["by_tier"], c["disk"], c["fuse_tiers"]
    medians = published.groupby("tier")["canonical_value"].median()
    pub_role = {role: medians.get(sink) for role, sink in PUBLISHED_SINK.items()}
    pub_disk = pub_role["disk"]
    order = c["rates"].sort_values("median", ascending=False)["tier"].tolist()
    ref = by_tier.loc[disk]
    ours = np.array([by_tier.loc[t, "median"] / ref["median"] for t in order])
    # the range: the slowest repetition of a sink over the fastest of the disk, and back
    low = np.array([by_tier.loc[t, "min"] / ref["max"] for t in order])
    high = np.array([by_tier.loc[t, "max"] / ref["min"] for t in order])
    roles = [ROLE.get(by_tier.loc[t, "tier_class"]) for t in order]
    theirs = np.array(
        [pub_role[r] / pub_disk if pub_disk and pub_role.get(r) else np.nan for r in roles]
    )
    fig, ax = plt.subplots(figsize=(1.6 + 1.5 * len(order), 4.6))
    x = np.arange(len(order))
    colors = [color_of(by_tier.loc[t, "tier_class"]) for t in order]
    ax.bar(x, ours, 0.6, color=colors, label=f"this run: median / median of {disk}")
    plotting.whiskers(
        ax, x, ours, low, high, label="this run: slowest to fastest repetition pairing"
    )
    plotting.label_above(ax, x, np.fmax(high, ours), [f"{v:.2f}x" for v in ours])
    ax.scatter(
        x + 0.38,
        theirs,
        marker="D",
        s=46,
        color="0.1",
        zorder=3,
        label="document 002 (MacBook Pro 2012): median / SSD median",
    )
    for xi, value in zip(x + 0.38, theirs, strict=True):
        if np.isfinite(value):
            ax.annotate(
                f"{value:.2f}x",
                xy=(xi, value),
                xytext=(0, 7),
                textcoords="offset points",
                ha="center",
                fontsize=8,
                color="0.1",
            )
    ax.axhline(1, color="0.4", linewidth=1)
    ax.set_yscale("log")
    ax.set_xticks(x, [f"{t}\n({r})" for t, r in zip(order, roles, strict=True)])
    ax.set_ylabel("throughput relative to the disk (log scale)")
    plotting.legend_outside(ax)
    top = np.nanmax(np.concatenate([theirs, ours, high]))
    ax.set_ylim(top=max(ax.get_ylim()[1], top * 4))
    title = "relative to the disk"
    if fuse_tiers and pub_disk and pub_role["bindfs, FUSE"]:
        f = by_tier.loc[fuse_tiers[0], "median"] / ref["median"]
        published_fuse = pub_role["bindfs, FUSE"] / pub_disk
        title = f"FUSE / disk: {f:.2f}x here, {published_fuse:.2f}x in document 002"
    ax.set_title(title)
    caption = (
        f"Median pv rate of each sink divided by the median of the disk sink ({disk}), this run "
        "(whiskers: the slowest repetition of the sink over the fastest of the disk, to the "
        "fastest over the slowest), next to the same ratio from document 002's ten runs per sink "
        "(its SSD as the disk; its RAM disk and RAM disk mounted over a folder both stand for the "
        "RAM tiers, their medians differ by 4%). The hardware differs (document 002: a 2012 "
        "MacBook Pro, HFS+ and macOS's FUSE; this run: Linux, tmpfs and bindfs on libfuse), so "
        f"ratios are compared, not absolute rates. {c['size_text']} per run, buffered (no "
        "fsync), warm-up excluded."
    )
    plotting.save(
        fig,
        c["out_dir"],
        "pv_vs_document",
        "Relative to the disk: this run and document 002",
        caption,
    )
