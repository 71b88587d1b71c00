"""The fidelity verdict of a proxy, both ways, on synthetic results of a study."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
from tierbench import fidelity, intervals, workloads
from tierbench.matrix import param_text

TIERS = {"shm": "shm", "disk": "disk"}
#: per rank per write, as document 001 lists them: cfd_proxy's 8 files, v1912's 9
FILES = {"cfd_proxy": 8, "openfoam": 9}
STEPS, RANKS, REPS = 20, 2, 5
BASE_TIME = 0.100
#: output cost per write of the real application, per tier (s)
REAL_COST = {"shm": 0.010, "disk": 0.030}
REAL_BYTES = 4_000_000


def cfd_rows(
    workload: str,
    experiment: str,
    *,
    files: int,
    cost_factor: float = 1.0,
    bytes_factor: float = 1.0,
    noise: float = 0.002,
    seed: int = 0,
    syscalls: dict | None = None,
    cells: int = 1000,
    base_time: float = BASE_TIME,
) -> list[dict]:
    """Tidy rows of one CFD experiment: write interval 1 and none, on shm and disk."""
    rng = np.random.default_rng(seed)
    rows = []
    for tier, tier_class in TIERS.items():
        for interval in (1, "none"):
            writes = 0 if interval == "none" else STEPS
            params = {
                "ranks": RANKS, "cells_per_rank": cells, "steps": STEPS,
                "write_interval": interval, "file_handler": "uncollated", "ensemble": 1,
                "write_format": "binary", "purge_write": 1,
            }  # fmt: skip
            for rep in range(1, REPS + 1):
                cost = REAL_COST[tier] * cost_factor if writes else 0.0
                values = {
                    "time_per_step": (base_time + cost) * (1 + noise * rng.standard_normal()),
                    "files_created": files * RANKS * writes,
                    "dirs_created": 3 * RANKS * writes,
                    "bytes_written": REAL_BYTES * bytes_factor * writes,
                }
                for category, per_write in (syscalls or {}).items():
                    values[f"syscalls_{category}"] = 1000 + per_write * writes
                started = f"2026-01-01T00:{rep:02d}:{0 if workload == 'cfd_proxy' else 30:02d}Z"
                for metric, value in values.items():
                    rows.append(
                        {
                            "study": "cfd_dcpmm", "experiment": experiment,
                            "workload": workload, "tier": tier, "tier_class": tier_class,
                            "host": "h", "point": f"write_interval={interval}", **params,
                            "repetition": rep, "phase": "measured", "started_at": started,
                            "duration_s": 1.0, "slurm_job_id": "", "metric": metric,
                            "value": value, "unit": "", "status": "ok", "reason": "",
                        }
                    )  # fmt: skip
    return rows


def study(**proxy) -> pd.DataFrame:
    real = cfd_rows("openfoam", "openfoam_fidelity", files=FILES["openfoam"], seed=1)
    made = cfd_rows("cfd_proxy", "proxy_fidelity", **{"files": FILES["openfoam"], **proxy})
    return pd.DataFrame(real + made)


def cfd_verdict(frame: pd.DataFrame, traced=()) -> dict:
    out = fidelity.fidelity(frame, list(traced))
    (entry,) = [p for p in out["proxies"] if p["proxy"] == "cfd_proxy"]
    return entry


def test_a_proxy_writing_one_file_fewer_per_write_differs():
    entry = cfd_verdict(study(files=FILES["cfd_proxy"]))
    assert entry["verdict"] == fidelity.DIFFERS
    assert any(
        "cfd_proxy writes 8 files per rank per write, openfoam 9 on shm" in r
        for r in entry["reasons"]
    )
    files = [r for r in entry["rows"] if r["quantity"] == "files per write"]
    assert {r["decision"] for r in files} == {fidelity.DIFFERS}
    assert files[0]["proxy"] == 8 * RANKS and files[0]["real"] == 9 * RANKS


def test_a_proxy_matching_within_3_percent_with_tight_repetitions_is_faithful():
    entry = cfd_verdict(study(cost_factor=1.03, bytes_factor=0.97))
    assert entry["verdict"] == fidelity.FAITHFUL, entry["reasons"]
    costs = [r for r in entry["rows"] if r["quantity"] == "I/O cost per write"]
    assert len(costs) == 2  # shm and disk
    for line in costs:
        assert line["ratio"] == pytest.approx(1.03, rel=0.03)
        assert 0.9 <= line["low"] <= line["ratio"] <= line["high"] <= 1.1
    (size,) = {r["ratio"] for r in entry["rows"] if r["quantity"] == "bytes per write"}
    assert size == pytest.approx(0.97)


def test_only_proxy_points_that_imitate_the_application_are_compared():
    """cfd_dcpmm also runs the proxy in document 001's 8-file shape, with the same shape
    parameters as its real-application experiment: those points stand for the document."""
    document = pd.DataFrame(cfd_rows("cfd_proxy", "single_vs_ensemble", files=8, seed=2))
    document["file_set"] = "document_001"
    calibrated = study(cost_factor=1.03, bytes_factor=0.97)
    calibrated["file_set"] = np.where(calibrated["workload"] == "cfd_proxy", "v1912", "")
    entry = cfd_verdict(pd.concat([calibrated, document], ignore_index=True))
    assert entry["verdict"] == fidelity.FAITHFUL, entry["reasons"]
    assert "single_vs_ensemble" not in json.dumps(entry)
    document_only = pd.concat([calibrated[calibrated["workload"] == "openfoam"], document])
    assert cfd_verdict(document_only)["verdict"] == fidelity.NOT_COMPARED


def test_wide_noise_is_within_noise_not_a_verdict():
    entry = cfd_verdict(study(cost_factor=1.03, noise=0.15, seed=3))
    assert entry["verdict"] == fidelity.WITHIN_NOISE, entry["reasons"]
    assert any("straddles the band" in r for r in entry["reasons"])


def test_an_io_cost_twice_the_real_one_differs():
    entry = cfd_verdict(study(cost_factor=2.0))
    assert entry["verdict"] == fidelity.DIFFERS
    assert any(r.startswith("I/O cost per write on disk") for r in entry["reasons"])


def test_a_proxy_computing_a_tenth_of_the_application_differs():
    """The issue's proxy: the same files, bytes and cost per write, but a step without
    writes a tenth of simpleFoam's, so a write is a far larger share of its step."""
    entry = cfd_verdict(study(cost_factor=1.03, bytes_factor=0.97, base_time=BASE_TIME / 10))
    assert entry["verdict"] == fidelity.DIFFERS
    compute = [r for r in entry["rows"] if r["quantity"] == "time per step without writes"]
    assert {r["tier"] for r in compute} == set(TIERS)
    for line in compute:
        assert line["decision"] == fidelity.DIFFERS
        assert line["ratio"] == pytest.approx(0.1, rel=0.02)
        assert line["real"] == pytest.approx(BASE_TIME, rel=0.01)
    assert any(r.startswith("time per step without writes on disk") for r in entry["reasons"])
    # what it does to the tier ratio: the proxy sees the tier far more than simpleFoam
    (ratio,) = [r for r in entry["rows"] if r["section"] == "tier ratio"]
    assert ratio["proxy"] > 1.5 * ratio["real"]


