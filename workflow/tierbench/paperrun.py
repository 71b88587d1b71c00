"""The paper in one command: each document where this machine can decide it.

Document 001 (``cfd_dcpmm``) sets a shared file system against node-local tiers.
A machine alone has no shared file system, so on its own tiers every one of
that document's lessons stays inconclusive. Where the cluster on one machine can
start (root, network namespaces, FUSE), ``./tierbench paper`` runs that study on
it under Slurm and stops the cluster after, also on an error or Ctrl-C; then the
other documents run on this machine's tiers, and the paper page takes document
001's section from the cluster's results folder. Where the cluster cannot start,
document 001 runs here with the rest and the paper page says in one line why its
lessons stay undecided. With ``--config hardware=...`` everything runs on that
hardware file's tiers, as ``snakemake paper`` does.

    python -m tierbench.paperrun [snakemake args]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

from . import minicluster

REPO = Path(__file__).resolve().parents[2]
#: the document study that needs a shared tier beside node-local ones
CLUSTER_STUDY = "cfd_dcpmm"
#: its hardware file and results folder on the cluster on one machine
CLUSTER_MACHINE = "minicluster"
#: compute nodes: document 001's ensembles put each member on a node of its own
CLUSTER_NODES = 2
CONFIG_FLAGS = ("--config", "-C")


def split_config(argv: list[str]) -> tuple[list[str], list[str]]:
    """The ``KEY=VALUE`` entries of every ``--config`` flag, and the other arguments.

    Snakemake keeps only the last ``--config`` flag; this lets the command add its own
    entries to the user's instead of replacing them.
    """
    config, rest = [], []
    taking = False
    for arg in argv:
        if arg in CONFIG_FLAGS:
            taking = True
        elif taking and "=" in arg and not arg.startswith("-"):
            config.append(arg)
        else:
            taking = False
            rest.append(arg)
    return config, rest


def cluster_blocker() -> str | None:
    """Why the cluster on one machine cannot start here, or None. As root, its missing
    packages are installed first (as ``./tierbench cluster up`` does)."""
    missing = minicluster.missing_packages()
    if missing and os.geteuid() == 0:
        try:
            minicluster.install(missing)
        except minicluster.MiniClusterError as error:
            return f"installing {', '.join(missing)} failed: {error}"
    try:
        minicluster.preflight()
    except minicluster.MiniClusterError as error:
        return str(error)
    return None


@contextmanager
def cluster_on_this_machine():
    """The cluster up for the block, and down after it whatever happened in it."""
    cluster = minicluster.MiniCluster(None, CLUSTER_NODES)
    with minicluster.cluster_lock(wait=False):
        say(f"starting the cluster on this machine ({CLUSTER_NODES} nodes) for {CLUSTER_STUDY}")
        say(cluster.up())
        try:
            yield cluster
        finally:
            done = cluster.down()
            say(f"cluster stopped ({len(done)} steps)")


class Failed(Exception):
    """A Snakemake run of the paper failed; its own messages are above."""

    def __init__(self, what: str, returncode: int):
        super().__init__(f"{what} failed (snakemake exit {returncode}): its messages are above")
        self.returncode = returncode


def snakemake(args: list[str], what: str, env: dict | None = None) -> None:
    """Snakemake in the repository; :class:`Failed`, naming ``what`` it ran, when it fails."""
    command = [sys.executable, "-m", "snakemake", *args]
    say("snakemake " + " ".join(args))
    done = subprocess.run(command, cwd=REPO, env=env)
    if done.returncode != 0:
        raise Failed(what, done.returncode)


def config_args(config: list[str]) -> list[str]:
    return ["--config", *config] if config else []


def yaml_value(value) -> str:
    """A value Snakemake's ``--config`` parses back as it is (JSON is YAML)."""
    return json.dumps(value)


def main(argv: list[str] | None = None) -> int:
    try:
        return run(list(sys.argv[1:] if argv is None else argv))
    except Failed as failed:  # the last line says what failed, after the cluster is down
        say(str(failed))
        return failed.returncode


def run(argv: list[str]) -> int:
    """The paper's runs: document 001 on the cluster where it can start, then the page."""
    config, rest = split_config(argv)
    if any(entry.startswith("hardware=") for entry in config):
        # a hardware file of the user's: every document on its tiers, as `snakemake paper`
        snakemake(["paper", *rest, *config_args(config)], "the paper")
        return 0
    blocker = cluster_blocker()
    if blocker is None:
        with cluster_on_this_machine() as cluster:
            study = REPO / "config/studies" / f"{CLUSTER_STUDY}.yaml"
            on_cluster = [*config, f"hardware={CLUSTER_MACHINE}"]
            snakemake(
                ["--profile", "slurm", "--configfile", str(study), *rest, *config_args(on_cluster)],
                f"{CLUSTER_STUDY} on the cluster",
                env={**os.environ, **cluster.env},
            )
        config.append("paper_elsewhere=" + yaml_value({CLUSTER_STUDY: CLUSTER_MACHINE}))
    else:
        say(f"document 001 runs on this machine's tiers: the cluster cannot start ({blocker})")
        reason = (
            "no tier of this machine is a shared file system, and the cluster on one machine "
            f"that has one could not start: {blocker}"
        )
        config.append("paper_undecided=" + yaml_value({CLUSTER_STUDY: reason}))
    snakemake(["paper", *rest, *config_args(config)], "the paper")
    return 0


def say(text: str) -> None:
    print(f"tierbench: {text}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
