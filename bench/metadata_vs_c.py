"""Item 10: does the metadata workload time each operation as a plain C loop does?

The workload's job (its C loop built at run time, run through the job
runner in a run folder, its counts checked) against ``bench/metadata_loop.c``,
compiled here with gcc: the same calls on the same number of empty files and
folders in one folder, at the same depth below the tier, on /dev/shm and on
the default study's disk folder (``results/scratch``), without fsync and,
on the disk, with. Goal: every phase's rate at least 0.9 of the C loop's,
median of the per-round ratios; the detail says whether its 95 % interval
lies within 0.9-1.1 (a loop faster than C may skip a call), and the ratio
of the best rounds: another process on the cores only ever slows a round.
A Python loop of the same calls runs beside them, without a goal: it is why
the workload's loop is C.
"""

from __future__ import annotations

import math
import os
import statistics
import subprocess
import time
from pathlib import Path

from harness import REPO, TIER, job_spec, log, rotated, row, within
from tierbench.rundir import RunFolder
from tierbench.runner import run_job
from tierbench.workloads import metadata
from tierbench.workloads.dd import syncfs

DISK = REPO / "results" / "scratch"
#: (tier label, path, items, fsync) per case; rounds of each
SIZES = {
    "full": {
        "cases": [
            ("shm", Path(TIER), 20000, False),
            ("disk", DISK, 3000, False),
            ("disk", DISK, 500, True),
        ],
        "rounds": 20,
    },
    "tiny": {
        "cases": [
            ("shm", Path(TIER), 50, False),
            ("disk", DISK, 20, False),
            ("disk", DISK, 10, True),
        ],
        "rounds": 2,
    },
}
INSTRUMENTS = ("workload", "c", "python")


def compile_loop(folder: Path) -> Path:
    binary = folder / "metadata_loop"
    source = REPO / "bench" / "metadata_loop.c"
    subprocess.run(["gcc", "-O2", "-o", str(binary), str(source)], check=True, capture_output=True)
    return binary


def parse(text: str) -> dict[str, float]:
    """Operations per second of each phase, from lines ``<phase> <ops> <seconds>``."""
    rates = {}
    for line in text.splitlines():
        name, ops, seconds = line.split()
        rates[name] = int(ops) / float(seconds)
    return rates


def workload_rates(tier: Path, items: int, fsync: bool) -> dict[str, float]:
    params = {
        "items": items, "layout": "flat", "branching": 1, "depth": 1, "file_size": 0,
        "fsync": fsync, "min_time": 0,
    }  # fmt: skip
    tier_class = "shm" if tier == Path(TIER) else "disk"
    record = run_job(job_spec("metadata", "metadata_vs_c", params, tier, tier_class), metadata.run)
    found = {m["metric"]: m["value"] for m in record["metrics"] if m["status"] == "ok"}
    if not found:
        raise RuntimeError(f"the metadata workload failed: {record['metrics']}")
    return {phase: found[f"{phase}_rate"] for phase in metadata.MDTEST_PHASES}


def c_rates(binary: Path, tier: Path, items: int, fsync: bool) -> dict[str, float]:
    # the workload works in <run folder>/metadata/: the same depth below the tier
    with RunFolder(tier, "metadata-bench-c") as folder:
        root = folder.path / "metadata"
        root.mkdir()
        argv = [str(binary), str(root), str(items), "1" if fsync else "0"]
        syncfs(folder.path)  # as the workload does: the run before it is not in its time
        done = subprocess.run(argv, check=True, capture_output=True, text=True)
        if any(root.iterdir()):
            raise RuntimeError(f"the C loop left files in {root}")
    return parse(done.stdout)


