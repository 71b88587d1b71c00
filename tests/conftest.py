"""Shared fixtures: the repository, and running the pipeline in a scratch copy."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
sys.path.insert(0, str(REPO / "workflow"))
from tierbench.matrix import complete  # noqa: E402

#: the machine every test run's results belong to (results/testbox/<study>/), whatever the host
MACHINE = "testbox"
os.environ["TIERBENCH_MACHINE"] = MACHINE

#: what a scratch copy of the pipeline needs (results/ and .snakemake/ stay behind)
PIPELINE_FILES = ["Snakefile", "workflow", "config", "notebooks", "profiles", "envs"]


#: test files that start the machine's one minicluster, which a lock lets one process hold
CLUSTER_FILES = {"test_minicluster.py", "test_slurm.py"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The cluster's test files first: the worker that takes them is busy longest."""
    items.sort(key=lambda item: item.path.name not in CLUSTER_FILES)


def pytest_xdist_make_scheduler(config, log):
    """A test file per worker at a time (its module fixtures are made once), and every
    cluster file on one worker, in a row: spread over two workers, the second would wait
    for the first's lock with its core idle for minutes."""
    from xdist.scheduler import LoadFileScheduling

    class ClusterFilesTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            return "minicluster" if Path(scope).name in CLUSTER_FILES else scope

    return ClusterFilesTogether(config, log)


def snakemake_command() -> list[str]:
    """Snakemake under this Python; a skip (outside CI) where Snakemake cannot use its path."""
    if shlex.quote(sys.executable) != sys.executable:
        reason = (
            f"Snakemake cannot run the pipeline with the Python at {sys.executable!r} "
            "(snakemake/snakemake#3211): clone to a path without spaces or quotes"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return [sys.executable, "-m", "snakemake"]


@pytest.fixture
def pipeline(tmp_path: Path):
    """A copy of the pipeline in a temporary folder and a function that runs snakemake there."""
    return pipeline_copy(tmp_path / "tierbench")


def pipeline_copy(root: Path, command: list[str] | None = None):
    """A copy of the pipeline in ``root`` and a function that runs snakemake there (or
    ``command``, a Snakemake of the caller's)."""
    root.mkdir()
    for name in PIPELINE_FILES:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, root / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, root / name)

    def run(*args: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess:
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        argv = [*(command or snakemake_command()), *args]
        # its own session: a run out of time is stopped with every benchmark it started
        child = subprocess.Popen(
            argv, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=env, start_new_session=True,
        )  # fmt: skip
        try:
            stdout, stderr = child.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            stdout, stderr = child.communicate()
            raise AssertionError(
                f"snakemake {' '.join(args)} still ran after {timeout:.0f} s; its output's end:\n"
                f"{stderr[-3000:]}\nthe benchmark logs written last:\n{latest_logs(root)}"
            ) from None
        done = subprocess.CompletedProcess(argv, child.returncode, stdout, stderr)
        if check and done.returncode != 0:
            raise AssertionError(
                f"snakemake {' '.join(args)} failed ({done.returncode}):\n"
                f"{done.stdout[-4000:]}\n{done.stderr[-6000:]}"
            )
        return done

    run.root = root
    return run


def job_stats(output: str) -> dict[str, int]:
    """The jobs a run plans, by rule: the "Job stats" table of Snakemake's output."""
    return {rule: int(n) for rule, n in re.findall(r"^(\w+)\s+(\d+)$", output, re.MULTILINE)}


def latest_logs(root: Path, count: int = 3) -> str:
    """The ends of the logs a run wrote last: which job it was in when it was stopped."""
    logs = sorted(root.glob("results/*/*/logs/**/*.log"), key=lambda p: p.stat().st_mtime)
    return "\n".join(
        f"{log.relative_to(root)}:\n" + "\n".join(log.read_text().splitlines()[-5:])
        for log in logs[-count:]
    )


#: CI=true: the real solvers' tests must run, a missing solver fails them instead of skipping
IN_CI = os.environ.get("CI", "").lower() == "true"


@pytest.fixture
def ccx():
    """The real solver, or a skip saying how to install it; under CI=true a missing one fails."""
    if shutil.which("ccx") is None:
        reason = "ccx is not installed; install it with: sudo apt-get install -y calculix-ccx"
        if IN_CI:
            pytest.fail(f"CI=true: the CalculiX tests must run, but {reason}")
        pytest.skip(reason)
    return shutil.which("ccx")


def need_cpus(count: int, what: str) -> None:
    """Skip a test that needs ``count`` CPUs where this process may use fewer (its
    affinity: taskset, a cgroup cpuset), except under CI=true, where it runs."""
    usable = len(os.sched_getaffinity(0))
    if usable < count and os.environ.get("CI") != "true":
        pytest.skip(f"{what} needs {count} CPUs; this process may use {usable}")


def job_spec(workload: str, tier_path, params: dict, **fields) -> dict:
    """The spec a workload runner gets for one job (as matrix.run_spec makes it), for tests:
    the schema's defaults filled in, as the pipeline does."""
    return {
        "study": "t",
        "experiment": workload,
        "workload": workload,
        "tier": "scratch",
        "tier_path": str(tier_path),
        "tier_class": "disk",
        "max_bytes": None,
        "point": "p",
        "params": complete(workload, params),
        "repetition": 1,
        "phase": "measured",
        **fields,
    }


def fixture_text(name: str) -> str:
    """A captured output exactly as the tool wrote it (no newline translation: pv's "\r")."""
    with open(FIXTURES / name, newline="") as handle:
        return handle.read()


def study_for_report(study: Path, frame, tier_names) -> None:
    """What report.render reads of a study: results.csv, summary.csv and the tiers' provenance."""
    from tierbench import aggregate

    (study / "provenance").mkdir(parents=True, exist_ok=True)
    frame.to_csv(study / "results.csv", index=False)
    aggregate.summarise(frame.assign(reason=""), 0.25).to_csv(study / "summary.csv", index=False)
    host = {"host": "h", "cpu_model": "c", "cores": 2, "memory_bytes": 1, "os": "o", "kernel": "k"}
    tiers = {t: {"class": t, "path": f"/{t}", "block_device": {}} for t in tier_names}
    (study / "provenance/tiers.json").write_text(
        json.dumps({"host": host, "tools": {"fio": "fio-3.33"}, "tiers": tiers})
    )


def load_json(path: Path) -> dict:
    return json.loads(Path(path).read_text())
