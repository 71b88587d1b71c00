"""More repetitions where a verdict needs them, and only there.

A paper study may give ``repetitions: {min: 3, max: 10}``. Every point first
runs ``min`` measured repetitions; then this step judges the document's
lessons on them, and each lesson whose interval reaches across the edge of
its band (*within noise* for want of repetitions) gets ``max`` repetitions
for the points its ratios rest on. One round, so a job stays one repetition
and the plan is known before the second round starts (a Snakemake
checkpoint). A lesson still undecided at the cap says so in its verdict.

    python -m tierbench.adaptive --lessons lessons.json --max 10 --out repetitions.json raw/...json
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


def plan_repetitions(paper: dict, raw: list[str], most: int) -> dict:
    """Per point that a straddling lesson rests on, the repetitions it gets (``most``)."""
    frame = aggregate.load_records(raw)
    summary = aggregate.summarise(frame, noise_threshold=float("inf"))
    found = verdicts.judge(paper, summary, results=frame)
    extra = wanting_repetitions(found)
    return {
        "document": paper["document"],
        "max": most,
        "points": {point: most for v in extra for point in v.points},
        "lessons": [{"lesson": v.lesson, "needs": v.needs, "points": v.points} for v in extra],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lessons", required=True, help="the study file (or lessons.json)")
    parser.add_argument("--max", type=int, required=True, help="repetitions at most per point")
    parser.add_argument("--out", required=True)
    parser.add_argument("raw", nargs="+", help="raw records of the first round")
    args = parser.parse_args(argv)
    plan = plan_repetitions(verdicts.load_paper(args.lessons), args.raw, args.max)
    Path(args.out).write_text(json.dumps(plan, indent=1, sort_keys=True) + "\n")
    for lesson in plan["lessons"]:
        print(
            f"{len(lesson['points'])} points to {args.max} repetitions: {lesson['lesson']}",
            file=sys.stderr,
        )
    if not plan["lessons"]:
        print("every lesson decided on the first round: no more repetitions", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
