"""fe_proxy: the FE model, the GA, solver output on the tier, parameters, the study."""

import errno
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import REPO, job_spec
from hypothesis import given, settings
from hypothesis import strategies as st
from tierbench import matrix, native
from tierbench.errors import ConfigError
from tierbench.runner import run_job
from tierbench.workloads import fe_model, fe_proxy, ga

TINY = {
    "cores": 1,
    "population": 4,
    "generations": 2,
    "elements": 2,
    "increments": 6,
    "model_bytes": "8KiB",
    "increment_bytes": "1KiB",
    "restart_interval": 2,
    "restart_bytes": "4KiB",
}


# ------------------------------------------------------------------ FE model


@pytest.mark.parametrize("taper", [0.0, 0.2])
def test_small_strain_limit_is_the_linear_elastic_closed_form(taper):
    bar = fe_model.Bar(elements=8, increments=1, max_strain=1e-7, unload=False, taper=taper)
    material = fe_model.Material()
    force = fe_model.solve(bar, material).force[-1]
    tip = bar.tip_displacement(1.0)
    expected = fe_model.elastic_force(bar, material.E, tip)  # springs in series
    assert force == pytest.approx(expected, rel=1e-6)
    if taper == 0.0:
        assert force == pytest.approx(material.E * bar.area * tip / bar.length, rel=1e-6)


def test_fine_mesh_approaches_the_continuous_tapered_bar():
    # F = u E A0 t / (L ln(1 / (1 - t))) for an area falling linearly by the fraction t
    bar = fe_model.Bar(elements=200, increments=1, max_strain=1e-7, unload=False)
    material = fe_model.Material()
    t = bar.taper
    exact = (
        bar.tip_displacement(1.0)
        * material.E
        * bar.area
        * t
        / (bar.length * math.log(1.0 / (1.0 - t)))
    )
    assert fe_model.solve(bar, material).force[-1] == pytest.approx(exact, rel=1e-5)


def test_newton_converges_in_few_iterations_quadratically():
    bar = fe_model.Bar(elements=10, increments=40)
    seen = []
    solution = fe_model.solve(bar, fe_model.Material(), seen.append)
    assert solution.cutbacks == 0 and len(seen) == 40
    iterations = [inc.iterations for inc in seen]
    assert iterations[0] <= 1  # elastic: one correction for the logarithmic strain
    assert max(iterations) <= 10  # the worst: elements switching from elastic to plastic
    assert max(iterations[5:]) <= 3 and np.median(iterations) <= 1
    for inc in seen:
        r = inc.residuals
        assert r[-1] <= bar.tolerance and len(r) == inc.iterations + 1
        # once no element changes between elastic and plastic any more, the consistent
        # tangent makes convergence quadratic: the last step squares the residual
        if len(r) > 1:
            assert r[-1] <= 100 * r[-2] ** 2, (inc.number, r)


def test_equilibrium_same_force_in_every_element():
    seen = []
    bar = fe_model.Bar(elements=6, increments=10)
    fe_model.solve(bar, fe_model.Material(), seen.append)
    for inc in seen:
        force = bar.element_areas * inc.stress / np.exp(inc.strain)
        assert np.allclose(force, inc.force, rtol=1e-7)
    assert any(inc.alpha.max() > 0 for inc in seen)  # it did yield
    assert seen[-1].force < 0  # unloaded to zero displacement: reversed, compressive yield


def test_solve_gives_up_with_a_clear_error():
    bar = fe_model.Bar(elements=4, increments=2, max_iterations=1, max_cutbacks=1, tolerance=1e-14)
    with pytest.raises(fe_model.ConvergenceError, match="cutbacks"):
        fe_model.solve(bar, fe_model.Material())


# ------------------------------------------------------------------ GA


