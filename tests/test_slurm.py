"""The pipeline on a real Slurm cluster of two nodes: `snakemake --profile slurm`.

The module starts the cluster on one machine (tierbench.minicluster, through
tests/minicluster_fixture.py): two Slurm nodes in namespaces, each with its
own node-local tmpfs, and a GlusterFS volume every node mounts; packages are
installed with apt-get where missing, and the cluster always comes down
afterwards. Without root the tests are skipped with the reason, except under
CI=true, where they fail: CI must never skip them.

Runs, each through the literal `snakemake --profile slurm` with the committed
hardware file config/hardware/minicluster.yaml in a scratch copy of the
pipeline:

- the default study's smoke preset on the node-local and the shared tier:
  every benchmark is a Slurm job on one of the nodes, and its record says
  which job and which node, made inside the job;
- a small study for the cluster itself: one MPI simulation spanning both
  nodes (on the node-local tier, where each node has its own folder, and on
  the shared one), an ensemble whose members run on different nodes on the
  shared tier, a one-rank run, and two points that cannot run (a partition
  the cluster lacks, a tier path missing on the nodes), which end as failed
  points with the reason in their log and in the report while the rest
  completes;
- document 001's study (cfd_dcpmm without its fidelity experiments) at its
  smoke size: the proxy and simpleFoam on both tiers, single runs, ensembles
  and staging, results gathered on the submit host;
- the results database on the shared volume, appended to from both nodes at
  once (in this module, so no second cluster waits for the machine's lock);
- last, a run killed mid-way and the cluster brought down: nothing is left.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import REPO
from minicluster_fixture import leftovers, require_minicluster, running_minicluster, snapshot
from test_resultsdb import sweep, write_study
from tierbench.minicluster import MiniCluster
from tierbench.report import id_ranges

pytestmark = pytest.mark.slurm

#: poll Slurm every second (the plugin's default first wait is 40 s)
FAST_POLL = ["--slurm-init-seconds-before-status-checks", "1"]
HARDWARE = "minicluster"
NODES = {"node1", "node2"}


@pytest.fixture(scope="module")
def slurm():
    """The two-node cluster for this module; brought down afterwards, also on failure."""
    require_minicluster()
    yield from running_minicluster()


def hardware_file(pipeline, name: str = HARDWARE, **tiers) -> Path:
    """The committed minicluster hardware file in the pipeline copy, with extra tiers."""
    root = pipeline.root
    spec = yaml.safe_load((REPO / f"config/hardware/{HARDWARE}.yaml").read_text())
    spec["name"] = name
    spec["tiers"].update(tiers)
    (root / "config" / "hardware" / f"{name}.yaml").write_text(yaml.safe_dump(spec))
    (root / "slurm").symlink_to((REPO / "slurm").readlink())
    assert (root / "slurm" / "config.yaml").is_file()
    return root


def on_slurm(pipeline, *args: str, timeout: float = 600):
    """`snakemake --profile slurm` in the pipeline copy: what a user types on the login node."""
    return pipeline("--profile", "slurm", *args, *FAST_POLL, timeout=timeout)


def read_results(root: Path, study: str, machine: str = HARDWARE) -> pd.DataFrame:
    return pd.read_csv(root / f"results/{machine}/{study}/results.csv", dtype={"slurm_job_id": str})


def slurm_job(cluster: MiniCluster, job_id: str) -> dict[str, str]:
    """``scontrol show job`` as a dict (finished jobs stay MinJobAge seconds)."""
    text = cluster.run("scontrol", "--oneliner", "show", "job", str(job_id))
    return dict(re.findall(r"(\S+?)=(\S*)", text))


def job_ids(frame: pd.DataFrame) -> list[str]:
    return sorted(set(frame["slurm_job_id"].astype(str)))


def test_smoke_study_runs_as_slurm_jobs_on_the_nodes(pipeline, slurm: MiniCluster):
    root = hardware_file(pipeline)
    started = time.monotonic()
    done = on_slurm(
        pipeline,
        "--config",
        "scale=smoke",
        f"hardware={HARDWARE}",
        "repetitions=1",
        "warmup=False",
    )
    elapsed = time.monotonic() - started
    assert "has been submitted with SLURM jobid" in done.stdout + done.stderr

    results = read_results(root, "default")
    runs = results.drop_duplicates(["experiment", "tier", "point", "repetition"])
    assert set(runs["tier"]) == {"local", "shared"}
    assert len(runs) == 18, runs[["experiment", "tier", "point"]]
    assert set(results["status"]) == {"ok"}, results[results["status"] != "ok"]
    # every benchmark ran as its own Slurm job on a node, and says so from inside it
    assert results["slurm_job_id"].str.fullmatch(r"\d+").all(), results["slurm_job_id"]
    ids = job_ids(runs)
    assert len(ids) == len(runs)
    assert set(results["host"]) <= NODES, set(results["host"])
    for job_id in ids:
        job = slurm_job(slurm, job_id)
        assert job["JobState"] == "COMPLETED", job
        assert job["Partition"] == slurm.partition
        assert job["Comment"].startswith("rule_fio_wildcards_default_")
        assert job["TimeLimit"] != "UNLIMITED"  # runtime= reached sbatch
        # the record's node is the node Slurm ran the job on
        (host,) = set(runs.loc[runs["slurm_job_id"] == job_id, "host"])
        assert job["NodeList"] == host, (job_id, job["NodeList"], host)
    # one benchmark at a time, kept apart by Slurm's queue, not by Snakemake: jobs were
    # submitted while earlier ones still ran, and no two jobs' run times overlap
    times = sorted(
        (job["StartTime"], job["EndTime"], job["SubmitTime"])
        for job in (slurm_job(slurm, i) for i in ids)
    )
    pairs = list(itertools.pairwise(times))
    assert all(start >= end for (_, end, _), (start, _, _) in pairs), times
    assert any(submitted < end for (_, end, _), (_, _, submitted) in pairs), times

    raw = root / f"results/{HARDWARE}/default/raw/fio"
    for record in (json.loads(path.read_text()) for path in raw.rglob("rep1.json")):
        context = record["context"]
        assert context["host"]["slurm_job_id"] in ids
        # each tier measured where it is: the node's own tmpfs, the volume over FUSE
        fs_type = {"local": "tmpfs", "shared": "fuse.glusterfs"}[record["spec"]["tier"]]
        assert context["tier"]["fs_type"] == fs_type, context["tier"]
        assert record["spec"]["slurm_partition"] == slurm.partition

    # the probe of the tiers ran as a Slurm job on a node, never on the submit side
    tiers = json.loads((root / f"results/{HARDWARE}/default/provenance/tiers.json").read_text())
    assert tiers["host"]["slurm_job_id"] and tiers["host"]["slurm_job_id"] not in ids

    # the report says per tier and node which jobs ran there and what they saw
    nodes = json.loads((root / f"results/{HARDWARE}/default/provenance/nodes.json").read_text())
    assert {n["tier"] for n in nodes} == {"local", "shared"}
    assert {n["host"] for n in nodes} <= NODES
    assert sorted((i for n in nodes for i in n["slurm_job_ids"]), key=int) == sorted(ids, key=int)
    html = (root / f"results/{HARDWARE}/report.html").read_text()
    for node in nodes:
        assert node["fs_type"] and node["slurm_partition"] == slurm.partition
        assert f"{len(node['slurm_job_ids'])}: {id_ranges(node['slurm_job_ids'])}" in html
    print(f"smoke study on two Slurm nodes: {len(ids)} benchmark jobs in {elapsed:.0f} s")


CFD = {
    "workload": "cfd_proxy",
    "params": {
        "ensemble": 1,
        "steps": 4,
        "write_interval": 2,
        "cells_per_rank": 2000,
        "compute_per_cell_step": 1e-7,  # 0.2 ms per step
        "warmup_steps": 0,
    },
}


def cfd(name: str, description: str, tiers: list[str], **params) -> dict:
    return {
        **CFD,
        "name": name,
        "description": description,
        "tiers": tiers,
        "params": {**CFD["params"], **params},
    }


CHECK_STUDY = {
    "study": "slurmcheck",
    "title": "Slurm integration checks on two nodes",
    "repetitions": 1,
    "warmup": False,
    "experiments": [
        cfd(
            "spanning",
            "one simulation of two ranks on two nodes, launched by srun --mpi=pmix",
            ["local", "shared"],
            ranks=2,
            nodes=2,
        ),
        cfd(
            "ensemble",
            "two one-rank simulations started together, each on a node of its own",
            ["shared"],
            ranks=1,
            ensemble=2,
            nodes=1,
        ),
        cfd("single", "a one-rank simulation: a job of one task", ["local"], ranks=1),
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


def record_of(root: Path, experiment: str, tier: str) -> dict:
    raw = root / f"results/slurmcheck/slurmcheck/raw/cfd_proxy/{experiment}/{tier}"
    return json.loads(next(raw.rglob("rep1.json")).read_text())


def test_mpi_across_nodes_ensembles_and_bad_input(pipeline, slurm: MiniCluster):
    gone = "/proc/tierbench-no-such-tier"  # cannot exist, cannot be created, even by root
    root = hardware_file(
        pipeline,
        "slurmcheck",
        nopart={"path": "results/scratch-nopart", "class": "disk", "partition": "nosuch"},
        gone={"path": gone, "class": "disk"},
    )
    (root / "config/studies/slurmcheck.yaml").write_text(yaml.safe_dump(CHECK_STUDY))
    done = on_slurm(
        pipeline,
        "--configfile",
        "config/studies/slurmcheck.yaml",
        "--config",
        "scale=smoke",
        "hardware=slurmcheck",
        "exclusive=True",
    )
    output = done.stdout + done.stderr
    assert "Slurm partition 'nosuch'" in output  # said once when submitting

    results = read_results(root, "slurmcheck", "slurmcheck")
    assert results["slurm_job_id"].str.fullmatch(r"\d+").all()
    status = results.groupby("experiment")["status"].agg(set)
    for experiment in ("spanning", "ensemble", "single"):
        assert status[experiment] == {"ok"}, results[results["experiment"] == experiment]

    # one simulation over both nodes: on the node-local tier each node wrote its own
    # rank's folder, and the counts of both still add up (check_counts passed: ok)
    for tier in ("local", "shared"):
        record = record_of(root, "spanning", tier)
        (command,) = record["extra"]["commands"]
        assert command.startswith("srun --mpi=pmix -n 2 -N 2 --relative=0 "), command
        (member,) = record["extra"]["members"]
        assert member["ranks"] == 2 and set(member["hosts"]) == NODES, member["hosts"]
        job = slurm_job(slurm, record["context"]["host"]["slurm_job_id"])
        assert job["NumNodes"] == "2" and job["NumTasks"] == "2", job
        assert job["OverSubscribe"] == "NO", job  # exclusive=True: whole nodes

    # an ensemble's members on nodes of their own, writing to the one shared tier
    ensemble = record_of(root, "ensemble", "shared")
    commands = ensemble["extra"]["commands"]
    assert [re.search(r" -N 1 --relative=(\d) ", c)[1] for c in commands] == ["0", "1"]
    hosts = [tuple(m["hosts"]) for m in ensemble["extra"]["members"]]
    assert sorted(hosts) == [("node1",), ("node2",)], hosts
    assert slurm_job(slurm, ensemble["context"]["host"]["slurm_job_id"])["NumNodes"] == "2"

    # one rank: a job of one task (the plugin refuses MPI jobs of one), the rank in its step
    single = record_of(root, "single", "local")
    (command,) = single["extra"]["commands"]
    assert command.startswith("srun --mpi=pmix -n 1 ") and "--overlap" in command, command
    # a point that names no nodes is packed on as few as hold its ranks
    assert slurm_job(slurm, single["context"]["host"]["slurm_job_id"])["NumNodes"] == "1"

    bad = results[results["experiment"] == "bad_input"].set_index("tier")
    assert set(bad["status"]) == {"failed"}
    nopart = bad.loc["nopart", "reason"]
    assert "Slurm partition 'nosuch'" in nopart and "does not exist" in nopart
    missing = bad.loc["gone", "reason"]
    assert gone in missing and "does not exist" in missing
    logs = root / "results/slurmcheck/slurmcheck/logs/fio/bad_input"
    assert "nosuch" in next((logs / "nopart").rglob("*.log")).read_text()
    assert gone in next((logs / "gone").rglob("*.log")).read_text()
    html = (root / "results/slurmcheck/report.html").read_text().replace("&#39;", "'")
    assert nopart in html and missing in html


def document_001_experiments(root: Path) -> str:
    """cfd_dcpmm without its fidelity experiments, in the pipeline copy.

    Those 16 jobs (proxy and simpleFoam side by side, timed and traced) run the same
    code on a cluster as on a workstation, where test_cfd_proxy's smoke of the whole
    study runs them; here they would double the test's time for no check of its own."""
    study = yaml.safe_load((REPO / "config/studies/cfd_dcpmm.yaml").read_text())
    study["experiments"] = [e for e in study["experiments"] if not e["name"].startswith("fidelity")]
    path = root / "config/studies/cfd_dcpmm_document.yaml"
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    return str(path.relative_to(root))


