"""bench/: the harness and the table of items, then bench/run.py end to end at --tiny size.

The end-to-end tests check every item in the table and the JSON, never speeds.
"""

import json
import math
import os
import re
import shutil
import subprocess
import sys
from types import SimpleNamespace

import pytest
from conftest import REPO

sys.path.insert(0, str(REPO / "bench"))

import cfd_vs_fio  # noqa: E402
import harness  # noqa: E402
import proxy_fidelity  # noqa: E402
import run  # noqa: E402
import verdict_repeatability as repeat  # noqa: E402

#: the end-to-end tests run the bench itself
needs_tools = pytest.mark.skipif(
    any(shutil.which(tool) is None for tool in run.TOOLS),
    reason=f"bench/run.py needs {', '.join(run.TOOLS)}",
)

ITEMS = {1, 2, 4, 5, 6, 7, 8, 9, 10, 11}
#: numbers of retired items, never given again
RETIRED = {3}
#: item 9 times the minicluster, which one process at a time may hold:
#: tests/test_minicluster.py runs it, on the worker that runs the cluster's tests
CLUSTER_ITEMS = {9}
#: what the tiny run here runs
TINY_ITEMS = ITEMS - CLUSTER_ITEMS
#: and item 1 where /dev/shm cannot hold the memory it primes (a container's is often
#: 64 MiB; --tiny primes 265 MiB); under CI=true it must run
TINY_PRIMED = max(
    cfd_vs_fio.primed_bytes(1, cells, cfd_vs_fio.SIZES["tiny"]["writes"])
    for cells in cfd_vs_fio.SIZES["tiny"]["cells"]
)
SHM_TOO_SMALL = (
    {1}
    if os.environ.get("CI") != "true" and shutil.disk_usage(harness.TIER).free < TINY_PRIMED
    else set()
)
#: rows whose --tiny figure may be zero or absent: a share of lessons that agree, and the
#: rows resting on an application's output cost, which can be smaller than its noise at toy
#: sizes (a round whose application cost is not above zero gives no ratio);
#: test_fidelity_rows_pair_their_costs checks those
MAY_BE_EMPTY = {"verdict_agreement", "cfd_fidelity", "fe_fidelity", "fe_fidelity_wall"}
#: figures that rest on a difference of two timings (item 4: a run's time minus Snakemake's
#: start-up timed apart), which a busy machine can make negative at toy sizes
DIFFERENCES = {"noop_job_overhead"}
#: rows of a reduced --tiny run that is no figure of what its goal is about
REDUCED = {"smoke_study", "verdict_agreement", "paper_wall_time"}


# ---------------------------------------------------------------- the harness, fast


def test_item_1_is_skipped_naming_the_tier_where_it_cannot_prime_its_memory(monkeypatch):
    """On a 64 MiB /dev/shm it failed with "OSError: [Errno 28] No space left on device"."""
    usage = shutil.disk_usage("/")._replace(free=64 * 2**20)
    monkeypatch.setattr(cfd_vs_fio.shutil, "disk_usage", lambda path: usage)
    monkeypatch.setattr(cfd_vs_fio, "compare", None)  # never called
    (only,) = cfd_vs_fio.measure("tiny", None, harness.at_least(0.9))
    assert only["key"] == "cfd_write_bandwidth_20000" and only["met"] is None
    assert only["skipped"] == "skipped: /dev/shm has 64 MiB free, item 1 needs 265.2 MiB"


def test_items_are_numbered_once_and_each_module_has_both_sizes():
    assert [item.number for item in run.ITEMS] == sorted(ITEMS)
    assert set(run.RETIRED) == RETIRED and not RETIRED & ITEMS
    for item in run.ITEMS:
        assert callable(item.module.measure), item.number
        assert set(item.module.SIZES) == set(harness.MODES), item.number
        assert item.instrument and item.reference, item.number


