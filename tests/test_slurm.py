"""The pipeline on a real Slurm cluster: `snakemake --profile slurm` on a one-node cluster.

The module starts munged, slurmctld and slurmd on localhost from a config it
generates in a temporary folder (see slurm_cluster.py), installing slurm-wlm
and munge with apt-get where they are missing, and stops them afterwards, also
when a test fails. Without root (slurmd must run as root) the tests are
skipped with the command to run, except under CI=true, where they fail: CI
must never skip them.

Two runs, each through the literal `snakemake --profile slurm` in a scratch
copy of the pipeline:

- the default study's smoke preset (one repetition, no warm-up) on the
  cluster's node-local tiers: every benchmark is a Slurm job and its record
  carries that job's id and host, made inside the job;
- a small study for the cluster itself: a 2-rank cfd_proxy run through
  `srun --mpi=pmix`, an ensemble whose members run side by side inside one
  allocation on exclusive nodes, and two points that cannot run (a partition
  the cluster lacks, a tier path missing on the node), which end as failed
  points with the reason in their log and in the report while the rest
  completes.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import REPO
from slurm_cluster import ClusterError, LocalSlurm, install, install_command, missing_packages
from tierbench.report import id_ranges

pytestmark = pytest.mark.slurm

IN_CI = os.environ.get("CI", "").lower() == "true"
#: poll Slurm every second (the plugin's default first wait is 40 s)
FAST_POLL = ["--slurm-init-seconds-before-status-checks", "1"]
HARDWARE = "localslurm"


def _unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"CI=true: the Slurm test must run, but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """A running one-node cluster for this module; stopped and removed afterwards."""
    missing = missing_packages()
    if missing and os.geteuid() != 0:
        _unavailable(f"{', '.join(missing)} missing; install with: {install_command(missing)}")
    if os.geteuid() != 0:
        _unavailable("slurmd must run as root; run the tests as root (or in a root container)")
    if missing:
        install(missing)
    root = tmp_path_factory.mktemp("slurm")
    cluster = LocalSlurm(root)
    try:
        try:
            cluster.start()
        except ClusterError as error:
            pytest.fail(f"could not start the one-node Slurm cluster: {error}")
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


def on_cluster(pipeline, cluster: LocalSlurm, monkeypatch, tiers: dict, **hardware) -> Path:
    """Point a pipeline copy at the cluster: ./slurm as in the repository, a hardware file."""
    for key, value in cluster.env.items():
        monkeypatch.setenv(key, value)
    root = pipeline.root
    (root / "slurm").symlink_to(os.readlink(REPO / "slurm"))
    assert (root / "slurm" / "config.yaml").is_file()
    spec = {
        "name": HARDWARE,
        "description": "one-node Slurm cluster on localhost (tests/test_slurm.py)",
        "cores": cluster.cpus,
        "memory": f"{cluster.memory_mb}MiB",
        "scheduler": "slurm",
        "partition": cluster.partition,
        "tiers": tiers,
        **hardware,
    }
    (root / "config" / "hardware" / f"{HARDWARE}.yaml").write_text(yaml.safe_dump(spec))
    return root


def job_ids(frame: pd.DataFrame) -> list[str]:
    return sorted(set(frame["slurm_job_id"].astype(str)))


def test_smoke_study_runs_as_slurm_jobs(pipeline, slurm, monkeypatch):
    root = on_cluster(
        pipeline,
        slurm,
        monkeypatch,
        {
            "shm": {"path": "/dev/shm", "class": "shm", "max_bytes": "1GiB"},
            "disk": {"path": "results/scratch", "class": "disk", "max_bytes": "1GiB"},
        },
    )
    started = time.monotonic()
    done = pipeline(
        "--profile",
        "slurm",
        "--config",
        "scale=smoke",
        f"hardware={HARDWARE}",
        "repetitions=1",
        "warmup=False",
        # two benchmarks at once on the node's two cores: the test checks the
        # plumbing, not the numbers, and the default bench=1 would take minutes
        "--resources",
        "bench=2",
        *FAST_POLL,
        timeout=400,
    )
    elapsed = time.monotonic() - started
    assert "has been submitted with SLURM jobid" in done.stdout + done.stderr

    results = pd.read_csv(
        root / f"results/{HARDWARE}/default/results.csv", dtype={"slurm_job_id": str}
    )
    runs = results.drop_duplicates(["experiment", "tier", "point", "repetition"])
    assert len(runs) == 18, runs[["experiment", "tier", "point"]]
    assert set(results["status"]) == {"ok"}, results[results["status"] != "ok"]
    # every benchmark ran as its own Slurm job, and says so from inside it
    assert results["slurm_job_id"].str.fullmatch(r"\d+").all(), results["slurm_job_id"]
    ids = job_ids(runs)
    assert len(ids) == len(runs)
    assert set(results["host"]) == {socket.gethostname()}
    for job_id in ids:
        job = slurm.job(job_id)
        assert job["JobState"] == "COMPLETED", job
        assert job["Partition"] == slurm.partition
        assert job["Comment"].startswith("rule_fio_wildcards_default_")
        assert job["TimeLimit"] != "UNLIMITED"  # runtime= reached sbatch

    raw = next((root / f"results/{HARDWARE}/default/raw/fio").rglob("rep1.json"))
    record = json.loads(raw.read_text())
    assert record["context"]["host"]["slurm_job_id"] in ids
    assert record["context"]["tier"]["fs_type"]
    assert record["spec"]["slurm_partition"] == slurm.partition

    # the probe of the tiers ran as a Slurm job too, never on the submit side
    tiers = json.loads((root / f"results/{HARDWARE}/default/provenance/tiers.json").read_text())
    assert tiers["host"]["slurm_job_id"] and tiers["host"]["slurm_job_id"] not in ids

    # the report says per tier and node which jobs ran there and what they saw
    nodes = json.loads((root / f"results/{HARDWARE}/default/provenance/nodes.json").read_text())
    assert {n["tier"] for n in nodes} == {"shm", "disk"}
    assert sorted((i for n in nodes for i in n["slurm_job_ids"]), key=int) == sorted(ids, key=int)
    html = (root / f"results/{HARDWARE}/report.html").read_text()
    for node in nodes:
        assert node["host"] == socket.gethostname() and node["fs_type"]
        assert node["slurm_partition"] == slurm.partition
        assert f"{len(node['slurm_job_ids'])}: {id_ranges(node['slurm_job_ids'])}" in html
    print(f"smoke study on Slurm: {len(ids)} benchmark jobs in {elapsed:.0f} s")


CHECK_STUDY = {
    "study": "slurmcheck",
    "title": "Slurm integration checks",
    "repetitions": 1,
    "warmup": False,
    "experiments": [
        {
            "name": "mpi_pair",
            "workload": "cfd_proxy",
            "description": "two ranks of one simulation, launched by srun --mpi=pmix",
            "tiers": ["shm"],
            "params": {
                "ranks": 2,
                "ensemble": 1,
                "steps": 4,
                "write_interval": 2,
                "cells_per_rank": 2000,
                "sweeps": 1,
                "warmup_steps": 0,
            },
        },
        {
            "name": "ensemble",
            "workload": "cfd_proxy",
            "description": "two one-rank simulations started together in one allocation",
            "tiers": ["shm"],
            "params": {
                "ranks": 1,
                "ensemble": 2,
                "steps": 4,
                "write_interval": 2,
                "cells_per_rank": 2000,
                "sweeps": 1,
                "warmup_steps": 0,
            },
        },
        {
            "name": "bad_input",
            "workload": "fio",
            "description": "points that cannot run: no such partition, no such tier path",
            "tiers": ["nopart", "gone"],
            "params": {
                "rw": "randrw",
                "block_size": "4k",
                "io_mode": "fsync",
                "size": "4MiB",
                "runtime": 1,
                "ramp_time": 0,
                "iodepth": 1,
                "numjobs": 1,
            },
        },
    ],
}


def test_mpi_ensemble_and_bad_input_on_slurm(pipeline, slurm, monkeypatch):
    gone = "/proc/tierbench-no-such-tier"  # cannot exist, cannot be created, even by root
    root = on_cluster(
        pipeline,
        slurm,
        monkeypatch,
        {
            "shm": {"path": "/dev/shm", "class": "shm", "max_bytes": "1GiB"},
            "nopart": {
                "path": "results/scratch-nopart",
                "class": "disk",
                "partition": "nosuch",
            },
            "gone": {"path": gone, "class": "disk"},
        },
    )
    (root / "config/studies/slurmcheck.yaml").write_text(yaml.safe_dump(CHECK_STUDY))
    done = pipeline(
        "--profile",
        "slurm",
        "--configfile",
        "config/studies/slurmcheck.yaml",
        "--config",
        "scale=smoke",
        f"hardware={HARDWARE}",
        "exclusive=True",
        *FAST_POLL,
        timeout=400,
    )
    output = done.stdout + done.stderr
    assert "Slurm partition 'nosuch'" in output  # said once when submitting

    results = pd.read_csv(
        root / f"results/{HARDWARE}/slurmcheck/results.csv", dtype={"slurm_job_id": str}
    )
    assert results["slurm_job_id"].str.fullmatch(r"\d+").all()
    status = results.groupby("experiment")["status"].agg(set)
    assert status["mpi_pair"] == {"ok"} and status["ensemble"] == {"ok"}, results

    raw = root / f"results/{HARDWARE}/slurmcheck/raw/cfd_proxy"
    pair = json.loads(next((raw / "mpi_pair").rglob("rep1.json")).read_text())
    (command,) = pair["extra"]["commands"]
    assert command.startswith("srun --mpi=pmix -n 2 "), command
    assert [m["ranks"] for m in pair["extra"]["members"]] == [2]
    job = slurm.job(pair["context"]["host"]["slurm_job_id"])
    assert job["NumTasks"] == "2" and job["OverSubscribe"] == "NO", job  # exclusive

    ensemble = json.loads(next((raw / "ensemble").rglob("rep1.json")).read_text())
    commands = ensemble["extra"]["commands"]
    assert len(commands) == 2 and all(c.startswith("srun --mpi=pmix -n 1 ") for c in commands)
    # both members in the one allocation of one Slurm job; they waited for each
    # other at the start gate, so neither could run after the other
    assert slurm.job(ensemble["context"]["host"]["slurm_job_id"])["NumTasks"] == "2"
    assert len(ensemble["extra"]["members"]) == 2

    bad = results[results["experiment"] == "bad_input"].set_index("tier")
    assert set(bad["status"]) == {"failed"}
    nopart = bad.loc["nopart", "reason"]
    assert "Slurm partition 'nosuch'" in nopart and "does not exist" in nopart
    missing = bad.loc["gone", "reason"]
    assert gone in missing and "does not exist" in missing
    logs = root / f"results/{HARDWARE}/slurmcheck/logs/fio/bad_input"
    assert "nosuch" in next((logs / "nopart").rglob("*.log")).read_text()
    assert gone in next((logs / "gone").rglob("*.log")).read_text()
    html = (root / f"results/{HARDWARE}/report.html").read_text().replace("&#39;", "'")
    assert nopart in html and missing in html
