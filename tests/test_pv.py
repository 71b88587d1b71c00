"""pv: parsing of its average rate as captured from real runs, and the job around it.

The fixtures are pv 1.6.20's stderr (Debian 12), byte for byte:
  pv -f -aSs450m < /dev/zero 2> pv_void_450m.txt > /dev/null
  ... > /dev/shm/x (pv_shm_450m.txt), > /var/tmp/x on ext4 (pv_disk_450m.txt),
  ... > a file in a bindfs mount of a /dev/shm folder (pv_bindfs_450m.txt),
  pv -f -aSs 300k -L 100k (pv_rate_limited_kib.txt), pv -f -aSs 100 -L 50
  (pv_rate_limited_bytes.txt), and pv -f -aSs 4m into a 1 MiB tmpfs
  (pv_enospc_tmpfs.txt, exit status 16).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from conftest import FIXTURES, REPO, job_spec
from tierbench import matrix, preflight
from tierbench.errors import PointFailed
from tierbench.runner import run_job
from tierbench.workloads import pv

MiB = 1024**2
GiB = 1024**3
needs_pv = pytest.mark.skipif(shutil.which("pv") is None, reason="pv is not installed")


def fixture_text(name: str) -> str:
    """pv's stderr as the job sees it: bytes decoded, its carriage returns kept."""
    return (FIXTURES / name).read_bytes().decode()


@pytest.mark.parametrize(
    "name, text, bps",
    [
        ("pv_void_450m.txt", "15.6GiB/s", 15.6 * GiB),
        ("pv_shm_450m.txt", "820MiB/s", 820 * MiB),
        ("pv_disk_450m.txt", "290MiB/s", 290 * MiB),
        ("pv_rate_limited_kib.txt", "97.6KiB/s", 97.6 * 1024),
        ("pv_rate_limited_bytes.txt", "48.1 B/s", 48.1),
    ],
)
def test_final_average_rate_from_captured_output(name, text, bps):
    rate = pv.parse_rate(fixture_text(name))
    assert rate["text"] == text
    assert rate["bps"] == pytest.approx(bps)


def test_the_last_display_is_the_whole_run_not_the_first_second():
    # bindfs slowed down during the run: pv redrew 181, 159, ... and ended at 86.8 MiB/s
    text = fixture_text("pv_bindfs_450m.txt")
    assert text.count("\r") == 6 and text.startswith("[ 181MiB/s]")
    assert pv.parse_rate(text)["text"] == "86.8MiB/s"


def test_rates_of_the_document_itself():
    # document 002 printed these (pv on macOS, 2017)
    assert pv.parse_rate("[ 307MiB/s]\n")["bps"] / 1e6 == pytest.approx(321.9, abs=0.1)
    assert pv.parse_rate("[1.38GiB/s]\n")["bps"] / 1e6 == pytest.approx(1481.8, abs=0.1)
    assert pv.parse_rate("[13.5GiB/s]\n")["text"] == "13.5GiB/s"
    # pv --si (newer pv) prints decimal prefixes without the i
    assert pv.parse_rate("[ 307MB/s]\r\n")["bps"] == pytest.approx(307e6)


def test_an_interrupted_pv_gives_no_number():
    """pv redraws the running average with \r; only the one ended by \n is final."""
    with pytest.raises(PointFailed, match="ends before its final average"):
        pv.parse_rate("[ 371MiB/s]\r[ 290MiB/s]\r")
    assert pv.parse_rate("[ 371MiB/s]\r[ 290MiB/s]\r\n")["text"] == "290MiB/s"


@pytest.mark.parametrize("text", ["", "\r\n", "pv: -s: invalid number\n", "[ MiB/s]", "307MiB/s"])
def test_no_rate_is_a_failure_quoting_pv(text):
    with pytest.raises(PointFailed, match="pv printed no average rate"):
        pv.parse_rate(text)