def test_docs_table_names_every_item_and_its_module():
    """docs/instruments.md's table and run.ITEMS list the same items, each with its module,
    and the retired numbers as retired."""
    text = (REPO / "docs" / "instruments.md").read_text()
    rows = re.findall(r"^\| (\d+) \|.*`bench/(\w+)\.py` \|$", text, re.MULTILINE)
    assert {int(n): module for n, module in rows} == {
        item.number: item.module.__name__ for item in run.ITEMS
    }
    assert {int(n) for n in re.findall(r"^\| (\d+) \| retired", text, re.MULTILINE)} == RETIRED


def test_only_stops_at_a_retired_or_unknown_item_naming_the_items_there_are():
    with pytest.raises(SystemExit, match=r"item 3 \(.+\) is retired.*choose from 1, 2, 4, 5"):
        run.chosen("3")
    with pytest.raises(SystemExit, match="no item 12; choose from 1, 2, 4"):
        run.chosen("1,12")
    assert run.chosen("1,4") == {1, 4} and run.chosen(None) == ITEMS


def test_the_set_up_installs_every_tool_the_bench_runs():
    """./tierbench installs every workload's tools (``needs --all``): the bench's are among them."""
    from tierbench import needs
    from tierbench.workloads import registry

    every = needs.tools_of([{"workload": name} for name in registry()])
    assert set(run.TOOLS) <= set(every)


def test_rounds_alternate_two_instruments_and_rotate_more():
    assert [harness.rotated(("a", "b"), r) for r in range(3)] == [
        ("a", "b"),
        ("b", "a"),
        ("a", "b"),
    ]
    orders = [harness.rotated("wxyz", r) for r in range(4)]
    assert [order[0] for order in orders] == ["w", "x", "y", "z"]
    assert all(sorted(order) == list("wxyz") for order in orders)


def test_goal_is_met_by_the_median_not_the_extremes():
    goal = harness.at_least(0.9)
    assert harness.row(1, "k", "m", "ratio", [0.5, 0.95, 1.0], goal)["met"] is True
    assert harness.row(1, "k", "m", "ratio", [0.5, 0.85, 1.0], goal)["met"] is False
    assert harness.row(1, "k", "m", "s", [6.0], harness.at_most(5.0, "s"))["met"] is False
    assert harness.row(1, "k", "m", "ratio", [1.0], None)["met"] is None


def test_goal_says_what_an_interval_decides():
    goal = harness.at_most(1.05)
    assert goal.decided(1.01, 1.04) == "the interval meets the goal"
    assert goal.decided(1.06, 1.10) == "the interval misses the goal"
    assert goal.decided(1.01, 1.08).endswith("straddles the goal: undecided")
    assert harness.at_least(0.8).decided(0.7, 0.79) == "the interval misses the goal"


def test_a_failing_item_is_one_failed_row_and_the_others_still_run():
    def broken(mode, scratch, goal):
        raise RuntimeError("no such tool")

    def works(mode, scratch, goal):
        assert scratch.is_dir() and not any(scratch.iterdir())
        return [harness.row(2, "ok", "works", "ratio", [1.0, 2.0, 3.0], goal)]

    items = [
        harness.Item(1, "broken", "ref", harness.at_most(5.0, "s"), SimpleNamespace(
            measure=broken, __name__="broken_item")),
        harness.Item(2, "works", "ref", harness.at_least(0.5), SimpleNamespace(measure=works)),
    ]  # fmt: skip
    result = harness.run_items(items, "tiny", {1, 2}, "bench/run.py --tiny")
    failed, ok = result["rows"]
    assert failed["item"] == 1 and failed["met"] is False and failed["n"] == 0
    assert "RuntimeError: no such tool" in failed["error"]
    assert failed["key"] == "broken_item" and failed["unit"] == "s"
    assert ok["median"] == 2.0 and ok["met"] is True
    lines = result["table"].splitlines()
    assert "| 1 | broken | – | – | 0 | ≤ 5.00 s | **no** | failed: RuntimeError" in lines[-2]
    assert lines[-1] == "| 2 | works | 2.000 | 1.000–3.000 | 3 | ≥ 0.500 | yes |  |"


