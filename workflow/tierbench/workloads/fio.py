"""fio: the flexible I/O tester, one job file per point.

Job files are rendered from ``workflow/templates/fio.job.j2``. The three I/O
modes say what reaches the device: ``buffered`` goes through the page cache,
``direct`` opens with O_DIRECT, ``fsync`` calls fsync after every write (the
worst case of document 000). Read points read a file written and fsync'd
beforehand whose pages are then dropped from the page cache, so a buffered
read on a disk measures the disk, not RAM.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from .. import pagecache
from ..errors import PointFailed, PointNotApplicable, PointSkipped
from ..job import Job
from ..records import metric
from ..units import format_size, parse_size
from . import Tool, Workload

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
READS = ("read", "randread")
IO_MODE_TEXT = {
    "buffered": "buffered I/O through the page cache (no fsync)",
    "direct": "direct I/O (O_DIRECT), bypassing the page cache",
    "fsync": "buffered I/O with fsync after every write",
}
PERCENTILES = {"p50": "50.000000", "p99": "99.000000"}


def check_params(params: dict) -> None:
    block = parse_size(params["block_size"])
    size = parse_size(params["size"])
    if block <= 0 or size <= 0:
        raise ValueError("block_size and size must be positive")
    if block > size:
        raise ValueError(
            f"block_size {params['block_size']} is larger than the file size {params['size']}"
        )
    if "io_size" in params and parse_size(params["io_size"]) < block:
        raise ValueError(f"io_size {params['io_size']} is smaller than one block")


def planned_bytes(params: dict) -> int:
    """fio lays out one file of ``size`` bytes (per job when numjobs > 1 shares it)."""
    return parse_size(params["size"])


#: slowest write rate a tier is assumed to have when fio lays out its file
LAYOUT_RATE_BPS = 10e6


def runtime_s(params: dict) -> float:
    """Upper bound of one run in seconds (for the Slurm time limit): layout, ramp, run."""
    layout = parse_size(params["size"]) * max(1, int(params["numjobs"])) / LAYOUT_RATE_BPS
    return layout + float(params["ramp_time"]) + float(params["runtime"])


def threads(params: dict) -> int:
    """CPUs of the job: one per fio job."""
    return max(1, int(params["numjobs"]))


def render_job(params: dict, filename: str, names: dict) -> str:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    mode = params["io_mode"]
    return env.get_template("fio.job.j2").render(
        ioengine=params["ioengine"],
        filename=filename,
        rw=params["rw"],
        block_size=parse_size(params["block_size"]),
        size=parse_size(params["size"]),
        io_size=parse_size(params["io_size"]) if params.get("io_size") else None,
        iodepth=params["iodepth"],
        numjobs=params["numjobs"],
        runtime=params["runtime"],
        ramp_time=params["ramp_time"],
        direct=1 if mode == "direct" else 0,
        fsync=1 if mode == "fsync" else 0,
        io_mode_text=IO_MODE_TEXT[mode],
        **names,
    )


def parse_fio_json(text: str) -> list[dict]:
    """Metrics of the first (group-reported) job of fio's ``--output-format=json``.

    Anything that is not fio's JSON as expected (truncated, garbage, wrong
    types, negative numbers) raises PointFailed: a clear error, never a number.
    """
    try:
        data = json.loads(_strip_preamble(text))
        return _job_metrics(data["jobs"][0])
    except PointFailed:
        raise
    except (ValueError, KeyError, IndexError, TypeError, AttributeError, OverflowError) as error:
        raise PointFailed(f"fio output is not the JSON expected: {error!r}") from None


def _job_metrics(job: dict) -> list[dict]:
    if job.get("error"):
        written = (job.get("write") or {}).get("io_bytes", 0)
        raise PointFailed(
            f"fio job failed: {os.strerror(int(job['error']))} (errno {job['error']}) "
            f"after writing {written} B"
        )
    metrics = []
    for direction in ("read", "write"):
        stats = job.get(direction)
        if isinstance(stats, dict) and stats.get("io_bytes"):
            metrics += _direction_metrics(direction, stats)
    sync = job.get("sync")
    if isinstance(sync, dict) and sync.get("total_ios"):
        percentiles = (sync.get("lat_ns") or {}).get("percentile") or {}
        for label, key in PERCENTILES.items():
            if key in percentiles:
                metrics.append(_metric(f"fsync_lat_{label}", percentiles[key] / 1000, "us"))
    if not metrics:
        raise PointFailed("fio moved no data")
    # of its time, how much fio spent on a CPU; 0 when its run was shorter than what the
    # kernel's CPU accounting resolves (a tick), which is no reading, so none is given
    busy = job.get("usr_cpu", 0) + job.get("sys_cpu", 0)
    if busy > 0:
        metrics.append(_metric("cpu_usage", busy, "%"))
    return metrics


def _metric(name: str, value, unit: str) -> dict:
    if isinstance(value, bool) or float(value) < 0:
        raise ValueError(f"{name} is not a non-negative number: {value!r}")
    return metric(name, value, unit)


def _direction_metrics(direction: str, stats: dict) -> list[dict]:
    found = [
        _metric(f"{direction}_bandwidth", stats["bw_bytes"] / 1e6, "MB/s"),
        _metric(f"{direction}_iops", stats["iops"], "IO/s"),
        _metric(f"{direction}_bytes", stats["io_bytes"], "B"),
        _metric(f"{direction}_clat_mean", stats["clat_ns"]["mean"] / 1000, "us"),
    ]
    percentiles = stats["clat_ns"].get("percentile") or {}
    for label, key in PERCENTILES.items():
        if key in percentiles:
            found.append(_metric(f"{direction}_clat_{label}", percentiles[key] / 1000, "us"))
    return found


def _strip_preamble(text: str) -> str:
    """fio may print notes (e.g. 'fio: ...') before the JSON object."""
    start = text.find("{")
    return text[start:] if start >= 0 else text


def refuses_o_direct(folder: Path) -> str | None:
    """Why this file system refuses O_DIRECT, or None if it accepts it."""
    probe = folder / ".o_direct_probe"
    try:
        fd = os.open(probe, os.O_CREAT | os.O_WRONLY | os.O_DIRECT, 0o600)
    except OSError as error:
        if error.errno == errno.EINVAL:
            return f"the file system refuses O_DIRECT ({os.strerror(error.errno)})"
        raise
    os.close(fd)
    probe.unlink()
    return None


def prepare_read_file(path: Path, size: int, job: Job) -> None:
    """Write the file to be read, fsync it, and drop its pages from the page cache."""
    chunk = b"\xa5" * (1 << 20)
    job.log(f"writing {size} B read file")
    with open(path, "wb") as handle:
        left = size
        while left > 0:
            left -= handle.write(chunk[: min(left, len(chunk))])
        handle.flush()
        os.fsync(handle.fileno())
        os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)


def run(job: Job) -> list[dict]:
    params, spec = job.params, job.spec
    if shutil.which("fio") is None:
        raise PointSkipped("fio is not installed")
    folder = job.folder.path
    size = parse_size(params["size"])
    job.folder.ensure_space(size, job.max_bytes)
    if params["io_mode"] == "direct":
        reason = refuses_o_direct(folder)
        if reason:
            raise PointNotApplicable(f"direct I/O on {spec['tier']}: {reason}")
    data_file = folder / "fio-tempfile.dat"
    if params["rw"] in READS:
        prepare_read_file(data_file, size, job)
    names = {"experiment": spec["experiment"], "point": spec["point"], "tier": spec["tier"]}
    job_text = render_job(params, str(data_file), names)
    job.extra["fio_job"] = job_text
    job_file = folder / "job.fio"
    job_file.write_text(job_text)
    output = folder / "fio.json"
    command = [
        "fio",
        "--output-format=json",
        f"--output={output}",
        "--eta=always",
        "--eta-newline=2",
        job_file,
    ]
    job.log("running " + " ".join(map(str, command)))
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    job.log(done.stdout.strip() or "(fio printed nothing)")
    text = output.read_text() if output.exists() else ""
    metrics = parse_fio_json(text)  # raises with fio's own error when the job failed
    if done.returncode != 0:
        raise PointFailed(f"fio exited with {done.returncode}: {done.stdout.strip()[-300:]}")
    return metrics


#: fio's modes that write (rewrites land on the same pages: the dirty data is at most the file)
WRITES = ("write", "randwrite", "rw", "randrw")


def page_cache(params: dict, limits: dict | None) -> dict:
    """Direct and fsync'd I/O wait for the device; a buffered write is at most the file; a
    buffered read reaches the device on its first pass only (the pages were dropped first)."""
    mode = str(params.get("io_mode", ""))
    if mode == "direct":
        return pagecache.result(
            pagecache.DEVICE, "fio direct I/O (O_DIRECT) bypasses the page cache"
        )
    if mode == "fsync":
        return pagecache.result(
            pagecache.DEVICE, "fio fsync after every write: each write waits for the device"
        )
    if mode != "buffered":
        return pagecache.result(
            pagecache.UNKNOWN, f"fio io_mode {mode or '(none)'} is not buffered/direct/fsync"
        )
    size = parse_size(params["size"])
    if params.get("rw") in WRITES:
        return pagecache.buffered_write("fio buffered write to a file", size, limits)
    passes = parse_size(params["io_size"]) / size if params.get("io_size") else 1.0
    if passes <= 1:
        return pagecache.result(
            pagecache.DEVICE,
            "fio buffered read of a file whose pages were dropped first, read once",
        )
    if limits is None:
        return pagecache.result(
            pagecache.UNKNOWN, "fio buffered read of a file read more than once; RAM not read"
        )
    text = f"fio buffered read of a {format_size(size)} file read {passes:g} times"
    if size <= int(limits["ram"]):
        return pagecache.result(
            pagecache.IN_MEMORY, f"{text}: passes after the first may come from the page cache"
        )
    return pagecache.result(
        pagecache.DEVICE, f"{text}, larger than RAM: every pass reaches the device"
    )


WORKLOAD = Workload(
    name="fio",
    summary="fio: random and sequential I/O per block size, buffered, direct or fsync'd",
    headline=("write_bandwidth", "read_bandwidth"),
    run=run,
    family="fio",
    env="fio",
    tools=(Tool("fio"),),
    check_params=check_params,
    planned_bytes=planned_bytes,
    runtime_s=runtime_s,
    threads=threads,
    page_cache=page_cache,
)
