"""results/compare.html: the same study on several machines, or several runs of one machine.

    python -m tierbench.compare A B [C ...] [--baseline RUN_ID] [--study S]

A, B, ... are machine names (each machine's latest run of every study) or run
ids (a unique prefix will do). Every side is set against the first (or, with
``--baseline``, against that saved run): per point and metric, the ratio of the
medians (other / reference) with a 95% interval from a seeded bootstrap over
both sides' measured repetitions. Points match on experiment, workload, tier
class, the point's full parameters and the metric (tier names differ between
machines; where a side has several tiers of one class, on the tier name too).

A point is flagged changed only when its interval excludes 1. With three
repetitions a side the interval spans about (min B / max A, max B / min A), so
"changed" means the two sides' ranges do not overlap. So few repetitions make
the interval narrower than 95%: on identical synthetic data it flags about 10%
of points with 3 repetitions a side, 8% with 4, 3-4% with 5 to 8, and 33% with
2, so fewer than 3 leave a point undecided and the page says how many flags
chance alone would give (:data:`CHANCE_FLAGS`). Which way is better comes from the unit, then the
metric's name (see :func:`sense`): rates (a unit per second) higher, times
(s, ms, us, ns) lower; a metric that is neither (bytes, %, counts) is only
called higher or lower.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from jinja2 import Environment, FileSystemLoader, select_autoescape

from . import __version__
from .predict import predictions
from .records import utc_now
from .report import TEMPLATES, number
from .resultsdb import DB_HELP, ResultsError, connect, default_db, named_runs
from .units import format_size

BOOTSTRAP_SAMPLES = 2000
SEED = 0
TIME_UNITS = {"s", "ms", "us", "µs", "ns", "min", "h"}
#: words of a metric's name (split at "_") that say which way is better, when the unit does not
HIGHER_NAMES = {"bandwidth", "throughput", "iops", "rate", "speed"}
LOWER_NAMES = {"time", "lat", "clat", "latency", "duration", "elapsed"}
FASTER, SLOWER, HIGHER, LOWER = "faster", "slower", "higher", "lower"
MIN_REPETITIONS = 3
#: share of unchanged points flagged, by the fewer repetitions of the two sides: measured on
#: 4,000 synthetic points with identical log-normal noise on both sides (n >= 5: nominal 5%)
CHANCE_FLAGS = {3: 0.10, 4: 0.08}
WITHIN_NOISE, UNDECIDED = "within noise", "undecided"


@dataclass
class Side:
    """One column of the comparison: a machine's latest runs, or one run."""

    label: str
    runs: dict[str, dict] = field(default_factory=dict)  # study -> run row


# --- which runs -------------------------------------------------------------------


def resolve(conn: sqlite3.Connection, selector: str, study: str | None = None) -> Side:
    """A machine name (its latest run of each study) or a run id / unique prefix."""
    runs, is_machine = named_runs(conn, selector)
    if is_machine:
        side = Side(selector, {run["study"]: run for run in runs})  # oldest first: last wins
    else:
        (run,) = runs
        side = Side(f"{run['machine']} {run['run_id'][:8]}", {run["study"]: run})
    if study is not None:
        if study not in side.runs:
            raise ResultsError(
                f"{selector} has no run of study {study} (its studies: {', '.join(side.runs)})"
            )
        side.runs = {study: side.runs[study]}
    return side


# --- the numbers ------------------------------------------------------------------


def sense(metric: str, unit: str) -> str | None:
    """'higher' or 'lower' is better, or None: from the unit, then the metric's name."""
    unit = (unit or "").strip()
    if unit.endswith("/s"):
        return HIGHER
    if unit in TIME_UNITS:
        return LOWER
    words = set(metric.lower().split("_"))
    if words & HIGHER_NAMES:
        return HIGHER
    if words & LOWER_NAMES:
        return LOWER
    return None


def ratio_intervals(reference: np.ndarray, other: np.ndarray, seed: int = SEED):
    """Ratios of medians other/reference and 95% percentile-bootstrap intervals, many at once.

    reference is (points, n_a), other (points, n_b). The resampling depends on
    (n_a, n_b) and the seed only, so a point gets the same interval alone or
    among others.
    """
    rng = np.random.default_rng(seed)
    pick_a = rng.integers(0, reference.shape[1], (BOOTSTRAP_SAMPLES, reference.shape[1]))
    pick_b = rng.integers(0, other.shape[1], (BOOTSTRAP_SAMPLES, other.shape[1]))
    out = []
    for start in range(0, len(reference), 256):  # bounded memory: 256 x 2000 x n floats
        a, b = reference[start : start + 256], other[start : start + 256]
        ratios = np.median(b[:, pick_b], axis=2) / np.median(a[:, pick_a], axis=2)
        low, high = np.percentile(ratios, [2.5, 97.5], axis=1)
        point = np.median(b, axis=1) / np.median(a, axis=1)
        out += zip(point.tolist(), low.tolist(), high.tolist(), strict=True)
    return out