def write_verdicts(root, study, statuses):
    folder = root / "results" / repeat.MACHINE / study
    folder.mkdir(parents=True)
    verdicts = [{"lesson": f"lesson {i}", "status": s, "text": "", "comparisons": []}
                for i, s in enumerate(statuses)]  # fmt: skip
    (folder / "verdict.json").write_text(json.dumps({"verdicts": verdicts}))


def test_repeatability_agrees_only_when_every_run_gives_the_same_verdict(tmp_path):
    runs = []
    for n, statuses in enumerate(
        (["reproduced", "within_noise"], ["reproduced", "not_reproduced"], ["reproduced"])
    ):
        write_verdicts(tmp_path / f"run{n}", "fe_tmpfs", statuses)
        runs.append(repeat.read_verdicts(tmp_path / f"run{n}"))
    table = repeat.lesson_table(runs)
    assert [entry["agree"] for entry in table] == [True, False]
    assert table[1]["verdicts"] == ["within_noise", "not_reproduced", "missing"]
    goals = (harness.at_least(1.0), harness.at_most(900.0, "s"))
    agreement, wall = repeat.summary_rows(table, [10.0, 11.0, 12.0], "default", None, goals, False)
    assert agreement["median"] == 0.5 and agreement["met"] is False
    assert "1 of 2 lessons agree" in agreement["detail"]
    assert wall["n"] == 3 and wall["met"] is True
    shares = [r["median"] for r in repeat.lesson_rows(table)]
    assert shares == [1.0, pytest.approx(1 / 3)]


def test_an_earlier_run_joins_only_when_it_measured_the_same_pipeline(tmp_path):
    """Runs kept in earlier sittings count only where the pipeline files did not change."""
    head = repeat.git("rev-parse", "HEAD")
    first_commit = repeat.git("rev-list", "--max-parents=0", "HEAD").split()[0]
    same, other = tmp_path / "same", tmp_path / "other"
    for folder, commit in ((same, head), (other, first_commit)):
        write_verdicts(folder, "cfd_dcpmm", ["reproduced"])
        study = folder / "results" / repeat.MACHINE / "cfd_dcpmm"
        (study.parent / "commit").write_text(commit + "\n")
    kept = tmp_path / "same" / "results" / repeat.MACHINE
    assert repeat.earlier_runs([kept], head) == [{("cfd_dcpmm", "lesson 0"): "reproduced"}]
    with pytest.raises(SystemExit, match="whose pipeline differs from"):
        repeat.earlier_runs([tmp_path / "other" / "results" / repeat.MACHINE], head)


def test_repeatability_without_verdicts_is_an_error(tmp_path):
    with pytest.raises(RuntimeError, match="no verdict.json"):
        repeat.read_verdicts(tmp_path)


@pytest.mark.parametrize("kind", ["cfd", "fe"])
def test_proxy_and_application_get_the_same_shape(kind):
    """Only the workload differs between a proxy's job and its application's."""
    k = proxy_fidelity.KINDS[kind]
    shape = proxy_fidelity.SIZES["full"][kind]
    proxy = k["params"](k["proxy"], shape)
    real = k["params"](k["real"], shape)
    shared = set(shape) | {"write_interval", "file_handler", "write_format", "purge_write",
                           "ensemble", "cores", "seed", "frd_every", "elite",
                           "paired_baseline"}  # fmt: skip
    for name in shared & set(proxy) & set(real):
        assert proxy[name] == real[name], name
    assert set(shape) - {"evaluations"} <= set(proxy) & set(real)  # that one counts sets


