"""Adaptive repetitions: more jobs only for the points an undecided lesson rests on."""

from __future__ import annotations

import json
import re

import pytest
from conftest import MACHINE
from tierbench import adaptive, matrix
from tierbench.errors import ConfigError
from tierbench.verdicts import (
    INCONCLUSIVE,
    MORE_REPETITIONS,
    NOT_REPRODUCED,
    PAGE_CACHE_NEEDS,
    REPRODUCED,
    WITHIN_NOISE,
    Verdict,
)

STUDY = "eagle_local"


def verdict(status, needs="", points=("dd/cliff/disk/p",)):
    return Verdict("a lesson", status, "text", needs=needs, points=list(points))


def test_only_lessons_more_repetitions_can_decide_ask_for_them():
    straddling = verdict(WITHIN_NOISE, f"{MORE_REPETITIONS}: ratio 1.2x [0.9, 1.6] reaches across")
    asked = adaptive.wanting_repetitions(
        [
            straddling,
            verdict(REPRODUCED),
            verdict(NOT_REPRODUCED),
            # undecided for want of a number, not of repetitions: repeating cannot help
            verdict(WITHIN_NOISE, "ratio: at least 2 repetitions of each point"),
            verdict(WITHIN_NOISE, f"{MORE_REPETITIONS}: ...", points=()),
            # the page cache absorbed the device and the interval lies outside the band
            verdict(INCONCLUSIVE, PAGE_CACHE_NEEDS),
        ]
    )
    assert asked == [straddling]
    # absorbed, but straddling: more repetitions may still show the tier slower as a job sees it
    absorbed = verdict(INCONCLUSIVE, f"{PAGE_CACHE_NEEDS}; or, for the tier as a job sees it, "
                       f"{MORE_REPETITIONS}: ratio 1.3x [0.9, 1.6] reaches across")  # fmt: skip
    assert adaptive.wanting_repetitions([absorbed]) == [absorbed]


def test_repetition_range_bounds():
    assert matrix.repetition_bounds({"study": "s", "repetitions": 3}) == (3, 3)
    ranged = {"study": "s", "repetitions": {"min": 3, "max": 8}, "document": "001"}
    assert matrix.repetition_bounds(ranged) == (3, 8) and matrix.adaptive(ranged)
    assert matrix.repetitions(ranged) == [0, 1, 2, 3]
    assert not matrix.adaptive({**ranged, "document": None})
    with pytest.raises(ConfigError, match="max 2 < min 3"):
        matrix.repetition_bounds({"study": "s", "repetitions": {"min": 3, "max": 2}})


def test_dry_run_adds_jobs_only_for_the_points_a_straddling_lesson_rests_on(pipeline):
    """After the first round, the checkpoint's repetitions.json alone decides the extra jobs."""
    args = ("--configfile", f"config/studies/{STUDY}.yaml", "--config", "scale=smoke")
    out = pipeline.root / "results" / MACHINE / STUDY
    target = f"results/{MACHINE}/{STUDY}"
    pipeline("-c1", f"{target}/plan.json", *args)
    plan = json.loads((out / "plan.json").read_text())
    low, high = 3, 8  # the study's repetitions: {min: 3, max: 8}
    # the first round as if it had run: every point's warm-up and measured repetitions
    (out / "preflight.json").write_text("{}")
    for key in plan["points"]:
        for rep in range(0, low + 1):
            raw = out / "raw" / key / f"rep{rep}.json"
            raw.parent.mkdir(parents=True, exist_ok=True)
            raw.write_text("{}")
    chosen = sorted(k for k in plan["points"] if k.startswith("dd/cliff/"))[:2]
    (out / "repetitions.json").write_text(
        json.dumps({"points": {k: high for k in chosen}, "lessons": [], "max": high})
    )
    done = pipeline("-n", f"{target}/summary.csv", *args)
    jobs = re.findall(r"output: (results/\S+/raw/\S+/rep(\d+)\.json)", done.stdout)
    extra = {path.rsplit("/rep", 1)[0].split("/raw/")[1] for path, _ in jobs}
    assert extra == set(chosen)
    assert sorted(int(rep) for _, rep in jobs) == sorted(list(range(low + 1, high + 1)) * 2)
    assert "rule extra_repetitions" not in done.stdout
