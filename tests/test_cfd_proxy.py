"""cfd_proxy: OpenFOAM layout, sizes, purgeWrite, collated blocks, MPI runs, bad input."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import pytest
import yaml
from conftest import REPO, job_spec
from tierbench import cfd_writer, foam, matrix, rundir
from tierbench.errors import ConfigError, PointFailed
from tierbench.runner import run_job
from tierbench.workloads import cfd_proxy

HAVE_MPI = shutil.which("mpiexec") is not None
needs_mpi = pytest.mark.skipif(not HAVE_MPI, reason="mpiexec (openmpi-bin) is not installed")
FIELD_NAMES = {"U", "p", "k", "omega", "nut", "phi"}
TIME_FILES = FIELD_NAMES | {"uniform/time", "uniform/functionObjects/functionObjectProperties"}
TIME_DIRS = {"", "uniform", "uniform/functionObjects"}
PARAMS = {
    "ranks": 2,
    "ensemble": 1,
    "steps": 6,
    "write_interval": 2,
    "file_handler": "uncollated",
    "write_format": "binary",
    "purge_write": 0,
    "cells_per_rank": 1500,
    "sweeps": 2,
    "warmup_steps": 1,
}


def fields(cells: int, rank: int = 0) -> dict:
    data = cfd_writer.static_fields(cells, rank)
    data["p"] = np.linspace(0, 1, cells)
    return data


def tree(root) -> tuple[set, set]:
    """(files, folders) below root as relative paths."""
    files, dirs = set(), set()
    for here, subdirs, names in os.walk(root):
        rel = os.path.relpath(here, root)
        dirs |= {os.path.normpath(os.path.join(rel, d)) for d in subdirs}
        files |= {os.path.normpath(os.path.join(rel, n)) for n in names}
    return files, dirs


def mpi_env() -> dict:
    env, _ = cfd_proxy.launch_env("mpiexec", local=True)
    return env


def run_writer(tmp_path, ranks: int, config: dict, name: str = "case"):
    """The MPI program on its own (no runner), so its output can be inspected."""
    case, out = tmp_path / name, tmp_path / f"{name}.json"
    command = cfd_proxy.launch_command("mpiexec", ranks, 1, local=True) + [
        sys.executable, "-m", "tierbench.cfd_writer",
        "--case", str(case), "--config", json.dumps(config), "--out", str(out),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, env=mpi_env(), timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return case, json.loads(out.read_text())


# ------------------------------------------------------------------ layout


@pytest.fixture(scope="module")
def uncollated_run(tmp_path_factory):
    if not HAVE_MPI:
        pytest.skip("mpiexec is not installed")
    config = cfd_proxy.writer_config(PARAMS)
    return run_writer(tmp_path_factory.mktemp("uncollated"), 2, config)


@needs_mpi
def test_golden_layout_of_a_two_rank_run(uncollated_run):
    case, result = uncollated_run
    files, dirs = tree(case)
    times = ["2", "4", "6"]
    expected_files = {f"processor{r}/{t}/{f}" for r in range(2) for t in times for f in TIME_FILES}
    expected_dirs = {f"processor{r}" for r in range(2)} | {
        os.path.normpath(f"processor{r}/{t}/{d}")
        for r in range(2)
        for t in times
        for d in TIME_DIRS
    }
    assert files == expected_files
    assert dirs == expected_dirs
    # document 001: N x writes x 8 files and N x writes x 3 folders
    assert result["files_created"] == 2 * 3 * 8 == len(files)
    assert result["dirs_created"] == 2 * 3 * 3 == len(dirs) - 2
    assert result["writes"] == 3 and result["problems"] == []
    assert result["write_steps"] == [1, 3, 5]  # 0-based indices of steps 2, 4, 6
    assert len(result["step_times"]) == 6 and all(t > 0 for t in result["step_times"])


@needs_mpi
def test_every_file_has_a_foamfile_header_that_parses(uncollated_run):
    case, _ = uncollated_run
    for rel in tree(case)[0]:
        head, _ = foam.parse_header((case / rel).read_bytes())
        parts = rel.split("/")
        time, inner = parts[1], "/".join(parts[2:-1])
        assert head["version"] == "2.0" and head["format"] == "binary"
        assert head["object"] == parts[-1]
        assert head["location"] == (f"{time}/{inner}" if inner else time)
        if head["object"] in FIELD_NAMES:
            _, values = foam.read_field((case / rel).read_bytes())
            per_cell = 3 if head["object"] == "phi" else 1
            assert values.shape[0] == PARAMS["cells_per_rank"] * per_cell
            assert head["class"] == foam.FIELDS[head["object"]][0]
            assert head["location"] == time
        else:
            assert head["class"] == "dictionary"


@needs_mpi
def test_each_rank_writes_its_own_data(uncollated_run):
    case, _ = uncollated_run
    for rank in range(2):
        _, k = foam.read_field((case / f"processor{rank}/4/k").read_bytes())
        assert np.array_equal(k.ravel(), cfd_writer.static_fields(1500, rank)["k"])
    _, p0 = foam.read_field((case / "processor0/6/p").read_bytes())
    _, p1 = foam.read_field((case / "processor1/6/p").read_bytes())
    # the solver's state: the hot lid is on the last rank, heat has not reached rank 0's end
    assert p1.max() > p0.max() >= 0


# ------------------------------------------------------------------ sizes


@pytest.mark.parametrize("fmt", ["binary", "ascii"])
def test_sizes_match_the_formula(tmp_path, fmt):
    cells = 777
    count = foam.write_uncollated(tmp_path, "12", 12, fields(cells), fmt)
    per_value = {"binary": (8, 24), "ascii": (16, 50)}[fmt]  # scalar, vector (x, y, z)
    total = 0
    for name in FIELD_NAMES:
        data = (tmp_path / "12" / name).read_bytes()
        total += len(data)
        values = cells * (3 if name == "phi" else 1)
        width = per_value[1] if name == "U" else per_value[0]
        start = data.index(b"\n(", data.index(b"internalField")) + 2 + (fmt == "ascii")
        end = data.index(b")\n;", start)
        assert end - start == values * width == foam.payload_bytes(name, cells, fmt)
        assert len(data) == foam.field_file_bytes(name, cells, fmt, "12")
    for rel in ("uniform/time", "uniform/functionObjects/functionObjectProperties"):
        total += (tmp_path / "12" / rel).stat().st_size
    assert count.bytes == total == foam.rank_write_bytes(cells, fmt, "12", 12)
    payload = cells * (80 if fmt == "binary" else 4 * 16 + 3 * 16 + 50)
    assert payload == cells * foam.approx_bytes_per_cell(fmt)
    assert 0 < total - payload < 8000  # headers and boundaries: small and fixed


@pytest.mark.parametrize("fmt", ["binary", "ascii"])
def test_values_read_back(tmp_path, fmt):
    data = fields(300, rank=3)
    foam.write_uncollated(tmp_path, "1", 1, data, fmt)
    for name in FIELD_NAMES:
        _, values = foam.read_field((tmp_path / "1" / name).read_bytes())
        np.testing.assert_allclose(values.ravel(), np.ravel(data[name]), rtol=1e-8, atol=1e-99)


def test_fixed_width_numbers_are_exact_width_and_close():
    rng = np.random.default_rng(7)
    values = rng.standard_normal(20000) * 10.0 ** rng.integers(-120, 120, 20000)
    values[:6] = [0.0, 1.0, -1.0, 9.999999999e-3, 1e-100, 1e101]
    text = foam.fixed_width(values).tobytes().decode()
    numbers = np.array([float(text[i : i + 15]) for i in range(0, len(text), 15)])
    assert len(text) == 15 * values.size
    shown = np.where(np.abs(values) < 1e-99, 0, np.clip(values, -9.99999999e99, 9.99999999e99))
    np.testing.assert_allclose(numbers, shown, rtol=6e-9)


def test_bytes_per_rank_sets_the_cells():
    params = {**PARAMS, "bytes_per_rank": "40MB"}
    del params["cells_per_rank"]
    assert cfd_proxy.cells_per_rank(params) == 500_000  # 40e6 B / 80 B per cell
    ascii_params = {**params, "write_format": "ascii"}
    assert cfd_proxy.cells_per_rank(ascii_params) == 40_000_000 // 162  # 50 + 4 x 16 + 3 x 16


# ------------------------------------------------------------------ purgeWrite


def test_purge_write_keeps_exactly_the_newest(tmp_path):
    kept, removed = [], foam.WriteCount()
    for step in range(1, 6):
        foam.write_uncollated(tmp_path, str(step), step, fields(50), "binary")
        kept.append(str(step))
        removed.add(foam.purge(tmp_path, kept, 2))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["4", "5"]
    assert kept == ["4", "5"]
    assert removed.files_removed == 3 * 8 and removed.dirs_removed == 3 * 3
    assert foam.purge(tmp_path, kept, 0).files_removed == 0  # 0 keeps everything


# ------------------------------------------------------------------ collated


def test_collated_file_holds_every_rank_block(tmp_path):
    blocks, expected = {}, {}
    for rank in range(3):
        for name in FIELD_NAMES:
            data = b"".join(
                bytes(p) for p in foam.field_parts(name, fields(40, rank)[name], "binary", "5")
            )
            blocks.setdefault(name, []).append(data)
            expected.setdefault(name, []).append(data)
    (tmp_path / "processors3").mkdir()
    count = foam.write_collated(tmp_path / "processors3", "5", 5, blocks, "binary")
    assert (count.files, count.dirs) == (8, 3)
    for name in FIELD_NAMES:
        head, found = foam.read_collated((tmp_path / "processors3/5" / name).read_bytes())
        assert head["class"] == "decomposedBlockData" and head["object"] == name
        assert found == expected[name]
        for rank, block in enumerate(found):
            _, values = foam.read_field(block)
            np.testing.assert_array_equal(values.ravel(), np.ravel(fields(40, rank)[name]))


@needs_mpi
def test_collated_two_rank_run_with_purge(tmp_path):
    params = {**PARAMS, "file_handler": "collated", "write_interval": 1, "purge_write": 2}
    params["write_format"] = "ascii"
    case, result = run_writer(tmp_path, 2, cfd_proxy.writer_config(params))
    assert sorted(p.name for p in (case / "processors2").iterdir()) == ["5", "6"]
    assert not list(case.glob("processor[0-9]*"))
    assert result["files_created"] == 6 * 8 and result["dirs_created"] == 6 * 3
    assert result["files_removed"] == 4 * 8 and result["problems"] == []
    for name in FIELD_NAMES:
        _, blocks = foam.read_collated((case / "processors2/6" / name).read_bytes())
        assert len(blocks) == 2
        for rank, block in enumerate(blocks):
            head, values = foam.read_field(block)
            assert head["format"] == "ascii" and head["object"] == name
            if name in ("k", "U", "phi"):
                np.testing.assert_allclose(
                    values.ravel(), np.ravel(cfd_writer.static_fields(1500, rank)[name]), rtol=1e-8
                )


# ------------------------------------------------------------------ the workload


def spec(tier_path, **params):
    return job_spec(
        "cfd_proxy", tier_path, {**PARAMS, **params}, experiment="cfd", launcher="mpiexec"
    )


def by_name(record):
    return {m["metric"]: m for m in record["metrics"]}


@needs_mpi
def test_ensemble_run_stays_in_its_run_folder(tmp_path, monkeypatch):
    tier, cwd = tmp_path / "tier", tmp_path / "cwd"
    tier.mkdir()
    cwd.mkdir()
    (tier / "users-file.txt").write_text("keep me")
    monkeypatch.chdir(cwd)
    kept = []
    monkeypatch.setattr("tierbench.runner.RunFolder.__exit__", lambda self, *a: kept.append(self))
    record = run_job(spec(tier, ensemble=2, steps=4, write_interval=1), cfd_proxy.run)
    metrics = by_name(record)
    assert metrics["files_created"]["value"] == 2 * 2 * 4 * 8  # members x ranks x writes x 8
    assert metrics["dirs_created"]["value"] == 2 * 2 * 4 * 3
    assert metrics["bytes_written"]["value"] == 4 * metrics["bytes_per_write"]["value"]
    for name in ("time_per_step", "time_per_step_write", "write_phase_time"):
        assert metrics[name]["unit"] == "s" and metrics[name]["value"] > 0
    assert metrics["write_phase_bandwidth"]["unit"] == "MB/s"
    assert "time_per_step_nowrite" not in metrics  # every step writes
    assert record["extra"]["launcher"] == "mpiexec" and len(record["extra"]["members"]) == 2
    # everything the run made is inside its own run folder; nothing next to it or in the cwd
    (folder,) = kept
    assert sorted(p.name for p in tier.iterdir()) == sorted(["users-file.txt", folder.path.name])
    assert (tier / "users-file.txt").read_text() == "keep me"
    assert list(cwd.iterdir()) == []
    assert {p.name for p in folder.path.iterdir()} >= {"member0", "member1", "gate"}
    rundir.remove_run_folder(folder.path)


@needs_mpi
def test_baseline_has_no_writes_and_runner_cli_records_the_launcher(tmp_path):
    (tmp_path / "tier").mkdir()
    out = tmp_path / "rec.json"
    point = spec(tmp_path / "tier", ranks=1, steps=3, write_interval="none")
    del point["launcher"]
    env = {**os.environ, "PYTHONPATH": str(REPO / "workflow")}
    done = subprocess.run(
        [sys.executable, "-m", "tierbench.runner", "--launcher", "mpiexec",
         "--spec", json.dumps(point), "--out", str(out)],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    record = json.loads(out.read_text())
    metrics = by_name(record)
    assert record["extra"]["launcher"] == "mpiexec" and record["spec"]["launcher"] == "mpiexec"
    assert metrics["files_created"]["value"] == 0 and metrics["bytes_written"]["value"] == 0
    assert metrics["time_per_step_nowrite"]["value"] == metrics["time_per_step"]["value"]
    assert "write_phase_time" not in metrics
    assert list((tmp_path / "tier").iterdir()) == []


def test_a_launcher_that_fails_is_a_failed_point_not_a_hang(tmp_path):
    record = run_job({**spec(tmp_path), "launcher": "false"}, cfd_proxy.run)
    (only,) = record["metrics"]
    assert only["status"] == "failed" and "member 0 exited with 1" in only["reason"]
    assert list(tmp_path.iterdir()) == []


def test_each_launch_gets_its_own_mpi_session_folder(tmp_path):
    """Concurrent mpiexec race for one /tmp session folder; each launch has its own."""
    seen = tmp_path / "seen"
    seen.mkdir()
    fake = tmp_path / "bin" / "mpiexec"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\necho "$OMPI_MCA_orte_tmpdir_base" > {seen}/$$\nexit 1\n')
    fake.chmod(0o755)
    (tmp_path / "tier").mkdir()
    record = run_job({**spec(tmp_path / "tier", ensemble=3), "launcher": str(fake)}, cfd_proxy.run)
    assert record["metrics"][0]["status"] == "failed"
    sessions = {p.read_text().strip() for p in seen.iterdir()}
    assert len(sessions) == 3 and all(s.startswith(tempfile.gettempdir()) for s in sessions)
    assert not any(os.path.exists(s) for s in sessions)  # removed after the run
    assert list((tmp_path / "tier").iterdir()) == []


def test_a_missing_launcher_is_a_failed_point(tmp_path):
    record = run_job({**spec(tmp_path), "launcher": "/nonexistent/mpiexec"}, cfd_proxy.run)
    (only,) = record["metrics"]
    assert only["status"] == "failed" and "is not installed" in only["reason"]
    assert list(tmp_path.iterdir()) == []


def test_more_bytes_than_the_tier_cap_fails_before_writing(tmp_path):
    params = {"cells_per_rank": 100_000, "steps": 10, "write_interval": 1}
    planned = cfd_proxy.planned_bytes({**PARAMS, **params})
    record = run_job({**spec(tmp_path, **params), "max_bytes": planned - 1}, cfd_proxy.run)
    (only,) = record["metrics"]
    assert only["status"] == "failed" and "max_bytes" in only["reason"]
    assert list(tmp_path.iterdir()) == []


def test_planned_bytes_counts_kept_time_folders():
    one = cfd_proxy.bytes_per_write({**PARAMS, "ranks": 1})
    assert cfd_proxy.bytes_per_write(PARAMS) == 2 * one
    assert cfd_proxy.planned_bytes({**PARAMS, "write_interval": "none"}) == 0
    everything = cfd_proxy.planned_bytes(PARAMS)  # 3 writes, all kept
    purged = cfd_proxy.planned_bytes({**PARAMS, "purge_write": 1})  # 2 at the peak
    assert everything > purged > 0 and everything * 2 == purged * 3


def test_wrong_counts_fail_the_point():
    result = {"files_created": 47, "dirs_created": 18, "writes": 3}
    with pytest.raises(PointFailed, match="created 47 files"):
        cfd_proxy.check_counts([result], cfd_proxy.with_defaults(PARAMS))
    totals = [{"files": 24, "dirs": 9, "bytes": 1, "files_removed": 0, "dirs_removed": 0}] * 2
    times = np.ones(6)
    ok = cfd_writer.summarise(cfd_proxy.writer_config(PARAMS), 2, times, times, totals, (48, 20), 1)
    assert ok["problems"] == []
    short = cfd_writer.summarise(
        cfd_proxy.writer_config(PARAMS), 2, times, times, totals[:1], (24, 10), 1
    )
    assert "layout needs 48 and 18" in short["problems"][0]


# ------------------------------------------------------------------ launcher


def test_launch_command_per_launcher():
    local = cfd_proxy.launch_command("mpiexec", 4, 1, local=True)
    assert local == ["mpiexec", "-n", "4", "--oversubscribe", "--bind-to", "none"]
    assert cfd_proxy.launch_command("mpiexec", 4, 1, local=False) == ["mpiexec", "-n", "4"]
    assert cfd_proxy.launch_command("srun --mpi=pmix", 8, 5, local=False) == [
        "srun", "--mpi=pmix", "-n", "8", "--exact",
    ]  # fmt: skip
    assert cfd_proxy.launch_command("srun --mpi=pmix", 8, 1, local=False)[-1] == "8"


def test_tasks_are_ranks_times_ensemble():
    assert cfd_proxy.tasks({"ranks": 4, "ensemble": 5}) == 20
    assert cfd_proxy.tasks({"ranks": 3}) == 3


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    "change, message",
    [
        ({"ranks": 0}, "ranks"),
        ({"write_interval": 0}, "write_interval"),
        ({"write_interval": 7}, "longer than the run"),
        ({"ensemble": 0}, "ensemble"),
        ({"bytes_per_rank": "1MB"}, "exactly one of cells_per_rank and bytes_per_rank"),
    ],
)
def test_bad_parameters_stop_with_a_message_naming_them(change, message):
    """The schema states types and ranges, check_params the cross-field rules; either way
    the expansion stops naming the parameter."""
    with pytest.raises(ConfigError, match=next(iter(change))):
        matrix.check_point("cfd_proxy", {**PARAMS, **change}, "cfd_dcpmm.x[p]")


def test_a_write_interval_longer_than_the_run_is_a_cross_field_rule():
    with pytest.raises(ValueError, match="longer than the run"):
        cfd_proxy.check_params({**PARAMS, "write_interval": 7})


def test_study_expands_at_every_scale():
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    study = matrix.load_study(REPO / "config/studies/cfd_dcpmm.yaml", config)
    tiers = matrix.resolve_tiers(config, REPO / "config/hardware", "/tmp")
    smoke = matrix.expand_study(study, tiers, "smoke")
    assert {p.tier for p in smoke} == {"shm", "disk"}
    intervals = {p.params["write_interval"] for p in smoke if p.experiment == "single_vs_ensemble"}
    assert intervals == {1, "none"}
    assert len([p for p in smoke if p.experiment in ("single_vs_ensemble", "file_handler")]) <= 10
    default = matrix.expand_study(study, tiers, "default")
    main = [p for p in default if p.experiment == "single_vs_ensemble"]
    assert {p.params["write_interval"] for p in main} == {1, 10, 100, "none"}
    assert {p.params["ensemble"] for p in main} == {1, 2}
    assert all(cfd_proxy.tasks(p.params) <= 2 for p in default)  # fits this 2-core machine
    full = matrix.expand_study(study, tiers, "full")
    top = [p for p in full if p.experiment == "single_vs_ensemble"]
    assert {p.params["ensemble"] for p in top} == {1, 5}
    assert {p.params["ranks"] for p in top} == {192}
    # document 001: about 40 MB per rank per write
    per_rank = cfd_proxy.bytes_per_write({**top[0].params, "ensemble": 1, "ranks": 1})
    assert 36e6 < per_rank < 42e6


# ------------------------------------------------------------------ end to end


@pytest.mark.e2e
@needs_mpi
def test_smoke_study_end_to_end(pipeline):
    import pandas as pd

    pipeline("-c2", "--configfile", "config/studies/cfd_dcpmm.yaml", "--config", "scale=smoke")
    study = pipeline.root / "results/testbox/cfd_dcpmm"
    summary = pd.read_csv(study / "summary.csv")
    assert set(summary["status"]) == {"ok"}, summary[summary["status"] != "ok"]["reason"]
    steps = summary[summary["metric"] == "time_per_step"]
    assert set(steps["tier"]) == {"shm", "disk"} and set(steps["ensemble"]) == {1, 2}
    files = summary[summary["metric"] == "files_created"].set_index(
        ["tier", "experiment", "ensemble", "write_interval"]
    )["median"]
    # 1 rank x 20 writes x 8 files per member; collated: 20 writes x 8 files
    assert files[("shm", "single_vs_ensemble", 1, "1")] == 20 * 8
    assert files[("disk", "single_vs_ensemble", 2, "1")] == 2 * 20 * 8
    assert files[("shm", "file_handler", 1, "1")] == 20 * 8
    assert files[("shm", "single_vs_ensemble", 1, "none")] == 0
    # same-run relation, not a speed: writing every step costs time on every tier
    main = steps[steps["experiment"] == "single_vs_ensemble"]
    for (tier, ensemble), group in main.groupby(["tier", "ensemble"]):
        if "none" in set(group["write_interval"]) and "1" in set(group["write_interval"]):
            by = group.set_index("write_interval")["median"]
            assert by["1"] > by["none"], (tier, ensemble)
    manifest = json.loads((study / "figures/cfd/manifest.json").read_text())
    names = {entry["name"] for entry in manifest}
    assert names == {
        "cfd_time_per_step", "cfd_single_vs_ensemble_ranks1", "cfd_bandwidth", "cfd_file_handler",
    }  # fmt: skip
    assert all(entry["caption"] for entry in manifest)
    assert (study / "figures/cfd/cfd_bandwidth.csv").is_file()
    assert (pipeline.root / "results/testbox/report.html").is_file()
