"""Shared look of every figure, and the manifest the report reads captions from."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from .units import parse_size  # noqa: E402

MANIFEST = "manifest.json"


def setup() -> None:
    sns.set_theme(context="notebook", style="whitegrid", palette="colorblind")
    plt.rcParams.update({"figure.dpi": 110, "savefig.bbox": "tight", "svg.fonttype": "none"})


def load(results_csv: str, summary_csv: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    results = pd.read_csv(results_csv)
    summary = pd.read_csv(summary_csv)
    return results, summary


def ok_rows(summary: pd.DataFrame) -> pd.DataFrame:
    return summary[summary["status"] == "ok"].copy()


def problems(summary: pd.DataFrame) -> pd.DataFrame:
    return summary[summary["status"] != "ok"]


def with_bytes(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    """Adds ``<column>_bytes`` so sizes like 4k and 1M sort and scale numerically."""
    frame = frame.copy()
    frame[f"{column}_bytes"] = frame[column].map(parse_size)
    return frame


def errorbars(ax, frame: pd.DataFrame, x: str, y: str = "median") -> None:
    """Min-max bars of the measured repetitions."""
    ax.errorbar(
        frame[x],
        frame[y],
        yerr=[frame[y] - frame["min"], frame["max"] - frame[y]],
        fmt="none",
        ecolor="0.3",
        elinewidth=1,
        capsize=3,
    )


def save(fig, out_dir: str, name: str, title: str, caption: str) -> None:
    """Writes <name>.png and <name>.svg and records the caption in the manifest."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    fig.savefig(out / f"{name}.png")
    fig.savefig(out / f"{name}.svg")
    plt.close(fig)
    manifest_path = out / MANIFEST
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else []
    manifest = [entry for entry in manifest if entry["name"] != name]
    manifest.append(
        {
            "name": name,
            "png": f"{name}.png",
            "svg": f"{name}.svg",
            "title": title,
            "caption": caption,
        }
    )
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")


def finish(out_dir: str) -> None:
    """Every figure directory has a manifest, also when a study had nothing to plot."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if not (out / MANIFEST).exists():
        (out / MANIFEST).write_text("[]\n")


def describe_problems(summary: pd.DataFrame) -> str:
    rows = problems(summary)
    if rows.empty:
        return ""
    items = [f"{r.tier} {r.point}: {r.status} ({r.reason})" for r in rows.itertuples()]
    return " Not plotted: " + "; ".join(items) + "."


#: STREAM kernel a write from /dev/zero compares with: it reads one buffer and
#: writes another, the two arrays STREAM counts for copy
CEILING_KERNEL = "copy"


def stream_ceiling(summary: pd.DataFrame, kernel: str = CEILING_KERNEL) -> float | None:
    """Median best rate (MB/s) of a STREAM kernel in a study's summary, or None without one.

    With several STREAM points (e.g. thread counts) the fastest is the ceiling.
    """
    rows = summary[
        (summary["workload"] == "stream")
        & (summary["status"] == "ok")
        & (summary["metric"] == f"{kernel}_bandwidth")
    ]
    if rows.empty:
        return None
    return float(rows["median"].max())


def draw_ceiling(ax, value: float | None, label: str | None = None, vertical: bool = False):
    """A dashed line at the memory ceiling (MB/s), labelled; nothing when ``value`` is None.

    ``vertical=True`` is for charts with throughput on the x axis (horizontal bars).
    The axis limit grows to keep the line and its label in view.
    """
    if value is None:
        return
    label = label or f"memory ceiling: STREAM {CEILING_KERNEL} {value / 1000:,.1f} GB/s"
    style = {"color": "0.25", "linestyle": "--", "linewidth": 1.2, "zorder": 1}
    if vertical:
        ax.axvline(value, **style)
        ax.set_xlim(right=max(ax.get_xlim()[1], value * 1.15))
        ax.annotate(
            label,
            xy=(value, 0.98),
            xycoords=("data", "axes fraction"),
            rotation=90,
            ha="right",
            va="top",
            fontsize=8,
            color="0.25",
        )
    else:
        ax.axhline(value, **style)
        ax.set_ylim(top=max(ax.get_ylim()[1], value * 1.4))
        ax.annotate(
            label,
            xy=(0.01, value),
            xycoords=("axes fraction", "data"),
            ha="left",
            va="bottom",
            fontsize=8,
            color="0.25",
        )
