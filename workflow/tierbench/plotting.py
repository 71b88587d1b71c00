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
