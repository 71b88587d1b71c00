"""calculix: reading ccx's output and failures, and the real solver on two tiers."""

import math
from pathlib import Path

import numpy as np
import pytest
from conftest import job_spec
from tierbench import matrix
from tierbench.errors import ConfigError, PointFailed
from tierbench.runner import run_job
from tierbench.workloads import get
from tierbench.workloads.fe import calculix, fe_deck, fe_optimisation

# ccx 2.20's job.dat of a 1-element bar in 3 increments (captured as written)
DAT = (
    "\n total force (fx,fy,fz) for set LOAD and time  0.3333333E+00\n"
    "\n        2.704580E+03 -7.896461E-15  2.268533E-13\n"
    "\n displacements (vx,vy,vz) for set TIP and time  0.3333333E+00\n"
    "\n         7  1.333333E+00 -1.781269E-02 -1.781269E-02\n"
    "\n total force (fx,fy,fz) for set LOAD and time  0.6666667E+00\n"
    "\n        2.704574E+03  1.166931E-13  4.505726E-12\n"
    "\n displacements (vx,vy,vz) for set TIP and time  0.6666667E+00\n"
    "\n         7  1.333333E+00 -1.781270E-02 -1.781270E-02\n"
    "\n total force (fx,fy,fz) for set LOAD and time  0.1000000E+01\n"
    "\n       -3.106925E+03  2.042810E-14 -3.050338E-13\n"
    "\n displacements (vx,vy,vz) for set TIP and time  0.1000000E+01\n"
    "\n         7  3.999467E-12 -9.789666E-04 -9.789666E-04\n"
)
# ccx's standard output around its *ERROR lines (exit status 201), as captured
DIVERGED = "\n".join(
    [
        " iteration 4",
        "",
        " no convergence",
        "",
        " *ERROR: solution seems to diverge; please try ",  # ccx's trailing blank
        " automatic incrementation; program stops",
        " best solution and residuals are in the frd file",
        "",
    ]
)
TOO_SMALL = "\n".join(
    [
        "  the increment is reattempted",
        "",
        "",
        " *ERROR: increment size smaller than minimum",
        " best solution and residuals are in the frd file",
        "",
    ]
)
NO_MATERIAL = "\n".join(
    [
        " *INFO reading *STEP: nonlinear geometric",
        " *ERROR reading *SOLID SECTION: nonexistent material",
        "   ",  # blanks only: the message ends here
        " *ERROR reading *SOLID SECTION. Card image:",
        "        *SOLIDSECTION,ELSET=EALL,MATERIAL=NOPE",
        "",
        " *ERROR in calinput: no material was assigned",
        "        to element            1",
    ]
)

TINY = {
    "cores": 1,
    "population": 4,
    "generations": 1,
    "elements": 1,
    "increments": 10,
}


# ------------------------------------------------------------------ reading ccx's output


def test_dat_gives_the_force_displacement_curve():
    curve = calculix.read_curve(DAT)
    assert curve.time == pytest.approx([1 / 3, 2 / 3, 1.0], abs=1e-6)
    assert curve.force == pytest.approx([2704.580, 2704.574, -3106.925])
    assert curve.displacement == pytest.approx([1.333333, 1.333333, 3.999467e-12])


@pytest.mark.parametrize(
    ("cut", "reason"),
    [
        (DAT.rindex("-3.106925E+03") + 5, "no data after 'total force"),
        (DAT.rindex(" total force"), "ends at 0.666667, not 1"),
        (DAT.rindex(" displacements"), "3 force but 2 displacement blocks"),
        (0, "holds no force output"),
    ],
)
def test_truncated_dat_is_a_failure_never_a_curve(cut, reason):
    with pytest.raises(PointFailed, match=reason):
        calculix.read_curve(DAT[:cut])