def python_rates(tier: Path, items: int, fsync: bool) -> dict[str, float]:
    """The same calls from Python's os module, each phase timed with perf_counter."""
    with RunFolder(tier, "metadata-bench-py") as folder:
        root = folder.path / "metadata"
        root.mkdir()
        d = [f"{root}/d{i}" for i in range(items)]
        f = [f"{root}/f{i}" for i in range(items)]
        r = [f"{root}/r{i}" for i in range(items)]
        create = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
        syncfs(folder.path)

        def made(path):
            fd = os.open(path, create, 0o644)
            if fsync:
                os.fsync(fd)
            os.close(fd)

        def opened(path):
            os.close(os.open(path, os.O_RDONLY | os.O_CLOEXEC))

        phases = {
            "dir_create": (os.mkdir, d),
            "dir_stat": (os.stat, d),
            "dir_remove": (os.rmdir, d),
            "file_create": (made, f),
            "file_stat": (os.stat, f),
            "file_read": (opened, f),
            "file_rename": (None, f),
            "file_remove": (os.unlink, r),
        }
        rates = {}
        for name, (call, paths) in phases.items():
            start = time.perf_counter()
            if call is None:
                for old, new in zip(f, r, strict=True):
                    os.rename(old, new)
            else:
                for path in paths:
                    call(path)
            rates[name] = items / (time.perf_counter() - start)
    return rates


def one_round(order, binary, tier, items, fsync) -> dict[str, dict[str, float]]:
    runs = {
        "workload": lambda: workload_rates(tier, items, fsync),
        "c": lambda: c_rates(binary, tier, items, fsync),
        "python": lambda: python_rates(tier, items, fsync),
    }
    return {name: runs[name]() for name in order}


def measure(mode: str, scratch: Path, goal) -> list[dict]:
    size = SIZES[mode]
    DISK.mkdir(parents=True, exist_ok=True)
    binary = compile_loop(scratch)
    rows = []
    for label, tier, items, fsync in size["cases"]:
        where = f"{label}, {items} items" + (", fsync" if fsync else "")
        one_round(INSTRUMENTS, binary, tier, items, fsync)  # warm-up, not counted
        rates = {name: {phase: [] for phase in metadata.MDTEST_PHASES} for name in INSTRUMENTS}
        for round_ in range(size["rounds"]):
            found = one_round(rotated(INSTRUMENTS, round_), binary, tier, items, fsync)
            for name in INSTRUMENTS:
                for phase in metadata.MDTEST_PHASES:
                    rates[name][phase].append(found[name][phase])
            creates = {name: found[name]["file_create"] for name in INSTRUMENTS}
            log(f"10 {where} round {round_ + 1}: creates a second {creates}")
        for phase in metadata.MDTEST_PHASES:
            own, ref = rates["workload"][phase], rates["c"][phase]
            ratios = [a / b for a, b in zip(own, ref, strict=True)]
            rows.append(
                row(
                    10,
                    f"metadata_{label}{'_fsync' if fsync else ''}_{phase}",
                    f"metadata / C rate, {phase}, {where}",
                    "ratio",
                    ratios,
                    goal,
                    f"workload {statistics.median(own):,.0f}/s, C {statistics.median(ref):,.0f}/s "
                    f"(medians); {within(ratios, 0.9, 1.1)}; best rounds {max(own):,.0f}/s and "
                    f"{max(ref):,.0f}/s, {max(own) / max(ref):.3f}",
                    workload_per_s=own,
                    c_per_s=ref,
                )
            )
        python = [
            math.exp(
                statistics.fmean(
                    math.log(rates["python"][p][k] / rates["c"][p][k])
                    for p in metadata.MDTEST_PHASES
                )
            )
            for k in range(size["rounds"])
        ]
        slowest = min(
            metadata.MDTEST_PHASES,
            key=lambda p: statistics.median(
                a / b for a, b in zip(rates["python"][p], rates["c"][p], strict=True)
            ),
        )
        slow = statistics.median(
            a / b for a, b in zip(rates["python"][slowest], rates["c"][slowest], strict=True)
        )
        rows.append(
            row(
                10,
                f"metadata_{label}{'_fsync' if fsync else ''}_python",
                f"a Python loop / C rate, geometric mean of the phases, {where}",
                "ratio",
                python,
                None,
                f"no goal: why the workload's loop is C; its slowest phase {slowest} {slow:.3f}",
                python_per_s={p: rates["python"][p] for p in metadata.MDTEST_PHASES},
            )
        )
    return rows