@pytest.mark.parametrize("target, target_ratio, took", [(1.5, "1.5", "1"), (1.0, "1", "1.5")])
def test_a_compute_that_differs_says_whether_its_target_or_its_work_was_off(
    target, target_ratio, took
):
    """A proxy 1.5x slower than the application: set to an application timing 1.5x the
    application's runs here (a slow minute), or set right and computing 1.5x its target."""
    frame = study(cost_factor=1.03, bytes_factor=0.97, base_time=BASE_TIME * 1.5)
    proxy = frame[(frame["workload"] == "cfd_proxy") & (frame["metric"] == "time_per_step")]
    targets = proxy.assign(metric="compute_target_per_step", value=BASE_TIME * target)
    entry = cfd_verdict(pd.concat([frame, targets], ignore_index=True))
    compute = [r for r in entry["rows"] if r["section"] == "compute"]
    assert {r["decision"] for r in compute} == {fidelity.DIFFERS}
    for line in compute:
        assert line["explains"] == (
            f"cfd_proxy's target {BASE_TIME * target * 1e3:.3g} ms, openfoam's runs here "
            f"{line['text']['real']}: target / real {target_ratio}, "
            f"and the proxy took {took} of its target"
        ), line["explains"]
        assert line["explains"] in line["note"]
    (shape,) = entry["shapes"]
    assert any(w.endswith(f"target / real {target_ratio}, and the proxy took {took} of its "
                          "target)") for w in shape["why"]), shape["why"]  # fmt: skip


def test_the_compute_is_judged_once_per_tier_and_baseline():
    entry = cfd_verdict(study(cost_factor=1.03, bytes_factor=0.97))
    compute = [r for r in entry["rows"] if r["section"] == "compute"]
    assert len(compute) == len(TIERS) and {r["decision"] for r in compute} == {"agrees"}
    assert all("write_interval=none / " in r["note"] for r in compute)


def test_without_baselines_the_compute_is_the_steps_without_a_write():
    """Write interval 2 and no baseline point: the steps that do not write, in each run."""
    frame = study(cost_factor=1.03, bytes_factor=0.97, base_time=BASE_TIME / 10)
    frame = frame[frame["write_interval"].astype(str) != "none"].copy()
    quiet = frame[frame["metric"] == "time_per_step"].copy()
    quiet["metric"] = "time_per_step_nowrite"
    quiet["value"] = np.where(quiet["workload"] == "cfd_proxy", BASE_TIME / 10, BASE_TIME)
    entry = cfd_verdict(pd.concat([frame, quiet]))
    compute = [r for r in entry["rows"] if r["section"] == "compute"]
    assert compute and {r["decision"] for r in compute} == {fidelity.DIFFERS}
    assert all("(time_per_step_nowrite)" in r["note"] for r in compute)


def test_the_tier_ratio_of_each_is_set_side_by_side():
    entry = cfd_verdict(study(cost_factor=1.03, bytes_factor=0.97))
    (ratio,) = [r for r in entry["rows"] if r["section"] == "tier ratio"]
    assert ratio["tier"] == "disk / shm"
    expected = (BASE_TIME + REAL_COST["disk"]) / (BASE_TIME + REAL_COST["shm"])
    assert ratio["real"] == pytest.approx(expected, rel=0.01)


def test_without_the_real_application_nothing_is_compared():
    frame = pd.DataFrame(cfd_rows("cfd_proxy", "proxy_fidelity", files=8))
    entry = cfd_verdict(frame)
    assert entry["verdict"] == fidelity.NOT_COMPARED
    assert "no untraced points of cfd_proxy and openfoam" in entry["reasons"][0]


def test_traced_points_give_the_call_mix_per_write_and_never_the_times():
    calls = {"open": 9, "write": 20, "mkdir": 3, "fsync": 0}
    real_calls = {"open": 10, "write": 20, "mkdir": 3, "fsync": 0}
    frame = pd.concat(
        [
            study(cost_factor=1.03, bytes_factor=0.97),
            pd.DataFrame(
                cfd_rows("cfd_proxy", "proxy_traced", files=9, syscalls=calls, cost_factor=5)
                + cfd_rows("openfoam", "openfoam_traced", files=9, syscalls=real_calls)
            ),
        ]
    )
    entry = cfd_verdict(frame)
    # the traced proxy is five times slower: its times are not compared
    assert entry["verdict"] == fidelity.FAITHFUL, entry["reasons"]
    opens = [r for r in entry["rows"] if r["quantity"] == "open/create calls per write"]
    assert {(r["proxy"], r["real"]) for r in opens} == {(9.0, 10.0)}
    assert entry["syscalls"].startswith("counted with strace")
    assert not any("open/create" in n for n in entry["notes"])  # 1 call and 10%: not a note
    writes = [r for r in entry["rows"] if r["quantity"] == "write calls per write"]
    assert {(r["proxy"], r["real"]) for r in writes} == {(20.0, 20.0)}


def test_a_traced_experiment_without_strace_says_not_counted(tmp_path):
    record = {
        "spec": {"experiment": "proxy_traced", "workload": "cfd_proxy"},
        "extra": {"syscalls": {"counted": False, "reason": "strace missing: not found on PATH"}},
    }
    path = tmp_path / "rep1.json"
    path.write_text(json.dumps(record))
    entry = cfd_verdict(study(cost_factor=1.03, bytes_factor=0.97), [path])
    assert entry["syscalls"] == "not counted (strace missing)"


