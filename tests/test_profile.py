"""The I/O profile of each job in a study: shown where the study runs a job of the user's."""

import pandas as pd
import pytest
from tierbench import profile


def summary_rows(workload, experiment, metrics, tiers=("shm", "disk"), **params):
    return [
        {
            "experiment": experiment,
            "workload": workload,
            "point": "single",
            "tier": tier,
            "metric": metric,
            "median": value * (1.1 if tier == "disk" else 1.0),
            "status": "ok",
            **params,
        }  # fmt: skip
        for tier in tiers
        for metric, value in metrics.items()
    ]


def test_a_users_command_is_shown_beside_the_proxy_with_its_calls():
    rows = summary_rows("command", "mine", {"files_created": 100, "bytes_written": 2e6,
                                            "wall_time": 3.0})  # fmt: skip
    rows += summary_rows("command", "mine_calls", {"syscalls_open": 120, "syscalls_fsync": 0})
    rows += summary_rows("cfd_proxy", "doc001", {"files_created": 900, "dirs_created": 300})
    found = profile.profiles(pd.DataFrame(rows))
    by = {row["experiment"]: row for row in found}
    assert set(by) == {"mine", "mine_calls", "doc001"}
    # medians over tiers: 100 on shm, 110 on disk
    assert by["mine"]["files"] == 105 and by["mine"]["folders"] is None
    assert by["mine"]["bytes"] == 2.1e6 and by["mine"]["calls"] == {}
    assert by["mine_calls"]["calls"] == {"open": 126, "fsync": 0}
    assert by["doc001"]["folders"] == 315 and by["doc001"]["tiers"] == ["disk", "shm"]


def test_a_study_without_a_job_of_the_users_gets_no_profile():
    duct = summary_rows("openfoam", "duct", {"files_created": 90}, case=None)
    bar = summary_rows("calculix", "ga", {"files_written": 7}, deck=None)
    assert profile.profiles(pd.DataFrame(duct + bar)) == []
    case = summary_rows("openfoam", "pitzdaily", {"files_created": 40}, case="/cases/pitzDaily")
    assert [row["experiment"] for row in profile.profiles(pd.DataFrame(duct + case))] == [
        "duct", "pitzdaily"]  # fmt: skip


def test_failed_points_and_other_workloads_are_left_out():
    rows = summary_rows("command", "mine", {"files_created": 3})
    rows += summary_rows("fio", "seq", {"bytes_written": 1e9})
    rows[0]["status"] = "failed"
    found = profile.profiles(pd.DataFrame(rows))
    assert [row["experiment"] for row in found] == ["mine"]
    assert found[0]["files"] == pytest.approx(3.3)  # the disk's only: shm's failed
