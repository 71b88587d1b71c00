"""Raw JSON records of a study -> results.csv (tidy) and summary.csv (statistics).

results.csv has one row per measured value and run (warm-up rows included,
marked ``phase=warmup``). summary.csv has one row per point and metric: the
median of the measured repetitions, their minimum and maximum, a bootstrap 95%
confidence interval of the median, and a ``noisy`` flag when the relative
spread exceeds the configured threshold. Points without a number (not
applicable, skipped, failed) keep a row with the reason.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from .records import LEADING_COLUMNS, OK, TRAILING_COLUMNS

POINT_KEYS = ["study", "experiment", "workload", "tier", "tier_class", "point"]
#: where a run's I/O went (tierbench.pagecache), when the runner recorded it
PAGE_CACHE_COLUMNS = ["page_cache", "page_cache_reason"]
#: summary.csv's columns after the point's keys and parameters
STATISTICS = [
    "metric",
    "unit",
    "status",
    "reason",
    "n",
    "median",
    "mean",
    "min",
    "max",
    "ci_low",
    "ci_high",
    "rel_spread",
    "noisy",
    "warmup",
]
BOOTSTRAP_SAMPLES = 2000


def _scalar(value):
    return (
        value if isinstance(value, (str, int, float, bool)) or value is None else json.dumps(value)
    )


def tidy_rows(record: dict) -> list[dict]:
    spec, context = record["spec"], record.get("context", {})
    host = context.get("host", {})
    base = {
        "study": spec["study"],
        "experiment": spec["experiment"],
        "workload": spec["workload"],
        "tier": spec["tier"],
        "tier_class": spec["tier_class"],
        "host": host.get("host", ""),
        "point": spec["point"],
        **{key: _scalar(value) for key, value in spec["params"].items()},
        "repetition": spec["repetition"],
        "phase": spec["phase"],
        "started_at": record["started_at"],
        "duration_s": record["duration_s"],
        "slurm_job_id": host.get("slurm_job_id") or "",
        **_page_cache(record),
    }
    return [{**base, **metric} for metric in record["metrics"]]


def _page_cache(record: dict) -> dict:
    """The run's page-cache verdict as two columns; empty for records without one."""
    found = record.get("page_cache") or {}
    return {column: str(found.get(column) or "") for column in PAGE_CACHE_COLUMNS}


def load_records(paths: list[str]) -> pd.DataFrame:
    rows = []
    for path in paths:
        try:
            record = json.loads(Path(path).read_text())
        except (OSError, ValueError) as error:
            raise SystemExit(f"cannot read raw record {path}: {error}") from None
        rows += tidy_rows(record)
    frame = pd.DataFrame(rows)
    fixed = LEADING_COLUMNS + TRAILING_COLUMNS + PAGE_CACHE_COLUMNS
    if frame.empty:
        return pd.DataFrame(columns=fixed)
    params = sorted(set(frame.columns) - set(fixed))
    return frame[LEADING_COLUMNS + params + TRAILING_COLUMNS + PAGE_CACHE_COLUMNS]


def node_provenance(paths: list[str]) -> list[dict]:
    """Each tier as its benchmark jobs saw it, per node: the probe made inside every job.

    On a cluster a node-local tier is a different device on every node; this,
    not the study's probe job, says what a number was measured on.
    """
    groups: dict[tuple, dict] = {}
    for path in paths:
        record = json.loads(Path(path).read_text())
        spec, context = record["spec"], record.get("context", {})
        host, tier = context.get("host", {}), context.get("tier", {})
        device = tier.get("block_device") or {}
        key = (spec["tier"], host.get("host", ""), tier.get("fs_type"), tier.get("source"))
        entry = groups.setdefault(
            key,
            {
                "tier": spec["tier"],
                "host": host.get("host", ""),
                "slurm_partition": spec.get("slurm_partition", ""),
                "fs_type": tier.get("fs_type"),
                "mount_point": tier.get("mount_point"),
                "source": tier.get("source"),
                "device": device.get("device"),
                "model": device.get("model"),
                "runs": 0,
                "slurm_job_ids": [],
            },
        )
        entry["runs"] += 1
        if host.get("slurm_job_id"):
            entry["slurm_job_ids"].append(str(host["slurm_job_id"]))
    for entry in groups.values():
        entry["slurm_job_ids"] = sorted(set(entry["slurm_job_ids"]), key=lambda i: (len(i), i))
    return sorted(groups.values(), key=lambda e: (e["tier"], e["host"]))


