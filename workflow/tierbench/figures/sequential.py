"""Sequential throughput and the memory ceiling (documents 003 and 004).

dd from /dev/zero per tier, STREAM's memory bandwidth as the ceiling a
RAM-backed tier can reach, and the page-cache cliff: throughput vs file size.
"""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from .. import plotting
from ..units import format_size, parse_size

SYNC = {"buffered": "buffered", "fdatasync": "conv=fdatasync"}
SYNC_TEXT = (
    "Buffered is dd's plain invocation: it ends when the data is in the page cache, dirty pages "
    "may still wait for writeback. conv=fdatasync: dd's time includes flushing the file to the "
    "device."
)
WARMUP_TEXT = (
    "Bars: median of {reps} measured repetitions, whiskers min to max; hollow circles: the "
    "warm-up repetition (the first run of the point, e.g. a write into fresh tmpfs pages), not in "
    "the median."
)
KERNELS = ["copy", "scale", "add", "triad"]
LIMITS = (
    ("dirty_background", "dirty background", "tab:olive"),
    ("dirty_limit", "dirty limit", "tab:red"),
    ("ram", "RAM", "0.1"),
)
RELATIVE_TEXT = {
    "dirty_limit": "the dirty-page limit",
    "ram": "RAM (MemTotal)",
    "dirty_background": "the background writeback threshold",
}


def make(summary: plotting.Table, out_dir: str, study: str | None = None) -> list[Path]:
    """stream_kernels, dd_tiers_* / dd_block_sizes_* and cliff_* from a study's summary.csv."""
    plotting.setup()
    summary = plotting.table(summary, study)
    ours = summary[summary["workload"].isin(["dd", "stream"])].copy()
    ok = plotting.ok_rows(ours)
    context = {
        "ours": ours,
        "ok": ok,
        "reps": int(ok["n"].max()) if len(ok) else 0,
        "ceiling": plotting.stream_ceiling(summary),
        "out_dir": out_dir,
    }
    tiers = sorted(t for t in summary["tier"].unique() if t != "void")
    context["colors"] = dict(
        zip(tiers, sns.color_palette("colorblind", max(len(tiers), 3)), strict=False)
    )
    stream_kernels(context)
    dd_tiers(context)
    cliffs(context)
    return plotting.finish(out_dir)


def size_text(n_bytes) -> str:
    """Exact sizes as written (2000 MiB, 10 GiB); format_size rounds 2000 MiB to 2 GiB."""
    n_bytes = int(n_bytes)
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n_bytes >= scale and n_bytes % scale == 0:
            return f"{n_bytes // scale} {unit}"
    return format_size(n_bytes)


def rate(value) -> str:
    if value is None or not np.isfinite(value):
        return ""
    return f"{value / 1000:.1f} GB/s" if value >= 1000 else f"{value:.0f} MB/s"


def count_blocks(value) -> int:
    return parse_size(int(value) if isinstance(value, float) else value)


def has(frame: pd.DataFrame, column: str) -> bool:
    return column in frame.columns and frame[column].notna().any()


def ceiling_text(ceiling) -> str:
    if ceiling is None:
        return " No STREAM measurement in this study, so no memory ceiling is drawn."
    return (
        f" Dashed line: STREAM {plotting.CEILING_KERNEL} best rate, {rate(ceiling)} "
        "(median of the measured repetitions), the most a RAM-backed tier can reach."
    )


def noisy_text(frame: pd.DataFrame) -> str:
    noisy = plotting.noisy_points(frame)
    if noisy.empty:
        return ""
    items = sorted({f"{r.tier} {r.point}" for r in noisy.itertuples()})
    return (
        f" Flagged noisy (min-max spread above the study's threshold): {'; '.join(items)}; "
        "this machine is shared and its timings vary by tens of percent."
    )


