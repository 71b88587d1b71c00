"""The pipeline on a real Slurm cluster of two nodes: `snakemake --profile slurm`.

The module starts the cluster on one machine (tierbench.minicluster, through
tests/minicluster_fixture.py): four Slurm nodes in namespaces, each with its
own node-local tmpfs, and a GlusterFS volume every node mounts; packages are
installed with apt-get where missing, and the cluster always comes down
afterwards. Without root the tests are skipped with the reason, except under
CI=true, where they fail: CI must never skip them.

Runs, each through the literal `snakemake --profile slurm` with the committed
hardware file config/hardware/minicluster.yaml in a scratch copy of the
pipeline:

- the default study's smoke preset, its sweeps narrowed (default_experiments),
  on the node-local and the shared tier: its benchmarks run one at a time
  inside one Slurm allocation (a job group), and each record says which job
  and which node, made inside the job;
- a small study for the cluster itself: one MPI simulation spanning two
  nodes (on the node-local tier, where each node has its own folder, and on
  the shared one), simpleFoam with more ranks than a node has cores on the
  node-local tier (its case staged to both nodes), an ensemble whose members
  run on different nodes on the shared tier, a one-rank run, and two points
  that cannot run (a partition
  the cluster lacks, a tier path missing on the nodes), which end as failed
  points with the reason in their log and in the report while the rest
  completes;
- document 001's study (cfd_dcpmm without its fidelity experiments) at its
  smoke size, in 10 steps: the proxy and simpleFoam on both tiers, single runs, ensembles
  on nodes of their own and staging, in a handful of Slurm jobs, results
  gathered on the submit host;
- an allocation cancelled in the middle: only the benchmark that was running
  is lost, its log says why, and the same command again completes the study
  with every point once in the results database;
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
from conftest import REPO, pipeline_copy, snakemake_command
from minicluster_fixture import leftovers, require_minicluster, running_minicluster, snapshot
from test_resultsdb import sweep, write_study
from tierbench.minicluster import MiniCluster
from tierbench.report import duration_text, id_ranges

pytestmark = pytest.mark.slurm

#: poll Slurm every second (the plugin's default first wait is 40 s)
FAST_POLL = ["--slurm-init-seconds-before-status-checks", "1"]
#: Snakemake whose Slurm executor keeps polling every few seconds while a job runs, not
#: 10 s later after each check (tests/steady_poll_snakemake.py): an allocation's end
#: was noticed up to a minute late, in every allocation of every test
STEADY_POLL = str(Path(__file__).with_name("steady_poll_snakemake.py"))
HARDWARE = "minicluster"
NODES = {f"node{i}" for i in range(1, 5)}
SUBMITTED = re.compile(r"has been submitted with SLURM jobid (\d+)")


@pytest.fixture(scope="module")
def slurm():
    """The four-node cluster for this module; brought down afterwards, also on failure."""
    require_minicluster()
    yield from running_minicluster(nodes=4)


def snakemake() -> list[str]:
    """The command line that starts Snakemake on the submit host, polling steadily."""
    return [snakemake_command()[0], STEADY_POLL]


@pytest.fixture
def pipeline(tmp_path: Path):
    """A copy of the pipeline whose runs poll Slurm steadily."""
    return pipeline_copy(tmp_path / "tierbench", command=snakemake())


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


def expand_nodes(node_list: str) -> list[str]:
    """``node[1-2]`` or ``node1`` as node names."""
    match = re.fullmatch(r"(\w+?)\[([\d,-]+)\]", node_list)
    if not match:
        return node_list.split(",")
    names = []
    for part in match[2].split(","):
        low, _, high = part.partition("-")
        names += [f"{match[1]}{i}" for i in range(int(low), int(high or low) + 1)]
    return names


def default_experiments(root: Path) -> str:
    """The default study's experiments, each sweep narrowed at smoke size to one block size
    (sequential: write and read, buffered and direct) and one metadata point, in the
    pipeline copy: 12 benchmarks, not 22. Every workload and tier still runs in the one
    allocation; the 22 took 74 s of it on a busy 2-core machine, 3.4 s each."""
    experiments = yaml.safe_load((REPO / "config/config.yaml").read_text())["experiments"]
    smoke = {e["name"]: e["scale"]["smoke"] for e in experiments}
    smoke["sequential"]["block_size"] = ["1M"]
    smoke["metadata"]["fsync"] = [False]
    path = root / "config/studies/default_narrowed.yaml"
    path.write_text(yaml.safe_dump({"experiments": experiments}, sort_keys=False))
    return str(path.relative_to(root))


def test_smoke_study_runs_as_slurm_jobs_on_the_nodes(pipeline, slurm: MiniCluster):
    root = hardware_file(pipeline)
    started = time.monotonic()
    done = on_slurm(
        pipeline,
        "--configfile",
        default_experiments(root),
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
    plan = json.loads((root / f"results/{HARDWARE}/default/plan.json").read_text())
    assert len(runs) == len(plan["points"]), runs[["experiment", "tier", "point"]]
    assert set(results["status"]) == {"ok"}, results[results["status"] != "ok"]
    # the benchmarks ran inside one allocation, a Slurm job group, one after another
    assert results["slurm_job_id"].str.fullmatch(r"\d+").all(), results["slurm_job_id"]
    (allocation,) = ids = job_ids(runs)
    submitted = SUBMITTED.findall(done.stdout + done.stderr)
    assert allocation in submitted and len(submitted) == 2, submitted  # and the set-up job
    assert set(results["host"]) <= NODES, set(results["host"])
    job = slurm_job(slurm, allocation)
    assert job["JobState"] == "COMPLETED", job
    assert job["Partition"] == slurm.partition
    assert "default-round1-1" in job["Comment"], job["Comment"]  # the group's name
    assert job["TimeLimit"] != "UNLIMITED"  # the jobs' shares of runtime= reached sbatch
    assert set(runs["host"]) <= set(expand_nodes(job["NodeList"]))
    spans = sorted(
        (pd.Timestamp(r.started_at), pd.Timestamp(r.started_at) + pd.Timedelta(r.duration_s, "s"))
        for r in runs.itertuples()
    )
    # a record's start is in whole seconds: one benchmark ends before the next one starts
    second = pd.Timedelta(1, "s")
    assert all(end <= start + second for (_, end), (start, _) in itertools.pairwise(spans))

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
    assert {i for n in nodes for i in n["slurm_job_ids"]} == set(ids)  # one row per tier
    use = json.loads((root / f"results/{HARDWARE}/default/provenance/allocations.json").read_text())
    ((held,),) = [[a for a in use["allocations"] if a["slurm_job_id"] == allocation]]
    assert held["benchmarks"] == len(runs) and 0 < held["benchmark_s"] <= held["held_s"]
    assert held["nodes"] == int(job["NumNodes"])
    assert 0 < use["benchmark_share"] <= 1
    html = (root / f"results/{HARDWARE}/report.html").read_text()
    assert use["node_seconds"] == pytest.approx(held["nodes"] * held["held_s"], abs=0.2)
    assert f"{duration_text(use['node_seconds'])} of node time held" in html
    assert "of it inside benchmarks" in html
    for node in nodes:
        assert node["fs_type"] and node["slurm_partition"] == slurm.partition
        assert f"{len(node['slurm_job_ids'])}: {id_ranges(node['slurm_job_ids'])}" in html
    print(f"smoke study on Slurm: {len(runs)} benchmarks in {len(ids)} job in {elapsed:.0f} s")


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
        cfd("single", "a one-rank simulation", ["local"], ranks=1),
        {
            "name": "solver_spanning",
            "workload": "openfoam",
            "description": "simpleFoam on 4 ranks, nodes of 2 cores: its case on both nodes",
            "tiers": ["local"],
            # 4 iterations, not 6: on 2 cores shared by 4 ranks each took 5 s
            "params": {
                "ranks": 4,
                "cells_per_rank": 2000,
                "steps": 4,
                "write_interval": 2,
                "warmup_steps": 1,
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
    for experiment in ("spanning", "ensemble", "single", "solver_spanning"):
        assert status[experiment] == {"ok"}, results[results["experiment"] == experiment]

    # one simulation over two nodes: on the node-local tier each node wrote its own
    # rank's folder, and the counts of both still add up (check_counts passed: ok)
    for tier in ("local", "shared"):
        record = record_of(root, "spanning", tier)
        (command,) = record["extra"]["commands"]
        assert command.startswith("srun --mpi=pmix -n 2 -N 2 --relative=0 "), command
        (member,) = record["extra"]["members"]
        assert member["ranks"] == 2 and set(member["hosts"]) == {"node1", "node2"}
        job = slurm_job(slurm, record["context"]["host"]["slurm_job_id"])
        assert int(job["NumNodes"]) >= 2, job
        assert job["OverSubscribe"] == "NO", job  # exclusive=True: whole nodes

    # simpleFoam on 4 ranks of 2-core nodes, node-local tier: two nodes, the case on both
    solver = json.loads(
        next((root / "results/slurmcheck/slurmcheck/raw/openfoam").rglob("rep1.json")).read_text()
    )
    (command,) = solver["extra"]["commands"]
    assert command.startswith("srun --mpi=pmix -n 4 -N 2 --relative=0 "), command
    assert solver["extra"]["staged_to_nodes"] == ["member0"], solver["extra"]
    assert set(solver["extra"]["rank_hosts"]) == {"node1", "node2"}, solver["extra"]

    # an ensemble's members on nodes of their own, writing to the one shared tier
    ensemble = record_of(root, "ensemble", "shared")
    commands = ensemble["extra"]["commands"]
    assert [re.search(r" -N 1 --relative=(\d) ", c)[1] for c in commands] == ["0", "1"]
    hosts = [tuple(m["hosts"]) for m in ensemble["extra"]["members"]]
    assert sorted(hosts) == [("node1",), ("node2",)], hosts

    # one rank on one node of the allocation
    single = record_of(root, "single", "local")
    (command,) = single["extra"]["commands"]
    assert command.startswith("srun --mpi=pmix -n 1 -N 1 --relative=0 "), command
    # the checks' benchmarks, with a point bound to another partition, in a few jobs
    submitted = SUBMITTED.findall(output)
    assert len(submitted) <= 5, submitted  # preflight, probe, two allocations, one to spare

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


#: steps of document 001's proxy and simpleFoam runs here (its smoke size: 20)
SMOKE_STEPS = 10


def document_001_experiments(root: Path) -> str:
    """cfd_dcpmm without its fidelity experiments, in the pipeline copy.

    Those 16 jobs (proxy and simpleFoam side by side, timed and traced) run the same
    code on a cluster as on a workstation, where test_cfd_proxy's smoke of the whole
    study runs them; here they would double the test's time for no check of its own.
    The proxy's and simpleFoam's runs take SMOKE_STEPS steps, not the smoke's 20: on
    the GlusterFS volume every step's files cost seconds, and the shared/local ratio the
    lesson judges is several times its 1.1 band either way."""
    study = yaml.safe_load((REPO / "config/studies/cfd_dcpmm.yaml").read_text())
    study["experiments"] = [e for e in study["experiments"] if not e["name"].startswith("fidelity")]
    for experiment in study["experiments"]:
        if "steps" in experiment["scale"].get("smoke", {}):
            experiment["scale"]["smoke"]["steps"] = SMOKE_STEPS
    path = root / "config/studies/cfd_dcpmm_document.yaml"
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    return str(path.relative_to(root))


def test_document_001_study_on_two_nodes(pipeline, slurm: MiniCluster):
    """cfd_dcpmm's document experiments at their smoke size: the proxy and simpleFoam on
    the node-local tmpfs and the GlusterFS volume, single runs and ensembles, staging, in a
    handful of Slurm jobs, ensemble members on nodes of their own, gathered on the submit
    host, and document 001's lessons judged on the shared tier: its file creates reach the
    server whatever the page cache holds, so no lesson waits for a device it never met.
    On whole nodes (exclusive=True), as the document's runs. What is checked here is where
    the jobs ran and what was judged, not their speed."""
    root = hardware_file(pipeline)
    started = time.monotonic()
    done = on_slurm(
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
    # a handful of Slurm jobs (93 when every repetition was one), whose ranks used the nodes
    submitted = SUBMITTED.findall(done.stdout + done.stderr)
    assert len(submitted) <= 12, submitted
    raw = root / f"results/{HARDWARE}/cfd_dcpmm/raw"
    records = [json.loads(path.read_text()) for path in raw.rglob("rep*.json")]
    assert len({host for r in records for host in r["extra"].get("rank_hosts", [])}) >= 2
    for record in records:
        if record["spec"]["params"].get("ensemble", 1) > 1:
            hosts = [tuple(m["hosts"]) for m in record["extra"]["members"]]
            assert len(set(hosts)) == len(hosts), (record["spec"]["point"], hosts)

    verdicts = json.loads((root / f"results/{HARDWARE}/cfd_dcpmm/verdict.json").read_text())
    first = [v for v in verdicts["verdicts"] if v["lesson"].startswith("Writing every step")]
    assert len(first) == 2  # the proxy's and simpleFoam's
    for verdict in first:
        assert verdict["status"] != "inconclusive", verdict
        assert "shared/local" in verdict["text"], verdict["text"]
    # a dry run of the same command has nothing to do: its jobs' parameters (the MPI
    # launcher, the executor recorded) are those of the run, not of a local one
    again = on_slurm(
        pipeline, "-n", "--configfile", document_001_experiments(root), "--config",
        "scale=smoke", f"hardware={HARDWARE}", "repetitions=1", "exclusive=True",
    )  # fmt: skip
    assert "Nothing to be done" in again.stdout + again.stderr, again.stdout[-3000:]
    print(f"cfd_dcpmm smoke on two Slurm nodes: {len(results)} rows in {elapsed:.0f} s")


CANCEL_STUDY = {
    "study": "cancelled",
    "title": "An allocation cancelled in the middle",
    "repetitions": 2,
    "warmup": False,
    "experiments": [
        {
            "name": "wait",
            "workload": "command",
            "description": "a command that takes a second or two, so scancel finds one running",
            "tiers": ["local", "shared"],
            "params": {"command": [["sleep", "1"], ["sleep", "2"]]},
        }
    ],
}


def test_an_allocation_cancelled_mid_way_loses_only_the_benchmark_it_ran(
    pipeline, slurm: MiniCluster
):
    """scancel of the allocation while one of its benchmarks runs: what it measured stays,
    the benchmark it was running says why in its log's last line, and the same command
    again measures only the rest; the results database then holds every point once."""
    root = hardware_file(pipeline)
    (root / "config/studies/cancelled.yaml").write_text(yaml.safe_dump(CANCEL_STUDY))
    args = ("--configfile", "config/studies/cancelled.yaml", "--config", f"hardware={HARDWARE}")
    command = [*snakemake(), "--profile", "slurm", *FAST_POLL, *args]
    raw = root / f"results/{HARDWARE}/cancelled/raw"
    logs = root / f"results/{HARDWARE}/cancelled/logs"

    def running() -> list[Path]:
        """Logs of benchmarks under way: begun (their run folder made), no record yet."""
        return [
            log
            for log in logs.rglob("rep*.log")
            if "run folder" in log.read_text()
            and not (raw / log.relative_to(logs)).with_suffix(".json").exists()
        ]

    first = subprocess.Popen(
        command, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        deadline = time.monotonic() + 300
        while len(list(raw.rglob("rep*.json"))) < 4 or not running():
            assert first.poll() is None, "the run ended before the allocation measured 4"
            assert time.monotonic() < deadline, "4 benchmarks not measured in 300 s"
            time.sleep(0.1)
        queue = slurm.run("squeue", "--noheader", "--states=RUNNING", "--format=%i %k")
        (allocation,) = [line.split()[0] for line in queue.splitlines() if "-round1-" in line]
        slurm.run("scancel", allocation)
        output, _ = first.communicate(timeout=300)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode != 0, output
    kept = {path: path.stat().st_mtime_ns for path in raw.rglob("rep*.json")}
    assert 4 <= len(kept) < 8, len(kept)  # 2 points x 2 tiers x 2 repetitions
    (log,) = running()
    assert "stopped by SIGTERM" in log.read_text().strip().splitlines()[-1], log.read_text()
    assert "the same command again measures it" in log.read_text()
    assert not list(Path(slurm.shared).glob("tierbench-*")), "a run folder left on the volume"

    on_slurm(pipeline, *args)
    measured = set(raw.rglob("rep*.json"))
    assert len(measured) == 8
    assert all(path.stat().st_mtime_ns == when for path, when in kept.items())  # not again
    conn = sqlite3.connect(root / "results/tierbench.sqlite")
    try:
        (run_id,) = [row[0] for row in conn.execute("SELECT run_id FROM runs")]
        rows = conn.execute(
            "SELECT experiment, tier, point, repetition, metric, COUNT(*) FROM measurements"
            " WHERE run_id = ? GROUP BY 1, 2, 3, 4, 5",
            (run_id,),
        ).fetchall()
    finally:
        conn.close()
    assert {row[-1] for row in rows} == {1}
    assert len({row[:4] for row in rows}) == 8


#: the database test: appends per node
RUNS_PER_NODE = 20
#: both writers start appending together: each says it is ready (srun and its imports
#: done) in a folder and waits for the other, not for a start time with slack for both
WRITER = """
import json, pathlib, sys, time
from tierbench import resultsdb
jobs = json.load(open(sys.argv[1]))
ready = pathlib.Path(jobs["ready"])
(ready / jobs["node"]).touch()
deadline = time.time() + 120
while len(list(ready.iterdir())) < jobs["writers"]:
    if time.time() > deadline:
        sys.exit("the other writer was not ready in 120 s")
    time.sleep(0.005)
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


def write_jobs(folder, node, db, ready, writers):
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
    spec = {"db": str(db), "node": node, "ready": str(ready), "writers": writers, "runs": runs}
    jobs.write_text(json.dumps(spec))
    return jobs


def test_two_nodes_appending_to_one_database_lose_no_run(slurm: MiniCluster, tmp_path):
    """The results database on the GlusterFS volume, written from both nodes at once: there
    SQLite's WAL lost one node's commits without an error (resultsdb and sharedfs use a
    rollback journal and a lock folder on such a volume). Each node appends 20 runs at the
    same moment: every run a writer recorded is present, or the writer said why in one line."""
    db = slurm.shared / f"results-{os.getpid()}" / "tierbench.sqlite"
    nodes = slurm.nodes[:2]
    ready = tmp_path / "ready"
    ready.mkdir()
    jobs = {node: write_jobs(tmp_path / "studies", node, db, ready, len(nodes)) for node in nodes}
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
    command = [*snakemake(), "--profile", "slurm", *FAST_POLL]
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
