"""command: any command line in a fresh run folder on each tier; its checks before any job
runs, its failures (exit status, time limit, writes outside its folder), its staging and
what it wrote; the example study end to end."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO, job_spec
from tierbench import answer, matrix, preflight
from tierbench.errors import ConfigError
from tierbench.runner import run_job
from tierbench.workloads import command, get, registry

EXAMPLE = "config/studies/examples/command.yaml"


def run_point(tier: Path, params: dict, **fields) -> dict:
    tier.mkdir(exist_ok=True)
    return run_job(job_spec("command", tier, params, **fields), command.run)


def values(record: dict) -> dict:
    for m in record["metrics"]:
        assert m["status"] == "ok", m["reason"]
    return {m["metric"]: m["value"] for m in record["metrics"]}


def failure(record: dict) -> str:
    [only] = record["metrics"]
    assert only["status"] == "failed"
    return only["reason"]


def planned(params: dict) -> dict:
    return matrix.check_point("command", params, "t.e[single]")


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    """A folder of 3 files (one in a subfolder) and a single file beside it."""
    data = tmp_path / "in" / "data"
    (data / "sub").mkdir(parents=True)
    (data / "a.txt").write_text("alpha\n")
    (data / "b.bin").write_bytes(bytes(1000))
    (data / "sub" / "c.txt").write_text("gamma\n")
    (tmp_path / "in" / "run.sh").write_text("#!/bin/sh\necho ran > ran.txt\n")
    (tmp_path / "in" / "run.sh").chmod(0o755)
    return tmp_path / "in"


# --- before any job runs ----------------------------------------------------------------------


def test_a_list_is_one_command_and_a_list_of_lists_an_axis(inputs):
    argv = ["printf", "%s", "a b"]
    points = matrix.expand_params(
        {"command": argv, "inputs": [str(inputs / "data")]}, ("command", "inputs")
    )
    assert [values for values, _ in points] == [{}]
    axis = matrix.expand_params({"command": [["true"], ["printf", "x"]]}, ("command",))
    assert [p["command"] for _, p in axis] == [["true"], ["printf", "x"]]
    assert matrix.point_name(axis[1][0]) == "command=printf_x"
    assert get("command").list_params == ("command", "inputs")


def test_a_sound_point_passes_with_its_defaults(inputs):
    params = planned({"command": "cd data && ./../run.sh", "inputs": [str(inputs / "data")]})
    assert params["time_limit"] == 3600 and params["threads"] == 1 and params["env"] == {}
    planned({"command": "./run.sh", "inputs": [str(inputs / "run.sh")]})
    planned({"command": ["./run.sh"], "inputs": [str(inputs / "run.sh")]})
    planned({"command": "X=1 true; nosuchprogram_later"})  # only the first program is known
    planned({"command": "$APP --version"})  # decided when it runs


@pytest.mark.parametrize(
    ("params", "said"),
    [
        ({"command": "nosuchprogram_tb --flag"}, "nosuchprogram_tb is not found on the PATH"),
        ({"command": ["nosuchprogram_tb"]}, "nosuchprogram_tb is not found on the PATH"),
        ({"command": "./run.sh"}, "holds only the inputs (none)"),
        ({"command": "if then fi"}, "bash cannot parse it"),
        ({"command": "true", "inputs": ["/nonexistent/tierbench-input"]}, "does not exist"),
        ({"command": "true", "inputs": ["$TB_UNSET_VARIABLE/x"]}, "unset variable"),
        ({"command": "true", "time_limit": 0}, "time_limit"),
        ({"command": "true", "env": {"1BAD": "x"}}, "1BAD"),
    ],
)
def test_bad_input_is_one_line_before_any_job(params, said):
    with pytest.raises(ConfigError, match="t.e") as caught:
        planned(params)
    assert said in str(caught.value)


def test_a_program_found_only_through_env_path(tmp_path):
    tool = tmp_path / "bin" / "mytool_tb"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\necho mytool > out.txt\n")
    tool.chmod(0o755)
    with pytest.raises(ConfigError, match="mytool_tb is not found"):
        planned({"command": "mytool_tb"})
    params = planned({"command": "mytool_tb", "env": {"PATH": f"{tool.parent}:$PATH"}})
    found = values(run_point(tmp_path / "tier", params))
    assert found["files_created"] == 1


def test_planned_bytes_are_the_inputs_and_the_preflight_counts_them(inputs, tmp_path):
    params = planned({"command": "true", "inputs": [str(inputs / "data"), str(inputs / "run.sh")]})
    size = 6 + 1000 + 6 + (inputs / "run.sh").stat().st_size
    assert command.planned_bytes(params) == size
    assert command.planned_bytes({**params, "output_bytes": "1k"}) == size + 1024
    (tmp_path / "tier").mkdir()
    spec = {
        "study": "t",
        "tiers": {"small": {"path": str(tmp_path / "tier"), "class": "disk", "max_bytes": 1000}},
        "points": [{"workload": "command", "tier": "small", "params": params}],
        "safety_factor": 1.0,
    }
    checked = preflight.run_preflight(spec)
    assert checked["largest_point_bytes"] == {"small": size}
    assert any("max_bytes" in warning for warning in checked["warnings"])
    record = run_point(tmp_path / "tier", params, max_bytes=1000)
    assert "more than the tier's max_bytes" in failure(record)


# --- one repetition ---------------------------------------------------------------------------


def test_inputs_are_copied_and_timed_apart_from_the_command(inputs, tmp_path, monkeypatch):
    copy = command.stage

    def slow_copy(sources, folder):
        time.sleep(1.0)  # a copy slower than the command: its time must not join the command's
        elapsed, copied = copy(sources, folder)
        return elapsed + 1.0, copied

    monkeypatch.setattr(command, "stage", slow_copy)
    params = {
        "command": "cat data/a.txt data/sub/c.txt > both.txt && ./run.sh",
        "inputs": [str(inputs / "data"), str(inputs / "run.sh")],
    }
    found = values(run_point(tmp_path / "tier", params))
    assert found["stage_files"] == 4 and found["stage_dirs"] == 2
    assert found["stage_bytes"] == 6 + 1000 + 6 + (inputs / "run.sh").stat().st_size
    assert found["stage_time"] >= 1.0 > found["wall_time"]
    # what the command wrote, not what was staged: both.txt and ran.txt
    assert (found["files_created"], found["dirs_created"], found["files_changed"]) == (2, 0, 0)
    assert found["bytes_written"] == 12 + 4
    assert found["cpu_time"] >= found["sys_time"] >= 0
    assert not list((tmp_path / "tier").iterdir())  # the run folder is gone


def test_what_it_wrote_is_counted(tmp_path, inputs):
    params = {
        "command": "mkdir -p out/deep && printf 12345 > out/deep/f && echo more >> data/a.txt",
        "inputs": [str(inputs / "data")],
    }
    found = values(run_point(tmp_path / "tier", params))
    assert (found["files_created"], found["dirs_created"], found["files_changed"]) == (1, 2, 1)
    assert found["bytes_written"] == 5 + len("alpha\nmore\n")
    assert (inputs / "data" / "a.txt").read_text() == "alpha\n"  # the original is untouched


def test_an_argv_runs_without_a_shell_with_its_env(tmp_path):
    script = 'printf "%s|%s|%s|%s" "$1" "$GREETING" "$TIERBENCH_THREADS" "$OMP_NUM_THREADS"'
    argv = ["bash", "-c", script, "_", "a b; touch injected"]
    params = {"command": argv, "env": {"GREETING": "x:$HOME"}, "threads": 2}
    record = run_point(tmp_path / "tier", params)
    assert values(record)["files_created"] == 0  # its argument went to printf, not to a shell
    assert record["extra"]["command"] == argv
    assert record["extra"]["run"]["tail"] == f"a b; touch injected|x:{os.environ['HOME']}|2|2"


def test_a_failing_command_fails_the_point_with_its_last_lines(tmp_path):
    params = {"command": "for i in $(seq 20); do echo line $i; done; echo oops >&2; exit 3"}
    reason = failure(run_point(tmp_path / "tier", params))
    assert reason.startswith("the command exited with status 3; its last lines: ")
    assert reason.endswith("line 18 | line 19 | line 20 | oops")
    assert "line 1 |" not in reason
    reason = failure(run_point(tmp_path / "tier", {"command": "exit 1"}))
    assert reason.endswith("(it printed nothing)")
    reason = failure(run_point(tmp_path / "tier", {"command": "true && nosuchprogram_tb"}))
    assert "status 127 (a command was not found)" in reason
    assert reason.endswith("nosuchprogram_tb: command not found")
    reason = failure(run_point(tmp_path / "tier", {"command": "kill -TERM $$"}))
    assert reason.startswith("the command was killed by signal SIGTERM")


def test_a_program_missing_when_the_job_runs_is_a_failed_point(tmp_path):
    reason = failure(run_point(tmp_path / "tier", {"command": ["nosuchprogram_tb", "x"]}))
    assert reason.startswith("command not found: nosuchprogram_tb")


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def test_the_time_limit_kills_the_process_group(tmp_path):
    (tmp_path / "tier").mkdir()
    pids = tmp_path / "pids"
    params = {
        "command": f"sleep 60 & echo $! > {pids}; echo started; sleep 60",
        "time_limit": 0.5,
    }
    start = time.monotonic()
    reason = failure(run_point(tmp_path / "tier", params))
    assert time.monotonic() - start < 20
    assert reason.startswith("the command did not finish within its time_limit of 0.5 s")
    assert "process group was killed" in reason and reason.endswith("started")
    background = int(pids.read_text())
    deadline = time.monotonic() + 5
    while alive(background) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(background)


def test_a_background_process_left_running_is_killed(tmp_path):
    pids = tmp_path / "pids"
    record = run_point(tmp_path / "tier", {"command": f"sleep 60 & echo $! > {pids}"})
    values(record)
    assert record["extra"]["run"]["left_running"] is True
    deadline = time.monotonic() + 5
    while alive(int(pids.read_text())) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(int(pids.read_text()))


def test_a_write_outside_its_run_folder_fails_the_point(tmp_path):
    tier = tmp_path / "tier"
    tier.mkdir()
    (tier / "kept").write_text("a user's file\n")
    reason = failure(run_point(tier, {"command": "touch ../stray && echo x >> ../kept"}))
    assert reason.startswith(f"the command wrote outside its run folder: in {tier}, ")
    assert "created stray" in reason and "changed kept" in reason
    assert (tier / "stray").exists() and (tier / "kept").read_text() == "a user's file\nx\n"
    assert sorted(p.name for p in tier.iterdir()) == ["kept", "stray"]  # only its folder went
    # a file made and removed again, and other run folders, are not counted as outside
    values(run_point(tier, {"command": "touch ../gone && rm ../gone"}))


HOLDER = """
import os, sys, time
tier, go, ready = sys.argv[1:]
while not os.path.exists(go):
    time.sleep(0.02)
