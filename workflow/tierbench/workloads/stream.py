"""STREAM: the memory bandwidth a RAM-backed tier can at best reach.

``csrc/stream.c`` (STREAM 5.10's kernels with the array size given at run
time) is compiled with ``gcc -O3 -fopenmp`` into a scratch folder of the job
(never into the repository) and run with ``OMP_NUM_THREADS`` from the config,
at most the CPUs the job may use (its affinity: taskset, a cgroup cpuset, a
Slurm allocation): more threads than CPUs would time the scheduler, not memory.
Each array holds ``llc_factor`` (4, STREAM's rule) times the sum of the
machine's last-level caches, so the kernels stream from memory, not cache,
whatever that cache is (tens of MiB on a laptop, over 1 GiB on some servers),
and no more than the run needs (:func:`plan_arrays`): two caps lower it, and
the record says which. The memory the job may use (available memory, its
cgroup's limit, its Slurm allocation), read on the node that runs the point,
must hold the three arrays; and the run, estimated from the bytes it moves at
a conservative bandwidth, takes at most ``RUN_BUDGET_S``. Neither cap goes
below three arrays that together outgrow the cache (the point fails there,
with the numbers, instead of reporting a cache bandwidth as memory
bandwidth); an ``array_size`` given is run as given.

STREAM measures memory, not a tier: experiments use the ``void`` tier, so a
point runs once per host and writes nothing to any tier.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

from ..errors import PointFailed, PointSkipped
from ..job import Job
from ..packages import install_hint
from ..probe import usable_cores
from ..records import metric
from ..units import format_size, parse_size
from . import Tool, Workload

SOURCE = Path(__file__).resolve().parent / "csrc" / "stream.c"
ELEMENT_BYTES = 8
ARRAYS = 3
#: the arrays may take this share of the memory the job may use (the rest: the
#: process, the page cache the job is charged for, the kernel's own)
MEMORY_SHARE = 0.8
#: kernel -> arrays each iteration moves, as STREAM counts bytes
KERNEL_ARRAYS = {"copy": 2, "scale": 2, "add": 3, "triad": 3}
CFLAGS = ["-O3", "-fopenmp"]
#: a run's estimated seconds are at most this (the compiler's half second on top):
#: STREAM's best of ntimes iterations settles within seconds, not minutes
RUN_BUDGET_S = 4.0
#: bandwidth the estimate assumes per thread, and at most in all (B/s): below what
#: an iteration averaged with two threads on a shared 2-core EPYC VM (about 9 GB/s)
#: and on a 2-core Xeon VM (about 12 GB/s: 19 s a run of 4 x 480 MiB arrays), so
#: a capped run stays within the budget there
CONSERVATIVE_RATE = 4e9
CONSERVATIVE_RATE_MAX = 16e9
#: array passes of a run beyond the kernels' 10 per iteration: first touch of the
#: three arrays (written, and a pass's worth of page faults each), STREAM's
#: timing pass (a = 2a) and its validation (reads the three arrays)
EXTRA_PASSES = 3 + 3 + 2 + 3
SYS_CPU = "/sys/devices/system/cpu"
PROC_MEMINFO = "/proc/meminfo"
PROC_CGROUP = "/proc/self/cgroup"
CGROUP_ROOT = "/sys/fs/cgroup"
_ROW = re.compile(
    r"^(Copy|Scale|Add|Triad):\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s*$", re.M
)


def kernel_bytes(kernel: str, elements: int) -> int:
    """Bytes one iteration of a kernel moves, as STREAM counts them (no write-allocate)."""
    return KERNEL_ARRAYS[kernel] * ELEMENT_BYTES * elements


def threads(params: dict) -> int:
    return int(params.get("threads", 1))


def usable_threads(params: dict) -> int:
    """The point's threads, at most the CPUs this process may run on."""
    return min(threads(params), usable_cores())


