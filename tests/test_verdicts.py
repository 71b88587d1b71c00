"""Verdicts on synthetic studies: every lesson can come out reproduced, not, or within noise."""

import json

import pandas as pd
import pytest
from conftest import REPO
from tierbench import aggregate, fidelity, matrix, verdicts
from tierbench.verdicts import (
    INCONCLUSIVE,
    MORE_REPETITIONS,
    NOT_REPRODUCED,
    REPRODUCED,
    WITHIN_NOISE,
)

CLASSES = {
    "shm": "shm",
    "tmpfs": "tmpfs",
    "disk": "disk",
    "glusterfs": "glusterfs",
    "lustre": "lustre",
    "fuse": "fuse",
    "void": "void",
}
#: repetitions around a median of 1: tight (1%) or wide (about 25%); the wide patterns
#: differ point by point so that paired points do not cancel each other's noise
TIGHT = [(0.99, 1.0, 1.01), (1.01, 0.99, 1.0), (1.0, 1.01, 0.99)]
WIDE = [
    (0.8, 1.0, 1.25),
    (1.2, 0.85, 1.0),
    (1.0, 1.3, 0.75),
    (0.9, 1.15, 1.0),
    (1.0, 0.8, 1.2),
    (1.25, 1.0, 0.85),
    (0.75, 1.0, 1.2),
]
SPREADS = {"tight": TIGHT, "wide": WIDE, "single": [(1.0,)]}


def study(rows, spread="tight", page_cache=None):
    """(results, summary) of rows (workload, experiment, tier, metric, median, params[,
    shift]).

    Repetition r of every point starts at 1000 r + its index: the points ran
    back to back, repetition by repetition, so their repetitions are paired.
    Each point's repetitions follow a pattern of its own; a metric of the point
    given a ``shift`` follows the pattern that many points on (0: the same).
    ``page_cache`` maps a tier to the page-cache state of its points.
    """
    records = []
    points: dict[tuple, int] = {}
    for workload, experiment, tier, metric, median, params, *shift in rows:
        key = (experiment, tier, json.dumps(params, sort_keys=True))
        index = points.setdefault(key, len(points))
        patterns = SPREADS[spread]
        pattern = patterns[(index + (shift[0] if shift else 0)) % len(patterns)]
        state = (page_cache or {}).get(tier, "")
        for repetition, factor in enumerate(pattern, start=1):
            records.append(
                {
                    "study": "s",
                    "experiment": experiment,
                    "workload": workload,
                    "tier": tier,
                    "tier_class": CLASSES[tier],
                    "host": "node1",
                    "point": key[2],
                    **params,
                    "repetition": repetition,
                    "phase": "measured",
                    "metric": metric,
                    "value": median * factor,
                    "unit": "x",
                    "status": "ok",
                    "reason": "",
                    "started_at": pd.Timestamp(1000 * repetition + index, unit="s", tz="UTC"),
                    "duration_s": 1.0,
                    "slurm_job_id": "",
                    "page_cache": state,
                    "page_cache_reason": f"{tier} test reason" if state else "",
                }
            )
    results = pd.DataFrame(records)
    return results, aggregate.summarise(results, noise_threshold=0.25)


#: every paper study's document and lessons, by document
PAPERS = {
    paper["document"]: paper
    for paper in (
        verdicts.load_paper(REPO / "config" / "studies" / f"{study}.yaml")
        for study in matrix.PAPER_STUDIES
    )
}


def judge(document, frames):
    results, summary = frames
    return verdicts.judge(PAPERS[document], summary, results=results)


def statuses(document, frames):
    return [v.status for v in judge(document, frames)]


# --- the five documents' synthetic studies --------------------------------------------


def fe(fio_shm, fio_disk, wall_shm, wall_disk, spread="tight"):
    rw = {"rw": "randrw", "io_mode": "fsync"}
    return study(
        [
            ("fio", "worst_case", "shm", "write_bandwidth", fio_shm, rw),
            ("fio", "worst_case", "disk", "write_bandwidth", fio_disk, rw),
            ("fe_proxy", "optimisation", "shm", "wall_time", wall_shm, {"cores": 2}),
            ("fe_proxy", "optimisation", "disk", "wall_time", wall_disk, {"cores": 2}),
            ("fe_proxy", "optimisation", "shm", "wall_time", wall_shm * 2, {"cores": 1}),
        ],
        spread,
    )


def cfd(disk1, shm1, disk100, shm100, disk_ens, shm_ens, spread="tight", page_cache=None, alone=1):
    tiers = {"disk": (disk1, disk100, disk_ens), "shm": (shm1, shm100, shm_ens)}
    return cfd_on(tiers, spread, page_cache, alone)


def cfd_on(tiers, spread="tight", page_cache=None, alone=1):
    """cfd_proxy time per step per tier: {tier: (interval 1, interval 100, ensemble of 2)};
    the ensemble's member 0 alone before it takes the single run's time (with_alone)."""
    return study(with_alone(cfd_rows(tiers), alone), spread, page_cache)


