"""dd: the documents' own sequential write, from /dev/zero into one file.

``dd if=/dev/zero of=random.img bs=<block_size> count=<count> [conv=fdatasync]``
runs as the documents wrote it (document 003: ``bs=10M count=1024``; document
004: ``bs=1M count=10k`` and ``bs=10M count=10k``); the config scales
``count``. ``sync: buffered`` is the plain invocation, which ends when the
data is in the page cache; ``sync: fdatasync`` adds ``conv=fdatasync``, so
dd's time includes flushing the file to the device. dd's own summary line
(bytes, seconds, rate) is parsed; the rate reported is bytes / seconds in MB/s
(1e6 B/s), dd's rounded rate is kept beside it.

The page-cache cliff (document 004's lesson) uses ``file_fraction`` instead
of ``count``: the file is that fraction of ``relative_to`` (``ram``,
``dirty_limit`` or ``dirty_background``), read on the node the job runs on
from /proc/meminfo and /proc/sys/vm/dirty_*. Sizes above ``max_file_size``,
the tier's ``max_bytes`` or its free space are skipped with the reason, so a
sweep is bounded and says where it stopped.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

from .. import pagecache
from ..errors import PointFailed, PointSkipped
from ..job import Job
from ..packages import package_of
from ..pagecache import memory_limits
from ..records import metric
from ..units import format_size, parse_size
from . import Tool, Workload

OUTPUT_NAME = "random.img"
#: free space a relative point leaves untouched on its tier (x its size)
FREE_SPACE_MARGIN = 1.2
PROGRESS_EVERY_S = 5.0
RELATIVE_TO = ("ram", "dirty_limit", "dirty_background")
_SUMMARY = re.compile(
    r"^(\d+) bytes(?: \([^)]*\))? copied, ([0-9.]+(?:e[-+]?\d+)?) s, "
    r"([0-9.]+(?:e[-+]?\d+)?|Infinity|inf) ?([kKMGTPE]?i?B)/s\s*$",
    re.M,
)
_RECORDS = re.compile(r"^(\d+)\+(\d+) records (in|out)\s*$", re.M)
_PREFIX = {"": 1, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
_DD_SIZE = re.compile(r"^[0-9]+[kKMGT]?$")


def _dd_operand(value) -> str:
    """A size as written in the config when dd reads it the same way, else in bytes."""
    text = str(value)
    return text if _DD_SIZE.match(text) else str(parse_size(value))


def check_params(params: dict) -> None:
    block = parse_size(params["block_size"])
    if block <= 0:
        raise ValueError("block_size must be positive")
    has_count, has_fraction = "count" in params, "file_fraction" in params
    if has_count == has_fraction:
        raise ValueError("give exactly one of count (blocks) or file_fraction (of relative_to)")
    if has_count and parse_size(params["count"]) < 1:
        raise ValueError("count must be at least 1")
    if has_fraction:
        for key in ("relative_to", "max_file_size"):
            if key not in params:
                raise ValueError(f"file_fraction needs {key}")
        if parse_size(params["max_file_size"]) < block:
            raise ValueError(
                f"max_file_size {params['max_file_size']} is smaller than one block "
                f"({params['block_size']})"
            )


def planned_bytes(params: dict) -> int:
    """count x block size; a relative point writes at most its max_file_size."""
    if "count" in params:
        return parse_size(params["count"]) * parse_size(params["block_size"])
    return parse_size(params["max_file_size"])


def parse_dd(text: str) -> dict:
    """dd's closing lines: records, bytes, seconds, its rate (in B/s) and any error lines."""
    summaries = _SUMMARY.findall(text)
    if not summaries:
        raise PointFailed("dd printed no summary line: " + (text.strip()[-300:] or "(nothing)"))
    n_bytes, seconds, rate, unit = summaries[-1]
    prefix = unit[:-1].rstrip("i")
    scale = (1024 ** " KMGTPE".index(prefix.upper())) if "i" in unit else _PREFIX[prefix]
    records = {kind: (int(full), int(partial)) for full, partial, kind in _RECORDS.findall(text)}
    errors = [line.strip() for line in text.splitlines() if line.startswith("dd: ")]
    return {
        "bytes": int(n_bytes),
        "seconds": float(seconds),
        "rate_bps": float(rate) * scale if rate[0].isdigit() else float("inf"),
        "records_in": records.get("in"),
        "records_out": records.get("out"),
        "errors": errors,
    }


def dd_metrics(parsed: dict) -> list[dict]:
    if parsed["seconds"] <= 0:
        raise PointFailed(f"dd took {parsed['seconds']} s: too short to give a rate")
    found = [
        metric("write_bandwidth", parsed["bytes"] / parsed["seconds"] / 1e6, "MB/s"),
        metric("bytes", parsed["bytes"], "B"),
        metric("time", parsed["seconds"], "s"),
    ]
    if parsed["rate_bps"] != float("inf"):
        found.append(metric("dd_rate", parsed["rate_bps"] / 1e6, "MB/s"))
    return found


def failure_message(parsed: dict, planned: int) -> str:
    """dd's own error line and how far it got, for the report."""
    return (
        f"{'; '.join(parsed['errors'])}: wrote {parsed['bytes']} B "
        f"({format_size(parsed['bytes'])}) of {planned} B ({format_size(planned)}) "
        f"in {parsed['seconds']:g} s"
    )


