"""Never touch what it did not write; a full tier fails one point, not the run.

These run the real pipeline (fio on tiny sizes) against tier folders that hold
a user's files, and check those files byte for byte afterwards: after a good
run, after a run with failed points, and after a run killed with SIGKILL and
resumed with --rerun-incomplete.
"""

import contextlib
import hashlib
import os
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
from conftest import snakemake_command

pytestmark = pytest.mark.e2e


def fill_with_user_files(folder: Path) -> dict:
    (folder / "project" / "data").mkdir(parents=True)
    (folder / "project" / "data" / "mesh.bin").write_bytes(os.urandom(200_000))
    (folder / "notes.txt").write_text("do not delete\n")
    (folder / "tierbench-mine").mkdir()  # looks like ours, has no marker
    (folder / "tierbench-mine" / "keep.txt").write_text("mine\n")
    return digest(folder)


def digest(folder: Path) -> dict:
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def write_config(path: Path, tiers: dict, params: dict, experiment_tiers: list) -> Path:
    import yaml

    config = {
        "study": "safety",
        "repetitions": 1,
        "warmup": False,
        "tiers": tiers,
        "experiments": [
            {"name": "seq", "workload": "fio", "tiers": experiment_tiers, "params": params}
        ],
    }
    path.write_text(yaml.safe_dump(config))
    return path


#: the tests that need no figures stop at the summary table
SUMMARY = "results/testbox/safety/summary.csv"
BASE_PARAMS = {"rw": "write", "block_size": "1M", "io_mode": "buffered", "runtime": 1}


def test_user_files_survive_a_run_with_failed_points(pipeline, tmp_path):
    users = tmp_path / "users"
    users.mkdir()
    before = fill_with_user_files(users)
    config = write_config(
        tmp_path / "c.yaml",
        {"users": {"path": str(users), "class": "disk", "max_bytes": "2MiB"}},
        {**BASE_PARAMS, "size": ["1MiB", "4MiB"]},
        ["users"],
    )
    pipeline("-c1", "--configfile", str(config))
    assert digest(users) == before
    summary = pd.read_csv(pipeline.root / "results/testbox/safety/summary.csv")
    status = summary.drop_duplicates("point").set_index("point")["status"]
    assert status["size=1MiB"] == "ok" and status["size=4MiB"] == "failed"
    failed = summary[summary["status"] == "failed"].iloc[0]
    assert "max_bytes" in failed["reason"]
    html = (pipeline.root / "results/testbox/report.html").read_text()
    assert "Points without a number" in html and "max_bytes" in html


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
        except OSError:
            continue
        if int(stat.rpartition(")")[2].split()[1]) == pid:  # after "(comm)": state, ppid
            found.append(int(proc.name))
    return found


def kill_tree(root: int) -> None:
    """SIGKILL ``root`` and every process under it, as a scheduler kills a job: all of them
    stopped first, so none sees another die (a job cleaning up after its fio was killed)."""
    stopped, waiting = [], [root]
    while waiting:
        pid = waiting.pop()
        try:
            os.kill(pid, signal.SIGSTOP)
        except ProcessLookupError:
            continue
        stopped.append(pid)
        waiting.extend(children(pid))  # stopped, it starts no more
    for pid in stopped:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_killed_run_resumes_and_leaves_nothing(pipeline, tmp_path):
    users = tmp_path / "users"
    users.mkdir()
    before = fill_with_user_files(users)
    # 4 GiB of direct 4k writes: fio stops at its runtime, long enough to be killed midway
    # (with only the 64 MiB file to write, a fast disk was done before the kill)
    params = {
        **BASE_PARAMS, "block_size": "4k", "io_mode": "direct", "size": "64MiB",
        "io_size": "4GiB", "runtime": 4,
    }  # fmt: skip
    config = write_config(
        tmp_path / "c.yaml", {"users": {"path": str(users), "class": "disk"}}, params, ["users"]
    )
    command = [*snakemake_command(), "-c1", SUMMARY, "--configfile", str(config)]
    process = subprocess.Popen(
        command,
        cwd=pipeline.root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while not list(users.glob("tierbench-*-*")) and time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail("the run ended before it could be killed")
        time.sleep(0.1)
    time.sleep(1)
    kill_tree(process.pid)
    process.wait(timeout=30)
    left = [p for p in users.glob("tierbench-*") if (p / ".tierbench-run").exists()]
    assert left, "the killed run should have left its run folder behind"

    # what a user does after a killed run: unlock, then resume
    pipeline("--unlock", "--configfile", str(config))
    pipeline("-c1", SUMMARY, "--rerun-incomplete", "--configfile", str(config))
    assert digest(users) == before
    assert not [p for p in users.glob("tierbench-*") if p.name != "tierbench-mine"]
    results = pd.read_csv(pipeline.root / "results/testbox/safety/results.csv")
    assert (results[results["metric"] == "write_bandwidth"]["value"] > 0).all()


@pytest.fixture
def small_tmpfs(tmp_path):
    if os.geteuid() != 0:
        if os.environ.get("CI") == "true":
            pytest.fail("CI runs as root and must mount the small tmpfs")
        pytest.skip("mounting a tmpfs needs root")
    mount = tmp_path / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mount)], check=True)
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_64mb_tmpfs_fails_the_big_point_and_runs_the_rest(pipeline, tmp_path, small_tmpfs):
    (small_tmpfs / "someone-elses.dat").write_bytes(b"\x07" * 1000)
    before = digest(small_tmpfs)
    config = write_config(
        tmp_path / "c.yaml",
        {"small": {"path": str(small_tmpfs), "class": "tmpfs"}},
        {**BASE_PARAMS, "size": ["8MiB", "128MiB"]},
        ["small"],
    )
    pipeline("-c1", SUMMARY, "--configfile", str(config))
    summary = pd.read_csv(pipeline.root / SUMMARY)
    status = summary.drop_duplicates("point").set_index("point")
    assert status.loc["size=8MiB", "status"] == "ok"
    assert status.loc["size=128MiB", "status"] == "failed"
    assert "free" in status.loc["size=128MiB", "reason"]
    assert digest(small_tmpfs) == before
    preflight = (pipeline.root / "results/testbox/safety/preflight.json").read_text()
    assert "recorded as failed" in preflight


def test_a_failing_preflight_ends_with_its_reason_and_no_json(pipeline, tmp_path, small_tmpfs):
    """Snakemake's error output and the rule's log end with the one line that explains the
    failure; a job's command line names its plan, not its whole point as JSON."""
    config = write_config(
        tmp_path / "c.yaml",
        {"tiny": {"path": str(small_tmpfs), "class": "tmpfs"}},
        {**BASE_PARAMS, "size": ["100MiB", "200MiB"]},
        ["tiny"],
    )
    done = pipeline("-c1", SUMMARY, "--configfile", str(config), "-p", check=False)
    assert done.returncode != 0
    output = done.stdout + done.stderr
    reason = "tier tiny: its smallest point writes 100 MiB"
    assert reason in output and "free" in output
    assert max(len(line) for line in output.splitlines()) < 300
    assert '{"' not in output  # no JSON spec anywhere: not in commands, not in messages
    log = (pipeline.root / "results/testbox/safety/logs/preflight.log").read_text()
    assert reason in log.strip().splitlines()[-1]
    command = next(line for line in output.splitlines() if "tierbench.preflight" in line)
    assert "--plan results/testbox/safety/plan.json" in command