def cfd_rows(tiers):
    rows = []
    for tier, values in tiers.items():
        for (interval, ensemble), value in zip([(1, 1), (100, 1), (1, 2)], values, strict=True):
            params = {
                "write_interval": interval,
                "ensemble": ensemble,
                "ranks": 1,
                "file_handler": "uncollated",
            }
            rows.append(("cfd_proxy", "single_vs_ensemble", tier, "time_per_step", value, params))
    return rows


def with_alone(rows, shift=1):
    """Each ensemble's time_per_step_alone (its member 0 alone, in the same job): the time
    of the single run of its tier and workload. ``shift``: its repetitions' pattern, the
    ensemble's next (1) or the ensemble's own (0: the job's drift hits both alike)."""
    single = {(r[0], r[2], r[5]["write_interval"]): r[4] for r in rows if r[5]["ensemble"] == 1}
    alone = [
        (r[0], r[1], r[2], "time_per_step_alone", single[r[0], r[2], r[5]["write_interval"]],
         r[5], shift)
        for r in rows
        if r[3] == "time_per_step" and r[5]["ensemble"] > 1
    ]  # fmt: skip
    return rows + alone


def pv(fuse, disk, shm, spread="tight", page_cache=None):
    rows = [
        ("pv", "sinks", tier, "throughput", value, {"size": "450MiB"})
        for tier, value in (("fuse", fuse), ("disk", disk), ("shm", shm))
    ]
    return study(rows, spread, page_cache)


def dd_stream(shm, disk, triad, spread="tight", page_cache=None):
    dd = {"sync": "buffered", "block_size": "10M"}
    return study(
        [
            ("dd", "dd", "shm", "write_bandwidth", shm, dd),
            ("dd", "dd", "disk", "write_bandwidth", disk, dd),
            ("stream", "memory", "void", "triad_bandwidth", triad, {}),
        ],
        spread,
        page_cache,
    )


def dd_synced(shm, disk, shm_sync, disk_sync, triad=50000, spread="tight"):
    """dd buffered and with fdatasync; the buffered disk point may have stayed in memory."""
    rows = [
        ("dd", "dd", tier, "write_bandwidth", value, {"sync": sync, "block_size": "10M"})
        for tier, sync, value in (
            ("shm", "buffered", shm), ("disk", "buffered", disk),
            ("shm", "fdatasync", shm_sync), ("disk", "fdatasync", disk_sync),
        )
    ]  # fmt: skip
    rows.append(("stream", "memory", "void", "triad_bandwidth", triad, {}))
    results, _ = study(rows, spread)
    buffered_disk = (results["tier"] == "disk") & (results["sync"] == "buffered")
    results.loc[buffered_disk, "page_cache"] = "may_stay_in_memory"
    results.loc[buffered_disk, "page_cache_reason"] = "2 GiB under the dirty limit"
    results.loc[(results["tier"] == "disk") & (results["sync"] == "fdatasync"), "page_cache"] = (
        "device"
    )
    return results, aggregate.summarise(results, noise_threshold=0.25)


def eagle(disk_small, shm_small, disk_drop, shm_drop, largest=8e9, limit=4e9, **options):
    rows = []
    for tier, small, drop in (("disk", disk_small, disk_drop), ("shm", shm_small, shm_drop)):
        blocks = {"block_size": "1M", "sync": "buffered"}
        rows.append(("dd", "dd_blocks", tier, "write_bandwidth", small, blocks))
        for fraction, value, size in ((0.1, small, largest / 10), (2, small * drop, largest)):
            params = {"file_fraction": fraction, "sync": "buffered", "block_size": "1M"}
            rows.append(("dd", "cliff", tier, "write_bandwidth", value, params))
            rows.append(("dd", "cliff", tier, "bytes", size, params))
            rows.append(("dd", "cliff", tier, "dirty_limit_bytes", limit, params))
    return study(rows, **options)


