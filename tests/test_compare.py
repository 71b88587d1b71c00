"""Comparing machines and runs: the ratio's interval decides "changed", both ways; bad input."""

from __future__ import annotations

import numpy as np
import pytest
from test_resultsdb import VERDICT, append_study, fio_point, write_study
from tierbench import compare


def test_clear_difference_with_tight_repetitions_is_changed():
    reference = np.array([100.0, 101.0, 99.0, 100.5])
    doubled = 2 * reference[::-1]
    faster = compare.judge(reference, doubled, "write_bandwidth", "MB/s")
    assert faster["result"] == compare.FASTER and faster["low"] > 1.9
    assert faster["low"] <= faster["ratio"] <= faster["high"]
    assert compare.judge(reference, doubled, "wall_time", "s")["result"] == compare.SLOWER
    assert compare.judge(doubled, reference, "wall_time", "s")["result"] == compare.FASTER
    assert compare.judge(reference, doubled, "bytes_written", "B")["result"] == compare.HIGHER


def test_overlapping_noisy_data_is_not_changed():
    reference = np.array([100.0, 140.0, 70.0])
    other = np.array([110.0, 75.0, 130.0])
    verdict = compare.judge(reference, other, "write_bandwidth", "MB/s")
    assert verdict["result"] == compare.WITHIN_NOISE
    assert verdict["low"] < 1 < verdict["high"]


def test_one_repetition_or_a_zero_reference_is_undecided():
    one = compare.judge(np.array([100.0]), np.array([200.0, 201.0]), "read_iops", "IO/s")
    assert one["result"] == compare.UNDECIDED and one["ratio"] is None
    two = compare.judge(np.array([100.0, 101.0]), np.array([200.0, 201.0]), "read_iops", "IO/s")
    assert two["result"] == compare.UNDECIDED  # two a side flag a third of unchanged points
    zero = compare.judge(np.zeros(3), np.ones(3), "failed_evaluations", "evaluations")
    assert zero["result"] == compare.UNDECIDED


def test_chance_flags_match_identical_synthetic_data():
    """The page's 'expected by chance' rests on this rate: 3 repetitions a side flag ~10%."""
    rng = np.random.default_rng(11)
    a, b = (100 * np.exp(0.03 * rng.standard_normal((600, 3))) for _ in range(2))
    flagged = np.mean([not low <= 1 <= high for _, low, high in compare.ratio_intervals(a, b)])
    assert abs(flagged - compare.CHANCE_FLAGS[3]) < 0.04


def test_interval_is_seeded():
    a, b = np.array([1.0, 1.2, 0.9]), np.array([2.0, 2.5, 1.8])
    assert compare.ratio_interval(a, b) == compare.ratio_interval(a, b)


@pytest.mark.parametrize(
    "metric, unit, better",
    [
        ("write_bandwidth", "MB/s", "higher"),
        ("read_iops", "IO/s", "higher"),
        ("wall_time", "s", "lower"),
        ("write_clat_p99", "us", "lower"),
        ("dd_rate", "", "higher"),
        ("time_per_step", "", "lower"),
        ("io_share", "%", None),
        ("bytes_written", "B", None),
        ("newton_iterations_median", "iterations", None),
    ],
)
def test_sense_from_unit_then_name(metric, unit, better):
    assert compare.sense(metric, unit) == better


def two_machines(tmp_path, fast_factor=2.0):
    """ws and cluster: cluster's RAM tier 2x faster (tight), its disk the same but noisy."""
    results, db = tmp_path / "results", tmp_path / "results" / "tierbench.sqlite"
    ws = [
        fio_point("shm", "shm", "4k", [100.0, 101.0, 99.0]),
        fio_point("disk", "disk", "4k", [50.0, 70.0, 35.0]),
        fio_point("disk", "disk", "64k", [10.0, 10.1, 9.9], unit="s", name="wall_time"),
    ]
    cluster = [
        fio_point("ramdisk", "shm", "4k", [fast_factor * v for v in (100.0, 99.5, 101.0)]),
        fio_point("nvme", "disk", "4k", [55.0, 37.0, 65.0]),
        fio_point("nvme", "disk", "64k", [10.0, 9.95, 10.05], unit="s", name="wall_time"),
    ]
    runs = {}
    for machine, points in (("ws", ws), ("cluster", cluster)):
        study_dir, paths = write_study(results, machine, "fe_tmpfs", points, verdict=VERDICT)
        runs[machine] = append_study(db, study_dir, paths)
    return db, runs


