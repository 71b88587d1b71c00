"""What jobs ask a cluster for, and what a job does on the wrong partition (no Slurm needed)."""

import pytest
from conftest import job_spec
from tierbench import cluster, matrix, preflight
from tierbench.runner import run_job


def test_mpi_launcher_follows_the_executor_and_the_job(monkeypatch):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    assert cluster.mpi_launcher("local", {}) == "mpiexec"
    assert cluster.mpi_launcher(None, {}) == "mpiexec"
    assert cluster.mpi_launcher("slurm", {}) == "srun --mpi=pmix"
    assert cluster.mpi_launcher("slurm-jobstep", {}) == "srun --mpi=pmix"
    # the shell command of a Slurm job is formatted by a local executor inside the job
    monkeypatch.setenv("SLURM_JOB_ID", "17")
    assert cluster.mpi_launcher("local", {}) == "srun --mpi=pmix"
    assert cluster.mpi_launcher("local", {"mpi": "srun --mpi=pmi2"}) == "srun --mpi=pmi2"


def test_runtime_and_memory():
    assert cluster.runtime_minutes(None) == cluster.DEFAULT_RUNTIME_MIN
    assert cluster.runtime_minutes(1) == 5
    assert cluster.runtime_minutes(600) == 22  # (2 x 600 + 120) / 60
    gib = 1024**3
    assert cluster.memory_mb(0) == cluster.BASE_MEM_MB
    assert cluster.memory_mb(gib) == pytest.approx(cluster.BASE_MEM_MB + 1.1 * gib / 1e6, abs=1)
    # capped at 90% of the node: the node's page cache limit is the one a study means
    assert cluster.memory_mb(100 * gib, node_memory_bytes=32 * gib) == int(0.9 * 32 * gib / 1e6) + 1
    assert cluster.slurm_extra(True) == "--exclusive" and cluster.slurm_extra(False) == ""


def test_missing_partitions():
    known = frozenset({"debug", "nvme"})
    assert cluster.missing_partitions("nvme", known) == []
    assert cluster.missing_partitions("nvme,gpu", known) == ["gpu"]
    assert cluster.missing_partitions("gpu", None) == []  # Slurm cannot be asked: no claim
    assert cluster.missing_partitions(None, known) == []


def test_partition_of_hardware_file_reaches_tiers_and_spec(tmp_path):
    (tmp_path / "c.yaml").write_text(
        "name: c\ncores: 4\nmemory: 8GiB\nscheduler: slurm\npartition: batch\n"
        "tiers:\n  a: {path: /dev/shm, class: shm}\n"
        "  b: {path: /tmp, class: tmpfs, partition: fat}\n"
    )
    tiers = matrix.resolve_tiers({"tiers": {}, "hardware": "c"}, tmp_path, str(tmp_path))
    assert tiers["a"]["partition"] == "batch" and tiers["b"]["partition"] == "fat"
    point = matrix.Point("s", "e", "fio", "b", "single", {})
    assert matrix.run_spec(point, tiers["b"], 1)["slurm_partition"] == "fat"
    # without a partition the spec is as before (no rerun of existing results)
    plain = matrix.run_spec(point, {"path": "/x", "class": "shm"}, 1)
    assert "slurm_partition" not in plain


def spec(tmp_path, partition):
    return job_spec(
        "fio",
        tmp_path,
        {},
        study="s",
        experiment="e",
        tier="t",
        point="single",
        description="",
        slurm_partition=partition,
    )


