"""Item 2: how fast does cfd_proxy make its files and folders, next to plain C?

The proxy's write phase with 1-cell fields (so nearly all of it is creating
files and folders) against ``bench/creates.c``, compiled here with gcc: the
same mkdirs and files of the same sizes at the same depth below the tier,
timed the same way (each write counts with its slowest process). Goal: the
proxy's rate at least 0.8 of the C program's, median of the per-round ratios.
"""

from __future__ import annotations

import statistics
import subprocess
from pathlib import Path

from cfd_vs_fio import run_proxy_writes
from harness import REPO, TIER, log, row
from tierbench.rundir import RunFolder
from tierbench.workloads.cfd import foam

SIZES = {
    "full": {"ranks": 2, "writes": 2000, "rounds": 15},
    "tiny": {"ranks": 2, "writes": 50, "rounds": 2},
}


def compile_creates(folder: Path) -> Path:
    binary = folder / "creates"
    subprocess.run(
        ["gcc", "-O2", "-pthread", "-o", str(binary), str(REPO / "bench" / "creates.c")],
        check=True,
        capture_output=True,
        text=True,
    )
    return binary


def proxy_creates(ranks: int, writes: int) -> tuple[float, int]:
    """Files and folders per second of the proxy's write phase with 1-cell fields."""
    record = run_proxy_writes("creates", TIER, ranks, cells=1, writes=writes, purge=0)
    metrics = {m["metric"]: m["value"] for m in record["metrics"]}
    if "write_phase_time" not in metrics:
        raise RuntimeError(f"proxy failed: {record['metrics']}")
    made = int(metrics["files_created"] + metrics["dirs_created"])
    return made / (metrics["write_phase_time"] * writes), made


def c_creates(binary: Path, ranks: int, writes: int, sizes: list[str]) -> tuple[float, int]:
    """Files and folders per second of the C program, at the proxy's depth below the tier."""
    # the proxy writes <run folder>/member0/processor<rank>/...; path lookups cost per level
    with RunFolder(TIER, "creates-bench-rep1") as folder:
        case = folder.path / "member0"
        case.mkdir()
        done = subprocess.run(
            [str(binary), str(case), str(ranks), str(writes), *sizes],
            check=True,
            capture_output=True,
            text=True,
        )
    seconds, files, dirs = done.stdout.split()
    return (int(files) + int(dirs)) / float(seconds), int(files) + int(dirs)


def proxy_file_sizes(ranks: int) -> list[str]:
    """The proxy's files of one write with 1-cell fields, as NAME=SIZE (rank 0's, write time 1)."""
    sizes = {
        name: foam.field_file_bytes(name, 1, "binary", "1", rank=0, ranks=ranks)
        for name in foam.FIELDS
    }
    sizes |= {path: len(text) for path, text in foam.uniform_texts("1", 1, "binary").items()}
    return [f"{name}={size}" for name, size in sizes.items()]


def measure(mode: str, scratch: Path, goal) -> list[dict]:
    size = SIZES[mode]
    ranks, writes = size["ranks"], size["writes"]
    binary = compile_creates(scratch)
    sizes = proxy_file_sizes(ranks)
    proxy, ref, ratios = [], [], []
    for round_ in range(size["rounds"]):
        rate, made = proxy_creates(ranks, writes)
        reference, made_c = c_creates(binary, ranks, writes, sizes)
        if made != made_c:
            raise RuntimeError(f"proxy made {made} files and folders, the C program {made_c}")
        proxy.append(rate)
        ref.append(reference)
        ratios.append(rate / reference)
        log(f"2 round {round_ + 1}: proxy {rate:.0f}/s, C {reference:.0f}/s")
    return [
        row(
            2,
            "cfd_creates",
            f"CFD proxy / C creation rate of files and folders, {TIER}, 1-cell fields",
            "ratio",
            ratios,
            goal,
            f"proxy {statistics.median(proxy):.0f}/s, C {statistics.median(ref):.0f}/s (medians); "
            f"{ranks} ranks x {writes} writes x ({len(sizes)} files of ~1 KB + 3 folders)"
            f" = {made} per run",
            proxy_per_s=proxy,
            c_per_s=ref,
            file_sizes=sizes,
        )
    ]
