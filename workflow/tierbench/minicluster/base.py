"""The cluster on one machine's names, limits and errors, and the small helpers the
rest of the package shares: running commands, processes by pid, mounts, the lock.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from .. import locks
from ..probe import parse_mountinfo

DEFAULT_STATE = Path("/var/tmp/tierbench-minicluster")
STATE_ENV = "TIERBENCH_MINICLUSTER"
#: one cluster per machine (its bridge and namespace names are fixed): see cluster_lock()
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
#: the programs the cluster runs (their packages: tierbench.packages)
COMMANDS = [
    "slurmctld", "slurmd", "srun", "munged", "glusterd", "gluster", "mount.glusterfs",
    "mpirun", "mpicc", "unshare", "nsenter", "ip",
]  # fmt: skip
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
def cluster_lock(wait: bool = True) -> Iterator[None]:
    """Hold the machine's one-cluster lock (LOCK_FILE), waiting while another process holds it.

    For whoever brings a cluster up and down again (tests, the bench), so two of
    them never run at once, and so the up and down commands do not pull a
    cluster from under them (``wait=False``: they refuse instead).
    """
    with ExitStack() as stack:
        try:
            stack.enter_context(
                locks.exclusive(
                    LOCK_FILE,
                    wait=wait,
                    held="a test or the bench runs its own cluster; try again when it is done",
                )
            )
        except locks.LockError as error:
            raise MiniClusterError(str(error)) from None
        yield


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