@pytest.mark.parametrize(
    ("returncode", "log", "reason"),
    [
        (
            201,
            DIVERGED,
            "ccx: *ERROR: solution seems to diverge; please try automatic incrementation;",
        ),
        (201, TOO_SMALL, "ccx: *ERROR: increment size smaller than minimum best solution"),
        (201, NO_MATERIAL, "ccx: *ERROR reading *SOLID SECTION: nonexistent material"),
        (201, "no error text\n", "ccx exited with status 201 without an *ERROR message"),
        (-9, "", "ccx was killed by signal 9"),
    ],
)
def test_solver_failure_is_one_line(returncode, log, reason):
    message = calculix.solver_failure(returncode, log)
    assert message.startswith(reason) and "\n" not in message
    run = calculix.Run(returncode=returncode, log=log, dat=DAT)
    with pytest.raises(PointFailed, match="^ccx"):
        calculix.curve_of(run)


def test_a_clean_run_is_read_and_a_missing_dat_fails():
    assert calculix.solver_failure(0, " Job finished\n") is None
    assert len(calculix.curve_of(calculix.Run(returncode=0, dat=DAT)).force) == 3
    with pytest.raises(PointFailed, match="ccx wrote no job.dat"):
        calculix.curve_of(calculix.Run(returncode=0, dat=None))


def test_a_cut_back_curve_is_scored_on_the_increment_grid():
    # ccx cut the second of 4 increments in two: 5 points at irregular times
    curve = calculix.Curve(
        time=np.array([0.25, 0.375, 0.5, 0.75, 1.0]),
        displacement=np.zeros(5),
        force=np.array([10.0, 15.0, 20.0, 10.0, 0.0]),
    )
    assert calculix.on_grid(curve, 4) == pytest.approx([10.0, 20.0, 10.0, 0.0])
    assert calculix.on_grid(curve, 8)[0] == pytest.approx(5.0)  # from zero force at time 0


# ------------------------------------------------------------------ parameters


def test_registered_with_its_solver_and_schema_defaults():
    workload = get("calculix")
    assert workload.family == "fe" and workload.env == "calculix"
    assert [(t.command, t.package) for t in workload.tools] == [("ccx", "calculix-ccx")]
    params = matrix.check_point("calculix", {"cores": 2}, "t.calculix[p]")
    assert params["population"] == 30 and params["generations"] == 2 and params["elite"] == 2
    assert workload.estimate("threads", params) == 2
    assert (Path(matrix.__file__).parents[2] / "envs/calculix.yaml").exists()


def test_elite_must_be_below_population():
    """The one rule the schema cannot state, checked by the workload itself."""
    with pytest.raises(ValueError, match="elite must be smaller than population"):
        calculix.check_params(matrix.complete("calculix", {**TINY, "elite": 4}))
    calculix.check_params(matrix.complete("calculix", {**TINY, "elite": 3}))


def test_settings_carry_every_parameter_to_the_run():
    """Each schema parameter reaches the Settings it names (the GA's seed included)."""
    config = calculix.settings({**TINY, "seed": 7, "elite": 1, "frd_every": 3})
    assert config.ga == calculix.ga.Settings(population=4, generations=1, elite=1, seed=7)
    assert config.model.frd_every == 3 and config.model.elements == TINY["elements"]


@pytest.mark.parametrize(
    "bad",
    [{"population": 1}, {"elite": 4}, {"elements": 0}, {"frd_every": -1}, {"frd_fields": "all"},
     {"solver_log": "syslog"}, {"max_strain": 0}, {"increments": 0}, {"fsync": "none"}],
)  # fmt: skip
def test_bad_parameters_stop_the_expansion(bad):
    with pytest.raises(ConfigError) as error:
        matrix.check_point("calculix", {**TINY, **bad}, "t.calculix[p]")
    assert next(iter(bad)) in str(error.value)