def test_document_001_study_on_two_nodes(pipeline, slurm: MiniCluster):
    """cfd_dcpmm's document experiments at their smoke size: the proxy and simpleFoam on
    the node-local tmpfs and the GlusterFS volume, single runs and ensembles, staging,
    every point a Slurm job on a node, gathered on the submit host, and document 001's
    lessons judged on the shared tier: its file creates reach the server whatever the
    page cache holds, so no lesson waits for a device it never met.

    On whole nodes (exclusive=True), as the document's runs: the node-local points run two
    at a time, one per node, and only the shared tier's wait for each other. What is
    checked here is where the jobs ran and what was judged, not their speed."""
    root = hardware_file(pipeline)
    started = time.monotonic()
    on_slurm(
        pipeline,
        "--configfile",
        document_001_experiments(root),
        "--config",
        "scale=smoke",
        f"hardware={HARDWARE}",
        "repetitions=1",
        "exclusive=True",
        timeout=900,
    )
    elapsed = time.monotonic() - started
    results = read_results(root, "cfd_dcpmm")
    measured = results[results["status"] != "not_applicable"]
    assert set(measured["status"]) == {"ok"}, measured[measured["status"] != "ok"]
    for workload in ("cfd_proxy", "openfoam"):
        ran = measured[measured["workload"] == workload]
        assert set(ran["tier"]) == {"local", "shared"}, workload
    assert set(measured["host"]) <= NODES and measured["slurm_job_id"].notna().all()

    verdicts = json.loads((root / f"results/{HARDWARE}/cfd_dcpmm/verdict.json").read_text())
    first = [v for v in verdicts["verdicts"] if v["lesson"].startswith("Writing every step")]
    assert len(first) == 2  # the proxy's and simpleFoam's
    for verdict in first:
        assert verdict["status"] != "inconclusive", verdict
        assert "shared/local" in verdict["text"], verdict["text"]
    print(f"cfd_dcpmm smoke on two Slurm nodes: {len(results)} rows in {elapsed:.0f} s")