def test_difference_ratio_interval_holds_the_estimate_and_knows_noise_from_nothing():
    def s(values):
        return intervals.sample(values)

    tight = fidelity.difference_ratio(
        s([1.20, 1.21, 1.19]), s([1.0, 1.0, 1.0]), s([1.10, 1.10, 1.10]), s([1.0, 1.0, 1.0])
    )
    assert tight.estimate == pytest.approx(2.0)
    assert tight.low <= 2.0 <= tight.high
    flat = fidelity.difference_ratio(s([1.0, 1.0]), s([1.0, 1.0]), s([1.1, 1.1]), s([1.0, 1.0]))
    assert not flat.known and "proxy's time with output is not above" in flat.reason
    one = fidelity.difference_ratio(s([1.2]), s([1.0]), s([1.1]), s([1.0]))
    assert one.estimate == pytest.approx(2.0) and not one.known


def fe_rows(
    workload: str, experiment: str, files: int, cost: float, baseline: dict, increments=None
) -> list:
    """An FE pair's points; ``increments`` (per evaluation, with 20 kB each) adds the metric."""
    rows = []
    for with_output in (True, False):
        params = {"population": 4, "generations": 2, "elite": 1, "seed": 1, "cores": 1,
                  "elements": 3, "increments": 10, "max_strain": 0.02}  # fmt: skip
        if not with_output:
            params.update(baseline)
        for rep in range(1, REPS + 1):
            values = {
                "eval_time_median": 0.2 + (cost if with_output else 0.0) + 1e-4 * rep,
                "wall_time": 2.0 + 1e-3 * rep,
                "evaluations": 8,
                "files_written": files * 8,
                "bytes_written": (20_000 * increments if increments else 200_000) * 8,
            }
            if increments:
                values["solver_increments_median"] = increments
                values["bytes_per_increment"] = 20_000
            for metric, value in values.items():
                rows.append(
                    {
                        "study": "fe_tmpfs", "experiment": experiment, "workload": workload,
                        "tier": "shm", "tier_class": "shm", "host": "h",
                        "point": f"out={with_output}", **params, "repetition": rep,
                        "phase": "measured", "started_at": f"2026-01-01T01:{rep:02d}:00Z",
                        "duration_s": 1.0, "slurm_job_id": "", "metric": metric,
                        "value": value, "unit": "", "status": "ok", "reason": "",
                    }
                )  # fmt: skip
    return rows


def test_fe_proxy_is_compared_per_evaluation():
    frame = pd.DataFrame(
        fe_rows("calculix", "ccx", 6, 0.05, {"frd_every": 0}, increments=10)
        + fe_rows("fe_proxy", "proxy", 10, 0.05, {"frd_every": 0}, increments=10)
    )  # fmt: skip
    (entry,) = fidelity.fidelity(frame)["proxies"]
    assert entry["proxy"] == "fe_proxy" and entry["unit"] == "evaluation"
    assert entry["verdict"] == fidelity.DIFFERS
    assert "fe_proxy writes 10 files per evaluation, calculix 6 on shm" in entry["reasons"][0]
    (cost,) = [r for r in entry["rows"] if r["quantity"] == "I/O cost per increment"]
    assert cost["ratio"] == pytest.approx(1.0) and cost["decision"] == "agrees"


@pytest.mark.parametrize(
    ("proxy_cost", "decision"), [(0.05 * 40 / 46, "agrees"), (0.05, "differs")]
)
def test_fe_io_cost_is_judged_per_increment(proxy_cost, decision):
    """ccx took 46 increments, the proxy 40: the same cost per evaluation is more per increment."""
    real = fe_rows("calculix", "ccx", 8, 0.05, {"frd_every": 0}, increments=46)
    proxy = fe_rows("fe_proxy", "proxy", 8, proxy_cost, {"frd_every": 0}, increments=40)
    (entry,) = fidelity.fidelity(pd.DataFrame(real + proxy))["proxies"]
    (cost,) = [r for r in entry["rows"] if r["quantity"] == "I/O cost per increment"]
    assert cost["ratio"] == pytest.approx(proxy_cost / 40 / (0.05 / 46), rel=1e-3)
    assert cost["decision"] == decision


def test_fe_calls_are_what_the_output_adds_per_increment():
    """ccx opens its libraries at every evaluation, the proxy's workers once: the traced
    baseline (no field output) is subtracted and the rest divided by the increments."""

    def traced(workload, startup, per_increment, increments):
        found = fe_rows(workload, f"{workload}_traced", 8, 0.0, {"frd_every": 0}, increments)
        for r in found:
            writing = r["point"] == "out=True"
            if r["metric"] == "files_written":  # one row per repetition: add the calls there
                opens = startup + (per_increment * increments if writing else 0)
                found.append({**r, "metric": "syscalls_open", "value": opens * 8})
        return found

    frame = pd.DataFrame(
        fe_rows("calculix", "ccx", 8, 0.05, {"frd_every": 0}, increments=46)
        + fe_rows("fe_proxy", "proxy", 8, 0.05 * 40 / 46, {"frd_every": 0}, increments=40)
        + traced("calculix", startup=400, per_increment=2, increments=46)
        + traced("fe_proxy", startup=10, per_increment=2, increments=40)
    )
    (entry,) = fidelity.fidelity(frame)["proxies"]
    (opens,) = [r for r in entry["rows"] if r["quantity"] == "open/create calls per increment"]
    assert (opens["proxy"], opens["real"]) == (2.0, 2.0)
    assert "baseline subtracted" in entry["syscalls"]


