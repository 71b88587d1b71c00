"""Tidy rows and statistics: medians, spread, noisy flag, warm-up kept apart."""

import json

import numpy as np
import pandas as pd
from tierbench import aggregate
from tierbench.records import FAILED, metric, no_value


def raw(tmp_path, rep, metrics, tier="shm", point="block_size=4k", phase=None):
    record = {
        "spec": {
            "study": "s",
            "experiment": "seq",
            "workload": "fio",
            "tier": tier,
            "tier_class": "shm",
            "point": point,
            "params": {"block_size": "4k", "size": "1M"},
            "repetition": rep,
            "phase": phase or ("warmup" if rep == 0 else "measured"),
        },
        "context": {"host": {"host": "node1", "slurm_job_id": "42" if rep else None}},
        "started_at": f"2026-01-01T00:00:0{rep}+00:00",
        "duration_s": 1.0,
        "metrics": metrics,
    }
    path = tmp_path / f"{tier}-{point}-{rep}.json"
    path.write_text(json.dumps(record))
    return str(path)


def test_tidy_columns_and_params(tmp_path):
    paths = [raw(tmp_path, r, [metric("write_bandwidth", 100 + r, "MB/s")]) for r in range(3)]
    frame = aggregate.load_records(paths)
    assert list(frame.columns[:7]) == [
        "study",
        "experiment",
        "workload",
        "tier",
        "tier_class",
        "host",
        "point",
    ]
    assert {"block_size", "size", "repetition", "metric", "value", "unit"} <= set(frame.columns)
    assert frame["slurm_job_id"].tolist()[1] == "42"
    assert len(frame) == 3


def test_median_excludes_warmup_and_flags_noise(tmp_path):
    values = {0: 1.0, 1: 100.0, 2: 110.0, 3: 200.0}
    paths = [raw(tmp_path, r, [metric("write_bandwidth", v, "MB/s")]) for r, v in values.items()]
    summary = aggregate.summarise(aggregate.load_records(paths), noise_threshold=0.25)
    row = summary.iloc[0]
    assert row["n"] == 3 and row["median"] == 110.0 and row["warmup"] == 1.0
    assert row["min"] == 100.0 and row["max"] == 200.0
    assert row["ci_low"] <= row["median"] <= row["ci_high"]
    assert row["rel_spread"] == (200 - 100) / 110 and bool(row["noisy"]) is True
    quiet = aggregate.summarise(aggregate.load_records(paths), noise_threshold=2.0)
    assert bool(quiet.iloc[0]["noisy"]) is False


def test_failed_point_keeps_a_row_with_reason(tmp_path):
    paths = [raw(tmp_path, r, [no_value(FAILED, "No space left on device")]) for r in range(2)]
    summary = aggregate.summarise(aggregate.load_records(paths), 0.25)
    assert summary.iloc[0]["status"] == "failed"
    assert "No space" in summary.iloc[0]["reason"] and summary.iloc[0]["n"] == 0


def test_bootstrap_ci_is_seeded_and_brackets_the_median():
    data = np.array([10.0, 11.0, 12.0, 13.0, 30.0])
    assert aggregate.bootstrap_ci(data) == aggregate.bootstrap_ci(data)
    low, high = aggregate.bootstrap_ci(data)
    assert low <= np.median(data) <= high
    assert aggregate.bootstrap_ci(np.array([5.0])) == (5.0, 5.0)


def test_cli_writes_both_tables(tmp_path):
    paths = [raw(tmp_path, r, [metric("read_iops", 10 * (r + 1), "IO/s")]) for r in range(3)]
    results, summary = tmp_path / "results.csv", tmp_path / "summary.csv"
    assert aggregate.main(["--results", str(results), "--summary", str(summary), *paths]) == 0
    assert len(pd.read_csv(results)) == 3
    assert pd.read_csv(summary).iloc[0]["median"] == 25.0
