"""The default study end to end on the smoke preset, in a scratch copy of the pipeline."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pandas as pd
import pytest
from conftest import PIPELINE_FILES, REPO, job_stats, snakemake_command
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
    # a share of calls the tier refused may be 0 %; every other value is a positive measure
    refused = ok["metric"].str.endswith("_refused")
    assert (ok.loc[~refused, "value"] > 0).all() and ok.loc[refused, "value"].between(0, 100).all()
    assert refused.sum() == 4 * 4  # one per metadata point and repetition
    assert ok["unit"].notna().all() and (ok["unit"] != "").all()
    assert set(ok["repetition"]) == {0, 1, 2, 3}
    assert set(results.loc[results["repetition"] == 0, "phase"]) == {"warmup"}
    bandwidth = ok[ok["metric"].str.endswith("_bandwidth")]
    assert set(bandwidth["unit"]) == {"MB/s"}
    # one row per run and metric: 18 fio points and 4 metadata points (2 tiers, with and
    # without fsync) x 4 repetitions
    runs = results.drop_duplicates(["experiment", "tier", "point", "repetition"])
    assert len(runs) == (18 + 4) * 4
    costs = ok[ok["metric"].str.endswith("_cost") & (ok["experiment"] == "metadata")]
    assert set(costs["unit"]) == {"us"} and len(costs) == 4 * 4 * 11  # 9 phases and the tree's


def test_summary_has_median_and_spread(smoke_run):
    root, _ = smoke_run
    summary = pd.read_csv(root / "results/testbox/default/summary.csv")
    ok = summary[summary["status"] == "ok"]
    # every measured repetition, but fio's CPU usage: a run shorter than the kernel's CPU
    # accounting tick reads 0 %, which is no reading
    busy = ok["metric"] == "cpu_usage"
    assert (ok.loc[~busy, "n"] == 3).all()
    assert ok.loc[busy, "n"].between(1, 3).all()
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


def planned_jobs(root: Path) -> dict[str, int]:
    """The jobs a dry run of the smoke study would run, by rule."""
    done = subprocess.run(
        [*snakemake_command(), "-n", "-c2", "--config", "scale=smoke"],
        cwd=root, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return job_stats(done.stdout)


def test_a_deleted_record_or_study_folder_is_measured_again(smoke_run):
    """A user who deletes a record, or the study's folder, and runs again gets them measured
    again and the report made anew: the page alone, newer than every file left, would have
    Snakemake say "Nothing to be done". (Each file is put back as it was.)"""
    root, _ = smoke_run
    study = root / "results/testbox/default"
    assert planned_jobs(root) == {}
    record = next((study / "raw/fio").rglob("rep*.json"))
    aside = Path(tempfile.mkdtemp(prefix="tierbench-aside-"))
    try:
        shutil.move(record, aside / "record.json")
        jobs = planned_jobs(root)
        assert (jobs.get("fio"), jobs.get("aggregate"), jobs.get("report")) == (1, 1, 1), jobs
        shutil.move(aside / "record.json", record)
        shutil.move(study, aside / "study")
        jobs = planned_jobs(root)
        assert jobs.get("plan") == 1 and jobs.get("fio", 0) > 1 and jobs.get("report") == 1, jobs
    finally:
        if (aside / "record.json").exists():
            shutil.move(aside / "record.json", record)
        if (aside / "study").exists():
            shutil.move(aside / "study", study)
        shutil.rmtree(aside)
    assert planned_jobs(root) == {}


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
    # one repetition: the test is about where results go, not their values
    second = ["scale=smoke", "hardware=second", "repetitions=1", "warmup=False"]
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
    html = compare_page(root, env)
    assert "testbox" in html and "second" in html and "worst_case" in html


def compare_page(root: Path, env: dict) -> str:
    """results/compare.html of testbox against second, from the run's database."""
    compared = subprocess.run(
        [sys.executable, "-m", "tierbench.compare", "testbox", "second",
         "--db", "results/tierbench.sqlite", "--out", "results/compare.html"],
        cwd=root, capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert compared.returncode == 0, compared.stderr
    return (root / "results/compare.html").read_text()


def test_a_job_is_predicted_on_every_tier_and_on_a_machine_imported_from_an_export(smoke_run):
    """Issue 55: the example command, timed and traced, gets prediction.json beside its
    results: from each tier it was profiled on to the other, checked where it ran, and to
    the second machine's tiers; an export of that machine imported into another checkout's
    database is predicted on as well. (After the second machine: it needs its costs.)"""
    root, _ = smoke_run
    # the shm tier in a folder of its own: another test's Open MPI may write its segments at
    # /dev/shm's top level meanwhile, and the command workload refuses a write beside its
    # run folder (the tier's name, and so its costs from the default study, stay the same)
    private = Path(tempfile.mkdtemp(prefix="tierbench-e2e-", dir="/dev/shm"))
    (root / "private_shm.yaml").write_text(f"tiers:\n  shm:\n    path: {private}\n")
    try:
        done = subprocess.run(
            [*snakemake_command(), "-c2", "--configfile", "config/studies/examples/command.yaml",
             "private_shm.yaml", "--config", "scale=smoke", "repetitions=2", "warmup=False"],
            cwd=root, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
    finally:
        shutil.rmtree(private, ignore_errors=True)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads((root / "results/testbox/example_command/prediction.json").read_text())
    jobs = {(j["experiment"], j["tier"]) for j in found["jobs"]}
    assert jobs == {("ensemble_setup", "shm"), ("ensemble_setup", "disk")}
    assert all(j["calls"]["file_create"] > 0 and j["rest"] > 0 for j in found["jobs"])
    here = {
        (r["profiled_on"]["tier"], r["tier"]): r for r in found["rows"] if r["machine"] == "testbox"
    }
    assert set(here) == {("shm", "disk"), ("disk", "shm")}
    for row in here.values():
        assert row["low"] <= row["predicted"] <= row["high"] and row["measured_n"] == 2
        assert row["ratio"] == pytest.approx(row["measured"] / row["predicted"], rel=0.05)
        assert row["ratio_low"] <= row["ratio"] <= row["ratio_high"]
        assert row["check"] in ("holds", "fails", "undecided")
    assert {r["tier"] for r in found["rows"] if r["machine"] == "second"} == {"shm", "disk"}
    html = (root / "results/testbox/report.html").read_text()
    assert "What your job would take on other tiers" in html and 'data-prediction="' in html

    # another checkout: only the second machine's export and this machine's job in its database
    env = {**os.environ, "PYTHONPATH": str(root / "workflow")}

    def db_cli(*args):
        return subprocess.run(
            [sys.executable, "-m", "tierbench.resultsdb_cli", *args],
            cwd=root, capture_output=True, text=True, env=env, check=True,
        )  # fmt: skip

    db_cli("export", "--db", "results/tierbench.sqlite", "--machine", "second",
           "--out", "results/second.json.gz")  # fmt: skip
    db_cli("export", "--db", "results/tierbench.sqlite", "--machine", "testbox",
           "--out", "results/testbox.json.gz")  # fmt: skip
    db_cli("import", "--db", "results/elsewhere.sqlite", "results/testbox.json.gz")
    db_cli("import", "--db", "results/elsewhere.sqlite", "results/second.json.gz")
    predicted = subprocess.run(
        [sys.executable, "-m", "tierbench.predict", "testbox", "--study", "example_command",
         "--db", "results/elsewhere.sqlite"],
        cwd=root, capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert predicted.returncode == 0, predicted.stderr
    assert (
        "second/disk: predicted" in predicted.stdout and "second/shm: predicted" in predicted.stdout
    )
    html = compare_page(root, env)
    assert "Each side's jobs on every tier of the sides, predicted" in html
    assert "ensemble_setup" in html and "second/disk" in html
