"""pv: document 002's ``pv -aSs450m < /dev/zero > test``, into the void or a tier.

pv copies zeros from /dev/zero into the sink and stops at ``size`` bytes
(``-S -s``); with ``-a`` alone it shows only its average rate, e.g.
``[ 307MiB/s]``, redrawn every second behind a carriage return and once more
for the whole transfer when it ends. pv writes that display to stderr and only
to a terminal unless ``-f`` forces it, so the job runs ``pv -f``. The last
bracket is the average over the whole run, in binary units (KiB/s = 1024 B/s),
which is converted to MB/s (1e6 B/s); pv's own text is kept in the record.

The write is buffered, as in the document: no fsync, so pv measures how fast
the page cache (or a FUSE daemon in front of it) accepts data, not the device.
As a cross-check the job also times pv itself: bytes / wall seconds, pv's
start-up included. The sink is a file ``test`` in the job's run folder (or
/dev/null on the void tier), removed after the run, as the document did.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time

from .. import pagecache
from ..errors import PointFailed, PointSkipped
from ..job import Job
from ..records import metric
from ..units import format_size, parse_size
from . import Tool, Workload

#: one display of ``pv -a``: a number, a prefix (KiB = 1024 B; pv --si prints kB = 1000 B), B/s
RATE = re.compile(
    r"\[\s*(?P<number>[0-9]+(?:\.[0-9]+)?)\s*(?P<prefix>[kKMGTPEZY]?)(?P<binary>i?)B/s\s*\]"
)
POWER = {"": 0, "k": 1, "K": 1, "M": 2, "G": 3, "T": 4, "P": 5, "E": 6, "Z": 7, "Y": 8}
SINK_FILE = "test"


def check_params(params: dict) -> None:
    if parse_size(params["size"]) <= 0:
        # pv -s 0 means "size unknown": with -S it would never stop
        raise ValueError("size must be positive")


def planned_bytes(params: dict) -> int:
    """One file of ``size`` bytes on the tier (nothing on the void, which the preflight skips)."""
    return parse_size(params["size"])


def runtime_s(params: dict) -> float:
    """Wall time of one run at a pessimistic 50 MB/s (a slow FUSE mount), plus start-up."""
    return 5 + parse_size(params["size"]) / 50e6


def parse_rate(text: str) -> dict:
    """pv's final average rate from its stderr: ``{"bps": B/s, "text": "307MiB/s"}``.

    Raises PointFailed quoting pv when there is no rate (pv failed, or was not
    forced to print with -f).
    """
    found = list(RATE.finditer(text))
    if not found:
        said = " ".join(text.replace("\r", "\n").split())[-300:]
        raise PointFailed(f"pv printed no average rate: {said or '(nothing)'}")
    # pv redraws the average every second ("\r"); only the one it ends with a
    # newline, when it exits, is the average of the whole run.
    final = [match for match in found if text[match.end() :].lstrip("\r").startswith("\n")]
    if not final:
        raise PointFailed(
            f"pv's output ends before its final average (last shown: {found[-1].group(0)}); "
            "was it interrupted?"
        )
    last = final[-1]
    base = 1024 if last["binary"] else 1000
    return {
        "bps": float(last["number"]) * base ** POWER[last["prefix"]],
        "text": last.group(0)[1:-1].strip(),
    }


def pv_version() -> str | None:
    try:
        done = subprocess.run(["pv", "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    first = done.stdout.strip().splitlines()
    return first[0] if first else None


def command(size: int) -> list[str]:
    """``pv -aSs<size>`` of the document, forced to print its rate (-f)."""
    return ["pv", "-f", "-a", "-S", "-s", str(size)]


def run(job: Job) -> list[dict]:
    if shutil.which("pv") is None:
        raise PointSkipped("pv is not installed")
    size = parse_size(job.params["size"])
    if job.folder is None:
        sink = job.tier_path  # the void: /dev/null
    else:
        job.folder.ensure_space(size, job.max_bytes)
        sink = str(job.folder.path / SINK_FILE)
    argv = command(size)
    shown = f"pv -f -aSs{size} < /dev/zero > {sink}"
    job.extra.update(command=shown, pv_version=pv_version(), sink=sink)
    job.log(f"running {shown} ({format_size(size)})")
    with open("/dev/zero", "rb") as source, open(sink, "wb") as target:
        start = time.perf_counter()
        done = subprocess.run(argv, stdin=source, stdout=target, stderr=subprocess.PIPE)
        wall = time.perf_counter() - start
    stderr = done.stderr.decode("utf-8", errors="replace")
    job.extra["pv_stderr"] = stderr[-2000:]
    try:
        written = size if job.folder is None else os.path.getsize(sink)
        if done.returncode != 0:
            said = " ".join(stderr.replace("\r", "\n").split())[-300:]
            raise PointFailed(
                f"pv exited with {done.returncode} after writing {written} B: {said or '(nothing)'}"
            )
        if written != size:
            raise PointFailed(f"pv stopped after {written} of {size} B")
        rate = parse_rate(stderr)
    finally:
        if job.folder is not None and os.path.exists(sink):
            os.unlink(sink)  # rm -f test, as in the document
    job.extra["pv_rate"] = rate["text"]
    job.log(f"pv: [{rate['text']}]; {size} B in {wall:.3f} s wall = {size / wall / 1e6:.0f} MB/s")
    return [
        metric("throughput", rate["bps"] / 1e6, "MB/s"),
        metric("wall_throughput", size / wall / 1e6, "MB/s"),
        metric("bytes", size, "B"),
        metric("wall_time", wall, "s"),
    ]


def page_cache(params: dict, limits: dict | None) -> dict:
    """pv never fsyncs: its bytes against the dirty limit."""
    what = "pv buffered write (no fsync)"
    return pagecache.buffered_write(what, parse_size(params["size"]), limits)


WORKLOAD = Workload(
    name="pv",
    summary="pv: document 002's sequential copy of zeros into a sink",
    headline=("throughput",),
    run=run,
    family="pv",
    env="pv",
    tools=(Tool("pv"),),
    check_params=check_params,
    planned_bytes=planned_bytes,
    runtime_s=runtime_s,
    page_cache=page_cache,
)