def fit(settings, bar=None):
    bar = bar or fe_model.Bar(elements=1, increments=20)
    target = fe_model.force_curve(bar, fe_proxy.TRUTH)
    names = list(fe_proxy.BOUNDS)
    batches = []

    def evaluate(rows, generation):
        batches.append((generation, len(rows)))
        return [
            fe_model.misfit(
                fe_model.force_curve(bar, fe_model.Material(**dict(zip(names, row, strict=True)))),
                target,
            )
            for row in rows
        ]

    low, high = zip(*fe_proxy.BOUNDS.values(), strict=True)
    return ga.optimise(evaluate, low, high, settings), batches


def test_ga_recovers_known_parameters():
    """Tiny problem (1 element, 20 increments), seed 1: E and yield stress within 1 %,
    Voce saturation Q within 3 %, curve within 0.1 % (the same holds for seeds 2 to 5)."""
    result, batches = fit(ga.Settings(population=24, generations=15, seed=1))
    best = dict(zip(fe_proxy.BOUNDS, result.best, strict=True))
    assert best["E"] == pytest.approx(fe_proxy.TRUTH.E, rel=0.01)
    assert best["sigma_y"] == pytest.approx(fe_proxy.TRUTH.sigma_y, rel=0.01)
    assert best["Q"] == pytest.approx(fe_proxy.TRUTH.Q, rel=0.03)
    assert result.best_fitness < 0.1
    assert result.evaluations == 24 * 15 and batches == [(g, 24) for g in range(15)]
    assert all(b >= a for a, b in zip(result.history[1:], result.history[:-1], strict=True))


def test_ga_is_reproducible_from_its_seed_and_elitist():
    settings = ga.Settings(population=6, generations=3, seed=7)
    bar = fe_model.Bar(elements=1, increments=4)
    one, _ = fit(settings, bar)
    two, _ = fit(settings, bar)
    assert np.array_equal(one.best, two.best) and one.history == two.history
    other, _ = fit(ga.Settings(population=6, generations=3, seed=8), bar)
    assert not np.array_equal(one.best, other.best)
    assert one.history == sorted(one.history, reverse=True)  # elitism: never worse


def test_ga_failed_evaluations_lose():
    def evaluate(rows, generation):
        return [math.inf if row[0] > 0.5 else float(row[0]) for row in rows]

    result = ga.optimise(evaluate, [0.0], [1.0], ga.Settings(population=8, generations=3))
    assert result.best[0] <= 0.5 and math.isfinite(result.best_fitness)


# ------------------------------------------------------------------ one evaluation


def start_worker(params=None):
    config = fe_proxy.settings({**TINY, **(params or {})})
    target = fe_proxy.target_curve(config.bar, config.noise, config.ga.seed)
    fe_proxy.init_worker(config.bar, config.output, target)
    return config


def task(folder, **parameters):
    return {
        "folder": str(folder),
        "label": "g01-e001",
        "parameters": {"E": 190_000.0, "sigma_y": 240.0, "Q": 160.0, **parameters},
    }


@pytest.fixture(scope="module")
def feio():
    """The C helper, or the test is skipped with the reason it is not built."""
    module = native.feio()
    if module is None:
        pytest.skip(f"the C helper is not built here: {native.status('feio')}")
    return module


@pytest.fixture(params=["c", "python"])
def writer(request, monkeypatch):
    """Run the evaluation with the C helper's calls, then with their Python twin."""
    if request.param == "c":
        request.getfixturevalue("feio")
    else:
        monkeypatch.setattr(native, "feio", lambda: None)
    return request.param


@pytest.fixture
def recorded_paths(monkeypatch):
    """Every path the evaluation opens: all of them pass Disk.target, the C helper's too."""
    seen = []
    real_target = fe_proxy.Disk.target

    def recording_target(self, path):
        seen.append(Path(path))
        return real_target(self, path)

    monkeypatch.setattr(fe_proxy.Disk, "target", recording_target)
    return seen


