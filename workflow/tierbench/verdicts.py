"""Does each document's lesson hold on this hardware? A verdict per lesson, with intervals.

Absolute numbers differ between machines, so every lesson is tested as a
ratio measured in one run (e.g. fio worst case RAM tier / disk tier next to
the optimisation's wall time disk / RAM tier) and set beside the same ratio
from the document. Which tier is "fast" and which "slow" comes from the tier
*classes* (RAM-backed vs device-backed, :mod:`tierbench.tiers`), never from
which one measured faster, so each verdict can come out either way.

Each ratio carries a 95% bootstrap interval over the repetitions
(:mod:`tierbench.intervals`), and each lesson states the band it claims as
data (:class:`Band`). A lesson is *reproduced* only when the whole interval
lies in the band, *not reproduced* only when the whole interval lies outside
it, and *within noise* otherwise, with what would decide it. A lesson the
run cannot test (a tier class missing, a sweep too small, a device the page
cache absorbed) is *inconclusive*, with the reason.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from . import fidelity, intervals, pagecache, reference, workloads
from .intervals import Interval
from .tiers import DEVICE_CLASSES, LOCAL_DEVICE_CLASSES, NETWORK_CLASSES, RAM_CLASSES

REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE = "reproduced", "not_reproduced", "inconclusive"
WITHIN_NOISE = "within_noise"
WORDS = {
    REPRODUCED: "reproduced",
    NOT_REPRODUCED: "not reproduced",
    WITHIN_NOISE: "within noise",
    INCONCLUSIVE: "inconclusive",
}
#: the columns that name one point's metric in results.csv and summary.csv
POINT_METRIC = ["experiment", "workload", "tier", "point", "metric"]
IN_MEMORY = "may_stay_in_memory"
PAGE_CACHE_TEXT = "the device was never reached: this measured the page cache, not the device"
PAGE_CACHE_NEEDS = (
    "a device tier the page cache does not absorb: fsync'd or direct I/O, "
    "or a file larger than the node's dirty limit"
)
MORE_REPETITIONS = "more repetitions"


@dataclass(frozen=True)
class Band:
    """The values of a ratio a lesson claims: above, below or between thresholds."""

    kind: str  # "greater" | "less" | "within"
    threshold: float | None = None
    low: float | None = None
    high: float | None = None

    def __str__(self) -> str:
        if self.kind == "greater":
            return f"above {self.threshold:g}x"
        if self.kind == "less":
            return f"below {self.threshold:g}x"
        return f"within {self.low:g}-{self.high:g}x"

    def place(self, low: float, high: float) -> str:
        """Where the interval [low, high] lies: inside the band, outside it, or across an edge."""
        if self.kind == "greater":
            inside, outside = low > self.threshold, high <= self.threshold
        elif self.kind == "less":
            inside, outside = high < self.threshold, low >= self.threshold
        elif self.kind == "within":
            inside = self.low <= low and high <= self.high
            outside = high < self.low or low > self.high
        else:
            raise ValueError(f"unknown band kind {self.kind!r}")
        return REPRODUCED if inside else NOT_REPRODUCED if outside else WITHIN_NOISE


@dataclass
class Comparison:
    """One normalised number: the same ratio from the document and from this run."""

    label: str
    published: float | None
    ours: float | None
    unit: str = "x"
    #: our 95% interval (None when it cannot be had, e.g. one repetition)
    low: float | None = None
    high: float | None = None


@dataclass
class Verdict:
    lesson: str
    status: str
    text: str
    comparisons: list[Comparison] = field(default_factory=list)
    #: the band the lesson claims, e.g. "within 0.9-1.1x"
    band: str = ""
    #: what would decide an undecided verdict, else ""
    needs: str = ""
    #: the points its ratios rest on (workload/experiment/tier/point, as in the study's plan)
    points: list[str] = field(default_factory=list)
    #: a proxy's lesson: whether its points lie where the proxy was shown faithful, else ""
    fidelity: str = ""


@dataclass
class Claim:
    """One ratio of a lesson, its interval and the band the lesson claims for it."""

    label: str
    interval: Interval
    band: Band
    published: float | None = None

    @property
    def outcome(self) -> str:
        if not self.interval.known:
            return WITHIN_NOISE
        return self.band.place(self.interval.low, self.interval.high)

    def shown(self) -> str:
        return show(self.interval)

    def comparison(self) -> Comparison:
        return comparison(self.label, self.published, self.interval)


def comparison(label: str, published: float | None, interval: Interval) -> Comparison:
    published = None if published is None else float(published)
    return Comparison(label, published, interval.estimate, "x", interval.low, interval.high)


# --- reading the study -----------------------------------------------------------------


class Runs:
    """Each point's measured repetitions (results.csv), found from its summary row."""

    def __init__(self, results: pd.DataFrame | None):
        self.given = results is not None
        self._samples: dict[tuple, intervals.Sample] = {}
        if results is None or results.empty:
            return
        rows = results[(results["phase"] == "measured") & (results["status"] == "ok")]
        if "started_at" in rows.columns:
            started = pd.to_datetime(rows["started_at"], utc=True, errors="coerce")
            seconds = (started - pd.Timestamp(0, tz="UTC")).dt.total_seconds()
        else:
            seconds = pd.Series(np.nan, index=rows.index)
        rows = rows.assign(_started=seconds.astype(float))
        keys = rows[POINT_METRIC].astype(str)
        for key, group in rows.groupby([keys[c] for c in POINT_METRIC], sort=False):
            self._samples[key] = intervals.sample(
                group["value"].astype(float).tolist(),
                pd.to_numeric(group["repetition"]).astype(int).tolist(),
                group["_started"].tolist(),
            )

    def sample(self, row: pd.Series) -> intervals.Sample:
        key = tuple(str(row[c]) for c in POINT_METRIC)
        return self._samples.get(key, intervals.Sample(()))

    def ratio(self, numerator: pd.Series, denominator: pd.Series) -> Interval:
        interval = intervals.ratio(self.sample(numerator), self.sample(denominator))
        return self._checked(interval, numerator, denominator)

    def ratio_of_ratios(self, a, b, c, d) -> Interval:
        samples = [self.sample(row) for row in (a, b, c, d)]
        return self._checked(intervals.ratio_of_ratios(*samples), a, b, c, d)

    def _checked(self, interval: Interval, *rows: pd.Series) -> Interval:
        if interval.n == 0 and not self.given:
            interval = Interval(
                None, None, None, 0, reason="the per-repetition values (results.csv) of its points"
            )
        return replace(interval, of=tuple(point_id(row) for row in rows))


