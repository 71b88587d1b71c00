"""The fidelity table: a row per quantity of each matched shape, proxy beside application,
decided on the interval of their ratio; and the proxy's verdict from its rows.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from .. import intervals
from ..intervals import Interval, Sample
from ..syscalls import CATEGORIES, CATEGORY_LABELS, METRIC_PREFIX
from ..tiers import DEVICE_CLASSES, RAM_CLASSES
from ..units import format_value
from ..workloads import Pair
from .points import (
    BAND_TEXT,
    COUNT_TOLERANCE,
    DIFFERS,
    FAITHFUL,
    WITHIN_NOISE,
    Match,
    Point,
    _imitates,
    _is_baseline,
    _reaches_zero,
    _shape,
    decide,
    difference_ratio,
    per_unit,
    per_unit_sample,
    shape_keys,
    shape_text,
    units_of,
    writers_of,
)

# ------------------------------------------------------------------ the table


def _interval_text(interval: Interval | None) -> str:
    if interval is None:
        return ""
    if not interval.known:
        return "unknown"
    return f"[{interval.low:.3g}, {interval.high:.3g}]"


#: the table's columns as a report shows them: (key of a line's text or value, title)
COLUMNS = [
    ("quantity", "What"), ("tier", "Tier"), ("shape", "Shape"), ("proxy", "Proxy"),
    ("real", "Real application"), ("ratio", "Proxy / real"), ("interval", "95% interval"),
    ("decision", "Decision"), ("note", "Note"),
]  # fmt: skip


@dataclass
class Report:
    """A proxy's table and what its verdict rests on."""

    pair: Pair
    keys: tuple[str, ...]
    rows: list[dict] = field(default_factory=list)
    differs: list[str] = field(default_factory=list)
    undecided: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    decided: int = 0
    #: the (tier, points) of each compute comparison made, not to repeat one
    compared: set = field(default_factory=set)
    #: shape parameters that differ between the compared points (named in the reasons)
    varying: tuple[str, ...] = ()

    def where(self, m: Match) -> str:
        shape = shape_text(m.proxy, self.varying)
        return f"on {m.tier}" + (f" ({shape})" if shape else "")

    def add(
        self,
        section: str,
        quantity: str,
        m: Match,
        proxy: float | None,
        real: float | None,
        unit: str = "",
        interval: Interval | None = None,
        decision: str = "",
        note: str = "",
        explains: str = "",
    ) -> dict:
        """Adds one line of the table, with numbers and the text a report shows; returns it.
        ``explains``: what makes the line come out as it does (also in its note)."""
        ratio = interval.estimate if interval else None
        if ratio is None and proxy is not None and real and proxy >= 0 and real > 0:
            ratio = proxy / real  # a cost below zero is noise, and makes no ratio
        unknown = interval.reason if interval and not interval.known else ""
        if unknown:
            note = "; ".join(filter(None, [note, f"interval unknown: {unknown}"]))
        low, high, n = (interval.low, interval.high, interval.n) if interval else (None,) * 3
        line = {
            "section": section,
            "quantity": quantity,
            "tier": m.tier,
            "shape": shape_text(m.proxy, self.keys),
            "params": {k: m.proxy.param(k) for k in self.keys},
            "experiments": f"{m.proxy.experiment} / {m.real.experiment}",
            "proxy": proxy,
            "real": real,
            "unit": unit,
            "ratio": ratio,
            "low": low,
            "high": high,
            "n": n,
            "decision": decision,
            "note": note,
            "explains": explains,
            "unknown": unknown,
            "text": {
                "proxy": format_value(proxy, unit, scaled=True),
                "real": format_value(real, unit, scaled=True),
                "ratio": "n/a" if ratio is None else f"{ratio:.3f}",
                "interval": _interval_text(interval),
            },
        }
        self.rows.append(line)
        return line

    def judged(
        self, section: str, quantity: str, m: Match, *values, note: str = "", explains: str = ""
    ) -> None:
        """Adds a line that the verdict rests on (``values``: :meth:`add`'s proxy, real, unit
        and interval), judged; what differs or is undecided is kept for the verdict."""
        what, interval = f"{quantity} {self.where(m)}", values[-1]
        decision, shown = decide(interval), _interval_text(interval)
        self.decided += 1
        if decision == DIFFERS:
            ratio = f"proxy / real {interval.estimate:.3f}"
            self.differs.append(f"{what}: {ratio}, interval {shown} lies outside {BAND_TEXT}")
        elif _reaches_zero(interval):
            self.undecided.append(f"{what}: interval {shown} reaches zero: below the noise")
        elif decision == WITHIN_NOISE and interval.known:
            self.undecided.append(f"{what}: interval {shown} straddles the band {BAND_TEXT}")
        elif decision == WITHIN_NOISE:
            self.undecided.append(f"{what}: {interval.reason or 'no interval'}")
        self.add(section, quantity, m, *values, decision, note, explains)


