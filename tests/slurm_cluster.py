"""A one-node Slurm cluster on localhost, for the integration test.

Everything lives in one temporary folder: the munge key and socket, the
generated slurm.conf, state, spool, pid and log files. The daemons (munged,
slurmctld, slurmd) run in the foreground as children of the test, so they are
stopped by process id; nothing outside the folder is touched.

Client commands find the cluster through SLURM_CONF. The Slurm executor's job
step (snakemake-executor-plugin-slurm-jobstep 0.6) removes every SLURM_*
variable but the job id before it calls ``srun`` inside the job, SLURM_CONF
included; a site keeps slurm.conf in /etc/slurm and does not notice. Here a
folder of one-line wrappers (``srun`` = ``SLURM_CONF=... exec /usr/bin/srun``)
goes first on PATH instead, so no file outside the temporary folder is needed.

Run by hand (as root) to get a cluster to try things on::

    python tests/slurm_cluster.py /tmp/slurm-try     # starts, prints the env, waits
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

#: daemon or client command -> Debian package that provides it
COMMANDS = {
    "munged": "munge",
    "slurmctld": "slurm-wlm",
    "slurmd": "slurm-wlm",
    "sbatch": "slurm-wlm",
    "srun": "slurm-wlm",
    "squeue": "slurm-wlm",
    "sinfo": "slurm-wlm",
    "scontrol": "slurm-wlm",
    "scancel": "slurm-wlm",
}
#: client commands that get a SLURM_CONF wrapper
CLIENTS = ["sbatch", "srun", "salloc", "squeue", "sinfo", "scontrol", "scancel", "sacct"]
PARTITION = "debug"


class ClusterError(RuntimeError):
    pass


def which(command: str) -> str | None:
    """A command on PATH, or in sbin (daemons; not on a normal user's PATH)."""
    return shutil.which(command) or shutil.which(command, path="/usr/sbin:/sbin")


def missing_packages() -> list[str]:
    return sorted({pkg for cmd, pkg in COMMANDS.items() if which(cmd) is None})


def install_command(packages: list[str]) -> str:
    return "sudo apt-get update && sudo apt-get install -y --no-install-recommends " + " ".join(
        packages
    )


def install(packages: list[str]) -> None:
    """apt-get install (as root); raises ClusterError with apt's output on failure."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (
        ["apt-get", "update", "-qq"],
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages],
    ):
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
        if done.returncode != 0:
            raise ClusterError(f"{' '.join(command)} failed:\n{done.stdout[-2000:]}{done.stderr}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def available_memory_mb() -> int:
    text = Path("/proc/meminfo").read_text()
    return int(re.search(r"^MemAvailable:\s+(\d+) kB", text, re.MULTILINE).group(1)) // 1024


def node_line(slurmd: str | None = None) -> tuple[str, str, int, int]:
    """(node name, NodeName=... line, CPUs, RealMemory) from ``slurmd -C``, memory below free."""
    slurmd = slurmd or which("slurmd")
    text = subprocess.run([slurmd, "-C"], capture_output=True, text=True, check=True).stdout
    line = text.splitlines()[0].strip()
    name = re.search(r"NodeName=(\S+)", line).group(1)
    cpus = int(re.search(r"CPUs=(\d+)", line).group(1))
    real = int(re.search(r"RealMemory=(\d+)", line).group(1))
    memory = max(1024, min(real, int(available_memory_mb() * 0.8)))
    line = re.sub(r"RealMemory=\d+", f"RealMemory={memory}", line)
    return name, f"{line} NodeAddr=127.0.0.1 State=UNKNOWN", cpus, memory


class LocalSlurm:
    """munged + slurmctld + slurmd for this host, configured and kept in ``root``."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root).resolve()
        self.conf = self.root / "slurm.conf"
        self.bin = self.root / "bin"
        self.processes: dict[str, subprocess.Popen] = {}
        self.node = ""
        self.cpus = 0
        self.memory_mb = 0
        self.partition = PARTITION

    @property
    def env(self) -> dict[str, str]:
        """What a process needs to use this cluster (added to os.environ)."""
        return {
            "SLURM_CONF": str(self.conf),
            "PATH": f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}",
        }

    def write_config(self) -> None:
        root = self.root
        for sub in ("state", "spool", "log"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        key = root / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self.node, line, self.cpus, self.memory_mb = node_line()
        host = socket.gethostname().split(".")[0]
        self.conf.write_text(
            "\n".join(
                [
                    "# one-node cluster on localhost, made by tests/slurm_cluster.py",
                    "ClusterName=tierbench-test",
                    f"SlurmctldHost={host}(127.0.0.1)",
                    f"SlurmctldPort={free_port()}",
                    f"SlurmdPort={free_port()}",
                    "AuthType=auth/munge",
                    "CredType=cred/munge",
                    f"AuthInfo=socket={root / 'munge.socket'}",
                    "SlurmUser=root",
                    "SlurmdUser=root",
                    f"StateSaveLocation={root / 'state'}",
                    f"SlurmdSpoolDir={root / 'spool'}",
                    f"SlurmctldPidFile={root / 'slurmctld.pid'}",
                    f"SlurmdPidFile={root / 'slurmd.pid'}",
                    f"SlurmctldLogFile={root / 'log' / 'slurmctld.log'}",
                    f"SlurmdLogFile={root / 'log' / 'slurmd.log'}",
                    "ProctrackType=proctrack/linuxproc",
                    "TaskPlugin=task/none",
                    "SelectType=select/cons_tres",
                    "SelectTypeParameters=CR_Core_Memory",
                    # no slurmdbd: sacct cannot answer, the profile asks squeue,
                    # which keeps finished jobs for MinJobAge seconds
                    "AccountingStorageType=accounting_storage/none",
                    "JobAcctGatherType=jobacct_gather/none",
                    "JobCompType=jobcomp/none",
                    "MinJobAge=300",
                    "MpiDefault=none",
                    "ReturnToService=2",
                    "SchedulerType=sched/backfill",
                    "DefMemPerCPU=256",
                    "KillWait=5",
                    "InactiveLimit=0",
                    line,
                    f"PartitionName={self.partition} Nodes=ALL Default=YES "
                    "MaxTime=INFINITE State=UP",
                    "",
                ]
            )
        )
        self.bin.mkdir(exist_ok=True)
        for name in CLIENTS:
            real = shutil.which(name)
            if real is None:
                continue
            wrapper = self.bin / name
            wrapper.write_text(f'#!/bin/sh\nSLURM_CONF={self.conf} exec {real} "$@"\n')
            wrapper.chmod(0o755)

    def _start(self, name: str, argv: list[str]) -> None:
        log = open(self.root / "log" / f"{name}.out", "wb")  # noqa: SIM115 (closed with the process)
        self.processes[name] = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **self.env},
            start_new_session=True,
        )
        log.close()
        time.sleep(0.3)
        if self.processes[name].poll() is not None:
            raise ClusterError(f"{name} exited at once:\n{self.log(name)}")

    def start(self, timeout: float = 60) -> None:
        self.write_config()
        root = self.root
        self._start(
            "munged",
            [
                which("munged"),
                "--foreground",
                "--force",
                f"--socket={root / 'munge.socket'}",
                f"--key-file={root / 'munge.key'}",
                f"--pid-file={root / 'munged.pid'}",
                f"--log-file={root / 'log' / 'munged.log'}",
                f"--seed-file={root / 'munged.seed'}",
            ],
        )
        self._wait(lambda: (root / "munge.socket").exists(), 15, "munged socket")
        self._start("slurmctld", [which("slurmctld"), "-D", "-i", "-f", str(self.conf)])
        self._wait(self._controller_up, timeout, "slurmctld to answer")
        self._start("slurmd", [which("slurmd"), "-D", "-f", str(self.conf)])
        self._wait(self._node_idle, timeout, f"node {self.node} to be idle")

    def _wait(self, ready, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, process in self.processes.items():
                if process.poll() is not None:
                    raise ClusterError(f"{name} died while waiting for {what}:\n{self.log(name)}")
            if ready():
                return
            time.sleep(0.3)
        logs = "\n".join(f"--- {name}\n{self.log(name)}" for name in self.processes)
        raise ClusterError(f"timed out waiting for {what}\n{logs}")

    def run(self, *argv: str, check: bool = True, timeout: float = 60) -> str:
        """A Slurm client command against this cluster; its stdout."""
        done = subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, **self.env},
        )
        if check and done.returncode != 0:
            raise ClusterError(f"{' '.join(argv)} failed: {done.stderr.strip()}")
        return done.stdout

    def _controller_up(self) -> bool:
        try:
            return self.run("scontrol", "ping", check=False, timeout=10).find("UP") >= 0
        except subprocess.TimeoutExpired:
            return False

    def _node_idle(self) -> bool:
        try:
            state = self.run("sinfo", "--noheader", "--Node", "--format=%t", check=False)
        except subprocess.TimeoutExpired:
            return False
        return state.strip() == "idle"

    def job(self, job_id: str) -> dict[str, str]:
        """``scontrol show job`` as a dict (finished jobs stay MinJobAge seconds)."""
        text = self.run("scontrol", "--oneliner", "show", "job", str(job_id))
        return dict(re.findall(r"(\S+?)=(\S*)", text))

    def log(self, name: str) -> str:
        texts = []
        for path in (self.root / "log" / f"{name}.out", self.root / "log" / f"{name}.log"):
            if path.is_file():
                texts.append(path.read_text(errors="replace")[-3000:])
        return "\n".join(texts)

    def stop(self) -> None:
        """Cancel what is left in the queue, then stop the daemons (TERM, then KILL)."""
        if "slurmctld" in self.processes and self.processes["slurmctld"].poll() is None:
            try:
                ids = self.run("squeue", "--noheader", "--format=%i", check=False).split()
                if ids:
                    self.run("scancel", *ids, check=False)
                    deadline = time.monotonic() + 20
                    while (
                        time.monotonic() < deadline
                        and self.run("squeue", "--noheader", "--format=%i", check=False).split()
                    ):
                        time.sleep(0.5)
            except (subprocess.TimeoutExpired, OSError):
                pass
        for name in ("slurmd", "slurmctld", "munged"):
            process = self.processes.pop(name, None)
            if process is None or process.poll() is not None:
                continue
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


if __name__ == "__main__":
    cluster = LocalSlurm(sys.argv[1] if len(sys.argv) > 1 else "/tmp/tierbench-slurm")
    cluster.start()
    print(" ".join(f"{k}={v}" for k, v in cluster.env.items()))
    print("Ctrl-C stops the cluster", file=sys.stderr)
    try:
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()
