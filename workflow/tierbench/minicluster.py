"""A small HPC cluster on one machine: Slurm nodes in namespaces and a shared GlusterFS volume.

    python -m tierbench.minicluster up|status|down|env [--nodes N] [--state DIR] [--local-size 2G]

So the pipeline's Slurm path, its MPI launches and its shared-versus-local
tiers can be tried where no cluster is at hand. ``up`` (as root) makes, under
one state folder (``--state``, else ``$TIERBENCH_MINICLUSTER``, else
/var/tmp/tierbench-minicluster):

- ``node1``..``nodeN``: each a network namespace with its own address on a
  private /24 behind the bridge ``tbmc0``, its own host name and its own mount
  namespace, running one ``slurmd``; the partition ``compute`` holds them all.
  ``slurmctld`` and ``munged`` run on the host, which is the submit host.
- ``<state>/shared``: a GlusterFS volume served from a namespace of its own
  (the storage node), mounted with FUSE by every node and by the host. The
  client caches are off, so every metadata call is a round trip, as on a
  coherent cluster file system.
- ``<state>/local``: each node's own tmpfs, which no other node sees; on the
  host an empty folder.
- ``<state>/bin``: Slurm clients that find this cluster (SLURM_CONF), and
  ``<state>/env``: the variables a shell or a pipeline run needs, the same as
  :attr:`MiniCluster.env`.

Every thing ``up`` creates is written to ``<state>/state.json`` before it is
created (process ids right after), so ``down`` removes it all from any
process, after a failed or killed start too, and a second ``down`` finds
nothing to do.
"""

from __future__ import annotations

import argparse
import fcntl
import ipaddress
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

from .probe import parse_mountinfo

DEFAULT_STATE = Path("/var/tmp/tierbench-minicluster")
STATE_ENV = "TIERBENCH_MINICLUSTER"
#: one cluster per machine (its bridge and namespace names are fixed): see exclusive()
LOCK_FILE = DEFAULT_STATE.with_name(DEFAULT_STATE.name + ".lock")
#: set (to anything) by a lock holder for the up and down commands it runs itself
LOCK_HELD_ENV = "TIERBENCH_MINICLUSTER_LOCK_HELD"
#: every namespace and link name starts with it; the bridge is <prefix>0
PREFIX = "tbmc"
PARTITION = "compute"
VOLUME = "tbmc"
DEFAULT_NODES = 2
DEFAULT_LOCAL_SIZE = "2G"
#: the /24s tried in turn; the first that no route or address of the host touches is taken
SUBNETS = [ipaddress.ip_network(f"10.213.{n}.0/24") for n in range(64)]
#: last octet of the host (bridge), the storage node and node1 (node i: NODE_BASE + i - 1)
HOST_OCTET, STORAGE_OCTET, NODE_BASE = 1, 2, 11
SLURMD_PORT = 6818
#: command -> Debian package that provides it
COMMANDS = {
    "slurmctld": "slurm-wlm",
    "slurmd": "slurm-wlm",
    "srun": "slurm-wlm",
    "munged": "munge",
    "glusterd": "glusterfs-server",
    "gluster": "glusterfs-server",
    "mount.glusterfs": "glusterfs-client",
    "mpirun": "openmpi-bin",
    "mpicc": "libopenmpi-dev",
    "unshare": "util-linux",
    "nsenter": "util-linux",
    "ip": "iproute2",
}
#: Slurm clients that get a wrapper setting SLURM_CONF in <state>/bin
CLIENTS = ["sbatch", "srun", "squeue", "sinfo", "scontrol", "scancel", "salloc", "sacct"]
#: GlusterFS client caches, all off: a coherent file system, each metadata call a round trip
VOLUME_OPTIONS = [
    "performance.open-behind",
    "performance.write-behind",
    "performance.stat-prefetch",
    "performance.quick-read",
    "performance.io-cache",
    "performance.read-ahead",
    "performance.readdir-ahead",
]
MOUNT_OPTIONS = "direct-io-mode=enable,attribute-timeout=0,entry-timeout=0,negative-timeout=0"
#: glusterd's folders, each bind-mounted from <state>/gluster/<name> in its own namespace
GLUSTER_DIRS = {"lib": "/var/lib/glusterd", "log": "/var/log/glusterfs", "run": "/run/gluster"}
NETNS_DIR = Path("/run/netns")
FUSE_DEVICE = Path("/dev/fuse")
#: what must succeed for nodes to be made of namespaces
NAMESPACE_PROBE = ["unshare", "--net", "--mount", "--uts", "true"]
#: how long a daemon gets to stop after SIGTERM before SIGKILL
STOP_WAIT_S = 10

#: daemons started by this process, kept so they are reaped here (no zombies, no warnings)
_CHILDREN: dict[int, subprocess.Popen] = {}


class MiniClusterError(RuntimeError):
    """The cluster cannot be started, inspected or stopped; the message's last line says why."""


# ---------------------------------------------------------------- small helpers


def state_path(state: str | os.PathLike | None = None) -> Path:
    """The state folder: given, else $TIERBENCH_MINICLUSTER, else the default."""
    return Path(state or os.environ.get(STATE_ENV) or DEFAULT_STATE).absolute()