@pytest.mark.parametrize(("proxy_cost", "decision"), [(0.000210, "agrees"), (0.000105, "differs")])
def test_a_cost_measured_within_each_job_is_preferred(proxy_cost, decision):
    """paired_baseline: each evaluation against itself without field output, in the same
    job; no baseline point is needed, and the between-points difference is not used."""
    rows = []
    for workload, cost, noise in (("calculix", 0.000200, 1e-6), ("fe_proxy", proxy_cost, 1e-6)):
        found = fe_rows(workload, workload, 8, 0.05, {"frd_every": 0}, increments=40)
        found = [r for r in found if r["point"] == "out=True"]  # no baseline points
        for r in [r for r in found if r["metric"] == "wall_time"]:
            value = cost + noise * r["repetition"]
            found.append({**r, "metric": "output_cost_per_increment", "value": value})
            found.append({**r, "metric": "eval_time_baseline_median", "value": 0.2})
        rows += found
    (entry,) = fidelity.fidelity(pd.DataFrame(rows))["proxies"]
    (cost,) = [r for r in entry["rows"] if r["quantity"] == "I/O cost per increment"]
    assert cost["note"] == "within each run (output_cost_per_increment)"
    assert cost["ratio"] == pytest.approx(proxy_cost / 0.000200, rel=0.02)
    assert cost["decision"] == decision
    # the compute, from each evaluation's paired analysis without field output
    (compute,) = [r for r in entry["rows"] if r["section"] == "compute"]
    assert compute["decision"] == "agrees" and "(eval_time_baseline_median)" in compute["note"]
    assert entry["verdict"] == (fidelity.FAITHFUL if decision == "agrees" else fidelity.DIFFERS)


def test_a_cost_that_differs_says_how_much_of_each_was_in_the_kernel():
    """The proxy formats its output in half ccx's time, and its kernel part (the file
    system's work) is ccx's: the line differs, and says the write path is not why."""
    rows = []
    for workload, cost in (("calculix", 0.000200), ("fe_proxy", 0.000100)):
        found = fe_rows(workload, workload, 8, 0.05, {"frd_every": 0}, increments=40)
        found = [r for r in found if r["point"] == "out=True"]
        for r in [r for r in found if r["metric"] == "wall_time"]:
            wobble = 1e-6 * r["repetition"]
            found.append({**r, "metric": "output_cost_per_increment", "value": cost + wobble})
            found.append({**r, "metric": "output_kernel_cost_per_increment", "value": 20e-6})
            found.append({**r, "metric": "eval_time_baseline_median", "value": 0.2})
        rows += found
    (entry,) = fidelity.fidelity(pd.DataFrame(rows))["proxies"]
    (cost,) = [r for r in entry["rows"] if r["quantity"] == "I/O cost per increment"]
    assert cost["decision"] == fidelity.DIFFERS
    assert cost["explains"] == (
        "per increment: fe_proxy 103 us, 20 us of it in the kernel; "
        "calculix 203 us, 20 us of it in the kernel"
    )
    (shape,) = entry["shapes"]
    assert shape["verdict"] == fidelity.DIFFERS and "20 us of it in the kernel" in shape["why"][0]


@pytest.mark.parametrize(("proxy_time", "decision"), [(0.2, "agrees"), (0.015, "differs")])
def test_fe_compute_is_the_evaluation_without_field_output(proxy_time, decision):
    """The bar's solve alone takes milliseconds where ccx takes 0.2 s."""
    real = fe_rows("calculix", "ccx", 8, 0.05, {"frd_every": 0}, increments=40)
    proxy = fe_rows("fe_proxy", "proxy", 8, 0.05, {"frd_every": 0}, increments=40)
    for r in proxy:
        if r["metric"] == "eval_time_median":
            r["value"] += proxy_time - 0.2
    (entry,) = fidelity.fidelity(pd.DataFrame(real + proxy))["proxies"]
    (line,) = [r for r in entry["rows"] if r["section"] == "compute"]
    assert line["quantity"] == "evaluation time without field output"
    assert line["ratio"] == pytest.approx(proxy_time / 0.2, rel=0.03)
    assert line["decision"] == decision
    assert entry["verdict"] == (fidelity.FAITHFUL if decision == "agrees" else fidelity.DIFFERS)


def test_fe_io_cost_without_increments_is_undecided():
    frame = pd.DataFrame(
        fe_rows("calculix", "ccx", 8, 0.05, {"frd_every": 0})
        + fe_rows("fe_proxy", "proxy", 8, 0.05, {"frd_every": 0}, increments=10)
    )  # fmt: skip
    (entry,) = fidelity.fidelity(frame)["proxies"]
    assert not [r for r in entry["rows"] if r["quantity"].startswith("I/O cost")]
    assert entry["verdict"] == fidelity.WITHIN_NOISE
    assert entry["reasons"] == [
        "I/O cost per increment on shm: no solver_increments_median measured"
    ]


@pytest.mark.parametrize(("proxy_bytes", "decision"), [(20_000, "agrees"), (15_000, "differs")])
def test_fe_bytes_are_judged_per_increment_when_the_solvers_take_different_counts(
    proxy_bytes, decision
):
    """ccx cut back to 46 increments where the proxy took 40: bytes per evaluation differ by
    the count, which is each solver's convergence; the output per increment is what counts."""
    real = fe_rows("calculix", "ccx", 8, 0.05, {"frd_every": 0}, increments=46)
    same_per_increment = 0.05 * 40 / 46
    proxy = fe_rows("fe_proxy", "proxy", 8, same_per_increment, {"frd_every": 0}, increments=40)
    for row in proxy:
        if row["metric"] == "bytes_written":
            row["value"] = proxy_bytes * 40 * 8
        if row["metric"] == "bytes_per_increment":
            row["value"] = proxy_bytes
    (entry,) = fidelity.fidelity(pd.DataFrame(real + proxy))["proxies"]
    rows = {r["quantity"]: r for r in entry["rows"] if r["section"] == "output"}
    assert rows["increments per evaluation"]["text"]["ratio"] == f"{40 / 46:.3f}"
    assert rows["bytes per evaluation"]["decision"] == ""  # shown, not judged
    assert rows["bytes per increment"]["decision"] == decision
    assert rows["bytes per increment"]["ratio"] == pytest.approx(proxy_bytes / 20_000)
    assert entry["verdict"] == (fidelity.FAITHFUL if decision == "agrees" else fidelity.DIFFERS)