def point_id(row: pd.Series) -> str:
    """A summary row's point as the study's plan names it: workload/experiment/tier/point."""
    return "/".join(str(row[key]) for key in ("workload", "experiment", "tier", "point"))


def _ok(summary: pd.DataFrame) -> pd.DataFrame:
    return summary[summary["status"] == "ok"]


def matches(column: pd.Series, wanted) -> pd.Series:
    """Equality that treats 1, 1.0 and "1" alike (CSV columns mix ints, floats and text)."""
    try:
        target = float(wanted)
    except (TypeError, ValueError):
        return column.astype(str) == str(wanted)
    return pd.to_numeric(column, errors="coerce") == target


def _row(frame: pd.DataFrame, **where) -> pd.Series | None:
    """The one summary row matching ``where``, or None (none, or several)."""
    if any(key not in frame.columns for key in where):
        return None
    mask = np.ones(len(frame), dtype=bool)
    for key, wanted in where.items():
        mask &= matches(frame[key], wanted).to_numpy()
    return frame.iloc[int(np.flatnonzero(mask)[0])] if mask.sum() == 1 else None


def _tiers(frame: pd.DataFrame, classes: tuple[str, ...]) -> list[str]:
    return sorted(frame.loc[frame["tier_class"].isin(classes), "tier"].unique())


def _fmt(value: float | None) -> str:
    if value is None:
        return "n/a"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}" if abs(value) >= 0.1 or value == 0 else f"{value:.2g}"


def show(interval: Interval) -> str:
    """``1.03x [0.97, 1.10]``; the interval's reason when there is none."""
    estimate = f"{_fmt(interval.estimate)}x"
    if interval.known:
        return f"{estimate} [{_fmt(interval.low)}, {_fmt(interval.high)}]"
    return f"{estimate} [no interval: needs {interval.reason.removeprefix('needs ')}]"


def _published(ref: pd.DataFrame, **where) -> float:
    rows = ref
    for key, wanted in where.items():
        rows = rows[matches(rows[key], wanted)]
    if len(rows) != 1:
        raise KeyError(f"reference has {len(rows)} rows for {where}")
    return float(rows["canonical_value"].iloc[0])


def _missing(lesson: str, what: str) -> Verdict:
    needs = what.removeprefix("needs ")
    return Verdict(lesson, INCONCLUSIVE, f"Not testable in this run: {what}.", needs=needs)


def _page_cache(row: pd.Series) -> str:
    """A row's page-cache state; a file-creating point on a network tier reached the server.

    That holds whatever the record says, so results recorded before the rule
    (tierbench.pagecache.reaches_server) are judged by it too.
    """
    declared = workloads.find(str(row.get("workload", "")))
    if pagecache.reaches_server(declared, str(row.get("tier_class", ""))):
        return pagecache.DEVICE
    return str(row.get("page_cache", "") or "")


def _in_memory(rows) -> tuple[bool, str]:
    """Whether every row's point may have stayed in the page cache, and the first reason."""
    rows = [r for r in rows if r is not None]
    states = [_page_cache(r) for r in rows]
    if not rows or any(state != IN_MEMORY for state in states):
        return False, ""
    return True, str(rows[0].get("page_cache_reason", "") or "")


# --- deciding --------------------------------------------------------------------------


