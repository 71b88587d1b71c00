"""Does each document's lesson hold on this hardware? A verdict per lesson, with intervals.

A paper study declares its lessons in its own file, as data (docs/development.md,
"Adding a paper"): each ratio's two sides as selectors over the summary, the band
it is claimed to lie in, the published rows and the premise the lesson needs.
One module judges them all; what data cannot say is a named hook (:data:`HOOKS`).
Fast and slow tiers come from the tier *roles* (:mod:`tierbench.tiers`), never from
which one measured faster, so each verdict can come out either way. A lesson is
*reproduced* when every ratio's 95% interval lies in its band, *not reproduced*
when one lies wholly outside, *within noise* otherwise (with what would decide it),
and *inconclusive* when the run cannot test it (with the reason).

    python -m tierbench.verdicts --lessons lessons.json --summary summary.csv \\
        --results results.csv [--fidelity fidelity.json] --out verdict.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import jsonschema
import pandas as pd

from . import fidelity, pagecache, reference, workloads
from .intervals import ACROSS, INSIDE, OUTSIDE, Band, Interval
from .lesson_data import (
    POINT_METRIC,
    Runs,
    _in_memory,
    _on_device,
    _value,
    matches,
    pick_tier,
    point_id,
    select,
    show,
)
from .schemas import load, load_yaml
from .units import format_value

REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE = "reproduced", "not_reproduced", "inconclusive"
WITHIN_NOISE = "within_noise"
#: each status as a verdict's text says it
WORDS = {s: s.replace("_", " ") for s in (REPRODUCED, NOT_REPRODUCED, WITHIN_NOISE, INCONCLUSIVE)}
#: how a proxy's verdict on a lesson stands against its application's (:func:`agreement`)
AGREES, DISAGREES, NOT_TOLD_APART = "agrees", "disagrees", "undecided"
#: a claim's outcome from where its interval lies against its band
OUTCOMES = {INSIDE: REPRODUCED, OUTSIDE: NOT_REPRODUCED, ACROSS: WITHIN_NOISE}
PAGE_CACHE_TEXT = "the device was never reached: this measured the page cache, not the device"
PAGE_CACHE_NEEDS = (
    "a device tier the page cache does not absorb: fsync'd or direct I/O, "
    "or a file larger than the node's dirty limit"
)
MORE_REPETITIONS = "more repetitions"
#: repetitions_needed of an estimate on the band's edge: no number of repetitions decides it
NEVER = 1_000_000
#: a ratio of a lesson with ``relative_to`` whose points' runs hold none of its baselines
AS_MEASURED = "times as measured: these runs hold no baseline of their own"
#: what a paper study's file gives its verdict: its lessons, and its published figure
PAPER_KEYS = ("lessons", "published_figure")
#: the premises on the device behind a lesson's tiers that :func:`on_page_cache` applies
PAGE_CACHE_PREMISES = ("device_reached", "device_reached_to_refute", "device_noted")


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
    #: a proxy's lesson where the study ran its application too: whether the application's
    #: verdict is the same, and each claim's ratio proxy / application (:func:`agreement`)
    agreement: str = ""
    #: within noise: about how many repetitions a point its undecided claims need to be
    #: decided (:meth:`Band.repetitions_to_decide`; None: more repetitions would not tell)
    repetitions_needed: int | None = None


@dataclass
class Claim:
    """One ratio of a lesson on this run: its interval, band, published value and words."""

    label: str
    interval: Interval
    band: Band
    published: float | None
    text: str
    #: the summary rows it rests on
    rows: list
    #: this claim is the lesson's premise: its words when unmet or undecided
    premise: dict | None = None
    #: a ratio of ratios' two ratios, shown beside it
    parts: list[Comparison] = field(default_factory=list)
    #: said after the verdict: other points were taken, which reach the device
    note: str = ""
    #: the samples and powers its ratio is the product of (:func:`tierbench.intervals.product`)
    terms: list = field(default_factory=list)

    @property
    def outcome(self) -> str:
        return OUTCOMES[self.band.place(self.interval)]

    def comparison(self) -> Comparison:
        return comparison(self.label, self.published, self.interval)


def comparison(label: str, published: float | None, interval: Interval) -> Comparison:
    published = None if published is None else float(published)
    return Comparison(label, published, interval.estimate, "x", interval.low, interval.high)


# --- judging -----------------------------------------------------------------------------


class Lesson:
    """One declared lesson against one study: its tiers, its claims, then its verdict.

    ``swap`` turns a selector of the proxy's rows into one of the application's, so
    that the same lesson is judged for both.
    """

    def __init__(self, study: Study, ref: pd.DataFrame, spec: dict, swap):
        self.study, self.ref, self.spec, self.swap = study, ref, spec, swap
        #: the claims its verdict was decided on (none when it could not be tested)
        self.claims: list[Claim] = []
        self.among = select(study.ok, swap(spec["tiers"]["among"]))
        tiers = {k: v for k, v in spec["tiers"].items() if k != "among"}
        self.tiers = {name: pick_tier(self.among, tier) for name, tier in tiers.items()}

    def verdict(self) -> Verdict:
        spec, premise = self.spec, self.spec.get("premise", {})
        needed = {p["tier"] for c in spec["claims"] for p in _points(c) if "tier" in p}
        if any(self.tiers[name] is None for name in needed):
            return self.missing(spec["missing"])
        if (hook := spec.get("hook")) and (why := HOOKS[hook](self, spec["claims"][0])):
            return _missing(spec["lesson"], why)
        claims = []
        for claim_spec in spec["claims"]:
            if (claim := self.claim(claim_spec)) is None:
                why = claim_spec.get("missing", spec["missing"])
                return self.missing(why.format(**self.tiers))
            claims.append(claim)
        self.claims = claims
        device = _on_device([row for claim in claims for row in claim.rows])
        reached = [r for r in device if str(r.get("page_cache", "") or "") == pagecache.DEVICE]
        if premise.get("kind") == "fits_page_cache" and reached:
            reason = reached[0].get("page_cache_reason", "")
            return _missing(spec["lesson"], premise["unmet"].format(**self.tiers, reason=reason))
        verdict = decided(spec, claims)
        if notes := [claim.note for claim in claims if claim.note]:
            verdict.text += " " + " ".join(notes)
            return verdict
        return on_page_cache(verdict, premise.get("kind"), claims, device)

    def missing(self, what: str) -> Verdict:
        """Not testable, and why; with why its workload's points failed, if any did."""
        summary, among = self.study.summary, self.swap(self.spec["tiers"]["among"])
        failed = summary[summary["status"] != "ok"]
        failed = failed[failed["workload"] == among.get("workload")]
        if len(failed):
            what += f" ({'; '.join(sorted(set(failed['reason'].astype(str))))})"
        return _missing(self.spec["lesson"], what)

    def claim(self, spec: dict) -> Claim | None:
        """A claim on this run's points; None when a point is missing.

        With ``if_absorbed``, where the device points may have stayed in the
        page cache, the points with those parameters instead when they reached it.
        """
        selector = self.swap(spec.get("rows") or self.spec["tiers"]["among"])
        found = self.points(spec, select(self.study.ok, selector))
        if found is None:
            return None
        name, note, other = spec.get("name", ""), "", spec.get("if_absorbed")
        absorbed, reason = _in_memory(_on_device(found[0]))
        if other and absorbed:
            where = {**selector.get("where", {}), **other["where"]}
            instead = self.points(spec, select(self.study.ok, {**selector, "where": where}))
            if instead is not None and not _in_memory(_on_device(instead[0]))[0]:
                found, name, note = instead, other["name"], other["note"].format(reason=reason)
        return self.judged_claim(spec, *found, name, note)

    def points(self, spec: dict, rows: pd.DataFrame) -> tuple[list, dict] | None:
        """Each point's row and the values of its parameters; None when one is missing,
        or when a ratio would set a point against itself."""
        points = _points(spec)
        shared = [rows[rows["tier"] == self.tiers[p["tier"]]] for p in points if "tier" in p]
        found, values = [], {}
        for point in points:
            at = select(self.study.ok, self.swap(point["rows"])) if "rows" in point else rows
            if "tier" in point:
                at = at[at["tier"] == self.tiers[point["tier"]]]
            params = {k: v for k, v in point.items() if k not in ("tier", "rows", "pick")}
            if any(key not in at.columns for key in params):
                return None
            resolved = {key: _value(at, key, wanted, shared) for key, wanted in params.items()}
            for key, value in resolved.items():
                at = at[matches(at[key], value)] if value is not None else at[:0]
            if point.get("pick") == "highest" and len(at):
                at = at.loc[[at["median"].astype(float).idxmax()]]
            if len(at) != 1:
                return None
            found.append(at.iloc[0])
            values = resolved | values
        if any(found[i].name == found[i + 1].name for i in range(0, len(found), 2)):
            return None
        return found, values

    def judged_claim(self, spec: dict, rows: list, values: dict, name: str, note: str) -> Claim:
        """The claim's ratio on ``rows`` beside the published one, in the lesson's words."""
        fields = {**self.tiers, **values, "name": name}
        # a list, so the order the study gives survives JSON written with sorted keys
        baselines = self.spec["tiers"]["among"].get("relative_to", [])
        relative_to = {each["metric"]: each["text"] for each in baselines}
        terms, used = self.study.runs.terms(*rows, relative_to=list(relative_to))
        interval = self.study.runs.interval(terms, of=tuple(point_id(row) for row in rows))
        parts = []
        if "ratio" in spec:
            value = self.published(spec["published"])
        else:
            sides = [self.published(s) if isinstance(s, list) else s for s in spec["published"]]
            value = sides[0] / sides[1]
            halves, same_baseline = (rows[:2], rows[2:]), ([used] if used else [])
            ratios = [self.study.runs.ratio(*half, relative_to=same_baseline)[0] for half in halves]
            parts = [comparison(*each) for each in zip(spec["labels"], sides, ratios, strict=True)]
            fields |= {"upper": show(ratios[0]), "lower": show(ratios[1])}
            upper, lower = (format_value(side, ratio=True) for side in sides)
            fields |= {"published_upper": upper, "published_lower": lower}
        label = spec["label"].format(**fields)
        fields |= {"ours": show(interval), "published": format_value(value, ratio=True)}
        text = spec["text"].format(**fields)
        if relative_to:
            text += f"; {relative_to[used]}" if used else f"; {AS_MEASURED}"
        claimed = band(spec["band"])
        premise = spec.get("premise")
        return Claim(label, interval, claimed, value, text, rows, premise, parts, note, terms)

    def published(self, pair: list[dict]) -> float:
        """The published ratio: the median of each side's reference rows, one over the other."""
        sides = []
        for where in pair:
            rows = self.ref
            for key, wanted in where.items():
                rows = rows[matches(rows[key], wanted)]
            if rows.empty:
                raise KeyError(f"the reference has no row for {where}")
            sides.append(float(rows["canonical_value"].median()))
        return sides[0] / sides[1]