def test_cfd_costs_are_the_workloads_write_cost():
    assert proxy_fidelity.cfd_costs({"write_cost": 0.10, "time_per_step": 0.25}) == {"within": 0.10}


def test_fe_costs_per_increment_from_pairs():
    """Each pair's difference over the increments of its analysis, then the median."""
    pairs = [
        ({"cpu_time": 1.0 + cost * n, "eval_time": 2.0 + cost * n, "increments": n},
         {"cpu_time": 1.0, "eval_time": 2.0, "increments": n})
        for cost, n in ((0.002, 40), (0.003, 50), (0.004, 60))
    ]  # fmt: skip
    costs = proxy_fidelity.fe_costs(pairs)
    assert costs == pytest.approx({"increment": 0.003, "wall": 0.003})


# ---------------------------------------------------------------- bench/run.py --tiny, slower


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "bench.json"
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "run.py"), "--tiny", "--json", str(out),
         "--only", ",".join(map(str, sorted(TINY_ITEMS)))],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    return done.stdout, json.loads(out.read_text())


@pytest.mark.e2e
@needs_tools
def test_json_has_every_item_and_the_machine(tiny_run):
    _, result = tiny_run
    assert result["mode"] == "tiny"
    assert {row["item"] for row in result["rows"]} == TINY_ITEMS
    assert not [row for row in result["rows"] if "error" in row], "an item failed"
    machine = result["machine"]
    assert machine["host"] and machine["cpu"] and machine["kernel"]
    assert machine["cores"] >= 1
    for key in ("load_start", "load_end"):
        assert len(result[key]) == 3 and all(x >= 0 for x in result[key])
    assert "--tiny" in result["command"]


@pytest.mark.e2e
@needs_tools
def test_figures_are_finite_and_positive(tiny_run):
    _, result = tiny_run
    measured = [
        row for row in result["rows"] if "skipped" not in row and row["key"] not in MAY_BE_EMPTY
    ]
    assert {row["item"] for row in measured} == TINY_ITEMS - {8} - SHM_TOO_SMALL
    for row in measured:
        assert row["n"] == len(row["values"]) >= 1, row["key"]
        for value in (row["median"], row["min"], *row["values"]):
            assert math.isfinite(value) and (value > 0 or row["key"] in DIFFERENCES), row["key"]
        assert row["min"] <= row["median"] <= row["max"], row["key"]


@pytest.mark.e2e
@needs_tools
def test_goal_flags(tiny_run):
    _, result = tiny_run
    for row in result["rows"]:
        if row["goal"] is None:
            assert row["met"] is None, row["key"]
            continue
        assert row["goal"]["op"] in (">=", "<=") and row["goal"]["value"] > 0
        if "skipped" in row:  # the default study at --tiny
            assert row["met"] is None
        elif row["key"] in REDUCED:  # --tiny: reduced runs, not the figures the goals are for
            assert row["met"] is None
        elif row["key"] in MAY_BE_EMPTY and row["n"] == 0:  # no round measured: not met, why
            assert row["met"] is False and "without a ratio" in row["detail"], row["key"]
        else:
            assert isinstance(row["met"], bool), row["key"]
    keys = {row["key"] for row in result["rows"]}
    assert {"cfd_creates", "dry_run_paper_full", "noop_job_overhead"} <= keys
    assert any(key.startswith("cfd_write_bandwidth") for key in keys)
    default = next(row for row in result["rows"] if row["key"] == "default_study")
    assert default["skipped"] == "skipped (--tiny)"


@pytest.mark.e2e
@needs_tools
def test_table_prints_every_row(tiny_run):
    stdout, result = tiny_run
    lines = [line for line in stdout.splitlines() if line.startswith("| ")]
    assert lines[0].startswith("| # | measure | median")
    body = lines[2:]
    assert len(body) == len(result["rows"])
    assert {int(line.split("|")[1]) for line in body} == TINY_ITEMS
    assert "skipped (--tiny)" in stdout
    assert result["machine"]["host"] in stdout
    assert result["table"] in stdout


