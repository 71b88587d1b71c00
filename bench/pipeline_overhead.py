"""Item 4: what does the pipeline itself cost?

The dry run of the ``paper`` matrix at ``scale=full``, and of a synthetic
matrix of 1,000+ jobs when the paper has fewer (every study's repetitions
multiplied until it passes): goal under 5 s. Beside it, the per-job cost of
Snakemake: no-op benchmark jobs (the runner around an empty workload)
through Snakemake against the same commands run directly, Snakemake's
start-up subtracted.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from harness import REPO, copy_pipeline, log, row, set_top_level, snakemake

SIZES = {
    "full": {"dry_rounds": 3, "noop_jobs": 20, "noop_rounds": 3},
    "tiny": {"dry_rounds": 1, "noop_jobs": 3, "noop_rounds": 1},
}
#: the dry run's goal holds for a matrix of at least this many jobs
GOAL_JOBS = 1000


def measure(mode: str, scratch: Path, goal) -> list[dict]:
    size = SIZES[mode]
    return [*dry_run_rows(size["dry_rounds"], scratch, goal), noop_row(size, scratch)]


# ---------------------------------------------------------------- the dry run


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
    """The synthetic matrix: every study's (and the default's) repetitions times ``factor``,
    a number's or both bounds of a ``{min, max}``."""
    files = [root / "config/config.yaml", *sorted((root / "config/studies").glob("*.yaml"))]
    for path in files:
        set_top_level(
            path, "repetitions", lambda old: re.sub(r"\d+", lambda n: str(int(n[0]) * factor), old)
        )


def dry_run_rows(rounds: int, scratch: Path, goal) -> list[dict]:
    """The paper's dry run; if it has fewer than GOAL_JOBS jobs, also a synthetic matrix."""
    root = copy_pipeline(scratch, "dry")
    times, jobs = dry_runs(root, rounds)
    log(f"4 dry run of paper at scale=full: {jobs} jobs, {statistics.median(times):.2f} s")
    big = jobs >= GOAL_JOBS
    rows = [
        row(
            4,
            "dry_run_paper_full",
            f"snakemake -n paper --config scale=full ({jobs} jobs)",
            "s",
            times,
            goal if big else None,
            f"{jobs} jobs" + ("" if big else f": fewer than {GOAL_JOBS}, goal on the next row"),
            jobs=jobs,
        )
    ]
    if not big:
        rows.append(synthetic_dry_run_row(rounds, scratch, jobs, goal))
    return rows