def output_rows(report: Report, m: Match) -> None:
    """Files and folders per write of a matched pair of points, then bytes."""
    pair, unit, where = report.pair, report.pair.unit, report.where(m)
    counts = [("files", pair.files)] + ([("folders", pair.dirs)] if pair.dirs else [])
    for what, metric in counts:
        p, r = per_unit(m.proxy, pair, metric), per_unit(m.real, pair, metric)
        if p is None or r is None:
            missing = pair.proxy if p is None else pair.real
            report.undecided.append(f"{what} per {unit} {where}: {missing} reports no {metric}")
            report.add("output", f"{what} per {unit}", m, p, r)
            continue
        wp, wr = writers_of(m.proxy, pair), writers_of(m.real, pair)
        same = abs(p / wp - r / wr) < COUNT_TOLERANCE
        if not same:
            per = f"per rank per {unit}" if pair.unit == "write" else f"per {unit}"
            proxy_writes = f"{pair.proxy} writes {format_value(p / wp)} {what} {per}"
            report.differs.append(f"{proxy_writes}, {pair.real} {format_value(r / wr)} {where}")
        note = (
            f"per writer: {format_value(p / wp)} vs {format_value(r / wr)}"
            if max(wp, wr) > 1
            else ""
        )
        decision = "match" if same else DIFFERS
        report.add("output", f"{what} per {unit}", m, p, r, decision=decision, note=note)
    bytes_rows(report, m)


def bytes_rows(report: Report, m: Match) -> None:
    """Bytes per write; for FE judged per increment where the solvers report them (each
    takes its own number of increments, which bytes per evaluation follow)."""
    pair, unit = report.pair, report.pair.unit
    p_bytes, r_bytes = (per_unit_sample(x, pair, "bytes_written") for x in (m.proxy, m.real))
    if p_bytes is None or r_bytes is None:
        report.undecided.append(f"bytes per {unit} {report.where(m)}: not reported by both")
        return
    interval = intervals.ratio(p_bytes, r_bytes)
    medians = (p_bytes.median, r_bytes.median)
    steps = [x.median(pair.increments) for x in (m.proxy, m.real)] if pair.increments else []
    if not (steps and all(steps)):
        report.judged("output", f"bytes per {unit}", m, *medians, "B", interval)
        return
    note = "follows the increments each solver took (below); judged per increment"
    report.add("output", f"bytes per {unit}", m, *medians, "B", interval, note=note)
    note = "each solver's own convergence, not its output: shown, not judged"
    report.add("output", f"increments per {unit}", m, *steps, note=note)
    own = [x.sample(pair.increment_bytes) for x in (m.proxy, m.real) if pair.increment_bytes]
    if own and None not in own:
        values = (own[0].median, own[1].median, "B", intervals.ratio(*own))
        report.judged("output", "bytes per increment", m, *values)
        return
    # results without the metric: all bytes over the median evaluation's increments, which is
    # off wherever a solver cut back on some individuals and not on others
    medians = tuple(bytes_per_write_unit(x, pair) for x in (m.proxy, m.real))
    missing = f"over the median {unit}'s increments: no {pair.increment_bytes} measured"
    report.add("output", "bytes per increment", m, *medians, "B", note=f"{missing}; not judged")


