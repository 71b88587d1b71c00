"""stage: a case copied from the shared tier to a tier, timed; its source named at plan time;
and the report's break-even of staging (tierbench.staging)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import REPO, job_spec, study_for_report
from tierbench import cluster, matrix, pagecache, report, staging
from tierbench.errors import ConfigError, PointFailed, PointSkipped
from tierbench.intervals import Sample
from tierbench.runner import Job, run_job
from tierbench.workloads import get, stage
from tierbench.workloads.cfd import foam

CASE = {"ranks": 2, "cells_per_rank": 500, "file_set": "document_001"}
CONFIG = yaml.safe_load((REPO / "config/config.yaml").read_text())


@pytest.fixture(autouse=True)
def fresh_job_hosts():
    """A test's Slurm job is its own: the job's host list is read anew, and forgotten."""
    cluster.job_hosts.cache_clear()
    yield
    cluster.job_hosts.cache_clear()


def tiers(tmp_path, shared: bool = True) -> dict:
    """Two tiers of a run in tmp folders: a node-local one and, if asked, a shared one."""
    found = {
        "local": {"path": str(tmp_path / "local"), "class": "tmpfs"},
        "void": {"path": "/dev/null", "class": "void"},
    }
    if shared:
        found["lustre"] = {"path": str(tmp_path / "lustre"), "class": "lustre"}
    for spec in found.values():
        if spec["class"] != "void":
            os.makedirs(spec["path"], exist_ok=True)
        spec["max_bytes"] = None
    return found


def spec_of(tmp_path, params=None, **fields) -> dict:
    """A job's spec for the local tier, its case staged from the lustre tier."""
    (tmp_path / "source").mkdir(exist_ok=True)
    (tmp_path / "target").mkdir(exist_ok=True)
    named = matrix.named_tier_spec(
        "source",
        {"tier": "lustre"},
        {"lustre": {"path": str(tmp_path / "source"), "class": "lustre", "max_bytes": None}},
    )
    return job_spec("stage", tmp_path / "target", {**CASE, **(params or {})}, **{**named, **fields})


def values(record) -> dict:
    for m in record["metrics"]:
        assert m["status"] == "ok", m["reason"]
    return {m["metric"]: m["value"] for m in record["metrics"]}


@pytest.fixture
def no_slurm(monkeypatch):
    for name in ("SLURM_JOB_ID", "SLURM_STEP_ID"):
        monkeypatch.delenv(name, raising=False)


# ------------------------------------------------------------------ the copy


def test_a_case_is_copied_counted_and_both_tiers_left_clean(tmp_path, no_slurm):
    built = tmp_path / "built"
    stage.build_proxy_case(built, CASE)
    case = stage.tally(built)
    # the proxy's layout: processor<rank>/0/ with one write's 8 files and 3 folders
    assert case["files"] == 2 * foam.files_per_write("document_001")
    assert case["dirs"] == 2 * (1 + foam.dirs_per_write("document_001"))
    assert case["bytes"] == stage.proxy_case_bytes(CASE) == stage.planned_bytes(CASE)
    spec = spec_of(tmp_path)
    (tmp_path / "target" / "users-file").write_text("keep me")
    (tmp_path / "source" / "users-file").write_text("keep me too")

    record = run_job(spec, stage.run)

    found = values(record)
    assert found["stage_bytes"] == case["bytes"] and found["stage_files"] == case["files"]
    assert found["stage_dirs"] == case["dirs"] and found["nodes"] == 1
    assert found["stage_time"] > 0
    assert found["stage_bandwidth"] == pytest.approx(case["bytes"] / found["stage_time"] / 1e6)
    assert record["extra"]["copy_command"].startswith("cp -r ")
    assert record["extra"]["source_page_cache"]["page_cache"] == pagecache.IN_MEMORY
    assert "warm" in record["extra"]["source_page_cache"]["page_cache_reason"]
    for tier in ("source", "target"):  # run folders gone, the users' files kept
        assert [p.name for p in (tmp_path / tier).iterdir()] == ["users-file"]


def fake_srun(tmp_path, monkeypatch) -> object:
    """An `srun` that logs its command line and runs the command once, here."""
    log = tmp_path / "srun.log"
    fake = tmp_path / "bin" / "srun"
    fake.parent.mkdir()
    fake.write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> {log}\n'
        "while [ $# -gt 0 ]; do case $1 in -N|-w) shift 2;; --ntasks-per-node=*|--overlap) shift;;"
        " *) break;; esac; done\n"
        'exec "$@"\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "nodeB,nodeA")
    monkeypatch.setenv("SLURMD_NODENAME", "nodeA")
    monkeypatch.delenv("SLURM_STEP_ID", raising=False)
    return log


