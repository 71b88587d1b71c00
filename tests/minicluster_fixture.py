"""A running minicluster for tests, at most one on this machine at a time.

The cluster has fixed names (the bridge tbmc0, namespaces tbmc-*), so two
pytest workers must never start one each: :func:`running_minicluster` holds an
exclusive fcntl lock on a file beside the default state folder
(``minicluster.cluster_lock``) from before ``up`` until after ``down``, and a
second test file waits for the first to finish. A test
module makes its fixture from it::

    @pytest.fixture(scope="module")
    def cluster():
        require_minicluster()
        yield from running_minicluster()

Without root the tests are skipped with the reason, except under CI=true,
where they fail (CI must never skip them); as root the Debian packages are
installed with apt-get where missing.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from tierbench import minicluster
from tierbench.minicluster import (
    MiniCluster,
    MiniClusterError,
    alive,
    base,
    cluster_lock,
    install,
    install_command,
    missing_packages,
    state_path,
)

IN_CI = os.environ.get("CI", "").lower() == "true"


def unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"CI=true: the minicluster tests must run, but {reason}")
    pytest.skip(reason)


def require_minicluster() -> None:
    """Skip (fail under CI) where no cluster can start; install missing packages as root."""
    missing = missing_packages()
    if os.geteuid() != 0:
        if missing:
            unavailable(f"{', '.join(missing)} missing; install with: {install_command(missing)}")
        unavailable("the minicluster needs root (namespaces, mounts, slurmd); run as root")
    if missing:
        install(missing)


def running_minicluster(nodes: int = 2, state: Path | None = None) -> Iterator[MiniCluster]:
    """Bring the cluster up under the lock, yield it, and always bring it down after.

    At the default state path unless ``state`` is given; a cluster already up
    there is used, and brought down with the rest.
    """
    state = state_path(state)
    with cluster_lock():
        cluster = MiniCluster(state, nodes=nodes)
        try:
            try:
                cluster.up()
            except MiniClusterError as error:
                pytest.fail(f"the minicluster did not start: {error}")
            yield cluster
        finally:
            MiniCluster(state).down()


#: process names the cluster runs; any of them naming the state folder is ours
DAEMONS = {"slurmd", "slurmctld", "slurmstepd", "munged", "glusterd", "glusterfsd", "glusterfs"}


def our_processes(state: Path) -> list[str]:
    """Live cluster daemons naming the state folder in their command line."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            comm = Path(f"/proc/{entry}/comm").read_text().strip()
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if comm in DAEMONS and str(state) in argv and minicluster.start_time(int(entry)):
            found.append(f"{comm} (pid {entry})")
    return found


def network_left() -> list[str]:
    """The cluster's namespaces, links and addresses still on the machine: its fixed names,
    whatever state folder it was started with."""
    found = [f"netns {n}" for n in base._netns_names() if n.startswith("tbmc")]
    found += [f"link {n}" for n in base._link_names() if n.startswith("tbmc")]
    addresses = subprocess.run(["ip", "-4", "addr"], capture_output=True, text=True).stdout
    return found + (["address 10.213.x.x"] if "inet 10.213." in addresses else [])


def leftovers(state: Path, records: list[dict], run_netns: dict) -> list[str]:
    """Everything of a cluster still on the machine after down."""
    found = [f"process {r['name']} (pid {r['pid']})" for r in records if alive(r)]
    found += [f"process {p}" for p in our_processes(state)]
    found += network_left()
    found += [f"mount {m}" for m in base._mounts_under(state)]
    others = base._netns_names()
    if not run_netns.get("mounted", True) and base._is_mount(Path("/run/netns")):
        found += [] if others else ["mount /run/netns"]
    if state.exists():
        found.append(f"folder {state}")
    return found


def snapshot(cluster: MiniCluster) -> tuple[list[dict], dict]:
    """What down must remove, read before down deletes state.json."""
    ledger = minicluster.Ledger(cluster.state / "state.json")
    return list(ledger.get("processes", {}).values()), ledger.get("run_netns", {})
