"""Item 7: how long do the results database's append and a comparison of two paper runs take?

Two machines' paper runs are made up as the pipeline leaves them: 5 studies
of 80 points each (400 points), every point a warm-up and 3 measured
repetitions with 10 metrics, so 1,600 raw JSON records per machine, then
``results.csv``, ``summary.csv`` and ``nodes.json`` from ``tierbench.aggregate``
and a ``verdict.json`` per study (that part is not timed: it is the
aggregate rule's). The real default paper has ~85 points, so this is about
five times its size. Timed, each as the pipeline runs it (a fresh Python
process, imports included, the database on the disk holding the scratch
folder): ``python -m tierbench.resultsdb_cli append`` of each study of both
machines into a fresh database, then ``python -m tierbench.compare A B``
writing compare.html. Repeated over ``rounds`` rounds, each with a fresh
database, the order of the machines alternating.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

from harness import REPO, log, rotated, row
from tierbench import aggregate, resultsdb

SIZES = {
    "full": {"studies": 5, "points": 80, "repetitions": 3, "metrics": 10, "rounds": 3},
    "tiny": {"studies": 2, "points": 4, "repetitions": 2, "metrics": 3, "rounds": 1},
}
MACHINES = ("ws", "cluster")
#: cluster's tiers are this much faster than ws's in the made-up data, so compare has changes
SPEED = {"ws": 1.0, "cluster": 1.5}
TIERS = (("shm", "shm"), ("disk", "disk"))
HOST = {
    "host": "node1", "kernel": "6.1.0", "os": "Debian 12", "cpu_model": "Bench CPU",
    "cores": 8, "memory_bytes": 16 * 2**30, "slurm_job_id": None,
}  # fmt: skip


def record(study: str, index: int, rep: int, metrics: list[dict], started: str) -> dict:
    """A raw record as the runner writes it: one fio-like point of a study, one repetition."""
    tier, tier_class = TIERS[index % len(TIERS)]
    params = {"block_size": f"{4 << (index % 8)}k", "size": "64MiB", "index": index}
    spec = {
        "study": study, "experiment": f"sweep{index % 4}", "workload": "fio", "tier": tier,
        "tier_path": f"/scratch/{tier}", "tier_class": tier_class, "max_bytes": None,
        "point": f"point={index}", "params": params, "repetition": rep,
        "phase": "warmup" if rep == 0 else "measured", "description": "",
    }  # fmt: skip
    return {
        "spec": spec,
        "context": {"host": HOST, "tier": {"fs_type": "tmpfs", "source": "tmpfs"}},
        "started_at": started,
        "duration_s": 1.5,
        "metrics": metrics,
        "extra": {},
    }


def point_metrics(rng: random.Random, speed: float, count: int) -> list[dict]:
    """``count`` metrics of one repetition, a few per cent of noise around a per-metric level."""
    out = []
    for number in range(count):
        unit = "s" if number % 3 == 2 else "MB/s"
        level = 100.0 * (number + 1) * (speed if unit == "MB/s" else 1 / speed)
        value = level * rng.lognormvariate(0, 0.03)
        out.append({"metric": f"m{number}", "value": value, "unit": unit, "status": "ok",
                    "reason": ""})  # fmt: skip
    return out


def write_study(results: Path, machine: str, study: str, size: dict, day: int) -> dict:
    """results/<machine>/<study>/ as the pipeline leaves it; the append command's arguments."""
    folder = results / machine / study
    rng = random.Random(f"{machine}/{study}/{day}")
    paths, second = [], 0
    for index in range(size["points"]):
        for rep in range(size["repetitions"] + 1):  # repetition 0 is the warm-up
            second += 2
            started = f"2026-01-{day:02d}T{second // 3600:02d}:{second // 60 % 60:02d}:" \
                f"{second % 60:02d}+00:00"  # fmt: skip
            metrics = point_metrics(rng, SPEED[machine], size["metrics"])
            raw = record(study, index, rep, metrics, started)
            path = folder / resultsdb.raw_path(raw["spec"])
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(raw, indent=1, sort_keys=True))
            paths.append(str(path))
    provenance = folder / "provenance"
    provenance.mkdir(parents=True, exist_ok=True)
    described = {name: {"path": f"/scratch/{name}", "class": c} for name, c in TIERS}
    tiers = {"host": HOST, "tools": {"fio": "fio-3.33"}, "tiers": described}
    (provenance / "tiers.json").write_text(json.dumps(tiers))
    aggregate.main([
        "--results", str(folder / "results.csv"), "--summary", str(folder / "summary.csv"),
        "--nodes", str(provenance / "nodes.json"), *paths,
    ])  # fmt: skip
    verdict = {"document": "000", "verdicts": [
        {"lesson": f"lesson {n} of {study}", "status": "reproduced", "text": "1.2x",
         "low": 1.1, "high": 1.3, "comparisons": []} for n in range(2)]}  # fmt: skip
    (folder / "verdict.json").write_text(json.dumps(verdict))
    return {"folder": folder, "raw": paths}