def _combine(outcomes: list[str]) -> str:
    """All claims of a lesson: any outside its band refutes it, all inside reproduce it."""
    if NOT_REPRODUCED in outcomes:
        return NOT_REPRODUCED
    if all(outcome == REPRODUCED for outcome in outcomes):
        return REPRODUCED
    return WITHIN_NOISE


def _needs(claims: list[Claim], hint: str = "") -> str:
    """What would decide the undecided claims."""
    parts = []
    for claim in claims:
        if claim.outcome != WITHIN_NOISE:
            continue
        if not claim.interval.known:
            parts.append(f"{claim.label}: {claim.interval.reason.removeprefix('needs ')}")
        else:
            parts.append(
                f"{MORE_REPETITIONS}: {claim.label} {claim.shown()} reaches across "
                f"the edge of the band ({claim.band})"
            )
    return "; ".join(parts + ([hint] if parts and hint else []))


def _judged(lesson: str, claims: list[Claim], what: str, extra=(), hint: str = "") -> Verdict:
    """A verdict from a lesson's claims: the text ``what`` gets the outcome appended."""
    status = _combine([claim.outcome for claim in claims])
    band = "; ".join(str(c.band) if len(claims) == 1 else f"{c.label} {c.band}" for c in claims)
    needs = _needs(claims, hint) if status == WITHIN_NOISE else ""
    return Verdict(
        lesson,
        status,
        f"{what}; the lesson claims {band}: {WORDS[status]}.",
        [claim.comparison() for claim in claims] + list(extra),
        band,
        needs,
        sorted({point for claim in claims for point in claim.interval.of}),
    )


def _unless_page_cache(verdict: Verdict, device_rows) -> Verdict:
    """A device-vs-RAM difference not found on a device the page cache absorbed is untested.

    It is *inconclusive*: only a different point (fsync, direct I/O, a file
    past the dirty limit) can reach the device. A difference that is found
    still reproduces the lesson for the tier as a job sees it, so while the
    interval reaches across the band's edge more repetitions may yet decide
    that, and the verdict keeps asking for them (tierbench.adaptive).
    """
    absorbed, reason = _in_memory(device_rows)
    if verdict.status == REPRODUCED or not absorbed:
        return verdict
    straddling = verdict.status == WITHIN_NOISE and MORE_REPETITIONS in verdict.needs
    needs = PAGE_CACHE_NEEDS + (
        f"; or, for the tier as a job sees it, {verdict.needs}" if straddling else ""
    )
    return _never_reached(verdict, reason, "inconclusive", needs)


def _device_claim(verdict: Verdict, device_rows) -> Verdict:
    """A lesson its document measured on the device itself is untested by points that never
    reached it, whatever they show.

    Document 001's runs wrote far past any page cache (192 ranks of 468,750
    cells each, every step), so its lessons are about the device: what a
    disk shows through the page cache, either way, is a different
    mechanism, and near the band's edge it would come out either way from
    run to run. That holds for "at write interval 100 the tier does not
    matter" too: two tiers that are both memory trivially look alike. The
    ratio stays in the text. A network tier's CFD points always reached its
    server (every write creates files there), so they are decided on their
    interval.
    """
    absorbed, reason = _in_memory(device_rows)
    if not absorbed:
        return verdict
    seen = f"inconclusive ({WORDS[verdict.status]} through the page cache)"
    return _never_reached(verdict, reason, seen, PAGE_CACHE_NEEDS)


def _never_reached(verdict: Verdict, reason: str, outcome: str, needs: str) -> Verdict:
    """``verdict`` made inconclusive: its outcome in the text becomes ``outcome`` and why."""
    verdict.text = (
        verdict.text.removesuffix(f": {WORDS[verdict.status]}.")
        + f": {outcome}, {PAGE_CACHE_TEXT} ({reason})."
    )
    verdict.status = INCONCLUSIVE
    verdict.needs = needs
    return verdict


def _note_page_cache(verdict: Verdict, device_rows) -> Verdict:
    """A lesson that holds when tiers look alike says when the device may not have been reached."""
    absorbed, reason = _in_memory(device_rows)
    if absorbed:
        verdict.text += f" The device points may have stayed in the page cache ({reason})."
    return verdict


# --- document 000: tmpfs for a GA over a non-linear FE model -------------------------

#: the lesson's premise, in its own words: a tier "far faster (10x or more)" in fio
FIO_PREMISE = Band("greater", threshold=10)
#: "less than 1.5x faster", as the lesson is stated: the document's SSD/tmpfs job ratio
#: (1.09x) lies well inside, its HDD/tmpfs ratio (8.8x), where the tier mattered, far outside
JOB_GAIN = Band("less", threshold=1.5)


def _extreme_row(frame: pd.DataFrame, tiers: list[str], pick) -> pd.Series | None:
    """The one row per tier of ``tiers`` with the highest (max) or lowest (min) median."""
    rows = [frame[frame["tier"] == tier] for tier in tiers]
    rows = [r.iloc[0] for r in rows if len(r) == 1]
    return pick(rows, key=lambda r: r["median"]) if rows else None


