"""What every bench item shares: goals, rows of the table, the machine, rounds, and the table.

An item is a module with ``measure(mode, scratch, goal) -> list[dict]``, each
dict a row made by :func:`row`. ``mode`` is ``"full"`` (what docs/instruments.md
shows) or ``"tiny"`` (toy sizes: a check that the item works, not a
measurement); ``scratch`` is an empty folder of the item's own, removed after
it; ``goal`` is what the entry point (``bench/run.py``) sets for the item.
"""

from __future__ import annotations

import json
import math
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import NamedTuple

REPO = Path(__file__).resolve().parents[1]
if str(REPO / "workflow") not in sys.path:
    sys.path.insert(0, str(REPO / "workflow"))

#: the tier the instruments are measured on: memory, so the instrument's own cost shows
TIER = "/dev/shm"
#: what a scratch copy of the pipeline needs (as tests/conftest.py)
PIPELINE_FILES = ["Snakefile", "workflow", "config", "notebooks", "profiles", "envs"]
MODES = ("full", "tiny")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- goals and items


class Goal(NamedTuple):
    """A bound the median of a row must meet: ``op`` is ">=" or "<="."""

    op: str
    value: float
    unit: str = "ratio"

    def met_by(self, median: float) -> bool:
        return bool(median >= self.value if self.op == ">=" else median <= self.value)

    def decided(self, low: float, high: float) -> str:
        """What an interval [low, high] of the figure says of the goal."""
        if self.met_by(low) and self.met_by(high):
            return "the interval meets the goal"
        if not self.met_by(low) and not self.met_by(high):
            return "the interval misses the goal"
        return "the interval straddles the goal: undecided"


def at_least(value: float, unit: str = "ratio") -> Goal:
    return Goal(">=", value, unit)


def at_most(value: float, unit: str = "ratio") -> Goal:
    return Goal("<=", value, unit)


@dataclass(frozen=True)
class Item:
    """One line of the bench table: an instrument, what it is measured against, and the goal.

    ``goal`` is one Goal, or a tuple of them for an item whose rows have
    goals of their own (the module says which is which).
    """

    number: int
    instrument: str
    reference: str
    goal: Goal | tuple[Goal, ...]
    module: ModuleType

    @property
    def first_goal(self) -> Goal:
        return self.goal if isinstance(self.goal, Goal) else self.goal[0]


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


def job_spec(
    workload: str,
    experiment: str,
    params: dict,
    tier_path: str | Path = TIER,
    tier_class: str = "shm",
    tier: str = "bench",
    point: str = "p",
    **extra,
) -> dict:
    """A measured job's spec for tierbench.runner.run_job, as the pipeline makes one; ``extra``
    adds keys (a ``launcher``)."""
    return {
        "study": "bench", "experiment": experiment, "workload": workload, "tier": tier,
        "tier_path": str(tier_path), "tier_class": tier_class, "max_bytes": None,
        "point": point, "params": params, "repetition": 1, "phase": "measured", **extra,
    }  # fmt: skip


def within(ratios: list[float], low: float, high: float) -> str:
    """The median of per-round ratios with its 95 % bootstrap interval, against low-high."""
    from tierbench import intervals

    found = intervals.of_medians([intervals.sample(ratios)], lambda medians: medians[:, 0])
    if not found.known:
        return f"median ratio {found.estimate:.3f} (no interval: {found.reason})"
    band = f"{low:g}-{high:g}"
    said = (
        f"within {band}"
        if low <= found.low and found.high <= high
        else f"outside {band}"
        if found.high < low or found.low > high
        else f"straddles {low:g} or {high:g}: undecided"
    )
    return (
        f"median ratio {found.estimate:.3f} [{found.low:.3f}, {found.high:.3f}] "
        f"(95 %, bootstrap): {said}"
    )