def append_command(db: Path, machine: str, study: str, made: dict) -> list[str]:
    """What the record_run rule runs for a study (workflow/rules/database.smk)."""
    folder = made["folder"]
    return [
        sys.executable, "-m", "tierbench.resultsdb_cli", "append", "--db", str(db),
        "--machine", machine, "--study", study, "--scale", "default", "--executor", "local",
        "--noise-threshold", "0.25", "--results", str(folder / "results.csv"),
        "--summary", str(folder / "summary.csv"), "--verdict", str(folder / "verdict.json"),
        "--provenance", str(folder / "provenance" / "tiers.json"),
        "--nodes", str(folder / "provenance" / "nodes.json"),
        "--out", str(folder / "run.json"), *made["raw"],
    ]  # fmt: skip


def timed(command: list[str], cwd: Path) -> float:
    """Wall time of a command; a failure raises with its last line."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "workflow")}
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"{' '.join(command[1:4])} failed: {last}")
    return seconds


def one_round(scratch: Path, runs: dict, round_: int) -> tuple[list[float], float]:
    """Every study of both machines appended into a fresh database, then the comparison."""
    db = scratch / f"round{round_}" / "tierbench.sqlite"
    db.parent.mkdir()
    appends = []
    for machine in rotated(MACHINES, round_):
        for study, made in runs[machine].items():
            appends.append(timed(append_command(db, machine, study, made), scratch))
    out = db.parent / "compare.html"
    compare = [sys.executable, "-m", "tierbench.compare", *MACHINES, "--db", str(db),
               "--out", str(out)]  # fmt: skip
    seconds = timed(compare, scratch)
    if not out.is_file() or out.stat().st_size == 0:
        raise RuntimeError(f"tierbench.compare wrote no {out}")
    return appends, seconds


def measure(mode: str, scratch: Path, goal) -> list[dict]:
    size = SIZES[mode]
    append_goal, compare_goal = goal
    results = scratch / "results"
    runs = {
        machine: {
            f"study{n}": write_study(results, machine, f"study{n}", size, day)
            for n in range(size["studies"])
        }
        for day, machine in enumerate(MACHINES, 1)
    }
    records = size["studies"] * size["points"] * (size["repetitions"] + 1)
    log(f"7 made {records} raw records per machine")
    appends, compares = [], []
    for round_ in range(size["rounds"]):
        seconds, compared = one_round(scratch, runs, round_)
        appends += seconds
        compares.append(compared)
        log(f"7 round {round_ + 1}: appends {sum(seconds):.1f} s in all, compare {compared:.1f} s")
    per_study = size["points"] * (size["repetitions"] + 1)
    shape = (
        f"{size['studies']} studies x {size['points']} points x (1 warm-up + "
        f"{size['repetitions']}) repetitions x {size['metrics']} metrics per machine"
    )
    paper_appends = [
        sum(appends[i : i + size["studies"]]) for i in range(0, len(appends), size["studies"])
    ]
    return [
        row(
            7, "resultsdb_append", f"Append one study ({per_study} raw records) to the results "
            "database (`python -m tierbench.resultsdb_cli append`)", "s", appends, append_goal,
            f"{shape}; a whole paper's appends: "
            + ", ".join(f"{s:.1f} s" for s in paper_appends)
            + "; each a fresh process, imports included, into the database on the scratch disk",
            paper_appends_s=paper_appends,
        ),
        row(
            7, "compare_two_papers", "Compare two paper runs (`python -m tierbench.compare ws "
            "cluster`, writing compare.html)", "s", compares, compare_goal,
            f"{shape}; {2 * size['studies'] * size['points']} points' medians with bootstrap "
            "intervals; a fresh process, imports included",
        ),
    ]  # fmt: skip
