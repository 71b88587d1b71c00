"""Bad configuration stops `snakemake -n` before any job, naming the key."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO, job_stats
from tierbench.workloads import registry


def test_dry_run_lists_the_default_study(pipeline):
    done = pipeline("-n", "--config", "scale=smoke")
    for rule in ("preflight", "probe", "fio", "aggregate", "figures", "report"):
        assert rule in done.stdout, rule


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--config", "no_such_key=1"], "no_such_key"),
        (["--config", "repetitions=zero"], "repetitions"),
        (["--config", "repetitions=0"], "repetitions"),
        (["--config", "scale=huge"], "scale"),
        (["--config", "hardware=no_such_machine"], "no_such_machine"),
    ],
)
def test_bad_config_names_the_key(pipeline, args, named):
    """In the run's last line, not above a traceback or a dump of the configuration."""
    done = pipeline("-n", *args, check=False)
    assert done.returncode != 0
    assert named in done.stderr.strip().splitlines()[-1], done.stderr[-2000:]
    assert "Job stats" not in done.stdout + done.stderr  # stopped before scheduling anything


@pytest.mark.skipif(sys.prefix == sys.base_prefix, reason="needs a venv to reach by another path")
def test_a_python_path_with_a_space_stops_before_any_job_saying_why(pipeline, tmp_path):
    """Snakemake runs a local `run:` job with its Python's path unquoted: from a clone in
    "/tmp/x y" every run died at its first job with "/bin/sh: 1: /tmp/x: not found"."""
    venv = tmp_path / "a venv"
    venv.symlink_to(sys.prefix)  # the same venv, by a path with a space
    python = venv / "bin" / Path(sys.executable).name
    done = subprocess.run(
        [str(python), "-m", "snakemake", "-n", "--config", "scale=smoke"],
        cwd=pipeline.root,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    output = done.stdout + done.stderr
    assert done.returncode != 0, output[-2000:]
    assert f"with the Python at '{python}'" in output and "snakemake/snakemake#3211" in output
    assert "Job stats" not in output


def test_bad_experiment_value_names_the_point(pipeline, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "experiments:\n"
        "  - name: tiny\n"
        "    workload: fio\n"
        "    tiers: [shm]\n"
        "    params: {rw: write, block_size: 10M, io_mode: buffered, size: 1M, runtime: 1}\n"
    )
    done = pipeline("-n", "--configfile", str(bad), check=False)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert "tiny" in last and "block_size 10M is larger than the file size 1M" in last, last


def test_unknown_tier_in_experiment(pipeline, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "experiments:\n"
        "  - name: tiny\n"
        "    workload: fio\n"
        "    tiers: [lustre_scratch]\n"
        "    params: {rw: write, block_size: 4k, io_mode: buffered, size: 1M, runtime: 1}\n"
    )
    done = pipeline("-n", "--configfile", str(bad), check=False)
    assert done.returncode != 0 and "lustre_scratch" in done.stderr.strip().splitlines()[-1]


def job_fields(output: str, rule: str) -> list[dict]:
    """The `key: value` lines of every job of a rule in a dry run's listing."""
    found = []
    for block in output.split("\nrule ")[1:]:
        if block.startswith(f"{rule}:"):
            lines = block.split("\n\n")[0].splitlines()[1:]
            found.append(dict(li.strip().split(": ", 1) for li in lines if ": " in li))
    return found


def job_resources(output: str, rule: str) -> list[dict]:
    """The `resources:` line of every job of a rule in a dry run's listing, parsed."""
    return [
        dict(pair.split("=", 1) for pair in job["resources"].split(", "))
        for job in job_fields(output, rule)
    ]


def test_job_resources_with_and_without_partitions_and_exclusive(pipeline, tmp_path):
    """Resources that vary by job are functions, the others plain values: both reach the jobs."""
    listing = pipeline("-n", "--config", "scale=smoke").stdout
    plain = job_resources(listing, "fio")
    assert plain and all(
        r["bench"] == "1" and r["slurm_partition"] == "" and r["slurm_extra"] == "" for r in plain
    )
    # one Jupyter kernel starting at a time: two at once may bind the same port
    figures = job_resources(listing, "figures")
    assert figures and all(r["notebook"] == "1" for r in figures)
    assert all(int(r["runtime"]) >= 1 and int(r["mem_mb_per_cpu"]) > 0 for r in plain)

    partitioned = tmp_path / "partitioned.yaml"
    partitioned.write_text(
        "exclusive: true\n"
        "tiers:\n"
        "  shm: {path: /dev/shm, class: shm, max_bytes: 2GiB, partition: fat}\n"
        "  disk: {path: results/scratch, class: disk, max_bytes: 2GiB}\n"
        "  void: {path: /dev/null, class: void}\n"
    )
    done = pipeline("-n", "--configfile", str(partitioned), "--config", "scale=smoke")
    jobs = job_resources(done.stdout, "fio")
    assert {r["slurm_partition"] for r in jobs} == {"fat", ""}  # shm's points, disk's
    # exclusive nodes: whole nodes asked for; locally still one benchmark at a time
    assert all(r["slurm_extra"] == "--exclusive" and r["bench"] == "1" for r in jobs)


def job_threads(output: str, rule: str) -> list[int]:
    """Threads of each job of ``rule`` in a dry run's output (1 where none is printed)."""
    return [int(job.get("threads", 1)) for job in job_fields(output, rule)]


def test_a_local_benchmark_holds_every_core_so_no_figure_job_runs_beside_it(pipeline, tmp_path):
    """Locally, one benchmark at a time and nothing else beside it; `exclusive` lets
    benchmarks run side by side, so there each keeps its own threads."""
    done = pipeline("-n", "-c3", "--config", "scale=smoke").stdout
    assert set(job_threads(done, "fio")) == {3}
    assert set(job_threads(done, "plan")) == {1}
    exclusive = tmp_path / "exclusive.yaml"
    exclusive.write_text("exclusive: true\n")
    done = pipeline("-n", "-c3", "--configfile", str(exclusive), "--config", "scale=smoke").stdout
    assert set(job_threads(done, "fio")) == {1}


def test_a_slurm_plan_lists_its_allocations_within_the_sites_limits(pipeline):
    """Under Slurm a study is a few allocations: the dry run and plan.json list them, none
    longer than the hardware file's `at_most`, and each one Snakemake job group."""
    hardware = yaml.safe_load((pipeline.root / "config/hardware/minicluster.yaml").read_text())
    hardware.update(name="site", nodes=2, allocations={"at_most": "5min", "at_least": "30min"})
    (pipeline.root / "config/hardware/site.yaml").write_text(yaml.safe_dump(hardware))
    done = pipeline("-n", "--config", "scale=smoke", "hardware=site")
    output = done.stdout + done.stderr
    listed = re.findall(r"  (default-round1-\d+): .*?, (\d+) min, (\d+) jobs of", output)
    assert len(listed) > 1 and all(int(minutes) <= 5 for _, minutes, _ in listed), output
    benchmarks = sum(n for rule, n in job_stats(output).items() if rule in registry())
    assert sum(int(jobs) for _, _, jobs in listed) == benchmarks > 0  # each job once
    groups = set(re.findall(r"Group job (default-round1-\d+)", output))
    assert groups == {name for name, _, _ in listed}
    assert "below the 30 min the hardware file asks for" in output


def test_a_slurm_run_whose_cluster_is_not_up_stops_before_any_job_saying_why(pipeline, tmp_path):
    """The cluster on this machine down: its slurm.conf is gone, and every Slurm command
    retried for a minute; the run failed its first job 5 minutes in, with no reason."""
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "sbatch").write_text("#!/bin/sh\nexit 1\n")
    (tools / "sbatch").chmod(0o755)
    hardware = yaml.safe_load((pipeline.root / "config/hardware/minicluster.yaml").read_text())
    gone = tmp_path / "slurm.conf"
    hardware.update(name="site", path=[str(tools)], env={"SLURM_CONF": str(gone)})
    (pipeline.root / "config/hardware/site.yaml").write_text(yaml.safe_dump(hardware))
    (pipeline.root / "slurm").symlink_to((REPO / "slurm").readlink())
    done = pipeline("--profile", "slurm", "--config", "scale=smoke", "hardware=site", check=False)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1] == (
        f"Cannot submit to Slurm: SLURM_CONF names {gone}, which does not exist "
        "(run where sbatch and sinfo work, or without --profile slurm)."
    ), done.stderr[-2000:]
    assert not (pipeline.root / "results/site/default/plan.json").exists()  # no job ran


