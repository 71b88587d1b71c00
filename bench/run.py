"""How good are the instruments? Each one measured side by side with a reference, in one run.

    .venv/bin/python bench/run.py [--tiny] [--json out.json]

Prints a markdown table and writes JSON (``--json``, default
``results/bench/bench-<time>.json``) of what the instruments cost, every
figure measured in this run on this machine, interleaved with its reference:

1. cfd_proxy write-phase bandwidth on /dev/shm / fio sequential writes of the
   same bytes with the same block size on the same tier (goal >= 0.9), at
   document 001's 40 MB and at 10 MB per rank per write;
2. cfd_proxy's file-and-folder creation rate with 1-cell fields / a C program
   (``bench/creates.c``, compiled here with gcc) making the same folders and
   files of the same sizes at the same depth, timed the same way (each write
   counts with its slowest process) (goal >= 0.8);
3. fe_proxy's harness overhead: evaluation wall time with every file
   written to /dev/null (the void: fe_proxy's own Disk, opening /dev/null)
   / with output off (the same solve, no output at all), each evaluation of
   an optimisation run both ways back to back (goal: overhead <= 5 %); the
   same for whole optimisation runs of each mode; and the compute share of an
   evaluation, as fe_proxy reports it and as the solve's own compute;
4. pipeline overhead: ``snakemake -n`` of the ``paper`` matrix at
   ``scale=full`` (and of a synthetic matrix of 1,000+ jobs when the paper has
   fewer; goal under 5 s), and a no-op benchmark job (the runner around an
   empty workload) through Snakemake vs the same command run directly;
5. wall time of the default study and of the smoke preset, each in a scratch
   copy of the pipeline (goals: what README.md promises).

Every figure is the median over repetitions with its min-max; ratios are
taken per round (instrument and reference run back to back) and then the
median. ``--tiny`` runs everything at toy sizes (a check that the script
works, not a measurement) and skips the default study.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow"))
sys.path.insert(0, str(REPO / "bench"))

import cfd_vs_fio  # noqa: E402
from tierbench import foam, native  # noqa: E402
from tierbench.rundir import RunFolder  # noqa: E402
from tierbench.workloads import fe_model, fe_proxy  # noqa: E402

#: what a scratch copy of the pipeline needs (as tests/conftest.py)
PIPELINE_FILES = ["Snakefile", "workflow", "config", "notebooks", "profiles", "envs"]
TIER = "/dev/shm"

#: sizes per mode; "full" is what the README's table shows
SIZES = {
    "full": {
        "cfd_cells": [500_000, 125_000],  # 40 MB (document 001) and 10 MB per rank per write
        "cfd_writes": 20,
        "cfd_rounds": 15,
        "md_ranks": 2,
        "md_writes": 2000,
        "md_rounds": 15,
        "fe": {"cores": 1},  # the fe_tmpfs study's optimisation: population 30, 2 generations
        "fe_rounds": 15,
        "dry_rounds": 3,
        "noop_jobs": 20,
        "noop_rounds": 3,
        "smoke_rounds": 2,
        "default_study": True,
        "smoke_config": ["scale=smoke"],
    },
    "tiny": {
        "cfd_cells": [20_000],
        "cfd_writes": 3,
        "cfd_rounds": 2,
        "md_ranks": 2,
        "md_writes": 50,
        "md_rounds": 2,
        "fe": {"cores": 1, "population": 4, "generations": 1, "elements": 3, "increments": 10},
        "fe_rounds": 2,
        "dry_rounds": 1,
        "noop_jobs": 3,
        "noop_rounds": 1,
        "smoke_rounds": 1,
        "default_study": False,
        "smoke_config": ["scale=smoke", "repetitions=1", "warmup=False"],
    },
}
#: README.md: "takes under 10 minutes on 2 cores"; smoke "a quick check (under 2 minutes)"
DEFAULT_STUDY_GOAL_S = 600.0
SMOKE_GOAL_S = 120.0
DRY_RUN_GOAL_S = 5.0
DRY_RUN_GOAL_JOBS = 1000


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- the machine


def machine() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    memory = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = round(int(line.split()[1]) / 1024**2, 1)
    except OSError:
        pass
    return {
        "host": socket.gethostname(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "memory_gib": memory,
        "kernel": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
    }


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


# ---------------------------------------------------------------- rows


def spread(values: list[float]) -> dict:
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return {"median": None, "min": None, "max": None, "n": 0}
    return {
        "median": statistics.median(finite),
        "min": min(finite),
        "max": max(finite),
        "n": len(finite),
    }


def row(item, key, measure, unit, values, goal=None, detail="", **extra) -> dict:
    """One line of the table: the median of ``values`` against ``goal`` (op, bound) or None."""
    stats = spread(values)
    met = None
    if goal is not None and stats["median"] is not None:
        op, bound = goal
        met = bool(stats["median"] >= bound if op == ">=" else stats["median"] <= bound)
    return {
        "item": item,
        "key": key,
        "measure": measure,
        "unit": unit,
        "values": values,
        **stats,
        "goal": None if goal is None else {"op": goal[0], "value": goal[1]},
        "met": met,
        "detail": detail,
        **extra,
    }


def skipped_row(item, key, measure, unit, reason, goal=None) -> dict:
    out = row(item, key, measure, unit, [], goal, reason)
    out["skipped"] = reason
    return out


def failed_row(item, key, measure, unit, error, goal=None) -> dict:
    out = row(item, key, measure, unit, [], goal, f"failed: {error}")
    out["error"] = str(error)
    if goal is not None:
        out["met"] = False
    return out


# ---------------------------------------------------------------- 1: write bandwidth


PRIME_CHUNK = 64 * 2**20


def prime_memory(nbytes: int) -> None:
    """Write ``nbytes`` of zeros to a file on the tier, then delete it.

    On this VM a run that writes into memory its host has not backed yet
    slows 4-6x mid-run (the kernel's copy into the new tmpfs pages), and
    which run meets such memory is luck. Priming before every measured run
    gives both instruments memory that was in use a moment ago.
    """
    zeros = bytes(PRIME_CHUNK)
    with RunFolder(TIER, "bench-prime") as folder:
        with open(folder.path / "prime", "wb", buffering=0) as handle:
            for start in range(0, nbytes, PRIME_CHUNK):
                handle.write(zeros[: min(PRIME_CHUNK, nbytes - start)])


def item_write_bandwidth(size: dict) -> list[dict]:
    """cfd_proxy's write phase vs fio sequential writes of the same bytes and block size."""
    rows = []
    for cells in size["cfd_cells"]:
        block = foam.payload_bytes("U", cells, "binary")
        writes = size["cfd_writes"]
        proxy, fio, ratios = [], [], []
        # round 0 is a warm-up of both, not counted: the first run of a size was
        # a quarter as fast, whichever instrument made it
        for round_ in range(size["cfd_rounds"] + 1):
            results = {}
            # alternating order; the proxy goes first in the warm-up, which gives the bytes
            for name in ("proxy", "fio") if round_ % 2 == 0 else ("fio", "proxy"):
                # twice what a run writes, and room for the proxy's own memory
                prime_memory(2 * cells * 80 * writes + 2**28)
                if name == "proxy":
                    results[name], per_write = cfd_vs_fio.proxy_bandwidth(TIER, 1, cells, writes, 0)
                else:
                    results[name] = cfd_vs_fio.fio_bandwidth(TIER, 1, per_write * writes, block)
            log(
                f"1 [{cells} cells] {'warm-up' if round_ == 0 else f'round {round_}'}: "
                f"proxy {results['proxy']:.0f} MB/s, fio {results['fio']:.0f} MB/s"
            )
            if round_ == 0:
                continue
            proxy.append(results["proxy"])
            fio.append(results["fio"])
            ratios.append(results["proxy"] / results["fio"])
        mb = per_write / 1e6
        rows.append(
            row(
                1,
                f"cfd_write_bandwidth_{cells}",
                f"CFD proxy / fio write bandwidth, {TIER}, {mb:.3g} MB per write, bs {block}",
                "ratio",
                ratios,
                (">=", 0.9),
                f"proxy {statistics.median(proxy):.0f} MB/s, fio {statistics.median(fio):.0f} MB/s "
                f"(medians), 1 rank x {writes} writes, fresh tmpfs pages, after a warm-up round "
                "of both, the order alternating, memory primed before each run",
                proxy_MBps=proxy,
                fio_MBps=fio,
                bytes_per_write=per_write,
                block=block,
            )
        )
    return rows


# ---------------------------------------------------------------- 2: creates


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
    record = cfd_vs_fio.run_proxy_writes("creates", TIER, ranks, cells=1, writes=writes, purge=0)
    metrics = {m["metric"]: m["value"] for m in record["metrics"]}
    if "write_phase_time" not in metrics:
        raise RuntimeError(f"proxy failed: {record['metrics']}")
    made = int(metrics["files_created"] + metrics["dirs_created"])
    return made / (metrics["write_phase_time"] * writes), made


def c_creates(binary: Path, ranks: int, writes: int, sizes: list[int]) -> tuple[float, int]:
    """Files and folders per second of the C program, at the proxy's depth below the tier."""
    # the proxy writes <run folder>/member0/processor<rank>/...; path lookups cost per level
    with RunFolder(TIER, "creates-bench-rep1") as folder:
        case = folder.path / "member0"
        case.mkdir()
        done = subprocess.run(
            [str(binary), str(case), str(ranks), str(writes), *map(str, sizes)],
            check=True,
            capture_output=True,
            text=True,
        )
    seconds, files, dirs = done.stdout.split()
    return (int(files) + int(dirs)) / float(seconds), int(files) + int(dirs)


def item_creates(size: dict, scratch: Path) -> list[dict]:
    ranks, writes = size["md_ranks"], size["md_writes"]
    binary = compile_creates(scratch)
    # the proxy's 8 files with 1-cell fields, sized as at write time 1
    sizes = [foam.field_file_bytes(name, 1, "binary", "1") for name in foam.FIELDS]
    sizes += [len(text) for text in foam.uniform_texts("1", 1, "binary").values()]
    proxy, ref, ratios = [], [], []
    for round_ in range(size["md_rounds"]):
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
            (">=", 0.8),
            f"proxy {statistics.median(proxy):.0f}/s, C {statistics.median(ref):.0f}/s (medians); "
            f"{ranks} ranks x {writes} writes x (8 files of ~1 KB + 3 folders) = {made} per run",
            proxy_per_s=proxy,
            c_per_s=ref,
            file_sizes=sizes,
        )
    ]


