"""The report's first screen: tiers ranked by what each buys, decided on the interval."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from conftest import study_for_report
from tierbench import answer, report

WORKLOADS = {
    "job": SimpleNamespace(summary="a job", family="fe", headline=("wall_time",)),
    "io": SimpleNamespace(summary="an I/O test", family="fio", headline=("write_bandwidth",)),
}


def rows(workload, metric, unit, values_by_tier, points=("p1",)):
    """Measured repetitions: tier -> list of values, the same for every point."""
    out = []
    classes = {"shm": "shm", "disk": "disk", "nvme": "nvme"}
    for point in points:
        for tier, values in values_by_tier.items():
            for rep, value in enumerate(values, start=1):
                out.append(
                    dict(
                        workload=workload,
                        experiment="e",
                        point=point,
                        tier=tier,
                        tier_class=classes[tier],
                        metric=metric,
                        unit=unit,
                        value=value,
                        repetition=rep,
                        phase="measured",
                        status="ok",
                    )
                )
    return pd.DataFrame(out)


def test_a_time_twice_as_short_is_a_2x_speedup_with_a_tight_interval():
    frame = rows("job", "wall_time", "s", {"disk": [10.0, 10.1, 9.9], "shm": [5.0, 5.05, 4.95]})
    (found,) = answer.answers(frame, WORKLOADS)
    assert found.slowest == "disk" and found.tiers[0].tier == "shm"
    best = found.tiers[0]
    assert best.speedup == pytest.approx(2.0, rel=1e-6)
    assert 1.9 < best.low <= 2.0 <= best.high < 2.1
    assert "worth moving to" in found.sentence


def test_a_rate_twice_as_high_is_a_2x_speedup():
    frame = rows("io", "write_bandwidth", "MB/s", {"disk": [100, 101, 99], "shm": [200, 202, 198]})
    (found,) = answer.answers(frame, WORKLOADS)
    assert found.tiers[0].tier == "shm" and found.tiers[0].speedup == pytest.approx(2.0)


def test_overlapping_noise_is_no_measurable_difference():
    rng = np.random.default_rng(1)
    noisy = {t: list(10 + rng.normal(0, 2, 5)) for t in ("disk", "shm")}
    (found,) = answer.answers(rows("job", "wall_time", "s", noisy), WORKLOADS)
    best = found.tiers[0]
    assert best.low <= 1.0 <= best.high
    assert "no measurable difference" in found.sentence


def test_a_small_but_certain_gain_is_said_to_be_small():
    frame = rows("job", "wall_time", "s", {"disk": [10.5, 10.5, 10.5], "shm": [10.0, 10.0, 10.0]})
    (found,) = answer.answers(frame, WORKLOADS)
    assert found.tiers[0].low > 1.0 and "gains little" in found.sentence


def test_geometric_mean_over_points_and_one_tier_only_gives_no_answer():
    frame = pd.concat(
        [
            rows("io", "write_bandwidth", "MB/s", {"disk": [100] * 3, "shm": [400] * 3}, ("a",)),
            rows("io", "write_bandwidth", "MB/s", {"disk": [100] * 3, "shm": [100] * 3}, ("b",)),
        ]
    )
    (found,) = answer.answers(frame, WORKLOADS)
    assert found.tiers[0].speedup == pytest.approx(2.0) and found.tiers[0].points == 2
    alone = rows("io", "write_bandwidth", "MB/s", {"shm": [1, 2, 3]})
    assert answer.answers(alone, WORKLOADS) == []


def test_warmup_and_failed_rows_do_not_count():
    frame = rows("job", "wall_time", "s", {"disk": [10.0] * 3, "shm": [5.0] * 3})
    warm = frame.assign(phase="warmup", value=1000.0)
    failed = frame.assign(status="failed", value=np.nan)
    (found,) = answer.answers(pd.concat([frame, warm, failed]), WORKLOADS)
    assert found.tiers[0].speedup == pytest.approx(2.0)


def test_report_puts_the_answer_before_any_detail(tmp_path):
    """The first screen answers the question: the ranked tiers come before verdicts,
    figures, tables of medians and provenance."""
    frame = rows("fio", "write_bandwidth", "MB/s", {"disk": [100, 101, 99], "shm": [300, 301, 299]})
    frame = frame.assign(
        study="s", experiment="e", host="h", point="p", started_at="t", duration_s=1
    )
    study_for_report(tmp_path / "m" / "s", frame, ["disk"])
    html = report.render(tmp_path / "m", ["s"], {"s": "A study"})
    body = html[html.index("<body>") :]
    first = body.index('class="answers"')
    for later in ("<figure", "Medians of every point", "Where it ran"):
        assert later not in body[:first]
    assert "shm does this work 3.00x" in body
    assert 'class="sortable"' in body and 'input class="filter"' in body


def test_the_slowest_tier_stands_at_one_even_when_points_disagree():
    """Two points that disagree on which tier is slower: the tier slowest on the geometric
    mean is the reference, at exactly 1x, and the sentence follows its interval."""
    frame = pd.concat(
        [
            rows("job", "wall_time", "s", {"disk": [10.0] * 3, "shm": [5.0] * 3}, ("a",)),
            rows("job", "wall_time", "s", {"disk": [10.0] * 3, "shm": [12.0] * 3}, ("b",)),
        ]
    )
    (found,) = answer.answers(frame, WORKLOADS)
    by_tier = {t.tier: t for t in found.tiers}
    assert found.slowest == "disk" and by_tier["disk"].speedup == pytest.approx(1.0)
    assert by_tier["shm"].speedup == pytest.approx((2.0 * 10 / 12) ** 0.5)


def test_traced_experiments_are_not_ranked():
    frame = rows("job", "wall_time", "s", {"disk": [10.0] * 3, "shm": [5.0] * 3})
    assert answer.answers(frame, WORKLOADS, untimed={"e"}) == []


def test_a_wide_interval_above_one_says_faster_but_not_how_much():
    frame = rows("job", "wall_time", "s", {"disk": [10.5, 11.5, 13], "shm": [9.8, 10, 10.2]})
    (found,) = answer.answers(frame, WORKLOADS)
    best = found.tiers[0]
    assert 1.0 < best.low < answer.WORTH_IT < best.high
    assert "by how much the repetitions cannot yet say" in found.sentence