def document_000(study: Study, ref: pd.DataFrame, workload: str = "fe_proxy") -> list[Verdict]:
    lesson = (
        "A tier far faster (10x or more) in fio's worst case buys the real job only a "
        "little: the optimisation runs less than 1.5x faster"
    )
    ok = study.ok
    fio = ok[(ok["workload"] == "fio") & (ok["metric"] == "write_bandwidth")]
    worst = fio[fio["rw"].astype(str) == "randrw"] if "rw" in fio.columns else fio.iloc[0:0]
    if "io_mode" in worst.columns:
        worst = worst[worst["io_mode"].astype(str) == "fsync"]
    job = ok[(ok["workload"] == workload) & (ok["metric"] == "wall_time")]
    ram_tiers, device_tiers = _tiers(worst, RAM_CLASSES), _tiers(worst, DEVICE_CLASSES)
    if not ram_tiers or not device_tiers or job.empty:
        return [_missing(lesson, "needs a RAM-backed tier, a device tier and the FE optimisation")]
    fast_row = _extreme_row(worst, ram_tiers, max)
    slow_row = _extreme_row(worst, device_tiers, min)
    if fast_row is None or slow_row is None:
        return [_missing(lesson, "needs one fio worst-case point per tier")]
    fast, slow = fast_row["tier"], slow_row["tier"]
    common = set(job[job["tier"] == fast]["cores"]) & set(job[job["tier"] == slow]["cores"])
    if not common:
        return [_missing(lesson, f"no core count ran on both {fast} and {slow}")]
    cores = int(max(common))
    slow_job, fast_job = _row(job, tier=slow, cores=cores), _row(job, tier=fast, cores=cores)
    if slow_job is None or fast_job is None:
        return [_missing(lesson, f"no single wall time per tier on {cores} cores")]
    pub_fio = _published(ref, table="fio_worst_case", tier="tmpfs", metric="write_bandwidth") / (
        _published(ref, table="fio_worst_case", tier="SSD", metric="write_bandwidth")
    )
    pub_job = _published(ref, table="optimisation_wall_time", tier="SSD", cores=30) / (
        _published(ref, table="optimisation_wall_time", tier="tmpfs", cores=30)
    )
    premise = Claim(
        "fio worst case, RAM tier / disk tier",
        study.runs.ratio(fast_row, slow_row),
        FIO_PREMISE,
        pub_fio,
    )
    gain = Claim(
        "FE optimisation wall time, disk tier / RAM tier",
        study.runs.ratio(slow_job, fast_job),
        JOB_GAIN,
        pub_job,
    )
    numbers = (
        f"fio worst case: {fast}/{slow} = {premise.shown()} (published tmpfs/SSD "
        f"{_fmt(pub_fio)}x); FE optimisation wall time on {cores} cores: {slow}/{fast} = "
        f"{gain.shown()} (published SSD/tmpfs on 30 cores {_fmt(pub_job)}x)"
    )
    if premise.outcome == NOT_REPRODUCED:
        return [
            Verdict(
                lesson,
                INCONCLUSIVE,
                f"{numbers}. The tiers differ by less than 10x in fio, too little to test it.",
                [premise.comparison(), gain.comparison()],
                f"fio {FIO_PREMISE}, then the job {JOB_GAIN}",
                "a RAM tier and a device tier at least 10x apart in fio's worst case",
            )
        ]
    verdict = _judged(lesson, [gain], numbers, [premise.comparison()])
    verdict.band = f"fio {FIO_PREMISE}, then the job {JOB_GAIN}"
    if premise.outcome == WITHIN_NOISE:
        verdict.status = WITHIN_NOISE
        verdict.text = f"{numbers}; whether the tiers are 10x apart in fio is within noise."
        verdict.needs = _needs([premise, gain])
    return [verdict]


# --- document 001: OpenFOAM output on DCPMM vs Lustre --------------------------------

#: "far more" vs lesson 2's "does not matter (within 10%)": the same 10% yardstick,
#: so a cost of more than 10% is one the document would call a difference
WRITE_EVERY_STEP = Band("greater", threshold=1.1)
#: the document's own words: within 10%
RARE_WRITES = Band("within", low=0.9, high=1.1)
#: an ensemble slows the slow tier more: its growth exceeds the fast tier's by over 10%,
#: the document's yardstick for a difference (published: 3.9x vs 0.98x, a ratio of 4.0)
ENSEMBLE_GROWTH = Band("greater", threshold=1.1)