# ---------------------------------------------------------------- 3: fe_proxy harness


class VoidDisk(fe_proxy.Disk):
    """fe_proxy's Disk with every file opened on /dev/null: the same calls, no storage.

    No folder is made or removed; the deck, the only file the solver reads
    back, is kept in memory for that.
    """

    def __init__(self, root, fsync, io=None):
        super().__init__(root, fsync, io)
        self.kept: dict[str, bytes] = {}

    def target(self, path) -> str:
        super().target(path)  # the same check
        return os.devnull

    def mkdir(self) -> None:
        pass

    def remove(self) -> None:
        pass

    def start(self, create, append):
        for path, chunks in create:
            if path.endswith(".inp"):
                self.kept[path] = b"".join(bytes(c) for c in chunks)
        return super().start(create, append)

    def read(self, path) -> bytes:
        start = time.perf_counter()
        data = self.kept[path]
        self.seconds += time.perf_counter() - start
        return data


def evaluate_output_off(task: dict) -> dict:
    """Output off: the same solve (parameters rounded as the deck writes them), no files."""
    bar, target = fe_proxy._WORKER["bar"], fe_proxy._WORKER["target"]
    parameters = {k: float(f"{v:.12e}") for k, v in task["parameters"].items()}
    material = replace(fe_proxy.TRUTH, **parameters)
    start = time.perf_counter()
    record = {
        "label": task["label"], "parameters": task["parameters"], "ok": False, "error": "",
        "misfit": math.inf, "iterations": 0, "cutbacks": 0,
    }  # fmt: skip
    try:
        solution = fe_model.solve(bar, material)
    except fe_model.ConvergenceError as error:
        record["error"] = str(error)
    else:
        record.update(
            ok=True,
            misfit=fe_model.misfit(solution.force, target),
            iterations=sum(solution.iterations),
            cutbacks=solution.cutbacks,
        )
    seconds = time.perf_counter() - start
    record.update(eval_time=seconds, io_time=0.0, compute_time=seconds, bytes=0, files=0)
    return record