kept = [open(tier + "/segment.0", "a"), open(tier + "/segment.1", "w")]
for f in kept:
    f.write("x")
    f.flush()
open(ready, "w").close()
time.sleep(60)
"""


def test_what_another_living_process_holds_there_is_not_the_commands(tmp_path, capfd):
    """An MPI job beside it keeps its shared-memory segments open at the tier's top level;
    a file someone removes there leaves nothing behind."""
    tier, go, ready = tmp_path / "tier", tmp_path / "go", tmp_path / "ready"
    tier.mkdir()
    (tier / "segment.0").write_text("another job's\n")
    (tier / "old").write_text("removed\n")
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tier), str(go), str(ready)])
    try:
        wait = f"touch {go}; until [ -e {ready} ]; do sleep 0.02; done; rm ../old"
        record = run_point(tier, {"command": wait, "time_limit": 30})
    finally:
        holder.kill()
        holder.wait()
    values(record)
    log = capfd.readouterr().err
    assert f"not the command's, in {tier}: segment.0 (held by {holder.pid} (python" in log
    assert (
        f"segment.1 (held by {holder.pid} (python" in log
        and f"removed from {tier} while the command ran: old" in log
    )


LAUNCHER = """
import os, sys, time
tier, go, ready, shell = sys.argv[1:]
while not os.path.exists(go):
    time.sleep(0.02)
