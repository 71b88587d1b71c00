"""Item 9: how long do `cluster up` and `cluster down` take?

A pipeline test on the one-machine cluster pays for both every time, so they
must take seconds. Each round times ``python -m tierbench.minicluster up``
(2 nodes; a fresh Python process, imports included; the state folder in the
item's scratch folder) until it returns with every node idle and every mount
made, checks ``status`` (not timed), then times ``down`` until nothing of it
is left. The rounds hold the machine's minicluster lock, so a test file using
the cluster waits for them. Root only: elsewhere both rows are skipped with
the reason.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from harness import REPO, log, row, skipped_row
from tierbench import minicluster

SIZES = {"full": {"rounds": 5, "nodes": 2}, "tiny": {"rounds": 2, "nodes": 2}}
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


def measure(mode: str, scratch: Path, goal) -> list[dict]:
    up_goal, down_goal = goal
    size = SIZES[mode]
    nodes = size["nodes"]
    up_measure = f"`cluster up`, {nodes} nodes, until every node is idle and mounted"
    down_measure = "`cluster down`, until nothing of the cluster is left"
    reason = unavailable()
    if reason:
        return [
            skipped_row(ITEM, "cluster_up", up_measure, "s", reason, up_goal),
            skipped_row(ITEM, "cluster_down", down_measure, "s", reason, down_goal),
        ]
    state = scratch / "state"
    ups, downs = [], []
    with minicluster.exclusive():
        try:
            for number in range(size["rounds"]):
                ups.append(checked("up", state, nodes))
                checked("status", state, nodes)
                downs.append(checked("down", state, nodes))
                log(f"round {number + 1}: up {ups[-1]:.2f} s, down {downs[-1]:.2f} s")
        finally:
            command("down", state, nodes)
    detail = f"{len(ups)} rounds, each up then down from a fresh process, imports included"
    return [
        row(ITEM, "cluster_up", up_measure, "s", ups, up_goal, detail),
        row(ITEM, "cluster_down", down_measure, "s", downs, down_goal, detail),
    ]
