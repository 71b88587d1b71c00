"""Item 9: how long do `cluster up` and `cluster down` take, and a study on two nodes?

A pipeline test on the one-machine cluster pays for both every time, so they
must take seconds. Each round times ``python -m tierbench.minicluster up``
(2 nodes; a fresh Python process, imports included; the state folder in the
item's scratch folder) until it returns with every node idle and every mount
made, checks ``status`` (not timed), then times ``down`` until nothing of it
is left. The rounds hold the machine's minicluster lock, so a test file using
the cluster waits for them. Root only: elsewhere the rows are skipped with
the reason.

The third row is what a user waits for on the cluster path: the default
study's smoke preset through the literal ``snakemake --profile slurm
--config hardware=minicluster`` (one benchmark at a time, as the profile has
it) in a copy of the pipeline, with the cluster up at its default state
folder, as config/hardware/minicluster.yaml names it. Not at --tiny: the
Slurm tests run the same pipeline.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from harness import REPO, copy_pipeline, log, row, skipped_row
from tierbench import minicluster

SIZES = {
    "full": {"rounds": 5, "nodes": 2, "smoke_runs": 1},
    "tiny": {"rounds": 2, "nodes": 2, "smoke_runs": 0},
}
ITEM = 9


def command(action: str, state: Path, nodes: int) -> tuple[float, subprocess.CompletedProcess]:
    """Wall time of one minicluster command, and its outcome."""
    argv = [sys.executable, "-m", "tierbench.minicluster", action, "--state", str(state)]
    if action == "up":
        argv += ["--nodes", str(nodes)]
    # this process holds the machine's minicluster lock for the commands
    env = {**os.environ, "PYTHONPATH": str(REPO / "workflow"), minicluster.LOCK_HELD_ENV: "1"}
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    return time.perf_counter() - start, done


def checked(action: str, state: Path, nodes: int) -> float:
    seconds, done = command(action, state, nodes)
    if done.returncode != 0:
        said = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()[-1]
        raise RuntimeError(f"minicluster {action} failed: {said}")
    return seconds


def unavailable() -> str | None:
    """Why no cluster can start here, or None."""
    if os.geteuid() != 0:
        return "skipped: the minicluster needs root"
    missing = minicluster.missing_packages()
    if missing:
        return f"skipped: {', '.join(missing)} missing ({minicluster.install_command(missing)})"
    return None


def two_node_smoke(scratch: Path) -> tuple[float, int, float | None]:
    """Wall time of the default study's smoke preset on the cluster, through Slurm; the
    Slurm jobs it submitted; the share of the allocations' node time inside benchmarks."""
    root = copy_pipeline(scratch, "smoke-on-slurm")
    (root / "slurm").symlink_to((REPO / "slurm").readlink())
    argv = [sys.executable, "-m", "snakemake", "--profile", "slurm"]
    argv += ["--slurm-init-seconds-before-status-checks", "1"]
    argv += ["--config", "scale=smoke", "hardware=minicluster"]
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=root, capture_output=True, text=True, timeout=1800)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"the smoke study on Slurm failed: {done.stderr.strip()[-300:]}")
    jobs = len(re.findall(r"has been submitted with SLURM jobid", done.stdout + done.stderr))
    use = json.loads((root / "results/minicluster/default/provenance/allocations.json").read_text())
    return seconds, jobs, use["benchmark_share"]


def smoke_on_cluster(runs: int, scratch: Path, goal) -> dict:
    measure = "the default study's smoke preset, `snakemake --profile slurm`, 2 nodes"
    if not runs:
        return skipped_row(ITEM, "two_node_smoke", measure, "s", "skipped (--tiny)", goal)
    cluster = minicluster.MiniCluster()
    times, jobs, shares = [], [], []
    try:
        cluster.up()
        for number in range(runs):
            seconds, submitted, share = two_node_smoke(scratch / f"run{number}")
            times.append(seconds)
            jobs.append(submitted)
            shares.append(share)
            log(f"two-node smoke {number + 1}: {seconds:.0f} s, {submitted} Slurm jobs, "
                f"{share:.0%} of the allocated node time in benchmarks")  # fmt: skip
    finally:
        cluster.down()
    detail = (
        f"one benchmark at a time in allocations; Slurm jobs per run {sorted(jobs)}; share of "
        f"the allocations' node time inside benchmarks {sorted(shares)}"
    )
    return row(ITEM, "two_node_smoke", measure, "s", times, goal, detail)


def measure(mode: str, scratch: Path, goal) -> list[dict]:
    up_goal, down_goal, smoke_goal = goal
    size = SIZES[mode]
    nodes = size["nodes"]
    up_measure = f"`cluster up`, {nodes} nodes, until every node is idle and mounted"
    down_measure = "`cluster down`, until nothing of the cluster is left"
    reason = unavailable()
    if reason:
        return [
            skipped_row(ITEM, "cluster_up", up_measure, "s", reason, up_goal),
            skipped_row(ITEM, "cluster_down", down_measure, "s", reason, down_goal),
            skipped_row(ITEM, "two_node_smoke", "two-node smoke study", "s", reason, smoke_goal),
        ]
    state = scratch / "state"
    ups, downs = [], []
    with minicluster.cluster_lock():
        try:
            for number in range(size["rounds"]):
                ups.append(checked("up", state, nodes))
                checked("status", state, nodes)
                downs.append(checked("down", state, nodes))
                log(f"round {number + 1}: up {ups[-1]:.2f} s, down {downs[-1]:.2f} s")
        finally:
            command("down", state, nodes)
        smoke = smoke_on_cluster(size["smoke_runs"], scratch, smoke_goal)
    detail = f"{len(ups)} rounds, each up then down from a fresh process, imports included"
    return [
        row(ITEM, "cluster_up", up_measure, "s", ups, up_goal, detail),
        row(ITEM, "cluster_down", down_measure, "s", downs, down_goal, detail),
        smoke,
    ]