def grouped_bars(ax, frame, hue, x_order, hue_order, colors, x="tier") -> None:
    """Bars of medians with min-max whiskers and the warm-up as a hollow circle."""
    width = 0.8 / max(len(hue_order), 1)
    for i, level in enumerate(hue_order):
        part = frame[frame[hue] == level].set_index(x).reindex(x_order)
        pos = np.arange(len(x_order)) + (i - (len(hue_order) - 1) / 2) * width
        ax.bar(pos, part["median"], width * 0.95, label=str(level), color=colors[i])
        ax.errorbar(
            pos,
            part["median"],
            yerr=plotting.span(part["median"], part["min"], part["max"]),
            fmt="none",
            ecolor="0.2",
            elinewidth=1,
            capsize=3,
        )
        ax.scatter(
            pos,
            part["warmup"],
            marker="o",
            s=28,
            facecolors="none",
            edgecolors="0.1",
            zorder=3,
            label="warm-up (not in median)" if i == len(hue_order) - 1 else None,
        )
        tops = np.fmax.reduce([part["median"], part["max"], part["warmup"]])
        plotting.label_above(ax, pos, tops, [rate(v) for v in part["median"]], fontsize=7)
    ax.set_xticks(np.arange(len(x_order)), x_order)


def stream_kernels(c: dict) -> None:
    """STREAM's four kernels per thread count: the memory ceiling (document 003)."""
    ok, ours = c["ok"], c["ours"]
    stream = ok[(ok["workload"] == "stream") & ok["metric"].str.endswith("_bandwidth")].copy()
    if stream.empty:
        return
    stream["kernel"] = stream["metric"].str.replace("_bandwidth", "")
    stream["threads"] = stream["threads"].astype(int)
    threads = sorted(stream["threads"].unique())
    ntimes = (
        ", ".join(sorted({str(int(n)) for n in stream["ntimes"].fillna(10)}))
        if "ntimes" in stream
        else "10"
    )
    stream["OpenMP threads"] = stream["threads"].map(lambda t: f"{t} threads")
    fig, ax = plt.subplots(figsize=(7, 4.2))
    grouped_bars(
        ax,
        stream,
        "OpenMP threads",
        KERNELS,
        [f"{t} threads" for t in threads],
        sns.color_palette("colorblind", len(threads)),
        x="kernel",
    )
    ax.set_ylabel("best rate (MB/s)")
    ax.set_xlabel("STREAM kernel")
    ax.set_ylim(bottom=0)
    plotting.legend_outside(ax)
    triad = stream[stream["kernel"] == "triad"]["median"].max()
    ax.set_title(f"memory bandwidth: triad {rate(triad)}")
    is_stream = ok["workload"] == "stream"
    elements = ok[is_stream & (ok["metric"] == "array_bytes")]["median"]
    llc = ok[is_stream & (ok["metric"] == "llc_total_bytes")]["median"]
    arrays = ", ".join(sorted({format_size(v) for v in elements}))
    caption = (
        f"STREAM copy, scale, add and triad (gcc -O3 -fopenmp, OMP_NUM_THREADS "
        f"{', '.join(map(str, threads))}), arrays of {arrays} each "
        f"({', '.join(sorted({format_size(v) for v in llc}))} of last-level cache, "
        f"{array_rule(elements, llc)}). Bytes counted as STREAM does: 2 arrays for copy and scale, "
        "3 for add and triad, 8 B per element; MB/s = 1e6 B/s. Each run reports the best of its "
        f"{ntimes} iterations after the first (as STREAM does). "
        + WARMUP_TEXT.format(reps=c["reps"])
        + noisy_text(ok[is_stream])
        + plotting.describe_problems(ours[ours["workload"] == "stream"])
    )
    plotting.save(
        fig, c["out_dir"], "stream_kernels", "STREAM memory bandwidth per kernel", caption
    )


def array_rule(arrays: pd.Series, llc: pd.Series) -> str:
    """How the arrays stand to STREAM's rule (each at least 4x the cache), from the runs'
    medians: the run caps them where the rule would take too long or too much memory."""
    factor = arrays.min() / llc.max() if len(arrays) and len(llc) and llc.max() else 4
    if factor >= 4:
        return "arrays at least 4x that"
    return (
        f"arrays capped at {factor:.2g}x that, below STREAM's 4x, to keep a run within "
        "seconds or within the job's memory: each record says why"
    )


def dd_tiers(c: dict) -> None:
    """dd write per tier (and block size) against the memory ceiling, one figure per experiment."""
    ok = c["ok"]
    dd = ok[(ok["workload"] == "dd") & (ok["metric"] == "write_bandwidth")].copy()
    fixed = dd[dd["count"].notna()] if "count" in dd.columns else dd.iloc[0:0]
    for experiment, part in fixed.groupby("experiment", sort=True):
        dd_experiment(c, experiment, part.copy())