def compute_samples(point: Point, base: Point | None, pair: Pair) -> tuple[Sample | None, str]:
    """A point's compute time: its no-output baseline point's, else its own within-run one."""
    _, on_baseline, within = pair.compute
    found = base.sample(on_baseline) if base is not None else None
    if found is not None:
        return found, f"{base.experiment}/{base.name}"
    return point.sample(within), f"{point.experiment}/{point.name} ({within})"


def compute_rows(report: Report, m: Match) -> None:
    """The compute of proxy and application side by side: the time without output."""
    pair, quantity = report.pair, report.pair.compute[0]
    p, p_from = compute_samples(m.proxy, m.proxy_base, pair)
    r, r_from = compute_samples(m.real, m.real_base, pair)
    if p is None or r is None:
        missing = pair.proxy if p is None else pair.real
        note = f"{missing} measured no time without output here"
        report.add("compute", quantity, m, None, None, "s", note=note)
        return
    key = (m.tier, p_from, r_from)
    if key in report.compared:  # another write interval with the same baselines
        return
    report.compared.add(key)
    target = compute_target(m, pair, p.median, r.median)
    why = "sets the share of a step a write is, and so the tier ratio"
    note = "; ".join(filter(None, [why, target, f"{p_from} / {r_from}"]))
    values = (p.median, r.median, "s", intervals.ratio(p, r))
    report.judged("compute", quantity, m, *values, note=note, explains=target)


def compute_target(m: Match, pair: Pair, proxy: float, real: float) -> str:
    """The proxy's target beside the application's compute here and the proxy's own: which
    of the two was off when the compute differs. Taken on the point the compute is (its
    no-write baseline, else itself): a target from the run just before is each job's own."""
    point = m.proxy_base if m.proxy_base is not None else m.proxy
    found = point.sample(pair.compute_target) if pair.compute_target else None
    if found is None or found.median <= 0 or real <= 0:
        return ""
    target = found.median
    shown = [format_value(seconds, "s", scaled=True) for seconds in (target, real)]
    return (
        f"{pair.proxy}'s target {shown[0]}, {pair.real}'s runs here {shown[1]}: "
        f"target / real {target / real:.2g}, and the proxy took {proxy / target:.2g} of its target"
    )


def ensemble_matches(pair: Pair, points: list[Point]) -> list[Match]:
    """No-output points of ensembles (those timing a member alone), proxy beside real on the
    same tier and shape: one proxy point per real one, the one imitating the application
    first. The file set a proxy imitates does not matter where nothing is written."""
    if not pair.alone:
        return []
    keys = shape_keys(pair, points)
    chosen = [
        p
        for p in points
        if not p.traced and _is_baseline(p, pair) and p.sample(pair.alone) is not None
    ]
    found = []
    for r in (p for p in chosen if p.workload == pair.real):
        proxies = [
            p
            for p in chosen
            if p.workload == pair.proxy and (p.tier, _shape(p, keys)) == (r.tier, _shape(r, keys))
        ]
        proxies.sort(key=lambda p: (not _imitates(p, pair), p.experiment, p.name))
        found += [Match(proxies[0], r, None, None)] if proxies else []
    return found


def slowdown(point: Point, pair: Pair) -> Sample | None:
    """Per repetition, an ensemble's time per step over its member's alone in the same job
    (as a lesson's ``relative_to``: None unless every run has both)."""
    whole, alone = point.sample(pair.time_metric), point.sample(pair.alone)
    if whole is None or alone is None:
        return None
    return intervals.per_run(whole, alone)


