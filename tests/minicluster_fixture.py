"""A running minicluster for tests, at most one on this machine at a time.

The cluster has fixed names (the bridge tbmc0, namespaces tbmc-*), so two
pytest workers must never start one each: :func:`running_minicluster` holds an
exclusive fcntl lock on a file beside the default state folder
(``minicluster.exclusive``) from before ``up`` until after ``down``, and a
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
from collections.abc import Iterator
from pathlib import Path

import pytest
from slurm_cluster import install
from tierbench.minicluster import (
    MiniCluster,
    MiniClusterError,
    exclusive,
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
    with exclusive():
        cluster = MiniCluster(state, nodes=nodes)
        try:
            try:
                cluster.up()
            except MiniClusterError as error:
                pytest.fail(f"the minicluster did not start: {error}")
            yield cluster
        finally:
            MiniCluster(state).down()