def test_job_in_a_partition_that_does_not_exist_records_the_reason(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    monkeypatch.setenv("SLURM_JOB_PARTITION", "debug")
    monkeypatch.setattr(cluster, "slurm_partitions", lambda: frozenset({"debug"}))
    ran = []
    record = run_job(spec(tmp_path, "nvme"), lambda job: ran.append(job) or [])
    assert not ran
    (metric,) = record["metrics"]
    assert metric["status"] == "failed"
    assert "Slurm partition 'nvme' (tier t) does not exist" in metric["reason"]
    assert "partitions: debug" in metric["reason"]


def test_job_in_its_partition_or_outside_slurm_runs(tmp_path, monkeypatch):
    from tierbench.records import metric

    def run(job):
        return [metric("x", 1, "s")]

    monkeypatch.setenv("SLURM_JOB_ID", "42")
    monkeypatch.setenv("SLURM_JOB_PARTITION", "nvme")
    assert run_job(spec(tmp_path, "debug,nvme"), run)["metrics"][0]["status"] == "ok"
    monkeypatch.delenv("SLURM_JOB_ID")
    monkeypatch.delenv("SLURM_JOB_PARTITION")
    assert run_job(spec(tmp_path, "nvme"), run)["metrics"][0]["status"] == "ok"


def test_preflight_in_a_slurm_job_defers_node_local_tiers(tmp_path, monkeypatch):
    afile = tmp_path / "a-file"
    afile.write_text("x")
    tiers = {
        "local": {"path": str(afile / "sub"), "class": "disk"},
        "shared": {"path": str(afile / "sub2"), "class": "nfs", "shared": True},
    }
    points = [{"workload": "fio", "tier": name, "params": {"size": "1MiB"}} for name in tiers]
    spec = {"study": "s", "tiers": tiers, "points": points, "safety_factor": 1.2}
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    assert len(preflight.run_preflight(spec)["problems"]) == 2
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    result = preflight.run_preflight(spec)
    assert [p.split(":")[0] for p in result["problems"]] == ["tier shared"]
    assert any("tier local" in w and "its own node" in w for w in result["warnings"])


def test_a_rank_started_inside_a_job_step_overlaps_it(monkeypatch):
    """A one-task job runs in a step that holds its CPUs: a new step must share them."""
    from tierbench.workloads.cfd import cfd_launch

    monkeypatch.setenv("SLURM_STEP_ID", "0")
    assert cfd_launch.launch_command("srun --mpi=pmix", 1, 1, local=False)[-1] == "--overlap"
    assert "--overlap" not in cfd_launch.launch_command("mpiexec", 1, 1, local=True)
    for outside in ("batch", ""):
        monkeypatch.setenv("SLURM_STEP_ID", outside)
        assert "--overlap" not in cfd_launch.launch_command("srun --mpi=pmix", 2, 1, local=False)
    monkeypatch.delenv("SLURM_STEP_ID")
    assert "--overlap" not in cfd_launch.launch_command("srun --mpi=pmix", 2, 1, local=False)


def fake_slurm(folder, sinfo_exit: int, message: str = ""):
    """sbatch and sinfo on PATH that print `message` to stderr and exit with `sinfo_exit`."""
    folder.mkdir(exist_ok=True)
    for name in ("sbatch", "sinfo"):
        tool = folder / name
        tool.write_text(f"#!/bin/sh\necho '{message}' >&2\necho 'debug*'\nexit {sinfo_exit}\n")
        tool.chmod(0o755)
    return folder


@pytest.fixture
def fresh_slurm_answers(monkeypatch):
    """No Slurm answer or failure remembered from another test."""
    cluster.slurm_partitions.cache_clear()
    monkeypatch.setattr(cluster, "_LAST_FAILURE", {})
    yield
    cluster.slurm_partitions.cache_clear()


@pytest.mark.usefixtures("fresh_slurm_answers")
def test_slurm_problem_says_why_jobs_cannot_be_submitted(tmp_path, monkeypatch):
    monkeypatch.delenv("SLURM_CONF", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert cluster.slurm_problem() == "sbatch is not on PATH"

    failing = fake_slurm(tmp_path / "down", 1, "sinfo: error: Unable to contact slurm controller")
    monkeypatch.setenv("PATH", str(failing))
    assert cluster.slurm_problem() == (
        "Slurm does not answer: sinfo: error: Unable to contact slurm controller"
    )

    cluster.slurm_partitions.cache_clear()
    monkeypatch.setenv("PATH", str(fake_slurm(tmp_path / "up", 0)))
    assert cluster.slurm_problem() is None
    assert cluster.slurm_partitions() == frozenset({"debug*"})

    # a slurm.conf that is not there: Slurm's commands would retry for a minute, so none is run
    cluster.slurm_partitions.cache_clear()
    gone = tmp_path / "gone" / "slurm.conf"
    monkeypatch.setenv("SLURM_CONF", str(gone))
    assert cluster.slurm_problem() == f"SLURM_CONF names {gone}, which does not exist"
    assert cluster.slurm_partitions() is None
