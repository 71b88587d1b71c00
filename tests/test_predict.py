"""A job's time on a tier it did not run on: its profile times the tier's costs (predict)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import numpy as np
import pytest
from tierbench import predict, resultsdb
from tierbench.records import CPU_TIME_ELSEWHERE, JOB_CPU_TIME, JOB_TIME, metric, whole_run_timed
from tierbench.workloads.cfd import openfoam

#: costs per tier: us per call of each metadata phase, the fsync'd create's, MB/s at 64 KiB
FAST = {"file_create": 10.0, "file_stat": 2.0, "file_read": 4.0, "file_rename": 8.0,
        "file_remove": 6.0, "dir_create": 12.0, "dir_remove": 9.0}  # fmt: skip
SLOW = {name: 50 * cost for name, cost in FAST.items()}
PROFILE = {"ops_file_create": 1000, "ops_dir_create": 100, "ops_file_stat": 500, "ops_fsync": 10,
           "writes_upto_64KiB": 1000, "written_upto_64KiB": 50_000_000}  # fmt: skip
#: small spread around each value, the same for every cost: three repetitions
NOISE = (0.99, 1.0, 1.01)


class Database:
    """A results database with hand-made runs: the tiers' costs and a job's times and calls."""

    def __init__(self, path):
        self.path = path
        self.conn = resultsdb.connect(path)
        self.runs = 0

    def run(self, machine: str, study: str, rows: list[dict]) -> str:
        self.runs += 1
        run_id = f"run{self.runs:04d}"
        started = f"2026-12-0{self.runs % 9 + 1}T00:00:00+00:00"
        self.conn.execute(
            "INSERT INTO runs (run_id, machine, study, started) VALUES (?, ?, ?, ?)",
            (run_id, machine, study, started),
        )
        columns = ["run_id", *resultsdb.MEASUREMENT_COLUMNS]
        for row in rows:
            full = {"run_id": run_id, "phase": "measured", "status": "ok", **row}
            self.conn.execute(
                f"INSERT INTO measurements ({', '.join(columns)}) VALUES "
                f"({', '.join('?' for _ in columns)})",
                [full.get(c) for c in columns],
            )
        self.conn.commit()
        return run_id

    def costs(
        self,
        machine: str,
        tiers: dict[str, tuple[dict, float, float]],
        busy: dict | None = None,
        noise=NOISE,
        clock=None,
    ) -> str:
        """tier -> (phase costs in us, fsync'd create in us, MB/s): a default study's run.
        ``busy``: tier -> the share of those costs spent on a CPU (the calls' CPU time).
        ``noise``: each repetition's factor on a cost (its bandwidth's divisor); ``clock``:
        (tier, experiment, repetition) -> when that repetition started."""
        rows = []
        for tier, (phases, fsynced, bandwidth) in tiers.items():
            share = (busy or {}).get(tier)
            for fsync in (False, True):
                params = json.dumps({"layout": "flat", "fsync": fsync, "file_size": 0})
                costs = phases if not fsync else {"file_create": fsynced}
                for phase, cost in costs.items():
                    rows += repeated(
                        tier, "metadata", "metadata", params, f"{phase}_cost", cost, noise, clock
                    )
                    if share is not None:
                        cpu = cost * share
                        rows += repeated(tier, "metadata", "metadata", params, f"{phase}_cpu", cpu)
            params = json.dumps(
                {"rw": "write", "block_size": "64k", "io_mode": "buffered", "numjobs": 1}
            )
            rows += repeated(
                tier, "sequential", "fio", params, "write_bandwidth", bandwidth,
                [1 / f for f in noise], clock,
            )  # fmt: skip
            if share is not None:
                rows += repeated(tier, "sequential", "fio", params, "cpu_usage", 100 * share)
        return self.run(machine, "default", rows)

    def job(
        self,
        machine: str,
        times: dict,
        traced_on: str,
        profile=PROFILE,
        noise=NOISE,
        cpu=None,
        clock=None,
    ) -> str:
        """times, cpu: tier -> the job's time and CPU time there (s)."""
        params = json.dumps({"command": "make files"})
        rows = []
        for tier, seconds in times.items():
            rows += repeated(tier, "files", "command", params, "wall_time", seconds, noise, clock)
        for tier, seconds in (cpu or {}).items():
            rows += repeated(tier, "files", "command", params, "cpu_time", seconds, noise)
        rows += [
            {"experiment": "files_traced", "workload": "command", "tier": traced_on,
             "tier_class": traced_on, "point": "single", "params": params, "repetition": 1,
             "metric": metric, "value": value}
            for metric, value in profile.items()
        ]  # fmt: skip
        return self.run(machine, "mine", rows)


def repeated(
    tier, experiment, workload, params, metric, value, noise=NOISE, clock=None
) -> list[dict]:
    return [
        {"experiment": experiment, "workload": workload, "tier": tier, "tier_class": tier,
         "point": "p", "params": params, "repetition": rep, "metric": metric,
         "value": value * factor, "started_at": clock(tier, experiment, rep) if clock else None}
        for rep, factor in enumerate(noise, start=1)
    ]  # fmt: skip


def io_of(phases: dict, fsynced: float, bandwidth: float, profile=PROFILE) -> float:
    """The job's I/O by hand: calls x cost, fsync as a difference, bytes / bandwidth."""
    seconds = sum(profile.get(f"ops_{op}", 0) * phases[op] for op in phases) * 1e-6
    seconds += profile["ops_fsync"] * (fsynced - phases["file_create"]) * 1e-6
    return seconds + profile["written_upto_64KiB"] / (bandwidth * 1e6)


@pytest.fixture
def db(tmp_path):
    database = Database(tmp_path / "results.sqlite")
    yield database
    database.conn.close()


def predicted_rows(db, selector=None) -> list[dict]:
    found = predict.predictions(db.conn, predict.select_runs(db.conn, selector, "mine"))
    return found["rows"], found["jobs"]


def test_the_prediction_is_the_rest_of_the_time_plus_the_io_at_the_other_tiers_costs(db):
    db.costs("box", {"fast": (FAST, 200.0, 2000.0), "slow": (SLOW, 5000.0, 500.0)})
    io_fast, io_slow = io_of(FAST, 200.0, 2000.0), io_of(SLOW, 5000.0, 500.0)
    rest = 3.0
    db.job("box", {"fast": rest + io_fast}, traced_on="fast")
    rows, [job] = predicted_rows(db)
    assert job["rest"] == pytest.approx(rest, rel=1e-6)
    assert job["rest_low"] < rest < job["rest_high"]
    [row] = rows
    assert (row["machine"], row["tier"], row["profiled_on"]["tier"]) == ("box", "slow", "fast")
    assert row["predicted"] == pytest.approx(rest + io_slow, rel=1e-6)
    assert row["io"] == pytest.approx(io_slow, rel=1e-6)
    assert row["low"] < row["predicted"] < row["high"]
    assert row["measured"] is None and row["check"] is None


@pytest.mark.parametrize(
    "measured_factor, check",
    [(1.0, predict.HOLDS), (2.0, predict.FAILS), (0.4, predict.FAILS)],
)
def test_where_the_job_ran_the_prediction_is_checked_on_its_interval(db, measured_factor, check):
    db.costs("box", {"fast": (FAST, 200.0, 2000.0), "slow": (SLOW, 5000.0, 500.0)})
    rest = 3.0
    slow = (rest + io_of(SLOW, 5000.0, 500.0)) * measured_factor
    db.job("box", {"fast": rest + io_of(FAST, 200.0, 2000.0), "slow": slow}, traced_on="fast")
    [row] = predicted_rows(db)[0]
    assert row["measured"] == pytest.approx(slow) and row["measured_n"] == 3
    assert row["ratio"] == pytest.approx(measured_factor, rel=1e-6)
    assert row["ratio_low"] <= row["ratio"] <= row["ratio_high"]
    assert row["check"] == check
    if check == predict.FAILS:
        side = "slower" if measured_factor > 1 else "faster"
        assert row["reason"] == predict.MISSED[side].format(target="box/slow", source="box/fast")


def test_a_spread_that_reaches_over_the_band_is_undecided(db):
    db.costs("box", {"fast": (FAST, 200.0, 2000.0), "slow": (SLOW, 5000.0, 500.0)})
    rest = 3.0
    times = {"fast": rest + io_of(FAST, 200.0, 2000.0), "slow": rest + io_of(SLOW, 5000.0, 500.0)}
    db.job("box", times, traced_on="fast", noise=(0.6, 1.0, 1.5))
    [row] = predicted_rows(db, "box")[0]
    assert row["check"] == predict.UNDECIDED and row["ratio_low"] < 0.75 < 1.25 < row["ratio_high"]


def test_every_machine_in_the_database_is_predicted(db):
    db.costs("box", {"fast": (FAST, 200.0, 2000.0)})
    db.costs("other", {"nvme": (FAST, 300.0, 3000.0), "lustre": (SLOW, 9000.0, 800.0)})
    db.job("box", {"fast": 4.0}, traced_on="fast")
    rows, _ = predicted_rows(db)
    assert {(r["machine"], r["tier"]) for r in rows} == {("other", "nvme"), ("other", "lustre")}
    by_tier = {r["tier"]: r["predicted"] for r in rows}
    assert by_tier["lustre"] > by_tier["nvme"] > 0


def test_a_cost_the_tier_lacks_is_named_not_guessed(db):
    db.costs("box", {"fast": (FAST, 200.0, 2000.0)})
    # a machine whose run measured no metadata costs, only fio
    params = json.dumps({"rw": "write", "block_size": "1M", "io_mode": "buffered"})
    db.run("other", "default", repeated("nvme", "seq", "fio", params, "write_bandwidth", 900.0))
    db.job("box", {"fast": 4.0}, traced_on="fast")
    [row] = predicted_rows(db)[0]
    assert row["predicted"] is None
    assert "other/nvme has no cost measured for file_create" in row["reason"]
    assert "fsync" in row["reason"]


def test_a_machine_without_costs_is_told_what_measures_them(db):
    db.job("box", {"fast": 4.0}, traced_on="fast")  # no default study on box yet
    rows, [job] = predicted_rows(db)
    assert rows == [] and job["rest"] is None
    assert job["reason"].endswith("the default study run on box measures them")


def test_io_above_the_whole_time_is_no_prediction_and_says_why(db):
    db.costs("box", {"fast": (SLOW, 5000.0, 50.0), "slow": (SLOW, 5000.0, 50.0)})
    db.job("box", {"fast": 0.5}, traced_on="fast")
    [row], [job] = predicted_rows(db)
    assert row["predicted"] is None and "is not less than its whole time there" in row["reason"]
    assert job["reason"] == row["reason"] and job["rest"] < 0


def test_a_job_mostly_io_where_it_was_profiled_is_told_to_profile_on_a_faster_tier(db):
    db.costs("box", {"fast": (FAST, 200.0, 2000.0), "slow": (SLOW, 5000.0, 500.0)})
    io_fast, io_slow = io_of(FAST, 200.0, 2000.0), io_of(SLOW, 5000.0, 500.0)
    rest = io_slow / 4  # four fifths of the job's time on slow is its I/O there
    times = {"fast": rest + io_fast, "slow": rest + io_slow}
    db.job("box", times, traced_on="slow")
    _, [on_slow] = predicted_rows(db)
    assert on_slow["io_share"] == pytest.approx(0.8, rel=1e-3)
    assert "80 % of its time on slow is I/O" in on_slow["caution"]
    assert predict.lines({"jobs": [on_slow], "rows": []})[1].startswith("  caution: 80 %")
    db.job("box", times, traced_on="fast")  # the same job, the latest run: profiled on fast
    _, [on_fast] = predicted_rows(db)
    assert on_fast["io_share"] < predict.IO_SHARE_CAUTION and on_fast["caution"] == ""


def test_a_job_mostly_waiting_on_a_slow_tier_has_its_rest_read_from_its_cpu_time(db):
    """On a tier where four fifths of its time is I/O, the time minus the I/O carries the
    costs' error four times over; the CPU time, which waiting does not add to, does not."""
    busy = {"fast": 1.0, "slow": 0.05}  # a call on slow waits 95 % of its time
    db.costs("box", {"fast": (FAST, 200.0, 2000.0), "slow": (SLOW, 5000.0, 500.0)}, busy)
    io_fast, io_slow = io_of(FAST, 200.0, 2000.0), io_of(SLOW, 5000.0, 500.0)
    rest = io_slow / 4
    # the same job on slow waited 20 % longer than its calls cost the benchmarks: the
    # time-minus-I/O rest would carry all of that, the CPU time none of it
    times = {"fast": rest + io_fast, "slow": rest + 1.2 * io_slow}
    cpu = {"slow": rest + 0.05 * io_slow}
    db.job("box", times, traced_on="slow", cpu=cpu)
    [row], [job] = predicted_rows(db)
    assert job["rest_from"] == "cpu" and job["caution"] == ""
    assert job["rest"] == pytest.approx(rest, rel=1e-6)
    assert row["tier"] == "fast" and row["predicted"] == pytest.approx(rest + io_fast, rel=1e-6)
    assert row["check"] == predict.HOLDS
    assert "(from its CPU time)" in predict.lines({"jobs": [job], "rows": []})[0]


def test_a_parallel_job_keeps_the_time_minus_io_and_is_told_why(db):
    busy = {"fast": 1.0, "slow": 0.05}
    db.costs("box", {"fast": (FAST, 200.0, 2000.0), "slow": (SLOW, 5000.0, 500.0)}, busy)
    io_slow = io_of(SLOW, 5000.0, 500.0)
    rest = io_slow / 4
    # 8 cores busy during its compute: CPU time above its time
    db.job("box", {"slow": rest + io_slow}, traced_on="slow", cpu={"slow": 8 * rest})
    _, [job] = predicted_rows(db)
    assert job["rest_from"] == "time" and job["rest"] == pytest.approx(rest, rel=1e-6)
    assert "computed on several cores at once" in job["caution"]


def test_a_job_timed_but_not_traced_is_not_predicted(db):
    db.costs("box", {"fast": (FAST, 200.0, 2000.0), "slow": (SLOW, 5000.0, 500.0)})
    db.job("box", {"slow": 4.0}, traced_on="fast")  # timed on slow, traced on fast only
    rows, jobs = predicted_rows(db)
    assert rows == [] and jobs == []
    assert "no job to predict" in predict.lines({"jobs": [], "rows": []})[0]


def test_the_nearest_block_size_prices_a_write_and_a_small_write_costs_a_page():
    costs = predict.TierCosts("m", "t", "disk")
    for block in (4096, 65536, 1 << 20):
        costs.samples[f"bw:{block}"] = None
    assert costs.block_for(100) == 4096 and costs.block_for(50_000) == 65536
    assert costs.block_for(10 << 20) == 1 << 20
    [(priced, size)] = predict.write_classes({"writes_upto_512B": 10, "written_upto_512B": 100})
    assert priced == 10 * predict.SMALLEST_WRITE and size == predict.SMALLEST_WRITE


def test_a_rename_the_tier_refuses_is_priced_with_the_lookup_mv_falls_back_to(db):
    """GlusterFS's FUSE client refuses renameat2(RENAME_NOREPLACE) after a round trip; mv then
    looks the new name up and renames: 1.8 + 0.9 ms a file more than a plain rename there."""
    refused = {**SLOW, "file_rename_noreplace": 1800.0}
    params = json.dumps({"layout": "flat", "fsync": False, "file_size": 0})
    rows = []
    for tier, costs, share in (("local", FAST, 0), ("shared", refused, 100)):
        rows += repeated(
            tier, "metadata", "metadata", params, "file_rename_noreplace_refused", share
        )
        for phase, cost in {"file_rename_noreplace": 9.0, **costs}.items():
            rows += repeated(tier, "metadata", "metadata", params, f"{phase}_cost", cost)
    db.run("box", "default", rows)
    local, shared = predict.tier_costs(db.conn)
    assert (local.refuses_noreplace, shared.refuses_noreplace) == (False, True)
    # mv renaming 100 files, profiled where that was one call each
    accepted = {"ops_file_rename": 100, "ops_file_stat": 5, "ops_rename_noreplace": 100}
    assert predict.as_made_on(accepted, local) == (accepted, 0)
    made, refused_there = predict.as_made_on(accepted, shared)
    assert made["ops_file_stat"] == 105 and refused_there == 100
    terms, _ = predict.io_terms(accepted, shared)
    seconds = predict.io_at_medians(terms, shared)
    expected = 100 * (refused["file_rename"] + refused["file_rename_noreplace"])
    assert seconds == pytest.approx((expected + 105 * refused["file_stat"]) * 1e-6)
    # profiled where it was refused: where the tier renames without replacing, no lookups
    fell_back = {**made, "ops_refused": 100, "ops_rename_noreplace_refused": 100}
    assert predict.as_made_on(fell_back, local)[0]["ops_file_stat"] == 5
    assert predict.as_made_on(fell_back, shared)[0]["ops_file_stat"] == 105
    assert "100 renames without replacing, which this tier refuses" in predict.calls_there(
        accepted, shared
    )
    assert predict.calls_there(accepted, local) == ""
    assert "which this tier makes" in predict.calls_there(fell_back, local)
    # a tier measured before the rename without replacing was: the profile as it is
    assert predict.as_made_on(accepted, predict.TierCosts("m", "old", "disk")) == (accepted, 0)


def test_the_latest_run_of_a_tier_gives_its_costs(db):
    db.costs("box", {"fast": (SLOW, 5000.0, 500.0)})
    db.costs("box", {"fast": (FAST, 200.0, 2000.0)})
    [costs] = predict.tier_costs(db.conn)
    assert costs.samples["op:file_create"].median == pytest.approx(FAST["file_create"] * 1e-6)
    assert costs.runs == {"run0002"}


def test_the_command_line_writes_prediction_json_and_refuses_an_unknown_run(db, tmp_path, capsys):
    db.costs("box", {"fast": (FAST, 200.0, 2000.0), "slow": (SLOW, 5000.0, 500.0)})
    run_id = db.job("box", {"fast": 4.0}, traced_on="fast")
    (tmp_path / "run.json").write_text(json.dumps({"run_id": run_id}))
    out = tmp_path / "prediction.json"
    code = predict.main(["--db", str(db.path), "--run-json", str(tmp_path / "run.json"),
                         "--out", str(out)])  # fmt: skip
    assert code == 0
    found = json.loads(out.read_text())
    assert [r["tier"] for r in found["rows"]] == ["slow"] and found["band"] == [0.75, 1.25]
    assert predict.main(["--db", str(db.path), "box"]) == 0
    printed = capsys.readouterr().out
    assert "profiled on fast" in printed and "box/slow: predicted" in printed
    assert predict.main(["--db", str(db.path), "nothing"]) == 1
    assert "neither a machine nor a run" in capsys.readouterr().err


def test_resampled_costs_give_every_prediction_a_finite_interval(db):
    db.costs("box", {"fast": (FAST, 200.0, 2000.0), "slow": (SLOW, 5000.0, 500.0)})
    db.job("box", {"fast": 4.0, "slow": 9.0}, traced_on="slow")
    [row] = predicted_rows(db)[0]
    assert np.isfinite([row["low"], row["high"], row["ratio_low"], row["ratio_high"]]).all()
    assert isinstance(db.conn, sqlite3.Connection)


def test_a_whole_runs_cpu_time_counts_its_children_and_what_its_steps_report():
    busy = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass"

    def run(job):
        subprocess.run([sys.executable, "-c", busy], check=True)
        return [metric("x", 1.0, "s"), metric(CPU_TIME_ELSEWHERE, 2.0, "s")]

    found = {m["metric"]: m["value"] for m in whole_run_timed(run)(None)}
    assert found[JOB_CPU_TIME] >= 2.3  # the child's 0.3 s, and the 2 s reported from elsewhere
    assert found[JOB_CPU_TIME] - 2.0 <= found[JOB_TIME] + 0.05  # here: one core at a time
    assert JOB_CPU_TIME not in {m["metric"] for m in whole_run_timed(run, cpu=False)(None)}
    # srun's ranks are a job step's, not this job's children: OpenFOAM reports their CPU time
    assert openfoam.launched_elsewhere("srun --mpi=pmix")
    assert not openfoam.launched_elsewhere("mpiexec")


def test_points_that_ran_in_rounds_are_resampled_run_by_run(db):
    """A shared machine slow in some rounds: each repetition of the job and of the costs that
    price it took longer alike. Paired run by run (a study's ``order: rounds``) the slow
    rounds cancel in measured / predicted; point by point the same values are undecided."""
    drift = (1.0, 1.8, 0.6, 1.5, 0.7, 1.2)
    rest = 3.0
    times = {"fast": rest + io_of(FAST, 200.0, 2000.0), "slow": rest + io_of(SLOW, 5000.0, 500.0)}
    order = [(e, t) for e in ("metadata", "sequential", "files") for t in ("fast", "slow")]

    def rounds(tier, experiment, rep):  # round after round, each point once per round
        return f"2026-12-01T00:{rep:02d}:{order.index((experiment, tier)):02d}+00:00"

    def points(tier, experiment, rep):  # each point's repetitions together
        return f"2026-12-01T00:{order.index((experiment, tier)):02d}:{rep:02d}+00:00"

    checks = {}
    for clock in (rounds, points):
        db.costs("box", {"fast": (FAST, 200.0, 2000.0), "slow": (SLOW, 5000.0, 500.0)},
                 noise=drift, clock=clock)  # fmt: skip
        db.job("box", times, traced_on="fast", noise=drift, clock=clock)
        [row] = predicted_rows(db)[0][-1:]
        checks[clock.__name__] = row
    paired, alone = checks["rounds"], checks["points"]
    assert paired["ratio"] == pytest.approx(alone["ratio"]) == pytest.approx(1.0, rel=1e-3)
    assert paired["check"] == predict.HOLDS
    assert 0.97 < paired["ratio_low"] < paired["ratio_high"] < 1.03
    assert alone["check"] == predict.UNDECIDED


@pytest.mark.parametrize(("share", "more_than_all"), [(0.8, False), (1.05, True)])
def test_the_report_says_when_a_jobs_calls_cost_it_less_than_the_benchmarks(
    tmp_path, share, more_than_all
):
    """A job profiled on a slow tier, its rest read from its CPU time: the report gives its
    calls' share of its time at that tier's costs, and says what a share above all of it
    means (run 10 of the prediction study: 105 % for the files job on GlusterFS)."""
    from conftest import study_for_report
    from test_answer import rows
    from tierbench import report

    frame = rows("command", "wall_time", "s", {"disk": [15, 16, 17]}).assign(
        study="s", experiment="files", host="h", point="single", started_at="t", duration_s=1
    )
    study_for_report(tmp_path / "m" / "s", frame, ["disk"])
    job = {"experiment": "files", "point": "single", "machine": "m", "tier": "disk",
           "metric": "wall_time", "time": 16.0, "time_n": 3, "rest": 2.7, "rest_low": 2.4,
           "rest_high": 2.7, "rest_from": "cpu", "io_share": share, "caution": "",
           "reason": "", "calls": {}}  # fmt: skip
    (tmp_path / "m/s/prediction.json").write_text(
        json.dumps({"jobs": [job], "rows": [], "band": [0.75, 1.25]})
    )
    html = report.render(tmp_path / "m", ["s"], {"s": "S"})
    assert f"at that tier's costs, come to {round(100 * share)} % of its time" in html
    assert ("more than all of it: they cost it less than" in html) == more_than_all