def synthetic_dry_run_row(rounds: int, scratch: Path, paper_jobs: int, goal) -> dict:
    synthetic = copy_pipeline(scratch, "dry_synthetic")

    def dry_run_at(factor: int) -> tuple[list[float], int]:
        shutil.rmtree(synthetic / "config")
        shutil.copytree(REPO / "config", synthetic / "config")
        multiply_repetitions(synthetic, factor)
        return dry_runs(synthetic, 1)

    # benchmark jobs grow with the repetitions, the rest of the DAG does not: the count grows
    # by the same number of jobs for each step of the factor, so one dry run past the paper's
    # gives the smallest factor that passes the goal (a dry run of this size takes 10-20 s;
    # stepping the factor one by one took 8 of them)
    first = -(-GOAL_JOBS // paper_jobs)
    times, count = dry_run_at(first)
    factor = first
    if count < GOAL_JOBS:
        grown = count - paper_jobs  # over first - 1 steps
        if grown <= 0:
            raise RuntimeError(f"repetitions x {first} still gives {count} jobs: none grew")
        steps = -(-(GOAL_JOBS - paper_jobs) * (first - 1) // grown)
        factor = max(first + 1, 1 + steps)
        times, count = dry_run_at(factor)
    while count < GOAL_JOBS:  # in case the count grew by less than that
        factor += 1
        times, count = dry_run_at(factor)
    if rounds > 1:
        times += dry_runs(synthetic, rounds - 1)[0]
    log(f"4 dry run of the synthetic matrix: {count} jobs, {statistics.median(times):.2f} s")
    return row(
        4,
        "dry_run_synthetic",
        f"snakemake -n paper, scale=full, every study's repetitions x {factor} ({count} jobs)",
        "s",
        times,
        goal,
        f"synthetic: the paper matrix has {paper_jobs} jobs, so repetitions were raised to "
        f"pass {GOAL_JOBS}",
        jobs=count,
        factor=factor,
    )


# ---------------------------------------------------------------- a no-op job

#: the plan a no-op job reads its point from, as a benchmark job reads its study's plan.json
NOOP_PLAN = {
    "study": "bench",
    "tiers": {"void": {"path": "/dev/null", "class": "void"}},
    "points": {
        "noop/noop/void/p": {
            "workload": "noop",
            "experiment": "noop",
            "tier": "void",
            "point": "p",
            "params": {},
            "description": "a benchmark job that measures nothing",
        }  # fmt: skip
    },
}
NOOP_POINT = "noop/noop/void/p"
NOOP_WORKLOAD = '''"""A benchmark job that measures nothing: the runner around an empty workload."""
from types import SimpleNamespace

from tierbench import runner

runner.get = lambda name: SimpleNamespace(run=lambda job: [])
raise SystemExit(runner.main())
'''
NOOP_SNAKEFILE = """rule all:
    input:
        expand("raw/rep{{rep}}.json", rep=range({jobs})),


rule noop:
    input:
        plan="plan.json",
    output:
        "raw/rep{{rep}}.json",
    log:
        "logs/rep{{rep}}.log",
    resources:
        bench=1,
    params:
        point="{point}",
    shell:
        "{python} noop.py --plan {{input.plan}} --point {{params.point:q}} --rep {{wildcards.rep}}"
        " --out {{output}} 2> {{log}}"
"""


def noop_row(size: dict, scratch: Path) -> dict:
    """Per-job cost of Snakemake: no-op benchmark jobs through it vs the same commands directly."""
    jobs = size["noop_jobs"]
    root = scratch / "noop"
    root.mkdir()
    (root / "noop.py").write_text(NOOP_WORKLOAD)
    (root / "plan.json").write_text(json.dumps(NOOP_PLAN))
    snakefile = NOOP_SNAKEFILE.format(point=NOOP_POINT, jobs=jobs, python=sys.executable)
    (root / "Snakefile").write_text(snakefile)
    overheads, ratios, direct_per_job, through_per_job = [], [], [], []
    for round_ in range(size["noop_rounds"]):
        direct = direct_jobs(root, jobs)
        per_job, nothing = snakemake_jobs(root, jobs)
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


def direct_jobs(root: Path, jobs: int) -> float:
    """Seconds to run the no-op job ``jobs`` times, one after the other, without Snakemake."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "workflow"), "PYTHONDONTWRITEBYTECODE": "1"}
    (root / "direct").mkdir(exist_ok=True)
    start = time.perf_counter()
    for rep in range(jobs):
        done = subprocess.run(
            [sys.executable, "noop.py", "--plan", "plan.json", "--point", NOOP_POINT,
             "--rep", str(rep), "--out", f"direct/rep{rep}.json"],
            cwd=root, env=env, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"no-op job failed: {done.stderr.strip()[-1500:]}")
    return time.perf_counter() - start


def snakemake_jobs(root: Path, jobs: int) -> tuple[float, float]:
    """Seconds per job through Snakemake, its start-up (a run with nothing to do) subtracted."""
    for folder in ("raw", "logs", ".snakemake"):
        shutil.rmtree(root / folder, ignore_errors=True)
    args = ["-c1", "--resources", "bench=1", "-q"]
    through, done = snakemake(args, root, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"no-op workflow failed: {done.stderr[-1500:]}")
    nothing, done = snakemake(args, root, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"no-op workflow failed: {done.stderr[-1500:]}")
    return (through - nothing) / jobs, nothing