def test_planned_bytes_grow_with_workers_model_and_output():
    one = calculix.planned_bytes({"cores": 1})
    assert calculix.planned_bytes({"cores": 3}) == 3 * one
    assert calculix.planned_bytes({"cores": 1, "elements": 100}) > one
    assert calculix.planned_bytes({"cores": 1, "frd_every": 0}) < one
    assert calculix.planned_bytes({"cores": 1, "frd_fields": "nodal"}) < one


# ------------------------------------------------------------------ the real solver


def test_a_failing_ccx_is_a_failed_evaluation_and_its_folder_goes(ccx, tmp_path, monkeypatch):
    model = fe_deck.Model(elements=1, increments=4)
    calculix.init_worker(model, np.ones(4), "file")
    good = fe_deck.deck(model, fe_optimisation.TRUTH)
    broken = good.replace("MATERIAL=FIT\n*AMP", "MATERIAL=X\n*AMP")
    monkeypatch.setattr(fe_deck, "deck", lambda *args: broken)
    task = {"folder": str(tmp_path / "g01-e001"), "label": "g01-e001", "parameters": {}}
    record = calculix.evaluate(task)
    assert not record["ok"] and record["misfit"] == math.inf
    assert record["error"] == "ccx: *ERROR reading *SOLID SECTION: nonexistent material"
    assert {"job.inp", "job.log", "job.dat", "job.sta"} <= set(record["file_sizes"])
    assert record["solver_time"] > 0 and record["fs_time"] > 0
    assert list(tmp_path.iterdir()) == []


def test_an_evaluation_with_the_true_parameters_fits_exactly(ccx, tmp_path):
    model = fe_deck.Model(elements=2, increments=6)
    config = calculix.settings({**TINY, "elements": 2, "increments": 6})
    target = calculix.target_curve(config, tmp_path)
    calculix.init_worker(model, target, "pipe")
    truth = {n: getattr(fe_optimisation.TRUTH, n) for n in fe_optimisation.BOUNDS}
    exact = calculix.evaluate({"folder": str(tmp_path / "a"), "label": "a", "parameters": truth})
    assert exact["ok"] and exact["misfit"] == pytest.approx(0.0, abs=1e-9)
    assert "job.log" not in exact["file_sizes"]  # pipe: the log stays in memory
    softer = calculix.evaluate(
        {"folder": str(tmp_path / "b"), "label": "b", "parameters": {**truth, "sigma_y": 200.0}}
    )
    assert softer["ok"] and softer["misfit"] > 1.0
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("tier", ["disk", "shm"])
def test_the_real_solver_on_a_tier(ccx, tmp_path, tier):
    path = {"disk": tmp_path / "disk", "shm": Path("/dev/shm")}[tier]
    if not path.exists():
        path.mkdir()
    if not path.is_dir():
        pytest.skip(f"{path} does not exist here")

    def ours():  # /dev/shm is shared: other tests' run folders and MPI segments come and go
        return {p for p in path.iterdir() if p.name.startswith("tierbench-real_solver-")}

    before = ours()
    cores = min(2, fe_optimisation.available_cpus())
    params = {**TINY, "cores": cores}
    spec = job_spec("calculix", path, params, tier=tier, experiment="real_solver")
    record = run_job(spec, calculix.run)
    metrics = {m["metric"]: m for m in record["metrics"]}
    assert metrics["wall_time"]["status"] == "ok", metrics
    assert metrics["wall_time"]["unit"] == "s" and metrics["wall_time"]["value"] > 0
    assert metrics["evaluations"]["value"] == 4 and metrics["failed_evaluations"]["value"] == 0
    for name in ("eval_time_median", "eval_solver_time_median", "eval_fs_time_median"):
        assert metrics[name]["unit"] == "s" and metrics[name]["value"] > 0
    assert metrics["eval_solver_time_median"]["value"] < metrics["eval_time_median"]["value"]
    files = record["extra"]["evaluation_files"]
    assert {"job.inp", "job.dat", "job.frd", "job.sta", "job.cvg", "job.log"} <= set(files)
    assert files["job.frd"] > files["job.dat"] > 0
    assert metrics["files_per_evaluation"]["value"] == len(files)
    assert metrics["bytes_per_evaluation"]["value"] >= sum(files.values()) * 0.5
    assert metrics["bytes_written"]["value"] >= 4 * min(files.values())
    assert metrics["solver_increments_median"]["value"] >= 10
    for name, (low, high) in fe_optimisation.BOUNDS.items():
        assert low <= metrics[f"best_{name}"]["value"] <= high
    assert metrics["best_misfit"]["unit"] == "%"
    assert record["extra"]["solver_env"]["OMP_NUM_THREADS"] == "1"
    assert ours() == before  # the run folder and every evaluation's are gone