_SOLVE = fe_model.solve
_EVALUATE = fe_proxy.evaluate
_LAST_SOLVE: dict = {}


def _solve_watched(*args, **kwargs):
    solution = _SOLVE(*args, **kwargs)
    _LAST_SOLVE["compute_time"] = solution.compute_time  # the solve alone, output excluded
    return solution


def _evaluate_watched(task: dict) -> dict:
    _LAST_SOLVE.clear()
    record = _EVALUATE(task)
    record["solve_time"] = _LAST_SOLVE.get("compute_time", math.nan)
    return record


def evaluate_paired(task: dict) -> dict:
    """One evaluation run twice back to back: output off and output to the void.

    The order alternates from one evaluation to the next. The two runs see
    the same state of a noisy machine, which whole runs of each mode, seconds
    apart, do not. Returns the void run's record with both wall times.
    """
    order = ("off", "void") if int(task["label"][-3:]) % 2 else ("void", "off")
    records, walls = {}, {}
    for mode in order:
        start = time.perf_counter()
        records[mode] = evaluate_output_off(task) if mode == "off" else _EVALUATE(task)
        walls[mode] = time.perf_counter() - start
    if records["off"]["misfit"] != records["void"]["misfit"]:
        raise RuntimeError(f"{task['label']}: output off and void solved differently")
    return {**records["void"], "off_wall": walls["off"], "void_wall": walls["void"]}