def ensemble_rows(report: Report, m: Match) -> None:
    """How much an ensemble's members slow each other's compute, proxy beside real: a proxy
    that matches the application's step alone may still lose less (or more) of it to a
    neighbour, and an ensemble lesson's fast tier is mostly that loss."""
    pair = report.pair
    p, r = slowdown(m.proxy, pair), slowdown(m.real, pair)
    quantity = "compute slowdown in an ensemble"
    if p is None or r is None:
        report.add("compute", quantity, m, None, None, "x", note="no member timed alone")
        return
    explains = (
        f"without writes a member's step takes {p.median:.3g}x its time alone for {pair.proxy}, "
        f"{r.median:.3g}x for {pair.real}"
    )
    why = f"{pair.time_metric} over {pair.alone}, both of the same job"
    report.judged(
        "compute", quantity, m, p.median, r.median, "x", intervals.ratio(p, r),
        note=f"{why}; {explains}", explains=explains,
    )  # fmt: skip


def cost_rows(report: Report, m: Match) -> None:
    """The I/O cost per write (FE: per increment), proxy beside real: measured within each
    run, else with output minus without."""
    pair, quantity = report.pair, f"I/O cost per {report.pair.write_unit}"
    own = [point.estimated(pair.cost_metric) for point in (m.proxy, m.real) if pair.cost_metric]
    if own and None not in own:
        medians = (own[0].median, own[1].median)
        share = share_of_a_step(m, pair, medians[1])
        parts = [share, run_error(own[1], pair), kernel_part(m, pair, medians)]
        explains = "; ".join(filter(None, parts))
        note = "; ".join(filter(None, [f"within each run ({pair.cost_metric})", explains]))
        interval = intervals.ratio(*own)
        report.judged(
            "I/O cost", quantity, m, *medians, "s", interval, note=note, explains=explains
        )
        return
    if m.proxy_base is None or m.real_base is None:
        # shown, not judged: the verdict needs at least one point with both baselines
        missing = pair.proxy if m.proxy_base is None else pair.real
        note = f"no baseline point of {missing}"
        report.add("I/O cost", quantity, m, None, None, "s", note=note)
        return
    samples = [p.sample(pair.time_metric) for p in (m.proxy, m.proxy_base, m.real, m.real_base)]
    if any(s is None for s in samples):
        report.undecided.append(f"{quantity} {report.where(m)}: no {pair.time_metric} measured")
        return
    p_factor, r_factor = _per_write(m.proxy, pair), _per_write(m.real, pair)
    if p_factor is None or r_factor is None:
        report.undecided.append(f"{quantity} {report.where(m)}: no {pair.increments} measured")
        return
    proxy, proxy_base, real, real_base = samples
    proxy_cost = (proxy.median - proxy_base.median) * p_factor
    real_cost = (real.median - real_base.median) * r_factor
    interval = difference_ratio(*samples, scale=p_factor / r_factor)
    report.judged("I/O cost", quantity, m, proxy_cost, real_cost, "s", interval)


def share_of_a_step(m: Match, pair: Pair, real_cost: float) -> str:
    """What a write costs the application against its step without writes: where that is a
    few per cent, the step's own spread hides it and the cost per write stays undecided.
    Only for a cost taken within each run: one taken between runs is mostly their drift."""
    if pair.unit != "write" or not real_cost or real_cost <= 0:
        return ""
    step, _ = compute_samples(m.real, m.real_base, pair)
    if step is None or step.median <= 0:
        return ""
    share = 100 * real_cost / step.median
    return f"a write costs {pair.real} {format_value(share, '%')} of its step without writes"


#: the standard error of a run's cost, relative to the cost, that decides a 10 % band
DECIDING_ERROR = 0.05


def run_error(real: Sample, pair: Pair) -> str:
    """How well one run of the application knows its own cost (the median of its runs'
    standard errors), and how many times the writes (FE: evaluations) a run would need
    to know it to 5 % (the error shrinks with their square root): where the error is as
    large as the cost, three runs cannot decide it."""
    if real.errors is None:
        return ""
    error, cost = float(np.median(real.errors)), real.median
    found = (
        f"standard error of one run of {pair.real}'s cost {format_value(error, 's', scaled=True)}"
    )
    more = (error / (DECIDING_ERROR * cost)) ** 2 if cost and cost > 0 else 0.0
    if more > 1:
        found += f"; {more:,.0f}x the {pair.unit}s a run would bring it to 5 %"
    return found


