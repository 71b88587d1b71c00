"""A study's fidelity table from its results and traced records, and the command line."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from .. import intervals
from .points import (
    BAND,
    BAND_TEXT,
    DIFFERS,
    FAITHFUL,
    WITHIN_NOISE,
    load_points,
    pairs,
)
from .regions import (
    compare,
)

# ------------------------------------------------------------------ command line


def traced_notes(paths: list[str]) -> tuple[set[str], dict[str, str]]:
    """From raw records: the traced experiments, and per workload why calls were not counted."""
    experiments, reasons = set(), {}
    for path in paths:
        try:
            record = json.loads(Path(path).read_text())
        except (OSError, ValueError) as error:
            raise SystemExit(f"cannot read raw record {path}: {error}") from None
        spec, note = record["spec"], record.get("extra", {}).get("syscalls")
        experiments.add(spec["experiment"])
        if note and not note.get("counted"):
            reason, missing = note.get("reason", ""), "strace missing"
            reasons[spec["workload"]] = missing if reason.startswith(missing) else reason
    return experiments, reasons


def fidelity(results: pd.DataFrame, traced_paths: list[str] = ()) -> dict:
    experiments, not_counted = traced_notes(list(traced_paths))
    points = load_points(results, experiments)
    proxies = [c for pair in pairs() if (c := compare(pair, points, not_counted)) is not None]
    return {
        "study": str(results["study"].iloc[0]) if not results.empty else "",
        "band": [BAND.low, BAND.high],
        "level": intervals.LEVEL,
        "verdicts": {
            FAITHFUL: "files and folders per write match; bytes and I/O cost per write and the "
            "compute (time without writes) agree within 10% (the 95% interval of proxy / real "
            f"lies within {BAND_TEXT})",
            DIFFERS: f"a count differs, or an interval lies wholly outside {BAND_TEXT}",
            WITHIN_NOISE: "an interval straddles the band or a quantity was not measured: "
            "the data cannot decide",
        },
        "proxies": proxies,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tierbench.fidelity", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--results", required=True, help="the study's results.csv")
    parser.add_argument("--summary", required=True, help="the study's summary.csv")
    parser.add_argument("--out", required=True, help="fidelity.json to write")
    parser.add_argument(
        "--traced", nargs="*", default=[], help="raw records of the traced experiments"
    )
    args = parser.parse_args(argv)
    try:
        results = pd.read_csv(args.results, low_memory=False)
        summary = pd.read_csv(args.summary, low_memory=False)
    except (OSError, ValueError) as error:
        raise SystemExit(f"cannot read the study's tables: {error}") from None
    data = fidelity(results, args.traced)
    data["failed_points"] = failed_points(summary)
    tmp = Path(args.out).with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True, default=_json) + "\n")
    tmp.replace(args.out)
    for entry in data["proxies"]:
        print(f"{entry['proxy']} vs {entry['real']}: {entry['verdict']}", file=sys.stderr)
        for reason in entry["reasons"]:
            print(f"  {reason}", file=sys.stderr)
    return 0


def failed_points(summary: pd.DataFrame) -> list[dict]:
    """Points of the compared workloads without a number, and why (shown beside the table)."""
    names = {w for pair in pairs() for w in (pair.proxy, pair.real)}
    if summary.empty or "status" not in summary.columns:
        return []
    rows = summary[(summary["metric"] == "status") & summary["workload"].isin(names)]
    shown = ("workload", "experiment", "tier", "point", "status", "reason")
    return [{k: str(r[k]) for k in shown} for _, r in rows.iterrows()]


def _json(value):
    if isinstance(value, (np.floating, np.integer, np.bool_)):
        return value.item()
    raise TypeError(f"not JSON: {type(value)}")