def test_under_slurm_one_srun_copies_then_every_node_copy_is_removed(tmp_path, monkeypatch):
    log = fake_srun(tmp_path, monkeypatch)
    record = run_job(spec_of(tmp_path), stage.run)
    assert values(record)["nodes"] == 1
    lines = log.read_text().splitlines()  # what srun was asked, in order
    helper = " -m tierbench.workloads.stage "
    steps = [
        line.split(helper)[1].split()[0] if helper in line else line.split()[5] for line in lines
    ]
    assert steps == ["claim", "cp", "tally", "rm", "release"]
    # every step on this node, named: the job's first node is another one
    assert all(line.startswith("-N 1 -w nodeA --ntasks-per-node=1 ") for line in lines)
    assert " cp -r " in lines[1]
    assert " rm -rf " in lines[3] and lines[3].endswith("/case")
    assert record["extra"]["copy_command"].startswith("srun -N 1 -w nodeA --ntasks-per-node=1 cp")
    assert list((tmp_path / "target").iterdir()) == []
    assert list((tmp_path / "source").iterdir()) == []


def test_the_srun_command_puts_one_copy_on_each_named_node(tmp_path):
    case, folder = tmp_path / "src" / "case", tmp_path / "tier" / "tierbench-x"
    hosts = ["n3", "n1", "n2", "n4"]
    command = stage.copy_command(case, folder, hosts)
    head = ["srun", "-N", "4", "-w", "n3,n1,n2,n4", "--ntasks-per-node=1"]
    assert command == head + ["cp", "-r", str(case), str(folder)]
    # inside a job step the new step shares the step's CPUs instead of waiting for them
    assert stage.copy_command(case, folder, hosts, in_step=True)[:7] == head + ["--overlap"]
    assert stage.copy_command(case, folder) == ["cp", "-r", str(case), str(folder)]
    removal = stage.remove_command(folder / "case", hosts)
    assert removal == head + ["rm", "-rf", str(folder / "case")]


@pytest.mark.parametrize(
    ("listed", "here", "nodes", "expected"),
    [
        ("n1,n2,n3,n4", "n3", 2, ["n3", "n1"]),  # this node first, then the job's order
        ("n1,n2,n3,n4", "n1", 4, ["n1", "n2", "n3", "n4"]),
        ("n1,n2", "login", 1, ["n1"]),  # a name Slurm does not list: the job's first
    ],
)
def test_every_step_of_a_point_runs_on_the_same_nodes_starting_here(
    monkeypatch, listed, here, nodes, expected
):
    """srun -N 2 in a 4-node job picks its nodes anew at each step: the point names them."""
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    monkeypatch.setenv("SLURM_JOB_NODELIST", listed)
    monkeypatch.setenv("SLURMD_NODENAME", here)
    assert stage.point_hosts(nodes) == expected
    assert stage.point_hosts(nodes) == expected  # the same at every step


def test_a_point_wanting_more_nodes_than_its_job_holds_says_so(monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "n1,n2")
    with pytest.raises(PointFailed, match="nodes 3: the Slurm job holds 2 \\(n1, n2\\)"):
        stage.point_hosts(3)


def test_a_new_step_does_not_inherit_the_enclosing_steps_layout(monkeypatch):
    """Inside a one-task job step SLURM_NTASKS=1 would turn `srun -N 4` into one node."""
    for key, value in {
        "SLURM_JOB_ID": "7", "SLURM_CONF": "/etc/x.conf", "SLURM_STEP_ID": "0",
        "SLURM_NTASKS": "1", "SLURM_NNODES": "1", "SRUN_CPUS_PER_TASK": "2",
    }.items():  # fmt: skip
        monkeypatch.setenv(key, value)
    env = stage.srun_env()
    assert env["SLURM_JOB_ID"] == "7" and env["SLURM_CONF"] == "/etc/x.conf"
    assert not {"SLURM_STEP_ID", "SLURM_NTASKS", "SLURM_NNODES", "SRUN_CPUS_PER_TASK"} & set(env)
    assert env["PYTHONPATH"].split(os.pathsep)[0] == stage.PACKAGE_DIR