def planned_bytes(params: dict) -> int:
    """STREAM writes nothing to a tier; its arrays live in memory."""
    return 0


def check_params(params: dict) -> None:
    if params.get("llc_factor", 4) < 1:
        raise ValueError("llc_factor must be at least 1")
    if int(params.get("ntimes", 10)) < 2:
        raise ValueError("ntimes must be at least 2 (the first iteration is not counted)")


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def last_level_cache(sys_cpu: str | os.PathLike | None = None) -> tuple[int, int]:
    """(bytes of one last-level cache, bytes of all of them) read from sysfs.

    The last level is the highest ``level`` among data/unified caches of
    cpu0; how many distinct instances exist is counted from the
    ``shared_cpu_list`` of that level on every CPU. Returns (0, 0) when sysfs
    says nothing (some containers).
    """
    root = Path(sys_cpu or SYS_CPU)
    per_cpu: dict[str, tuple[int, int, str]] = {}
    for cpu in sorted(root.glob("cpu[0-9]*")):
        best = None
        for index in sorted(cpu.glob("cache/index[0-9]*")):
            if _read(index / "type") not in ("Data", "Unified"):
                continue
            level, size = _read(index / "level"), _read(index / "size")
            if not level or not size:
                continue
            entry = (int(level), parse_size(size), _read(index / "shared_cpu_list") or cpu.name)
            if best is None or entry[0] > best[0]:
                best = entry
        if best:
            per_cpu[cpu.name] = best
    if "cpu0" not in per_cpu:
        return 0, 0
    level, one, _ = per_cpu["cpu0"]
    instances = {(lvl, shared): size for lvl, size, shared in per_cpu.values() if lvl == level}
    return one, sum(instances.values())