def test_evaluation_writes_only_in_its_folder_and_leaves_nothing(tmp_path, writer, recorded_paths):
    run = tmp_path / "run"
    run.mkdir()
    (tmp_path / "neighbour.txt").write_text("keep")
    config = start_worker({"fsync": "increment"})
    folder = run / "g01-e001"
    record = fe_proxy.evaluate(task(folder))
    assert record["ok"] and 0 < record["misfit"] < 100
    assert list(run.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["neighbour.txt", "run"]
    assert (tmp_path / "neighbour.txt").read_text() == "keep"
    assert recorded_paths and all(p.parent == folder for p in recorded_paths)
    names = {p.name for p in recorded_paths}
    assert {"job.inp", "job.msg", "job.sta", "job.odb", "job.res"} <= names
    assert record["files"] == config.output.files == len(names)
    # what was written: the pre-processor's share, a frame per increment, restarts, text
    output = config.output
    assert record["bytes"] >= (
        output.model_bytes + 6 * output.increment_bytes + 3 * output.restart_bytes
    )
    assert (
        record["bytes"] <= fe_proxy.evaluation_bytes(output, config.bar) + 3 * output.restart_bytes
    )
    assert record["io_time"] > 0 and record["compute_time"] > 0
    assert record["eval_time"] == pytest.approx(record["io_time"] + record["compute_time"])


def test_disk_refuses_paths_outside_its_folder(tmp_path):
    disk = fe_proxy.Disk(tmp_path / "e1", "none")
    for path in (tmp_path / "x", tmp_path / "e1" / "sub" / "x", "/etc/passwd", "job.odb"):
        with pytest.raises(RuntimeError, match="outside the evaluation folder"):
            disk.target(path)
    assert disk.target(tmp_path / "e1" / "job.odb") == str(tmp_path / "e1" / "job.odb")


@pytest.mark.parametrize("fsync", ["none", "increment"])
def test_c_helper_and_python_write_the_same_files(feio, tmp_path, monkeypatch, fsync):
    monkeypatch.setattr(fe_proxy.Disk, "remove", lambda self: None)  # keep the files to compare
    start_worker({"fsync": fsync, "increments": 12, "restart_interval": 5})
    records, trees = {}, {}
    for name, helper in (("c", lambda: feio), ("python", lambda: None)):
        monkeypatch.setattr(native, "feio", helper)
        folder = tmp_path / name / "g01-e001"
        folder.parent.mkdir()
        records[name] = fe_proxy.evaluate(task(folder))
        trees[name] = {p.name: p.read_bytes() for p in folder.iterdir()}
    assert trees["c"] == trees["python"]
    assert len(trees["c"]) == records["c"]["files"] == 10
    for key in ("ok", "misfit", "iterations", "bytes", "files"):
        assert records["c"][key] == records["python"][key]
    assert records["c"]["bytes"] >= sum(len(data) for data in trees["c"].values())
    # a header line, a column line, one line per increment, the end message
    sta = trees["c"]["job.sta"].decode().splitlines()
    assert len(sta) == 2 + 12 + 1 and sta[-1] == " THE ANALYSIS HAS COMPLETED SUCCESSFULLY"
    assert sta[2].startswith("   1     1   1 ") and sta[2].endswith(" 8.33333E-02")
    odb = trees["c"]["job.odb"]
    assert len(odb) == 12 * 1024 and odb[:4] == b"FRM1" and odb[1024 : 1024 + 4] == b"FRM1"
    assert len(trees["c"]["job.res"]) == 4 * 1024


def test_output_grows_per_increment(tmp_path, monkeypatch):
    config = start_worker()
    sizes = []
    real_solve = fe_model.solve

    def watching_solve(bar, material, on_increment):
        def hook(inc):
            on_increment(inc)
            folder = tmp_path / "g01-e001"
            sizes.append({p.name: p.stat().st_size for p in folder.iterdir()})

        return real_solve(bar, material, hook)

    monkeypatch.setattr(fe_model, "solve", watching_solve)
    fe_proxy.evaluate(task(tmp_path / "g01-e001"))
    odb = [s["job.odb"] for s in sizes]
    sta = [s["job.sta"] for s in sizes]
    step = config.output.increment_bytes
    assert all(b - a == step for a, b in zip(odb, odb[1:], strict=False))
    assert all(b > a for a, b in zip(sta, sta[1:], strict=False))  # flushed every increment
    assert sizes[1]["job.res"] == config.output.restart_bytes  # rewritten, not appended
    assert sizes[-1]["job.res"] == config.output.restart_bytes
    assert list(tmp_path.iterdir()) == []


def test_failed_solve_is_a_failed_evaluation_and_its_folder_goes(tmp_path, monkeypatch):
    start_worker()
    real_solve = fe_model.solve

    def failing_solve(bar, material, on_increment):
        def hook(inc):
            on_increment(inc)
            if inc.number == 3:
                raise fe_model.ConvergenceError("increment 3: no convergence after 6 cutbacks")

        return real_solve(bar, material, hook)

    monkeypatch.setattr(fe_model, "solve", failing_solve)
    record = fe_proxy.evaluate(task(tmp_path / "g01-e001"))
    assert not record["ok"] and record["misfit"] == math.inf
    assert "no convergence" in record["error"]
    assert list(tmp_path.iterdir()) == []


def _near_ties(draw_digits: int, scale: int) -> float:
    """A double next to a rounding tie at ``draw_digits`` significant digits."""
    return (10**draw_digits + 0.5) * 10.0**scale


@settings(max_examples=3000, deadline=None)
@given(
    x=st.one_of(
        st.floats(allow_nan=True, allow_infinity=True),
        st.floats(min_value=-1e6, max_value=1e6),
        st.builds(_near_ties, st.integers(3, 6), st.integers(-30, 30)),
    ),
    precision=st.sampled_from([0, 1, 3, 5, 6, 12, 15, 17]),
    width=st.sampled_from([0, 12]),
)
def test_c_float_text_is_pythons(feio, x, precision, width):
    """The C helper formats floats itself (printf is slow): it must agree with Python."""
    expected = f"{x:{width}.{precision}E}" if width else f"{x:.{precision}E}"
    assert feio.format_e(x, precision, width) == expected


def test_c_writer_refuses_arrays_it_cannot_write_as_float64(feio, tmp_path):
    start_worker()
    increments = []
    fe_model.solve(fe_model.Bar(elements=2, increments=2), fe_proxy.TRUTH, increments.append)
    fd = os.open(tmp_path / "job.odb", os.O_WRONLY | os.O_CREAT)
    try:
        writer = feio.Writer((fd, fd, fd), 1024, False, None, 0, 0, False)
        writer(increments[0])
        assert writer.written > 1024 and writer.restarts == 0
        bad = increments[1]._replace(stress=np.float32([1.0, 2.0]))
        with pytest.raises(TypeError, match="stress"):
            writer(bad)
    finally:
        os.close(fd)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
@pytest.mark.parametrize("full", ["job.inp", "job.odb", "job.res"])
def test_full_tier_propagates_and_its_folder_goes(tmp_path, monkeypatch, writer, full):
    """A write that finds the tier full (/dev/full in place of one file) raises ENOSPC."""
    start_worker()
    real_target = fe_proxy.Disk.target

    def full_for_one_file(self, path):
        checked = real_target(self, path)
        return "/dev/full" if os.path.basename(checked) == full else checked

    monkeypatch.setattr(fe_proxy.Disk, "target", full_for_one_file)
    with pytest.raises(OSError) as error:
        fe_proxy.evaluate(task(tmp_path / "g01-e001"))
    assert error.value.errno == errno.ENOSPC
    if full != "job.odb":  # a file opened by path: the error names it
        assert error.value.filename in ("/dev/full", b"/dev/full")
    assert list(tmp_path.iterdir()) == []


def test_deck_is_read_back_by_the_solver():
    material = fe_model.Material(E=123_456.0, sigma_y=234.5, Q=99.0)
    deck = fe_proxy.input_deck("x", fe_model.Bar(elements=3), material, fe_proxy.Output())
    assert fe_proxy.read_parameters(deck) == material
    assert "*NODE" in deck and "*ELEMENT" in deck and "*OUTPUT, FIELD, FREQUENCY=1" in deck


# ------------------------------------------------------------------ the job


def spec(tmp_path, **params):
    return job_spec("fe_proxy", tmp_path, {**TINY, **params}, experiment="optimisation")


def test_job_reports_metrics_with_units_and_cleans_up(tmp_path):
    (tmp_path / "users-file.txt").write_text("keep me")
    record = run_job(spec(tmp_path), fe_proxy.run)
    metrics = {m["metric"]: m for m in record["metrics"]}
    assert metrics["wall_time"]["unit"] == "s" and metrics["wall_time"]["value"] > 0
    assert metrics["evaluations"]["value"] == 8 and metrics["failed_evaluations"]["value"] == 0
    assert metrics["bytes_written"]["unit"] == "B" and metrics["bytes_written"]["value"] > 0
    assert metrics["files_per_evaluation"]["value"] == 10
    assert metrics["files_per_evaluation"]["unit"] == "files"
    for name in ("eval_compute_time_median", "eval_io_time_median", "io_time_sum"):
        assert metrics[name]["unit"] == "s" and metrics[name]["value"] > 0
    for name in fe_proxy.BOUNDS:
        low, high = fe_proxy.BOUNDS[name]
        assert low <= metrics[f"best_{name}"]["value"] <= high
        assert metrics[f"error_{name}"]["unit"] == "%"
    assert len(record["extra"]["evaluations"]) == 8
    assert record["extra"]["file_writer"] == native.status("feio")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["users-file.txt"]


def test_more_workers_than_cpus_is_skipped_unless_asked(tmp_path):
    cpus = fe_proxy.available_cpus()
    record = run_job(spec(tmp_path, cores=cpus + 1), fe_proxy.run)
    assert record["metrics"][0]["status"] == "skipped"
    assert "oversubscribe" in record["metrics"][0]["reason"]
    assert list(tmp_path.iterdir()) == []


def test_tier_cap_below_the_planned_bytes_fails_before_writing(tmp_path):
    record = run_job({**spec(tmp_path), "max_bytes": 1000}, fe_proxy.run)
    assert record["metrics"][0]["status"] == "failed"
    assert "max_bytes" in record["metrics"][0]["reason"]


def test_planned_bytes_and_threads():
    assert fe_proxy.threads({"cores": 3}) == 3
    one = fe_proxy.planned_bytes({"cores": 1})
    assert fe_proxy.planned_bytes({"cores": 4}) == 4 * one
    assert one > fe_proxy.parse_size("512KiB") + 40 * fe_proxy.parse_size("16KiB")


# ------------------------------------------------------------------ bad parameters


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"population": 1}, "population must be at least 2"),
        ({"increments": 0}, "increments must be at least 1"),
        ({"generations": 0}, "generations must be at least 1"),
        ({"elements": 0}, "elements must be at least 1"),
        ({"cores": 0}, "cores must be at least 1"),
        ({"increment_bytes": -1}, "increment_bytes must not be negative"),
        ({"model_bytes": "-4k"}, "model_bytes must not be negative"),
        ({"restart_bytes": "lots"}, "restart_bytes: not a size"),
        ({"elite": 4}, "elite must be smaller than population"),
        ({"files": 3}, "files must be at least 5"),
        ({"fsync": "sometimes"}, "fsync must be one of"),
        ({"max_strain": 0}, "max_strain must be between"),
        ({"threads": 2}, "unknown parameters"),
    ],
)
def test_bad_parameters_are_named(bad, message):
    with pytest.raises(ValueError, match=message):
        fe_proxy.check_params({**TINY, **bad})


