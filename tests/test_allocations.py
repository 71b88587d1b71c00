"""Packing a study's benchmark jobs into Slurm allocations (no Slurm needed)."""

import re

import pandas as pd
import pytest
import yaml
from tierbench import allocations
from tierbench.allocations import Bench, Limits
from tierbench.units import parse_duration_minutes


def point(name: str, reps: int, minutes: float = 1, partition: str = "", **needs) -> list[Bench]:
    return [Bench(name, rep, 60 * minutes, partition=partition, **needs) for rep in range(reps)]


def test_a_study_shorter_than_the_limit_is_one_allocation_in_study_order():
    units = [point("a", 4), point("b", 4, nodes=2, tasks=4), point("c", 2)]
    (only,) = allocations.pack(units, Limits(), "s-round1")
    assert [(j.point, j.rep) for j in only.jobs] == [(j.point, j.rep) for u in units for j in u]
    assert only.nodes == 2 and only.tasks == 4
    assert only.minutes == allocations.START_MINUTES + 10
    assert only.summary()["points"] == {"a": [0, 1, 2, 3], "b": [0, 1, 2, 3], "c": [0, 1]}


def test_allocations_stay_under_the_sites_longest_and_keep_a_point_whole():
    units = [point(name, 4, minutes=5) for name in "abcde"]  # 20 minutes a point
    made = allocations.pack(units, Limits(at_most_minutes=45), "s")
    assert all(a.minutes <= 45 for a in made)
    assert [sorted({j.point for j in a.jobs}) for a in made] == [["a", "b"], ["c", "d"], ["e"]]
    assert [a.name for a in made] == ["s-1", "s-2", "s-3"]


def test_a_point_longer_than_an_allocation_is_cut_between_its_repetitions_in_order():
    made = allocations.pack([point("long", 6, minutes=10)], Limits(at_most_minutes=32), "s")
    assert [[j.rep for j in a.jobs] for a in made] == [[0, 1, 2], [3, 4, 5]]
    assert all(a.minutes <= 32 for a in made)


def test_points_of_another_partition_have_allocations_of_their_own():
    units = [point("a", 2), point("gpu", 2, partition="gpu"), point("b", 2)]
    made = allocations.pack(units, Limits(), "s")
    assert [(a.partition, [j.point for j in a.jobs]) for a in made] == [
        ("", ["a", "a", "b", "b"]),
        ("gpu", ["gpu", "gpu"]),
    ]


def test_nothing_left_to_run_makes_no_allocation():
    assert allocations.pack([[], []], Limits(at_most_minutes=60), "s") == []


def test_a_proxy_runs_right_after_its_application_repetition_by_repetition():
    application, proxy = point("app", 4), point("proxy", 4)[1:]  # the proxy has no warm-up
    order = [(j.point, j.rep) for j in allocations.interleave(application, proxy)]
    assert order == [
        ("app", 0), ("app", 1), ("proxy", 1), ("app", 2), ("proxy", 2), ("app", 3), ("proxy", 3)
    ]  # fmt: skip
    # measured before: only what is left, still after its partner where that runs again
    assert [(j.point, j.rep) for j in allocations.interleave([], proxy[:1])] == [("proxy", 1)]


def test_a_job_takes_twice_its_estimate_and_its_start():
    assert allocations.step_seconds(None) == 60 * allocations.UNKNOWN_MINUTES
    assert allocations.step_seconds(0.4) == 0.8 + allocations.STEP_OVERHEAD_S


def test_the_jobs_shares_add_up_to_the_time_limit_rounded_once():
    """Snakemake gives a group the sum of its jobs' runtime: 100 jobs of 20 s ask for
    about 34 minutes, not 100 (a minute each, rounded up one by one)."""
    (only,) = allocations.pack([point("a", 100, minutes=1 / 3)], Limits(), "s")
    shares = only.shares()
    assert sum(shares.values()) == only.minutes == allocations.START_MINUTES + 34
    assert min(shares.values()) >= 0 and shares[("a", 0)] >= allocations.START_MINUTES
    # a second run that holds only the last half asks for about half
    assert 15 <= sum(shares[("a", rep)] for rep in range(50, 100)) <= 18