def test_fe_bytes_per_increment_are_each_runs_own_not_over_the_median_increments():
    """ccx cut back on one individual of eight (50 increments, the others 10): its bytes over
    the median evaluation's 10 increments come to 1.5x what an increment writes. Judged on
    each run's bytes over its own increments, a proxy writing as much per increment agrees."""
    real = fe_rows("calculix", "ccx", 8, 0.05, {"frd_every": 0}, increments=10)
    for row in real:
        if row["metric"] == "bytes_written":
            row["value"] = 20_000 * (7 * 10 + 50)
    proxy = fe_rows("fe_proxy", "proxy", 8, 0.05, {"frd_every": 0}, increments=10)
    (entry,) = fidelity.fidelity(pd.DataFrame(real + proxy))["proxies"]
    rows = {r["quantity"]: r for r in entry["rows"] if r["section"] == "output"}
    assert rows["bytes per evaluation"]["ratio"] == pytest.approx(80 / 120)
    assert rows["bytes per increment"]["ratio"] == pytest.approx(1.0)
    assert rows["bytes per increment"]["decision"] == "agrees"
    without = [r for r in real + proxy if r["metric"] != "bytes_per_increment"]
    (entry,) = fidelity.fidelity(pd.DataFrame(without))["proxies"]
    (line,) = [r for r in entry["rows"] if r["quantity"] == "bytes per increment"]
    assert line["decision"] == "" and "no bytes_per_increment measured" in line["note"]
    assert line["ratio"] == pytest.approx(80 / 120)  # the 1.5x of the median's increments


def test_the_command_line_writes_json_the_report_can_render(tmp_path):
    frame = study(files=FILES["cfd_proxy"])
    results, summary, out = tmp_path / "results.csv", tmp_path / "summary.csv", tmp_path / "f.json"
    frame.to_csv(results, index=False)
    pd.DataFrame(
        [{"workload": "openfoam", "experiment": "x", "tier": "disk", "point": "p",
          "metric": "status", "status": "failed", "reason": "simpleFoam exited with 1"}]
    ).to_csv(summary, index=False)  # fmt: skip
    assert (
        fidelity.main(["--results", str(results), "--summary", str(summary), "--out", str(out)])
        == 0
    )
    data = json.loads(out.read_text())
    (entry,) = data["proxies"]
    assert entry["verdict"] == fidelity.DIFFERS
    assert [c["key"] for c in entry["columns"]][:3] == ["quantity", "tier", "shape"]
    assert all(set(r["text"]) == {"proxy", "real", "ratio", "interval"} for r in entry["rows"])
    assert data["failed_points"][0]["reason"] == "simpleFoam exited with 1"


def test_points_without_a_baseline_are_shown_and_the_others_decide():
    frame = study(cost_factor=1.03, bytes_factor=0.97)
    more = pd.DataFrame(
        cfd_rows("cfd_proxy", "main", files=9, cells=5000)
        + cfd_rows("openfoam", "main_real", files=9, cells=5000)
    )
    more = more[more["write_interval"].astype(str) != "none"]
    entry = cfd_verdict(pd.concat([frame, more]))
    assert entry["verdict"] == fidelity.FAITHFUL, entry["reasons"]
    unjudged = [r for r in entry["rows"] if r["note"] == "no baseline point of cfd_proxy"]
    assert len(unjudged) == 2
    only = cfd_verdict(more)
    assert only["verdict"] == fidelity.WITHIN_NOISE
    assert "no compared point has a no-output baseline" in only["reasons"][0]


def fidelity_section(tmp_path, found: dict) -> str:
    """The report's fidelity section, from its heading on, for a study with ``found``."""
    from conftest import study_for_report
    from tierbench import report

    study_dir = tmp_path / "m" / "s"
    frame = pd.DataFrame(
        [{"study": "s", "experiment": "e", "workload": "fio", "tier": t, "tier_class": t,
          "point": "p", "host": "h", "metric": "write_bandwidth", "unit": "MB/s",
          "value": v, "repetition": r, "phase": "measured", "status": "ok", "reason": "",
          "started_at": "t", "duration_s": 1}
         for t, base in (("disk", 100), ("shm", 300)) for r, v in enumerate([base, base + 1], 1)]
    )  # fmt: skip
    study_for_report(study_dir, frame, TIERS)
    (study_dir / "fidelity.json").write_text(json.dumps(found))
    html = report.render(tmp_path / "m", ["s"], {"s": "A study"})
    return html[html.index("Does the proxy behave") :]


def test_the_report_groups_the_table_by_tier_and_shape_with_a_readable_badge(tmp_path):
    """Each tier and shape heads its rows once (no repeated shape column), a verdict of
    two words gets its colour, and an interval cell is numbers, never a sentence."""
    noisy = fidelity.fidelity(study(cost_factor=1.03, noise=0.15, seed=3), [])
    section = fidelity_section(tmp_path, noisy)
    section = section[: section.index("</table>")]
    assert '<span class="badge within_noise">within noise</span>' in section
    headers = section.count('<tr class="group">')
    assert headers >= len(TIERS) and headers < section.count("<tr>")
    assert "<th>Shape</th>" not in section and "<th>Tier</th>" not in section
    cells = [c.split("</td>")[0] for c in section.split('<td class="num">')[1:]]
    assert cells and all(len(c) < 20 for c in cells), cells


def sweep(costs: dict[int, float]) -> pd.DataFrame:
    """Proxy and application at several cells per rank, the proxy's I/O cost scaled per shape."""
    rows = []
    for cells, factor in costs.items():
        rows += cfd_rows("openfoam", f"real_{cells}", files=FILES["openfoam"], seed=1, cells=cells)
        rows += cfd_rows(
            "cfd_proxy", f"proxy_{cells}", files=FILES["openfoam"], cost_factor=factor, cells=cells
        )
    return pd.DataFrame(rows)


def test_each_shape_of_a_sweep_gets_its_own_verdict():
    entry = cfd_verdict(sweep({1000: 1.02, 10000: 0.98, 100000: 2.0}))
    assert entry["varying"] == ["cells_per_rank"]
    verdicts = {s["params"]["cells_per_rank"]: s["verdict"] for s in entry["shapes"]}
    assert verdicts == {"1000": fidelity.FAITHFUL, "10000": fidelity.FAITHFUL,
                        "100000": fidelity.DIFFERS}  # fmt: skip
    (large,) = [s for s in entry["shapes"] if s["verdict"] == fidelity.DIFFERS]
    assert large["shape"] == "cells_per_rank=100000"
    (why,) = [w for w in large["why"] if w.startswith("I/O cost per write on disk")]
    assert why == "I/O cost per write on disk: proxy / real 1.995 [1.98, 2.01]"


