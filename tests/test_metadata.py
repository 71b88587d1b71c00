"""metadata: the loop does every operation it reports, leaves nothing, and its units add up.

Sizes are tiny; the one comparison of speeds is within one run (a stat the
dentry cache answers against a create), never an absolute speed.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from conftest import job_spec
from tierbench import pagecache, plotting
from tierbench.errors import PointFailed
from tierbench.figures import metadata as figure
from tierbench.runner import run_job
from tierbench.syscalls import parse_table
from tierbench.workloads import metadata

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")
FLAT = {"items": 40, "layout": "flat", "file_size": 100}
TREE = {"items": 40, "layout": "tree", "branching": 3, "depth": 2, "file_size": 0}


def by_name(record: dict) -> dict[str, dict]:
    return {m["metric"]: m for m in record["metrics"]}


def run_point(folder, params, **fields) -> dict:
    return run_job(job_spec("metadata", folder, params, **fields), metadata.run)


@needs_gcc
@pytest.mark.parametrize("params", [FLAT, TREE, {**TREE, "fsync": True}], ids=str)
def test_every_phase_has_a_rate_and_a_cost_and_nothing_is_left(tmp_path, params):
    metrics = by_name(run_point(tmp_path, params))
    phases = metadata.CYCLE + (metadata.TREE_PHASES if params["layout"] == "tree" else ())
    kinds = ("rate", "cost", "cpu")
    refused = f"{metadata.NOREPLACE}_refused"
    assert set(metrics) == {f"{p}_{kind}" for p in phases for kind in kinds} | {"cycles", refused}
    # a local file system renames without replacing; GlusterFS's FUSE client refuses it
    assert (metrics[refused]["value"], metrics[refused]["unit"]) == (0, "%")
    for phase in phases:
        rate, cost, cpu = (metrics[f"{phase}_{kind}"] for kind in kinds)
        assert (rate["unit"], cost["unit"], cpu["unit"]) == ("ops/s", "us", "us")
        # one phase's time over its operations, either way up
        assert rate["value"] * cost["value"] == pytest.approx(1e6)
        # a call's CPU time is part of its time (the two clocks read apart: 2 us of slack)
        assert 0 <= cpu["value"] <= cost["value"] + 2
    assert metrics["cycles"]["value"] == 1
    assert list(tmp_path.iterdir()) == []  # the run folder is removed, and nothing beside it


@needs_gcc
def test_min_time_repeats_whole_cycles(tmp_path):
    metrics = by_name(run_point(tmp_path, {**FLAT, "min_time": 0.05}))
    # 40 items a phase take well under 50 ms on any tier that is not a network one
    assert metrics["cycles"]["value"] >= 1
    assert list(tmp_path.iterdir()) == []


@needs_gcc
@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")
@pytest.mark.parametrize("params", [TREE, {**FLAT, "fsync": True}], ids=str)
def test_the_kernel_saw_every_operation_the_loop_reports(tmp_path, params):
    """strace counts the loop's own calls: each phase's count is what the kernel did."""
    params = job_spec("metadata", tmp_path, params)["params"]
    job = type("J", (), {"extra": {}})()
    binary = metadata.compile_loop(tmp_path, job)
    root = tmp_path / "root"
    root.mkdir()
    table_file = tmp_path / "strace.txt"
    done = subprocess.run(
        ["strace", "-f", "-c", "-o", str(table_file)] + metadata.command(binary, root, params),
        capture_output=True,
        text=True,
        check=True,
    )
    table = parse_table(table_file.read_text())

    def calls(*names):  # a call and its *at twin (an architecture has one or both)
        return sum(table.get(name, {}).get("calls", 0) for name in names)

    items, folders = params["items"], metadata.tree_folders(params)
    phases = metadata.parse_phases(done.stdout)
    assert metadata.check_counts(phases, params) == 1
    assert calls("mkdir", "mkdirat") == phases["dir_create"][0] + folders == items + folders
    # folders and files removed (rmdir and unlink are both unlinkat on some architectures)
    assert calls("rmdir", "unlink", "unlinkat") == items + folders + items
    assert calls("rename", "renameat", "renameat2") == 2 * items  # there and back
    assert calls("fsync") == (items if params["fsync"] else 0)
    # every file opened twice (created, read), besides what the loader opens
    assert items * 2 <= calls("open", "openat") <= items * 2 + 10
    assert list(root.iterdir()) == []


@needs_gcc
def test_a_stat_from_the_dentry_cache_is_cheaper_than_a_create(tmp_path):
    """Measured in one run: a create allocates an inode, the stat after it finds it cached."""
    metrics = by_name(run_point(tmp_path, {"items": 500, "layout": "flat", "min_time": 0.2}))
    assert metrics["file_stat_cost"]["value"] < metrics["file_create_cost"]["value"]


@needs_gcc
def test_a_failing_call_fails_the_point_naming_it(tmp_path, monkeypatch):
    real = metadata.command

    def blocked(binary, root, params):
        (Path(root) / "d0").mkdir()  # the loop's first folder is already there
        return real(binary, root, params)

    monkeypatch.setattr(metadata, "command", blocked)
    [status] = run_point(tmp_path, FLAT)["metrics"]
    assert status["status"] == "failed"
    assert status["reason"].startswith("the metadata loop exited with 2: metadata: mkdir ")
    assert status["reason"].endswith("/d0: File exists")
    assert list(tmp_path.iterdir()) == []


def test_counts_that_do_not_add_up_fail():
    params = job_spec("metadata", "/x", FLAT)["params"]
    good = {name: (80, 0.01, 0.008) for name in metadata.CYCLE}
    assert metadata.check_counts(good, params) == 2
    with pytest.raises(PointFailed, match="file_stat: 79 operations, expected 2 cycles x 40"):
        metadata.check_counts({**good, "file_stat": (79, 0.01, 0.008)}, params)
    with pytest.raises(PointFailed, match="reported phases"):
        metadata.check_counts({k: v for k, v in good.items() if k != "dir_stat"}, params)
    with pytest.raises(PointFailed, match="too short to time"):
        metadata.phase_metrics({"dir_stat": (40, 0.0, 0.0)})
    with pytest.raises(PointFailed, match="unexpected line"):
        metadata.parse_phases("dir_stat 40 0.01\n")


def test_tree_sizes_and_the_cap_on_leaves():
    params = {"layout": "tree", "branching": 10, "depth": 2}
    assert metadata.tree_folders(params) == 110 and metadata.leaves(params) == 100
    assert metadata.tree_folders({"layout": "flat"}) == 0
    with pytest.raises(ValueError, match="1000000 leaves; at most 100000"):
        metadata.check_params({"layout": "tree", "branching": 10, "depth": 6})


def test_void_is_not_applicable():
    [status] = run_point("/dev/null", FLAT, tier="void", tier_class="void")["metrics"]
    assert status["status"] == "not_applicable"


def test_fsync_reaches_the_device_and_without_it_stays_in_memory():
    limits = {"ram": 1 << 34, "dirty_limit": 1 << 30}
    assert metadata.page_cache({**TREE, "fsync": True}, limits)["page_cache"] == pagecache.DEVICE
    state = metadata.page_cache({**TREE, "fsync": False}, limits)["page_cache"]
    assert state == pagecache.IN_MEMORY


@pytest.mark.parametrize("size", [0, 100, "4k"])
def test_a_study_may_give_file_size_as_bytes_or_a_size(size):
    """0 is no size of the config schema's, 100 is both a size and bytes: either is valid."""
    from conftest import REPO
    from tierbench import matrix

    config = matrix.load_yaml(REPO / "config/config.yaml")
    [experiment] = [e for e in config["experiments"] if e["workload"] == "metadata"]
    experiment["params"]["file_size"] = size
    tiers = matrix.resolve_tiers(config, REPO / "config/hardware", str(REPO))
    points = matrix.expand_study(matrix.study_of(config), tiers, "default")
    assert {p.params["file_size"] for p in points if p.workload == "metadata"} == {size}