def ratio_interval(reference: np.ndarray, other: np.ndarray, seed: int = SEED):
    """One point's ratio of medians and its interval."""
    return ratio_intervals(reference[None, :], other[None, :], seed)[0]


def _problem(reference: np.ndarray, other: np.ndarray) -> str:
    """Why no interval can be had, or ''."""
    if min(len(reference), len(other)) < MIN_REPETITIONS:
        return f"fewer than {MIN_REPETITIONS} repetitions on a side: no trustworthy interval"
    if np.min(reference) <= 0 or np.min(other) < 0:
        return "a ratio needs positive reference values (and no negative ones)"
    return ""


def _result(ratio: float, low: float, high: float, metric: str, unit: str) -> dict:
    out = {"ratio": ratio, "low": low, "high": high, "note": ""}
    if low <= 1.0 <= high:
        return {**out, "result": WITHIN_NOISE}
    up = low > 1.0
    better = sense(metric, unit)
    if better is None:
        return {**out, "result": HIGHER if up else LOWER}
    return {**out, "result": FASTER if up == (better == HIGHER) else SLOWER}


def judge_many(items: list[tuple]) -> list[dict]:
    """(reference values, other values, metric, unit) -> ratio, interval and what it says."""
    results: list[dict | None] = [None] * len(items)
    shapes: dict[tuple, list[int]] = {}
    for index, (a, b, _, _) in enumerate(items):
        problem = _problem(a, b)
        if problem:
            results[index] = {
                "ratio": None, "low": None, "high": None, "note": problem, "result": UNDECIDED
            }  # fmt: skip
        else:
            shapes.setdefault((len(a), len(b)), []).append(index)
    for indices in shapes.values():
        a = np.array([items[i][0] for i in indices], dtype=float)
        b = np.array([items[i][1] for i in indices], dtype=float)
        for i, (ratio, low, high) in zip(indices, ratio_intervals(a, b), strict=True):
            results[i] = _result(ratio, low, high, items[i][2], items[i][3])
    return results


def judge(reference: np.ndarray, other: np.ndarray, metric: str, unit: str) -> dict:
    """One point: the ratio, its interval and what it says ('faster', 'within noise'...)."""
    return judge_many([(reference, other, metric, unit)])[0]


def load_values(conn: sqlite3.Connection, run_id: str) -> dict[tuple, dict]:
    """Measured values of a run: (experiment, workload, tier_class, params, metric, tier) -> ..."""
    groups: dict[tuple, dict] = {}
    rows = conn.execute(
        "SELECT experiment, workload, tier_class, params, metric, tier, point, unit, value"
        " FROM measurements WHERE run_id = ? AND phase = 'measured' AND status = 'ok'"
        " AND value IS NOT NULL",
        (run_id,),
    )
    for experiment, workload, cls, params, metric, tier, point, unit, value in rows:
        key = (experiment, workload, cls, params, metric, tier)
        entry = groups.setdefault(key, {"point": point, "unit": unit, "values": []})
        entry["values"].append(value)
    return groups


def match(reference: dict[tuple, dict], other: dict[tuple, dict]) -> list[tuple]:
    """Pairs of (ref key, other key): one tier of a class on each side, or equal tier names."""
    by_class: dict[tuple, list] = {}
    for key in reference:
        by_class.setdefault(key[:5], [[], []])[0].append(key)
    for key in other:
        by_class.setdefault(key[:5], [[], []])[1].append(key)
    pairs = []
    for refs, others in by_class.values():
        if len(refs) == 1 and len(others) == 1:
            pairs.append((refs[0], others[0]))
            continue
        names = {key[5]: key for key in others}
        pairs += [(key, names[key[5]]) for key in refs if key[5] in names]
    return sorted(pairs)