def row(item, key, measure, unit, values, goal=None, detail="", **extra) -> dict:
    """One line of the table: the median of ``values`` against ``goal`` (a Goal) or None."""
    stats = spread(values)
    met = None
    if goal is not None and stats["median"] is not None:
        met = goal.met_by(stats["median"])
    return {
        "item": item,
        "key": key,
        "measure": measure,
        "unit": unit,
        "values": values,
        **stats,
        "goal": None if goal is None else {"op": goal.op, "value": goal.value},
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


# ---------------------------------------------------------------- rounds and timing


def rotated(names: Sequence[str], round_: int) -> tuple[str, ...]:
    """The order of a round: shifted by one each round, so no run always follows the same one.

    For two instruments this alternates which goes first.
    """
    shift = round_ % len(names)
    return tuple(names[shift:]) + tuple(names[:shift])


def snakemake(
    args: list[str], cwd: Path, timeout: float = 3600
) -> tuple[float, subprocess.CompletedProcess]:
    """Wall time of one snakemake command in ``cwd``, and its outcome."""
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


def copy_pipeline(scratch: Path, name: str, origin: Path = REPO) -> Path:
    """A copy of the pipeline, without results, for a run that must not touch the clone's
    (``origin``: the checkout to copy, or an earlier copy of it)."""
    root = scratch / name
    root.mkdir()
    for entry in PIPELINE_FILES:
        source = origin / entry
        if source.is_dir():
            shutil.copytree(
                source, root / entry, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
            )
        else:
            shutil.copy2(source, root / entry)
    return root


def set_top_level(path: Path, key: str, change) -> bool:
    """A YAML file's top-level ``key:`` set to ``change(its value as written)``; whether it
    had one. A text edit, not a YAML round trip: comments and anchors stay as they are."""
    text, found = re.subn(
        rf"^{re.escape(key)}:[ \t]*(.*)$",
        lambda m: f"{key}: {change(m.group(1))}",
        path.read_text(),
        flags=re.MULTILINE,
    )
    if found:
        path.write_text(text)
    return bool(found)


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


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")


# ---------------------------------------------------------------- running the items


def run_items(items: list[Item], mode: str, only: set[int], command: str) -> dict:
    """Every item in ``only``, in order, each in its own scratch folder; the whole result.

    One broken instrument must not hide the others: an item that raises
    stands in the table as one failed row with the error.
    """
    result = {
        "mode": mode,
        "command": command,
        "started_at": now(),
        "machine": machine(),
        "load_start": load_average(),
        "rows": [],
    }
    with tempfile.TemporaryDirectory(prefix="tierbench-bench-") as tmp:
        for item in items:
            if item.number not in only:
                continue
            scratch = Path(tmp) / f"item{item.number}"
            scratch.mkdir()
            log(f"item {item.number}: {item.instrument} (load {load_average()})")
            result["rows"].extend(run_item(item, mode, scratch))
    result["load_end"] = load_average()
    result["finished_at"] = now()
    result["table"] = table(result)
    return result


def run_item(item: Item, mode: str, scratch: Path) -> list[dict]:
    try:
        return item.module.measure(mode, scratch, item.goal)
    except Exception as error:  # reported in the table; the other items go on
        message = f"{type(error).__name__}: {error}"
        log(f"item {item.number} failed: {message}")
        goal = item.first_goal
        key = item.module.__name__.rsplit(".", 1)[-1]
        return [failed_row(item.number, key, item.instrument, goal.unit, message, goal)]


def write_json(result: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1) + "\n")


def default_json_path(mode: str) -> Path:
    stamp = datetime.now().strftime("%Y%m%dT%H%M%S")
    return REPO / "results/bench" / f"bench-{mode}-{stamp}.json"


# ---------------------------------------------------------------- the table


def fmt(value, unit) -> str:
    if value is None:
        return "–"
    if unit == "s":
        return f"{value:.2f} s" if value < 100 else f"{value:.0f} s"
    return f"{value:.3f}" if value < 10 else f"{value:.1f}"


def table(result: dict) -> str:
    """The markdown table docs/instruments.md shows, with the run's machine and load above it."""
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
    lines += [table_line(r) for r in result["rows"]]
    return "\n".join(lines)


def table_line(r: dict) -> str:
    goal = (
        "–"
        if r["goal"] is None
        else f"{'≥' if r['goal']['op'] == '>=' else '≤'} {fmt(r['goal']['value'], r['unit'])}"
    )
    met = {True: "yes", False: "**no**", None: "–"}[r["met"]]
    span = "–" if r["min"] is None else f"{fmt(r['min'], r['unit'])}–{fmt(r['max'], r['unit'])}"
    return (
        f"| {r['item']} | {r['measure']} | {fmt(r['median'], r['unit'])} | {span} | {r['n']} "
        f"| {goal} | {met} | {r['detail']} |"
    )