def allocation_use(paths: list[str]) -> dict:
    """How much of the node time the Slurm allocations held went to benchmarks.

    Per allocation (a Slurm job that ran benchmarks one after another): its nodes, from
    its start to the end of its last benchmark, against the benchmarks' own wall times.
    What follows the last benchmark (Snakemake's exit) is not counted, so the share is an
    upper bound; start-up, Snakemake between benchmarks and the runner's probe are what
    it leaves out. Empty outside Slurm.
    """
    jobs: dict[str, dict] = {}
    for path in paths:
        record = json.loads(Path(path).read_text())
        host = record.get("context", {}).get("host", {})
        if not host.get("slurm_job_start"):
            continue
        began = pd.Timestamp(record["started_at"]).timestamp()
        job = jobs.setdefault(
            str(host["slurm_job_id"]),
            {"nodes": host.get("slurm_job_nodes", 1), "start": host["slurm_job_start"]},
        )
        job["end"] = max(job.get("end", 0.0), began + record["duration_s"])
        job["benchmark_s"] = job.get("benchmark_s", 0.0) + record["duration_s"]
        job["benchmarks"] = job.get("benchmarks", 0) + 1
    rows = [
        {
            "slurm_job_id": job_id,
            "nodes": job["nodes"],
            "benchmarks": job["benchmarks"],
            "held_s": round(job["end"] - job["start"], 1),
            "benchmark_s": round(job["benchmark_s"], 1),
        }
        for job_id, job in sorted(jobs.items(), key=lambda item: int(item[0]))
    ]
    held = sum(r["nodes"] * r["held_s"] for r in rows)
    used = sum(r["nodes"] * r["benchmark_s"] for r in rows)
    return {
        "allocations": rows,
        "node_hours": round(held / 3600, 3),
        "node_seconds": round(held, 1),
        "benchmark_share": round(used / held, 3) if held > 0 else None,
    }


def param_columns(frame: pd.DataFrame) -> list[str]:
    fixed = set(LEADING_COLUMNS + TRAILING_COLUMNS + PAGE_CACHE_COLUMNS)
    return [c for c in frame.columns if c not in fixed]


def point_page_cache(group: pd.DataFrame) -> dict:
    """One point's page-cache columns: the runs' value when they agree, else all of them."""
    out = {}
    for column in PAGE_CACHE_COLUMNS:
        values = group[column] if column in group.columns else pd.Series(dtype=str)
        seen = sorted({str(v) for v in values.fillna("") if str(v)})
        out[column] = ("; " if column == "page_cache_reason" else ",").join(seen)
    return out


def bootstrap_ci(values: np.ndarray, seed: int = 0) -> tuple[float, float]:
    """95% percentile-bootstrap interval of the median (seeded: the same data, the same CI)."""
    if len(values) < 2:
        return float(values[0]), float(values[0])
    rng = np.random.default_rng(seed)
    samples = rng.choice(values, size=(BOOTSTRAP_SAMPLES, len(values)), replace=True)
    medians = np.median(samples, axis=1)
    low, high = np.percentile(medians, [2.5, 97.5])
    return float(low), float(high)


def summarise(frame: pd.DataFrame, noise_threshold: float) -> pd.DataFrame:
    params = param_columns(frame)
    out = []
    for key, group in frame.groupby(POINT_KEYS, sort=True, dropna=False):
        first = group.iloc[0]
        base = dict(zip(POINT_KEYS, key, strict=True))
        base.update({p: first[p] for p in params})
        base["host"] = ",".join(sorted(set(group["host"].astype(str))))
        base.update(point_page_cache(group[group["phase"] == "measured"]))
        problems = group[group["status"] != OK]
        measured = group[(group["status"] == OK) & (group["phase"] == "measured")]
        if measured.empty and not problems.empty:
            reasons = sorted(set(problems["reason"].astype(str)))
            out.append(
                {
                    **base,
                    "metric": "status",
                    "status": problems.iloc[0]["status"],
                    "reason": "; ".join(reasons),
                    "n": 0,
                }
            )
            continue
        for (name, unit), values in measured.groupby(["metric", "unit"], sort=True):
            data = values["value"].to_numpy(dtype=float)
            median = float(np.median(data))
            spread = float((data.max() - data.min()) / median) if median else 0.0
            low, high = bootstrap_ci(data)
            warm = group[(group["phase"] == "warmup") & (group["metric"] == name)]["value"]
            out.append(
                {
                    **base,
                    "metric": name,
                    "unit": unit,
                    "status": OK,
                    "reason": "" if problems.empty else "some repetitions failed",
                    "n": len(data),
                    "median": median,
                    "mean": float(data.mean()),
                    "min": float(data.min()),
                    "max": float(data.max()),
                    "ci_low": low,
                    "ci_high": high,
                    "rel_spread": spread,
                    "noisy": bool(len(data) > 1 and spread > noise_threshold),
                    "warmup": float(warm.iloc[0]) if len(warm) else np.nan,
                }
            )
    columns = POINT_KEYS + ["host"] + params + STATISTICS + PAGE_CACHE_COLUMNS
    return pd.DataFrame(out, columns=columns)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", required=True)
    parser.add_argument("--summary", required=True)
    parser.add_argument("--noise-threshold", type=float, default=0.25)
    parser.add_argument("--nodes", help="JSON: each tier as seen from inside its jobs, per node")
    parser.add_argument("--allocations", help="JSON: the Slurm allocations' node time used")
    parser.add_argument("raw", nargs="+")
    args = parser.parse_args(argv)
    frame = load_records(args.raw)
    frame.to_csv(args.results, index=False)
    if args.nodes:
        Path(args.nodes).write_text(json.dumps(node_provenance(args.raw), indent=1) + "\n")
    if args.allocations:
        use = json.dumps(allocation_use(args.raw), indent=1)
        Path(args.allocations).write_text(use + "\n")
    summary = summarise(frame, args.noise_threshold)
    summary.to_csv(args.summary, index=False)
    noisy = int(summary["noisy"].fillna(False).astype(bool).sum())
    print(
        f"{len(args.raw)} runs -> {len(frame)} rows; {len(summary)} point metrics, "
        f"{noisy} flagged noisy",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