def dd_experiment(c: dict, experiment: str, part: pd.DataFrame) -> None:
    ok, ours, ceiling = c["ok"], c["ours"], c["ceiling"]
    part["blocks"] = part["count"].map(count_blocks)
    part["file"] = [
        parse_size(b) * n for b, n in zip(part["block_size"], part["blocks"], strict=True)
    ]
    part["dd"] = [
        f"bs={b} count={n if isinstance(n, str) else int(n)} ({size_text(f)})"
        for b, n, f in zip(part["block_size"], part["count"], part["file"], strict=True)
    ]
    labels = sorted(part["dd"].unique(), key=lambda s: part.loc[part["dd"] == s, "file"].iloc[0])
    syncs = [s for s in SYNC if s in set(part["sync"])]
    first = part[part["sync"] == syncs[0]]
    order = first.groupby("tier")["median"].median().sort_values().index.tolist()
    order += sorted(set(part["tier"]) - set(order))
    if len(labels) == 1:
        # one invocation (document 003): one panel, buffered vs fdatasync side by side
        part["mode"] = part["sync"].map(SYNC)
        fig, axes = plt.subplots(1, 1, figsize=(3.0 + 1.9 * len(order), 5.0), squeeze=False)
        colors = sns.color_palette("colorblind", len(syncs))
        grouped_bars(axes[0][0], part, "mode", order, [SYNC[s] for s in syncs], colors)
        panels = [(axes[0][0], labels[0])]
    else:
        # several block sizes (document 004): one panel per sync mode
        fig, axes = plt.subplots(
            1,
            len(syncs),
            figsize=(1.5 + 2.6 * len(order) * len(syncs), 5.0),
            sharey=True,
            squeeze=False,
        )
        panels = []
        for ax, sync in zip(axes[0], syncs, strict=True):
            sub = part[part["sync"] == sync]
            colors = sns.color_palette("colorblind", len(labels))
            grouped_bars(ax, sub, "dd", order, labels, colors)
            panels.append((ax, SYNC[sync]))
    for ax, title in panels:
        ax.set_yscale("log")
        plotting.draw_ceiling(ax, ceiling)
        ax.set_xlabel("tier")
        ax.set_title(title, fontsize=10)
    handles, names = axes[0][0].get_legend_handles_labels()
    # the largest file of the first sync mode (buffered, the documents' plain dd) gives the headline
    largest = part[(part["dd"] == labels[-1]) & (part["sync"] == syncs[0])]
    largest = largest.set_index("tier")["median"].sort_values()
    if len(largest) > 1:
        headline = (
            f"{largest.index[-1]} writes {largest.iloc[-1] / largest.iloc[0]:.1f}x as fast as "
            f"{largest.index[0]} ({labels[-1]}, {SYNC[syncs[0]]})"
        )
    else:
        headline = f"{labels[-1]}: {largest.index[0]} {rate(largest.iloc[0])}"
    if ceiling is not None:
        headline += f"\nmemory ceiling (STREAM {plotting.CEILING_KERNEL}) {rate(ceiling)}"
    fig.suptitle(headline, fontsize=11)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    plotting.legend_below(fig, handles, names, ncol=len(names))
    invocations = " and ".join(label.split(" (")[0] for label in labels)
    files = " and ".join(size_text(f) for f in sorted(set(part["file"])))
    caption = (
        f"dd if=/dev/zero of=random.img {invocations} ({files} per file), one file per run "
        "in a fresh run folder on each tier; the tier's file system is synced before each run. "
        f"{SYNC_TEXT} Throughput = bytes / dd's own elapsed seconds, MB/s = 1e6 B/s. "
        + WARMUP_TEXT.format(reps=c["reps"])
        + ceiling_text(ceiling)
        + noisy_text(ok[ok["experiment"] == experiment])
        + plotting.describe_problems(ours[ours["experiment"] == experiment])
    )
    if len(labels) == 1:
        name, title = "dd_tiers", "dd write: disk vs tmpfs vs the memory ceiling"
    else:
        name, title = "dd_block_sizes", "dd write throughput per tier and block size"
    plotting.save(fig, c["out_dir"], f"{name}_{experiment}", title, caption)