@contextmanager
def fe_mode(mode: str):
    """fe_proxy set up for a mode before the pool forks: output off, to the void, or to a tier.

    With output on, each evaluation also reports the solve's own compute time
    (fe_model's, the output callbacks excluded) beside fe_proxy's figures;
    ``paired`` runs every evaluation output off and to the void, back to back.
    """
    disk, evaluate, solve = fe_proxy.Disk, fe_proxy.evaluate, fe_model.solve
    if mode == "off":
        fe_proxy.evaluate = evaluate_output_off
    elif mode == "paired":  # no watching: nothing of the bench's own in the measured runs
        fe_proxy.evaluate, fe_proxy.Disk = evaluate_paired, VoidDisk
    else:
        fe_proxy.evaluate, fe_model.solve = _evaluate_watched, _solve_watched
        if mode == "void":
            fe_proxy.Disk = VoidDisk
    try:
        yield
    finally:
        fe_proxy.Disk, fe_proxy.evaluate, fe_model.solve = disk, evaluate, solve


def fe_run(config, mode: str) -> dict:
    with RunFolder(TIER, f"bench-fe-{mode}") as folder, fe_mode(mode):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        outcome = fe_proxy.optimise(config, folder.path)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the pool's workers, reaped
    evaluations = outcome["evaluations"]
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return {
        "wall": outcome["wall_time"],
        "cpu": cpu,
        "misfit": outcome["best_misfit"],
        "compute_share": statistics.median(e["compute_time"] / e["eval_time"] for e in evaluations),
        "solve_share": statistics.median(
            e.get("solve_time", e["compute_time"]) / e["eval_time"] for e in evaluations
        ),
        "eval_time": statistics.median(e["eval_time"] for e in evaluations),
        "bytes": statistics.median(e["bytes"] for e in evaluations),
        "pairs": [(e["off_wall"], e["void_wall"]) for e in evaluations if "off_wall" in e],
    }


FE_MODES = ("off", "void", "shm", "paired")