def _points(spec: dict) -> list[dict]:
    pairs = [spec["ratio"]] if "ratio" in spec else spec["ratio_of_ratios"]
    return [point for pair in pairs for point in pair]


def band(spec: dict) -> Band:
    """A band as a lesson declares it: ``{greater: x}``, ``{less: x}``, ``{within: [a, b]}``."""
    ((kind, value),) = spec.items()
    return Band(kind, low=value[0], high=value[1]) if kind == "within" else Band(kind, value)


def _missing(lesson: str, what: str) -> Verdict:
    needs = what.removeprefix("needs ")
    return Verdict(lesson, INCONCLUSIVE, f"Not testable in this run: {what}.", needs=needs)


def _needs(claims: list[Claim], hint: str = "") -> str:
    """What would decide the undecided claims."""
    parts = []
    for claim in (c for c in claims if c.outcome == WITHIN_NOISE):
        if not claim.interval.known:
            parts.append(f"{claim.label}: {claim.interval.reason.removeprefix('needs ')}")
        else:
            parts.append(
                f"{MORE_REPETITIONS}: {claim.label} {show(claim.interval)} at "
                f"{claim.interval.n} repetitions a point reaches across the edge of the band "
                f"({claim.band}){_widest_part(claim)}"
            )
    return "; ".join(parts + ([hint] if parts and hint else []))


