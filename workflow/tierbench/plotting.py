"""Shared look of every figure, and the manifest the report reads captions from."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from . import reference  # noqa: E402
from .units import parse_size  # noqa: E402

MANIFEST = "manifest.json"


def setup() -> None:
    sns.set_theme(context="notebook", style="whitegrid", palette="colorblind")
    plt.rcParams.update({"figure.dpi": 110, "savefig.bbox": "tight", "svg.fonttype": "none"})


def load(results_csv: str, summary_csv: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    results = pd.read_csv(results_csv)
    summary = pd.read_csv(summary_csv)
    return results, summary


Table = pd.DataFrame | str | os.PathLike


def table(data: Table, study: str | None = None) -> pd.DataFrame:
    """A results or summary table given as a frame or a CSV path, limited to ``study`` if given.

    A path that does not exist is an error naming it, not a pandas traceback.
    """
    if isinstance(data, pd.DataFrame):
        frame = data.copy()
    else:
        path = Path(data)
        if not path.is_file():
            raise FileNotFoundError(f"no such table: {path}")
        frame = pd.read_csv(path)
    if study is not None and "study" in frame.columns:
        frame = frame[frame["study"].astype(str) == str(study)]
    return frame


def reference_files(reference_csvs) -> list[Path]:
    """The published-number CSVs named by ``reference_csvs``: a directory, one file or a list."""
    if reference_csvs is None:
        return []
    if isinstance(reference_csvs, str | os.PathLike):
        reference_csvs = [reference_csvs]
    files = []
    for item in reference_csvs:
        path = Path(item)
        if path.is_dir():
            files.extend(sorted(path.glob("*.csv")))
        elif path.is_file():
            files.append(path)
        else:
            raise FileNotFoundError(f"no such reference CSV or folder: {path}")
    return files


def load_reference(reference_csvs, document: str | None) -> pd.DataFrame:
    """Published rows (``reference.load``'s columns) of ``document``, the one the study
    re-runs (its file's ``document:``); empty without one or without any CSV.

    ``reference.load`` reads a folder, so the named files are linked into a scratch one:
    the columns and units are checked in one place.
    """
    files = reference_files(reference_csvs) if document else []
    if not files:
        rows = pd.DataFrame(columns=[*reference.COLUMNS, "canonical_unit", "canonical_value"])
    else:
        with tempfile.TemporaryDirectory() as scratch:
            for i, path in enumerate(files):
                (Path(scratch) / f"{i:04d}_{path.name}").symlink_to(path.resolve())
            rows = reference.load(scratch)
    rows = rows[rows["document"].astype(str) == str(document)]
    return rows.copy()


def no_published(document: str | None) -> str:
    """Why a figure draws no published rows beside this run's."""
    if document:
        return f"No published rows of document {document} were given"
    return "The study re-runs no document"


def legend_outside(ax, handles=None, labels=None, **style) -> None:
    """A legend right of the axes, never over bars, lines or their labels."""
    if handles is None:
        handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return
    options = {"loc": "upper left", "bbox_to_anchor": (1.02, 1), "borderaxespad": 0}
    options.update({"fontsize": 8, "frameon": False})
    options.update(style)
    ax.legend(handles, labels, **options)


def legend_below(fig, handles, labels, **style) -> None:
    """A figure legend under all panels (after ``tight_layout(rect=(0, 0.08, 1, 1))``)."""
    if not handles:
        return
    options = {"loc": "lower center", "ncol": min(len(handles), 4), "fontsize": 8}
    options.update({"frameon": False, "bbox_to_anchor": (0.5, 0)})
    options.update(style)
    fig.legend(handles, labels, **options)


def unique_handles(axes) -> tuple[list, list]:
    """Legend entries of several axes, each label once."""
    found = {}
    for ax in np.ravel(axes):
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            if not label.startswith("_"):
                found.setdefault(label, handle)
    return list(found.values()), list(found.keys())


def span(values, low, high) -> list[np.ndarray]:
    """``yerr`` for errorbar from a value and its range; NaN or inverted ends give no whisker."""
    values, low, high = (np.asarray(v, dtype=float) for v in (values, low, high))
    below = np.where(np.isfinite(low), values - low, 0.0)
    above = np.where(np.isfinite(high), high - values, 0.0)
    return [np.clip(np.nan_to_num(below), 0, None), np.clip(np.nan_to_num(above), 0, None)]


def whiskers(ax, x, values, low, high, ecolor: str = "0.25", **kwargs) -> None:
    """A bar chart's spread: whiskers from each value to its low and high ends, no markers."""
    ax.errorbar(
        x, values, yerr=span(values, low, high), fmt="none",
        ecolor=ecolor, elinewidth=1, capsize=3, **kwargs,
    )  # fmt: skip


def label_above(ax, x, tops, texts, fontsize: float = 8) -> None:
    """Value labels just above each bar's whisker (or its top), so no whisker crosses them."""
    for xi, top, text in zip(x, tops, texts, strict=True):
        if text and np.isfinite(top):
            ax.annotate(
                text, (xi, top), xytext=(0, 2), textcoords="offset points",
                ha="center", va="bottom", fontsize=fontsize,
            )  # fmt: skip


def family_workloads(family: str) -> list[str]:
    """The workloads whose figures a family draws, from the workload registry."""
    from .workloads import registry  # the registry imports every workload: only when asked

    return [name for name, workload in registry().items() if workload.family == family]


def noisy_points(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows whose min-max spread is above the study's threshold (``noisy`` read from CSV)."""
    if "noisy" not in frame.columns:
        return frame.iloc[0:0]
    return frame[frame["noisy"].astype(str) == "True"]


def ok_rows(summary: pd.DataFrame) -> pd.DataFrame:
    return summary[summary["status"] == "ok"].copy()


def problems(summary: pd.DataFrame) -> pd.DataFrame:
    return summary[summary["status"] != "ok"]


def with_bytes(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    """Adds ``<column>_bytes`` so sizes like 4k and 1M sort and scale numerically."""
    frame = frame.copy()
    frame[f"{column}_bytes"] = frame[column].map(parse_size)
    return frame


def errorbars(
    ax, frame: pd.DataFrame, x: str, y: str = "median", hue: str | None = None, order=None
) -> None:
    """Min-max bars of the measured repetitions; with ``hue`` (and its ``order``, as the
    plot's), each series' bars in its colour, so that bars at one x tell whose they are."""
    series = [(frame, "0.3")]
    if hue is not None:
        order = list(order if order is not None else sorted(frame[hue].unique()))
        colours = sns.color_palette(n_colors=len(order))
        series = [(frame[frame[hue] == name], c) for name, c in zip(order, colours, strict=True)]
    for part, colour in series:
        ax.errorbar(
            part[x],
            part[y],
            yerr=[part[y] - part["min"], part["max"] - part[y]],
            fmt="none",
            ecolor=colour,
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


def finish(out_dir: str) -> list[Path]:
    """Every figure directory has a manifest, also when a study had nothing to plot.

    Returns the PNGs the manifest lists, in order, for a notebook to show.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if not (out / MANIFEST).exists():
        (out / MANIFEST).write_text("[]\n")
    return [out / entry["png"] for entry in json.loads((out / MANIFEST).read_text())]


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