def test_a_node_without_the_run_folder_claims_and_releases_its_own(tmp_path):
    tier = tmp_path / "tier"
    tier.mkdir()
    folder = tier / "tierbench-stage-x"
    env = {**os.environ, "PYTHONPATH": str(REPO / "workflow")}

    def step(*args):
        return subprocess.run(
            [sys.executable, "-m", "tierbench.workloads.stage", *args],
            capture_output=True, text=True, env=env, timeout=60,
        )  # fmt: skip

    assert '"made": true' in step("claim", str(folder)).stdout
    assert (folder / ".tierbench-run").is_file()
    (folder / "case").mkdir()
    (folder / "case" / "f").write_bytes(b"12345")
    assert '"files": 1' in step("tally", str(folder / "case")).stdout
    assert '"removed": true' in step("release", str(folder), "--owner", "elsewhere:1").stdout
    assert list(tier.iterdir()) == []
    # a folder without our marker is never removed
    (tier / "tierbench-theirs").mkdir()
    assert '"removed": false' in step("release", str(tier / "tierbench-theirs")).stdout
    assert (tier / "tierbench-theirs").is_dir()


@pytest.mark.parametrize(
    "params, fields, reason",
    [
        ({}, {"source_tier": None, "source_missing": "source shared: no shared tier"}, "shared"),
        ({"nodes": 2}, {}, "need Slurm"),
    ],
)
def test_what_cannot_be_staged_is_not_applicable(tmp_path, no_slurm, params, fields, reason):
    record = run_job(spec_of(tmp_path, params, **fields), stage.run)
    (only,) = record["metrics"]
    assert only["status"] == "not_applicable" and reason in only["reason"]


def test_the_source_tier_itself_is_not_applicable(tmp_path, no_slurm):
    spec = spec_of(tmp_path)
    spec["tier"] = "lustre"
    (only,) = run_job(spec, stage.run)["metrics"]
    assert only["status"] == "not_applicable" and "is the source tier" in only["reason"]


