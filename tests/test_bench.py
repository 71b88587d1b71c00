"""bench/run.py end to end at --tiny size: every item in the table and the JSON, no speeds."""

import json
import math
import shutil
import subprocess
import sys

import pytest
from conftest import REPO

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        any(shutil.which(tool) is None for tool in ("fio", "mpiexec", "gcc")),
        reason="bench/run.py needs fio, mpiexec and gcc",
    ),
]

ITEMS = {1, 2, 3, 4, 5}


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "bench.json"
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "run.py"), "--tiny", "--json", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    return done.stdout, json.loads(out.read_text())


def test_json_has_every_item_and_the_machine(tiny_run):
    _, result = tiny_run
    assert result["mode"] == "tiny"
    assert {row["item"] for row in result["rows"]} == ITEMS
    assert not [row for row in result["rows"] if "error" in row], "an item failed"
    machine = result["machine"]
    assert machine["host"] and machine["cpu"] and machine["kernel"]
    assert machine["cores"] >= 1
    for key in ("load_start", "load_end"):
        assert len(result[key]) == 3 and all(x >= 0 for x in result[key])
    assert "--tiny" in result["command"]


def test_figures_are_finite_and_positive(tiny_run):
    _, result = tiny_run
    measured = [row for row in result["rows"] if "skipped" not in row]
    assert {row["item"] for row in measured} == ITEMS
    for row in measured:
        assert row["n"] == len(row["values"]) >= 1, row["key"]
        for value in (row["median"], row["min"], *row["values"]):
            assert math.isfinite(value) and value > 0, row["key"]
        assert row["min"] <= row["median"] <= row["max"], row["key"]


def test_goal_flags(tiny_run):
    _, result = tiny_run
    for row in result["rows"]:
        if row["goal"] is None:
            assert row["met"] is None, row["key"]
            continue
        assert row["goal"]["op"] in (">=", "<=") and row["goal"]["value"] > 0
        if "skipped" in row:  # the default study at --tiny
            assert row["met"] is None
        elif row["key"] == "smoke_study":  # --tiny: a reduced smoke run, not the preset's figure
            assert row["met"] is None
        else:
            assert isinstance(row["met"], bool), row["key"]
    keys = {row["key"] for row in result["rows"]}
    assert {"cfd_creates", "fe_harness_overhead", "dry_run_paper_full", "noop_job_overhead"} <= keys
    assert any(key.startswith("cfd_write_bandwidth") for key in keys)
    default = next(row for row in result["rows"] if row["key"] == "default_study")
    assert default["skipped"] == "skipped (--tiny)"


def test_fe_overhead_pairs_every_evaluation(tiny_run):
    """Item 3 runs each evaluation output-off and to the void: one pair per evaluation."""
    _, result = tiny_run
    row = next(row for row in result["rows"] if row["key"] == "fe_harness_overhead")
    evaluations = 2 * 4 * 1  # --tiny: 2 rounds of population 4 x 1 generation
    assert row["n"] == len(row["off_s"]) == len(row["void_s"]) == evaluations
    ratios = [v / o for o, v in zip(row["off_s"], row["void_s"], strict=True)]
    assert sorted(ratios) == pytest.approx(sorted(row["values"]))


def test_table_prints_every_row(tiny_run):
    stdout, result = tiny_run
    lines = [line for line in stdout.splitlines() if line.startswith("| ")]
    assert lines[0].startswith("| # | measure | median")
    body = lines[2:]
    assert len(body) == len(result["rows"])
    assert {int(line.split("|")[1]) for line in body} == ITEMS
    assert "skipped (--tiny)" in stdout
    assert result["machine"]["host"] in stdout
    assert result["table"] in stdout
