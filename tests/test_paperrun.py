"""./tierbench paper: document 001 on the cluster on one machine where it can start, the
others here, and one page; where the cluster cannot start, the page says why."""

from __future__ import annotations

import json
import os
from contextlib import nullcontext
from html import unescape

import pytest
from conftest import study_for_report
from test_report_time import RUNS, records
from tierbench import minicluster, paperrun, report
from tierbench.minicluster import host


def test_every_config_flag_is_kept_and_the_rest_passes_through():
    config, rest = paperrun.split_config(
        ["-c", "all", "--config", "scale=smoke", "repetitions=2", "-n", "-C", "exclusive=True"]
    )
    assert config == ["scale=smoke", "repetitions=2", "exclusive=True"]
    assert rest == ["-c", "all", "-n"]


@pytest.fixture
def commands(monkeypatch):
    """The Snakemake commands main() would start, each as (args, on the cluster)."""
    started = []
    monkeypatch.setattr(
        paperrun, "snakemake", lambda args, what, env=None: started.append((args, env is not None))
    )
    return started


def config_of(args: list[str]) -> dict:
    entries = args[args.index("--config") + 1 :]
    return dict(entry.split("=", 1) for entry in entries)


def test_without_root_document_001_runs_here_and_the_page_says_why(monkeypatch, commands):
    monkeypatch.setattr(minicluster, "missing_packages", lambda: [])
    monkeypatch.setattr(host, "missing_packages", lambda: [])
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert paperrun.main(["-c", "2", "--config", "scale=smoke"]) == 0
    ((args, on_cluster),) = commands  # one run, here: no cluster started
    assert not on_cluster and args[0] == "paper" and "-c" in args
    config = config_of(args)
    assert config["scale"] == "smoke"
    (why,) = json.loads(config["paper_undecided"]).values()
    assert "shared file system" in why and "needs root" in why


def test_a_hardware_file_of_the_users_runs_every_document_on_its_tiers(commands):
    assert paperrun.main(["--config", "hardware=nextgenio"]) == 0
    ((args, on_cluster),) = commands
    assert not on_cluster and args == ["paper", "--config", "hardware=nextgenio"]


def test_the_cluster_runs_document_001_and_is_down_after_also_on_failure(
    monkeypatch, commands, capsys
):
    """up, the study under Slurm, down: and down also when the study's run fails."""
    steps = []

    class Cluster:
        env = {"SLURM_CONF": "/x"}

        def __init__(self, *args):
            pass

        def up(self):
            steps.append("up")
            return "up"

        def down(self):
            steps.append("down")
            return ["a"]

    monkeypatch.setattr(paperrun, "cluster_blocker", lambda: None)
    monkeypatch.setattr(minicluster, "MiniCluster", Cluster)
    monkeypatch.setattr(minicluster, "cluster_lock", lambda wait: nullcontext())
    assert paperrun.main(["--config", "scale=smoke"]) == 0
    assert steps == ["up", "down"]
    (cluster_args, on_cluster), (paper_args, here) = commands
    assert on_cluster and "--profile" in cluster_args and not here
    assert config_of(cluster_args)["hardware"] == "minicluster"
    assert json.loads(config_of(paper_args)["paper_elsewhere"]) == {"cfd_dcpmm": "minicluster"}

    def fails(args, what, env=None):
        raise paperrun.Failed("cfd_dcpmm on the cluster", 3)

    steps.clear()
    monkeypatch.setattr(paperrun, "snakemake", fails)
    assert paperrun.main([]) == 3
    assert steps == ["up", "down"]
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last == (
        "tierbench: cfd_dcpmm on the cluster failed (snakemake exit 3): its messages are above"
    )


def test_the_page_takes_a_study_from_another_machine_and_counts_the_lessons(tmp_path):
    study_for_report(tmp_path / "here" / "a", records("a", RUNS), ["disk"])
    study_for_report(tmp_path / "cluster" / "b", records("b", RUNS), ["disk"])
    verdicts = [{"lesson": "L1", "status": "reproduced", "text": "t"}]
    verdicts += [{"lesson": "L2", "status": "within_noise", "text": "t"}]
    (tmp_path / "cluster/b/verdict.json").write_text(json.dumps({"verdicts": verdicts}))
    html = unescape(
        report.render(
            tmp_path / "here",
            ["a", "b"],
            {},
            elsewhere={"b": "cluster"},
            undecided={"a": "no shared file system here"},
        )
    )
    assert "<strong>Lessons:</strong> 1 of 2 decided (1 reproduced, 1 within noise)." in html
    assert "a: no shared file system here." in html  # on the first screen
    section = html[html.index('<section id="b"') :]
    assert "measured on <code>cluster</code> (results/cluster/b)" in section