open(tier + "/segment.2", "w").close()
open(ready, "w").close()
pid = int(open(shell).read())
while os.path.exists(f"/proc/{pid}"):
    time.sleep(0.02)
time.sleep(0.5)
os.remove(tier + "/segment.2")
"""


def test_what_another_process_removes_soon_after_the_command_ended_is_not_the_commands(
    tmp_path, capfd
):
    """An MPI launcher beside it removes its ranks' segments a moment after they exit:
    when the command ends in between, no process holds them, yet they are not its."""
    tier, go, ready, shell = (tmp_path / name for name in ("tier", "go", "ready", "shell"))
    tier.mkdir()
    other = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, str(tier), str(go), str(ready), str(shell)]
    )
    try:
        wait = f"echo $$ > {shell}; touch {go}; until [ -e {ready} ]; do sleep 0.02; done"
        record = run_point(tier, {"command": wait, "time_limit": 30})
        other.wait(timeout=30)
    finally:
        other.kill()
    values(record)
    assert f"not the command's, in {tier}: segment.2 (gone again)" in capfd.readouterr().err
    assert list(tier.iterdir()) == []


def test_the_run_folder_is_removed_even_when_the_command_removes_its_marker(tmp_path):
    values(run_point(tmp_path / "tier", {"command": "rm -f .tierbench-run; touch x"}))
    assert not list((tmp_path / "tier").iterdir())


def test_the_void_tier_has_no_folder():
    spec = job_spec("command", "/dev/null", {"command": "true"}, tier_class="void")
    [only] = run_job(spec, command.run)["metrics"]
    assert only["status"] == "not_applicable"


# --- system calls -----------------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")
def test_a_traced_run_counts_the_command_and_not_the_staging(tmp_path):
    many = tmp_path / "many"
    many.mkdir()
    for i in range(300):
        (many / f"f{i}").write_text("x")
    params = {
        "command": "mkdir out && for i in $(seq 40); do : > out/$i; done",
        "inputs": [str(many)],
    }
    record = run_point(tmp_path / "tier", params, count_syscalls=True)
    found = values(record)
    assert record["extra"]["syscalls"]["counted"] is True
    # 40 creates by the command, and fewer than the 300 files the staging copy opened
    assert 40 <= found["syscalls_open"] < 300
    assert found["syscalls_mkdir"] == 1
    # the profile tells the command's 40 creates from its other opens
    assert found["ops_file_create"] == 40 and found["ops_dir_create"] == 1
    assert found["files_created"] == 40


def test_without_strace_a_traced_experiment_runs_untraced_and_says_why(tmp_path, monkeypatch):
    which = shutil.which
    monkeypatch.setattr(
        command.shutil, "which", lambda name, **kw: None if name == "strace" else which(name, **kw)
    )
    record = run_point(tmp_path / "tier", {"command": "true"}, count_syscalls=True)
    found = values(record)
    assert "wall_time" in found and not [m for m in found if m.startswith("syscalls_")]
    assert record["extra"]["syscalls"] == {
        "counted": False,
        "reason": "strace missing: not found on PATH (Debian package strace)",
    }


# --- the example study ------------------------------------------------------------------------


def test_the_example_study_runs_on_every_tier_of_the_default_config():
    config = matrix.load_yaml(REPO / "config/config.yaml")
    study = matrix.load_study(REPO / EXAMPLE, config)
    tiers = matrix.resolve_tiers(config, REPO / "config/hardware", str(REPO))
    cwd = os.getcwd()
    os.chdir(REPO)  # inputs are relative to the folder Snakemake runs in
    try:
        points = matrix.expand_study(study, tiers, "smoke")
    finally:
        os.chdir(cwd)
    assert {(p.experiment, p.tier) for p in points} == {
        (e, t) for e in ("ensemble_setup", "ensemble_setup_calls") for t in ("shm", "disk")
    }
    assert {p.name for p in points} == {"single"} and "command" in registry()


@pytest.mark.e2e
def test_the_example_study_ranks_the_tiers_end_to_end(pipeline):
    pipeline("-c2", "--configfile", EXAMPLE, "--config", "scale=smoke", "repetitions=2")
    study = pipeline.root / "results/testbox/example_command"
    summary = pd.read_csv(study / "summary.csv")
    wall = summary[summary["metric"] == "wall_time"]
    assert set(wall[wall["status"] == "ok"]["tier"]) == {"shm", "disk"}
    assert set(summary["status"]) == {"ok"}, summary[summary["status"] != "ok"]["reason"].tolist()
    files = summary[
        (summary["metric"] == "files_created") & (summary["experiment"] == "ensemble_setup")
    ]
    assert (files["median"] > 10).all()
    results = pd.read_csv(study / "results.csv")
    plan = json.loads((study / "plan.json").read_text())
    traced = {p["experiment"] for p in plan["points"].values() if p.get("count_syscalls")}
    [ranked] = answer.answers(results, registry(), untimed=traced)
    assert ranked.experiment == "ensemble_setup" and ranked.metric == "wall_time"
    assert {t.tier for t in ranked.tiers} == {"shm", "disk"}
    assert all(t.low <= t.speedup <= t.high for t in ranked.tiers)
    html = (pipeline.root / "results/testbox/report.html").read_text()
    assert "copy a folder of small files" in html and "speedup vs" in html
    [figure] = json.loads((study / "figures/generic/manifest.json").read_text())
    assert (
        "counted under strace (their times mean nothing): ensemble_setup_calls" in figure["caption"]
    )