def array_elements(params: dict, llc_total: int) -> int:
    """Elements per array STREAM's rule asks for: ``array_size`` if given, else
    llc_factor x all LLCs (before :func:`plan_arrays` caps them).

    Raises ValueError when an explicit size is below the rule.
    """
    factor = float(params.get("llc_factor", 4))
    needed = int(-(-factor * llc_total // ELEMENT_BYTES))  # ceil
    explicit = params.get("array_size")
    elements = int(explicit) if explicit else max(needed, 1)
    if elements < needed:
        raise ValueError(
            f"array_size {elements} ({format_size(elements * ELEMENT_BYTES)} per array) is below "
            f"{factor:g} x the {format_size(llc_total)} of last-level cache: "
            "the kernels would run from cache"
        )
    return elements


def conservative_rate(running_threads: int) -> float:
    """Bytes per second the time estimate assumes for ``running_threads`` threads."""
    return min(CONSERVATIVE_RATE * max(running_threads, 1), CONSERVATIVE_RATE_MAX)


def run_passes(ntimes: int) -> int:
    """Array passes one run makes: 10 per iteration (copy 2, scale 2, add 3, triad 3)."""
    return sum(KERNEL_ARRAYS.values()) * ntimes + EXTRA_PASSES


def estimated_seconds(elements: int, ntimes: int, running_threads: int) -> float:
    """Seconds a run of ``elements`` per array takes at the conservative bandwidth."""
    moved = run_passes(ntimes) * ELEMENT_BYTES * elements
    return moved / conservative_rate(running_threads)


def floor_elements(llc_total: int) -> int:
    """The fewest elements per array a cap may leave: three arrays that together
    hold more than all last-level caches (below that the kernels run from cache)."""
    return llc_total // (ARRAYS * ELEMENT_BYTES) + 1


def plan_arrays(
    params: dict, llc_total: int, running_threads: int, room: tuple[int, str] | None
) -> tuple[int, str | None]:
    """(elements per array, why they were capped or None): STREAM's rule, then the caps.

    ``room`` is :func:`memory_room` of the node (None where the workflow is
    parsed and the node is not known). The rule's size is lowered to what the
    run may take (``RUN_BUDGET_S`` at :func:`conservative_rate`), then to what
    ``room`` holds; neither goes below :func:`floor_elements`. An explicit
    ``array_size`` is never capped. Raises ValueError for an explicit size
    below the rule, PointFailed when ``room`` cannot hold the floor.
    """
    wanted = array_elements(params, llc_total)
    if params.get("array_size"):
        if room is not None:
            check_room(wanted, sizing(params, llc_total), room)
        return wanted, None
    ntimes = int(params.get("ntimes", 10))
    floor = floor_elements(llc_total)
    elements, reasons = wanted, []
    budget = int(
        RUN_BUDGET_S * conservative_rate(running_threads) / (run_passes(ntimes) * ELEMENT_BYTES)
    )
    if elements > max(budget, floor):
        elements = max(budget, floor)
        reasons.append(
            f"{format_size(wanted * ELEMENT_BYTES)} per array would take about "
            f"{estimated_seconds(wanted, ntimes, running_threads):.0f} s a run at "
            f"{conservative_rate(running_threads) / 1e9:g} GB/s; capped to about "
            f"{estimated_seconds(elements, ntimes, running_threads):.1f} s"
        )
    if room is not None:
        available, source = room
        fits = int(MEMORY_SHARE * available // (ARRAYS * ELEMENT_BYTES))
        if elements > fits:
            if fits < floor:
                raise PointFailed(
                    f"STREAM needs {ARRAYS} arrays that together outgrow the "
                    f"{format_size(llc_total)} of last-level cache, at least "
                    f"{format_size(floor * ELEMENT_BYTES)} each, but {source} is "
                    f"{format_size(available)}: run it where the job may use at least "
                    f"{format_size(int(ARRAYS * ELEMENT_BYTES * floor / MEMORY_SHARE))}"
                )
            elements = fits
            reasons.append(
                f"{source} is {format_size(available)}: three arrays may take "
                f"{MEMORY_SHARE:.0%} of it"
            )
    if not reasons:
        return elements, None
    share = elements * ELEMENT_BYTES / llc_total if llc_total else 0
    capped = (
        f"arrays capped at {format_size(elements * ELEMENT_BYTES)}, {share:.2g} x the "
        f"{format_size(llc_total)} of last-level cache instead of "
        f"{float(params.get('llc_factor', 4)):g} x (STREAM's rule): " + "; ".join(reasons)
    )
    if share < 1:
        capped += "; each array is smaller than the cache, so part of a kernel may run from it"
    return elements, capped


def _cgroup_room(proc_cgroup: str | os.PathLike, cgroup_root: str | os.PathLike) -> int | None:
    """Bytes this process's memory cgroup still allows (v2 memory.max, v1 limit_in_bytes)."""
    text = _read(Path(proc_cgroup))
    if not text:
        return None
    root = Path(cgroup_root)
    for line in text.splitlines():
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # v2: memory.max, memory.current
            folder = root / path.lstrip("/")
            limit, used = _read(folder / "memory.max"), _read(folder / "memory.current")
        elif "memory" in controllers.split(","):
            folder = root / "memory" / path.lstrip("/")
            limit = _read(folder / "memory.limit_in_bytes")
            used = _read(folder / "memory.usage_in_bytes")
        else:
            continue
        if limit and limit != "max" and used and int(limit) < 2**60:
            return max(0, int(limit) - int(used))
    return None


def _slurm_allocation(env: dict) -> int | None:
    """Bytes of the Slurm job's memory on this node (--mem or --mem-per-cpu), if any."""
    per_node = env.get("SLURM_MEM_PER_NODE")
    if per_node:
        return int(per_node) * 1024**2
    per_cpu, cpus = env.get("SLURM_MEM_PER_CPU"), env.get("SLURM_CPUS_ON_NODE")
    if per_cpu and cpus:
        return int(per_cpu) * int(cpus) * 1024**2
    return None


def memory_room(
    meminfo_path: str | os.PathLike | None = None,
    proc_cgroup: str | os.PathLike | None = None,
    cgroup_root: str | os.PathLike | None = None,
    env: dict | None = None,
) -> tuple[int, str]:
    """(bytes, what sets it): the memory this job may use for STREAM's arrays.

    The smallest of the node's available memory, what its cgroup still allows
    and its Slurm allocation: a job that asks for more than that is killed or
    swaps, and neither measures memory bandwidth.
    """
    limits = {"available memory": meminfo(meminfo_path or PROC_MEMINFO).get("MemAvailable", 0)}
    cgroup = _cgroup_room(proc_cgroup or PROC_CGROUP, cgroup_root or CGROUP_ROOT)
    if cgroup is not None:
        limits["the job's cgroup limit"] = cgroup
    slurm = _slurm_allocation(os.environ if env is None else env)
    if slurm is not None:
        limits["the Slurm job's memory"] = slurm
    source = min(limits, key=limits.get)
    return limits[source], source


def sizing(params: dict, llc_total: int) -> str:
    """Why the arrays have the size they have, for messages."""
    if params.get("array_size"):
        return f"array_size {int(params['array_size'])}"
    factor = float(params.get("llc_factor", 4))
    return f"{factor:g} x the {format_size(llc_total)} of last-level cache"


def check_room(elements: int, why: str, room: tuple[int, str]) -> None:
    """Raise PointFailed, in one line, when the node cannot hold STREAM's three arrays."""
    needed = ARRAYS * ELEMENT_BYTES * elements
    available, source = room
    if needed <= MEMORY_SHARE * available:
        return
    raise PointFailed(
        f"STREAM needs {ARRAYS} arrays of {format_size(elements * ELEMENT_BYTES)} ({why}), "
        f"{format_size(needed)} in all, but {source} is {format_size(available)}: "
        f"run it where the job may use at least {format_size(int(needed / MEMORY_SHARE))}"
    )


def mem_mb(params: dict) -> float:
    """Memory a job asks for beyond the base: the three arrays, sized by this host's caches
    and capped by the run's time (the node's memory is not known here).

    Estimated where the workflow is parsed; the node that runs the point checks
    its own caches and memory again (:func:`check_room`).
    """
    try:
        elements, _ = plan_arrays(params, last_level_cache()[1], usable_threads(params), None)
    except ValueError:
        return 0
    return ARRAYS * ELEMENT_BYTES * elements / MEMORY_SHARE / 1e6


def parse_stream(text: str) -> dict:
    """Rates and times of STREAM's summary table, threads and the validation verdict."""
    kernels = {}
    for name, rate, avg, low, high in _ROW.findall(text):
        kernels[name.lower()] = {
            "rate": float(rate),
            "avg": float(avg),
            "min": float(low),
            "max": float(high),
        }
    if set(kernels) != set(KERNEL_ARRAYS):
        raise PointFailed(
            "STREAM output lacks the table of the four kernels: " + text.strip()[-300:]
        )
    size = re.search(r"Array size = (\d+)", text)
    counted = re.search(r"Number of Threads counted = (\d+)", text)
    return {
        "kernels": kernels,
        "elements": int(size.group(1)) if size else None,
        "threads": int(counted.group(1)) if counted else None,
        "validates": "Solution Validates" in text,
        "validation": "\n".join(
            line for line in text.splitlines() if "Validat" in line or "Expected Value" in line
        ),
    }


def stream_metrics(parsed: dict) -> list[dict]:
    """Best rate per kernel (MB/s = 1e6 B/s) and the times behind it."""
    if not parsed["validates"]:
        raise PointFailed(f"STREAM solution does not validate: {parsed['validation']}")
    found = []
    elements = parsed["elements"]
    for name in KERNEL_ARRAYS:
        kernel = parsed["kernels"][name]
        found.append(metric(f"{name}_bandwidth", kernel["rate"], "MB/s"))
        found.append(metric(f"{name}_min_time", kernel["min"], "s"))
        if elements:
            # recomputed from STREAM's byte count: the same number within print rounding
            found.append(metric(f"{name}_bytes", kernel_bytes(name, elements), "B"))
    if elements:
        found.append(metric("array_bytes", elements * ELEMENT_BYTES, "B"))
    if parsed["threads"]:
        found.append(metric("threads", parsed["threads"], "threads"))
    return found


def meminfo(path: str | os.PathLike = PROC_MEMINFO) -> dict[str, int]:
    values = {}
    for line in Path(path).read_text().splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if parts:
            values[name] = int(parts[0]) * (1024 if parts[1:] == ["kB"] else 1)
    return values


def compile_stream(scratch: Path, job: Job, cflags: list[str]) -> Path:
    binary = scratch / "stream"
    command = ["gcc", *cflags, str(SOURCE), "-o", str(binary), "-lm"]
    job.log("compiling: " + " ".join(command))
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise PointFailed(f"gcc could not build STREAM: {done.stderr.strip()[-400:]}")
    job.extra["compile_command"] = " ".join(command)
    return binary


def run(job: Job) -> list[dict]:
    params = job.params
    if shutil.which("gcc") is None:
        raise PointSkipped(f"gcc is not installed (install it with: {install_hint('gcc')})")
    llc_one, llc_total = last_level_cache()
    if not llc_total and not params.get("array_size"):
        raise PointFailed("cannot read the last-level cache size from " + SYS_CPU)
    running = usable_threads(params)
    try:
        elements, capped = plan_arrays(params, llc_total, running, memory_room())
    except ValueError as error:
        raise PointFailed(str(error)) from None
    job.extra.update(llc_bytes=llc_one, llc_total_bytes=llc_total, elements=elements)
    job.extra["estimated_s"] = round(
        estimated_seconds(elements, int(params.get("ntimes", 10)), running), 2
    )
    if capped:
        job.extra["array_capped"] = capped
        job.extra["page_cache_note"] = capped
        job.log(f"STREAM's {capped}")
    cflags = CFLAGS + shlex.split(params.get("cflags", ""))
    if running < threads(params):
        job.extra["threads_capped"] = (
            f"{threads(params)} threads asked, {running} CPU(s) usable by this job"
        )
        job.log(f"STREAM runs {running} thread(s): {job.extra['threads_capped']}")
    env = {**os.environ, "OMP_NUM_THREADS": str(running)}
    with tempfile.TemporaryDirectory(prefix="tierbench-stream-") as scratch:
        binary = compile_stream(Path(scratch), job, cflags)
        command = [str(binary), str(elements), str(int(params.get("ntimes", 10)))]
        job.log(
            f"running STREAM: {elements} elements ({format_size(elements * ELEMENT_BYTES)}"
            f" per array, last-level cache {format_size(llc_total)}), "
            f"OMP_NUM_THREADS={env['OMP_NUM_THREADS']}"
        )
        done = subprocess.run(command, capture_output=True, text=True, env=env)
    job.log(done.stdout.strip())
    job.extra["stream_output"] = done.stdout
    parsed = parse_stream(done.stdout)
    if done.returncode not in (0, 4):  # 4: ran, but the solution did not validate
        raise PointFailed(f"STREAM exited with {done.returncode}: {done.stderr.strip()[-300:]}")
    metrics = stream_metrics(parsed)
    metrics.append(metric("llc_total_bytes", llc_total, "B"))
    return metrics


WORKLOAD = Workload(
    name="stream",
    summary="STREAM: the memory bandwidth a RAM-backed tier can at best reach",
    run=run,
    family="sequential",
    env="stream",
    tools=(Tool("gcc"),),
    check_params=check_params,
    planned_bytes=planned_bytes,
    threads=threads,
    mem_mb=mem_mb,
    writes_to_tier=False,
)
