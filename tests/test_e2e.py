"""The default study end to end on the smoke preset, in a scratch copy of the pipeline."""

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pandas as pd
import pytest
from conftest import PIPELINE_FILES, REPO, snakemake_command
from tierbench import rundir

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    # a folder with a space: every rule's command must quote the paths it is given
    root = tmp_path_factory.mktemp("e2e") / "tier bench"
    root.mkdir()
    for name in PIPELINE_FILES:
        source = REPO / name
        copy = shutil.copytree if source.is_dir() else shutil.copy2
        copy(source, root / name)
    before_shm = {p.name for p in Path("/dev/shm").iterdir()}
    done = subprocess.run(
        [*snakemake_command(), "-c2", "--config", "scale=smoke"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    return root, before_shm


def test_results_csv_has_values_with_units(smoke_run):
    root, _ = smoke_run
    results = pd.read_csv(root / "results/testbox/default/results.csv")
    ok = results[results["status"] == "ok"]
    assert set(ok["tier"]) == {"shm", "disk"}
    assert set(ok["experiment"]) == {"worst_case", "sequential", "metadata"}
    assert (ok["value"] > 0).all()
    assert ok["unit"].notna().all() and (ok["unit"] != "").all()
    assert set(ok["repetition"]) == {0, 1, 2, 3}
    assert set(results.loc[results["repetition"] == 0, "phase"]) == {"warmup"}
    bandwidth = ok[ok["metric"].str.endswith("_bandwidth")]
    assert set(bandwidth["unit"]) == {"MB/s"}
    # one row per run and metric: 18 fio points and 2 metadata points x 4 repetitions
    runs = results.drop_duplicates(["experiment", "tier", "point", "repetition"])
    assert len(runs) == (18 + 2) * 4
    costs = ok[ok["metric"].str.endswith("_cost") & (ok["experiment"] == "metadata")]
    assert set(costs["unit"]) == {"us"} and len(costs) == 2 * 4 * 10  # 8 phases and the tree's


def test_summary_has_median_and_spread(smoke_run):
    root, _ = smoke_run
    summary = pd.read_csv(root / "results/testbox/default/summary.csv")
    ok = summary[summary["status"] == "ok"]
    assert (ok["n"] == 3).all()
    assert ((ok["min"] <= ok["median"]) & (ok["median"] <= ok["max"])).all()
    # the worst case on RAM beats the worst case on disk, measured in the same run
    worst = ok[(ok["experiment"] == "worst_case") & (ok["metric"] == "write_bandwidth")]
    by_tier = worst.set_index("tier")["median"]
    assert by_tier["shm"] > by_tier["disk"]


def test_report_embeds_every_figure(smoke_run):
    root, _ = smoke_run
    html = (root / "results/testbox/report.html").read_text()
    manifests = list((root / "results/testbox/default/figures").glob("*/manifest.json"))
    figures = [(m.parent, entry) for m in manifests for entry in json.loads(m.read_text())]
    # fio's families and the metadata workload's own
    names = {f["name"] for _, f in figures}
    assert names >= {"fio_sequential", "fio_worst_case", "metadata_cost_per_operation"}
    assert {m.parent.name for m in manifests} == {"fio", "metadata"}
    embedded = re.findall(r'<img alt="([^"]+)" src="data:image/png;base64,', html)
    assert sorted(embedded) == sorted(f["title"] for _, f in figures)
    for folder, figure in figures:
        assert figure["caption"] in html.replace("&#39;", "'").replace("&amp;", "&")
        assert (folder / figure["svg"]).exists()
    assert "Where it ran" in html and "fio-3" in html


def test_provenance_and_logs(smoke_run):
    root, _ = smoke_run
    tiers = json.loads((root / "results/testbox/default/provenance/tiers.json").read_text())
    assert set(tiers["tiers"]) == {"shm", "disk"}
    assert tiers["tiers"]["shm"]["fs_type"] == "tmpfs"
    assert tiers["tools"]["fio"] and tiers["host"]["cores"] >= 1
    logs = list((root / "results/testbox/default/logs/fio").rglob("*.log"))
    assert len(logs) == 18 * 4


def test_nothing_left_on_the_tiers(smoke_run):
    root, before_shm = smoke_run
    assert list((root / "results/scratch").iterdir()) == []
    # a run folder of a run still going (another test's, in parallel) is not left over
    leftovers = {p.name for p in rundir.stale_folders("/dev/shm")} - before_shm
    assert not leftovers


def test_snakemake_report_zip(smoke_run):
    root, _ = smoke_run
    done = subprocess.run(
        [*snakemake_command(), "--config", "scale=smoke", "--report", "report.zip"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    with zipfile.ZipFile(root / "report.zip") as archive:
        names = archive.namelist()
    assert any(name.endswith("fio_worst_case.png") for name in names)
    assert any(name.endswith("results.csv") for name in names)


def test_a_second_machine_keeps_both_and_compares(smoke_run):
    """Issue 14's walk-through: the same study with another hardware file lands beside the
    first machine's results, both runs are in the database, and compare sets them side by
    side. (Last in this module: it adds a second machine to the shared run.)"""
    root, _ = smoke_run
    first = root / "results/testbox/default"
    before = {p: p.stat().st_mtime_ns for p in first.rglob("*") if p.is_file()}
    (root / "config/hardware/second.yaml").write_text(
        "name: second\ncores: 2\nmemory: 4GiB\ntiers:\n"
        "  shm: {path: /dev/shm, class: shm}\n"
        "  disk: {path: results/scratch-second, class: disk}\n"
    )
    # fewer repetitions than the first: the test is about where results go, not their values
    second = ["scale=smoke", "hardware=second", "repetitions=2", "warmup=False"]
    done = subprocess.run(
        [*snakemake_command(), "-c2", "--config", *second],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (root / "results/second/report.html").is_file()
    assert {p: p.stat().st_mtime_ns for p in first.rglob("*") if p.is_file()} == before
    env = {**os.environ, "PYTHONPATH": str(root / "workflow")}
    runs = subprocess.run(
        [sys.executable, "-m", "tierbench.resultsdb_cli", "list", "--db",
         "results/tierbench.sqlite"],
        cwd=root, capture_output=True, text=True, env=env, check=True,
    ).stdout  # fmt: skip
    assert "testbox" in runs and "second" in runs
    compared = subprocess.run(
        [sys.executable, "-m", "tierbench.compare", "testbox", "second",
         "--db", "results/tierbench.sqlite", "--out", "results/compare.html"],
        cwd=root, capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert compared.returncode == 0, compared.stderr
    html = (root / "results/compare.html").read_text()
    assert "testbox" in html and "second" in html and "worst_case" in html