def document_001(study: Study, ref: pd.DataFrame, workload: str = "cfd_proxy") -> list[Verdict]:
    ok = study.ok
    steps = ok[(ok["workload"] == workload) & (ok["metric"] == "time_per_step")]
    if "file_handler" in steps.columns:
        steps = steps[steps["file_handler"].astype(str) == "uncollated"]
    if "ensemble" in steps.columns:
        # compare points of one experiment: the one that varies the ensemble size
        varied = steps.groupby("experiment")["ensemble"].nunique()
        if len(varied) and varied.max() > 1:
            steps = steps[steps["experiment"] == varied.idxmax()]
    ram_tiers, device_tiers = _tiers(steps, RAM_CLASSES), _slow_tiers(steps)
    lessons = (
        "Writing every step costs the parallel/device tier far more than the fast tier",
        "At write interval 100 the tier does not matter (within 10%)",
        "Concurrent ensembles hurt the slow tier more than the fast one",
    )
    if not ram_tiers or not device_tiers:
        return [_missing(lesson, "needs a RAM-backed tier and a device tier") for lesson in lessons]
    fast, slow = ram_tiers[0], device_tiers[0]
    ranks = steps["ranks"].max() if "ranks" in steps.columns else None

    def point(tier, interval, ensemble=1):
        return _row(steps, tier=tier, write_interval=interval, ensemble=ensemble, ranks=ranks)

    def pub(tier, interval, ensemble=1):
        return _published(
            ref,
            table="time_per_step_single_vs_ensemble",
            tier=tier,
            write_interval=interval,
            ensemble=ensemble,
        )

    verdicts = []
    for lesson, interval, band in (
        (lessons[0], 1, WRITE_EVERY_STEP),
        (lessons[1], 100, RARE_WRITES),
    ):
        rows = (point(slow, interval), point(fast, interval))
        if any(row is None for row in rows):
            verdicts.append(_missing(lesson, f"no write-interval-{interval} point on both tiers"))
            continue
        claim = Claim(
            f"time/step at interval {interval}, slow / fast tier",
            study.runs.ratio(*rows),
            band,
            pub("Lustre", interval) / pub("fsdax", interval),
        )
        verdict = _judged(
            lesson,
            [claim],
            f"time per step at write interval {interval}: {slow}/{fast} = {claim.shown()} "
            f"(published Lustre/fsdax {_fmt(claim.published)}x)",
        )
        verdicts.append(_device_claim(verdict, [rows[0]]))
    verdicts.append(_ensembles(study, steps, lessons[2], slow, fast, point, pub))
    return verdicts


def _slow_tiers(steps: pd.DataFrame) -> list[str]:
    """Document 001's slow tier was the shared parallel file system: network tiers first,
    local device tiers only where there is none."""
    return _tiers(steps, NETWORK_CLASSES) or _tiers(steps, LOCAL_DEVICE_CLASSES)


def _ensembles(study, steps, lesson, slow, fast, point, pub) -> Verdict:
    ensembles = (
        sorted(int(e) for e in steps["ensemble"].unique() if int(e) > 1)
        if "ensemble" in steps
        else []
    )
    if not ensembles:
        return _missing(lesson, "no ensemble points")
    size = ensembles[-1]
    rows = {(tier, ens): point(tier, 1, ens) for tier in (slow, fast) for ens in (size, 1)}
    if any(row is None for row in rows.values()):
        return _missing(lesson, "ensemble points missing at write interval 1")
    pub_slow = pub("Lustre", 1, 5) / pub("Lustre", 1)
    pub_fast = pub("fsdax", 1, 5) / pub("fsdax", 1)
    claim = Claim(
        "ensemble growth, slow tier / fast tier",
        study.runs.ratio_of_ratios(
            rows[slow, size], rows[slow, 1], rows[fast, size], rows[fast, 1]
        ),
        ENSEMBLE_GROWTH,
        pub_slow / pub_fast,
    )
    slow_growth = study.runs.ratio(rows[slow, size], rows[slow, 1])
    fast_growth = study.runs.ratio(rows[fast, size], rows[fast, 1])
    verdict = _judged(
        lesson,
        [claim],
        f"time per step, ensemble of {size} / single run at write interval 1: "
        f"{slow} {show(slow_growth)}, {fast} {show(fast_growth)}; slow / fast = "
        f"{claim.shown()} (published, ensemble of 5: Lustre {pub_slow:.2f}x, fsdax "
        f"{pub_fast:.2f}x, slow / fast {pub_slow / pub_fast:.2f}x)",
        [
            comparison("ensemble / single, slow tier", pub_slow, slow_growth),
            comparison("ensemble / single, fast tier", pub_fast, fast_growth),
        ],
    )
    return _device_claim(verdict, [rows[slow, size], rows[slow, 1]])


# --- document 002: RAM disk and bindfs on macOS ------------------------------------

#: "much slower than even using the hard disk" (published 0.48x): more than 10% slower,
#: the least a reader of "slower" would notice
FUSE_SLOWER = Band("less", threshold=0.9)
#: "nearly 5 times the SSD" (published 4.5x): more than 10% faster counts as faster
RAM_FASTER = Band("greater", threshold=1.1)


