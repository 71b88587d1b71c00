"""Adaptive repetitions: more jobs only for the points an undecided lesson rests on."""

from __future__ import annotations

import json
import math
import re

import pandas as pd
import pytest
from conftest import MACHINE
from tierbench import adaptive, matrix
from tierbench.errors import ConfigError
from tierbench.intervals import Band, Interval
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


def test_an_interval_needs_repetitions_as_its_width_over_its_distance_to_the_edge_squared():
    """A half-width that must shrink by 2 to clear the edge takes 4x the repetitions."""
    band = Band("greater", threshold=1.1)
    edge = math.log(1.21 / 1.1)  # the estimate 1.21x sits this far above the edge (log)
    across = Interval(1.21, 1.21 * math.exp(-2 * edge), 1.21 * math.exp(2 * edge), n=3)
    assert band.repetitions_to_decide(across) == pytest.approx(12)
    assert band.repetitions_to_decide(Interval(1.1, 1.0, 1.2, n=3)) == math.inf  # on the edge
    assert band.repetitions_to_decide(Interval(None, None, None, n=3)) is None
    within = Band("within", low=0.9, high=1.1)  # the nearer edge counts
    assert within.repetitions_to_decide(Interval(1.05, 1.0, 1.1025, n=4)) == pytest.approx(
        4 * (math.log(1.1025) / 2 / math.log(1.1 / 1.05)) ** 2
    )


def test_the_added_round_fits_the_budget_by_one_share_for_every_point():
    done = {"a": 3, "b": 3}
    seconds = {"a": 10.0, "b": 30.0}
    targets = {"a": 8, "b": 8}  # 5 x 10 + 5 x 30 = 200 s
    assert adaptive.within_budget(targets, done, seconds, 400) == targets
    cut = adaptive.within_budget(targets, done, seconds, 100)  # half of each: 2 more
    assert cut == {"a": 5, "b": 5}
    assert adaptive.within_budget(targets, done, seconds, 10) == {}  # none fits


def test_a_lesson_more_repetitions_cannot_decide_gets_none(monkeypatch):
    """One lesson needs about 5 a point (it gets 5), one 40 with a cap of 8 (it gets none)."""
    near = verdict(WITHIN_NOISE, f"{MORE_REPETITIONS}: ...", points=("dd/e/t/near",))
    near.repetitions_needed = 5
    far = verdict(WITHIN_NOISE, f"{MORE_REPETITIONS}: ...", points=("dd/e/t/far",))
    far.repetitions_needed = 40
    unknown = verdict(WITHIN_NOISE, f"{MORE_REPETITIONS}: ...", points=("dd/e/t/unknown",))
    runs = [
        {"workload": "dd", "experiment": "e", "tier": "t", "point": p, "repetition": r,
         "phase": "measured", "duration_s": 2.0, "metric": "m"}
        for p in ("near", "far", "unknown") for r in (1, 2, 3)
    ]  # fmt: skip
    monkeypatch.setattr(adaptive.aggregate, "load_records", lambda raw: pd.DataFrame(runs))
    monkeypatch.setattr(adaptive.aggregate, "summarise", lambda frame, noise_threshold: frame)
    monkeypatch.setattr(adaptive.verdicts, "judge", lambda *a, **k: [near, far, unknown])
    plan = adaptive.plan_repetitions({"document": "x"}, [], most=8)
    assert plan["points"] == {"dd/e/t/near": 5, "dd/e/t/unknown": 8}
    assert [b["repetitions_needed"] for b in plan["beyond_max"]] == [40]
    assert plan["added_seconds"] == pytest.approx((2 + 5) * 2.0)
    budgeted = adaptive.plan_repetitions({"document": "x"}, [], most=8, budget_s=7.0)
    assert budgeted["cut_to_budget"] and budgeted["added_seconds"] <= 7.0


def test_a_budget_that_is_no_duration_stops_the_run():
    study = {"study": "s", "repetitions": {"min": 3, "max": 8, "budget": "soon"}}
    with pytest.raises(ConfigError, match="budget 'soon' is not a duration"):
        matrix.repetition_bounds(study)
    timed = {**study, "repetitions": {"min": 3, "max": 8, "budget": "10 min"}}
    assert matrix.repetition_bounds(timed) == (3, 8)


def test_the_report_says_what_the_added_round_did_also_when_the_budget_left_none(tmp_path):
    from html import unescape

    from conftest import study_for_report
    from test_report_time import RUNS, records
    from tierbench import report

    study = tmp_path / "m" / "s"
    study_for_report(study, records("s", RUNS), ["disk"])
    verdict = {"lesson": "L", "status": "within_noise", "text": "t"}
    (study / "verdict.json").write_text(json.dumps({"verdicts": [verdict]}))
    lesson = {"lesson": "L", "needs": "", "points": ["fio/e/disk/p"], "repetitions_needed": 6}
    plan = {"max": 8, "lessons": [lesson], "beyond_max": [], "budget_s": 60.0}
    (study / "repetitions.json").write_text(
        json.dumps({**plan, "points": {"fio/e/disk/p": 6}, "cut_to_budget": False,
                    "added_seconds": 90.0})
    )  # fmt: skip
    html = unescape(report.render(tmp_path / "m", ["s"], {}))
    assert "their 1 points ran up to 6 repetitions" in html and "1 min 30 s of measuring" in html
    (study / "repetitions.json").write_text(
        json.dumps({**plan, "points": {}, "cut_to_budget": True, "added_seconds": 0.0})
    )
    html = unescape(report.render(tmp_path / "m", ["s"], {}))
    assert "the study's budget of 1 min 00 s left room for no more repetitions (L)" in html
