"""What the cluster on one machine needs of its host, checked before ``up`` changes
anything: packages, root, FUSE, namespaces, a free /24.
"""

from __future__ import annotations

import ipaddress
import json
import os
from pathlib import Path

from ..packages import package_of
from .base import (
    COMMANDS,
    FUSE_DEVICE,
    NAMESPACE_PROBE,
    PREFIX,
    SUBNETS,
    MiniClusterError,
    run,
    which,
)

# ---------------------------------------------------------------- what must be there first


def missing_packages() -> list[str]:
    return sorted({package_of(command) for command in COMMANDS if which(command) is None})


def install_command(packages: list[str]) -> str:
    sudo = "" if os.geteuid() == 0 else "sudo "
    return f"{sudo}apt-get update && {sudo}apt-get install -y --no-install-recommends " + " ".join(
        packages
    )


def install(packages: list[str]) -> None:
    """apt-get install (as root); MiniClusterError with apt's last line on failure."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    run(["apt-get", "update", "-qq"], timeout=900, env=env)
    run(
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages],
        timeout=900,
        env=env,
    )


def preflight(prefix: str = PREFIX) -> None:
    """Everything ``up`` needs, checked before it changes anything; one line names what lacks."""
    missing = missing_packages()
    if missing:
        raise MiniClusterError(
            f"missing Debian packages {', '.join(missing)}; install with: "
            f"{install_command(missing)}"
        )
    need_root()
    if not FUSE_DEVICE.exists():
        raise MiniClusterError(f"no {FUSE_DEVICE}: the shared tier is a FUSE mount (modprobe fuse)")
    probe = run(NAMESPACE_PROBE, check=False, timeout=10)
    if probe.returncode != 0:
        said = (probe.stderr.strip() or f"exit {probe.returncode}").splitlines()[-1]
        raise MiniClusterError(f"cannot create namespaces (unshare --net --mount --uts): {said}")
    bridge = f"{prefix}0"
    if Path(f"/sys/class/net/{bridge}").exists():
        owner = Path(f"/sys/class/net/{bridge}/ifalias").read_text().strip() or "unknown"
        raise MiniClusterError(
            f"the bridge {bridge} exists: a minicluster (state {owner}) is up; run down there first"
        )


def need_root() -> None:
    if os.geteuid() != 0:
        raise MiniClusterError(
            "needs root: it creates network namespaces, mounts file systems and runs slurmd"
        )


def used_networks() -> list[ipaddress.IPv4Network]:
    """Networks the host routes or has addresses in (all tables), the default route left out."""
    routes = json.loads(run(["ip", "-4", "-j", "route", "show", "table", "all"]).stdout or "[]")
    found = []
    for route in routes:
        dst = route.get("dst", "default")
        if dst != "default":
            found.append(ipaddress.ip_network(dst, strict=False))
    for link in json.loads(run(["ip", "-4", "-j", "addr"]).stdout or "[]"):
        for address in link.get("addr_info", []):
            found.append(ipaddress.ip_network(f"{address['local']}/32"))
    return found


def free_subnet() -> ipaddress.IPv4Network:
    used = used_networks()
    for subnet in SUBNETS:
        if not any(subnet.overlaps(network) for network in used):
            return subnet
    raise MiniClusterError(f"every candidate /24 ({SUBNETS[0]} to {SUBNETS[-1]}) is routed here")