def kernel_part(m: Match, pair: Pair, totals: tuple[float, float]) -> str:
    """Each one's cost per write and how much of it was spent in the kernel (system calls
    and page faults, where the file system's work is; the rest is user code, formatting
    the output): a cost that differs outside the kernel is not the tier's write path.
    Medians of the runs (``totals``: the costs', proxy and real); kernel time is sampled at
    the clock's ticks, so a part of a few tens of microseconds is noise."""
    if not pair.cost_kernel_metric:
        return ""
    kernel = [p.median(pair.cost_kernel_metric) for p in (m.proxy, m.real)]
    if None in kernel:
        return ""
    parts = []
    for name, k, t in zip((pair.proxy, pair.real), kernel, totals, strict=True):
        total, in_kernel = (format_value(seconds, "s", scaled=True) for seconds in (t, k))
        parts.append(f"{name} {total}, {in_kernel} of it in the kernel")
    return f"per {pair.write_unit}: " + "; ".join(parts)


def bytes_per_write_unit(point: Point, pair: Pair) -> float | None:
    """Bytes of one write (FE: of one increment's output), the median of the runs."""
    total = per_unit(point, pair, "bytes_written")
    if total is None or not pair.increments:
        return total
    own = point.median(pair.increment_bytes) if pair.increment_bytes else None
    if own is not None:
        return own
    increments = point.median(pair.increments)
    return total / increments if increments else None