def test_the_report_of_a_sweep_counts_its_shapes_and_leaves_their_lines_to_the_table(tmp_path):
    """A sweep's reasons, joined, made a paragraph of fifteen lines above the shape table
    that says the same one to a row; the paragraph now counts the shapes' verdicts."""
    found = fidelity.fidelity(sweep({1000: 1.02, 10000: 2.0, 100000: 2.0}), [])
    section = fidelity_section(tmp_path, found)
    summary = section[section.index("<p><span") : section.index("</p>", section.index("<p><span"))]
    assert "of 3 shapes, 1 faithful, 2 differ, 0 within noise" in summary, summary
    assert "I/O cost per write on disk" not in summary
    table = section[section.index('<table class="fidelity shapes">') :]
    assert table.count("I/O cost per write on disk: proxy / real") == 2


def test_a_cost_taken_within_each_run_says_what_share_of_a_step_a_write_is():
    """Why a write's cost stays undecided: a few per cent of a step hide in its spread. Said
    only of a cost taken within each run; one taken between runs is mostly their drift."""
    rows = cfd_rows("openfoam", "real", files=FILES["openfoam"], seed=1)
    rows += cfd_rows("cfd_proxy", "proxy", files=FILES["openfoam"], cost_factor=2.0)
    between = cfd_verdict(pd.DataFrame(rows))
    for r in [r for r in rows if r["metric"] == "time_per_step" and r["write_interval"] == 1]:
        cost = REAL_COST[r["tier"]] * (2.0 if r["workload"] == "cfd_proxy" else 1.0)
        rows.append({**r, "metric": "write_cost", "value": cost * (0.97 + 0.01 * r["repetition"])})
    within = cfd_verdict(pd.DataFrame(rows))
    for entry, share in ((between, False), (within, True)):
        (shape,) = entry["shapes"]
        (why,) = [w for w in shape["why"] if w.startswith("I/O cost per write on disk")]
        assert why.endswith("(a write costs openfoam 30 % of its step without writes)") is share
    (cost,) = [r for r in within["rows"] if r["quantity"] == "I/O cost per write"
               and r["tier"] == "shm"]  # fmt: skip
    share = re.search(
        r"a write costs openfoam ([0-9.]+) % of its step without writes$", cost["note"]
    )
    assert float(share.group(1)) == pytest.approx(10, abs=0.1), cost["note"]


def test_a_write_many_times_a_step_is_said_in_plain_digits():
    """GlusterFS writes cost simpleFoam twelve steps: '1,200 %', not '1.2e+03 %'."""
    rows = cfd_rows("openfoam", "real", files=FILES["openfoam"], seed=1)
    rows += cfd_rows("cfd_proxy", "proxy", files=FILES["openfoam"])
    for r in [r for r in rows if r["metric"] == "time_per_step" and r["write_interval"] == 1]:
        rows.append({**r, "metric": "write_cost", "value": 1.2 * (0.97 + 0.01 * r["repetition"])})
    entry = cfd_verdict(pd.DataFrame(rows))
    notes = [r["note"] for r in entry["rows"] if r["quantity"] == "I/O cost per write"]
    told = [re.search(r"a write costs openfoam (1,[12]\d\d) % of its step", n) for n in notes]
    assert notes and all(told) and not any("e+" in n for n in notes), notes


@pytest.mark.parametrize(
    ("error", "decision"), [(None, fidelity.DIFFERS), (0.015, fidelity.WITHIN_NOISE)]
)
def test_a_cost_each_run_knows_only_roughly_is_not_decided_on_its_runs_alone(error, decision):
    """Each run's cost is fitted from its own steps, with a standard error (write_cost_se):
    the proxy's runs, all above the application's, 'differ' on the bare values, and do
    not within errors as large as the costs; the line says how many more writes would do."""
    rows = cfd_rows("openfoam", "real", files=FILES["openfoam"], seed=1)
    rows += cfd_rows("cfd_proxy", "proxy", files=FILES["openfoam"])
    for r in [r for r in rows if r["metric"] == "time_per_step" and r["write_interval"] == 1]:
        cost = REAL_COST[r["tier"]] * (2.0 if r["workload"] == "cfd_proxy" else 1.0)
        rows.append({**r, "metric": "write_cost", "value": cost * (0.9 + 0.05 * r["repetition"])})
        if error is not None:
            rows.append({**r, "metric": "write_cost_se", "value": error})
    entry = cfd_verdict(pd.DataFrame(rows))
    (line,) = [r for r in entry["rows"] if r["quantity"] == "I/O cost per write"
               and r["tier"] == "shm"]  # fmt: skip
    assert line["decision"] == decision, line
    told = re.search(
        r"standard error of one run of openfoam's cost 15 ms; ([0-9,]+)x the writes a run "
        r"would bring it to 5 %",
        line["explains"],
    )
    assert bool(told) is (error is not None), line["explains"]
    if told:  # (15 ms / (5 % of the median cost, 10.5 ms)) ** 2
        assert int(told.group(1).replace(",", "")) == round((0.015 / 0.000525) ** 2)


def costed_sweep(proxy: tuple[float, float], real=(0.002, 0.001)) -> pd.DataFrame:
    """Cells per rank over two decades, 200 B a cell, each workload's cost per write (within
    each run) a fixed part plus a part per MB: (s, s per MB)."""
    rows = []
    for cells in (1000, 10000, 100000):
        per_write = 200 * cells * RANKS
        for workload, (fixed, per_mb) in (("openfoam", real), ("cfd_proxy", proxy)):
            made = cfd_rows(workload, f"{workload}_{cells}", files=FILES["openfoam"], cells=cells)
            for r in made:
                if r["metric"] == "bytes_written" and r["write_interval"] == 1:
                    r["value"] = per_write * STEPS
            cost = fixed + per_mb * per_write / 1e6
            rows += made + [
                {**r, "metric": "write_cost", "value": cost * (1 + 0.01 * (r["repetition"] - 3))}
                for r in made
                if r["metric"] == "time_per_step" and r["write_interval"] == 1
            ]
    return pd.DataFrame(rows)