def _widest_part(claim: Claim) -> str:
    """Which of a ratio of ratios' two ratios is the less certain: where repetitions go."""
    known = [p for p in claim.parts if p.low and p.high and p.low > 0 and p.high > 0]
    if len(known) < 2:
        return ""
    widest = max(known, key=lambda part: math.log(part.high / part.low))
    shown = show(Interval(widest.ours, widest.low, widest.high, claim.interval.n))
    return f", most of its spread from {widest.label} {shown}"


def repetitions_needed(claims: list[Claim]) -> float | None:
    """The repetitions a point that would decide every claim across its band's edge: the
    most any of them needs. None when one of them cannot say (its interval unknown)."""
    needed = [
        claim.band.repetitions_to_decide(claim.interval)
        for claim in claims
        if claim.outcome == WITHIN_NOISE
    ]
    if not needed or any(n is None for n in needed):
        return None
    return math.ceil(min(max(needed), NEVER))


def _combined(outcomes: list[str]) -> str:
    """Any claim outside its band refutes the lesson; all inside reproduce it."""
    if NOT_REPRODUCED in outcomes:
        return NOT_REPRODUCED
    return REPRODUCED if all(o == REPRODUCED for o in outcomes) else WITHIN_NOISE


def decided(spec: dict, claims: list[Claim]) -> Verdict:
    """The verdict on a lesson's claims, in its words.

    A premise claim decides whether the others count: outside its band the
    lesson cannot be tested, across its edge it is undecided.
    """
    lesson, what = spec["lesson"], "; ".join(claim.text for claim in claims)
    premises = [claim for claim in claims if claim.premise]
    judged = [claim for claim in claims if not claim.premise]
    bands = spec.get("band_text", "").format(*(claim.band for claim in claims))
    for premise in (p for p in premises if p.outcome == NOT_REPRODUCED):
        comparisons = [claim.comparison() for claim in claims]
        unmet = f"{what}. {premise.premise['unmet']}"
        return Verdict(lesson, INCONCLUSIVE, unmet, comparisons, bands, premise.premise["needs"])
    status = _combined([claim.outcome for claim in judged])
    band_words = "; ".join(
        str(c.band) if len(judged) == 1 else f"{c.label} {c.band}" for c in judged
    )
    text = f"{what}; the lesson claims {band_words}: {WORDS[status]}."
    shown = [claim.comparison() for claim in judged] + [p for c in judged for p in c.parts]
    shown += [premise.comparison() for premise in premises]
    needs = _needs(judged, spec.get("hint", "")) if status == WITHIN_NOISE else ""
    points = sorted({point for claim in judged for point in claim.interval.of})
    verdict = Verdict(lesson, status, text, shown, bands or band_words, needs, points)
    if status == WITHIN_NOISE:
        verdict.repetitions_needed = repetitions_needed(judged)
        if verdict.repetitions_needed is not None and MORE_REPETITIONS in needs:
            verdict.needs += (
                f"; about {verdict.repetitions_needed} repetitions a point would decide it"
                if verdict.repetitions_needed < NEVER
                else "; its estimate sits on the band's edge: no number of repetitions decides it"
            )
    for premise in (p for p in premises if p.outcome == WITHIN_NOISE):
        verdict.status, verdict.needs = WITHIN_NOISE, _needs(claims)
        verdict.text = f"{what}; {premise.premise['undecided']}."
    return verdict


