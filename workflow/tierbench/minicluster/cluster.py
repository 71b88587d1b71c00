"""The cluster on one machine: its state file, and ``up``, ``status`` and ``down``."""

from __future__ import annotations

import ipaddress
import os
import re
import shlex
import shutil
import socket
import subprocess
import time
from pathlib import Path

from .base import (
    _CHILDREN,
    CLIENTS,
    DEFAULT_LOCAL_SIZE,
    DEFAULT_NODES,
    GLUSTER_DIRS,
    HOST_OCTET,
    MOUNT_OPTIONS,
    NETNS_DIR,
    NODE_BASE,
    PARTITION,
    PREFIX,
    SLURMD_PORT,
    STATE_ENV,
    STORAGE_OCTET,
    VOLUME,
    VOLUME_OPTIONS,
    Ledger,
    MiniClusterError,
    _glusterd_vol,
    _host_fuse_clients,
    _is_mount,
    _link_names,
    _mounted_glusterfs,
    _mounts_under,
    _netns_names,
    _reachable,
    _records_in,
    _rmdir_if_empty,
    _tmpfs_size,
    alive,
    available_memory_mb,
    free_port,
    mount_at,
    pids_in_netns,
    record_of,
    run,
    state_path,
    stop_processes,
    tail,
    wait_for,
    which,
)
from .host import (
    free_subnet,
    need_root,
    preflight,
)


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