def test_paired_baseline_analyses_each_evaluation_again_without_field_output(ccx, tmp_path):
    """The baseline's deck asks for no .frd results; both leave nothing behind."""
    config = calculix.settings({**TINY, "elements": 2, "increments": 6, "paired_baseline": True})
    target = calculix.target_curve(config, tmp_path)
    calculix.init_worker(config.model, target, "pipe", paired=True)
    truth = {n: getattr(fe_optimisation.TRUTH, n) for n in fe_optimisation.BOUNDS}
    record = calculix.evaluate({"folder": str(tmp_path / "e"), "label": "g01-e001",
                                "parameters": truth})  # fmt: skip
    baseline = record["baseline"]
    assert record["ok"] and baseline["increments"] == record["increments"]
    assert baseline["cpu_time"] > 0 and baseline["eval_time"] > 0
    quiet = calculix.analyse({"folder": str(tmp_path / "q"), "label": "q", "parameters": truth},
                             calculix.replace(config.model, frd_every=0))  # fmt: skip
    assert quiet["file_sizes"]["job.frd"] < record["file_sizes"]["job.frd"] / 5  # the mesh only
    assert list(tmp_path.iterdir()) == []
    metrics = {m["metric"]: m["value"] for m in fe_optimisation.run_metrics(
        {"evaluations": [record], "wall_time": 1.0})}  # fmt: skip
    expected = (record["cpu_time"] - baseline["cpu_time"]) / record["increments"]
    assert metrics["output_cost_per_increment"] == pytest.approx(expected)
    # the kernel's part: ccx's and this worker's
    assert record["sys_time"] >= record["solver_sys_time"]
    kernel = (record["sys_time"] - baseline["sys_time"]) / record["increments"]
    assert metrics["output_kernel_cost_per_increment"] == pytest.approx(kernel)


def test_a_failing_target_fails_the_point(ccx, tmp_path, monkeypatch):
    monkeypatch.setattr(fe_deck, "deck", lambda *args: "*HEADING\nnothing\n*STEP\n*STATIC\n")
    record = run_job(job_spec("calculix", tmp_path, TINY), calculix.run)
    assert record["metrics"][0]["status"] == "failed"
    assert record["metrics"][0]["reason"].startswith("the target run with the true parameters")
    assert list(tmp_path.iterdir()) == []


def test_every_evaluation_failing_fails_the_point(ccx, tmp_path, monkeypatch):
    good = fe_deck.deck

    def deck(model, material, label=""):
        text = good(model, material, label)
        return text if label in ("", "target") else text.replace("*ELASTIC\n", "*ELASTIC\nx\n")

    monkeypatch.setattr(fe_deck, "deck", deck)
    record = run_job(job_spec("calculix", tmp_path, TINY), calculix.run)
    assert record["metrics"][0]["status"] == "failed"
    assert record["metrics"][0]["reason"].startswith("all 4 ccx evaluations failed; the first: ccx")


def test_without_ccx_the_point_is_skipped_with_the_install_command(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    record = run_job(job_spec("calculix", tmp_path, TINY), calculix.run)
    assert record["metrics"][0]["status"] == "skipped"
    assert "apt-get install calculix-ccx" in record["metrics"][0]["reason"]
