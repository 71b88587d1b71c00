"""openfoam: case generation, log parsing (normal, cut short, failed) and the real solver."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, fixture_text, job_spec
from tierbench import matrix
from tierbench.errors import ConfigError, PointFailed
from tierbench.runner import run_job
from tierbench.workloads import get
from tierbench.workloads.cfd import (
    cfd_launch,
    foam,
    openfoam,
    openfoam_log,
    openfoam_plan,
    openfoam_tree,
    openfoam_usercase,
)

FIELDS = {"U", "p", "k", "omega", "nut", "phi"}
#: what v1912's simpleFoam (kOmegaSST) writes per rank per write (ENVIRONMENT.md)
WRITE_FILES = FIELDS | {
    "uniform/time",
    "uniform/cumulativeContErr",
    "uniform/functionObjects/functionObjectProperties",
}
WRITE_DIRS = {".", "uniform", "uniform/functionObjects"}
SMOKE = {"ranks": 2, "cells_per_rank": 2000, "steps": 6, "warmup_steps": 1}


def params(**given) -> dict:
    return matrix.complete("openfoam", {**SMOKE, **given})


# ------------------------------------------------------------------ case generation


def hex_counts(block_mesh: str) -> tuple[int, int, int]:
    found = re.search(r"hex \(0 1 2 3 4 5 6 7\) \((\d+) (\d+) (\d+)\)", block_mesh)
    return tuple(int(n) for n in found.groups())


@pytest.mark.parametrize("ranks", [1, 2, 3, 8])
@pytest.mark.parametrize("cells", [64, 2000, 20000, 468750, 1_000_000])
def test_case_cells_multiply_out_and_decompose_for_ranks(ranks, cells):
    p = params(ranks=ranks, cells_per_rank=cells)
    openfoam_plan.check_params(p)
    files = openfoam_plan.case_files(p)
    nx, ny, nz = hex_counts(files["system/blockMeshDict"])
    assert nx * ny * nz == cells * ranks
    assert nx % ranks == 0 and (nx // ranks) * ny * nz == cells  # equal slabs along x
    decompose = files["system/decomposeParDict"]
    assert re.search(rf"^numberOfSubdomains {ranks};$", decompose, re.MULTILINE)
    assert re.search(r"^method\s+simple;$", decompose, re.MULTILINE)
    assert f"n           ({ranks} 1 1);" in decompose
    shape = foam.block_shape(cells)
    assert max(shape) / min(shape) <= openfoam_plan.MAX_ASPECT


def test_case_has_every_field_and_nothing_left_unrendered():
    files = openfoam_plan.case_files(params())
    assert {f"0/{name}" for name in FIELDS - {"phi"}} <= set(files)
    assert "constant/turbulenceProperties" in files
    assert "kOmegaSST" in files["constant/turbulenceProperties"]
    for rel, text in files.items():
        assert "$" not in text, f"{rel} has an unrendered template value"
    # no residualControl: the run does every iteration asked for
    assert "residualControl" not in files["system/fvSolution"]


def control(files: dict, key: str) -> str:
    return re.search(rf"^{key}\s+(\S+);$", files["system/controlDict"], re.MULTILINE).group(1)


def test_control_dict_follows_the_write_parameters():
    files = openfoam_plan.case_files(params(steps=9, write_interval=3, purge_write=2))
    assert control(files, "endTime") == "9"
    assert control(files, "writeControl") == "timeStep"
    assert control(files, "writeInterval") == "3"
    assert control(files, "purgeWrite") == "2"
    assert control(files, "writeFormat") == "binary"
    assert control(files, "runTimeModifiable") == "false"
    ascii_files = openfoam_plan.case_files(params(write_format="ascii"))
    assert control(ascii_files, "writeFormat") == "ascii"


def test_no_writes_means_a_write_interval_longer_than_the_run():
    files = openfoam_plan.case_files(params(steps=6, write_interval="none"))
    assert int(control(files, "writeInterval")) > int(control(files, "endTime"))
    none = cfd_launch.write_interval(params(steps=6, write_interval="none"))
    assert cfd_launch.write_steps(6, none) == []
    assert cfd_launch.write_steps(6, cfd_launch.write_interval(params(write_interval=4))) == [4]


def test_awkward_cell_counts_are_refused_with_a_nearby_one():
    with pytest.raises(ValueError, match="cells_per_rank 1009") as error:
        openfoam_plan.check_params(params(cells_per_rank=1009))  # a prime: a 1009 x 1 x 1 block
    suggested = int(re.search(r"e\.g\. (\d+)", str(error.value)).group(1))
    assert abs(suggested - 1009) < 50
    openfoam_plan.check_params(params(cells_per_rank=suggested))


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"write_interval": 7}, "longer than the run"),
        ({"warmup_steps": 6}, "no measured iteration"),
        ({"write_interval": 0}, "write_interval"),
    ],
)
def test_check_params_refuses_points_that_cannot_measure(bad, message):
    """The schema refuses a zero interval, the workload the cross-field cases: both say why."""
    with pytest.raises(ConfigError, match=message):
        matrix.check_point("openfoam", {**SMOKE, **bad}, "test")


def test_schema_fills_defaults_and_refuses_unknown_keys():
    complete = matrix.check_point("openfoam", {"ranks": 1}, "test")
    assert complete["file_handler"] == "uncollated" and complete["thread_buffer"] == 0
    assert set(complete) == set(openfoam_plan.DEFAULTS)
    with pytest.raises(ConfigError):
        matrix.check_point("openfoam", {"count_syscalls": True, "cell": 3}, "test")


def test_registered_as_an_mpi_workload_of_the_cfd_family():
    workload = get("openfoam")
    assert workload.mpi and workload.family == "cfd" and workload.env == "openfoam"
    assert (REPO / "envs" / "openfoam.yaml").is_file()
    p = params(ranks=3, ensemble=2)
    assert workload.estimate("tasks", p) == 6
    assert workload.estimate("planned_bytes", p) > 3 * 2 * 2000 * 80


def test_collated_output_is_unthreaded_unless_asked():
    assert openfoam.handler_args(params()) == []
    args = openfoam.handler_args(params(file_handler="collated"))
    assert args == ["-fileHandler", "collated", "-opt-switch", "maxThreadFileBufferSize=0"]
    threaded = openfoam.handler_args(params(file_handler="collated", thread_buffer=10**9))
    assert threaded[-1] == "maxThreadFileBufferSize=1000000000"


# ------------------------------------------------------------------ the log

LOG = "openfoam_simpleFoam.log"  # 2 ranks, 6 iterations, write interval 2, v1912


def test_normal_log_gives_every_iteration():
    iterations = openfoam_log.check_log(fixture_text(LOG), steps=6)
    assert [it.time for it in iterations] == ["1", "2", "3", "4", "5", "6"]
    assert iterations[0].cpu == 0.02 and iterations[-1].cpu == 0.07
    assert all(it.clock == 0 for it in iterations)  # v1912: whole seconds
    cpu = [it.cpu for it in iterations]
    assert cpu == sorted(cpu)
    assert openfoam_log.build_of(fixture_text(LOG)) == "OPENFOAM=1912 patch=200626"


def test_log_gives_each_iterations_linear_solves():
    iterations = openfoam_log.check_log(fixture_text(LOG), steps=6)
    assert set(iterations[0].solves) == {"Ux", "Uy", "Uz", "p", "k", "omega"}
    assert all(n >= 1 for it in iterations for n in it.solves.values())
    text = fixture_text(LOG)
    first = text[text.index("Time = 1") : text.index("Time = 2")]
    p_solves = [int(n) for n in re.findall(r"Solving for p,.*No Iterations (\d+)", first)]
    assert iterations[0].solves["p"] == sum(p_solves)


def test_the_log_per_step_is_what_lies_between_execution_time_lines():
    text = fixture_text(LOG)
    found = openfoam_log.log_per_step(text)
    lines = text.splitlines(keepends=True)
    ends = [i for i, line in enumerate(lines) if line.startswith("ExecutionTime = ")]
    between = lines[ends[0] + 1 : ends[-1] + 1]
    assert found["steps"] == len(ends) - 1 == 5
    assert found["lines"] == pytest.approx(len(between) / 5, abs=0.01)
    assert found["bytes"] == pytest.approx(sum(len(line) for line in between) / 5, abs=0.1)
    step = "Time = 2\n\nsmoothSolver:  Solving for Ux\nExecutionTime = 0.1 s  ClockTime = 0 s\n\n"
    two = "banner\n" + step + step.replace("2", "3") + step.replace("2", "4")
    assert openfoam_log.log_per_step(two) == {"bytes": len(step), "lines": 5, "steps": 2}
    assert openfoam_log.log_per_step(step) is None


def fitted_steps(cost: float, noise: float, seed: int = 3, steps: int = 200) -> list:
    """Step times whose solver work varies with the p solver's iterations, a write every
    other step costing ``cost``, and white noise: (time, wrote, solves) per step."""
    rng = np.random.default_rng(seed)
    found = []
    for step in range(steps):
        p_iterations = int(rng.integers(1, 12))
        wall = 0.05 + 0.01 * p_iterations + (cost if step % 2 else 0.0)
        found.append((wall + rng.normal(0.0, noise), bool(step % 2), {"p": p_iterations, "k": 1}))
    return found


def test_write_cost_takes_the_solvers_work_out():
    """A write of 2 ms among steps whose solver work varies by 100 ms: the fit finds it."""
    cost, error = openfoam_log.write_cost(fitted_steps(0.002, noise=0.0005))
    assert cost == pytest.approx(0.002, abs=3 * error) and error < 0.0002
    plain = fitted_steps(0.002, noise=0.0005)
    wrote = [t for t, w, _ in plain if w]
    quiet = [t for t, w, _ in plain if not w]
    assert abs(np.mean(wrote) - np.mean(quiet) - 0.002) > 10 * error  # the plain difference is off
    assert openfoam_log.write_cost(fitted_steps(0.0, noise=0.0005))[0] == pytest.approx(0, abs=5e-4)


def test_write_cost_holds_when_two_fields_take_the_same_iterations():
    """On one rank the duct's Uy and Uz take the same iterations every step: the fit keeps
    one of them instead of giving up on a singular system."""
    steps = [(t, w, {**s, "Uy": s["p"], "Uz": s["p"]}) for t, w, s in fitted_steps(0.002, 0.0005)]
    cost, error = openfoam_log.write_cost(steps)
    assert cost == pytest.approx(0.002, abs=3 * error) and error < 0.0002


def test_write_cost_needs_both_kinds_of_steps():
    every = [(t, True, s) for t, _, s in fitted_steps(0.002, noise=0.0005)]
    assert openfoam_log.write_cost(every) is None
    assert openfoam_log.write_cost(fitted_steps(0.002, noise=0.0005, steps=3)) is None


def test_log_with_fewer_iterations_than_asked_fails():
    with pytest.raises(PointFailed, match="after iteration 6 of 7"):
        openfoam_log.check_log(fixture_text(LOG), steps=7)


def test_truncated_log_fails_never_a_number():
    text = fixture_text(LOG)
    cut = text[: text.index("Time = 4")] + "Time = 4\n\nsmoothSolver:  Solving for Ux, Ini"
    with pytest.raises(PointFailed, match="ends after iteration 3 of 6, without 'End'"):
        openfoam_log.check_log(cut, steps=6)
    with pytest.raises(PointFailed, match="before iteration 1"):
        openfoam_log.check_log(text[: text.index("Starting time loop")], steps=6)


@pytest.mark.parametrize(
    "name, reason",
    [
        (
            "openfoam_simpleFoam_fatal.log",
            'FOAM FATAL ERROR: cannot find file "/tmp/oft/c/processor1/0/omega"',
        ),
        (
            "openfoam_simpleFoam_fatal_io.log",
            "FOAM FATAL IO ERROR: Entry 'div(phi,k)' not found in dictionary",
        ),
    ],
)
def test_fatal_error_fails_with_its_one_line_reason(name, reason):
    with pytest.raises(PointFailed) as error:
        openfoam_log.check_log(fixture_text(name), steps=6)
    message = str(error.value)
    assert message.startswith("simpleFoam: " + reason)
    assert "\n" not in message and "From function" not in message


def test_floating_point_exception_is_a_failure_but_the_banner_is_not():
    assert "trapFpe: Floating point exception trapping enabled" in fixture_text(LOG)
    assert openfoam_log.fatal_error(fixture_text(LOG)) is None
    crash = fixture_text(LOG)[:2000] + (
        "[0] #0  Foam::error::printStack(Foam::Ostream&) at ??:?\n"
        "[0] #1  Foam::sigFpe::sigHandler(int) at ??:?\n"
    )
    with pytest.raises(PointFailed, match="floating point exception"):
        openfoam_log.check_log(crash, steps=6)


def test_step_statistics_leave_out_the_first_and_warmup_iterations():
    iterations = [openfoam_log.Iteration(str(i), 0.1 * i, 0) for i in range(1, 7)]
    # arrivals: iteration 2 takes 5 s (start-up noise), writes (4, 6) take 3 s, others 1 s
    stamps = [10.0, 15.0, 16.0, 19.0, 20.0, 23.0]
    stats = openfoam_log.step_statistics(iterations, stamps, warmup_steps=2, writing=[2, 4, 6])
    assert stats["measured_steps"] == 4  # iterations 3..6
    assert stats["time_per_step"] == pytest.approx((1 + 3 + 1 + 3) / 4)
    assert stats["time_per_step_write"] == pytest.approx(3)
    assert stats["time_per_step_nowrite"] == pytest.approx(1)
    assert stats["time_per_step_median"] == pytest.approx(2)
    assert stats["run_time"] == pytest.approx(8)
    assert stats["cpu_time_per_step"] == pytest.approx(0.1)
    assert stats["solver_cpu_time"] == pytest.approx(0.6)  # the last ExecutionTime: all of it
    no_warmup = openfoam_log.step_statistics(iterations, stamps, warmup_steps=0, writing=[])
    assert no_warmup["measured_steps"] == 5  # the first has no start in the log
    assert "time_per_step_write" not in no_warmup
    with pytest.raises(PointFailed, match="5 timestamps for 6 iterations"):
        openfoam_log.step_statistics(iterations, stamps[:5], warmup_steps=0, writing=[])


def test_output_held_back_by_the_launcher_is_refused():
    iterations = [openfoam_log.Iteration(str(i), 0.5 * i, i) for i in range(1, 7)]  # 1 s each
    openfoam_log.check_stamps(iterations, [10.0, 11.1, 12.0, 12.9, 14.2, 15.0])
    with pytest.raises(PointFailed, match="buffers the output"):
        openfoam_log.check_stamps(iterations, [20.0, 20.0, 20.001, 20.001, 20.002, 20.002])


# ------------------------------------------------------------------ what was written


def fake_tree(times: list[int], ranks: int = 2, size: int = 100) -> dict:
    found = {f"processor{r}/": -1 for r in range(ranks)}
    for r in range(ranks):
        found[f"processor{r}/0/"] = -1
        found[f"processor{r}/0/U"] = 50
        for t in times:
            for d in WRITE_DIRS:
                found[f"processor{r}/{t}/" + ("" if d == "." else d + "/")] = -1
            found.update({f"processor{r}/{t}/{name}": size for name in WRITE_FILES})
    return found


def test_write_tree_counts_purged_writes_as_the_kept_ones():
    before = fake_tree([])
    found = openfoam_tree.write_tree(before, fake_tree([6]), writes=[2, 4, 6])
    assert found["kept_times"] == ["6"] and found["purged_writes"] == 2
    assert found["totals"] == {"files": 3 * 2 * 9, "dirs": 3 * 2 * 3, "bytes": 3 * 2 * 9 * 100}
    layout = openfoam_tree.per_rank_layout(found["sample"], collated=False)
    assert set(layout["writers"]) == {"processor0", "processor1"}
    assert set(layout["writers"]["processor0"]["files"]) == WRITE_FILES
    assert set(layout["writers"]["processor0"]["dirs"]) == WRITE_DIRS


def test_write_tree_refuses_time_folders_that_are_not_write_times():
    with pytest.raises(PointFailed, match="not write times"):
        openfoam_tree.write_tree(fake_tree([]), fake_tree([3]), writes=[2, 4, 6])


# ------------------------------------------------------------------ the environment


def test_default_environment_is_debians(monkeypatch):
    monkeypatch.delenv("WM_PROJECT_DIR", raising=False)
    env, how = openfoam_plan.openfoam_environment(None)
    assert env["WM_PROJECT_DIR"] == "/usr/share/openfoam" and "Debian" in how


def test_environment_from_a_bashrc(tmp_path):
    bashrc = tmp_path / "bashrc"
    here = shlex.quote(str(tmp_path))
    bashrc.write_text(f"export WM_PROJECT_DIR={here}\nexport PATH={here}/bin:$PATH\n")
    env, how = openfoam_plan.openfoam_environment({"bashrc": str(bashrc)})
    assert env["WM_PROJECT_DIR"] == str(tmp_path)
    assert env["PATH"].startswith(f"{tmp_path}/bin:")
    with pytest.raises(PointFailed, match="simpleFoam not found on PATH"):
        openfoam_plan.find_tools({"PATH": str(tmp_path)}, ("simpleFoam",))


@pytest.mark.parametrize(
    "setting, message",
    [
        ({"bashrc": "/nonexistent/etc/bashrc"}, "bashrc /nonexistent/etc/bashrc does not exist"),
        ({"bashrc": "/a", "module": "b"}, "exactly one of 'bashrc'"),
        ({"modules": "openfoam"}, "exactly one of 'bashrc'"),
        ({"module": "no-such-openfoam/0"}, "module load no-such-openfoam/0 failed"),
    ],
)
def test_bad_environment_settings_fail_in_one_line(setting, message):
    with pytest.raises(PointFailed, match=re.escape(message)) as error:
        openfoam_plan.openfoam_environment(setting)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("folder", ["a dir", "it's", 'say "x"', "tab\there"])
def test_a_tier_path_openfoam_refuses_is_not_applicable_naming_the_tier(tmp_path, folder):
    """OpenFOAM's file names refuse whitespace and quotes, the case's folder too: such a
    tier says so before any tool runs (blockMesh alone says only "debug level (= 2) > 1")."""
    tier = tmp_path / folder
    tier.mkdir()
    record = run_job(job_spec("openfoam", tier, params()), openfoam.run)
    (only,) = record["metrics"]
    assert only["status"] == "not_applicable"
    assert only["reason"].startswith("OpenFOAM refuses a case path with ")
    assert only["reason"].endswith(": give tier scratch a path without it")
    assert list(tier.iterdir()) == []
    assert openfoam_usercase.case_path_problem("/scratch/a;b:c/ä") is None


# ------------------------------------------------------------------ the real solver


@pytest.fixture(scope="module")
def solver():
    """simpleFoam, or a skip outside CI; in CI a missing solver fails saying how to install."""
    if shutil.which("simpleFoam") is None:
        how = "apt-get install -y --no-install-recommends openfoam"
        if os.environ.get("CI") == "true":
            pytest.fail(f"simpleFoam is not installed; in CI it must be: {how}")
        pytest.skip(f"simpleFoam is not installed ({how})")
    if shutil.which("mpiexec") is None:
        pytest.fail("mpiexec is not installed: apt-get install -y openmpi-bin")


def case_tier(path: Path) -> Path:
    """``path`` as the real solver's tier, or a skip outside CI where OpenFOAM refuses it
    (a TMPDIR with a space); in CI the test runs and says so."""
    problem = openfoam_usercase.case_path_problem(path)
    if problem:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{problem}; in CI the real solver must run: set TMPDIR without it")
        pytest.skip(f"{problem} (TMPDIR)")
    return path


def values(record: dict) -> dict:
    for m in record["metrics"]:
        assert m["status"] == "ok", m["reason"]
    return {m["metric"]: m["value"] for m in record["metrics"]}


def shm_or_skip() -> str:
    if not os.path.isdir("/dev/shm") or not os.access("/dev/shm", os.W_OK):
        pytest.skip("/dev/shm is not a writable folder here")
    return "/dev/shm"


@pytest.mark.parametrize("tier", ["shm", "disk"])
def test_real_solver_writes_document_001s_tree(solver, tier, tmp_path):
    tier_path = shm_or_skip() if tier == "shm" else case_tier(tmp_path)
    record = run_job(job_spec("openfoam", tier_path, params(write_interval=1)), openfoam.run)
    found = values(record)
    writes, ranks = 6, 2
    assert found["files_per_write"] == 9 and found["dirs_per_write"] == 3
    assert found["files_created"] == 9 * ranks * writes
    assert found["dirs_created"] == 3 * ranks * writes
    assert found["bytes_per_write"] * writes == pytest.approx(found["bytes_written"])
    # binary: U, phi 3 doubles per value, p k omega nut 1 double per cell, at least
    assert found["bytes_per_write"] > ranks * 2000 * 8 * 8
    assert found["time_per_step"] > 0 and found["time_per_step_write"] > 0
    assert found["cpu_time_per_step"] >= 0
    assert "time_per_step_nowrite" not in found  # every iteration wrote
    layout = record["extra"]["write_tree"]
    assert set(layout["writers"]) == {"processor0", "processor1"}
    for writer in layout["writers"].values():
        assert set(writer["files"]) == WRITE_FILES
        assert set(writer["dirs"]) == WRITE_DIRS
        assert all(size > 0 for size in writer["files"].values())
    assert record["extra"]["preprocessing_s"][0]["blockMesh"] > 0
    assert record["extra"]["openfoam_build"].startswith("OPENFOAM=")
    if tier == "disk":
        assert not any(tmp_path.iterdir()), "the run folder was left behind"


def test_real_solver_without_writes_writes_nothing(solver, tmp_path):
    tier = case_tier(tmp_path)
    record = run_job(job_spec("openfoam", tier, params(write_interval="none")), openfoam.run)
    found = values(record)
    assert found["files_created"] == 0 and found["dirs_created"] == 0
    assert found["bytes_written"] == 0
    assert found["time_per_step_nowrite"] == pytest.approx(found["time_per_step"])
    assert "bytes_per_write" not in found and "time_per_step_write" not in found


def test_real_solver_collated_ensemble_through_the_runner_command(solver, tmp_path):
    """Two 2-rank members, collated, every other iteration writing, via python -m runner."""
    p = params(ensemble=2, file_handler="collated", write_interval=2, purge_write=0)
    out = tmp_path / "rep.json"
    spec = json.dumps(job_spec("openfoam", case_tier(tmp_path), p))
    env = {**os.environ, "PYTHONPATH": str(REPO / "workflow")}
    done = subprocess.run(
        [sys.executable, "-m", "tierbench.runner", "--spec", spec, "--out", str(out)],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    record = json.loads(out.read_text())
    found = values(record)
    writes, members = 3, 2
    # collated: the master writes one file per field for both ranks
    assert found["files_created"] == 9 * writes * members
    assert found["files_per_write"] == 9 and found["dirs_per_write"] == 3
    assert "time_per_step_write" in found and "time_per_step_nowrite" in found
    assert set(record["extra"]["write_tree"]["writers"]) == {"processors2"}
    assert all(m["tree"]["purged_writes"] == 0 for m in record["extra"]["members"])
    assert len(record["extra"]["commands"]) == members
    assert "-parallel -fileHandler collated" in record["extra"]["commands"][0]
    assert 0 <= record["extra"]["overlap"] <= 1
    # member 0 ran alone first, as launched in the ensemble
    alone = record["extra"]["alone"]
    assert found["time_per_step_alone"] == alone["steps"]["time_per_step"] > 0
    assert alone["tree"]["totals"]["files"] == 9 * writes and alone["writes"] == writes


def test_real_solver_on_one_rank_runs_serially(solver, tmp_path):
    """v1912 refuses -parallel on one processor: the time folders are in the case itself."""
    record = run_job(
        job_spec("openfoam", case_tier(tmp_path), params(ranks=1, write_interval=3)), openfoam.run
    )
    found = values(record)
    assert found["files_created"] == 9 * 2 and found["dirs_created"] == 3 * 2
    assert "decompose_time" not in found
    writer = record["extra"]["write_tree"]["writers"]["case"]
    assert set(writer["files"]) == WRITE_FILES and set(writer["dirs"]) == WRITE_DIRS
    assert "-parallel" not in record["extra"]["commands"][0]


def test_real_solver_started_from_a_folder_with_a_space(solver, tmp_path, monkeypatch):
    """OpenFOAM reads $PWD as a file name: snakemake started in "/tmp/x y" once made every
    tool stop, with only "For debug level (= 2) > 1 this is considered fatal"."""
    monkeypatch.setenv("PWD", "/tmp/x y")
    tier = case_tier(tmp_path)
    record = run_job(job_spec("openfoam", tier, params(ranks=1, write_interval=3)), openfoam.run)
    assert values(record)["files_created"] == 9 * 2
    bashrc = tmp_path / "bashrc"
    bashrc.write_text("cd /\n")
    env, _ = openfoam_plan.openfoam_environment({"bashrc": str(bashrc)})
    assert "PWD" not in env


def test_real_solver_failure_is_a_failed_point(solver, tmp_path, monkeypatch):
    """A case the solver refuses (a field removed before the run) ends as a clear failed point."""
    real_prepare = openfoam.prepare

    def broken(member, p, env):
        times = real_prepare(member, p, env)
        (member.case / "processor0" / "0" / "omega").unlink()
        return times

    monkeypatch.setattr(openfoam, "prepare", broken)
    record = run_job(job_spec("openfoam", case_tier(tmp_path), params()), openfoam.run)
    (failed,) = record["metrics"]
    assert failed["status"] == "failed"
    assert "FOAM FATAL ERROR: cannot find file" in failed["reason"] and "omega" in failed["reason"]
