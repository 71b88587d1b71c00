"""The published figure next to ours, for a document study.

Left: the document's own numbers, re-plotted from its reference CSV and
normalised to its smallest value. Right: the ratios each lesson rests on,
published and measured in this run, ours coloured by the lesson's verdict and
with its interval when the verdict carries one.
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, LogLocator

from .. import plotting

PUBLISHED_COLOR = "0.55"
#: a colour per verdict status (Okabe-Ito, safe for colour-blind readers)
STATUS_COLOR = {
    "reproduced": "#009e73",
    "within_noise": "#56b4e9",
    "not_reproduced": "#d55e00",
    "inconclusive": "#e69f00",
}
OTHER_STATUS = "#0072b2"
RATIO_TICKS = FuncFormatter(lambda value, _: f"{value:g}x")
NO_TICKS = FuncFormatter(lambda value, _: "")


def make(
    verdict: dict | str | Path,
    out_dir: str,
    reference_csvs=None,
) -> list[Path]:
    """paper_comparison from a study's verdict.json and the document's published rows.

    ``verdict``: the verdict JSON (a path or its parsed dict). ``reference_csvs``: a folder,
    file or list of the published CSVs; without the document's rows the left panel says so.
    """
    plotting.setup()
    verdict = read_verdict(verdict)
    document = str(verdict["document"])
    published = plotting.load_reference(reference_csvs, document)
    comparisons = [
        {**comparison, "status": v["status"]}
        for v in verdict["verdicts"]
        for comparison in v["comparisons"]
    ]
    view = verdict.get("published_figure")
    grouped = published_view(published, view)
    height = max(3.5, 0.45 * max(len(grouped), 2 * len(comparisons)) + 1.5)
    fig, (left, right) = plt.subplots(
        1, 2, figsize=(13, height), gridspec_kw={"width_ratios": [1, 1.2], "wspace": 0.9}
    )
    draw_published(left, grouped, document, view)
    draw_ratios(right, comparisons)
    statuses = ", ".join(v["status"].replace("_", " ") for v in verdict["verdicts"])
    table, metric = (view["table"], view["metric"]) if view else ("", "")
    caption = (
        f"Document {document}. Left: the published {table.replace('_', ' ')} "
        f"({metric.replace('_', ' ')}), each bar divided by the smallest, so hardware of any "
        "speed can be compared (whiskers: the published repetitions' range, where the document "
        "gives several). Right: every ratio a verdict rests on, from the document and from this "
        "run's medians, this run's bar coloured by its lesson's verdict; whiskers: the interval "
        "of our ratio where the verdict gives one (without it, the median ratio only). "
        f"Verdicts: {statuses}."
    )
    if grouped.empty:
        caption += f" No published rows of document {document} were given."
    title = f"Document {document}: published vs this run"
    plotting.save(fig, out_dir, "paper_comparison", title, caption)
    return plotting.finish(out_dir)


def read_verdict(verdict: dict | str | Path) -> dict:
    if isinstance(verdict, dict):
        return verdict
    path = Path(verdict)
    if not path.is_file():
        raise FileNotFoundError(f"no such verdict file: {path}")
    data = json.loads(path.read_text())
    for key in ("document", "verdicts"):
        if key not in data:
            raise ValueError(f"{path}: no '{key}' key in the verdict")
    return data


def published_view(published: pd.DataFrame, view: dict | None) -> pd.DataFrame:
    """The headline table's bars: median, min and max of each group, over the smallest median.

    ``view``: the study's ``published_figure`` (its table, metric and the columns that
    make a bar), which its verdict carries.
    """
    empty = pd.DataFrame(columns=["label", "normalised", "low", "high"])
    if not view or published.empty:
        return empty
    table, metric, keys = view["table"], view["metric"], view["bars"]
    rows = published[(published["table"] == table) & (published["metric"] == metric)].copy()
    if rows.empty:
        return empty
    for key in keys[1:]:
        rows[key] = rows[key].astype(str).str.replace(r"\.0$", "", regex=True)
    grouped = (
        rows.groupby(keys, sort=False)["canonical_value"]
        .agg(["median", "min", "max"])
        .reset_index()
    )

    def label(row) -> str:
        names = {"write_interval": "interval", "ensemble": "x"}
        return str(row[keys[0]]) + "".join(f", {names.get(k, k)} {row[k]}" for k in keys[1:])

    grouped["label"] = grouped.apply(label, axis=1)
    smallest = grouped["median"].min()
    grouped["normalised"] = grouped["median"] / smallest
    grouped["low"] = grouped["min"] / smallest
    grouped["high"] = grouped["max"] / smallest
    return grouped.sort_values("normalised")


def draw_published(ax, grouped: pd.DataFrame, document: str, view: dict | None) -> None:
    title = view["title"] if view else f"document {document}, published"
    ax.set_title(title)
    if grouped.empty:
        ax.axis("off")
        ax.text(
            0.5, 0.5, f"no published rows of document {document} were given",
            ha="center", va="center", transform=ax.transAxes,
        )  # fmt: skip
        return
    y = np.arange(len(grouped))
    ax.barh(y, grouped["normalised"], color=PUBLISHED_COLOR)
    xerr = plotting.span(grouped["normalised"], grouped["low"], grouped["high"])
    if xerr[0].any() or xerr[1].any():
        ax.errorbar(grouped["normalised"], y, xerr=xerr, fmt="none", ecolor="0.2", capsize=3)
    for yy, value, high in zip(y, grouped["normalised"], grouped["high"], strict=True):
        ax.annotate(
            f"{value:,.2f}x", (max(value, high), yy), xytext=(3, 0), textcoords="offset points",
            va="center", fontsize=9,
        )  # fmt: skip
    ax.set_yticks(y, grouped["label"])
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(RATIO_TICKS)
    ax.xaxis.set_minor_formatter(NO_TICKS)
    ax.set_xlim(right=ax.get_xlim()[1] * 2)  # room for the labels
    ax.set_xlabel("ratio to the smallest value (log scale)")


def number(value) -> float:
    return float(value) if value is not None else np.nan


def draw_ratios(ax, comparisons: list[dict]) -> None:
    """Published and our ratio per comparison; ours with its interval and its verdict's colour."""
    ax.set_xlabel("ratio (log scale; 1 = no difference)")
    ax.set_title("the lesson's ratios: published vs this run")
    if not comparisons:
        ax.text(
            0.5, 0.5, "no ratio could be measured in this run", ha="center",
            transform=ax.transAxes,
        )  # fmt: skip
        return
    y = np.arange(len(comparisons))
    pub = np.array([number(c["published"]) for c in comparisons])
    ours = np.array([number(c["ours"]) for c in comparisons])
    low = np.array([number(c.get("low")) for c in comparisons])
    high = np.array([number(c.get("high")) for c in comparisons])
    colors = [STATUS_COLOR.get(c["status"], OTHER_STATUS) for c in comparisons]
    ax.barh(y + 0.2, pub, height=0.38, color=PUBLISHED_COLOR)
    ax.barh(y - 0.2, ours, height=0.38, color=colors)
    with_interval = np.isfinite(low) | np.isfinite(high)
    if with_interval.any():
        xerr = plotting.span(ours, low, high)
        ax.errorbar(
            ours[with_interval], (y - 0.2)[with_interval],
            xerr=[xerr[0][with_interval], xerr[1][with_interval]],
            fmt="none", ecolor="0.15", capsize=3, elinewidth=1,
        )  # fmt: skip
    ends = np.fmax(ours, np.where(np.isfinite(high), high, ours))
    for offset, values, at in ((0.2, pub, pub), (-0.2, ours, ends)):
        for yy, value, x in zip(y + offset, values, at, strict=True):
            if np.isfinite(value):
                ax.annotate(
                    f"{value:,.2f}x", (x, yy), xytext=(3, 0), textcoords="offset points",
                    va="center", fontsize=9,
                )  # fmt: skip
    ax.set_yticks(y, [c["label"] for c in comparisons])
    ax.axvline(1, color="k", lw=0.8)
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))
    ax.xaxis.set_major_formatter(RATIO_TICKS)
    ax.xaxis.set_minor_formatter(NO_TICKS)
    ax.set_xlim(right=ax.get_xlim()[1] * 2)  # room for the labels
    handles = [Patch(color=PUBLISHED_COLOR, label="published")]
    for status in dict.fromkeys(c["status"] for c in comparisons):
        color = STATUS_COLOR.get(status, OTHER_STATUS)
        handles.append(Patch(color=color, label=f"this run: {status.replace('_', ' ')}"))
    plotting.legend_outside(ax, handles, [h.get_label() for h in handles], fontsize=9)