def test_the_figure_has_a_panel_per_point_and_says_each_in_words(tmp_path, monkeypatch):
    """One panel per point, its title in words, the phases each point ran along x."""
    rows = []
    for point in ("layout=flat+fsync=false", "layout=tree+fsync=true"):
        phases = metadata.CYCLE + (metadata.TREE_PHASES if "tree" in point else ())
        for tier, cost in (("shm", 1.0), ("disk", 30.0)):
            for phase in phases:
                rows.append(
                    dict(study="s", workload="metadata", experiment="m", tier=tier, point=point,
                         metric=f"{phase}_cost", median=cost, min=cost * 0.9, max=cost * 1.1,
                         n=3, unit="us", status="ok", reason="")
                )  # fmt: skip
            refused = 100.0 if tier == "disk" and "tree" in point else 0.0
            rows.append(
                dict(study="s", workload="metadata", experiment="m", tier=tier, point=point,
                     metric=f"{metadata.NOREPLACE}_refused", median=refused, min=refused,
                     max=refused, n=3, unit="%", status="ok", reason="")
            )  # fmt: skip
    drawn, marked = [], []
    save = plotting.save

    def keep(fig, *args):
        drawn.append([(a.get_title(), len(a.get_xticks())) for a in fig.axes if a.get_visible()])
        marked.extend((a.get_title(), t.get_text()) for a in fig.axes for t in a.texts)
        save(fig, *args)

    monkeypatch.setattr(plotting, "save", keep)
    (png,) = figure.make(pd.DataFrame(rows), str(tmp_path), study="s")
    assert png.name == "metadata_cost_per_operation.png" and png.stat().st_size > 10_000
    assert drawn == [[("one folder, no fsync", 9), ("a tree of folders, fsync before close", 11)]]
    # the tier that refused the rename without replacing is marked where it did, only there
    assert marked == [("a tree of folders, fsync before close", "refused")]


def test_calls_the_tier_refused_are_a_share_of_their_phase():
    """GlusterFS's FUSE client answers renameat2(RENAME_NOREPLACE) with EINVAL, each time."""
    text = (
        "file_rename 40 0.2 0.01\nfile_rename_noreplace 40 0.08 0.004\n"
        "refused file_rename_noreplace 40\n"
    )
    phases = metadata.parse_phases(text)
    assert set(phases) == {"file_rename", metadata.NOREPLACE}
    [share] = metadata.refused_metrics(phases, metadata.refused_calls(text))
    assert (share["metric"], share["value"], share["unit"]) == (
        "file_rename_noreplace_refused",
        100,
        "%",
    )
    assert metadata.refused_metrics(phases, {})[0]["value"] == 0