@pytest.mark.parametrize(
    "proxy, off, fixed, per_mb",
    [((0.004, 0.001), "fixed part", 2.0, 1.0), ((0.002, 0.0015), "part per MB", 1.0, 1.5)],
)
def test_a_cost_per_write_that_differs_over_sizes_says_which_part_is_off(proxy, off, fixed, per_mb):
    """A proxy whose files cost twice the application's differs most at few cells per rank;
    one whose bytes cost 1.5x, at many. Fitted over the sizes, the two parts tell which."""
    entry = cfd_verdict(costed_sweep(proxy))
    fitted = [r for r in entry["rows"] if r["shape"].startswith("fitted over cells_per_rank")]
    assert {(r["tier"], r["quantity"]) for r in fitted} == {
        (tier, quantity)
        for tier in TIERS
        for quantity in ("I/O cost per write: its fixed part", "I/O cost per MB written")
    }
    for r in fitted:
        expected = fixed if "fixed" in r["quantity"] else per_mb
        assert r["ratio"] == pytest.approx(expected, rel=0.01) and not r["decision"], r
        assert r["low"] <= r["ratio"] <= r["high"] and r["params"] == {}
    (disk,) = [r for r in fitted if r["tier"] == "disk" and "fixed" in r["quantity"]]
    assert disk["proxy"] == pytest.approx(proxy[0], rel=0.01), disk
    assert disk["real"] == pytest.approx(0.002, rel=0.01), disk
    assert len(entry["shapes"]) == 3  # the fitted lines are no shape of their own
    differs = [s for s in entry["shapes"] if s["verdict"] == fidelity.DIFFERS]
    assert differs
    for shape in differs:
        (why,) = [w for w in shape["why"] if w.startswith("I/O cost per write on disk")]
        told = re.search(rf"{off} proxy / real ([0-9.]+) \[[0-9., ]+\]: differs", why)
        assert told and float(told.group(1)) == pytest.approx(max(fixed, per_mb), rel=0.01), why
        assert re.search(r"proxy / real 1.000 \[[0-9., ]+\]: agrees", why), why


def test_a_fit_that_cannot_tell_its_parts_apart_explains_nothing():
    """Costs of a few per cent of a step scatter more than two parts can be fitted to: the
    fitted lines are shown, and no cost line is told that either part is off."""
    frame = costed_sweep((0.004, 0.001))
    noisy = frame["metric"] == "write_cost"
    scatter = np.random.default_rng(3).uniform(0.2, 3.0, noisy.sum())
    frame.loc[noisy, "value"] = frame.loc[noisy, "value"] * scatter
    entry = cfd_verdict(frame)
    fitted = [r for r in entry["rows"] if r["shape"].startswith("fitted over")]
    assert len(fitted) == 4 and not any(r["decision"] for r in fitted)
    cost_lines = [r for r in entry["rows"] if r["quantity"] == "I/O cost per write"]
    assert cost_lines and not any("fitted over" in r["explains"] for r in cost_lines)


def test_a_cost_that_came_out_below_zero_makes_no_ratio():
    """Steps with writes faster than those without: the write is below the noise. A ratio of
    that (-8.4 in one sweep) reads as a finding; the line says what happened instead."""
    rows = cfd_rows("openfoam", "real", files=FILES["openfoam"], seed=1)
    rows += cfd_rows("cfd_proxy", "proxy", files=FILES["openfoam"])
    for r in [r for r in rows if r["metric"] == "time_per_step" and r["write_interval"] == 1]:
        below = r["workload"] == "openfoam" and r["tier"] == "disk"
        cost = -0.0003 if below else REAL_COST[r["tier"]]
        rows.append({**r, "metric": "write_cost", "value": cost * (0.97 + 0.01 * r["repetition"])})
    entry = cfd_verdict(pd.DataFrame(rows))
    (line,) = [r for r in entry["rows"] if r["quantity"] == "I/O cost per write"
               and r["tier"] == "disk"]  # fmt: skip
    assert line["ratio"] is None and line["text"]["ratio"] == "n/a", line
    (shape,) = entry["shapes"]
    assert "I/O cost per write on disk: a median is zero or negative" in shape["why"], shape


def test_a_cost_whose_interval_reaches_zero_is_within_noise():
    """simpleFoam's write on /dev/shm, 4 % of a step: its repetitions' costs came out on both
    sides of zero, and an interval of [-4.79, 0.493] lay wholly below the band, 'differs'."""
    rows = cfd_rows("openfoam", "real", files=FILES["openfoam"], seed=1)
    rows += cfd_rows("cfd_proxy", "proxy", files=FILES["openfoam"])
    scattered = [0.003, -0.004, 0.0025, 0.002, -0.001]
    for r in [r for r in rows if r["metric"] == "time_per_step" and r["write_interval"] == 1]:
        real = r["workload"] == "openfoam"
        cost = scattered[r["repetition"] - 1] if real else 0.001 * (0.97 + 0.01 * r["repetition"])
        rows.append({**r, "metric": "write_cost", "value": cost})
    entry = cfd_verdict(pd.DataFrame(rows))
    costs = [r for r in entry["rows"] if r["quantity"] == "I/O cost per write"]
    assert costs and all(r["low"] <= 0 < r["high"] < 0.9 for r in costs), costs
    assert {r["decision"] for r in costs} == {fidelity.WITHIN_NOISE}
    assert entry["verdict"] == fidelity.WITHIN_NOISE, entry["reasons"]
    assert any("reaches zero: below the noise" in r for r in entry["reasons"]), entry["reasons"]


def test_a_shape_between_two_faithful_ones_is_inside_and_one_beyond_them_is_not():
    entry = cfd_verdict(sweep({1000: 1.02, 10000: 0.98, 100000: 2.0}))
    shape = {"ranks": RANKS, "write_interval": 1, "file_handler": "uncollated", "ensemble": 1,
             "write_format": "binary", "purge_write": 1}  # fmt: skip
    assert fidelity.outside_region(entry, {**shape, "cells_per_rank": 10000}) is None
    assert fidelity.outside_region(entry, {**shape, "cells_per_rank": 4000}) is None
    beyond = fidelity.outside_region(entry, {**shape, "cells_per_rank": 125000})
    assert "at the nearest compared shape (cells_per_rank=100000) it differed" in beyond
    assert "this point has cells_per_rank=125000" in beyond
    # between a faithful and a differing shape is not covered either
    assert fidelity.outside_region(entry, {**shape, "cells_per_rank": 50000}) is not None
    # another parameter than the sweep's: not covered, whatever the cells
    other = fidelity.outside_region(entry, {**shape, "cells_per_rank": 10000, "ensemble": 2})
    assert "ensemble=2" in other


