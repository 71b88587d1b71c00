"""What a number ran on: host, file system, block device, tool versions.

Everything is read from /proc and /sys or asked of the tools themselves, so a
probe made inside a benchmark job describes the node the job ran on.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from .records import utc_now
from .rundir import free_bytes

#: tools every study may use whatever its workloads: bindfs mounts the FUSE tiers
COMMON_TOOLS = {"bindfs": ["bindfs", "--version"]}
#: what follows a version number in some tools' first line (pv: "pv 1.6.20 - Copyright ...")
_VERSION_TAIL = re.compile(r"\s*(?:[-,;(]\s*)?(?:Copyright|\(C\)|©|Written by).*$", re.IGNORECASE)


def clean_version(text: str) -> str | None:
    """The first line of a tool's version output without its copyright notice."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return None
    return _VERSION_TAIL.sub("", lines[0]).strip() or lines[0]


def parse_mountinfo(text: str) -> list[dict]:
    """Mounts from /proc/self/mountinfo (see proc(5)), in file order."""
    mounts = []
    for line in text.splitlines():
        if " - " not in line:
            continue
        left, right = line.split(" - ", 1)
        fields = left.split()
        fs_fields = right.split()
        if len(fields) < 6 or len(fs_fields) < 2:
            continue
        mounts.append(
            {
                "mount_point": _unescape(fields[4]),
                "mount_options": fields[5],
                "fs_type": fs_fields[0],
                "source": _unescape(fs_fields[1]),
                "super_options": fs_fields[2] if len(fs_fields) > 2 else "",
            }
        )
    return mounts


def _unescape(path: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), path)


def mount_of(path: str | os.PathLike, mounts: list[dict]) -> dict:
    """The mount holding ``path``: the longest mount point that prefixes it (last one wins)."""
    real = os.path.realpath(path)
    best: dict | None = None
    for mount in mounts:
        point = mount["mount_point"]
        inside = real == point or real.startswith(point.rstrip("/") + "/") or point == "/"
        if inside and (best is None or len(point) >= len(best["mount_point"])):
            best = mount
    return best or {}


def block_device(source: str, sys_root: str = "/sys") -> dict:
    """Model and rotational flag of the disk behind a mount source like /dev/nvme0n1p2."""
    name = os.path.basename(os.path.realpath(source)) if source.startswith("/dev/") else ""
    if not name or not os.path.exists(f"{sys_root}/class/block/{name}"):
        return {}
    disk = name
    # A partition's queue/ lives on its parent disk.
    if not os.path.exists(f"{sys_root}/class/block/{name}/queue"):
        parent = Path(os.path.realpath(f"{sys_root}/class/block/{name}")).parent.name
        disk = parent
    info = {"device": f"/dev/{name}", "disk": disk}
    for key, rel in {
        "rotational": "queue/rotational",
        "model": "device/model",
        "vendor": "device/vendor",
        "scheduler": "queue/scheduler",
        "size_bytes": "size",
    }.items():
        value = _read(f"{sys_root}/class/block/{disk}/{rel}")
        if value is not None:
            info[key] = value
    if "rotational" in info:
        info["rotational"] = info["rotational"] == "1"
    if "size_bytes" in info:
        info["size_bytes"] = int(info["size_bytes"]) * 512
    return info


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def cpu_model() -> str:
    text = _read("/proc/cpuinfo") or ""
    for line in text.splitlines():
        if line.lower().startswith(("model name", "cpu model", "processor\t: ")) and ":" in line:
            value = line.split(":", 1)[1].strip()
            if value and not value.isdigit():
                return value
    return platform.processor() or "unknown"


def memory_bytes() -> int:
    text = _read("/proc/meminfo") or ""
    match = re.search(r"^MemTotal:\s+(\d+) kB", text, re.MULTILINE)
    return int(match.group(1)) * 1024 if match else 0