#: (document, frames, expected status of each lesson): each lesson each way
CASES = {
    "000 reproduced": ("000", lambda: fe(600, 3, 10.0, 10.5), [REPRODUCED]),
    "000 not reproduced": ("000", lambda: fe(600, 3, 10.0, 40.0), [NOT_REPRODUCED]),
    "000 within noise": ("000", lambda: fe(600, 3, 10.0, 15.0, "wide"), [WITHIN_NOISE]),
    "000 premise within noise": ("000", lambda: fe(100, 10, 10.0, 10.5, "wide"), [WITHIN_NOISE]),
    "001 reproduced": ("001", lambda: cfd(0.20, 0.10, 0.05, 0.05, 0.60, 0.11), [REPRODUCED] * 3),
    "001 not reproduced": (
        "001",
        lambda: cfd(0.10, 0.10, 0.08, 0.05, 0.11, 0.20),
        [NOT_REPRODUCED] * 3,
    ),
    "001 within noise": (
        "001",
        lambda: cfd(0.11, 0.10, 0.0525, 0.05, 0.121, 0.10, "wide"),
        [WITHIN_NOISE] * 3,
    ),
    "002 reproduced": ("002", lambda: pv(150, 300, 1400), [REPRODUCED] * 2),
    "002 not reproduced": ("002", lambda: pv(900, 300, 200), [NOT_REPRODUCED] * 2),
    "002 within noise": ("002", lambda: pv(270, 300, 330, "wide"), [WITHIN_NOISE] * 2),
    "003 reproduced": ("003", lambda: dd_stream(5000, 2000, 50000), [REPRODUCED]),
    "003 not reproduced": ("003", lambda: dd_stream(1500, 2000, 50000), [NOT_REPRODUCED]),
    "003 above the memory": ("003", lambda: dd_stream(60000, 2000, 50000), [NOT_REPRODUCED]),
    "003 within noise": ("003", lambda: dd_stream(2200, 2000, 50000, "wide"), [WITHIN_NOISE]),
    "004 reproduced": ("004", lambda: eagle(2000, 2000, 0.1, 0.95), [REPRODUCED] * 2),
    "004 not reproduced": ("004", lambda: eagle(300, 2500, 0.9, 0.95), [NOT_REPRODUCED] * 2),
    "004 within noise": (
        "004",
        lambda: eagle(1600, 2000, 0.5, 1.0, spread="wide"),
        [WITHIN_NOISE] * 2,
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_lesson_each_way(case):
    document, frames, expected = CASES[case]
    assert statuses(document, frames()) == expected


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_verdict_carries_its_band_interval_and_what_would_decide_it(case):
    document, frames, _ = CASES[case]
    for verdict in judge(document, frames()):
        assert verdict.band and verdict.comparisons
        for comparison in verdict.comparisons:
            assert comparison.low <= comparison.ours <= comparison.high
        assert bool(verdict.needs) == (verdict.status == WITHIN_NOISE)
        if verdict.status == WITHIN_NOISE:
            assert "more repetitions" in verdict.needs


def test_000_text_shows_ratios_with_intervals_and_the_published_ones():
    (verdict,) = judge("000", fe(600, 3, 10.0, 10.5))
    assert "200x [" in verdict.text and "193x" in verdict.text and "1.05x [" in verdict.text
    assert verdict.band == "fio above 10x, then the job below 1.5x"


def test_000_tiers_less_than_10x_apart_in_fio_cannot_test_it():
    (verdict,) = judge("000", fe(30, 10, 10.0, 10.5))
    assert verdict.status == INCONCLUSIVE and "less than 10x" in verdict.text


def test_000_needs_both_kinds_of_tier():
    results, summary = fe(600, 3, 10, 10.5)
    keep = summary["tier"] == "shm"
    (verdict,) = verdicts.judge(PAPERS["000"], summary[keep], results=results)
    assert verdict.status == INCONCLUSIVE and "device tier" in verdict.text


@pytest.mark.parametrize(
    ("disk100", "spread", "expected"),
    [
        (0.050, "tight", REPRODUCED),
        (0.065, "tight", NOT_REPRODUCED),
        (0.0525, "wide", WITHIN_NOISE),
    ],
)
def test_001_within_10_percent(disk100, spread, expected):
    """1.00 tight holds, 1.30 tight fails, 1.05 with wide repetitions is undecided."""
    rare = judge("001", cfd(0.20, 0.10, disk100, 0.05, 0.60, 0.11, spread))[1]
    assert rare.status == expected and rare.band == "within 0.9-1.1x"
    (comparison,) = rare.comparisons
    assert comparison.ours == pytest.approx(disk100 / 0.05)
    if spread == "wide":
        assert comparison.low < 0.9 or comparison.high > 1.1
        assert "more repetitions" in rare.needs


def with_own_baseline(frames, cost, runs=None, interval=100, own="time_per_step_nowrite"):
    """Each run's own baseline at a write interval: its time over the cost of its writes
    (``cost``: by tier, or a function of a run's row), so the baseline drifts with the run
    as on a shared machine; ``runs``: only these repetitions hold one."""
    results, _ = frames
    at = results[(results["write_interval"] == interval) & (results["metric"] == "time_per_step")]
    if runs is not None:
        at = at[at["repetition"].isin(runs)]
    costs = at.apply(cost, axis=1) if callable(cost) else at["tier"].map(cost)
    results = pd.concat([results, at.assign(metric=own, value=at["value"] / costs)])
    return results, aggregate.summarise(results, noise_threshold=0.25)


@pytest.mark.parametrize(("cost", "expected"), [(1.05, REPRODUCED), (1.25, NOT_REPRODUCED)])
def test_001_judges_each_run_against_its_own_steps_without_writes(cost, expected):
    """Runs 25% apart in speed leave 1.05x undecided; each over its own baseline, the
    drift cancels and the write's cost decides, both ways."""
    drifting = cfd(0.20, 0.10, 0.05 * cost, 0.05, 0.60, 0.11, "wide")
    assert judge("001", drifting)[1].status == WITHIN_NOISE
    every_step, rare, _ = judge("001", with_own_baseline(drifting, {"disk": cost, "shm": 1.0}))
    assert rare.status == expected
    (comparison,) = rare.comparisons
    assert comparison.ours == pytest.approx(cost)
    assert comparison.high - comparison.low < 1e-9
    assert "over its own steps without writes" in rare.text
    # every step writes: no baseline of its own, and the verdict says so
    assert "times as measured" in every_step.text


def test_001_where_every_step_writes_each_run_has_its_steps_before_the_first_write():
    """Writes that cost the disk 1.12x the fast tier's, on runs 25% apart in speed:
    undecided as measured, reproduced over each run's steps before its first write."""
    drifting = cfd(0.112, 0.10, 0.05, 0.05, 0.45, 0.10, "wide")
    assert judge("001", drifting)[0].status == WITHIN_NOISE

    def cost(run):  # times over the run's own speed: 1.12x on the disk
        return 1.12 if run["tier"] == "disk" else 1.0

    own = with_own_baseline(drifting, cost, interval=1, own="time_per_step_baseline")
    every_step = judge("001", own)[0]
    assert every_step.status == REPRODUCED
    assert every_step.comparisons[0].ours == pytest.approx(1.12)
    assert "over its own steps before its first write" in every_step.text


def test_001_an_ensemble_is_set_against_its_member_alone_in_the_same_job():
    """An ensemble that costs the disk 1.5x its single run and the fast tier nothing, on
    jobs 25% apart in speed: set against its member 0 alone just before it, in the same
    job, the drift cancels and the lesson is decided, both ways; without those runs it is
    not testable, whatever the separate single runs say."""
    for disk_ensemble, expected in ((0.45, REPRODUCED), (0.30, NOT_REPRODUCED)):
        in_the_job = cfd(0.30, 0.10, 0.05, 0.05, disk_ensemble, 0.10, "wide", alone=0)
        ensembles = judge("001", in_the_job)[2]
        assert ensembles.status == expected, ensembles.text
        (comparison,) = ensembles.comparisons[:1]
        assert comparison.ours == pytest.approx(disk_ensemble / 0.30)
        assert comparison.high - comparison.low < 1e-9
        assert "its member 0 alone just before it" in ensembles.text
    # each job's drift its own: the same ensembles are undecided
    assert judge("001", cfd(0.30, 0.10, 0.05, 0.05, 0.36, 0.10, "wide"))[2].status == WITHIN_NOISE
    results, summary = cfd(0.30, 0.10, 0.05, 0.05, 0.45, 0.10)
    without = summary["metric"] != "time_per_step_alone"
    ensembles = verdicts.judge(PAPERS["001"], summary[without], results=results)[2]
    assert ensembles.status == INCONCLUSIVE and "single_first" in ensembles.text


def test_001_an_undecided_ensemble_names_the_less_certain_of_its_two_growths():
    """The disk's ensemble growth is steady (1.2x in every job), the fast tier's swings from
    job to job: the verdict says which growth holds its spread and at how many repetitions,
    so a user knows what more repetitions would have to narrow."""
    rows = with_alone(cfd_rows({"disk": (0.30, 0.05, 0.36), "shm": (0.10, 0.05, 0.10)}), 0)
    swinging = [
        r[:6] + (1,) if r[3] == "time_per_step_alone" and r[2] == "shm" else r for r in rows
    ]
    ensembles = judge("001", study(swinging, "wide"))[2]
    assert ensembles.status == WITHIN_NOISE, ensembles.text
    assert "at 3 repetitions a point" in ensembles.needs
    # and about how many a point would decide it: (half-width / distance to the edge)^2 x 3
    assert ensembles.needs.endswith("]; about 73 repetitions a point would decide it")
    assert ensembles.repetitions_needed == 73
    assert "most of its spread from ensemble / single run (its member 0 alone), fast tier" in (
        ensembles.needs
    )
    steady = judge("001", study(rows, "wide"))[2]
    assert steady.status == REPRODUCED, steady.text


def test_001_steps_without_writes_come_before_those_before_the_first_write():
    """A run holding both baselines is divided by its steps without writes (many, in the
    loop), not by its steps before the first write (a fraction of a second, noisy), in the
    order the study gives, also after the pipeline's lessons.json sorted their keys."""
    drifting = cfd(0.20, 0.10, 0.0525, 0.05, 0.60, 0.11, "wide")
    both = with_own_baseline(drifting, {"disk": 1.05, "shm": 1.0})

    def noisy(run):  # the same runs over a baseline that swings by 25%, unlike on each tier
        odd = bool(run["repetition"] % 2) == (run["tier"] == "disk")
        return (1.05 if run["tier"] == "disk" else 1.0) * (1.25 if odd else 0.8)

    both = with_own_baseline(both, noisy, own="time_per_step_baseline")
    results, summary = both
    through_json = json.loads(json.dumps(PAPERS["001"], sort_keys=True))
    for paper in (PAPERS["001"], through_json):
        rare = verdicts.judge(paper, summary, results=results)[1]
        assert rare.status == REPRODUCED, rare.text
        assert "over its own steps without writes" in rare.text
        assert rare.comparisons[0].ours == pytest.approx(1.05)


def test_001_a_baseline_some_runs_lack_is_not_used():
    drifting = cfd(0.20, 0.10, 0.0525, 0.05, 0.60, 0.11, "wide")
    partly = with_own_baseline(drifting, {"disk": 1.05, "shm": 1.0}, runs=[1, 2])
    rare = judge("001", partly)[1]
    assert rare.status == WITHIN_NOISE and "times as measured" in rare.text
    assert rare.comparisons == judge("001", drifting)[1].comparisons


@pytest.mark.parametrize(
    ("disk", "expected"), [(4000, NOT_REPRODUCED), (800, NOT_REPRODUCED), (2000, REPRODUCED)]
)
def test_004_about_as_fast_is_two_sided(disk, expected):
    """disk / shm at 2x and at 0.4x fails, at 1.0x holds (the old one-sided test passed 2x)."""
    fits = judge("004", eagle(disk, 2000, 0.1, 0.95))[0]
    assert fits.status == expected and fits.band == "within 0.8-1.25x"
    assert f"{disk / 2000:.2f}x [" in fits.text


def test_004_cliff_below_the_dirty_limit_is_inconclusive_with_the_reason():
    cliff = judge("004", eagle(2000, 2500, 0.9, 0.95, largest=1e9, limit=4e9))[1]
    assert cliff.status == INCONCLUSIVE and "below the dirty-page limit" in cliff.text
    assert "max_file_size" in cliff.needs


def test_004_a_file_past_the_dirty_limit_does_not_test_fitting_the_page_cache():
    fits = judge("004", eagle(2000, 2000, 0.1, 0.95, page_cache={"disk": "device"}))[0]
    assert fits.status == INCONCLUSIVE and "did not fit under the dirty limit" in fits.text


def test_one_repetition_is_undecided_and_says_it_needs_two():
    found = judge("002", pv(150, 300, 1500, "single"))
    for verdict, ratio in zip(found, (0.5, 5.0), strict=True):
        assert verdict.status == WITHIN_NOISE
        assert "at least 2 repetitions" in verdict.needs and "no interval" in verdict.text
        assert verdict.comparisons[0].low is None and verdict.comparisons[0].ours == ratio


def test_without_repetitions_nothing_is_decided():
    _, summary = pv(150, 300, 1400)
    for verdict in verdicts.judge(PAPERS["002"], summary):
        assert verdict.status == WITHIN_NOISE and "results.csv" in verdict.needs


# --- the page cache --------------------------------------------------------------------


def test_002_ram_vs_a_disk_the_page_cache_absorbed_blames_the_page_cache_not_the_lesson():
    in_memory = {"disk": "may_stay_in_memory"}
    ram = judge("002", pv(150, 300, 310, page_cache=in_memory))[1]
    assert ram.status == INCONCLUSIVE
    assert "the device was never reached: this measured the page cache" in ram.text
    assert "disk test reason" in ram.text and "dirty limit" in ram.needs
    # the same numbers from a disk the writes reached refute the lesson
    reached = judge("002", pv(150, 300, 310, page_cache={"disk": "device"}))[1]
    assert reached.status == NOT_REPRODUCED
    # and a difference seen through the page cache still reproduces it
    assert judge("002", pv(150, 300, 1400, page_cache=in_memory))[1].status == REPRODUCED


def test_a_straddling_lesson_on_an_absorbed_device_is_inconclusive_and_asks_for_repetitions():
    """A RAM disk about 1.1x the disk, with a wide interval, on a disk the page cache absorbed:
    the device is untested, but repeating may still find the tier slower as a job sees it."""
    in_memory = {"disk": "may_stay_in_memory"}
    ram = judge("002", pv(150, 300, 330, spread="wide", page_cache=in_memory))[1]
    assert ram.status == INCONCLUSIVE, ram.text
    assert "the device was never reached" in ram.text
    assert ram.needs.startswith("a device tier") and MORE_REPETITIONS in ram.needs
    # outside the band, repeating cannot help: the page cache is all that is left to blame
    clear = judge("002", pv(150, 300, 310, page_cache=in_memory))[1]
    assert clear.status == INCONCLUSIVE and MORE_REPETITIONS not in clear.needs


def test_001_is_about_the_device_so_the_page_cache_never_reproduces_it():
    """Document 001 measured the device itself: an ensemble that hurts a disk the page cache
    absorbed is inconclusive, saying what it saw; the same numbers from the device reproduce."""
    in_memory = {"disk": "may_stay_in_memory"}
    ensembles = judge("001", cfd(0.10, 0.10, 0.05, 0.05, 0.20, 0.11, page_cache=in_memory))[2]
    assert ensembles.status == INCONCLUSIVE, ensembles.text
    assert "reproduced through the page cache" in ensembles.text
    assert MORE_REPETITIONS not in ensembles.needs
    reached = judge("001", cfd(0.10, 0.10, 0.05, 0.05, 0.20, 0.11, page_cache={"disk": "device"}))
    assert reached[2].status == REPRODUCED


@pytest.mark.parametrize("recorded", ["device", "may_stay_in_memory"])
@pytest.mark.parametrize(
    ("fast", "network", "slower", "expected"),
    [
        ("shm", "glusterfs", 1.6, REPRODUCED),
        ("tmpfs", "glusterfs", 1.0, NOT_REPRODUCED),
        ("tmpfs", "lustre", 1.6, REPRODUCED),
        ("shm", "lustre", 1.0, NOT_REPRODUCED),
    ],
)
def test_001_on_a_network_tier_is_decided_on_its_interval(
    fast, network, slower, expected, recorded
):
    """Each write creates files on the server, which no page cache absorbs: lesson 1 is
    decided both ways, never inconclusive, also from a record made before that rule."""
    frames = cfd_on(
        {network: (0.10 * slower, 0.05, 0.30), fast: (0.10, 0.05, 0.11)},
        page_cache={network: recorded},
    )
    every_step, rare, ensembles = judge("001", frames)
    assert every_step.status == expected, every_step.text
    assert f"{network}/{fast} = {slower:.2f}x" in every_step.text
    assert rare.status == REPRODUCED and ensembles.status == REPRODUCED


def test_001_prefers_the_network_tier_as_the_slow_one_and_a_local_disk_stays_as_today():
    """Document 001's slow tier is the shared parallel file system: a network tier is the
    slow side even beside a disk; with only a disk the page cache absorbed, inconclusive."""
    in_memory = {"disk": "may_stay_in_memory", "glusterfs": "may_stay_in_memory"}
    tiers = {
        "disk": (0.10, 0.05, 0.11),
        "glusterfs": (0.16, 0.05, 0.30),
        "shm": (0.10, 0.05, 0.11),
    }
    every_step = judge("001", cfd_on(tiers, page_cache=in_memory))[0]
    assert every_step.status == REPRODUCED and "glusterfs/shm" in every_step.text
    del tiers["glusterfs"]
    tiers["disk"] = (0.16, 0.05, 0.30)
    every_step = judge("001", cfd_on(tiers, page_cache=in_memory))[0]
    assert every_step.status == INCONCLUSIVE and "disk/shm" in every_step.text
    assert "reproduced through the page cache" in every_step.text


def test_001_and_003_blame_the_page_cache_too():
    in_memory = {"disk": "may_stay_in_memory"}
    every_step, rare, ensembles = judge(
        "001", cfd(0.10, 0.10, 0.05, 0.05, 0.11, 0.20, page_cache=in_memory)
    )
    assert every_step.status == ensembles.status == INCONCLUSIVE
    # two tiers that are both memory look alike: that does not test rare writes to a device
    assert rare.status == INCONCLUSIVE and "reproduced through the page cache" in rare.text
    reached = judge("001", cfd(0.10, 0.10, 0.05, 0.05, 0.11, 0.20, page_cache={"disk": "device"}))
    assert reached[1].status == REPRODUCED
    (verdict,) = judge("003", dd_stream(1500, 2000, 50000, page_cache=in_memory))
    assert verdict.status == INCONCLUSIVE and "page cache" in verdict.text


@pytest.mark.parametrize(
    ("buffered_disk", "disk_sync", "expected"),
    [(2000, 500, REPRODUCED), (4800, 500, REPRODUCED), (2000, 4900, NOT_REPRODUCED)],
)
def test_003_decides_on_the_fdatasync_points_when_the_buffered_disk_stayed_in_memory(
    buffered_disk, disk_sync, expected
):
    """The buffered ratio (here 2.5x or 1.04x) no longer decides: it compared tmpfs with the
    page cache; the fdatasync points reach the disk, so every run compares the same thing."""
    (verdict,) = judge("003", dd_synced(5000, buffered_disk, 5000, disk_sync))
    assert verdict.status == expected
    assert "dd with fdatasync" in verdict.text and "2 GiB under the dirty limit" in verdict.text


# --- the command line and verdict.json ---------------------------------------------------


def test_cli_writes_intervals_bands_and_needs(tmp_path):
    results, summary = cfd(0.20, 0.10, 0.0525, 0.05, 0.60, 0.11, "wide")
    results.to_csv(tmp_path / "results.csv", index=False)
    summary.to_csv(tmp_path / "summary.csv", index=False)
    out = tmp_path / "verdict.json"
    argv = ["--lessons", str(REPO / "config/studies/cfd_dcpmm.yaml")]
    argv += ["--summary", str(tmp_path / "summary.csv")]
    argv += ["--results", str(tmp_path / "results.csv"), "--out", str(out)]
    assert verdicts.main(argv) == 0
    data = json.loads(out.read_text())
    assert data["document"] == "001" and len(data["verdicts"]) == 3
    for verdict in data["verdicts"]:
        assert {"lesson", "status", "text", "comparisons", "band", "needs"} <= set(verdict)
        for comparison in verdict["comparisons"]:
            assert set(comparison) == {"label", "published", "ours", "unit", "low", "high"}
    assert data["verdicts"][1]["status"] == WITHIN_NOISE
    assert data["verdicts"][1]["band"] == "within 0.9-1.1x"


def test_cli_names_a_file_that_is_not_a_results_table(tmp_path):
    _, summary = pv(150, 300, 1400)
    summary.to_csv(tmp_path / "summary.csv", index=False)
    argv = ["--lessons", str(REPO / "config/studies/ramdisk_macos.yaml")]
    argv += ["--summary", str(tmp_path / "summary.csv")]
    argv += ["--results", str(tmp_path / "summary.csv"), "--out", str(tmp_path / "v.json")]
    with pytest.raises(SystemExit, match="not a results.csv: no column"):
        verdicts.main(argv)


@pytest.mark.parametrize("document", sorted(PAPERS))
def test_empty_study_is_inconclusive_never_a_crash(document):
    results = pd.DataFrame(columns=[*verdicts.POINT_METRIC, "phase", "status", "value"])
    empty = pd.DataFrame(
        columns=["experiment", "workload", "tier", "tier_class", "metric", "status", "median"]
    )
    found = judge(document, (results, empty))
    assert {v.status for v in found} == {INCONCLUSIVE} and all(v.needs for v in found)


def fe_with_calculix_rows() -> list[tuple]:
    """Document 000's points: fio 200x apart, the proxy's job gaining little on the fast tier,
    CalculiX's a lot."""
    rw = {"rw": "randrw", "io_mode": "fsync"}
    return [
        ("fio", "worst_case", "shm", "write_bandwidth", 600, rw),
        ("fio", "worst_case", "disk", "write_bandwidth", 3, rw),
        ("fe_proxy", "optimisation", "shm", "wall_time", 10.0, {"cores": 2}),
        ("fe_proxy", "optimisation", "disk", "wall_time", 10.5, {"cores": 2}),
        ("calculix", "real", "shm", "wall_time", 10.0, {"cores": 2}),
        ("calculix", "real", "disk", "wall_time", 40.0, {"cores": 2}),
    ]


def test_a_study_with_the_real_application_gets_its_verdicts_beside_the_proxys():
    """Document 000's lesson judged for the FE proxy and for CalculiX on the same fio premise:
    the proxy's job gains little, the real one a lot, and each verdict says which it is."""
    frames = study(fe_with_calculix_rows())
    proxy, real = judge("000", frames)
    assert proxy.lesson.endswith("[fe_proxy]") and proxy.status == REPRODUCED
    assert real.lesson.endswith("[calculix]") and real.status == NOT_REPRODUCED
    assert all(p.startswith("calculix/") or p.startswith("fio/") for p in real.points)
    # the proxy's verdict says the application's differs, and by how much: 1.05x / 4x
    assert proxy.agreement.startswith("disagrees with calculix: calculix's verdict is not")
    assert "fe_proxy / calculix 0.26x [" in proxy.agreement and not real.agreement
    # without the application's rows, the lesson keeps its plain name
    (alone,) = judge("000", fe(600, 3, 10.0, 10.5))
    assert "[" not in alone.lesson


def cfd_with_openfoam_rows() -> list[tuple]:
    """Document 001's points for the proxy and simpleFoam alike: disk slower at write
    interval 1 and in an ensemble, the tiers equal at write interval 100."""
    rows = []
    for workload in ("cfd_proxy", "openfoam"):
        for tier, values in {"disk": (0.20, 0.05, 0.60), "shm": (0.10, 0.05, 0.11)}.items():
            for (interval, ensemble), value in zip([(1, 1), (100, 1), (1, 2)], values, strict=True):
                params = {"write_interval": interval, "ensemble": ensemble, "ranks": 1,
                          "file_handler": "uncollated", "cells_per_rank": 1000}  # fmt: skip
                rows.append((workload, "single_vs_ensemble", tier, "time_per_step", value, params))
    return with_alone(rows)


def test_a_proxy_lesson_says_when_its_shapes_were_not_shown_faithful():
    """Document 001's proxy lessons rest on shapes (1 rank, ensembles) where the study may
    never have compared the proxy with simpleFoam: the verdict says so, the real one does not."""
    results, summary = study(cfd_with_openfoam_rows())
    proxies = fidelity.fidelity(results)
    found = verdicts.judge(PAPERS["001"], summary, results=results, proxies=proxies)
    proxy = [v for v in found if v.lesson.endswith("[cfd_proxy]")]
    real = [v for v in found if v.lesson.endswith("[openfoam]")]
    assert len(proxy) == len(real) == 3
    for verdict in proxy:
        # compared there, but with no baselines nothing was decided: not shown faithful
        assert "the proxy was compared at this shape and was within noise" in verdict.fidelity
        assert verdict.fidelity.startswith("cfd_proxy/single_vs_ensemble/")
    assert not any(v.fidelity for v in real)


def cfd_proxy_and_openfoam(proxy: dict, real: dict, spread="tight", real_spread="tight"):
    """cfd_proxy and simpleFoam, each {tier: (interval 1, interval 100, ensemble of 2)}; each
    simpleFoam point ran just before the proxy's of its shape, with a spread of its own."""
    mine = study(with_alone(cfd_rows(proxy)), spread)
    rows = [("openfoam", *row[1:], 3) for row in cfd_rows(real)]
    theirs = study(with_alone(rows), real_spread)
    return tuple(pd.concat(frames, ignore_index=True) for frames in zip(mine, theirs, strict=True))


def agreements(frames) -> list[str]:
    proxy = [v for v in judge("001", frames) if v.lesson.endswith("[cfd_proxy]")]
    return [v.agreement for v in proxy]


def test_a_proxy_lesson_says_the_application_gives_the_same_verdict():
    """Proxy and simpleFoam alike: every proxy verdict agrees, each claim's ratio 1.00x."""
    tiers = {"disk": (0.20, 0.05, 0.60), "shm": (0.10, 0.05, 0.11)}
    found = agreements(cfd_proxy_and_openfoam(tiers, tiers))
    assert all(a.startswith("agrees with openfoam, reproduced for both (") for a in found)
    assert all("cfd_proxy / openfoam 1.00x [1.00, 1.00]" in a for a in found)


def test_a_proxy_verdict_apart_from_the_applications_names_the_ratio_that_parts_them():
    """Writing every step costs the proxy 2x on the disk, simpleFoam nothing: the verdicts
    differ and so do the measures (2.0x); the other two lessons agree."""
    proxy = {"disk": (0.20, 0.05, 0.60), "shm": (0.10, 0.05, 0.11)}
    real = {"disk": (0.10, 0.05, 0.60), "shm": (0.10, 0.05, 0.11)}
    first, *rest = agreements(cfd_proxy_and_openfoam(proxy, real))
    assert first.startswith("disagrees with openfoam: openfoam's verdict is not reproduced")
    assert "cfd_proxy / openfoam 2.00x [" in first
    assert all(a.startswith("agrees") for a in rest)


def test_verdicts_on_either_side_of_a_band_edge_are_not_told_apart():
    """At write interval 100 the proxy's disk is 1.05x the fast tier, inside 0.9-1.1; simpleFoam's
    is 1.10x with a spread of 25 %, *within noise*: the verdicts differ, but the ratio of the
    two holds 1, so whether the proxy gives another answer is undecided, not shown."""
    proxy = {"disk": (0.20, 0.0525, 0.60), "shm": (0.10, 0.05, 0.11)}
    real = {"disk": (0.20, 0.055, 0.60), "shm": (0.10, 0.05, 0.11)}
    found = agreements(cfd_proxy_and_openfoam(proxy, real, real_spread="wide"))[1]
    assert found.startswith("undecided: openfoam's verdict is within noise")
    assert "every ratio holds 1" in found and "cfd_proxy / openfoam 0.95x [" in found
    # simpleFoam's 1.3x with a spread of 1 %: not reproduced, and 0.81x is told apart from 1
    real["disk"] = (0.20, 0.065, 0.60)
    found = agreements(cfd_proxy_and_openfoam(proxy, real))[1]
    assert found.startswith("disagrees with openfoam: openfoam's verdict is not reproduced")
    assert "cfd_proxy / openfoam 0.81x [" in found


def test_an_inconclusive_side_is_not_compared():
    """simpleFoam ran no ensemble: its ensemble lesson cannot be tested, nor set beside the
    proxy's."""
    tiers = {"disk": (0.20, 0.05, 0.60), "shm": (0.10, 0.05, 0.11)}
    results, summary = cfd_proxy_and_openfoam(tiers, tiers)
    ensembles = [
        frame["workload"].eq("openfoam") & frame["ensemble"].eq(2) for frame in (results, summary)
    ]
    found = agreements((results[~ensembles[0]], summary[~ensembles[1]]))
    assert all(a.startswith("agrees") for a in found[:2])
    assert found[2] == "not compared: the verdict on openfoam is inconclusive"


def test_the_report_shows_beside_a_proxy_verdict_what_the_application_gave(tmp_path):
    from conftest import study_for_report
    from tierbench import report

    proxy = {"disk": (0.20, 0.05, 0.60), "shm": (0.10, 0.05, 0.11)}
    real = {"disk": (0.10, 0.05, 0.60), "shm": (0.10, 0.05, 0.11)}
    results, _ = cfd_proxy_and_openfoam(proxy, real)
    study_dir = tmp_path / "m" / "s"
    study_for_report(study_dir, results, ["disk", "shm"])
    argv = ["--lessons", str(REPO / "config/studies/cfd_dcpmm.yaml")]
    argv += [
        "--summary",
        str(study_dir / "summary.csv"),
        "--results",
        str(study_dir / "results.csv"),
    ]
    assert verdicts.main([*argv, "--out", str(study_dir / "verdict.json")]) == 0
    html = report.render(tmp_path / "m", ["s"], {"s": "A study"})
    assert html.count("against the application: disagrees with openfoam") == 1
    assert html.count("against the application: agrees with openfoam") == 2