def item_fe(size: dict) -> list[dict]:
    config = fe_proxy.settings(size["fe"])
    runs = {mode: [] for mode in FE_MODES}
    for round_ in range(size["fe_rounds"]):
        # a different order every round, so no mode always follows the same one
        shift = round_ % len(FE_MODES)
        for mode in FE_MODES[shift:] + FE_MODES[:shift]:
            runs[mode].append(fe_run(config, mode))
        misfits = {mode: runs[mode][-1]["misfit"] for mode in runs}
        if len(set(misfits.values())) != 1:
            raise RuntimeError(f"the runs found different optima: {misfits}")
        log(
            f"3 round {round_ + 1}: wall off {runs['off'][-1]['wall']:.3f} s, "
            f"void {runs['void'][-1]['wall']:.3f} s, shm {runs['shm'][-1]['wall']:.3f} s, "
            f"paired {runs['paired'][-1]['wall']:.3f} s"
        )

    def of(mode, key):
        return [r[key] for r in runs[mode]]

    def ratios(key, mode="void"):
        return [a / b for a, b in zip(of(mode, key), of("off", key), strict=True)]

    def median(mode, key):
        return statistics.median(of(mode, key))

    pairs = [pair for r in runs["paired"] for pair in r["pairs"]]
    off_sum, void_sum = (sum(p[i] for p in pairs) for i in (0, 1))
    c, b = config.ga, config.bar
    what = (
        f"GA population {c.population} x {c.generations} generations on {config.cores} worker, "
        f"{b.elements} elements, {b.increments} increments, "
        f"{median('shm', 'bytes') / 1e6:.2f} MB per evaluation"
    )
    return [
        row(
            3,
            "fe_harness_overhead",
            "FE proxy evaluation wall time, output to the void (/dev/null) / output off, "
            "each evaluation run both ways back to back",
            "ratio",
            [void / off for off, void in pairs],
            ("<=", 1.05),
            f"{len(pairs)} pairs in {len(runs['paired'])} optimisations; summed: void "
            f"{void_sum:.2f} s / off {off_sum:.2f} s = {void_sum / off_sum:.3f}; {what}; "
            f"output written by {native.status('feio')}",
            off_s=[p[0] for p in pairs],
            void_s=[p[1] for p in pairs],
        ),
        row(
            3,
            "fe_harness_overhead_runs",
            "FE proxy optimisation wall time, void / output off, whole runs of each",
            "ratio",
            ratios("wall"),
            None,
            f"off {median('off', 'wall'):.2f} s, void {median('void', 'wall'):.2f} s (medians); "
            "the runs are a second apart, so the machine's noise between runs is in the ratio",
            off_s=of("off", "wall"),
            void_s=of("void", "wall"),
            off_cpu_s=of("off", "cpu"),
            void_cpu_s=of("void", "cpu"),
        ),
        row(
            3,
            "fe_compute_share_void",
            "FE proxy compute share of an evaluation as it reports it "
            "(compute_time / eval_time), void",
            "share",
            of("void", "compute_share"),
            None,
            "the rest: time in file-system calls, here on /dev/null; formatting the "
            "output counts as compute",
        ),
        row(
            3,
            "fe_solve_share_void",
            "FE solve's own share of an evaluation (its compute, output callbacks "
            "excluded / eval_time), void",
            "share",
            of("void", "solve_share"),
            None,
            f"evaluation off {statistics.median(p[0] for p in pairs) * 1e3:.1f} ms, void "
            f"{statistics.median(p[1] for p in pairs) * 1e3:.1f} ms (medians of the pairs)",
        ),
        row(
            3,
            "fe_compute_share_shm",
            f"FE proxy compute share of an evaluation, {TIER}",
            "share",
            of("shm", "compute_share"),
            None,
            f"solve's own share {median('shm', 'solve_share'):.3f}; {TIER} / off wall time "
            f"{statistics.median(ratios('wall', 'shm')):.3f} (what the tier costs, not a goal)",
            shm_over_off=ratios("wall", "shm"),
            shm_s=of("shm", "wall"),
        ),
    ]


# ---------------------------------------------------------------- 4: pipeline overhead


def snakemake(
    args: list[str], cwd: Path, timeout: float = 3600
) -> tuple[float, subprocess.CompletedProcess]:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "snakemake", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    return time.perf_counter() - start, done


def copy_pipeline(scratch: Path, name: str) -> Path:
    root = scratch / name
    root.mkdir()
    for entry in PIPELINE_FILES:
        source = REPO / entry
        if source.is_dir():
            shutil.copytree(
                source, root / entry, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
            )
        else:
            shutil.copy2(source, root / entry)
    return root


def job_count(output: str) -> int:
    match = re.search(r"^total\s+(\d+)\s*$", output, re.MULTILINE)
    if not match:
        raise RuntimeError(f"no job count in the dry run's output: {output[-500:]}")
    return int(match.group(1))


def dry_runs(root: Path, rounds: int) -> tuple[list[float], int]:
    times, jobs = [], None
    for _ in range(rounds):
        seconds, done = snakemake(["-n", "paper", "--config", "scale=full"], root, timeout=600)
        if done.returncode != 0:
            raise RuntimeError(f"snakemake -n failed: {done.stderr[-1500:]}")
        times.append(seconds)
        jobs = job_count(done.stdout + done.stderr)
    return times, jobs