@contextmanager
def exclusive(lock_file: Path = LOCK_FILE, wait: bool = True) -> Iterator[None]:
    """Hold the machine's minicluster lock, waiting while another process holds it.

    For whoever brings a cluster up and down again (tests, the bench), so two of
    them never run at once, and so the up and down commands do not pull a
    cluster from under them (``wait=False``: they refuse instead). An fcntl
    lock: the kernel drops it when the holder dies. The holder removes the file
    when it is done, so the machine is left as it was; a waiter that got the
    lock on the removed file takes it again on the new one (_lock_current).
    """
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    handle = _lock_current(lock_file, wait)
    try:
        yield
    finally:
        lock_file.unlink(missing_ok=True)
        handle.close()


def _lock_current(lock_file: Path, wait: bool):
    """The open, locked lock file that is still the one at its path.

    Locking and the path can part: a holder removes the file on release, and a
    process that waited on that file then holds the lock of a file no one else
    can open. It opens the path again until the file it locked is the one there.
    """
    while True:
        handle = open(lock_file, "a")
        try:
            fcntl.lockf(handle, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            handle.close()
            raise MiniClusterError(
                f"another process (a test or the bench) holds {lock_file} and runs its own "
                "cluster; try again when it is done"
            ) from error
        try:
            there = os.stat(lock_file)
        except FileNotFoundError:
            there = None
        held = os.fstat(handle.fileno())
        if there is not None and (there.st_dev, there.st_ino) == (held.st_dev, held.st_ino):
            return handle
        handle.close()


def which(command: str) -> str | None:
    """A command on PATH or in sbin (daemons are not on a normal user's PATH)."""
    return shutil.which(command) or shutil.which(command, path="/usr/sbin:/sbin")


def run(argv: list[str], *, timeout: float = 60, check: bool = True, env=None):
    """Run a command and capture its output; MiniClusterError names the command and its error."""
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, env=env, check=False
        )
    except subprocess.TimeoutExpired as error:
        raise MiniClusterError(f"{shlex.join(argv)} did not finish in {timeout:.0f} s") from error
    if check and done.returncode != 0:
        said = done.stderr.strip() or done.stdout.strip() or f"exit {done.returncode}"
        raise MiniClusterError(f"{shlex.join(argv)} failed: {said.splitlines()[-1]}")
    return done


def wait_for(ready: Callable[[], bool], timeout: float, what: str, check=lambda: None) -> None:
    """Poll ``ready`` until true; ``check`` raises when waiting longer is pointless."""
    deadline = time.monotonic() + timeout
    while not ready():
        check()
        if time.monotonic() > deadline:
            raise MiniClusterError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.1)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]


def available_memory_mb() -> int:
    text = Path("/proc/meminfo").read_text()
    return int(re.search(r"^MemAvailable:\s+(\d+) kB", text, re.MULTILINE).group(1)) // 1024


def tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


# ---------------------------------------------------------------- processes


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (tells a reused pid apart), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] == "Z" else int(fields[19])


def alive(record: dict | None) -> bool:
    """The recorded process still runs (same pid, same start time, not a zombie)."""
    return bool(record) and start_time(record["pid"]) == record["start"]


def reap(pid: int) -> None:
    child = _CHILDREN.get(pid)
    if child is not None and child.poll() is not None:
        del _CHILDREN[pid]


def stop_processes(records: Iterable[dict], wait: float = STOP_WAIT_S) -> None:
    """SIGTERM the live ones, SIGKILL what is left after ``wait`` seconds, until all are gone."""
    live = [r for r in records if alive(r)]
    for sig, patience in ((signal.SIGTERM, wait), (signal.SIGKILL, 10)):
        for record in live:
            try:
                os.kill(record["pid"], sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + patience
        while live and time.monotonic() < deadline:
            for record in live:
                reap(record["pid"])
            live = [r for r in live if alive(r)]
            time.sleep(0.05)
        if not live:
            return
    names = ", ".join(f"{r.get('name', '?')} (pid {r['pid']})" for r in live)
    raise MiniClusterError(f"still running after SIGKILL: {names}")


def record_of(pid: int, name: str) -> dict | None:
    start = start_time(pid)
    return None if start is None else {"pid": pid, "start": start, "name": name}


def netns_inode(name: str) -> int | None:
    try:
        return os.stat(NETNS_DIR / name).st_ino
    except OSError:
        return None


def pids_in_netns(name: str) -> list[int]:
    """Every process in the named network namespace: in a node's, they are all the node's."""
    inode = netns_inode(name)
    if inode is None:
        return []
    target = f"net:[{inode}]"
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.readlink(f"/proc/{entry}/ns/net") == target:
                    pids.append(int(entry))
            except OSError:
                pass
    return pids


def mounts_of(pid: int | str = "self") -> list[dict]:
    try:
        return parse_mountinfo(Path(f"/proc/{pid}/mountinfo").read_text())
    except OSError:
        return []


def mount_at(path: Path, pid: int | str = "self") -> dict | None:
    """The top mount on ``path`` in the mount namespace of ``pid``, or None."""
    found = [m for m in mounts_of(pid) if m["mount_point"] == str(path)]
    return found[-1] if found else None


# ---------------------------------------------------------------- what must be there first


def missing_packages() -> list[str]:
    return sorted({package for command, package in COMMANDS.items() if which(command) is None})


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


# ---------------------------------------------------------------- state.json


class Ledger:
    """state.json: what ``up`` created, each name written before the thing is made."""

    def __init__(self, path: Path):
        self.path = path
        try:
            self.data = json.loads(path.read_text())
        except (OSError, ValueError):
            self.data = {}

    def get(self, key: str, default=None):
        return self.data.get(key, default)

    def set(self, key: str, value) -> None:
        self.data[key] = value
        self.save()

    def add(self, key: str, item) -> None:
        items = self.data.setdefault(key, [])
        if item not in items:
            items.append(item)
        self.save()

    def process(self, name: str, record: dict | None) -> None:
        if record is not None:
            self.data.setdefault("processes", {})[name] = record
            self.save()

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps(self.data, indent=1) + "\n")
        os.replace(temporary, self.path)


