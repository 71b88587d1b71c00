"""Item 1: does cfd_proxy measure the tier, or its own overhead?

Write-phase bandwidth of the proxy (uncollated OpenFOAM output, no compute)
against fio sequential writes of the same bytes with the same block size, on
the same tier, interleaved in one run; the ratio is taken per round, then
its median. Goal: at least 0.9, at document 001's 40 MB and at 10 MB per
rank per write.

Both sides write new files into fresh pages: the proxy keeps every time
folder (``purge 0``; fio deletes nothing either), fio lays out its file with
``fallocate=none`` (so page allocation is timed, as the proxy's is) through
``psync`` writes. The block size is the proxy's largest write call (the
payload of ``U``, 24 B per cell). The proxy's write phase also makes 3
folders and 8 files per rank per write, which is the layout's cost, not the
proxy's (item 2 measures that part). A warm-up round of both is not counted,
the order alternates, and the tier's memory is primed before every run.

Run alone, on another tier or at other sizes (the same loop as the item)::

    .venv/bin/python bench/cfd_vs_fio.py [--tier /dev/shm] [--ranks 1] [--cells 500000]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys

from harness import TIER, at_least, job_spec, log, rotated, row, skipped_row
from tierbench.rundir import RunFolder
from tierbench.runner import run_job
from tierbench.units import format_size
from tierbench.workloads.cfd import cfd_proxy, foam

SIZES = {
    # 40 MB (document 001) and 10 MB per rank per write
    "full": {"cells": [500_000, 125_000], "writes": 20, "rounds": 15},
    "tiny": {"cells": [20_000], "writes": 3, "rounds": 2},
}
PRIME_CHUNK = 64 * 2**20


def run_proxy_writes(
    experiment: str, tier: str, ranks: int, cells: int, writes: int, purge: int
) -> dict:
    """One cfd_proxy job that only writes (no compute, a write every step); its raw record."""
    params = {
        "ranks": ranks, "ensemble": 1, "steps": writes, "write_interval": 1,
        "cells_per_rank": cells, "compute_per_cell_step": 0, "warmup_steps": 0,
        "purge_write": purge,
    }  # fmt: skip
    spec = job_spec("cfd_proxy", experiment, params, tier, launcher="mpiexec")
    return run_job(spec, cfd_proxy.run)


def proxy_bandwidth(
    tier: str, ranks: int, cells: int, writes: int, purge: int
) -> tuple[float, int]:
    """MB/s of the proxy's write phase (all ranks) and the bytes one write puts down."""
    record = run_proxy_writes("cfd_vs_fio", tier, ranks, cells, writes, purge)
    metrics = {m["metric"]: m for m in record["metrics"]}
    if "write_phase_bandwidth" not in metrics:
        raise RuntimeError(f"proxy failed: {record['metrics']}")
    return metrics["write_phase_bandwidth"]["value"], int(metrics["bytes_per_write"]["value"])


def fio_bandwidth(tier: str, ranks: int, size_per_job: int, block: int) -> float:
    """MB/s of fio sequential writes, ``ranks`` jobs, reported as one group."""
    with RunFolder(tier, "bench-fio") as folder:
        command = [
            "fio", "--name=seq", "--rw=write", f"--bs={block}", f"--size={size_per_job}",
            f"--numjobs={ranks}", "--ioengine=psync", "--fallocate=none", "--group_reporting",
            f"--directory={folder.path}", "--output-format=json",
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, check=True)
    text = done.stdout[done.stdout.find("{") :]
    return json.loads(text)["jobs"][0]["write"]["bw_bytes"] / 1e6


def prime_memory(tier: str, nbytes: int) -> None:
    """Write ``nbytes`` of zeros to a file on the tier, then delete it.

    On a VM a run that writes into memory its host has not backed yet
    slows 4-6x mid-run (the kernel's copy into the new tmpfs pages), and
    which run meets such memory is luck. Priming before every measured run
    gives both instruments memory that was in use a moment ago.
    """
    zeros = bytes(PRIME_CHUNK)
    with RunFolder(tier, "bench-prime") as folder:
        with open(folder.path / "prime", "wb", buffering=0) as handle:
            for start in range(0, nbytes, PRIME_CHUNK):
                handle.write(zeros[: min(PRIME_CHUNK, nbytes - start)])