def multiply_repetitions(root: Path, factor: int) -> None:
    """The synthetic matrix: every study's (and the default's) repetitions times ``factor``."""
    files = [root / "config/config.yaml", *sorted((root / "config/studies").glob("*.yaml"))]
    for path in files:
        text = path.read_text()
        text = re.sub(
            r"^repetitions:\s*(\d+)",
            lambda m: f"repetitions: {int(m.group(1)) * factor}",
            text,
            flags=re.MULTILINE,
        )
        path.write_text(text)


NOOP_WORKLOAD = '''"""A benchmark job that measures nothing: the runner around an empty workload."""
from tierbench.runner import main

raise SystemExit(main(lambda job: []))
'''
NOOP_SNAKEFILE = """import json

SPEC = json.dumps({{
    "study": "bench", "experiment": "noop", "workload": "noop", "tier": "void",
    "tier_path": "/dev/null", "tier_class": "void", "max_bytes": None, "point": "p",
    "params": {{}}, "repetition": 1, "phase": "measured",
}})


rule all:
    input:
        expand("raw/rep{{rep}}.json", rep=range({jobs})),


rule noop:
    output:
        "raw/rep{{rep}}.json",
    log:
        "logs/rep{{rep}}.log",
    resources:
        bench=1,
    params:
        spec=SPEC,
    shell:
        "{python} noop.py --spec {{params.spec:q}} --out {{output}} 2> {{log}}"
"""


def item_noop(size: dict, scratch: Path) -> dict:
    """Per-job cost of Snakemake: no-op benchmark jobs through it vs the same commands directly."""
    jobs = size["noop_jobs"]
    root = scratch / "noop"
    root.mkdir()
    (root / "noop.py").write_text(NOOP_WORKLOAD)
    (root / "Snakefile").write_text(NOOP_SNAKEFILE.format(jobs=jobs, python=sys.executable))
    env = {**os.environ, "PYTHONPATH": str(REPO / "workflow"), "PYTHONDONTWRITEBYTECODE": "1"}
    spec = json.dumps(
        {
            "study": "bench",
            "experiment": "noop",
            "workload": "noop",
            "tier": "void",
            "tier_path": "/dev/null",
            "tier_class": "void",
            "max_bytes": None,
            "point": "p",
            "params": {},
            "repetition": 1,
            "phase": "measured",
        }  # fmt: skip
    )
    overheads, ratios, direct_per_job, through_per_job = [], [], [], []
    args = ["-c1", "--resources", "bench=1", "-q"]
    for round_ in range(size["noop_rounds"]):
        for folder in ("raw", "logs", ".snakemake"):
            shutil.rmtree(root / folder, ignore_errors=True)
        (root / "direct").mkdir(exist_ok=True)
        start = time.perf_counter()
        for rep in range(jobs):
            subprocess.run(
                [sys.executable, "noop.py", "--spec", spec, "--out", f"direct/rep{rep}.json"],
                cwd=root, env=env, check=True, stderr=subprocess.DEVNULL,
            )  # fmt: skip
        direct = time.perf_counter() - start
        through, done = snakemake(args, root, timeout=600)
        if done.returncode != 0:
            raise RuntimeError(f"no-op workflow failed: {done.stderr[-1500:]}")
        nothing, done = snakemake(args, root, timeout=600)  # start-up: nothing to be done
        if done.returncode != 0:
            raise RuntimeError(f"no-op workflow failed: {done.stderr[-1500:]}")
        per_job = (through - nothing) / jobs
        direct_per_job.append(direct / jobs)
        through_per_job.append(per_job)
        overheads.append(per_job - direct / jobs)
        ratios.append(per_job / (direct / jobs))
        log(
            f"4 no-op round {round_ + 1}: direct {direct / jobs:.3f} s/job, through snakemake "
            f"{per_job:.3f} s/job (start-up {nothing:.2f} s apart)"
        )
    return row(
        4,
        "noop_job_overhead",
        "No-op benchmark job through Snakemake (-c1) / the same command run directly",
        "ratio",
        ratios,
        None,
        f"{statistics.median(through_per_job):.3f} s vs {statistics.median(direct_per_job):.3f} s "
        f"per job (medians), {jobs} jobs per round; Snakemake's start-up (a run with nothing "
        f"to do) subtracted; overhead {statistics.median(overheads) * 1e3:.0f} ms per job",
        overhead_s=overheads,
        through_s=through_per_job,
        direct_s=direct_per_job,
    )