def command_line(params: dict, output: str, count) -> list[str]:
    command = [
        "dd",
        "if=/dev/zero",
        f"of={output}",
        f"bs={_dd_operand(params['block_size'])}",
        f"count={_dd_operand(count)}",
    ]
    if params["sync"] == "fdatasync":
        command.append("conv=fdatasync")
    return command


def target_size(params: dict, limits: dict) -> int:
    return int(float(params["file_fraction"]) * limits[params["relative_to"]])


def syncfs(path: Path) -> None:
    """Flush the tier's file system first, so earlier writes do not share this run's time."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.syncfs(fd) != 0:
            os.sync()
    except (OSError, AttributeError):
        os.sync()
    finally:
        os.close(fd)


def relative_count(job: Job, block: int) -> tuple[int, list[dict]]:
    """Blocks for a cliff point, or PointSkipped naming the bound it is above."""
    params = job.params
    limits = memory_limits()
    job.extra["memory_limits"] = limits
    size = target_size(params, limits)
    what = (
        f"{format_size(size)} ({params['file_fraction']} x {params['relative_to']} "
        f"{format_size(limits[params['relative_to']])})"
    )
    cap = parse_size(params["max_file_size"])
    if size > cap:
        raise PointSkipped(
            f"file of {what} is above the sweep cap max_file_size={format_size(cap)}"
        )
    if job.max_bytes is not None and size > job.max_bytes:
        raise PointSkipped(
            f"file of {what} is above the tier's max_bytes={format_size(job.max_bytes)}"
        )
    free = shutil.disk_usage(job.folder.path).free
    if size * FREE_SPACE_MARGIN > free:
        raise PointSkipped(f"file of {what} does not fit the tier's {format_size(free)} free space")
    context = [
        metric("target_bytes", size, "B"),
        metric("ram_bytes", limits["ram"], "B"),
        metric("dirty_limit_bytes", limits["dirty_limit"], "B"),
        metric("dirty_background_bytes", limits["dirty_background"], "B"),
    ]
    return max(1, round(size / block)), context


def run_dd(command: list[str], output: Path, job: Job) -> subprocess.CompletedProcess:
    """dd in the run folder with LC_ALL=C (a stable summary line); logs progress."""
    env = {**os.environ, "LC_ALL": "C"}
    process = subprocess.Popen(
        command,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=env,
        cwd=output.parent,
    )
    last = time.monotonic()
    while process.poll() is None:
        time.sleep(0.05)
        if time.monotonic() - last >= PROGRESS_EVERY_S:
            last = time.monotonic()
            try:
                job.log(f"dd: {format_size(output.stat().st_size)} written so far")
            except FileNotFoundError:
                pass
    stderr = process.stderr.read()
    return subprocess.CompletedProcess(command, process.returncode, "", stderr)


def run(job: Job) -> list[dict]:
    params = job.params
    if shutil.which("dd") is None:
        raise PointSkipped(f"dd is not installed ({package_of('dd')})")
    block = parse_size(params["block_size"])
    context: list[dict] = []
    if "file_fraction" in params:
        count, context = relative_count(job, block)
    else:
        count = params["count"]
    planned = parse_size(count) * block
    job.folder.ensure_space(planned, job.max_bytes)
    output = job.folder.path / OUTPUT_NAME
    command = command_line(params, OUTPUT_NAME, count)
    job.extra["command"] = " ".join(command)
    syncfs(job.folder.path)
    job.log(f"running {' '.join(command)} in {job.folder.path} ({format_size(planned)})")
    done = run_dd(command, output, job)
    job.log(done.stderr.strip())
    job.extra["dd_output"] = done.stderr
    parsed = parse_dd(done.stderr)
    if done.returncode != 0 or parsed["errors"]:
        raise PointFailed(failure_message(parsed, planned))
    if parsed["bytes"] != planned:
        raise PointFailed(f"dd wrote {parsed['bytes']} B, not the {planned} B asked for")
    return dd_metrics(parsed) + context


def _written_bytes(params: dict, limits: dict | None) -> int | None:
    """What one point writes; None when it is sized from the node's memory, not read."""
    block = parse_size(params["block_size"])
    if "count" in params:
        return parse_size(params["count"]) * block
    if limits is None:
        return None
    # a size above max_file_size is skipped by the workload, so never measured
    return int(float(params["file_fraction"]) * limits[params["relative_to"]])


def page_cache(params: dict, limits: dict | None) -> dict:
    """fdatasync, fsync, direct and dsync wait for the device; a buffered write is its bytes
    against the dirty limit."""
    flags = {
        part
        for key in ("conv", "oflag")
        for part in str(params.get(key, "") or "").replace(" ", "").split(",")
    }
    if params.get("sync") == "fdatasync" or flags & {"fdatasync", "fsync"}:
        return pagecache.result(
            pagecache.DEVICE, "dd conv=fdatasync: its time includes flushing to the device"
        )
    if flags & {"direct", "dsync", "sync"}:
        return pagecache.result(
            pagecache.DEVICE, "dd oflag=direct/dsync: every block waits for the device"
        )
    size = _written_bytes(params, limits)
    if size is None:
        return pagecache.result(
            pagecache.UNKNOWN, "dd file size relative to the node's memory, which was not read"
        )
    return pagecache.buffered_write("dd buffered write", size, limits)


WORKLOAD = Workload(
    name="dd",
    summary="dd: the documents' sequential write from /dev/zero, and the page-cache cliff",
    headline=("write_bandwidth",),
    run=run,
    family="sequential",
    env="dd",
    tools=(Tool("dd"),),
    check_params=check_params,
    planned_bytes=planned_bytes,
    page_cache=page_cache,
)
