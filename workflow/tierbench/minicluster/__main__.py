"""The cluster on one machine's command line.

python -m tierbench.minicluster up|status|down|env [--nodes N] [--state DIR] [--local-size 2G]
python -m tierbench.minicluster missing    the Debian packages it lacks here, one line
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from contextlib import nullcontext

from .base import (
    DEFAULT_LOCAL_SIZE,
    DEFAULT_NODES,
    DEFAULT_STATE,
    LOCK_HELD_ENV,
    STATE_ENV,
    MiniClusterError,
    cluster_lock,
)
from .cluster import MiniCluster
from .host import missing_packages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tierbench.minicluster", description=__doc__.splitlines()[0]
    )
    parser.add_argument("action", choices=["up", "status", "down", "env", "missing"])
    parser.add_argument("--nodes", type=int, default=DEFAULT_NODES, help="compute nodes (up)")
    parser.add_argument("--state", help=f"state folder (${STATE_ENV}, else {DEFAULT_STATE})")
    parser.add_argument("--local-size", default=DEFAULT_LOCAL_SIZE, help="each node's tmpfs")
    args = parser.parse_args(argv)
    if args.action == "missing":  # ./tierbench cluster up installs these first
        print(" ".join(missing_packages()))
        return 0
    # a SIGTERM during up unwinds like Ctrl-C: up removes what it made
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    try:
        cluster = MiniCluster(args.state, args.nodes, args.local_size)
        if args.action == "status":
            lines, ok = cluster.status()
            print("\n".join(lines))
            return 0 if ok else 1
        if args.action == "env":
            print(cluster.env_file.read_text() if cluster.env_file.exists() else "", end="")
            return 0
        held = os.environ.get(LOCK_HELD_ENV)
        with nullcontext() if held else cluster_lock(wait=False):
            if args.action == "up":
                print(f"minicluster: {cluster.up()}")
            else:
                done = cluster.down()
                print(f"minicluster: down, {len(done)} steps" if done else "minicluster: none up")
    except MiniClusterError as error:
        print(f"minicluster: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
