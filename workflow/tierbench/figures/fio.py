"""fio figures: throughput per block size and tier, and document 000's worst case."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.ticker import FuncFormatter

from .. import plotting
from ..units import format_size

MODE = {
    "buffered": "buffered (page cache)",
    "direct": "direct (O_DIRECT)",
    "fsync": "fsync per write",
}
BANDWIDTH = ["read_bandwidth", "write_bandwidth"]
PLAIN = FuncFormatter(lambda v, _: f"{v:,.0f}")


def make(summary: plotting.Table, out_dir: str, study: str | None = None) -> list[Path]:
    """fio_sequential and fio_worst_case from a study's summary.csv (results.csv is not read)."""
    plotting.setup()
    summary = plotting.table(summary, study)
    fio = summary[summary["workload"] == "fio"]
    ok = plotting.ok_rows(fio)
    reps = int(ok["n"].max()) if len(ok) else 0
    sequential(fio, ok, reps, out_dir)
    worst_case(fio, ok, reps, out_dir)
    return plotting.finish(out_dir)


def sequential(fio: pd.DataFrame, ok: pd.DataFrame, reps: int, out_dir: str) -> None:
    """Throughput vs block size, one panel per direction, a line per tier and I/O mode."""
    seq = ok[ok["rw"].isin(["read", "write"]) & ok["metric"].isin(BANDWIDTH)]
    if seq.empty:
        return
    seq = plotting.with_bytes(seq, "block_size")
    seq["I/O mode"] = seq["io_mode"].map(MODE)
    directions = sorted(seq["rw"].unique(), key=["write", "read"].index)
    fig, axes = plt.subplots(
        1, len(directions), figsize=(6 * len(directions), 4.5), sharey=True, squeeze=False
    )
    for ax, direction in zip(axes[0], directions, strict=True):
        part = seq[seq["rw"] == direction].sort_values("block_size_bytes")
        sns.lineplot(
            data=part,
            x="block_size_bytes",
            y="median",
            hue="tier",
            style="I/O mode",
            markers=True,
            dashes=True,
            ax=ax,
        )
        plotting.errorbars(ax, part, "block_size_bytes")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(PLAIN)
        ticks = sorted(part["block_size_bytes"].unique())
        ax.set_xticks(ticks, [format_size(t) for t in ticks])
        ax.minorticks_off()
        ax.set_xlabel("block size")
        ax.set_ylabel("throughput (MB/s, log scale)")
        ax.set_title(f"sequential {direction}")
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    plotting.legend_outside(axes[0][-1], *axes[0][-1].get_legend_handles_labels(), fontsize=None)
    sizes = ", ".join(sorted({format_size(plotting.parse_size(s)) for s in seq["size"]}))
    caption = (
        f"Sequential fio throughput per block size, one {sizes} file per run, queue depth 1. "
        f"Median of {reps} measured repetitions (bars: min to max); the warm-up repetition is "
        "excluded. Buffered writes end in the page cache (no fsync), so they show memory speed on "
        "every tier; reads drop the file from the page cache first (fio invalidate=1, after an "
        "fsync'd write)." + plotting.describe_problems(fio[fio["rw"].isin(["read", "write"])])
    )
    plotting.save(fig, out_dir, "fio_sequential", "Sequential throughput vs block size", caption)


def worst_case(fio: pd.DataFrame, ok: pd.DataFrame, reps: int, out_dir: str) -> None:
    """Random 4 KiB read/write with fsync per tier: bars of medians with min-max whiskers."""
    worst = ok[(ok["rw"] == "randrw") & ok["metric"].isin(BANDWIDTH)].copy()
    if worst.empty:
        return
    worst["direction"] = worst["metric"].str.replace("_bandwidth", "")
    for column in ("median", "min", "max"):
        worst[f"kbs_{column}"] = worst[column] * 1000  # KB/s = 1000 B/s, as document 000
    order = worst[worst["direction"] == "write"].sort_values("kbs_median")["tier"].tolist()
    order += sorted(set(worst["tier"]) - set(order))
    directions = [d for d in ("read", "write") if d in set(worst["direction"])]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    width = 0.8 / len(directions)
    for i, direction in enumerate(directions):
        part = worst[worst["direction"] == direction].set_index("tier").reindex(order)
        x = np.arange(len(order)) + (i - (len(directions) - 1) / 2) * width
        ax.bar(x, part["kbs_median"], width * 0.95, label=direction)
        plotting.whiskers(ax, x, part["kbs_median"], part["kbs_min"], part["kbs_max"])
        labels = [f"{v:,.0f}" if np.isfinite(v) else "" for v in part["kbs_median"]]
        tops = np.fmax(part["kbs_max"], part["kbs_median"])
        plotting.label_above(ax, x, tops, labels, fontsize=9)
    ax.set_xticks(np.arange(len(order)), order)
    ax.set_yscale("log")
    ax.set_ylim(top=ax.get_ylim()[1] * 2.5)  # room for the labels above the whiskers
    ax.yaxis.set_major_formatter(PLAIN)
    ax.set_ylabel("throughput (KB/s, log scale)")
    ax.set_xlabel("tier")
    plotting.legend_outside(ax, title="direction")
    write = worst[worst["direction"] == "write"].set_index("tier")["kbs_median"]
    if len(write) > 1:
        slowest, fastest = write.idxmin(), write.idxmax()
        ratio = write[fastest] / write[slowest]
        ax.set_title(f"worst case: {fastest} writes {ratio:,.0f}x faster than {slowest}")
    else:
        ax.set_title("worst case: random read/write with fsync")
    params = worst.iloc[0]
    caption = (
        f"fio randrw, block {params['block_size']}, fsync after every write, iodepth "
        f"{int(params['iodepth'])}, file {params['size']}, at most {params['runtime']} s per run. "
        "KB/s = 1000 B/s, as document 000 reports. "
        f"Median of {reps} measured repetitions (bars: min to max); warm-up excluded."
        + plotting.describe_problems(fio[fio["rw"] == "randrw"])
    )
    plotting.save(
        fig, out_dir, "fio_worst_case", "Worst case: random 4 KiB read/write with fsync", caption
    )