def run_compare(db, out, *args):
    return compare.main([*args, "--db", str(db), "--out", str(out)])


def test_compare_page_flags_the_changed_point_only(tmp_path, capsys):
    db, _ = two_machines(tmp_path)
    out = tmp_path / "results" / "compare.html"
    assert run_compare(db, out, "ws", "cluster") == 0
    assert "3 point metrics, 1 changed (1 faster, 0 slower)" in capsys.readouterr().err
    html = out.read_text()
    assert "<strong>1 changed</strong>" in html and "2 within noise" in html
    # tiers matched by class across names; the verdict table and provenance beside each column
    assert "shm → ramdisk" in html and "disk → nvme" in html
    assert "tmpfs helps a little" in html and "fio-3.33" in html and "Test CPU" in html


def test_baseline_marks_points_slower_than_the_saved_run(tmp_path):
    results, db = tmp_path / "results", tmp_path / "results" / "tierbench.sqlite"
    saved = None
    for day, factor in ((1, 1.0), (2, 0.5)):  # a month later the RAM tier is half as fast
        points = [fio_point("shm", "shm", "4k", [factor * v for v in (100.0, 101.0, 99.0)])]
        study_dir, paths = write_study(results / str(day), "ws", "default", points, day=day)
        run = append_study(db, study_dir, paths)
        saved = saved or run
    out = tmp_path / "compare.html"
    assert run_compare(db, out, "ws", "--baseline", saved["run_id"][:10]) == 0
    html = out.read_text()
    assert 'class=" regression"' in html and "1 slower than the baseline run" in html


def test_bad_input_one_line_exit_2_nothing_written(tmp_path, capsys):
    db, runs = two_machines(tmp_path)
    other = [fio_point("shm", "shm", "1m", [1.0, 1.1, 1.2])]  # shares no point with ws
    study_dir, paths = write_study(tmp_path / "results", "laptop", "fe_tmpfs", other)
    append_study(db, study_dir, paths)
    elsewhere, paths = write_study(tmp_path / "results", "mac", "ramdisk_macos", other)
    append_study(db, elsewhere, paths)
    out = tmp_path / "compare.html"
    cases = {
        ("ws", "nosuch"): "'nosuch' is neither a machine nor a run",
        ("ws", "laptop"): "share no points",
        ("ws", "mac"): "share no study",
        ("ws",): "at least two machines",
        ("ws", "cluster", "--study", "default"): "ws has no run of study default",
        ("ws", "--baseline", "cluster"): "--baseline needs a run id",
    }
    for args, message in cases.items():
        capsys.readouterr()
        assert run_compare(db, out, *args) == 2, args
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1, (args, err)
        assert not out.exists()
    assert "machines: cluster, laptop, mac, ws" in _error(db, out, capsys, "ws", "nosuch")
    assert "one scale" not in _error(db, out, capsys, "ws", "laptop")  # one scale: not said
    larger = [fio_point("shm", "shm", "1m", [1.0, 1.1, 1.2])]  # the study at another scale
    study_dir, paths = write_study(tmp_path / "results", "big", "fe_tmpfs", larger)
    append_study(db, study_dir, paths, scale="full")
    said = _error(db, out, capsys, "ws", "big")
    assert said.strip().endswith(
        "fe_tmpfs ran at scale smoke on ws, at scale full on big; run both at one scale"
    ), said
    assert "no results database" in _error(tmp_path / "none.sqlite", out, capsys, "a", "b")


def _error(db, out, capsys, *args):
    capsys.readouterr()
    assert run_compare(db, out, *args) == 2
    return capsys.readouterr().err


def test_two_runs_of_one_machine_by_run_id(tmp_path):
    db, runs = two_machines(tmp_path)
    out = tmp_path / "compare.html"
    assert run_compare(db, out, runs["ws"]["run_id"], runs["cluster"]["run_id"][:6]) == 0
    assert f"ws {runs['ws']['run_id'][:8]}" in out.read_text()