def on_page_cache(verdict: Verdict, kind: str | None, claims: list[Claim], device) -> Verdict:
    """The lesson's premise on the device, where every device point may have stayed in the
    page cache and so measured the page cache instead.

    ``device_reached``: a lesson about the device is then inconclusive, whatever it shows.
    ``device_reached_to_refute``: a difference seen through the page cache holds for the
    tier as a job sees it; only its absence is untested (unless another claim refutes
    the lesson), and more repetitions may yet find it while it straddles the band.
    ``device_noted``: a lesson that holds when tiers look alike says so.
    """
    absorbed, reason = _in_memory(device)
    if not absorbed or verdict.status == INCONCLUSIVE or kind not in PAGE_CACHE_PREMISES:
        return verdict
    if kind == "device_noted":
        verdict.text += f" The device points may have stayed in the page cache ({reason})."
        return verdict
    outcome, needs = f"inconclusive ({WORDS[verdict.status]} through the page cache)", ""
    if kind == "device_reached_to_refute":
        on_device = [claim for claim in claims if _on_device(claim.rows)]
        others = [claim.outcome for claim in claims if claim not in on_device]
        if NOT_REPRODUCED in others or REPRODUCED in [c.outcome for c in on_device]:
            return verdict
        straddling = verdict.status == WITHIN_NOISE and MORE_REPETITIONS in verdict.needs
        outcome = "inconclusive"
        needs = f"; or, for the tier as a job sees it, {verdict.needs}" if straddling else ""
    verdict.text = verdict.text.removesuffix(f": {WORDS[verdict.status]}.")
    verdict.text += f": {outcome}, {PAGE_CACHE_TEXT} ({reason})."
    verdict.status, verdict.needs = INCONCLUSIVE, PAGE_CACHE_NEEDS + needs
    return verdict