#: the database test: appends per node, and seconds for srun and the imports
RUNS_PER_NODE = 20
#: seconds for srun and the imports, so both writers start appending together
START_DELAY_S = 15
WRITER = """
import json, sys, time
from tierbench import resultsdb
jobs = json.load(open(sys.argv[1]))
while time.time() < jobs["start"]:
    time.sleep(0.01)
recorded = []
for job in jobs["runs"]:
    try:
        run = resultsdb.append(jobs["db"], **job, scale="smoke", executor="slurm")
    except resultsdb.ResultsError as error:
        print(f"tierbench: {error}", file=sys.stderr)
        break
    recorded.append(run["run_id"])
print(json.dumps(recorded))
"""


def write_jobs(folder, node, db, start):
    """A node's studies as the pipeline leaves them, and the file its writer reads."""
    runs = []
    for i in range(RUNS_PER_NODE):
        study_dir, paths = write_study(folder, node, f"study{i}", sweep(blocks=("4k",)))
        runs.append(
            {
                "machine": node,
                "study": study_dir.name,
                "raw": paths,
                "results": str(study_dir / "results.csv"),
                "summary": str(study_dir / "summary.csv"),
                "provenance": str(study_dir / "provenance" / "tiers.json"),
                "nodes": str(study_dir / "provenance" / "nodes.json"),
            }
        )
    jobs = folder / f"{node}.json"
    jobs.write_text(json.dumps({"db": str(db), "start": start, "runs": runs}))
    return jobs


