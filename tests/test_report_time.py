"""The report's first screen says how long each study took and how much of it was measuring."""

from __future__ import annotations

from html import unescape

import pandas as pd
import pytest
from conftest import study_for_report
from tierbench import report


def records(study: str, runs: list[tuple[int, str, float]]) -> pd.DataFrame:
    """A made-up results.csv: each run (repetition, started_at, duration_s) is one record
    with two metric rows, as the runner's records are tidied (a row per metric)."""
    rows = []
    for repetition, started_at, duration in runs:
        for metric, value in (("write_bandwidth", 100.0 + repetition), ("write_time", 1.0)):
            rows.append(
                dict(
                    study=study,
                    workload="fio",
                    experiment="e",
                    tier="disk",
                    tier_class="disk",
                    host="h",
                    point="p",
                    repetition=repetition,
                    phase="warmup" if repetition == 0 else "measured",
                    started_at=started_at,
                    duration_s=duration,
                    metric=metric,
                    unit="MB/s" if metric == "write_bandwidth" else "s",
                    value=value,
                    status="ok",
                )
            )
    return pd.DataFrame(rows)


RUNS = [
    (0, "2026-12-01T10:00:00+00:00", 20.0),  # the warm-up
    (1, "2026-12-01T10:01:00+00:00", 30.0),
    (2, "2026-12-01T10:02:00+00:00", 30.0),
]


def test_a_study_took_its_span_and_measured_its_records():
    """One record per repetition, whatever the metric rows: 80 s measured of 150 s."""
    time = report.study_time(records("s", RUNS))
    assert time["records"] == 3
    assert time["measuring_s"] == pytest.approx(80.0)  # not 160: two rows per record
    assert time["span_s"] == pytest.approx(150.0)  # 10:00:00 to 10:02:30
    assert time["share"] == pytest.approx(80 / 150)
    assert report.time_line(time) == (
        "2 min 30 s from the first benchmark's start to the last one's end, "
        "1 min 20 s of it measuring (53%), 3 runs"
    )


def test_a_table_without_readable_times_says_so():
    assert report.study_time(records("s", [(1, "t", 1.0)])) is None
    assert report.study_time(pd.DataFrame()) is None
    assert report.time_line(None) == "no record says when it ran"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (4.25, "4.2 s"),
        (42, "42 s"),
        (185, "3 min 05 s"),
        (1736, "28 min 56 s"),
        (3720, "1 h 02 min"),
    ],
)
def test_durations_read_as_people_say_them(seconds, text):
    assert report.duration_text(seconds) == text


def test_studies_side_by_side_overlap_and_do_not_add_up():
    a = report.study_time(records("a", RUNS))
    b = report.study_time(records("b", [(1, "2026-12-01T10:01:30+00:00", 60.0)]))
    total = report.total_time([a, None, b])
    assert total["span_s"] == pytest.approx(150.0)  # 10:00:00 to 10:02:30, not 150 + 60
    assert total["measuring_s"] == pytest.approx(140.0)
    assert total["records"] == 4


def test_the_time_is_on_the_first_screen(tmp_path):
    """Before the answers and the verdicts: the total, and a row per study."""
    study_for_report(tmp_path / "m" / "a", records("a", RUNS), ["disk"])
    later = [(1, "2026-12-01T10:05:00+00:00", 60.0)]
    study_for_report(tmp_path / "m" / "b", records("b", later), ["disk"])
    html = unescape(report.render(tmp_path / "m", ["a", "b"], {"a": "A", "b": "B"}))
    body = html[html.index("<body>") :]
    first = body.index('id="time"')
    assert first < body.index('<section id="a"')
    assert (
        "<strong>Time:</strong> 2 studies, 6 min 00 s from the first benchmark's start to the "
        "last one's end, 2 min 20 s of it measuring (39%), 4 runs." in body
    )
    assert "overlap" not in body  # b started after a ended
    table = body[first : body.index("</table>", first)].replace('<td class="num">', "|")
    assert '<a href="#a">a</a></td>|2 min 30 s</td>|1 min 20 s</td>|53%' in table
    assert '<a href="#b">b</a></td>|1 min 00 s</td>|1 min 00 s</td>|100%' in table
    # each study's own line says it too
    assert "; took 2 min 30 s, 1 min 20 s of it measuring" in body


def test_studies_run_side_by_side_are_said_to_overlap(tmp_path):
    study_for_report(tmp_path / "m" / "a", records("a", RUNS), ["disk"])
    beside = [(1, "2026-12-01T10:00:30+00:00", 100.0)]
    study_for_report(tmp_path / "m" / "b", records("b", beside), ["disk"])
    html = report.render(tmp_path / "m", ["a", "b"], {})
    assert "The studies ran side by side, so their spans overlap." in html