@pytest.mark.parametrize(
    "bad", [{"population": 1}, {"increments": 0}, {"increment_bytes": -1}, {"restart_bytes": "-4k"}]
)
def test_bad_parameters_stop_the_expansion(bad):
    with pytest.raises(ConfigError) as error:
        matrix.check_point("fe_proxy", {**TINY, **bad}, "fe_tmpfs.optimisation[p]")
    assert next(iter(bad)) in str(error.value)


def test_study_file_expands_to_cores_that_fit_by_default():
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    study = matrix.load_study(REPO / "config/studies/fe_tmpfs.yaml", config)
    tiers = matrix.resolve_tiers(config, REPO / "config/hardware", "/tmp")
    for scale in ("smoke", "default", "full"):
        points = matrix.expand_study(study, tiers, scale)
        fe = [p for p in points if p.workload == "fe_proxy"]
        worst = [p for p in points if p.experiment == "worst_case"]
        assert {p.tier for p in fe} == {p.tier for p in worst} == {"shm", "disk"}
        assert all(p.params["population"] == 30 and p.params["generations"] == 2 for p in fe)
        cores = sorted({p.params["cores"] for p in fe})
        assert cores == ([8, 16, 30] if scale == "full" else [1, 2])
        assert worst[0].params["io_mode"] == "fsync" and worst[0].params["block_size"] == "4k"