def document_002(study: Study, ref: pd.DataFrame) -> list[Verdict]:
    lessons = (
        "A FUSE (bindfs) mount over a RAM disk is slower than the plain disk",
        "A RAM disk takes a sequential write faster than the disk",
    )
    ok = study.ok
    pv = ok[(ok["workload"] == "pv") & (ok["metric"] == "throughput")]
    fuse, device, ram = _tiers(pv, ("fuse",)), _tiers(pv, DEVICE_CLASSES), _tiers(pv, RAM_CLASSES)
    pub = ref[ref["table"] == "pv_throughput"].groupby("tier")["canonical_value"].median()
    checks = (
        (lessons[0], fuse, "bindfs", "FUSE over RAM", FUSE_SLOWER, _note_page_cache),
        (lessons[1], ram, "RAM disk", "RAM disk", RAM_FASTER, _unless_page_cache),
    )
    verdicts = []
    summary = study.summary
    for lesson, tiers, published_sink, label, band, check in checks:
        rows = (_row(pv, tier=tiers[0]), _row(pv, tier=device[0])) if tiers and device else ()
        if not rows or any(row is None for row in rows):
            reason = "needs pv numbers on this sink and on a device tier"
            skipped = summary[(summary["workload"] == "pv") & (summary["status"] != "ok")]
            if len(skipped):
                reason += f" ({'; '.join(sorted(set(skipped['reason'].astype(str))))})"
            verdicts.append(_missing(lesson, reason))
            continue
        claim = Claim(
            f"pv, {label} / disk",
            study.runs.ratio(*rows),
            band,
            pub[published_sink] / pub["SSD"],
        )
        verdict = _judged(
            lesson,
            [claim],
            f"pv throughput {tiers[0]}/{device[0]} = {claim.shown()} (published "
            f"{published_sink}/SSD {_fmt(claim.published)}x)",
        )
        verdicts.append(check(verdict, [rows[1]]))
    return verdicts


# --- document 003: mktemp and tmpfs ------------------------------------------------------

#: "much faster write performance" (published 2.3x): more than 10% faster counts
TMPFS_FASTER = Band("greater", threshold=1.1)
#: a file write cannot beat the memory it is copied through: below STREAM triad (1x)
BELOW_MEMORY = Band("less", threshold=1.0)


def document_003(study: Study, ref: pd.DataFrame) -> list[Verdict]:
    """dd to tmpfs vs the disk, and tmpfs vs STREAM.

    The document's disk figure is the disk's own speed. Where this run's
    buffered disk point may have stayed in the page cache, "faster than the
    disk" is taken on the points that reach the device, dd with fdatasync on
    both tiers: the same lesson, decided the same way on every run, where the
    buffered ratio would compare tmpfs with the page cache and come out either
    way (tierbench.pagecache).
    """
    lesson = "dd writes faster to tmpfs than to the disk, and stays below the memory bandwidth"
    ok = study.ok
    every = ok[(ok["workload"] == "dd") & (ok["metric"] == "write_bandwidth")]
    synced = every[every["sync"].astype(str) == "fdatasync"] if "sync" in every else every[:0]
    dd = every[every["sync"].astype(str) == "buffered"] if "sync" in every else every
    stream = ok[(ok["workload"] == "stream") & (ok["metric"] == "triad_bandwidth")]
    ram, device = _tiers(dd, RAM_CLASSES), _tiers(dd, DEVICE_CLASSES)
    if not ram or not device or stream.empty:
        return [_missing(lesson, "needs dd on a RAM tier and a device tier, and STREAM")]

    def fastest(frame):
        return frame.loc[frame["median"].astype(float).idxmax()] if len(frame) else None

    ram_row = fastest(dd[dd["tier"] == ram[0]])
    disk_row = fastest(dd[dd["tier"] == device[0]])
    triad_row = fastest(stream)
    absorbed, reason = _in_memory([disk_row])
    sync_rows = (
        fastest(synced[synced["tier"] == ram[0]]),
        fastest(synced[synced["tier"] == device[0]]),
    )
    found = all(row is not None for row in sync_rows)
    on_device = absorbed and found and not _in_memory([sync_rows[1]])[0]
    pub_tmpfs = _published(ref, table="dd", tier="tmpfs", metric="throughput")
    pub_ratio = pub_tmpfs / _published(ref, table="dd", tier="home", metric="throughput")
    pub_ceiling = pub_tmpfs / _published(ref, table="stream", metric="triad_bandwidth")
    compared, label = (sync_rows, "dd with fdatasync") if on_device else ((ram_row, disk_row), "dd")
    faster = Claim(f"{label}, tmpfs / disk", study.runs.ratio(*compared), TMPFS_FASTER, pub_ratio)
    ceiling = Claim(
        "dd on tmpfs / STREAM triad",
        study.runs.ratio(ram_row, triad_row),
        BELOW_MEMORY,
        pub_ceiling,
    )
    verdict = _judged(
        lesson,
        [faster, ceiling],
        f"{label}: {ram[0]}/{device[0]} = {faster.shown()} (published tmpfs/home "
        f"{_fmt(pub_ratio)}x); {ram[0]} dd / STREAM triad = {ceiling.shown()} "
        f"(published {_fmt(pub_ceiling)}x)",
    )
    if on_device:
        verdict.text += (
            f" The buffered disk point may have stayed in the page cache ({reason}), so"
            " tmpfs is compared with the disk on the fdatasync points, which reach the device."
        )
        return [verdict]
    if faster.outcome != REPRODUCED and ceiling.outcome != NOT_REPRODUCED:
        return [_unless_page_cache(verdict, [disk_row])]
    return [verdict]