def test_enospc_fixture_quotes_pv():
    with pytest.raises(PointFailed, match="No space left on device"):
        pv.parse_rate(fixture_text("pv_enospc_tmpfs.txt"))


def test_size_zero_would_never_stop_and_is_refused():
    with pytest.raises(ValueError, match="size must be positive"):
        pv.check_params({"size": "0"})
    assert pv.planned_bytes({"size": "450m"}) == 450 * MiB


def spec(tier_path, tier_class="disk", size="4MiB", max_bytes=None):
    return job_spec(
        "pv",
        tier_path,
        {"size": size},
        experiment="sinks",
        tier="scratch" if tier_class != "void" else "void",
        tier_class=tier_class,
        max_bytes=max_bytes,
        point="single",
    )


def by_name(record):
    return {m["metric"]: m for m in record["metrics"]}


@needs_pv
def test_file_sink_writes_exactly_size_and_leaves_nothing(tmp_path):
    record = run_job(spec(tmp_path, size="8MiB"), pv.run)
    metrics = by_name(record)
    assert metrics["bytes"]["value"] == 8 * MiB
    assert metrics["throughput"]["unit"] == "MB/s" and metrics["throughput"]["value"] > 0
    assert record["extra"]["command"].startswith("pv -f -aSs8388608 < /dev/zero > ")
    assert record["extra"]["pv_rate"].endswith("B/s")
    assert list(tmp_path.iterdir()) == []


@needs_pv
def test_pv_rate_and_our_clock_agree_in_the_same_run(tmp_path):
    # 64 MiB into the page cache takes tens of ms; pv's start-up a few: same order
    metrics = by_name(run_job(spec(tmp_path, size="64MiB"), pv.run))
    ratio = metrics["throughput"]["value"] / metrics["wall_throughput"]["value"]
    assert 0.5 < ratio < 3
    wall = metrics["bytes"]["value"] / metrics["wall_time"]["value"] / 1e6
    assert wall == pytest.approx(metrics["wall_throughput"]["value"])


@needs_pv
def test_void_sink_writes_to_dev_null():
    record = run_job(spec("/dev/null", tier_class="void"), pv.run)
    assert by_name(record)["bytes"]["value"] == 4 * MiB
    assert record["extra"]["sink"] == "/dev/null"


def test_over_the_tiers_cap_is_failed_before_pv_runs(tmp_path):
    record = run_job(spec(tmp_path, size="8MiB", max_bytes=MiB), pv.run)
    [status] = record["metrics"]
    assert status["status"] == "failed" and "max_bytes" in status["reason"]
    assert list(tmp_path.iterdir()) == []


@needs_pv
def test_pv_failure_is_recorded_with_pvs_message(tmp_path, monkeypatch):
    monkeypatch.setattr(pv, "command", lambda size: ["pv", "-f", "-a", "-S", "-s", "not-a-size"])
    record = run_job(spec(tmp_path), pv.run)
    [status] = record["metrics"]
    assert status["status"] == "failed" and status["reason"].startswith("pv exited with")
    assert list(tmp_path.iterdir()) == []


def test_missing_pv_is_skipped_in_the_job(tmp_path, monkeypatch):
    real_which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda tool: None if tool == "pv" else real_which(tool))
    [status] = run_job(spec(tmp_path), pv.run)["metrics"]
    assert status["status"] == "skipped" and status["reason"] == "pv is not installed"


def test_missing_pv_stops_the_preflight_with_the_package_to_install(tmp_path, monkeypatch, capsys):
    real_which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda tool: None if tool == "pv" else real_which(tool))
    plan = {
        "study": "ramdisk_macos",
        "tiers": {"scratch": {"path": str(tmp_path), "class": "disk", "max_bytes": None}},
        "points": [{"workload": "pv", "tier": "scratch", "params": {"size": "1MiB"}}],
        "safety_factor": 1.2,
    }
    out = tmp_path / "preflight.json"
    code = preflight.main(["--spec", json.dumps(plan), "--out", str(out)])
    said = capsys.readouterr().err
    assert code == 1 and not Path(out).exists()
    assert "tool pv is not installed" in said and "apt-get install -y pv" in said