def test_an_undecided_shape_is_within_noise_and_not_part_of_the_region():
    rows = sweep({1000: 1.02}).to_dict("records")
    rows += cfd_rows("openfoam", "real_9000", files=FILES["openfoam"], seed=1, cells=9000)
    rows += cfd_rows("cfd_proxy", "proxy_9000", files=FILES["openfoam"], cost_factor=1.05,
                     cells=9000, noise=0.2, seed=4)  # fmt: skip
    entry = cfd_verdict(pd.DataFrame(rows))
    verdicts = {s["params"]["cells_per_rank"]: s["verdict"] for s in entry["shapes"]}
    assert verdicts == {"1000": fidelity.FAITHFUL, "9000": fidelity.WITHIN_NOISE}
    shape = {"ranks": RANKS, "write_interval": 1, "file_handler": "uncollated", "ensemble": 1,
             "write_format": "binary", "purge_write": 1}  # fmt: skip
    assert fidelity.outside_region(entry, {**shape, "cells_per_rank": 5000}) is not None


@pytest.mark.parametrize("scale", ["smoke", "default", "full"])
def test_the_sweep_study_pairs_every_proxy_shape_with_the_application(scale):
    """config/studies/proxy_fidelity.yaml: each shape the proxy runs, the application runs too
    (else fidelity compares nothing there), one factor at a time around the centre."""
    import yaml
    from conftest import REPO
    from tierbench import matrix

    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    study = matrix.load_study(REPO / "config/studies/proxy_fidelity.yaml", config)
    tiers = matrix.resolve_tiers(config, REPO / "config/hardware", "/tmp")
    points = matrix.expand_study(study, tiers, scale)
    for pair in fidelity.pairs():

        def shapes(workload, pair=pair):
            return {
                (p.tier, tuple(param_text(p.params.get(k)) for k in pair.shape))
                for p in points
                if p.workload == workload
            }

        proxy, real = shapes(pair.proxy), shapes(pair.real)
        assert proxy and proxy == real, (pair.proxy, proxy ^ real)
    proxies = [p for p in points if p.workload == "cfd_proxy"]
    writing = [p for p in proxies if p.params["write_interval"] != "none"]
    shape = workloads.get("cfd_proxy").stands_for.shape
    cfd = {tuple(param_text(p.params.get(k)) for k in shape) for p in writing}
    # the centre, two cell counts, one rank (and 4 at full), every step, ascii, collated
    assert len(cfd) == (8 if scale == "full" else 7)


def ensemble_rows(workload: str, experiment: str, slowdown: float, seed: int) -> list[dict]:
    """An ensemble of 2 without writes, each job timing its member alone first; the
    proxy's points write document 001's file set, as in cfd_dcpmm."""
    rng = np.random.default_rng(seed)
    params = {"ranks": 1, "cells_per_rank": 1000, "steps": STEPS, "write_interval": "none",
              "file_handler": "uncollated", "ensemble": 2, "write_format": "binary",
              "purge_write": 1}  # fmt: skip
    if workload == "cfd_proxy":
        params["file_set"] = "document_001"
    rows = []
    for tier, tier_class in TIERS.items():
        for rep in range(1, REPS + 1):
            alone = BASE_TIME * (1 + 0.05 * rng.standard_normal())  # the machine drifts
            whole = alone * slowdown * (1 + 0.005 * rng.standard_normal())
            for metric, value in (("time_per_step", whole), ("time_per_step_alone", alone)):
                rows.append(
                    {
                        "study": "cfd_dcpmm", "experiment": experiment, "workload": workload,
                        "tier": tier, "tier_class": tier_class, "host": "h",
                        "point": "ensemble=2+write_interval=none", **params, "repetition": rep,
                        "phase": "measured", "started_at": f"2026-01-01T01:{rep:02d}:00Z",
                        "duration_s": 1.0, "slurm_job_id": "", "metric": metric, "value": value,
                        "unit": "s", "status": "ok", "reason": "",
                    }
                )  # fmt: skip
    return rows


@pytest.mark.parametrize(("proxy_slowdown", "decision"), [(1.2, "agrees"), (1.0, "differs")])
def test_an_ensemble_compute_slowdown_is_compared_each_job_over_its_member_alone(
    proxy_slowdown, decision
):
    """simpleFoam's members slowed each other 1.11-1.20x without writes on the cluster on one
    machine, the proxy's 0.98-1.16x: the fast tier of an ensemble lesson is mostly that."""
    rows = study().to_dict("records")
    rows += ensemble_rows("openfoam", "real_single_vs_ensemble", 1.2, seed=7)
    rows += ensemble_rows("cfd_proxy", "single_vs_ensemble", proxy_slowdown, seed=8)
    entry = cfd_verdict(pd.DataFrame(rows))
    found = [r for r in entry["rows"] if r["quantity"] == "compute slowdown in an ensemble"]
    assert sorted(r["tier"] for r in found) == ["disk", "shm"]
    assert {r["decision"] for r in found} == {decision}, found
    assert all(r["real"] == pytest.approx(1.2, rel=0.01) for r in found)
    assert all(r["ratio"] == pytest.approx(proxy_slowdown / 1.2, rel=0.02) for r in found)
    shape = {"ranks": 1, "cells_per_rank": 1000, "file_handler": "uncollated",
             "write_format": "binary", "purge_write": 1}  # fmt: skip
    lesson_point = fidelity.outside_region(entry, {**shape, "write_interval": 1, "ensemble": 2})
    nearest = "nearest compared shape (ranks=1, write_interval=none, ensemble=2)"
    assert nearest in lesson_point and "this point has write_interval=1" in lesson_point
    if decision == "differs":
        assert entry["verdict"] == fidelity.DIFFERS
        assert "compute slowdown in an ensemble on shm: proxy / real 0.83" in lesson_point
        alone = r"takes (1|0\.99\d)x its time alone for cfd_proxy, 1\.2x for openfoam"
        assert re.search(alone, lesson_point), lesson_point
    # a single run two parameters away from each shape is nearer the one that writes
    single = fidelity.outside_region(entry, {**shape, "write_interval": 5, "ensemble": 1})
    assert "this point has ranks=1, write_interval=5" in single