# ---------------------------------------------------------------- the cluster


class MiniCluster:
    """The cluster kept in one state folder: ``up()``, ``status()``, ``down()``, ``env``."""

    def __init__(
        self,
        state: str | os.PathLike | None = None,
        nodes: int = DEFAULT_NODES,
        local_size: str = DEFAULT_LOCAL_SIZE,
        prefix: str = PREFIX,
    ):
        self.state = state_path(state)
        self.ledger = Ledger(self.state / "state.json")
        self.node_count = int(self.ledger.get("nodes", nodes))
        self.local_size = self.ledger.get("local_size", local_size)
        self.prefix = self.ledger.get("prefix", prefix)
        if not 1 <= self.node_count <= 200:
            raise MiniClusterError(f"--nodes must be 1 to 200, not {self.node_count}")
        if not re.fullmatch(r"\d+[kKmMgG%]?", str(self.local_size)):
            raise MiniClusterError(f"--local-size must be a tmpfs size like 2G, not {local_size!r}")

    # -- names and paths

    conf = property(lambda self: self.state / "slurm.conf")
    bin = property(lambda self: self.state / "bin")
    shared = property(lambda self: self.state / "shared")
    local = property(lambda self: self.state / "local")
    env_file = property(lambda self: self.state / "env")
    logs = property(lambda self: self.state / "log")
    gluster = property(lambda self: self.state / "gluster")
    bridge = property(lambda self: f"{self.prefix}0")
    storage_netns = property(lambda self: f"{self.prefix}-storage")
    partition = PARTITION
    volume = VOLUME

    @property
    def nodes(self) -> list[str]:
        return [f"node{i}" for i in range(1, self.node_count + 1)]

    def netns(self, node: str) -> str:
        return f"{self.prefix}-{node}"

    @property
    def subnet(self) -> str:
        subnet = self.ledger.get("subnet")
        if subnet is None:
            raise MiniClusterError(f"no minicluster is up in {self.state} (no state.json)")
        return subnet

    def address(self, who: str) -> str:
        """The address of ``host``, ``storage`` or a node on the cluster's /24."""
        network = ipaddress.ip_network(self.subnet)
        if who == "host":
            return str(network[HOST_OCTET])
        if who == "storage":
            return str(network[STORAGE_OCTET])
        return str(network[NODE_BASE + int(who.removeprefix("node")) - 1])

    @property
    def env(self) -> dict[str, str]:
        """What a process needs to use the cluster: Slurm clients, MPI over the private /24."""
        return {
            STATE_ENV: str(self.state),
            "SLURM_CONF": str(self.conf),
            "PATH": f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}",
            "OMPI_MCA_btl": "self,tcp",
            "OMPI_MCA_btl_tcp_if_include": self.subnet,
            "OMPI_MCA_oob_tcp_if_include": self.subnet,
            # the nodes share this machine's cores: a rank waiting in a barrier gives its
            # core back, or the ranks of 4 nodes spin on 2 cores and starve all else
            "OMPI_MCA_mpi_yield_when_idle": "1",
            "OMPI_ALLOW_RUN_AS_ROOT": "1",
            "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
        }

    def process(self, name: str) -> dict | None:
        return self.ledger.get("processes", {}).get(name)

    def _processes_named(self, prefix: str) -> list[dict]:
        processes = self.ledger.get("processes", {})
        return [record for name, record in processes.items() if name.startswith(prefix)]

    # -- using it

    def run(self, *argv: str, check: bool = True, timeout: float = 60) -> str:
        """A command (a Slurm client, say) with the cluster's environment; its stdout."""
        return run(list(argv), check=check, timeout=timeout, env={**os.environ, **self.env}).stdout

    def on_node(self, node: str, *argv: str, check: bool = True, timeout: float = 60) -> str:
        """A command inside a node (its network, host name and mounts); its stdout."""
        slurmd = self.process(f"slurmd-{node}")
        if not alive(slurmd):
            raise MiniClusterError(f"{node} is down (its slurmd does not run)")
        enter = ["nsenter", "-t", str(slurmd["pid"]), "-m", "-u", "-n", "--"]
        return run([*enter, *argv], check=check, timeout=timeout).stdout

    # -- up
    # Order: the network; glusterd, munged and slurmctld; the volume; each node's
    # tmpfs, GlusterFS client and slurmd; last the host's client (see _in_netns).

    def up(self, timeout: float = 60) -> str:
        """Start the whole cluster; on any failure remove what was made and raise."""
        started = time.monotonic()
        if self.ledger.get("complete") and self.healthy():
            return f"already up in {self.state}"
        if self.ledger.data:
            self.down()  # what a failed or killed start left
        preflight(self.prefix)
        try:
            self._up(timeout)
        except BaseException as error:
            try:
                self.down()
            except MiniClusterError as leftover:
                raise MiniClusterError(f"{error}\nand down failed: {leftover}") from error
            raise
        return (
            f"up in {time.monotonic() - started:.1f} s: {', '.join(self.nodes)} in partition "
            f"{self.partition}, shared {self.shared} (GlusterFS), local {self.local} "
            f"(tmpfs {self.local_size} per node); environment: . {self.env_file}"
        )

    def _up(self, timeout: float) -> None:
        self._folders()
        self.ledger.data.update(
            prefix=self.prefix, nodes=self.node_count, local_size=self.local_size, complete=False
        )
        self.ledger.set("subnet", str(free_subnet()))
        self._network()
        self._write_files()
        self._start_glusterd()
        self._start_munged()
        self._start_slurmctld()
        self._make_volume(timeout)
        wait_for(self._controller_up, timeout, "slurmctld to answer", self._check_daemons)
        for node in self.nodes:
            self._start_node(node)
        self._mount_host()
        wait_for(self._nodes_idle, timeout, "every node to be idle", self._check_daemons)
        self._write_env()
        self.ledger.set("complete", True)

    def _folders(self) -> None:
        for folder in (self.state, self.bin, self.logs, self.shared, self.local):
            folder.mkdir(parents=True, exist_ok=True)
        for sub in ("brick", *GLUSTER_DIRS):
            (self.gluster / sub).mkdir(parents=True, exist_ok=True)
        (self.state / "slurm" / "ctld").mkdir(parents=True, exist_ok=True)
        for node in self.nodes:
            for sub in ("spool", "tmp"):
                (self.state / "slurm" / node / sub).mkdir(parents=True, exist_ok=True)
        munge = self.state / "munge"
        munge.mkdir(exist_ok=True)
        munge.chmod(0o755)  # munged refuses a socket folder others may write to

    # -- network

    def _network(self) -> None:
        """The bridge with the host's address, then one namespace and veth pair per member."""
        before = {"existed": NETNS_DIR.exists(), "mounted": _is_mount(NETNS_DIR)}
        self.ledger.set("run_netns", before)
        self.ledger.add("links", self.bridge)
        run(["ip", "link", "add", self.bridge, "type", "bridge"])
        run(["ip", "link", "set", "dev", self.bridge, "alias", str(self.state)])
        run(["ip", "addr", "add", f"{self.address('host')}/24", "dev", self.bridge])
        run(["ip", "link", "set", self.bridge, "up"])
        self._member(self.storage_netns, f"{self.prefix}-st", self.address("storage"))
        for i, node in enumerate(self.nodes, 1):
            self._member(self.netns(node), f"{self.prefix}-n{i}", self.address(node))

    def _member(self, netns: str, veth: str, address: str) -> None:
        self.ledger.add("netns", netns)
        run(["ip", "netns", "add", netns])
        self.ledger.add("links", veth)
        run(["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", netns])
        run(["ip", "link", "set", veth, "master", self.bridge, "up"])
        run(["ip", "-n", netns, "addr", "add", f"{address}/24", "dev", "eth0"])
        run(["ip", "-n", netns, "link", "set", "eth0", "up"])
        run(["ip", "-n", netns, "link", "set", "lo", "up"])

    # -- files

    def _write_files(self) -> None:
        key = self.state / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        (self.state / "hosts").write_text(self._hosts())
        self.ledger.set("slurmctld_port", free_port())
        self.conf.write_text(self._slurm_conf())
        (self.gluster / "glusterd.vol").write_text(_glusterd_vol())
        for name in CLIENTS:
            real = which(name)
            if real:
                wrapper = self.bin / name
                wrapper.write_text(f'#!/bin/sh\nSLURM_CONF={self.conf} exec {real} "$@"\n')
                wrapper.chmod(0o755)

    def _hosts(self) -> str:
        """/etc/hosts inside the nodes: every member by name, the host under its own name."""
        lines = [
            "127.0.0.1 localhost",
            "::1 localhost ip6-localhost ip6-loopback",
            f"{self.address('host')} {socket.gethostname()} {self.prefix}-host",
            f"{self.address('storage')} {self.prefix}-storage",
        ]
        lines += [f"{self.address(node)} {node}" for node in self.nodes]
        return "\n".join(lines) + "\n"

    def _slurm_conf(self) -> str:
        s = self.state
        cpus = os.cpu_count() or 1
        memory = max(1024, int(available_memory_mb() * 0.8 / self.node_count))
        lines = [
            "# made by python -m tierbench.minicluster up; removed by down",
            f"ClusterName={self.prefix}",
            f"SlurmctldHost={socket.gethostname()}({self.address('host')})",
            f"SlurmctldPort={self.ledger.get('slurmctld_port')}",
            f"SlurmdPort={SLURMD_PORT}",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={s / 'munge' / 'munge.socket'}",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"StateSaveLocation={s / 'slurm' / 'ctld'}",
            f"SlurmctldPidFile={s / 'slurm' / 'slurmctld.pid'}",
            f"SlurmctldLogFile={s / 'log' / 'slurmctld.log'}",
            # one slurmd per node on one host: %n keeps their files apart; without a
            # TmpFS per node PMIx finds the other node's folder and fails
            f"SlurmdSpoolDir={s / 'slurm' / '%n' / 'spool'}",
            f"SlurmdPidFile={s / 'slurm' / '%n' / 'slurmd.pid'}",
            f"SlurmdLogFile={s / 'log' / 'slurmd-%n.log'}",
            f"TmpFS={s / 'slurm' / '%n' / 'tmp'}",
            # namespaces, not cgroups: slurmd must not try to own /sys/fs/cgroup
            "ProctrackType=proctrack/pgid",
            "TaskPlugin=task/none",
            # nodes share the machine's cores and memory: what they report is not checked
            "SlurmdParameters=config_overrides",
            "ReturnToService=2",
            "MpiDefault=none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core_Memory",
            # no slurmdbd: sacct cannot answer, so the Snakemake plugin asks squeue,
            # which keeps finished jobs for MinJobAge seconds
            "AccountingStorageType=accounting_storage/none",
            "JobAcctGatherType=jobacct_gather/none",
            "JobCompType=jobcomp/none",
            "MinJobAge=300",
            "SchedulerType=sched/backfill",
            "DefMemPerCPU=256",
            "KillWait=5",
            "InactiveLimit=0",
        ]
        lines += [
            f"NodeName={node} NodeAddr={self.address(node)} NodeHostname={node} "
            f"CPUs={cpus} RealMemory={memory} State=UNKNOWN"
            for node in self.nodes
        ]
        lines.append(f"PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
        return "\n".join(lines) + "\n"

    def _write_env(self) -> None:
        lines = [f"export {k}={shlex.quote(v)}" for k, v in self.env.items() if k != "PATH"]
        lines.append(f'export PATH={shlex.quote(str(self.bin))}:"$PATH"')
        self.env_file.write_text("\n".join(lines) + "\n")

    # -- daemons

    def _spawn(self, name: str, argv: list[str]) -> dict:
        """Start a daemon in the foreground of its own session, output to log/<name>.out."""
        with open(self.logs / f"{name}.out", "ab") as out:
            child = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, "SLURM_CONF": str(self.conf)},
            )
        _CHILDREN[child.pid] = child
        record = record_of(child.pid, name)
        self.ledger.process(name, record)
        return record or {"pid": child.pid, "start": -1, "name": name}

    def _check_daemons(self) -> None:
        """Raise with the log's end when a daemon that should run has exited."""
        for name, record in self.ledger.get("processes", {}).items():
            if not name.startswith("glusterfs") and not alive(record):
                log = self.logs / f"{name}.out"
                raise MiniClusterError(f"{tail(log)}\n{name} exited (log: {log})")

    def _start_glusterd(self) -> None:
        """glusterd on the storage node, its folders bind-mounted from the state folder."""
        self.ledger.set("run_gluster_existed", Path(GLUSTER_DIRS["run"]).exists())
        Path(GLUSTER_DIRS["run"]).mkdir(exist_ok=True)
        binds = [
            f"mount --bind {shlex.quote(str(self.gluster / sub))} {target}"
            for sub, target in GLUSTER_DIRS.items()
        ]
        script = "; ".join(
            [
                "set -e",
                *binds,
                f"hostname {self.prefix}-storage",
                f"exec glusterd -N --volfile={shlex.quote(str(self.gluster / 'glusterd.vol'))}",
            ]
        )
        self._spawn("glusterd", self._in_netns(self.storage_netns, script))

    def _in_netns(self, netns: str, script: str) -> list[str]:
        """A shell in the named network namespace with its own host name and mounts.

        ``nsenter --net``, not ``ip netns exec``: the latter remounts /sys, which hides
        /sys/fs/cgroup, and slurmd dies without it. Private propagation: the host mounts
        the shared volume at the same path after the nodes, and on a host whose / is
        shared (systemd's default) a slave copy would receive that mount on top of the
        node's own client, so the node would use the host's.
        """
        return [
            "nsenter",
            f"--net={NETNS_DIR / netns}",
            "unshare",
            "--uts",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            script,
        ]

    def _gluster(self, *argv: str, timeout: float = 60) -> str:
        """The gluster CLI inside the storage node, talking to its glusterd's socket."""
        glusterd = self.process("glusterd")
        socket_path = f"{GLUSTER_DIRS['run']}/glusterd.socket"
        enter = ["nsenter", "-t", str(glusterd["pid"]), "-m", "-n", "--"]
        cli = ["gluster", "--mode=script", f"--glusterd-sock={socket_path}", *argv]
        return run([*enter, *cli], timeout=timeout).stdout

    def _make_volume(self, timeout: float) -> None:
        socket_path = self.gluster / "run" / "glusterd.socket"
        wait_for(socket_path.exists, timeout, "glusterd's socket", self._check_daemons)
        brick = f"{self.address('storage')}:{self.gluster / 'brick'}"
        # force: the brick is a folder on the root file system, not a file system of its own
        self._gluster("volume", "create", VOLUME, brick, "force")
        for option in VOLUME_OPTIONS:
            self._gluster("volume", "set", VOLUME, option, "off")
        self._gluster("volume", "start", VOLUME)
        for pid in pids_in_netns(self.storage_netns):
            if pid != self.process("glusterd")["pid"]:
                self.ledger.process(f"glusterfsd-{pid}", record_of(pid, "glusterfsd"))

    def _start_munged(self) -> None:
        m = self.state / "munge"
        self._spawn(
            "munged",
            [
                which("munged"),
                "--foreground",
                "--force",
                f"--socket={m / 'munge.socket'}",
                f"--key-file={m / 'munge.key'}",
                f"--pid-file={m / 'munged.pid'}",
                f"--seed-file={m / 'munged.seed'}",
                f"--log-file={self.logs / 'munged.log'}",
            ],
        )

    def _start_slurmctld(self) -> None:
        socket_path = self.state / "munge" / "munge.socket"
        wait_for(socket_path.exists, 15, "munged's socket", self._check_daemons)
        self._spawn("slurmctld", [which("slurmctld"), "-D", "-i", "-f", str(self.conf)])

    def _controller_up(self) -> bool:
        try:
            return "UP" in self.run("scontrol", "ping", check=False, timeout=10)
        except MiniClusterError:
            return False

    def _mount_options(self, where: str) -> str:
        return f"{MOUNT_OPTIONS},log-file={self.logs / f'glusterfs-{where}.log'}"

    def _start_node(self, node: str) -> None:
        """slurmd in the node's namespaces, after the node's tmpfs and its own GlusterFS client."""
        q = shlex.quote
        self.ledger.add("mounts", {"where": node, "path": str(self.local)})
        self.ledger.add("mounts", {"where": node, "path": str(self.shared)})
        script = "; ".join(
            [
                "set -e",
                f"mount --bind {q(str(self.state / 'hosts'))} /etc/hosts",
                f"hostname {node}",
                f"mount -t tmpfs -o size={self.local_size},mode=1777 {self.prefix}-local "
                f"{q(str(self.local))}",
                f"mount -t glusterfs -o {q(self._mount_options(node))} "
                f"{self.address('storage')}:/{VOLUME} {q(str(self.shared))}",
                f"exec {which('slurmd')} -D -N {node} -f {q(str(self.conf))}",
            ]
        )
        self._spawn(f"slurmd-{node}", self._in_netns(self.netns(node), script))

    def _mount_host(self) -> None:
        """The submit host's own client of the volume, after the nodes have theirs."""
        self.ledger.add("mounts", {"where": "host", "path": str(self.shared)})
        source = f"{self.address('storage')}:/{VOLUME}"
        options = self._mount_options("host")
        run(["mount", "-t", "glusterfs", "-o", options, source, str(self.shared)])
        for pid in _host_fuse_clients(self.shared):
            self.ledger.process("glusterfs-host", record_of(pid, "glusterfs"))

    def _nodes_idle(self) -> bool:
        states = self._slurm_states()
        return all(states.get(node) == "idle" for node in self.nodes)

    def _slurm_states(self) -> dict[str, str]:
        try:
            text = self.run("sinfo", "--noheader", "--Node", "--format=%N %t", check=False)
        except MiniClusterError:
            return {}
        return dict(line.split() for line in text.splitlines() if len(line.split()) == 2)

    # -- status

    def healthy(self) -> bool:
        return self.status()[1]

    def status(self) -> tuple[list[str], bool]:
        """One line per node, the storage node and the host; and whether all is up."""
        if not self.ledger.data:
            return [f"no minicluster in {self.state} (no state.json)"], False
        lines, ok = [], True
        states = self._slurm_states() if alive(self.process("slurmctld")) else {}
        for node in self.nodes:
            line, node_ok = self._node_status(node, states.get(node, "unknown"))
            lines.append(line)
            ok = ok and node_ok
        line, storage_ok = self._storage_status()
        lines.append(line)
        host_ok = _reachable(self.shared) and _mounted_glusterfs(self.shared)
        lines.append(
            f"{'host':<8} slurmctld {'up' if alive(self.process('slurmctld')) else 'DOWN'}, "
            f"munged {'up' if alive(self.process('munged')) else 'DOWN'}, "
            f"shared {'reachable' if host_ok else 'NOT MOUNTED'} at {self.shared}"
        )
        ok = (
            ok
            and storage_ok
            and host_ok
            and alive(self.process("slurmctld"))
            and alive(self.process("munged"))
        )
        return lines, bool(ok and self.ledger.get("complete"))

    def _node_status(self, node: str, slurm_state: str) -> tuple[str, bool]:
        slurmd = self.process(f"slurmd-{node}")
        if not alive(slurmd):
            return f"{node:<8} {slurm_state:<8} slurmd not running", False
        local = mount_at(self.local, slurmd["pid"])
        local_ok = local is not None and local["fs_type"] == "tmpfs"
        size = _tmpfs_size(local["super_options"]) if local_ok else ""
        shared = mount_at(self.shared, slurmd["pid"])
        shared_ok = shared is not None and shared["fs_type"] == "fuse.glusterfs"
        if shared_ok:
            try:
                probe = self.on_node(node, "stat", "-f", "-c", "%T", str(self.shared), check=False)
            except MiniClusterError:  # it did not answer in time
                probe = ""
            shared_ok = bool(probe.strip())
        ok = slurm_state in ("idle", "mix", "alloc") and local_ok and shared_ok
        return (
            f"{node:<8} {slurm_state:<8} local {'tmpfs ' + size if local_ok else 'NOT MOUNTED'}, "
            f"shared {'reachable' if shared_ok else 'NOT REACHABLE'} "
            f"({self.address(node)})",
            ok,
        )

    def _storage_status(self) -> tuple[str, bool]:
        glusterd = alive(self.process("glusterd"))
        bricks = self._processes_named("glusterfsd")
        brick = bool(bricks) and all(alive(r) for r in bricks)
        return (
            f"{'storage':<8} glusterd {'up' if glusterd else 'DOWN'}, "
            f"brick {'up' if brick else 'DOWN'}, volume {VOLUME} "
            f"({self.address('storage')}:{self.gluster / 'brick'})",
            glusterd and brick,
        )

    # -- down

    def down(self) -> list[str]:
        """Stop and remove everything recorded, in order; what it did, one line each."""
        done: list[str] = []
        if not self.ledger.data and not self._named_leftovers():
            if self.state.exists() and not _mounts_under(self.state):
                shutil.rmtree(self.state, ignore_errors=True)
            return done
        need_root()
        self._cancel_jobs(done)
        self._stop_nodes(done)
        for name in ("slurmctld", "munged"):
            self._stop(name, done)
        self._unmount_host(done)
        self._stop_storage(done)
        self._remove_network(done)
        self._remove_folders(done)
        return done

    def _named_leftovers(self) -> list[str]:
        """Namespaces and links with the cluster's prefix, also when state.json is lost."""
        found = [n for n in _netns_names() if n.startswith(f"{self.prefix}-")]
        links = [n for n in _link_names() if n == self.bridge or n.startswith(f"{self.prefix}-")]
        return found + links

    def _stop(self, name: str, done: list[str]) -> None:
        record = self.process(name)
        if alive(record):
            stop_processes([record])
            done.append(f"stopped {name} (pid {record['pid']})")

    def _cancel_jobs(self, done: list[str]) -> None:
        if not alive(self.process("slurmctld")):
            return
        jobs = self._queued()
        if not jobs:
            return
        self.run("scancel", *jobs, check=False, timeout=15)
        try:
            wait_for(lambda: not self._queued(), 20, "cancelled jobs to end")
        except MiniClusterError:
            pass  # their processes are stopped with the nodes
        done.append(f"cancelled {len(jobs)} jobs")

    def _queued(self) -> list[str]:
        try:
            return self.run("squeue", "--noheader", "--format=%i", check=False, timeout=15).split()
        except MiniClusterError:
            return []

    def _stop_nodes(self, done: list[str]) -> None:
        """slurmd first, then each node's mounts inside its namespace, then what still runs."""
        nodes = sorted(
            {n.removeprefix(f"{self.prefix}-") for n in self.ledger.get("netns", [])}
            | {n.removeprefix(f"{self.prefix}-") for n in self._named_leftovers()}
        )
        nodes = [n for n in nodes if re.fullmatch(r"node\d+", n)]
        for node in nodes:
            self._stop(f"slurmd-{node}", done)
        for node in nodes:
            netns = self.netns(node)
            self._unmount_in(netns, done)
            leftovers = _records_in(netns)
            if leftovers:
                stop_processes(leftovers)
                done.append(f"stopped {len(leftovers)} more processes of {node}")

    def _unmount_in(self, netns: str, done: list[str]) -> None:
        """Unmount the node's shared and local tiers from inside its mount namespace."""
        for pid in pids_in_netns(netns):
            mounted = [p for p in (self.shared, self.local) if mount_at(p, pid)]
            for path in mounted:
                enter = ["nsenter", "-t", str(pid), "-m", "--"]
                if run([*enter, "umount", str(path)], check=False, timeout=20).returncode:
                    run([*enter, "umount", "-l", str(path)], check=False, timeout=20)
                done.append(f"unmounted {path} in {netns}")
            if mounted:
                return

    def _unmount_host(self, done: list[str]) -> None:
        if _mounted_glusterfs(self.shared) or mount_at(self.shared):
            if run(["umount", str(self.shared)], check=False, timeout=20).returncode:
                run(["umount", "-l", str(self.shared)], check=False, timeout=20)
            done.append(f"unmounted {self.shared} on the host")
        clients = [record_of(pid, "glusterfs") for pid in _host_fuse_clients(self.shared)]
        self._stop("glusterfs-host", done)
        stop_processes([c for c in clients if c])

    def _stop_storage(self, done: list[str]) -> None:
        """glusterd first, so it starts no brick again, then the brick and whatever is left."""
        self._stop("glusterd", done)
        records = self._processes_named("glusterfsd") + _records_in(self.storage_netns)
        if any(alive(r) for r in records):
            stop_processes(records)
            done.append(f"stopped the storage node's {len(records)} processes")

    def _remove_network(self, done: list[str]) -> None:
        links = [x for x in self.ledger.get("links", []) if x != self.bridge]
        links += [x for x in _link_names() if x.startswith(f"{self.prefix}-") and x not in links]
        for link in links:
            if Path(f"/sys/class/net/{link}").exists():
                run(["ip", "link", "del", link], check=False)
                done.append(f"deleted veth {link}")
        for netns in dict.fromkeys([*self.ledger.get("netns", []), *self._named_leftovers()]):
            if (NETNS_DIR / netns).exists():
                run(["ip", "netns", "del", netns])
                done.append(f"deleted netns {netns}")
        if Path(f"/sys/class/net/{self.bridge}").exists():
            run(["ip", "link", "del", self.bridge])
            done.append(f"deleted bridge {self.bridge}")
        before = self.ledger.get("run_netns", {"existed": True, "mounted": True})
        if not before["mounted"] and _is_mount(NETNS_DIR) and not any(NETNS_DIR.iterdir()):
            run(["umount", str(NETNS_DIR)])
            done.append(f"unmounted {NETNS_DIR}")
        if not before["existed"] and NETNS_DIR.is_dir() and not _is_mount(NETNS_DIR):
            _rmdir_if_empty(NETNS_DIR)

    def _remove_folders(self, done: list[str]) -> None:
        if self.ledger.get("run_gluster_existed") is False:
            _rmdir_if_empty(Path(GLUSTER_DIRS["run"]))
        left = _mounts_under(self.state)
        if left:
            raise MiniClusterError(
                f"{', '.join(left)} still mounted: {self.state} is kept; unmount, then down again"
            )
        if self.state.exists():
            shutil.rmtree(self.state)
            done.append(f"removed {self.state}")
        self.ledger = Ledger(self.state / "state.json")