# --- the study of document 002 --------------------------------------------------------------


def load_ramdisk_macos():
    config = matrix.load_yaml(REPO / "config/config.yaml")
    return config, matrix.load_study(REPO / "config/studies/ramdisk_macos.yaml", config)


def test_study_has_the_documents_sinks_size_and_repetitions():
    config, study = load_ramdisk_macos()
    tiers = matrix.resolve_tiers(config, REPO / "config/hardware", str(REPO))
    assert study["repetitions"] == 10 and study["document"] == "002"
    points = [p for p in matrix.expand_study(study, tiers, "full") if p.workload == "pv"]
    assert [p.tier for p in points] == ["void", "shm", "disk", "shm_fuse", "shm_bind"]
    assert {pv.planned_bytes(p.params) for p in points} == {450 * MiB}
    smoke = [p for p in matrix.expand_study(study, tiers, "smoke") if p.workload == "pv"]
    assert {pv.planned_bytes(p.params) for p in smoke} == {16 * MiB}


def test_study_runs_on_a_hardware_file_without_views():
    config, study = load_ramdisk_macos()
    tiers = matrix.resolve_tiers(
        {**config, "hardware": "workstation"}, REPO / "config/hardware", str(REPO)
    )
    points = matrix.expand_study(study, tiers, "smoke")
    assert {p.tier for p in points if p.workload == "pv"} == {"void", "shm", "tmp", "nvme"}


#: measured repetitions of the end-to-end run, after the warm-up: the study's 10 would be 66
#: jobs; 2 still tell the summary's n from the jobs run (a warm-up counted would make it 3)
REPETITIONS = 2


@pytest.mark.e2e
def test_ramdisk_macos_smoke_end_to_end(pipeline):
    config = ("scale=smoke", f"repetitions={REPETITIONS}")
    pipeline("-c2", "--configfile", "config/studies/ramdisk_macos.yaml", "--config", *config)
    root = pipeline.root
    study = root / "results/testbox/ramdisk_macos"
    summary = pd.read_csv(study / "summary.csv")
    rates = summary[(summary["workload"] == "pv") & (summary["metric"] == "throughput")]
    measured = set(rates[rates["status"] == "ok"]["tier"])
    assert {"void", "shm", "disk"} <= measured
    for view in ("shm_fuse", "shm_bind"):
        rows = summary[(summary["workload"] == "pv") & (summary["tier"] == view)]
        if view not in measured:  # no bindfs / not root here: skipped, with the reason
            assert set(rows["status"]) == {"skipped"} and rows["reason"].str.len().min() > 10
    assert (rates[rates["status"] == "ok"]["n"] == REPETITIONS).all()
    # same-run ratios only: the void is faster than any file sink, and bindfs is the slowest
    ok = rates[rates["status"] == "ok"].set_index("tier")["median"]
    assert ok["void"] > max(ok.drop("void"))
    if "shm_fuse" in ok:
        assert ok["shm_fuse"] == ok.min()
    manifest = json.loads((study / "figures/pv/manifest.json").read_text())
    assert [entry["name"] for entry in manifest] == ["pv_sinks", "pv_vs_document"]
    assert all((study / "figures/pv" / entry["png"]).stat().st_size > 10_000 for entry in manifest)
    assert "16 MiB" in manifest[0]["caption"] and "no fsync" in manifest[0]["caption"]
    assert "warm-up" in manifest[0]["caption"]
    assert (root / "results/testbox/report.html").stat().st_size > 0
    # every mount undone, every run folder removed
    assert not [
        line for line in Path("/proc/self/mountinfo").read_text().splitlines() if str(root) in line
    ]
    assert [p for p in (root / "results/mounts").rglob("*") if p.is_file()] == []