def test_two_nodes_appending_to_one_database_lose_no_run(slurm: MiniCluster, tmp_path):
    """The results database on the GlusterFS volume, written from both nodes at once: there
    SQLite's WAL lost one node's commits without an error (resultsdb and sharedfs use a
    rollback journal and a lock folder on such a volume). Each node appends 20 runs at the
    same moment: every run a writer recorded is present, or the writer said why in one line."""
    db = slurm.shared / f"results-{os.getpid()}" / "tierbench.sqlite"
    start = time.time() + START_DELAY_S
    nodes = slurm.nodes[:2]
    jobs = {node: write_jobs(tmp_path / "studies", node, db, start) for node in nodes}
    env = {**os.environ, **slurm.env, "PYTHONPATH": str(REPO / "workflow")}
    writers = {
        node: subprocess.Popen(
            ["srun", "-w", node, sys.executable, "-c", WRITER, str(jobs[node])],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for node in nodes
    }
    said = {node: writer.communicate(timeout=600) for node, writer in writers.items()}
    recorded = {}
    for node, (out, err) in said.items():
        assert writers[node].returncode == 0, f"{node}: {err}"
        recorded[node] = json.loads(out.strip().splitlines()[-1])
        errors = [line for line in err.splitlines() if line.startswith("tierbench: ")]
        if len(recorded[node]) < RUNS_PER_NODE:  # it stopped: said why, in one line
            assert len(errors) == 1 and "database:" in errors[0], f"{node}: {err}"
    conn = sqlite3.connect(db)
    try:
        present = {row[0] for row in conn.execute("SELECT run_id FROM runs")}
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()
    for node in nodes:
        assert set(recorded[node]) <= present, f"{node}: a recorded run is missing"
    assert len(present) == sum(len(runs) for runs in recorded.values())
    print({node: len(runs) for node, runs in recorded.items()}, "runs recorded")
    assert sorted(p.name for p in db.parent.iterdir()) == ["tierbench.sqlite"]  # no lock left


def test_a_run_killed_mid_way_and_the_cluster_down_leave_nothing(pipeline, slurm: MiniCluster):
    """Last in the module: the run's Snakemake is killed while its jobs run on the nodes,
    then the cluster comes down with jobs still queued or running."""
    root = hardware_file(pipeline)
    command = [sys.executable, "-m", "snakemake", "--profile", "slurm", *FAST_POLL]
    command += ["--config", "scale=smoke", f"hardware={HARDWARE}", "repetitions=1"]
    run = subprocess.Popen(
        command,
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180
        while not slurm.run("squeue", "--noheader", "--states=RUNNING", "--format=%i").split():
            assert run.poll() is None, "the run ended before any job ran"
            assert time.monotonic() < deadline, "no job started running in 180 s"
            time.sleep(0.5)
    finally:
        os.killpg(run.pid, signal.SIGKILL)  # as a user's kill -9, or a lost login session
        run.wait(timeout=30)
    assert slurm.run("squeue", "--noheader", "--format=%i").split(), "no job left to clean up"
    records, run_netns = snapshot(slurm)
    assert slurm.down()
    assert leftovers(slurm.state, records, run_netns) == []
    # what the run wrote on the submit host stays for a re-run; nothing else of it runs
    assert (root / ".snakemake").is_dir()
    assert not [p for p in Path("/proc").glob("[0-9]*") if _runs_in(p, root)]


def _runs_in(proc: Path, root: Path) -> bool:
    """A live process whose current folder is inside the run's pipeline copy."""
    try:
        return str(root) in os.readlink(proc / "cwd")
    except OSError:
        return False