# --- hooks: what a lesson needs that its data cannot say ---------------------------------


def past_dirty_limit(lesson: Lesson, claim: dict) -> str:
    """A page-cache cliff is there to see only when the sweep's largest file went past the
    node's dirty limit: why it is not, else ""."""
    selector = lesson.swap(claim["rows"])
    # every point of the sweep's experiment: its sizes and the limit, whatever their sync
    sweep = select(lesson.study.ok, {k: selector[k] for k in ("workload", "experiment")})
    sizes, limits = (sweep[sweep["metric"] == m] for m in ("bytes", "dirty_limit_bytes"))
    if select(lesson.study.ok, selector).empty or sizes.empty or limits.empty:
        return "no cliff sweep with sizes and the dirty limit"
    limit, largest = float(limits["median"].max()), float(sizes["median"].max())
    if largest > limit:
        return ""
    return (
        f"the largest file ({largest / 2**30:.2f} GiB) stayed below the dirty-page limit "
        f"({limit / 2**30:.2f} GiB); raise max_file_size and the tier's max_bytes, or use "
        "scale=full"
    )


#: the hooks a lesson may name (``hook:``), each given the lesson and its first claim
HOOKS = {"cliff": past_dirty_limit}


# --- the study and the command line --------------------------------------------------


@dataclass
class Study:
    """One study's numbers: summary.csv (every row) and its repetitions (results.csv)."""

    summary: pd.DataFrame
    runs: Runs

    @property
    def ok(self) -> pd.DataFrame:
        return self.summary[self.summary["status"] == "ok"]


def proxy_of(lessons: list[dict]) -> workloads.Pair | None:
    """The proxy the lessons measure, with the application it stands for; None if none."""
    selectors = [lesson["tiers"]["among"] for lesson in lessons]
    for claim in (claim for lesson in lessons for claim in lesson["claims"]):
        selectors += [s["rows"] for s in [claim, *_points(claim)] if "rows" in s]
    for selector in selectors:
        declared = workloads.find(str(selector.get("workload", "")))
        if declared is not None and declared.stands_for is not None:
            return declared.stands_for
    return None


def judge(
    paper: dict,
    summary: pd.DataFrame,
    ref: pd.DataFrame | None = None,
    results: pd.DataFrame | None = None,
    proxies: dict | None = None,
) -> list[Verdict]:
    """Each lesson of ``paper`` (its ``document`` and ``lessons``) on this study; without
    ``results`` no interval is known.

    Where the study also ran the real application of the proxy its lessons
    measure, every lesson is judged for each of them, the workload named in
    the lesson; ``proxies`` (the study's fidelity.json) then says of each
    proxy lesson whether its points lie where the proxy was shown faithful.
    """
    ref = reference.load() if ref is None else ref
    study = Study(summary, Runs(results))
    published = ref[ref["document"] == str(paper["document"])]
    lessons = [Lesson(study, published, spec, lambda s: s) for spec in paper["lessons"]]
    found = [lesson.verdict() for lesson in lessons]
    pair = proxy_of(paper["lessons"])
    if pair is None or study.ok["workload"].ne(pair.real).all():
        return found
    for verdict in found:
        verdict.lesson += f" [{pair.proxy}]"
    if proxies is not None:
        fidelity_notes(found, summary, proxies, pair.proxy)

    def real(selector: dict) -> dict:
        is_proxy = selector.get("workload") == pair.proxy
        return {**selector, "workload": pair.real} if is_proxy else selector

    theirs = []
    for spec, proxy, mine in zip(paper["lessons"], lessons, found, strict=True):
        application = Lesson(study, published, spec, real)
        verdict = application.verdict()
        mine.agreement = agreement(pair, (proxy, mine), (application, verdict))
        verdict.lesson += f" [{pair.real}]"
        theirs.append(verdict)
    return found + theirs