def primed_bytes(ranks: int, cells: int, writes: int) -> int:
    """What a run's priming puts on the tier at once: twice what the run writes, and room
    for the proxy's own memory; the most the item holds there."""
    return 2 * ranks * cells * 80 * writes + 2**28


def compare(tier: str, ranks: int, cells: int, writes: int, rounds: int, purge: int = 0) -> dict:
    """Proxy and fio, ``rounds`` interleaved rounds after a warm-up round of both."""
    block = foam.payload_bytes("U", cells, "binary")
    proxy, fio, ratios = [], [], []
    # round 0 is a warm-up of both, not counted: the first run of a size was
    # a quarter as fast, whichever instrument made it
    for round_ in range(rounds + 1):
        results = {}
        # the proxy goes first in the warm-up: it gives the bytes fio writes
        for name in rotated(("proxy", "fio"), round_):
            prime_memory(tier, primed_bytes(ranks, cells, writes))
            if name == "proxy":
                results[name], per_write = proxy_bandwidth(tier, ranks, cells, writes, purge)
            else:
                results[name] = fio_bandwidth(tier, ranks, per_write // ranks * writes, block)
        log(
            f"1 [{cells} cells] {'warm-up' if round_ == 0 else f'round {round_}'}: "
            f"proxy {results['proxy']:.0f} MB/s, fio {results['fio']:.0f} MB/s"
        )
        if round_ > 0:
            proxy.append(results["proxy"])
            fio.append(results["fio"])
            ratios.append(results["proxy"] / results["fio"])
    return {"proxy": proxy, "fio": fio, "ratios": ratios, "per_write": per_write, "block": block}


def comparison_row(tier: str, ranks: int, cells: int, writes: int, outcome: dict, goal) -> dict:
    mb = outcome["per_write"] / 1e6
    block = outcome["block"]
    return row(
        1,
        f"cfd_write_bandwidth_{cells}",
        f"CFD proxy / fio write bandwidth, {tier}, {mb:.3g} MB per write, bs {block}",
        "ratio",
        outcome["ratios"],
        goal,
        f"proxy {statistics.median(outcome['proxy']):.0f} MB/s, "
        f"fio {statistics.median(outcome['fio']):.0f} MB/s (medians), {ranks} rank"
        f"{'s' if ranks > 1 else ''} x {writes} writes, fresh tmpfs pages, after a warm-up "
        "round of both, the order alternating, memory primed before each run",
        proxy_MBps=outcome["proxy"],
        fio_MBps=outcome["fio"],
        bytes_per_write=outcome["per_write"],
        block=block,
    )


def measure(mode: str, scratch, goal) -> list[dict]:
    size = SIZES[mode]
    needed = max(primed_bytes(1, cells, size["writes"]) for cells in size["cells"])
    free = shutil.disk_usage(TIER).free
    if needed > free:  # a container's /dev/shm is often 64 MiB
        reason = f"skipped: {TIER} has {format_size(free)} free, item 1 needs {format_size(needed)}"
        return [
            skipped_row(1, f"cfd_write_bandwidth_{cells}", f"CFD proxy / fio write bandwidth, "
                        f"{TIER}, {cells} cells per write", "ratio", reason, goal)
            for cells in size["cells"]
        ]  # fmt: skip
    rows = []
    for cells in size["cells"]:
        outcome = compare(TIER, 1, cells, size["writes"], size["rounds"])
        rows.append(comparison_row(TIER, 1, cells, size["writes"], outcome, goal))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tier", default=TIER)
    parser.add_argument("--ranks", type=int, default=1)
    parser.add_argument("--cells", type=int, default=500_000, help="cells per rank (80 B each)")
    parser.add_argument("--writes", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=7, help="interleaved proxy/fio pairs")
    parser.add_argument(
        "--purge", type=int, default=0, help="purgeWrite of the proxy (0 keeps all)"
    )
    args = parser.parse_args()
    if shutil.which("fio") is None or shutil.which("mpiexec") is None:
        raise SystemExit("bench/cfd_vs_fio.py needs fio and mpiexec on PATH")
    outcome = compare(args.tier, args.ranks, args.cells, args.writes, args.rounds, args.purge)
    result = comparison_row(args.tier, args.ranks, args.cells, args.writes, outcome, at_least(0.9))
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