def point_medians(frame: pd.DataFrame, metric: str) -> pd.Series:
    rows = frame[frame["metric"] == metric]
    return rows.set_index(["tier", "sync", "point"])["median"]


def cliffs(c: dict) -> None:
    """The page-cache cliff: write throughput vs file size, one figure per experiment."""
    ok = c["ok"]
    if not has(ok, "file_fraction"):
        return
    relative = ok[(ok["workload"] == "dd") & ok["file_fraction"].notna()]
    for experiment, rows in relative.groupby("experiment", sort=True):
        cliff(c, experiment, rows)


def cliff_curve(rows: pd.DataFrame) -> pd.DataFrame:
    """Median throughput per (tier, sync, point) with its range, against the bytes written."""
    curve = rows[rows["metric"] == "write_bandwidth"].set_index(["tier", "sync", "point"])
    curve = curve[["median", "min", "max", "warmup", "file_fraction", "relative_to"]].copy()
    curve["bytes"] = point_medians(rows, "bytes")
    return curve.reset_index().sort_values("bytes")


def find_drops(ax, curve: pd.DataFrame) -> list[str]:
    """Tiers whose buffered writes drop for good, annotated on ``ax``.

    A drop: from some size on, every larger file writes at under half the speed of the two
    smallest ones, with min-max ranges apart (on a noisy machine a single slow run is no cliff).
    """
    drops = []
    for tier, line in curve[curve["sync"] == "buffered"].groupby("tier"):
        line = line.sort_values("bytes").reset_index(drop=True)
        small = line.iloc[:2]
        plateau, floor = small["median"].median(), small["min"].min()
        slow = (line["max"] < 0.5 * plateau) & (line["max"] < floor)
        after = [i for i in range(2, len(line)) if slow.iloc[i:].all()]
        if after:
            at = line.iloc[after[0]]
            drops.append(f"{tier} at {format_size(at['bytes'])}")
            ax.annotate(
                f"{tier}: drop",
                xy=(at["bytes"], at["median"]),
                xytext=(0, -28),
                textcoords="offset points",
                ha="center",
                fontsize=8,
                arrowprops={"arrowstyle": "->", "color": "0.3"},
            )
    return drops


def skipped_text(skipped: pd.DataFrame, relative_to: str) -> str:
    if skipped.empty:
        return ""
    bounds = r"is above the sweep cap [^;]+|is above the tier's max_bytes[^;]+|does not fit [^;]+"
    why = sorted({m for r in skipped["reason"].astype(str) for m in re.findall(bounds, r)})
    why = why or sorted(set(skipped["reason"].astype(str)))
    fractions = sorted({float(f) for f in skipped["file_fraction"]})
    return (
        f" Not run (recorded as skipped): file_fraction {', '.join(f'{f:g}' for f in fractions)} "
        f"of {relative_to.replace('_', ' ')}, because the file {'; '.join(why)}."
    )