def test_an_allocation_shorter_than_the_site_likes_is_named():
    made = allocations.pack([point("a", 2)], Limits(at_least_minutes=30), "s")
    (line,) = allocations.short_ones(made, Limits(at_least_minutes=30))
    assert "s-1" in line and "below the 30 min" in line


@pytest.mark.parametrize(
    "text, minutes",
    [
        (90, 90), ("90", 90), ("30min", 30), ("2h", 120), ("1d", 1440), ("90s", 2),
        ("12:00:00", 720), ("30:00", 30), ("1-12", 2160), ("1-12:00:00", 2160),
        ("2-00:30", 2910),
    ],
)  # fmt: skip
def test_durations_as_people_and_slurm_write_them(text, minutes):
    assert parse_duration_minutes(text) == minutes


def test_a_duration_that_is_not_one_says_so():
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration_minutes("soon")


def test_rounds_run_every_points_repetition_before_any_points_next_each_round_rotated():
    units = [point("a", 3), point("b", 3), point("c", 2)]
    order = [(j.point, j.rep) for unit in allocations.rounds(units) for j in unit]
    assert order == [
        ("a", 0), ("b", 0), ("c", 0),
        ("b", 1), ("c", 1), ("a", 1),
        ("a", 2), ("b", 2),  # c has no repetition 2; the round still starts one further on
    ]  # fmt: skip
    assert sorted(order) == sorted((j.point, j.rep) for u in units for j in u)


def test_in_rounds_a_proxy_stays_right_after_its_applications_repetition():
    paired = allocations.interleave(point("app", 3), point("proxy", 3)[1:])
    units = allocations.rounds([paired, point("b", 3)])
    order = [[(j.point, j.rep) for j in unit] for unit in units]
    assert order[2] == [("b", 1)] and order[3] == [("app", 1), ("proxy", 1)]


def test_each_job_waits_for_the_one_before_it_on_its_own_partition():
    units = allocations.rounds([point("a", 2), point("gpu", 2, partition="gpu"), point("b", 2)])
    before = allocations.predecessors(units)
    assert before == {
        ("b", 0): ("a", 0), ("b", 1): ("b", 0), ("a", 1): ("b", 1),  # round 1 starts at gpu, b
        ("gpu", 1): ("gpu", 0),  # its own line: no allocation waits on another partition's
    }  # fmt: skip


@pytest.mark.e2e
def test_a_study_in_rounds_runs_them_in_order_on_its_own_machine(pipeline):
    """`order: rounds` without Slurm: each job waits for the one before it, so the runs'
    start times follow allocations.rounds, and a dry run of the same command afterwards
    has nothing to do."""
    study = {
        "study": "rounds",
        "repetitions": 3,
        "order": "rounds",
        "experiments": [
            {"name": name, "workload": "command", "tiers": ["shm", "disk"],
             "params": {"command": "true", "time_limit": 60}}
            for name in ("first", "second")
        ],
    }  # fmt: skip
    (pipeline.root / "config/studies/rounds.yaml").write_text(yaml.safe_dump(study))
    target = "results/testbox/rounds/results.csv"
    recorded = "results/testbox/rounds/run.json"  # the run in the results database
    pipeline(recorded, "-c2", "--configfile", "config/studies/rounds.yaml")
    # the jobs in the order Snakemake started them (the records' start times are in seconds)
    (log,) = (pipeline.root / ".snakemake/log").glob("*.snakemake.log")
    started = re.findall(r"experiment=(\w+), tier=(\w+), point=single, rep=(\d+)", log.read_text())
    ran = [(f"{experiment}/{tier}", int(rep)) for experiment, tier, rep in started]
    points = ["first/shm", "first/disk", "second/shm", "second/disk"]
    units = [point(name, 4) for name in points]
    assert ran == [(j.point, j.rep) for unit in allocations.rounds(units) for j in unit]
    assert len(pd.read_csv(pipeline.root / target).groupby(["experiment", "tier"])) == 4
    # nor does a dry run: no job's parameters differ there (the executor it records did)
    again = pipeline(recorded, "-n", "-c2", "--configfile", "config/studies/rounds.yaml")
    assert "Nothing to be done" in again.stdout + again.stderr, again.stdout[-3000:]
