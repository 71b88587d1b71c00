"""Verdicts on synthetic summaries: each lesson can come out reproduced or not."""

import pandas as pd
import pytest
from tierbench import verdicts
from tierbench.verdicts import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED

CLASSES = {"shm": "shm", "disk": "disk", "fuse": "fuse", "void": "void"}


def summary(rows):
    """rows: (workload, experiment, tier, metric, median, params)."""
    records = []
    for workload, experiment, tier, metric, median, params in rows:
        records.append(
            {
                "study": "s",
                "experiment": experiment,
                "workload": workload,
                "tier": tier,
                "tier_class": CLASSES[tier],
                "point": str(params),
                "metric": metric,
                "unit": "x",
                "status": "ok",
                "reason": "",
                "n": 3,
                "median": median,
                **params,
            }
        )
    return pd.DataFrame(records)


def statuses(document, frame):
    return [v.status for v in verdicts.judge(document, frame)]


def fe(fio_shm, fio_disk, wall_shm, wall_disk):
    rw = {"rw": "randrw"}
    return summary(
        [
            ("fio", "worst_case", "shm", "write_bandwidth", fio_shm, rw),
            ("fio", "worst_case", "disk", "write_bandwidth", fio_disk, rw),
            ("fe_proxy", "optimisation", "shm", "wall_time", wall_shm, {"cores": 2}),
            ("fe_proxy", "optimisation", "disk", "wall_time", wall_disk, {"cores": 2}),
            ("fe_proxy", "optimisation", "shm", "wall_time", wall_shm * 2, {"cores": 1}),
        ]
    )


def test_000_both_ways():
    assert statuses("000", fe(600, 3, 10.0, 10.5)) == [REPRODUCED]
    assert statuses("000", fe(600, 3, 10.0, 40.0)) == [NOT_REPRODUCED]
    assert statuses("000", fe(30, 10, 10.0, 10.5)) == [INCONCLUSIVE]
    (verdict,) = verdicts.judge("000", fe(600, 3, 10.0, 10.5))
    assert "200x" in verdict.text and "193x" in verdict.text and "1.05x" in verdict.text


def test_000_needs_both_kinds_of_tier():
    frame = fe(600, 3, 10, 10.5)
    frame = frame[frame["tier"] == "shm"]
    (verdict,) = verdicts.judge("000", frame)
    assert verdict.status == INCONCLUSIVE and "device tier" in verdict.text


def cfd(disk1, shm1, disk100, shm100, disk_ens, shm_ens):
    rows = []
    for tier, values in (("disk", (disk1, disk100, disk_ens)), ("shm", (shm1, shm100, shm_ens))):
        for (interval, ensemble), value in zip([(1, 1), (100, 1), (1, 2)], values, strict=True):
            params = {
                "write_interval": interval,
                "ensemble": ensemble,
                "ranks": 1,
                "file_handler": "uncollated",
            }
            rows.append(("cfd_proxy", "single_vs_ensemble", tier, "time_per_step", value, params))
    return summary(rows)


def test_001_both_ways():
    assert statuses("001", cfd(0.20, 0.10, 0.05, 0.05, 0.60, 0.11)) == [REPRODUCED] * 3
    assert statuses("001", cfd(0.10, 0.10, 0.08, 0.05, 0.11, 0.20)) == [NOT_REPRODUCED] * 3


def pv(fuse, disk, shm):
    return summary(
        [
            ("pv", "sinks", tier, "throughput", value, {})
            for tier, value in (("fuse", fuse), ("disk", disk), ("shm", shm))
        ]
    )


def test_002_both_ways():
    assert statuses("002", pv(150, 300, 1400)) == [REPRODUCED, REPRODUCED]
    assert statuses("002", pv(900, 300, 200)) == [NOT_REPRODUCED, NOT_REPRODUCED]
    assert statuses("002", pv(150, 300, 1400).query("tier != 'fuse'")) == [
        INCONCLUSIVE,
        REPRODUCED,
    ]


def dd_stream(shm, disk, triad):
    return summary(
        [
            ("dd", "dd", "shm", "write_bandwidth", shm, {"sync": "buffered", "block_size": "10M"}),
            (
                "dd",
                "dd",
                "disk",
                "write_bandwidth",
                disk,
                {"sync": "buffered", "block_size": "10M"},
            ),
            ("stream", "memory", "void", "triad_bandwidth", triad, {}),
        ]
    )


def test_003_both_ways():
    assert statuses("003", dd_stream(5000, 2000, 50000)) == [REPRODUCED]
    assert statuses("003", dd_stream(1500, 2000, 50000)) == [NOT_REPRODUCED]
    assert statuses("003", dd_stream(60000, 2000, 50000)) == [NOT_REPRODUCED]


def eagle(disk_small, shm_small, disk_drop, shm_drop, largest, limit):
    rows = []
    for tier, small, drop in (("disk", disk_small, disk_drop), ("shm", shm_small, shm_drop)):
        rows.append(
            (
                "dd",
                "dd_blocks",
                tier,
                "write_bandwidth",
                small,
                {"block_size": "1M", "sync": "buffered"},
            )
        )
        for fraction, value, size in ((0.1, small, largest / 10), (2, small * drop, largest)):
            params = {"file_fraction": fraction, "sync": "buffered", "block_size": "1M"}
            rows.append(("dd", "cliff", tier, "write_bandwidth", value, params))
            rows.append(("dd", "cliff", tier, "bytes", size, params))
            rows.append(("dd", "cliff", tier, "dirty_limit_bytes", limit, params))
    return summary(rows)


def test_004_both_ways():
    assert statuses("004", eagle(2000, 2500, 0.1, 0.95, 8e9, 4e9)) == [REPRODUCED] * 2
    assert statuses("004", eagle(300, 2500, 0.9, 0.95, 8e9, 4e9)) == [NOT_REPRODUCED] * 2


def test_004_cliff_below_the_dirty_limit_is_inconclusive_with_the_reason():
    cliff = verdicts.judge("004", eagle(2000, 2500, 0.9, 0.95, 1e9, 4e9))[1]
    assert cliff.status == INCONCLUSIVE and "below the dirty-page limit" in cliff.text


@pytest.mark.parametrize("document", sorted(verdicts.DOCUMENTS))
def test_empty_summary_is_inconclusive_never_a_crash(document):
    empty = summary([]).reindex(
        columns=[
            "experiment",
            "workload",
            "tier",
            "tier_class",
            "metric",
            "status",
            "median",
            "reason",
        ]
    )
    assert set(statuses(document, empty)) == {INCONCLUSIVE}