def cliff(c: dict, experiment: str, rows: pd.DataFrame) -> None:
    ok, ours, ceiling = c["ok"], c["ours"], c["ceiling"]
    curve = cliff_curve(rows)
    limits = {
        name: rows[rows["metric"] == f"{name}_bytes"]["median"].median()
        for name in ("dirty_background", "dirty_limit", "ram")
    }
    cap = parse_size(rows["max_file_size"].iloc[0])
    relative_to = rows["relative_to"].iloc[0]
    fig, ax = plt.subplots(figsize=(10.5, 5))
    for (tier, sync), line in curve.groupby(["tier", "sync"]):
        buffered = sync == "buffered"
        ax.errorbar(
            line["bytes"],
            line["median"],
            yerr=plotting.span(line["median"], line["min"], line["max"]),
            color=c["colors"].get(tier),
            linestyle="-" if buffered else ":",
            marker="o" if buffered else "s",
            capsize=3,
            label=f"{tier}, {SYNC[sync]}",
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    measured_top = curve["bytes"].max()
    # the planned sizes that were not run (skipped), drawn as crosses along the bottom
    skipped = ours[(ours["experiment"] == experiment) & (ours["status"] == "skipped")]
    scale = limits.get(relative_to, np.nan)
    planned = (
        sorted({float(f) * scale for f in skipped["file_fraction"]}) if np.isfinite(scale) else []
    )
    dirty_top = limits["dirty_limit"] if np.isfinite(limits["dirty_limit"]) else 0
    right = max([measured_top, cap, dirty_top] + planned) * 1.6
    left = curve["bytes"].min() / 1.6
    ax.set_xlim(left, right)
    if planned:
        ax.scatter(
            planned,
            [0.04] * len(planned),
            transform=ax.get_xaxis_transform(),
            marker="x",
            color="0.35",
            zorder=3,
            label="planned size not run (skipped)",
        )
    for name, text, color in LIMITS:
        value = limits[name]
        if np.isfinite(value) and value <= right:
            ax.axvline(value, color=color, linestyle="-.", linewidth=1.1)
            ax.annotate(
                f"{text} {format_size(value)}",
                xy=(value, 0.97),
                xycoords=("data", "axes fraction"),
                rotation=90,
                ha="right",
                va="top",
                fontsize=8,
                color=color,
            )
    plotting.draw_ceiling(ax, ceiling)
    if cap < right:
        ax.axvspan(cap, right, color="0.92", zorder=0)
        ax.annotate(
            f"above the sweep cap ({size_text(cap)}): not run",
            xy=(cap * 1.05, 0.10),
            xycoords=("data", "axes fraction"),
            fontsize=8,
            color="0.35",
        )
    ticks = [2**k for k in range(int(np.floor(np.log2(left))) + 1, int(np.ceil(np.log2(right))))]
    ticks = ticks[:: max(1, len(ticks) // 8)]
    ax.set_xticks(ticks, [format_size(t) for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel("file size (bytes written by dd)")
    ax.set_ylabel("write throughput (MB/s, log scale)")
    plotting.legend_outside(ax, borderaxespad=0, bbox_to_anchor=(1.01, 1), frameon=True)
    drops = find_drops(ax, curve)
    dirty = format_size(limits["dirty_limit"]) if np.isfinite(limits["dirty_limit"]) else "unknown"
    below_limit = np.isfinite(limits["dirty_limit"]) and measured_top < limits["dirty_limit"]
    if drops:
        title = f"buffered throughput drops below half: {', '.join(drops)} (dirty limit {dirty})"
    elif below_limit:
        title = (
            f"no drop up to {format_size(measured_top)}: the capped sweep stops below the "
            f"dirty limit ({dirty})"
        )
    else:
        title = f"no clear drop up to {format_size(measured_top)} (dirty limit {dirty})"
    ax.set_title(title, fontsize=11)
    if below_limit:
        reach = (
            f"so this sweep stops at {format_size(measured_top)}, below the dirty limit: it cannot "
            "show the cliff here (scale=full, or a larger cap and max_bytes, reach it)"
        )
    else:
        reach = f"this sweep reaches {format_size(measured_top)}, past the dirty limit"
    others = ours[(ours["experiment"] == experiment) & ~ours["status"].isin(["ok", "skipped"])]
    caption = (
        f"dd if=/dev/zero bs={rows['block_size'].iloc[0]} into one file per run, file size swept "
        f"as a fraction of {RELATIVE_TEXT[relative_to]}, read on the node at run time. Dirty limit "
        f"{dirty} (vm.dirty_bytes, or vm.dirty_ratio of the dirtyable memory), background "
        f"writeback from {format_size(limits['dirty_background'])}, RAM "
        f"{format_size(limits['ram'])}. The sweep is capped at {size_text(cap)} (max_file_size; "
        f"the tier's max_bytes and free space bound it too), {reach}; the shaded range was not "
        f"run. {SYNC_TEXT} A buffered write that fits below the dirty limit runs at page-cache "
        "speed on any disk; past it, the writer is throttled to the device. x: bytes dd wrote "
        f"(median); y: median of {c['reps']} measured repetitions, whiskers min to max; the "
        "warm-up repetition is not shown."
        + ceiling_text(ceiling)
        + skipped_text(skipped, relative_to)
        + noisy_text(ok[ok["experiment"] == experiment])
        + plotting.describe_problems(others)
    )
    plotting.save(
        fig,
        c["out_dir"],
        f"cliff_{experiment}",
        "Page-cache cliff: write throughput vs file size",
        caption,
    )
