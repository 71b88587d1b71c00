"""The one-machine cluster: Slurm nodes in namespaces, a shared GlusterFS volume, a tmpfs each.

One cluster for the module (tests/minicluster_fixture.py); the tests check
what a pipeline run relies on: every node answers in Slurm, a file written on
one node is read on another and on the host, a node's local tier is its own,
an MPI job spans the nodes over TCP. The last tests bring it down and check
that nothing is left: no process, mount, namespace, link or file, also after
a start that fails half-way or is killed. Preflight failures need no root.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO
from minicluster_fixture import (
    leftovers,
    network_left,
    require_minicluster,
    running_minicluster,
    snapshot,
)
from tierbench import minicluster
from tierbench.minicluster import MiniCluster, MiniClusterError, alive, host, state_path

pytestmark = pytest.mark.slurm

MPI_PROGRAM = """
import socket
from mpi4py import MPI
world = MPI.COMM_WORLD
data = bytearray(1 << 20) if world.rank == 0 else None
data = world.bcast(data, root=0)  # 1 MiB across the nodes' TCP link
print(world.rank, world.size, socket.gethostname(), len(data))
"""


@pytest.fixture(scope="module")
def cluster():
    require_minicluster()
    yield from running_minicluster()


def srun(cluster: MiniCluster, *argv: str, timeout: float = 60) -> str:
    return cluster.run("srun", *argv, timeout=timeout)


def device_of(pid: int, path: Path) -> str:
    """major:minor of the top mount on ``path`` in the mount namespace of ``pid``."""
    found = ""
    for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines():
        fields = line.split()
        if fields[4] == str(path):
            found = fields[2]
    return found


# ---------------------------------------------------------------- bench item 9


def bench_item_9(out: Path) -> dict[str, dict]:
    """bench/run.py --tiny --only 9: its rows by key."""
    argv = [sys.executable, str(REPO / "bench" / "run.py"), "--tiny", "--only", "9"]
    done = subprocess.run(
        [*argv, "--json", str(out)], cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    rows = {row["key"]: row for row in json.loads(out.read_text())["rows"]}
    assert set(rows) == {"cluster_up", "cluster_down", "two_node_smoke"}
    return rows


def test_bench_item_9_times_up_and_down_and_leaves_nothing(tmp_path):
    """Item 9 at --tiny, here and not in tests/test_bench.py: it takes the cluster lock, so
    it runs before this file's cluster (the fixture is made at the first test using it).
    Without root each of its rows is skipped with the reason."""
    if os.geteuid() != 0:
        rows = bench_item_9(tmp_path / "bench.json")
        assert all("needs root" in row["skipped"] for row in rows.values()), rows
        return
    require_minicluster()
    rows = bench_item_9(tmp_path / "bench.json")
    for key in ("cluster_up", "cluster_down"):
        assert rows[key]["n"] == len(rows[key]["values"]) == 2, rows[key]
        assert all(0 < value < 300 for value in rows[key]["values"]), rows[key]
        assert isinstance(rows[key]["met"], bool)
    assert rows["two_node_smoke"]["skipped"] == "skipped (--tiny)"
    assert network_left() == []


# ---------------------------------------------------------------- a running cluster


def test_status_says_everything_is_up(cluster):
    lines, ok = cluster.status()
    assert ok, "\n".join(lines)
    assert [line.split()[0] for line in lines] == ["node1", "node2", "storage", "host"]
    done = subprocess.run(
        [sys.executable, "-m", "tierbench.minicluster", "status"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO / "workflow")},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "node2    idle" in done.stdout


def test_srun_runs_on_every_node(cluster):
    assert sorted(srun(cluster, "-N2", "hostname").split()) == ["node1", "node2"]
    assert cluster.partition in cluster.run("sinfo", "--noheader", "--format=%P")
    env = cluster.env_file.read_text()
    assert f"export SLURM_CONF={cluster.conf}" in env and "OMPI_MCA_btl_tcp_if_include" in env


def test_shared_file_is_seen_on_other_node_and_host(cluster):
    path = cluster.shared / "from-node1.txt"
    srun(cluster, "-w", "node1", "sh", "-c", f"hostname > {path}")
    assert srun(cluster, "-w", "node2", "cat", str(path)).strip() == "node1"
    assert path.read_text().strip() == "node1"


def test_local_file_stays_on_its_node(cluster):
    path = cluster.local / "only-node1.txt"
    srun(cluster, "-w", "node1", "sh", "-c", f"hostname > {path}")
    assert srun(cluster, "-w", "node1", "cat", str(path)).strip() == "node1"
    seen = srun(cluster, "-w", "node2", "sh", "-c", f"test -e {path} && echo yes || echo no")
    assert seen.strip() == "no"
    assert not path.exists()  # the host's local is an empty folder


def test_each_node_has_its_own_clients(cluster):
    """The node's mounts are its own (not the host's, not propagated over): see mountinfo."""
    host = device_of(os.getpid(), cluster.shared)
    shared, local = set(), set()
    for node in cluster.nodes:
        pid = cluster.process(f"slurmd-{node}")["pid"]
        assert minicluster.mount_at(cluster.shared, pid)["fs_type"] == "fuse.glusterfs"
        assert minicluster.mount_at(cluster.local, pid)["fs_type"] == "tmpfs"
        shared.add(device_of(pid, cluster.shared))
        local.add(device_of(pid, cluster.local))
    assert host and host not in shared and len(shared) == len(local) == len(cluster.nodes)


def test_mpi_job_spans_both_nodes(cluster):
    program = cluster.shared / "ranks.py"
    program.write_text(MPI_PROGRAM)
    out = srun(cluster, "-N2", "-n2", "--mpi=pmix", sys.executable, str(program), timeout=120)
    ranks = sorted(line.split() for line in out.splitlines())
    assert [r[:2] for r in ranks] == [["0", "2"], ["1", "2"]], out
    assert {r[2] for r in ranks} == {"node1", "node2"}
    assert {r[3] for r in ranks} == {str(1 << 20)}


# ---------------------------------------------------------------- down, and failed starts


def test_down_leaves_nothing_and_twice_is_harmless(cluster):
    cluster.run("sbatch", "--wrap", "sleep 300", "-w", "node1")  # a job still running
    records, run_netns = snapshot(cluster)
    assert cluster.down()
    assert leftovers(cluster.state, records, run_netns) == []
    assert MiniCluster(cluster.state).down() == []
    lines, ok = MiniCluster(cluster.state).status()
    assert not ok and "no state.json" in lines[0]


@pytest.mark.parametrize("step", ["_make_volume", "_mount_host"])
def test_start_failing_half_way_leaves_nothing(cluster, monkeypatch, step):
    assert not (cluster.state / "state.json").exists()
    seen = {}

    def fail(self, *args):
        seen.update(zip(("records", "run_netns"), snapshot(self), strict=True))
        raise MiniClusterError(f"{step} made to fail")

    monkeypatch.setattr(MiniCluster, step, fail)
    with pytest.raises(MiniClusterError, match=f"{step} made to fail"):
        MiniCluster(cluster.state).up()
    assert seen["records"], "the failure came before any daemon started"
    assert leftovers(cluster.state, seen["records"], seen["run_netns"]) == []


def test_killed_start_is_brought_down_by_another_process(cluster):
    # this process holds the machine's minicluster lock (the fixture) for its commands
    env = {**os.environ, "PYTHONPATH": str(REPO / "workflow"), minicluster.LOCK_HELD_ENV: "1"}
    command = [sys.executable, "-m", "tierbench.minicluster"]
    state = cluster.state
    starting = subprocess.Popen([*command, "up"], env=env, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    ledger = state / "state.json"
    while "slurmd-node2" not in (ledger.read_text() if ledger.exists() else ""):
        assert time.monotonic() < deadline and starting.poll() is None, "up ended early"
        time.sleep(0.05)
    starting.send_signal(signal.SIGKILL)
    starting.wait()
    recorded = json.loads(ledger.read_text())
    records = list(recorded["processes"].values())
    assert any(alive(r) for r in records)
    done = subprocess.run([*command, "down"], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert leftovers(state, records, recorded["run_netns"]) == []


# ---------------------------------------------------------------- where it cannot start


@pytest.mark.parametrize(
    "breakage, message",
    [
        ("root", "needs root"),
        ("package", "missing Debian packages glusterfs-server; install with: "),
        ("fuse", "no-fuse: the shared tier is a FUSE mount"),
        ("namespaces", "cannot create namespaces"),
    ],
)
def test_cannot_start_says_why_in_one_line(tmp_path, monkeypatch, breakage, message):
    state = tmp_path / "mc"
    # as on a machine that has everything (root, the packages) but the one thing broken
    monkeypatch.setattr(os, "geteuid", lambda: 1000 if breakage == "root" else 0)
    if breakage == "package":
        monkeypatch.setattr(host, "which", lambda c: None if c == "glusterd" else c)
    else:
        monkeypatch.setattr(host, "missing_packages", lambda: [])
    if breakage == "fuse":
        monkeypatch.setattr(host, "FUSE_DEVICE", tmp_path / "no-fuse")
    if breakage == "namespaces":
        monkeypatch.setattr(host, "NAMESPACE_PROBE", ["sh", "-c", "echo nope >&2; exit 1"])
    with pytest.raises(MiniClusterError) as error:
        MiniCluster(state).up()
    assert message in str(error.value) and "\n" not in str(error.value)
    assert not state.exists()


def test_up_and_down_refuse_while_another_process_holds_the_lock(cluster):
    """A cluster under a test's lock is not pulled away by a down from elsewhere."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "workflow")}
    env.pop(minicluster.LOCK_HELD_ENV, None)
    ledger = cluster.state / "state.json"
    before = ledger.read_text() if ledger.exists() else None
    for action in ("down", "up"):
        done = subprocess.run(
            [sys.executable, "-m", "tierbench.minicluster", action],
            capture_output=True,
            text=True,
            env=env,
        )
        assert done.returncode == 1 and "holds" in done.stderr.splitlines()[-1], done.stderr
    assert (ledger.read_text() if ledger.exists() else None) == before


def test_state_folder_comes_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("TIERBENCH_MINICLUSTER", str(tmp_path / "elsewhere"))
    assert state_path() == tmp_path / "elsewhere"
    assert state_path(tmp_path / "given") == tmp_path / "given"
    with pytest.raises(MiniClusterError, match="no minicluster is up"):
        MiniCluster().env  # noqa: B018