def test_the_full_paper_on_a_slurm_site_is_a_few_dozen_jobs(pipeline, monkeypatch):
    """Document 001's machine at full scale: 970 jobs, of which only allocations and each
    study's set-up reach the queue (a job a repetition was 900), none of a day or more."""
    monkeypatch.setenv("USER", "someone")  # nextgenio's tier paths name $USER and $HOME
    monkeypatch.setenv("HOME", "/home/someone")
    done = pipeline("-n", "paper", "--config", "scale=full", "hardware=nextgenio")
    output = done.stdout + done.stderr
    groups = re.findall(r"Group job (\S+) ", output)
    assert 5 < len(groups) <= 40, len(groups)
    assert sum(name.endswith("-setup") for name in groups) == 5
    minutes = [int(m) for m in re.findall(r"  \S+-round1-\d+: .*?, (\d+) min, ", output)]
    assert len(minutes) == len(groups) - 5 and max(minutes) <= 24 * 60
    # every benchmark, preflight and probe is in a group (listed indented below it)
    queued = set(re.findall(r"^rule (\w+):", output, re.MULTILINE))
    benchmarks = {"fio", "dd", "pv", "stream", "fe_proxy", "calculix", "cfd_proxy", "openfoam"}
    assert not queued & (benchmarks | {"preflight", "probe", "stage"}), queued