def _glusterd_vol() -> str:
    """Debian's glusterd.vol with glusterd's socket in /run/gluster, which is the state's."""
    return "\n".join(
        [
            "volume management",
            "    type mgmt/glusterd",
            "    option working-directory /var/lib/glusterd",
            "    option transport-type socket",
            "    option transport.socket.listen-port 24007",
            "    option transport.socket.read-fail-log off",
            "    option ping-timeout 0",
            "    option event-threads 1",
            "    option max-port 60999",
            f"    option glusterd-sockfile {GLUSTER_DIRS['run']}/glusterd.socket",
            "end-volume",
            "",
        ]
    )


def _tmpfs_size(super_options: str) -> str:
    """A tmpfs's size from its mount options (``size=2097152k``) in GiB."""
    found = re.search(r"size=(\d+)k", super_options)
    if not found:
        return "unlimited"
    kib = int(found.group(1))
    return f"{kib / 1024**2:.1f} GiB" if kib >= 1024**2 else f"{kib // 1024} MiB"


def _is_mount(path: Path) -> bool:
    return any(m["mount_point"] == str(path) for m in mounts_of())


def _mounted_glusterfs(path: Path) -> bool:
    found = mount_at(path)
    return found is not None and found["fs_type"] == "fuse.glusterfs"