def test_a_real_case_without_openfoam_is_skipped(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    job = Job(spec={"params": {}}, folder=None)
    with pytest.raises(PointSkipped, match="blockMesh"):
        stage.build_openfoam_case(job, tmp_path / "case", {"case": "openfoam"})


@pytest.mark.skipif(shutil.which("blockMesh") is None, reason="OpenFOAM is not installed")
def test_a_real_decomposed_case_is_copied(tmp_path, no_slurm):
    record = run_job(spec_of(tmp_path, {"case": "openfoam", "cells_per_rank": 64}), stage.run)
    found = values(record)
    assert found["stage_files"] > 20 and found["stage_bytes"] > 0
    assert record["extra"]["case_build"]["tools_s"].keys() == {"blockMesh", "decomposePar"}
    assert list((tmp_path / "target").iterdir()) == []


def test_page_cache_of_the_copy_by_tier():
    params = matrix.complete("stage", CASE)
    limits = {"dirty_limit": 1 << 30, "ram": 1 << 33}
    on_disk = pagecache.assess(get("stage"), params, "disk", limits)
    assert on_disk["page_cache"] == pagecache.IN_MEMORY
    # every file and folder the copy creates on a network tier reaches its server
    assert pagecache.assess(get("stage"), params, "nfs", limits)["page_cache"] == pagecache.DEVICE


# ------------------------------------------------------------------ the plan


def stage_study(source="shared", **params) -> dict:
    return {
        "study": "s",
        "experiments": [
            {"name": "staging", "workload": "stage", "tiers": "all",
             "params": {"source": source, **CASE, **params}},
        ],
    }  # fmt: skip


def test_the_source_is_resolved_at_plan_time_and_its_path_reaches_the_job(tmp_path):
    found = tiers(tmp_path)
    points = matrix.expand_study(stage_study(), found, "default")
    assert {p.tier for p in points} == {"local"}  # not the source tier itself
    assert all(p.named_tiers == {"source": {"tier": "lustre"}} for p in points)
    plan = matrix.study_plan(stage_study(), points, found)
    local = next(p for p in points if p.tier == "local")
    spec = matrix.plan_spec(plan, matrix.point_id(local), 1)
    assert spec["source_tier"] == "lustre" and spec["source_path"] == str(tmp_path / "lustre")
    assert spec["source_class"] == "lustre" and spec["source_shared"] is True
    # a tier named by name is the same
    named = matrix.expand_study(stage_study("lustre"), found, "default")
    assert named[0].named_tiers == {"source": {"tier": "lustre"}}


def test_without_a_shared_tier_the_points_say_why(tmp_path):
    found = tiers(tmp_path, shared=False)
    points = matrix.expand_study(stage_study(), found, "default")
    plan = matrix.study_plan(stage_study(), points, found)
    spec = matrix.plan_spec(plan, matrix.point_id(points[0]), 1)
    assert spec["source_tier"] is None and "no shared tier" in spec["source_missing"]
    assert set(plan["tiers"]) == {"local"}


@pytest.mark.parametrize("source", ["no_such_tier", "void"])
def test_a_source_that_is_no_tier_of_the_run_stops_the_plan_in_one_line(tmp_path, source):
    with pytest.raises(ConfigError) as error:
        matrix.expand_study(stage_study(source), tiers(tmp_path), "default")
    message = str(error.value)
    assert "\n" not in message and f"source {source!r}" in message and "local" in message


def test_a_tier_marked_shared_comes_before_a_network_class(tmp_path):
    found = tiers(tmp_path)
    found["nfs_home"] = {"path": str(tmp_path / "nfs"), "class": "nfs", "max_bytes": None}
    found["local"]["shared"] = True  # a hardware file says so: it wins
    assert matrix.shared_tier(found) == "local"
    assert matrix.shared_tier(tiers(tmp_path, shared=False)) is None


def test_the_study_stages_on_every_scale_and_stays_small_in_smoke():
    study = matrix.load_study(REPO / "config/studies/cfd_dcpmm.yaml", CONFIG)
    default_tiers = matrix.resolve_tiers(CONFIG, REPO / "config/hardware", "/tmp")
    cluster = matrix.resolve_tiers(
        {**CONFIG, "hardware": "minicluster"}, REPO / "config/hardware", "/tmp"
    )
    for scale in ("smoke", "default", "full"):
        points = [p for p in matrix.expand_study(study, cluster, scale) if p.workload == "stage"]
        assert {p.named_tiers["source"]["tier"] for p in points} == {"shared"}
        assert {p.tier for p in points} == {"local"}
        main = next(
            p for p in matrix.expand_study(study, cluster, scale)
            if p.experiment == "single_vs_ensemble"
        )  # fmt: skip
        for key in ("ranks", "cells_per_rank", "file_set"):
            assert points[0].params[key] == main.params[key]
    smoke = [p for p in matrix.expand_study(study, default_tiers, "smoke") if p.workload == "stage"]
    assert {p.named_tiers["source"]["tier"] for p in smoke} == {None}  # not applicable here
    assert stage.planned_bytes(smoke[0].params) < 2e6


# ------------------------------------------------------------------ break-even


def test_a_positive_gain_gives_a_finite_break_even():
    stage_s = Sample((10.0, 11.0, 9.0, 10.5))
    decided = staging.break_even(
        stage_s, Sample((3.0, 3.1, 2.9, 3.05)), Sample((1.0, 1.1, 0.9, 1.0))
    )
    assert decided.status == staging.PAYS
    assert decided.gain.low > 0 and decided.gain.estimate == pytest.approx(2.025)
    assert decided.steps.estimate == pytest.approx(10.25 / 2.025)
    assert decided.steps.low <= decided.steps.estimate <= decided.steps.high
    assert np.isfinite(decided.steps.high) and "pays after" in decided.text


def test_no_gain_never_pays():
    decided = staging.break_even(
        Sample((10.0, 11.0, 9.0)), Sample((1.0, 1.05, 0.95)), Sample((2.0, 2.1, 1.9))
    )
    assert decided.status == staging.NEVER_PAYS and decided.gain.high <= 0
    assert decided.steps.estimate == np.inf and "never pays" in decided.text


def test_a_gain_whose_interval_holds_zero_is_undecided():
    decided = staging.break_even(
        Sample((10.0, 11.0, 9.0)), Sample((1.0, 1.5, 0.6)), Sample((1.1, 0.7, 1.4))
    )
    assert decided.status == staging.UNDECIDED
    assert decided.gain.low < 0 < decided.gain.high and "includes 0" in decided.text


def test_one_repetition_is_undecided_with_the_reason():
    decided = staging.break_even(Sample((10.0,)), Sample((3.0,)), Sample((1.0,)))
    assert decided.status == staging.UNDECIDED and "2 repetitions" in decided.text


# ------------------------------------------------------------------ the report


def synthetic_study() -> pd.DataFrame:
    """Measured repetitions of a stage point and of the proxy's step points on both tiers."""
    rows = []

    def add(workload, experiment, tier, tier_class, metric, unit, values, **params):
        for rep, value in enumerate(values, start=1):
            rows.append(
                dict(
                    study="cfd", experiment=experiment, workload=workload, tier=tier,
                    tier_class=tier_class, host="h", point="single", repetition=rep,
                    phase="measured", metric=metric, value=value, unit=unit, status="ok",
                    started_at=f"2024-01-01T00:0{rep}:00+00:00", duration_s=1,
                    ranks=1, cells_per_rank=500, file_set="document_001", **params,
                )
            )  # fmt: skip

    steps = dict(write_interval=1, ensemble=1, file_handler="uncollated")
    add("cfd_proxy", "single_vs_ensemble", "shared", "glusterfs", "time_per_step", "s",
        [0.30, 0.31, 0.29], **steps)  # fmt: skip
    add("cfd_proxy", "single_vs_ensemble", "local", "tmpfs", "time_per_step", "s",
        [0.10, 0.11, 0.09], **steps)  # fmt: skip
    for metric, unit, value in (
        ("stage_time", "s", [2.0, 2.2, 1.8]),
        ("stage_bytes", "B", [121995] * 3),
        ("stage_files", "files", [16] * 3),
        ("stage_bandwidth", "MB/s", [0.06] * 3),
        ("nodes", "nodes", [2] * 3),
    ):
        add("stage", "staging", "local", "tmpfs", metric, unit, value,
            source="shared", case="cfd_proxy", nodes=2)  # fmt: skip
    return pd.DataFrame(rows)


@pytest.mark.parametrize(
    ("block", "named"),
    [
        ({"copy_table": "c", "steps_table": "s", "node": 20}, "node"),
        ({"copy_table": "c", "steps_table": "s"}, "nodes"),
        ({"copy_table": "c", "steps_table": "s", "nodes": 0}, "nodes"),
    ],
)
def test_a_study_files_staging_block_is_checked_by_the_schema(tmp_path, block, named):
    """The document's staging tables are the study file's, so a misspelt key stops the run."""
    study = matrix.load_yaml(REPO / "config/studies/cfd_dcpmm.yaml") | {"staging": block}
    path = tmp_path / "cfd_dcpmm.yaml"
    path.write_text(yaml.safe_dump(study))
    with pytest.raises(ConfigError) as error:
        matrix.load_study(path, CONFIG)
    assert "staging" in str(error.value) and named in str(error.value)


def test_the_report_shows_staging_beside_the_documents_numbers(tmp_path):
    frame = synthetic_study()
    study_dir = tmp_path / "m" / "cfd"
    study_for_report(study_dir, frame, ["shared", "local"])
    plan = {
        "points": {
            "stage/staging/local/single": {
                "experiment": "staging",
                "named_tiers": {"source": {"tier": "shared"}},
            }
        }
    }
    (study_dir / "plan.json").write_text(json.dumps(plan))
    # the document and its staging tables come from the study file, as the lessons rule writes
    study_file = matrix.load_yaml(REPO / "config/studies/cfd_dcpmm.yaml")
    paper = {key: study_file[key] for key in ("document", "staging")}
    (study_dir / "lessons.json").write_text(json.dumps(paper))
    summary = pd.read_csv(study_dir / "summary.csv")
    assert staging.tables(summary, frame, plan)[0]["published"] == []  # no document, none
    (found,) = staging.tables(summary, frame, plan, paper=paper)
    assert found["status"] == staging.PAYS and found["source"] == "shared"
    assert found["gain"]["estimate"] == pytest.approx(0.2)
    assert found["steps"]["estimate"] == pytest.approx(2.0 / 0.2)
    assert {d["tier"]: d["stage_time"] for d in found["published"]} == {
        "fsdax0": pytest.approx(208.461), "fsdax1": pytest.approx(92.576)
    }  # fmt: skip
    assert found["published"][0]["gain"] == pytest.approx(29.77 - 2.23)
    assert {d["nodes"] for d in found["published"]} == {20}

    html = report.render(tmp_path / "m", ["cfd"], {"cfd": "CFD"})
    section = html[html.index("Staging: what copying the case") :]
    assert 'data-staging="staging/local/single"' in section
    for text in ("208", "92.6", "27.5", "break-even", "pays after", "warm", "document 001, fsdax0"):
        assert text in section, text


def test_no_section_without_measured_staging_points(tmp_path):
    frame = synthetic_study()
    frame = frame[frame["workload"] != "stage"]
    study_dir = tmp_path / "m" / "cfd"
    study_for_report(study_dir, frame, ["shared", "local"])
    assert "Staging: what copying" not in report.render(tmp_path / "m", ["cfd"], {})
    assert staging.tables(pd.read_csv(study_dir / "summary.csv"), frame, None) == []