def compare_runs(conn, study: str, ref_run: dict, other_run: dict) -> tuple[list[dict], int, int]:
    """Rows of one study's comparison; and how many point metrics only one side has."""
    reference, other = load_values(conn, ref_run["run_id"]), load_values(conn, other_run["run_id"])
    pairs = match(reference, other)
    rows, items = [], []
    for ref_key, other_key in pairs:
        a, b = reference[ref_key], other[other_key]
        if a["unit"] != b["unit"]:
            continue
        experiment, workload, cls, params, metric, _ = ref_key
        values_a, values_b = np.array(a["values"], float), np.array(b["values"], float)
        items.append((values_a, values_b, metric, a["unit"]))
        rows.append(
            {
                "study": study,
                "experiment": experiment,
                "workload": workload,
                "tier_class": cls,
                "tier_a": ref_key[5],
                "tier_b": other_key[5],
                "point": a["point"],
                "params": params,
                "metric": metric,
                "unit": a["unit"],
                "median_a": float(np.median(values_a)),
                "median_b": float(np.median(values_b)),
                "n_a": len(values_a),
                "n_b": len(values_b),
            }
        )
    for row, judged in zip(rows, judge_many(items), strict=True):
        row.update(judged)
    return rows, len(reference) - len(rows), len(other) - len(rows)


# --- the page ---------------------------------------------------------------------

ORDER = {SLOWER: 0, FASTER: 1, LOWER: 2, HIGHER: 3, WITHIN_NOISE: 4, UNDECIDED: 5}


@dataclass
class Pair:
    reference: Side
    other: Side
    rows: list[dict]
    only_reference: int
    only_other: int

    @property
    def by_chance(self) -> int:
        """How many flags identical data would give, at the sides' repetition counts."""
        rates = [
            CHANCE_FLAGS.get(min(r["n_a"], r["n_b"]), 0.05)
            for r in self.rows
            if r["result"] != UNDECIDED
        ]
        return round(sum(rates))

    @property
    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(ORDER, 0)
        for row in self.rows:
            counts[row["result"]] += 1
        return counts


def compare(conn, sides: list[Side], reference: Side) -> list[Pair]:
    """Every side against the reference, over the studies both have; refuse a pair with none."""
    pairs = []
    for side in sides:
        if side is reference:
            continue
        common = [s for s in reference.runs if s in side.runs]
        if not common:
            raise ResultsError(
                f"{reference.label} (studies: {', '.join(reference.runs)}) and {side.label} "
                f"(studies: {', '.join(side.runs)}) share no study"
            )
        rows, only_ref, only_other = [], 0, 0
        for study in common:
            found, a, b = compare_runs(conn, study, reference.runs[study], side.runs[study])
            rows += found
            only_ref, only_other = only_ref + a, only_other + b
        if not rows:
            raise ResultsError(
                f"{reference.label} and {side.label} share no points in {', '.join(common)} "
                "(experiment, workload, tier class, parameters and metric must match)"
                + scales_apart(reference, side, common)
            )
        rows.sort(key=lambda r: (ORDER[r["result"]], r["study"], r["experiment"], r["point"]))
        pairs.append(Pair(reference, side, rows, only_ref, only_other))
    return pairs


def scales_apart(reference: Side, side: Side, studies: list[str]) -> str:
    """Where the two ran a study at different scales (its sizes differ, so no point
    matches): said, with what to do."""
    apart = [
        f"{study} ran at scale {reference.runs[study]['scale']} on {reference.label}, "
        f"at scale {side.runs[study]['scale']} on {side.label}"
        for study in studies
        if reference.runs[study]["scale"] != side.runs[study]["scale"]
    ]
    return f": {'; '.join(apart)}; run both at one scale" if apart else ""


def provenance(conn, side: Side) -> dict:
    """What a side's numbers were measured on: host, tools, tiers, commit, scale, dates."""
    first = next(iter(side.runs.values()))
    found = conn.execute(
        "SELECT data FROM provenance WHERE run_id = ? AND name = 'tiers'", (first["run_id"],)
    ).fetchone()
    probe = json.loads(found[0]) if found else {}
    host = probe.get("host", {})
    tiers = []
    for name, tier in sorted(probe.get("tiers", {}).items()):
        device = tier.get("block_device") or {}
        tiers.append(
            f"{name} ({tier.get('class', '?')}): {tier.get('fs_type') or '?'}"
            f"{' on ' + device['model'] if device.get('model') else ''}"
            f"{' ' + str(tier.get('source')) if tier.get('source') else ''}"
        )
    memory = host.get("memory_bytes")
    return {
        "machine": first["machine"],
        "host": host.get("host", ""),
        "cpu": f"{host.get('cpu_model', '?')} ({host.get('cores', '?')} cores)",
        "memory": format_size(memory) if memory else "?",
        "kernel": f"{host.get('kernel', '?')}, {host.get('os', '?')}",
        "tools": {k: v for k, v in sorted(probe.get("tools", {}).items()) if v},
        "tiers": tiers,
        "runs": [
            {
                "study": study,
                "run_id": run["run_id"],
                "scale": run["scale"] or "?",
                "executor": run["executor"],
                "commit": (run["git_commit"] or "?")[:12]
                + ("-dirty" if (run["git_commit"] or "").endswith("-dirty") else ""),
                "dates": f"{run['started'][:16]} – {run['finished'][:16]}",
            }
            for study, run in side.runs.items()
        ],
    }