def _reachable(path: Path, timeout: float = 10) -> bool:
    """A metadata round trip to the file system on ``path`` answers in time."""
    try:
        done = run(["stat", "-f", "-c", "%T", str(path)], check=False, timeout=timeout)
    except MiniClusterError:
        return False
    return done.returncode == 0


def _mounts_under(folder: Path) -> list[str]:
    prefix = str(folder).rstrip("/") + "/"
    return [m["mount_point"] for m in mounts_of() if m["mount_point"].startswith(prefix)]


def _host_fuse_clients(mount_point: Path) -> list[int]:
    """GlusterFS client processes in this network namespace serving ``mount_point``."""
    own = os.readlink("/proc/self/ns/net")
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            if os.readlink(f"/proc/{entry}/ns/net") != own:
                continue
        except OSError:
            continue
        if argv and argv[0].endswith(b"glusterfs") and str(mount_point).encode() in argv:
            found.append(int(entry))
    return found


def _records_in(netns: str) -> list[dict]:
    """Records of the processes in a network namespace, to stop them by pid."""
    records = [record_of(pid, f"{netns} process") for pid in pids_in_netns(netns)]
    return [r for r in records if r]


def _netns_names() -> list[str]:
    try:
        return sorted(p.name for p in NETNS_DIR.iterdir())
    except OSError:
        return []


def _link_names() -> list[str]:
    try:
        return sorted(os.listdir("/sys/class/net"))
    except OSError:
        return []


def _rmdir_if_empty(path: Path) -> None:
    try:
        path.rmdir()
    except OSError:
        pass


# ---------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tierbench.minicluster", description=__doc__.splitlines()[0]
    )
    parser.add_argument("action", choices=["up", "status", "down", "env"])
    parser.add_argument("--nodes", type=int, default=DEFAULT_NODES, help="compute nodes (up)")
    parser.add_argument("--state", help=f"state folder (${STATE_ENV}, else {DEFAULT_STATE})")
    parser.add_argument("--local-size", default=DEFAULT_LOCAL_SIZE, help="each node's tmpfs")
    args = parser.parse_args(argv)
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
        with nullcontext() if held else exclusive(wait=False):
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