def item_pipeline(size: dict, scratch: Path) -> list[dict]:
    rows = []
    root = copy_pipeline(scratch, "dry")
    times, jobs = dry_runs(root, size["dry_rounds"])
    log(f"4 dry run of paper at scale=full: {jobs} jobs, {statistics.median(times):.2f} s")
    big = jobs >= DRY_RUN_GOAL_JOBS
    rows.append(
        row(
            4,
            "dry_run_paper_full",
            f"snakemake -n paper --config scale=full ({jobs} jobs)",
            "s",
            times,
            ("<=", DRY_RUN_GOAL_S) if big else None,
            f"{jobs} jobs"
            + ("" if big else f": fewer than {DRY_RUN_GOAL_JOBS}, goal on the next row"),
            jobs=jobs,
        )
    )
    if not big:
        synthetic = copy_pipeline(scratch, "dry_synthetic")
        # benchmark jobs grow with the repetitions, the rest of the DAG does not
        factor, count = -(-DRY_RUN_GOAL_JOBS // jobs) - 1, jobs
        while count < DRY_RUN_GOAL_JOBS:
            factor += 1
            shutil.rmtree(synthetic / "config")
            shutil.copytree(REPO / "config", synthetic / "config")
            multiply_repetitions(synthetic, factor)
            times, count = dry_runs(synthetic, 1)
        if size["dry_rounds"] > 1:
            times += dry_runs(synthetic, size["dry_rounds"] - 1)[0]
        log(f"4 dry run of the synthetic matrix: {count} jobs, {statistics.median(times):.2f} s")
        rows.append(
            row(
                4,
                "dry_run_synthetic",
                f"snakemake -n paper, scale=full, every study's repetitions x {factor} "
                f"({count} jobs)",
                "s",
                times,
                ("<=", DRY_RUN_GOAL_S),
                f"synthetic: the paper matrix has {jobs} jobs, so repetitions were raised to "
                f"pass {DRY_RUN_GOAL_JOBS}",
                jobs=count,
                factor=factor,
            )
        )
    rows.append(item_noop(size, scratch))
    return rows


# ---------------------------------------------------------------- 5: study wall times


def study_wall(
    scratch: Path, name: str, config: list[str], goal_s: float, rounds: int, key: str, measure: str
) -> dict:
    times = []
    for round_ in range(rounds):
        root = copy_pipeline(scratch, f"{name}{round_}")
        args = ["-c2", "-q"] + (["--config", *config] if config else [])
        seconds, done = snakemake(args, root)
        if done.returncode != 0:
            raise RuntimeError(f"snakemake {' '.join(args)} failed: {done.stderr[-1500:]}")
        times.append(seconds)
        shutil.rmtree(root, ignore_errors=True)
        log(f"5 {measure}: {seconds:.1f} s")
    command = "snakemake -c2" + (f" --config {' '.join(config)}" if config else "")
    return row(
        5,
        key,
        f"{measure} wall time (`{command}`)",
        "s",
        times,
        ("<=", goal_s),
        f"in a scratch copy of the pipeline; goal: README.md's promise ({goal_s:.0f} s)",
    )


def item_studies(size: dict, scratch: Path) -> list[dict]:
    rows = []
    if size["default_study"]:
        rows.append(
            study_wall(
                scratch, "default", [], DEFAULT_STUDY_GOAL_S, 1, "default_study", "Default study"
            )
        )
    else:
        rows.append(
            skipped_row(
                5,
                "default_study",
                "Default study wall time (`snakemake -c2`)",
                "s",
                "skipped (--tiny)",
                ("<=", DEFAULT_STUDY_GOAL_S),
            )
        )
    smoke = study_wall(
        scratch,
        "smoke",
        size["smoke_config"],
        SMOKE_GOAL_S,
        size["smoke_rounds"],
        "smoke_study",
        "Smoke preset",
    )
    if size["smoke_config"] != ["scale=smoke"]:
        smoke["detail"] += "; --tiny: 1 repetition, no warm-up, so not the preset's figure"
        smoke["met"] = None
    rows.append(smoke)
    return rows


# ---------------------------------------------------------------- the table


def fmt(value, unit) -> str:
    if value is None:
        return "–"
    if unit == "s":
        return f"{value:.2f} s" if value < 100 else f"{value:.0f} s"
    return f"{value:.3f}" if value < 10 else f"{value:.1f}"


def table(result: dict) -> str:
    m = result["machine"]
    lines = [
        f"Run {result['started_at']} to {result['finished_at']} ({result['mode']}): "
        f"host `{m['host']}`, {m['cpu']}, {m['cores']} cores ({m['usable_cores']} usable), "
        f"{m['memory_gib']} GiB, {m['kernel']}, Python {m['python']}; load average "
        f"(1/5/15 min) {' / '.join(map(str, result['load_start']))} at start, "
        f"{' / '.join(map(str, result['load_end']))} at end.",
        "",
        f"Command: `{result['command']}`",
        "",
        "| # | measure | median | min–max | n | goal | met | detail |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in result["rows"]:
        goal = (
            "–"
            if r["goal"] is None
            else f"{'≥' if r['goal']['op'] == '>=' else '≤'} {fmt(r['goal']['value'], r['unit'])}"
        )
        met = {True: "yes", False: "**no**", None: "–"}[r["met"]]
        span = "–" if r["min"] is None else f"{fmt(r['min'], r['unit'])}–{fmt(r['max'], r['unit'])}"
        lines.append(
            f"| {r['item']} | {r['measure']} | {fmt(r['median'], r['unit'])} | {span} | {r['n']} "
            f"| {goal} | {met} | {r['detail']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="toy sizes, no default study")
    parser.add_argument("--json", help="where to write the JSON (default results/bench/)")
    parser.add_argument(
        "--only", help="comma-separated items to run (1-5), for working on one instrument"
    )
    args = parser.parse_args(argv)
    mode = "tiny" if args.tiny else "full"
    size = SIZES[mode]
    only = {int(x) for x in args.only.split(",")} if args.only else {1, 2, 3, 4, 5}
    missing = [tool for tool in ("fio", "mpiexec", "gcc") if shutil.which(tool) is None]
    if missing:
        raise SystemExit(f"bench needs {', '.join(missing)} on PATH")
    result = {
        "mode": mode,
        "command": " ".join(
            [".venv/bin/python", "bench/run.py", *(argv if argv is not None else sys.argv[1:])]
        ),
        "started_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        "load_start": load_average(),
        "rows": [],
    }
    # item, its runner, and the row that stands for it if it fails
    items = [
        (1, lambda scratch: item_write_bandwidth(size),
         ("cfd_write_bandwidth", "CFD proxy / fio write bandwidth", "ratio", (">=", 0.9))),
        (2, lambda scratch: item_creates(size, scratch),
         ("cfd_creates", "CFD proxy / C creation rate", "ratio", (">=", 0.8))),
        (3, lambda scratch: item_fe(size),
         ("fe_harness_overhead", "FE proxy wall time, void / output off", "ratio", ("<=", 1.05))),
        (4, lambda scratch: item_pipeline(size, scratch),
         ("dry_run_paper_full", "snakemake -n paper", "s", ("<=", DRY_RUN_GOAL_S))),
        (5, lambda scratch: item_studies(size, scratch),
         ("smoke_study", "Study wall times", "s", ("<=", SMOKE_GOAL_S))),
    ]  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="tierbench-bench-") as tmp:
        for item, run, (key, measure, unit, goal) in items:
            if item not in only:
                continue
            scratch = Path(tmp) / f"item{item}"
            scratch.mkdir()
            log(f"item {item}: {measure} (load {load_average()})")
            try:
                rows = run(scratch)
            except Exception as error:  # one broken instrument must not hide the others
                message = f"{type(error).__name__}: {error}"
                log(f"item {item} failed: {message}")
                rows = [failed_row(item, key, measure, unit, message, goal)]
            result["rows"].extend(rows)
    result["load_end"] = load_average()
    result["finished_at"] = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    text = table(result)
    result["table"] = text
    out = (
        Path(args.json)
        if args.json
        else REPO
        / "results/bench"
        / (f"bench-{mode}-{datetime.now().strftime('%Y%m%dT%H%M%S')}.json")
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(text)
    print(f"\nJSON: {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