def agreement(pair: workloads.Pair, proxy: tuple, application: tuple) -> str:
    """Whether the application's verdict on a lesson is the proxy's, with each claim's ratio
    proxy / application and its interval; each side is its Lesson and Verdict.

    Near a band's edge two verdicts may differ where the measures do not: when every
    claim's ratio proxy / application holds 1 in its interval, the two cannot be told
    apart, and the disagreement is undecided rather than shown.
    """
    (lesson, mine), (other, theirs) = proxy, application
    if INCONCLUSIVE in (mine.status, theirs.status):
        if mine.status == theirs.status:
            return ""
        which = pair.real if theirs.status == INCONCLUSIVE else pair.proxy
        return f"not compared: the verdict on {which} is inconclusive"
    ratios = proxy_over_application(lesson, other)
    shown = "; ".join(f"{label}: {pair.proxy} / {pair.real} {show(i)}" for label, i in ratios)
    if mine.status == theirs.status:
        return f"{AGREES} with {pair.real}, {WORDS[theirs.status]} for both ({shown})"
    there = f"{pair.real}'s verdict is {WORDS[theirs.status]}"
    if ratios and all(i.known and i.low <= 1 <= i.high for _, i in ratios):
        return f"{NOT_TOLD_APART}: {there}, but every ratio holds 1 ({shown})"
    return f"{DISAGREES} with {pair.real}: {there} ({shown})"


def proxy_over_application(proxy: Lesson, application: Lesson) -> list[tuple[str, Interval]]:
    """Each judged claim's ratio on the proxy over the same claim's on the application, with
    the interval of the product of both claims' terms (a premise, such as fio's tiers being
    apart, is the same for both and left out)."""
    mine, theirs = ([c for c in lesson.claims if not c.premise] for lesson in (proxy, application))
    if len(mine) != len(theirs):
        return []
    return [
        (claim.label, proxy.study.runs.interval(claim.terms + [(s, -p) for s, p in other.terms]))
        for claim, other in zip(mine, theirs, strict=True)
    ]


def fidelity_notes(verdicts: list[Verdict], summary: pd.DataFrame, proxies: dict, proxy: str):
    """Each proxy verdict says whether the shapes it rests on are ones where the study showed
    the proxy faithful to its application (:func:`tierbench.fidelity.outside_region`)."""
    entries = [e for e in proxies["proxies"] if e["proxy"] == proxy]
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


def load_paper(path: str | Path) -> dict:
    """A paper study's document, lessons and published figure, from its study file or the
    pipeline's copy, checked against the study schema."""
    data = load_yaml(path)
    defs = load("config.schema.yaml")["$defs"]
    keys = {key: {"$ref": f"#/$defs/{key}"} for key in PAPER_KEYS}
    schema = {"$defs": defs, "type": "object", "properties": keys, "required": ["lessons"]}
    try:
        jsonschema.validate(data, schema)
    except jsonschema.ValidationError as error:
        place = "/".join(str(p) for p in error.absolute_path)
        raise SystemExit(f"{path}: {place}: {error.message}") from None
    if not data.get("document"):
        raise SystemExit(f"{path}: no document: only a paper study has lessons to judge")
    return {"document": str(data["document"]), **{k: data[k] for k in PAPER_KEYS if k in data}}


def _read_csv(path: str, what: str) -> pd.DataFrame:
    try:
        return pd.read_csv(path, low_memory=False)
    except (OSError, ValueError) as error:
        raise SystemExit(f"cannot read the {what} {path}: {error}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lessons", required=True, help="the study file (or lessons.json)")
    parser.add_argument("--summary", required=True, help="the study's summary.csv")
    parser.add_argument("--results", required=True, help="the study's results.csv (repetitions)")
    parser.add_argument("--fidelity", help="the study's fidelity.json, where it holds a proxy")
    parser.add_argument(
        "--reference", default=reference.REFERENCE_DIR, help="the published numbers' folder"
    )
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    paper = load_paper(args.lessons)
    summary, results = _read_csv(args.summary, "summary"), _read_csv(args.results, "results")
    missing = sorted({"phase", "status", "repetition", "value", *POINT_METRIC} - set(results))
    if missing:
        raise SystemExit(f"{args.results} is not a results.csv: no column {', '.join(missing)}")
    proxies = json.loads(Path(args.fidelity).read_text()) if args.fidelity else None
    verdicts = judge(paper, summary, reference.load(args.reference), results, proxies)
    found = {"document": paper["document"], "verdicts": [asdict(v) for v in verdicts]}
    if "published_figure" in paper:
        found["published_figure"] = paper["published_figure"]
    Path(args.out).write_text(json.dumps(found, indent=1) + "\n")
    for verdict in verdicts:
        print(f"[{verdict.status}] {verdict.lesson}: {verdict.text}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