# --- document 004: local I/O on Eagle ---------------------------------------------------

#: "about as fast": the document calls 2.4 vs 2.8 GB/s (0.86x) the same speed, so the band
#: must hold 0.86; +-25%, symmetric on a log scale (1/1.25 = 0.8), does and no wider
ABOUT_AS_FAST = Band("within", low=0.8, high=1.25)
#: "a drastic drop" (published 0.06x): the disk loses more than half its speed from the
#: small file to the large one, relative to /dev/shm over the same sizes
CLIFF = Band("less", threshold=0.5)


def document_004(study: Study, ref: pd.DataFrame) -> list[Verdict]:
    ok = study.ok
    dd = ok[(ok["workload"] == "dd") & (ok["metric"] == "write_bandwidth")]
    lessons = (
        "A file that fits the page cache writes about as fast to a disk as to /dev/shm",
        "Once the file outgrows the page cache, the disk's own speed shows (the cliff)",
    )
    ram, device = _tiers(dd, RAM_CLASSES), _tiers(dd, DEVICE_CLASSES)
    if not ram or not device:
        return [_missing(lesson, "needs dd on a RAM tier and a device tier") for lesson in lessons]
    blocks = dd[dd["experiment"] == "dd_blocks"]
    if "sync" in blocks.columns:
        blocks = blocks[blocks["sync"].astype(str) == "buffered"]
    rows = (
        _row(blocks, tier=device[0], block_size="1M"),
        _row(blocks, tier=ram[0], block_size="1M"),
    )
    if any(row is None for row in rows):
        verdicts = [_missing(lessons[0], "no buffered 1M dd point on both tiers")]
    else:
        verdicts = [_fits_page_cache(study, ref, lessons[0], rows, device[0], ram[0])]
    cliff = study.summary[
        (study.summary["experiment"] == "cliff") & (study.summary["workload"] == "dd")
    ]
    verdicts.append(_cliff_verdict(study, lessons[1], cliff, device[0], ram[0], ref))
    return verdicts


def _fits_page_cache(study, ref, lesson, rows, disk, ram) -> Verdict:
    if str(rows[0].get("page_cache", "") or "") == "device":
        reason = rows[0].get("page_cache_reason", "")
        return _missing(
            lesson,
            f"the buffered 1M file on {disk} did not fit under the dirty limit ({reason}); "
            "a smaller count tests it",
        )
    pub = _published(ref, table="dd_1M_x_10k", tier="SATA spinning disk") / _published(
        ref, table="dd_1M_x_10k", tier="/dev/shm"
    )
    claim = Claim(
        "dd 1M, disk / shm (fits the page cache)", study.runs.ratio(*rows), ABOUT_AS_FAST, pub
    )
    return _judged(
        lesson,
        [claim],
        f"dd bs=1M, buffered: {disk}/{ram} = {claim.shown()} (published SATA "
        f"disk//dev/shm {_fmt(pub)}x)",
    )


def _cliff_verdict(study, lesson, cliff, disk, ram, ref) -> Verdict:
    pub = _published(ref, table="dd_10M_x_10k", tier="SATA spinning disk") / _published(
        ref, table="dd_1M_x_10k", tier="SATA spinning disk"
    )
    measured = cliff[(cliff["status"] == "ok") & (cliff["metric"] == "write_bandwidth")]
    if "sync" in measured.columns:
        measured = measured[measured["sync"].astype(str) == "buffered"]
    limits = cliff[(cliff["status"] == "ok") & (cliff["metric"] == "dirty_limit_bytes")]
    sizes = cliff[(cliff["status"] == "ok") & (cliff["metric"] == "bytes")]
    if measured.empty or limits.empty or sizes.empty:
        return _missing(lesson, "no cliff sweep with sizes and the dirty limit")
    limit = float(limits["median"].max())
    largest = float(sizes["median"].max())
    if largest <= limit:
        return _missing(
            lesson,
            f"the largest file ({largest / 2**30:.2f} GiB) stayed below the dirty-page limit "
            f"({limit / 2**30:.2f} GiB); raise max_file_size and the tier's max_bytes, or use "
            "scale=full",
        )

    def ends(tier):
        rows = measured[measured["tier"] == tier]
        rows = rows.assign(fraction=rows["file_fraction"].astype(float)).sort_values("fraction")
        return (rows.iloc[-1], rows.iloc[0]) if len(rows) > 1 else None

    disk_ends, ram_ends = ends(disk), ends(ram)
    if disk_ends is None or ram_ends is None:
        return _missing(lesson, "the sweep has fewer than two sizes on a tier")
    disk_drop, ram_drop = study.runs.ratio(*disk_ends), study.runs.ratio(*ram_ends)
    claim = Claim(
        "dd, large / small file, disk / shm",
        study.runs.ratio_of_ratios(*disk_ends, *ram_ends),
        CLIFF,
        pub,
    )
    return _judged(
        lesson,
        [claim],
        hint="or a largest file further past the dirty limit",
        what=f"buffered dd, largest / smallest file: {disk} {show(disk_drop)}, {ram} "
        f"{show(ram_drop)}; disk / shm {claim.shown()} (published SATA disk 107 GB / 11 GB: "
        f"{_fmt(pub)}x; /dev/shm kept its speed)",
        extra=[
            comparison("dd, large / small file, disk", pub, disk_drop),
            comparison("dd, large / small file, shm", 1.0, ram_drop),
        ],
    )


