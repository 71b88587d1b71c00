"""More repetitions where a verdict needs them, and only there.

A paper study may give ``repetitions: {min: 3, max: 10, budget: 10 min}``.
Every point first runs ``min`` measured repetitions; then this step judges
the document's lessons on them, and each lesson whose interval reaches across
the edge of its band (*within noise* for want of repetitions) gets, for the
points its ratios rest on, about as many repetitions as its interval needs to
land on one side (its half-width shrinks as one over the square root of the
repetitions), at most ``max``. A lesson that would need more than ``max`` gets
none: another repetition would not decide it. ``budget`` cuts the added round,
every point by the same share, to that much measuring time (each point's
median time a repetition). One round, so a job stays one repetition and the
plan is known before the second round starts (a Snakemake checkpoint). A
lesson still undecided says so in its verdict, with the repetitions it needs.

    python -m tierbench.adaptive --lessons lessons.json --max 10 [--budget 600] \
        --out repetitions.json raw/...json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import aggregate, verdicts


def wanting_repetitions(found: list[verdicts.Verdict]) -> list[verdicts.Verdict]:
    """Lessons that more repetitions could decide: an interval across the edge of the band.

    That is every *within noise* verdict with its intervals known, and an
    *inconclusive* one whose device points the page cache absorbed while its
    interval straddles the band (repeating may still show the tier, as a job
    sees it, slower). An interval missing for another reason (no results, a
    point that only ever runs once) is not helped by repeating.
    """
    undecided = (verdicts.WITHIN_NOISE, verdicts.INCONCLUSIVE)
    return [
        v
        for v in found
        if v.status in undecided and verdicts.MORE_REPETITIONS in v.needs and v.points
    ]


def measured_runs(frame):
    """One row per measured repetition, keyed as a verdict names its points
    (``workload/experiment/tier/point``)."""
    measured = frame[frame["phase"] == "measured"]
    runs = measured.drop_duplicates(["workload", "experiment", "tier", "point", "repetition"])
    keys = runs["workload"] + "/" + runs["experiment"] + "/" + runs["tier"] + "/" + runs["point"]
    return runs.assign(key=keys)


def added_seconds(plan: dict[str, int], done: dict, seconds: dict) -> float:
    """Measuring time of the repetitions a plan adds: each point's added ones x its median."""
    return sum((n - done.get(p, 0)) * seconds.get(p, 0.0) for p, n in plan.items())


def within_budget(targets: dict[str, int], done: dict, seconds: dict, budget_s: float) -> dict:
    """The targets cut, all by the same share of their added repetitions, until the added
    round's measuring time (repetitions x each point's median time) fits ``budget_s``."""
    cost = added_seconds(targets, done, seconds)
    if cost <= budget_s:
        return targets
    share = budget_s / cost
    cut = {p: done.get(p, 0) + int((n - done.get(p, 0)) * share) for p, n in targets.items()}
    return {p: n for p, n in cut.items() if n > done.get(p, 0)}


def plan_repetitions(paper: dict, raw: list[str], most: int, budget_s: float | None = None) -> dict:
    """Per point that a straddling lesson rests on, the repetitions it gets: about as many as
    the lesson's interval needs to be decided (``repetitions_needed``), at most ``most``; a
    lesson that would need more than ``most`` gets none (another repetition would not decide
    it). With ``budget_s``, the added round is cut to fit that much measuring time."""
    frame = aggregate.load_records(raw)
    summary = aggregate.summarise(frame, noise_threshold=float("inf"))
    found = verdicts.judge(paper, summary, results=frame)
    runs = measured_runs(frame)
    done = runs["key"].value_counts().to_dict()
    seconds = runs.groupby("key")["duration_s"].median().to_dict()
    targets, repeated, beyond = {}, [], []
    for v in wanting_repetitions(found):
        needed = v.repetitions_needed
        if needed is not None and needed > most:
            beyond.append({"lesson": v.lesson, "needs": v.needs, "repetitions_needed": needed})
            continue
        for point in v.points:
            wanted = most if needed is None else max(needed, done.get(point, 0) + 1)
            targets[point] = max(targets.get(point, 0), min(most, wanted))
        repeated.append({"lesson": v.lesson, "needs": v.needs, "points": v.points,
                         "repetitions_needed": needed})  # fmt: skip
    planned = within_budget(targets, done, seconds, budget_s) if budget_s else targets
    return {
        "document": paper["document"],
        "max": most,
        "points": planned,
        "lessons": repeated,
        "beyond_max": beyond,
        "budget_s": budget_s,
        "cut_to_budget": planned != targets,
        "added_seconds": round(added_seconds(planned, done, seconds), 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lessons", required=True, help="the study file (or lessons.json)")
    parser.add_argument("--max", type=int, required=True, help="repetitions at most per point")
    parser.add_argument("--budget", type=float, help="seconds of measuring the round may add")
    parser.add_argument("--out", required=True)
    parser.add_argument("raw", nargs="+", help="raw records of the first round")
    args = parser.parse_args(argv)
    paper = verdicts.load_paper(args.lessons)
    plan = plan_repetitions(paper, args.raw, args.max, args.budget)
    Path(args.out).write_text(json.dumps(plan, indent=1, sort_keys=True) + "\n")
    for lesson in plan["lessons"]:
        print(
            f"{len(lesson['points'])} points, about {lesson['repetitions_needed'] or args.max}"
            f" repetitions (at most {args.max}): {lesson['lesson']}",
            file=sys.stderr,
        )
    for lesson in plan["beyond_max"]:
        print(
            f"not repeated, it would need about {lesson['repetitions_needed']} repetitions, "
            f"more than {args.max}: {lesson['lesson']}",
            file=sys.stderr,
        )
    if plan["cut_to_budget"]:
        print(f"the added round is cut to its budget of {args.budget:g} s", file=sys.stderr)
    if not plan["lessons"]:
        print("every lesson decided on the first round: no more repetitions", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