def _line_fit(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Least-squares a + b x of each row of ``y`` (one column per x): (a, b) per row."""
    dx = x - x.mean()
    slope = (y - y.mean(axis=1, keepdims=True)) @ dx / (dx @ dx)
    return y.mean(axis=1) - slope * x.mean(), slope


def _fitted_ratio(x_proxy, x_real, part: int):
    """What :func:`intervals.of_medians` takes: from the medians of k proxy costs then k real
    costs, proxy / real of the fitted part (0: per write, 1: per byte); inf where the
    application's part is not positive, so that no ratio is made of it."""

    def function(medians: np.ndarray) -> np.ndarray:
        k = len(x_proxy)
        proxy = _line_fit(x_proxy, medians[:, :k])[part]
        real = _line_fit(x_real, medians[:, k:])[part]
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where((real > 0) & (proxy > 0), proxy / real, np.inf)

    return function


@dataclass
class Sized:
    """A compared point's cost per write, proxy and real, beside the bytes each wrote then."""

    match: Match
    proxy_cost: Sample
    real_cost: Sample
    proxy_bytes: float
    real_bytes: float


def cost_model_rows(report: Report, timed: list[Match]) -> None:
    """The I/O cost per write as a part every write pays (its files, folders and calls) and a
    part per byte (formatting, bandwidth), fitted over the shapes that differ only in their
    size (:attr:`Pair.size`), proxy beside real, per tier. Where a cost per write is not
    faithful, its line then says which of the two parts is off, and so at which sizes the
    proxy will be further off. Shown, not judged: it is fitted to the judged lines."""
    pair = report.pair
    if not pair.cost_metric or not pair.size:
        return
    series: dict[tuple, list[Sized]] = {}
    for m in timed:
        costs = [x.sample(pair.cost_metric) for x in (m.proxy, m.real)]
        sizes = [bytes_per_write_unit(x, pair) for x in (m.proxy, m.real)]
        if None in costs + sizes:
            continue
        rest = tuple(m.proxy.param(k) for k in report.keys if k not in pair.size)
        series.setdefault((m.tier, rest), []).append(Sized(m, *costs, *sizes))
    for found in series.values():
        if len({f.proxy_bytes for f in found}) >= 2:
            explain_by_parts(report, sorted(found, key=lambda f: f.proxy_bytes))


def explain_by_parts(report: Report, found: list[Sized]) -> None:
    """The two fitted parts of one series as lines of the table, and each of the series' cost
    lines that is not faithful told which part is off, where the fit can tell either part."""
    pair, unit, k = report.pair, report.pair.write_unit, len(found)
    samples = [f.proxy_cost for f in found] + [f.real_cost for f in found]
    x_proxy = np.array([f.proxy_bytes for f in found])
    x_real = np.array([f.real_bytes for f in found])
    medians = np.array([[s.median for s in samples]])
    sizes = [" ".join(f.match.proxy.param(key) for key in pair.size) for f in found]
    over = f"fitted over {', '.join(pair.size)} {', '.join(sizes)}"
    model = (
        f"cost per {unit} = its fixed part (what every {unit} pays whatever its bytes: its "
        f"files, folders and calls) + its part per MB x MB written; shown, not judged"
    )
    parts, decided = [], False
    for part, (name, scale, what) in enumerate(
        [(f"I/O cost per {unit}: its fixed part", 1.0, "fixed part"),
         ("I/O cost per MB written", 1e6, "part per MB")]
    ):  # fmt: skip
        proxy = _line_fit(x_proxy, medians[:, :k])[part][0] * scale
        real = _line_fit(x_real, medians[:, k:])[part][0] * scale
        both = proxy > 0 and real > 0
        interval = intervals.of_medians(samples, _fitted_ratio(x_proxy, x_real, part))
        line = report.add(
            "I/O cost", name, found[0].match, proxy, real, "s", interval if both else None
        )
        line["shape"], line["params"], line["note"] = over, {}, model  # over: its group heading
        if not both:  # add() made no ratio of a part at or below zero
            parts.append(f"{what} not above zero for both")
            continue
        decision = decide(interval)
        shown = f"{line['text']['ratio']} {_interval_text(interval)}"
        parts.append(f"{what} proxy / real {shown}: {decision}")
        decided = decided or decision != WITHIN_NOISE
    if not decided:  # the fit cannot tell which part is off: its lines say so, no cost line
        return
    explains = f"{over}: " + ", ".join(parts)
    cost, tier = f"I/O cost per {unit}", found[0].match.tier  # a series is one tier's
    shapes = [{key: f.match.proxy.param(key) for key in report.keys} for f in found]
    for line in report.rows:
        off = line["decision"] not in ("", "agrees")
        if off and (line["quantity"], line["tier"]) == (cost, tier) and line["params"] in shapes:
            line["explains"] = "; ".join(filter(None, [line["explains"], explains]))


def _per_write(point: Point, pair: Pair) -> float | None:
    """What turns a difference of the time metric into a cost per write: CFD's time per
    step x steps between writes; FE's time per evaluation / its increments (None: unknown)."""
    if pair.unit == "write":
        return float(point.param("write_interval"))
    if pair.increments:
        increments = point.median(pair.increments)
        return 1.0 / increments if increments else None
    return 1.0


def syscall_rows(report: Report, traced: list[Match], not_counted: dict[str, str]) -> str:
    """Calls per write and category, proxy beside real; returns what the counting status is.

    The baseline's calls are subtracted: a ccx process opens ~40 libraries and
    files of its own before it writes anything, where the proxy's workers
    start once; what is compared is what the output adds.
    """
    pair, unit = report.pair, report.pair.write_unit
    if not traced:
        reasons = sorted({not_counted[w] for w in (pair.proxy, pair.real) if w in not_counted})
        status = f"not counted ({'; '.join(reasons) or 'no traced experiment'})"
        report.notes.append(f"system calls per {unit}: {status}")
        return status
    for m in traced:
        if m.proxy_base is None or m.real_base is None:
            missing = pair.proxy if m.proxy_base is None else pair.real
            report.notes.append(f"system calls on {m.tier}: no traced baseline of {missing}")
            continue
        for category in CATEGORIES:
            name = f"{METRIC_PREFIX}{category}"
            p = _calls_per_unit(m.proxy, m.proxy_base, pair, name)
            r = _calls_per_unit(m.real, m.real_base, pair, name)
            if p is None and r is None:
                continue
            calls = f"{CATEGORY_LABELS[category]} calls per {unit}"
            report.add("system calls", calls, m, p, r)
            if p is not None and r is not None and abs(p - r) >= 1 and abs(p - r) > 0.1 * max(p, r):
                proxy_makes = f"{pair.proxy} makes {format_value(p)} {calls}"
                report.notes.append(f"{proxy_makes}, {pair.real} {format_value(r)} on {m.tier}")
    return "counted with strace -f -C (calls of the no-write baseline subtracted)"


def _calls_per_unit(point: Point, base: Point | None, pair: Pair, metric_name: str) -> float | None:
    """(calls - the baseline's) / writes: per write (CFD), per increment (FE, of every
    solver run the job made: calculix also runs ccx once for its target curve)."""
    calls, units = point.median(metric_name), point.median("solver_runs") or units_of(point, pair)
    if pair.increments and units:
        units *= point.median(pair.increments) or 0
    base_calls = base.median(metric_name) if base is not None else None
    if calls is None or base_calls is None or not units:
        return None
    return (calls - base_calls) / units


def tier_rows(report: Report, timed: list[Match]) -> None:
    """Device tier / RAM tier of the headline time, as the proxy sees it and as the real one."""
    headline = report.pair.headline
    by_shape: dict = {}
    for m in timed:
        key = (m.proxy.experiment, m.real.experiment, _shape(m.proxy, report.keys))
        by_shape.setdefault(key, {})[m.tier] = m
    for found in by_shape.values():
        fast = [t for t, m in found.items() if m.proxy.tier_class in RAM_CLASSES]
        slow = [t for t, m in found.items() if m.proxy.tier_class in DEVICE_CLASSES]
        for s, f in itertools.product(sorted(slow), sorted(fast)):
            ms, mf = found[s], found[f]
            samples = [x.sample(headline) for x in (ms.proxy, mf.proxy, ms.real, mf.real)]
            if any(x is None for x in samples):
                continue
            proxy, real = intervals.ratio(*samples[:2]), intervals.ratio(*samples[2:])
            both = intervals.ratio_of_ratios(*samples)
            note = f"proxy {_interval_text(proxy)}, real {_interval_text(real)}"
            quantity, estimates = f"{headline}, {s} / {f}", (proxy.estimate, real.estimate)
            line = report.add("tier ratio", quantity, ms, *estimates, "x", both, decide(both), note)
            line["tier"] = f"{s} / {f}"


def _baseline_text(pair: Pair) -> str:
    return "; ".join(
        f"{w}: " + ", ".join(f"{k}={v}" for k, v in params.items())
        for w, params in pair.baseline.items()
    )


def verdict(report: Report) -> tuple[str, list[str]]:
    """The proxy's verdict and why; faithful needs its I/O cost and compute compared."""
    pair, both = report.pair, f"both {report.pair.proxy} and {report.pair.real}"
    if report.differs:
        return DIFFERS, report.differs
    costs = [r for r in report.rows if r["section"] == "I/O cost" and r["decision"]]
    if not costs and not any(u.startswith("I/O cost") for u in report.undecided):
        baseline = f"no compared point has a no-output baseline of {both} ({_baseline_text(pair)})"
        report.undecided.append(f"I/O cost per {pair.write_unit}: {baseline}")
    if not report.compared:
        nowhere = f"neither a no-output baseline point nor within an output run of {both}"
        report.undecided.append(f"{pair.compute[0]}: measured by {nowhere}")
    if report.undecided or not report.decided:
        return WITHIN_NOISE, report.undecided or [f"nothing of {pair.proxy} could be compared"]
    return FAITHFUL, [
        f"files{' and folders' if pair.dirs else ''} per {pair.unit} match, and bytes and I/O "
        f"cost per {pair.write_unit} and the {pair.compute[0]} agree within {BAND_TEXT} "
        "(95% intervals) at every compared point"
    ]