# ------------------------------------------------------------------ through snakemake


@pytest.mark.e2e
def test_snakemake_dry_run_names_the_bad_parameter(pipeline):
    path = pipeline.root / "config/studies/fe_tmpfs.yaml"
    study = yaml.safe_load(path.read_text())
    study["experiments"][1]["params"]["population"] = 1
    path.write_text(yaml.safe_dump(study))
    done = pipeline("-n", "-c2", "--configfile", "config/studies/fe_tmpfs.yaml", check=False)
    assert done.returncode != 0
    assert "population" in done.stdout + done.stderr
    assert not (pipeline.root / "results").exists()


@pytest.mark.e2e
def test_smoke_study_end_to_end(pipeline):
    pipeline("-c2", "--configfile", "config/studies/fe_tmpfs.yaml", "--config", "scale=smoke")
    study = pipeline.root / "results/fe_tmpfs"
    results = pd.read_csv(study / "results.csv")
    fe = results[(results["workload"] == "fe_proxy") & (results["phase"] == "measured")]
    assert set(fe["status"]) == {"ok"}
    assert set(fe["tier"]) == {"shm", "disk"} and set(fe["cores"]) == {1, 2}
    wall = fe[fe["metric"] == "wall_time"]
    assert len(wall) == 2 * 2 * 3 and (wall["value"] > 0).all() and set(wall["unit"]) == {"s"}
    for name, unit in [
        ("bytes_written", "B"),
        ("files_written", "files"),
        ("eval_io_time_median", "s"),
        ("eval_compute_time_median", "s"),
    ]:
        rows = fe[fe["metric"] == name]
        assert len(rows) == 12 and (rows["value"] > 0).all() and set(rows["unit"]) == {unit}
    fio = results[(results["workload"] == "fio") & (results["metric"] == "write_bandwidth")]
    assert set(fio["tier"]) == {"shm", "disk"} and (fio["value"] > 0).all()
    summary = pd.read_csv(study / "summary.csv")
    assert {"wall_time", "best_misfit", "error_E"} <= set(summary["metric"])
    figures = study / "figures/fe"
    for name in ("fe_wall_time", "fe_speedup_vs_fio", "fe_time_split"):
        assert (figures / f"{name}.png").stat().st_size > 10_000
        assert (figures / f"{name}.svg").exists()
    manifest = yaml.safe_load((figures / "manifest.json").read_text())
    assert all("population 30" in entry["caption"] for entry in manifest)
    assert (pipeline.root / "results/report.html").exists()
    # nothing left on the tiers
    assert not list(Path("/dev/shm").glob("tierbench-optimisation-shm-*"))
    scratch = pipeline.root / "results/scratch"
    assert not scratch.exists() or not list(scratch.iterdir())
