"""Where a proxy was shown faithful: the shapes it matched its application at, and whether
a lesson's point lies among them or between two faithful shapes that differ in one number.
"""

from __future__ import annotations

import math

from ..matrix import param_text as _norm
from ..workloads import Pair
from .points import (
    DIFFERS,
    FAITHFUL,
    FOUND,
    NOT_COMPARED,
    WITHIN_NOISE,
    Point,
    matches,
    shape_keys,
)
from .table import (
    COLUMNS,
    Report,
    compute_rows,
    cost_model_rows,
    cost_rows,
    ensemble_matches,
    ensemble_rows,
    output_rows,
    syscall_rows,
    tier_rows,
    verdict,
)

# ------------------------------------------------------------------ where it holds


def shape_map(report: Report) -> list[dict]:
    """Per compared shape: faithful, differs or within noise, over every tier and quantity.

    A shape is *faithful* when every decided comparison there agrees (on every
    tier, and the tier ratio) and both its I/O cost and its compute were decided;
    its compute may come from the shape that differs only in the write interval
    (one baseline serves every interval, so its row is shown once).
    """
    keys = report.keys
    groups: dict[tuple, list[dict]] = {}
    for line in report.rows:
        if line["params"] and line["section"] != "system calls":  # traced runs: counts only
            groups.setdefault(tuple(line["params"].get(k, "") for k in keys), []).append(line)
    computes: dict[tuple, list[dict]] = {}
    for shape, lines in groups.items():
        shared = computes.setdefault(_but_interval(shape, keys), [])
        shared.extend(r for r in lines if r["section"] == "compute")
    found = []
    for shape, lines in groups.items():
        judged = [r for r in lines if r["decision"]]
        shared = computes.get(_but_interval(shape, keys), [])
        judged += [r for r in shared if r["decision"] and r not in judged]
        differs = [r for r in judged if r["decision"] == DIFFERS]
        agree = {r["section"] for r in judged if r["decision"] == "agrees"}
        open_ = [r for r in judged if r["decision"] == WITHIN_NOISE]
        if differs:
            status, why = DIFFERS, differs
        elif not open_ and {"I/O cost", "compute"} <= agree:
            status, why = FAITHFUL, []
        else:
            status = WITHIN_NOISE
            why = open_ or [{"quantity": "I/O cost or compute not decided here", "tier": ""}]
        params = dict(zip(keys, shape, strict=True))
        named = ", ".join(f"{k}={params[k]}" for k in report.varying) or "the one shape"
        why = [_where_text(r) for r in why]
        found.append({"params": params, "shape": named, "verdict": status, "why": why})
    return found


def _but_interval(shape: tuple, keys: tuple[str, ...]) -> tuple:
    """A shape without its write interval: the shapes that share one no-write baseline."""
    return tuple(v for k, v in zip(keys, shape, strict=True) if k != "write_interval")


def _where_text(line: dict) -> str:
    """A line a shape's verdict rests on, with its ratio and what explains it, if known."""
    tier = line["tier"] if line["tier"] not in line["quantity"] else ""
    where = line["quantity"] + (f" on {tier}" if tier else "")
    if line.get("ratio") is None:
        return f"{where}: {line['unknown']}" if line.get("unknown") else where
    text = line["text"]
    found = text["ratio"] + (f" {text['interval']}" if text["interval"] != "unknown" else "")
    explains = line.get("explains")
    return f"{where}: proxy / real {found}" + (f" ({explains})" if explains else "")


def _number(value: str) -> float | None:
    try:
        return float(value)
    except ValueError:
        return None


def _distance(a: dict, b: dict, keys) -> tuple[int, float]:
    """Parameters apart, then how far apart the numbers are (factors, not differences).

    A number against a word (write interval 10 against none) is farthest: a shape without
    writes says nothing of a write's cost.
    """
    apart = [k for k in keys if a[k] != b[k]]
    numbers = [(_number(a[k]), _number(b[k])) for k in apart]
    spread = sum(abs(math.log(x / y)) for x, y in numbers if x and y and x > 0 and y > 0)
    if any((x is None) != (y is None) for x, y in numbers):
        spread = math.inf
    return len(apart), spread


def outside_region(entry: dict, params: dict) -> str | None:
    """Why a point with ``params`` lies outside the shapes where the proxy was faithful, or
    None when it lies inside.

    Inside: the point's shape is a faithful shape, or lies between two faithful
    shapes that differ in one number only (cells per rank, ranks, write interval),
    with every other parameter equal. Nothing else is taken as covered: a proxy
    faithful at 10,000 cells per rank and at 2 ranks says nothing of 100,000 at 4.
    """
    shapes = entry.get("shapes") or []
    keys = entry.get("shape") or []
    faithful = [s["params"] for s in shapes if s["verdict"] == FAITHFUL]
    want = {k: _norm(params.get(k)) for k in keys}
    if not shapes:
        return f"{entry.get('proxy')} was compared with {entry.get('real')} at no shape"
    for a in faithful:
        if all(a[k] == want[k] for k in keys):
            return None
        for b in faithful:
            apart = [k for k in keys if a[k] != b[k]]
            if len(apart) != 1 or any(a[k] != want[k] for k in keys if k != apart[0]):
                continue
            low, high, value = (_number(x[apart[0]]) for x in (a, b, want))
            if None not in (low, high, value) and min(low, high) <= value <= max(low, high):
                return None
    near = min(shapes, key=lambda s: _distance(s["params"], want, keys))
    apart = ", ".join(f"{k}={want[k]}" for k in keys if near["params"][k] != want[k])
    found, why = FOUND[near["verdict"]], "; ".join(near["why"])
    if not apart:
        return f"the proxy was compared at this shape and {found} there" + (why and f": {why}")
    return (
        f"the proxy's fidelity was not shown at this shape: at the nearest compared shape "
        f"({near['shape']}) it {found}{why and f' ({why})'}, and this point has {apart}"
    )


def compare(pair: Pair, points: list[Point], not_counted: dict[str, str]) -> dict | None:
    """A proxy's table and verdict, or None when the study holds neither of the pair."""
    points = [p for p in points if not any(p.param(k) for k in pair.own_input)]
    if not any(p.workload in (pair.proxy, pair.real) for p in points):
        return None
    keys = shape_keys(pair, points)
    report = Report(pair, keys)
    timed, traced = matches(pair, points, traced=False), matches(pair, points, traced=True)
    ensembles = ensemble_matches(pair, points)
    compared = timed + traced + ensembles
    report.varying = tuple(k for k in keys if len({m.proxy.param(k) for m in compared}) > 1)
    for m in timed:
        output_rows(report, m)
        compute_rows(report, m)
        cost_rows(report, m)
    for m in ensembles:
        ensemble_rows(report, m)
    cost_model_rows(report, timed)
    counting = syscall_rows(report, traced, not_counted)
    tier_rows(report, timed)
    if not timed:
        status = NOT_COMPARED
        where = f"on the same tier with the same shape ({', '.join(pair.shape)})"
        reasons = [f"no untraced points of {pair.proxy} and {pair.real} {where}"]
    else:
        status, reasons = verdict(report)
    return {
        "proxy": pair.proxy,
        "real": pair.real,
        "unit": pair.unit,
        "shape": list(keys),
        "verdict": status,
        "reasons": reasons,
        "notes": report.notes,
        "syscalls": counting,
        "compared_points": len(timed),
        "varying": list(report.varying),
        "shapes": shape_map(report),
        "columns": [{"key": k, "title": t} for k, t in COLUMNS],
        "rows": report.rows,
    }