@pytest.mark.e2e
@needs_tools
def test_repeatability_lists_each_lesson_of_each_run(tiny_run):
    _, result = tiny_run
    rows = {row["key"]: row for row in result["rows"] if row["item"] == 6}
    agreement, wall = rows["verdict_agreement"], rows["paper_wall_time"]
    runs = repeat.SIZES["tiny"]["runs"]
    assert wall["n"] == runs
    statuses = {"reproduced", "not_reproduced", "within_noise", "inconclusive", "missing"}
    for entry in agreement["lessons"]:
        assert len(entry["verdicts"]) == runs and set(entry["verdicts"]) <= statuses
        assert entry["agree"] == (len(set(entry["verdicts"])) == 1)
    assert agreement["total"] == len(agreement["lessons"]) >= 1
    assert agreement["median"] == agreement["agree"] / agreement["total"]
    assert len([key for key in rows if key.startswith("lesson_")]) == agreement["total"]


@pytest.mark.e2e
@needs_tools
def test_resultsdb_timing_times_every_append_and_compare(tiny_run):
    _, result = tiny_run
    rows = {row["key"]: row for row in result["rows"] if row["item"] == 7}
    size = run.resultsdb_timing.SIZES["tiny"]
    assert rows["resultsdb_append"]["n"] == 2 * size["studies"] * size["rounds"]
    assert rows["compare_two_papers"]["n"] == size["rounds"]


@pytest.mark.e2e
@needs_tools
def test_fidelity_rows_pair_their_costs(tiny_run):
    """Item 8: per proxy, one cost of each workload per counted round, ratios where defined."""
    _, result = tiny_run
    item = [row for row in result["rows"] if row["item"] == 8]
    assert [row["key"] for row in item if "skipped" in row] == ["sweep"]  # full mode only
    rows = {row["key"]: row for row in item if "skipped" not in row}
    assert set(rows) == {"cfd_fidelity", "fe_fidelity", "fe_fidelity_wall"}
    for row in rows.values():
        proxy, real = row["proxy_cost_s"], row["real_cost_s"]
        assert len(proxy) == len(real) == proxy_fidelity.SIZES["tiny"]["rounds"]
        assert all(math.isfinite(v) for v in proxy + real)
        expected = [p / r for p, r in zip(proxy, real, strict=True) if r > 0]
        assert row["values"] == pytest.approx(expected)
    assert isinstance(rows["cfd_fidelity"]["met"], bool)
    assert rows["fe_fidelity_wall"]["goal"] is None
    # FE is judged per increment, on CPU time: as the workloads report it for each increment
    for name in ("fe_proxy", "calculix"):
        assert rows["fe_fidelity"]["side"][name]["increments_median"] >= 1


def test_the_sweep_gives_a_share_of_faithful_shapes_and_a_cost_row_per_shape_and_tier():
    """Item 8's sweep rows from a fidelity.json: three cells per rank, the largest twice as
    costly for the proxy: 2 of 3 shapes faithful, its cost rows not met."""
    from test_fidelity import cfd_verdict, sweep

    entry = cfd_verdict(sweep({1000: 1.02, 10000: 0.98, 100000: 2.0}))
    rows = proxy_fidelity.shape_rows({"proxies": [entry]}, harness.at_least(0.9))
    share = rows[0]
    assert share["key"] == "cfd_proxy_sweep_faithful"
    assert share["median"] == pytest.approx(2 / 3) and share["met"] is False
    assert "cells_per_rank=100000: differs" in share["detail"]
    costs = rows[1:]
    assert len(costs) == 3 * 2  # shapes x tiers
    large = [r for r in costs if "cells_per_rank=100000" in r["measure"]]
    assert {r["met"] for r in large} == {False} and len(large) == 2
    assert all(r["met"] for r in costs if r not in large)