def verdict_table(conn, sides: list[Side]) -> dict:
    """Paper verdicts as lesson (rows) x side (columns)."""
    lessons: dict[tuple, dict] = {}
    for index, side in enumerate(sides):
        for study, run in side.runs.items():
            rows = conn.execute(
                "SELECT position, lesson, status, text, data FROM verdicts WHERE run_id = ?"
                " ORDER BY position",
                (run["run_id"],),
            )
            for position, lesson, status, text, data in rows:
                extra = json.loads(data) if data else {}
                cell = {"status": status or "?", "text": text or ""}
                low, high = extra.get("low"), extra.get("high")
                if isinstance(low, (int, float)) and isinstance(high, (int, float)):
                    cell["interval"] = f"{number(low)} – {number(high)}"
                entry = lessons.setdefault((study, position, lesson), {})
                entry[index] = cell
    rows = [
        {"study": study, "lesson": lesson, "cells": [cells.get(i) for i in range(len(sides))]}
        for (study, _, lesson), cells in sorted(lessons.items())
    ]
    return {"rows": rows}


def job_predictions(conn, sides: list[Side]) -> dict:
    """The sides' jobs (timed and traced) on every tier of the sides' machines (predict)."""
    runs = [run for side in sides for run in side.runs.values()]
    return predictions(conn, runs, {run["machine"] for run in runs})


def render(conn, sides: list[Side], reference: Side, baseline: bool) -> tuple[str, list[Pair]]:
    pairs = compare(conn, sides, reference)
    columns = [reference] + [s for s in sides if s is not reference]
    env = Environment(
        loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html", "j2"])
    )
    env.filters["number"] = number
    html = env.get_template("compare.html.j2").render(
        pairs=pairs,
        columns=[{"label": s.label, **provenance(conn, s)} for s in columns],
        verdicts=verdict_table(conn, columns),
        predictions=job_predictions(conn, columns),
        baseline=baseline,
        reference=reference.label,
        generated_at=utc_now(),
        version=__version__,
        samples=BOOTSTRAP_SAMPLES,
    )
    return html, pairs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sides", nargs="*", help="machine names or run ids")
    parser.add_argument("--baseline", help="a saved run id: mark points slower than it")
    parser.add_argument("--study", help="compare this study only")
    parser.add_argument("--db", default=default_db(), help=DB_HELP)
    parser.add_argument("--out", default="results/compare.html")
    args = parser.parse_args(argv)
    try:
        html, described = build(args)
    except ResultsError as error:
        print(f"tierbench compare: {error}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f"{out.name}.tmp-{os.getpid()}")
    tmp.write_text(html)
    os.replace(tmp, out)
    print(f"wrote {out}: {described}", file=sys.stderr)
    return 0


def build(args) -> tuple[str, str]:
    """The page, or a ResultsError before anything is written."""
    needed = 1 if args.baseline else 2
    if len(args.sides) < needed:
        raise ResultsError(
            "name at least two machines or runs to compare (or one and --baseline RUN_ID)"
        )
    if not Path(args.db).is_file():
        raise ResultsError(f"no results database at {args.db} (a finished study run creates it)")
    conn = connect(args.db)
    try:
        sides = [resolve(conn, s, args.study) for s in args.sides]
        reference = sides[0]
        if args.baseline:
            saved = resolve(conn, args.baseline, args.study)
            if len(saved.runs) != 1 or saved.label == args.baseline:
                raise ResultsError(f"--baseline needs a run id, not machine {args.baseline!r}")
            reference = saved
            sides = [saved, *sides]
        html, pairs = render(conn, sides, reference, bool(args.baseline))
    finally:
        conn.close()
    told = []
    for pair in pairs:
        counts = pair.counts
        changed = sum(counts[k] for k in (FASTER, SLOWER, HIGHER, LOWER))
        told.append(
            f"{pair.other.label} vs {reference.label}: {len(pair.rows)} point metrics, "
            f"{changed} changed ({counts[FASTER]} faster, {counts[SLOWER]} slower)"
        )
    return html, "; ".join(told)


if __name__ == "__main__":
    raise SystemExit(main())