def tool_versions(tools: dict[str, list[str]]) -> dict[str, str | None]:
    """Each tool's version (first line, cleaned); None where the tool is missing."""
    versions: dict[str, str | None] = {}
    for name, command in tools.items():
        if shutil.which(command[0]) is None:
            versions[name] = None
            continue
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            versions[name] = None
            continue
        versions[name] = clean_version(done.stdout or done.stderr)
    versions["python"] = platform.python_version()
    try:
        from snakemake import __version__ as snakemake_version
    except ImportError:  # the probe also runs outside the pipeline's venv
        snakemake_version = None
    versions["snakemake"] = snakemake_version
    return versions


def usable_cores() -> int:
    """CPUs this process may run on: its affinity (taskset, a cgroup cpuset, a Slurm
    allocation), which can be fewer than the machine's cores."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def probe_host() -> dict:
    return {
        "host": socket.gethostname(),
        "kernel": platform.release(),
        "os": _os_release(),
        "cpu_model": cpu_model(),
        "cores": os.cpu_count(),
        "usable_cores": usable_cores(),
        "memory_bytes": memory_bytes(),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        **slurm_allocation(),
        "probed_at": utc_now(),
    }


def slurm_allocation() -> dict:
    """Inside a Slurm job: its nodes and when it started (squeue, local time as epoch
    seconds; Snakemake's job step executor hands its jobs no other SLURM_ variables than
    the job's id), from which the report tells how much of the allocated node time the
    benchmarks used; nothing elsewhere."""
    job = os.environ.get("SLURM_JOB_ID")
    if not job:
        return {}
    try:
        done = subprocess.run(
            ["squeue", "--noheader", "--format=%D %S", "--jobs", job],
            capture_output=True, text=True, timeout=30, check=True,
        )  # fmt: skip
        nodes, start = done.stdout.split()
        started = time.mktime(time.strptime(start, "%Y-%m-%dT%H:%M:%S"))
    except (OSError, subprocess.SubprocessError, ValueError):
        return {}
    return {"slurm_job_nodes": int(nodes), "slurm_job_start": started}


def _os_release() -> str:
    text = _read("/etc/os-release") or ""
    match = re.search(r'^PRETTY_NAME="?([^"\n]*)"?', text, re.MULTILINE)
    return match.group(1) if match else platform.system()


def probe_tier(path: str | os.PathLike) -> dict:
    """File system, mount options and backing device of a tier path on this node."""
    mountinfo = _read("/proc/self/mountinfo") or ""
    mount = mount_of(path, parse_mountinfo(mountinfo))
    record = {
        "path": str(path),
        "exists": os.path.exists(path),
        "writable": os.access(path, os.W_OK),
        "fs_type": mount.get("fs_type"),
        "mount_point": mount.get("mount_point"),
        "mount_options": mount.get("mount_options"),
        "source": mount.get("source"),
        "block_device": block_device(mount.get("source", "")),
    }
    if os.path.isdir(path):
        record["free_bytes"] = free_bytes(path)
    return record


def job_context(tier_path: str | os.PathLike) -> dict:
    """Host and tier as seen from inside a benchmark job (cheap: no tool versions)."""
    return {"host": probe_host(), "tier": probe_tier(tier_path)}


def full_probe(tiers: dict[str, dict], tools: dict[str, list[str]] | None = None) -> dict:
    return {
        "host": probe_host(),
        "tools": tool_versions({**(tools or {}), **COMMON_TOOLS}),
        "python_executable": sys.executable,
        "tiers": {name: {**spec, **probe_tier(spec["path"])} for name, spec in tiers.items()},
    }


def main(argv: list[str] | None = None) -> int:
    import argparse
    import json

    parser = argparse.ArgumentParser(description="Probe the host and the tiers of a study.")
    parser.add_argument("--plan", required=True, help="the study's plan.json: its tiers and tools")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    plan = json.loads(Path(args.plan).read_text())
    record = full_probe(plan["tiers"], plan.get("tools"))
    Path(args.out).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    print(f"probed {len(record['tiers'])} tiers on {record['host']['host']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