# --- the study and the command line --------------------------------------------------


@dataclass
class Study:
    """One study's numbers: summary.csv (every row) and its repetitions (results.csv)."""

    summary: pd.DataFrame
    runs: Runs

    @property
    def ok(self) -> pd.DataFrame:
        return _ok(self.summary)


DOCUMENTS = {
    "000": document_000,
    "001": document_001,
    "002": document_002,
    "003": document_003,
    "004": document_004,
}


#: documents whose job a proxy runs, which the study may run beside its real application
#: (the proxy's declaration names it): each gets its verdicts
PROXIES = {"000": "fe_proxy", "001": "cfd_proxy"}


def judge(
    document: str,
    summary: pd.DataFrame,
    ref: pd.DataFrame | None = None,
    results: pd.DataFrame | None = None,
) -> list[Verdict]:
    """Each lesson of ``document`` on this study; without ``results`` no interval is known.

    Where the study also ran the real application of a document's proxy, every
    lesson is judged for each of them, the workload named in the lesson.
    """
    ref = reference.load() if ref is None else ref
    study = Study(summary, Runs(results))
    published = ref[ref["document"] == document]
    found = DOCUMENTS[document](study, published)
    proxy = PROXIES.get(document)
    real = workloads.get(proxy).stands_for.real if proxy else None
    if real is None or study.ok["workload"].ne(real).all():
        return found
    for verdict in found:
        verdict.lesson += f" [{proxy}]"
    if results is not None:
        fidelity_notes(found, summary, results, proxy)
    for verdict in DOCUMENTS[document](study, published, workload=real):
        verdict.lesson += f" [{real}]"
        found.append(verdict)
    return found


def fidelity_notes(
    verdicts: list[Verdict], summary: pd.DataFrame, results: pd.DataFrame, proxy: str
) -> None:
    """Each proxy verdict says whether the shapes it rests on are ones where the study showed
    the proxy faithful to its application (:func:`tierbench.fidelity.outside_region`)."""
    entries = [e for e in fidelity.fidelity(results)["proxies"] if e["proxy"] == proxy]
    if not entries:
        return
    rows = {point_id(row): row.to_dict() for _, row in summary.iterrows()}
    for verdict in verdicts:
        outside = {}
        for point in verdict.points:
            if point in rows and (why := fidelity.outside_region(entries[0], rows[point])):
                outside.setdefault(why, point)
        if outside:
            verdict.fidelity = "; ".join(f"{point}: {why}" for why, point in outside.items())
        elif verdict.points:
            verdict.fidelity = f"every point it rests on has a shape where {proxy} was faithful"


def to_json(document: str, verdicts: list[Verdict]) -> dict:
    return {"document": document, "verdicts": [asdict(v) for v in verdicts]}


def _read_csv(path: str, what: str) -> pd.DataFrame:
    try:
        return pd.read_csv(path, low_memory=False)
    except (OSError, ValueError) as error:
        raise SystemExit(f"cannot read the {what} {path}: {error}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--document", required=True, choices=sorted(DOCUMENTS))
    parser.add_argument("--summary", required=True, help="the study's summary.csv")
    parser.add_argument("--results", required=True, help="the study's results.csv (repetitions)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    summary = _read_csv(args.summary, "summary")
    results = _read_csv(args.results, "results")
    missing = sorted({"phase", "status", "repetition", "value", *POINT_METRIC} - set(results))
    if missing:
        raise SystemExit(f"{args.results} is not a results.csv: no column {', '.join(missing)}")
    verdicts = judge(args.document, summary, results=results)
    Path(args.out).write_text(json.dumps(to_json(args.document, verdicts), indent=1) + "\n")
    for verdict in verdicts:
        print(f"[{verdict.status}] {verdict.lesson}: {verdict.text}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
