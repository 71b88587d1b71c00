"""Counting a job's system calls with strace: the -c table, the categories, a real traced run."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
import yaml
from conftest import FIXTURES, REPO, job_spec
from tierbench import matrix, runner, syscalls
from tierbench.errors import PointFailed
from tierbench.records import metric
from tierbench.workloads.cfd import cfd_proxy

# strace 6.1 on Debian 12, x86_64: `strace -f -c -o FILE sh -c 'mkdir -p /tmp/xx; echo hi >
# /tmp/xx/a; mv /tmp/xx/a /tmp/xx/b; sync /tmp/xx/b; rm -r /tmp/xx'` (rows cut for length)
CAPTURED = """\
% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 60.12    0.008447        1055         8         4 wait4
  8.45    0.001188           8       134        52 openat
  6.95    0.000976           7       128        40 newfstatat
  5.34    0.000751           6       119           mmap
  4.16    0.000584           6        95           close
  1.00    0.000141          70         2         1 mkdir
  0.83    0.000117         117         1           fsync
  0.81    0.000114           4        23           read
  0.73    0.000102          51         2           unlinkat
  0.66    0.000066           6        10           pread64
  0.30    0.000030          30         1           renameat2
  0.11    0.000016          16         1           write
  0.00    0.000000           0         2           umask
------ ----------- ----------- --------- --------- ----------------
100.00    0.014051          20       672       110 total
"""

# A process tree of two personalities: strace prints one table each (same columns).
TWO_PERSONALITIES = """\
System call usage summary for 64 bit mode:
% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
100.00    0.000010           1        10         2 openat
------ ----------- ----------- --------- --------- ----------------
100.00    0.000010           1        10         2 total
System call usage summary for 32 bit mode:
% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 60.00    0.000006           2         3           openat
 40.00    0.000004           4         1           fdatasync
------ ----------- ----------- --------- --------- ----------------
100.00    0.000010           2         4           total
strace: Process 4242 detached
"""


def test_parse_table_reads_every_row_but_the_total():
    table = syscalls.parse_table(CAPTURED)
    assert "total" not in table
    assert len(table) == 13
    assert table["openat"] == {"calls": 134, "errors": 52, "seconds": pytest.approx(0.001188)}
    assert table["write"] == {"calls": 1, "errors": 0, "seconds": pytest.approx(0.000016)}


def test_categories_group_the_file_system_calls():
    counts = syscalls.categorise(syscalls.parse_table(CAPTURED))
    assert counts == {
        "open": 134,
        "mkdir": 2,
        "write": 1,
        "read": 23 + 10,
        "close": 95,
        "unlink": 2,
        "rename": 1,
        "fsync": 1,
        "stat": 128,
    }
    names = [m["metric"] for m in syscalls.metrics_of(syscalls.parse_table(CAPTURED))]
    assert names == [f"syscalls_{c}" for c in syscalls.CATEGORIES]


def test_tables_of_several_personalities_add_up():
    table = syscalls.parse_table(TWO_PERSONALITIES)
    assert table["openat"]["calls"] == 13 and table["openat"]["errors"] == 2
    assert syscalls.categorise(table)["fsync"] == 1


def test_parse_table_of_nothing_is_empty():
    assert (
        syscalls.parse_table("strace: attach: ptrace(PTRACE_SEIZE, 1): Operation not permitted")
        == {}
    )


def known_calls(job):
    """Three folders and a rename in this process, two folders and a rename in a child."""
    folder = job.folder.path
    for name in ("a", "b", "c"):
        os.mkdir(folder / name)
    os.rename(folder / "a", folder / "a2")
    with open(folder / "f", "wb") as handle:
        handle.write(b"x")
        os.fsync(handle.fileno())
    subprocess.run(["sh", "-c", "mkdir x y && mv x z"], cwd=folder, check=True)
    return [metric("work", 1.0, "s")]


needs_strace = pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")


@needs_strace
def test_a_traced_run_counts_the_calls_of_the_runner_and_its_children(tmp_path):
    spec = job_spec("dd", tmp_path, {}, count_syscalls=True)
    record = runner.run_job(spec, known_calls)
    values = {m["metric"]: m["value"] for m in record["metrics"]}
    assert values["work"] == 1.0
    # exact: nothing else in the job makes folders or renames
    assert values["syscalls_mkdir"] == 5
    assert values["syscalls_rename"] == 2
    assert values["syscalls_fsync"] >= 1
    units = {m["metric"]: m["unit"] for m in record["metrics"] if m["metric"] != "work"}
    assert {u for name, u in units.items() if not name.startswith("written_")} == {"calls"}
    assert {u for name, u in units.items() if name.startswith("written_")} == {"B"}
    # the profile: opens with O_CREAT apart, one file here; mkdir and rename exact as above
    assert values["ops_dir_create"] == 5 and values["ops_file_rename"] == 2
    assert values["ops_file_create"] == 1 and values["ops_fsync"] == 1
    assert values["writes_upto_512B"] >= 1 and values["written_upto_512B"] >= 1
    note = record["extra"]["syscalls"]
    assert note["counted"] is True
    assert note["categories"]["mkdir"] == 5
    assert note["table"]["fsync"]["calls"] >= 1
    # the run folder's removal comes after run(job): not counted
    assert values["syscalls_unlink"] == 0


@needs_strace
def test_a_failed_point_gets_no_counts_and_strace_lets_go(tmp_path):
    def fails(job):
        raise PointFailed("solver diverged")

    record = runner.run_job(job_spec("dd", tmp_path, {}, count_syscalls=True), fails)
    assert [m["status"] for m in record["metrics"]] == ["failed"]
    # strace has detached: nothing traces this process any more
    assert syscalls._tracer_pids(os.getpid()) == {0}


def test_without_the_flag_nothing_is_traced(tmp_path):
    record = runner.run_job(job_spec("dd", tmp_path, {}), known_calls)
    assert [m["metric"] for m in record["metrics"]] == ["work"]
    assert "syscalls" not in record["extra"]


def test_missing_strace_runs_the_job_and_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(syscalls, "STRACE", "no-such-strace-here")
    record = runner.run_job(job_spec("dd", tmp_path, {}, count_syscalls=True), known_calls)
    assert [m["metric"] for m in record["metrics"]] == ["work"]
    note = record["extra"]["syscalls"]
    assert note["counted"] is False and note["reason"].startswith("strace missing")
    assert "system calls not counted: strace missing" in capsys.readouterr().err


def test_a_strace_that_cannot_attach_says_why(tmp_path, monkeypatch):
    fake = tmp_path / "strace"
    fake.write_text(
        "#!/bin/sh\necho 'strace: attach: ptrace(PTRACE_SEIZE, 1): Operation not permitted' >&2\n"
        "exit 1\n"
    )
    fake.chmod(0o755)
    monkeypatch.setattr(syscalls, "STRACE", str(fake))
    tier = tmp_path / "tier"
    tier.mkdir()
    record = runner.run_job(job_spec("dd", tier, {}, count_syscalls=True), known_calls)
    assert [m["metric"] for m in record["metrics"]] == ["work"]
    reason = record["extra"]["syscalls"]["reason"]
    assert reason == (
        "strace could not attach: strace: attach: ptrace(PTRACE_SEIZE, 1): Operation not permitted"
    )


@pytest.mark.parametrize(
    ("launcher", "nodes", "why"),
    [
        ("srun --mpi=pmix", "1", "srun starts the ranks from slurmstepd"),
        ("mpiexec", "2", "mpiexec starts the ranks of the job's other 1 node(s) there"),
        ("mpiexec", "1", ""),
        ("", "2", ""),  # no MPI: the job's processes are the runner's
    ],
)
def test_where_ranks_start_outside_the_runner_it_is_known(monkeypatch, launcher, nodes, why):
    """The runner's trace would hold the launcher alone there (no change with writes)."""
    monkeypatch.setenv("SLURM_JOB_NUM_NODES", nodes)
    found = syscalls.outside_the_trace({"launcher": launcher})
    assert found.startswith(why) and bool(found) == bool(why)


class RunnerUntraced:
    """A tracer of the runner that counts nothing: only the ranks' own tables remain."""

    strace = syscalls.STRACE

    def __init__(self, within=()):
        pass

    def start(self):
        pass

    def stop(self):
        return {}

    def close(self):
        pass


def proxy_calls(tmp_path, interval, monkeypatch) -> dict:
    """A 2-rank cfd_proxy job whose ranks are traced one by one (as under srun); its note."""
    monkeypatch.setattr(syscalls, "outside_the_trace", lambda spec, environ=None: "elsewhere")
    monkeypatch.setattr(syscalls, "Tracer", RunnerUntraced)
    monkeypatch.chdir(tmp_path)
    tier = tmp_path / f"tier-{interval}"
    tier.mkdir()
    params = {"ranks": 2, "steps": 3, "write_interval": interval, "compute_per_cell_step": 0}
    spec = job_spec("cfd_proxy", tier, {**params, "cells_per_rank": 1000, "warmup_steps": 0})
    spec.update(count_syscalls=True, launcher="mpiexec")
    return runner.run_job(spec, cfd_proxy.run)["extra"]["syscalls"]


@needs_strace
@pytest.mark.skipif(shutil.which("mpiexec") is None, reason="mpiexec is not installed")
def test_ranks_outside_the_runner_are_each_traced_on_their_own(tmp_path, monkeypatch):
    """Each rank under strace of its own, their tables added up: a write's folders appear
    (3 made per rank per write), as they would not in the launcher's counts."""
    writing, quiet = (proxy_calls(tmp_path, i, monkeypatch) for i in (1, "none"))
    assert writing["counted"] and quiet["counted"]
    assert "strace -f -C -s 0 of each rank (elsewhere)" in writing["command"]

    def made(note):  # mkdir calls that made a folder (a failed one found it there)
        return note["table"]["mkdir"]["calls"] - note["table"]["mkdir"]["errors"]

    assert made(writing) - made(quiet) == 2 * 3 * 3

    # the ranks' profiles are added up too: the writes' folders are on the tier (MPI's own,
    # in its session folder elsewhere, vary from run to run and are not)
    on_tier = writing["profile"]["ops_dir_create"] - quiet["profile"]["ops_dir_create"]
    assert on_tier >= 2 * 3 * 3
    assert writing["profile"]["ops_dir_create"] <= writing["table"]["mkdir"]["calls"]
    assert not list(tmp_path.glob(".tierbench-strace-*"))


@pytest.mark.skipif(shutil.which("mpiexec") is None, reason="mpiexec is not installed")
def test_a_rank_without_its_table_leaves_the_job_uncounted(tmp_path, monkeypatch):
    monkeypatch.setattr(syscalls, "rank_prefix", lambda job: [])
    note = proxy_calls(tmp_path, 1, monkeypatch)
    assert note == {"counted": False, "reason": note["reason"]}
    assert note["reason"].startswith("0 of the job's 2 ranks counted their calls")


def test_the_experiment_flag_reaches_the_job_spec_through_the_plan(tmp_path):
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    experiment = {
        "name": "timed",
        "workload": "dd",
        "tiers": ["shm"],
        "params": {"block_size": "1M", "count": 4, "sync": "buffered"},
    }
    config["experiments"] = [experiment, {**experiment, "name": "traced", "count_syscalls": True}]
    matrix.validate_config(config)
    tiers = matrix.resolve_tiers(config, REPO / "config/hardware", str(tmp_path))
    study = matrix.study_of(config)
    points = matrix.expand_study(study, tiers, "default")
    plan = matrix.study_plan(study, points, tiers)
    specs = {p.experiment: matrix.plan_spec(plan, matrix.point_id(p), 1) for p in points}
    assert specs["traced"]["count_syscalls"] is True
    assert "count_syscalls" not in specs["timed"]
    config["experiments"][1]["count_syscalls"] = "yes"
    with pytest.raises(Exception, match="count_syscalls"):
        matrix.validate_config(config)


# --- the job's profile in the metadata workload's operations ------------------------------------

# strace 6.1 -f -C -s 0, x86_64, of a C program that makes /tmp/pf, creates a file in it
# with writes of 100, 5,000 and 100,000 B and an fsync, fstats it, stats the folder (a forked
# child too, whose stat interrupts the parent's: <unfinished ...>), opens a missing file,
# renames the file, mkdirat/unlinkat(AT_REMOVEDIR) a folder through a folder's fd, unlinkats
# the file and removes /tmp/pf: every line as strace wrote it, the loader's calls included
PROFILED = (FIXTURES / "strace_profile.txt").read_text()


def test_a_trace_gives_the_metadata_workloads_operations_and_writes_by_size():
    found = syscalls.profile(PROFILED)
    assert {k: v for k, v in found.items() if k.startswith(syscalls.OPS_PREFIX)} == {
        "ops_file_create": 1,  # the one open with O_CREAT
        "ops_file_read": 4,  # ld.so.cache, libc, the missing file, the folder (O_DIRECTORY)
        "ops_file_stat": 2,  # the two stats of a path; the three fstats are not lookups
        "ops_file_rename": 1,
        "ops_file_remove": 1,  # unlinkat without AT_REMOVEDIR
        "ops_dir_create": 2,  # mkdir and mkdirat
        "ops_dir_remove": 2,  # unlinkat(AT_REMOVEDIR) and rmdir
        "ops_fsync": 1,
        "ops_refused": 0,
        "ops_rename_noreplace": 0,  # its rename has no flags
        "ops_rename_noreplace_refused": 0,
    }
    assert (found["writes_upto_512B"], found["written_upto_512B"]) == (1, 100)
    assert (found["writes_upto_4KiB"], found["written_upto_4KiB"]) == (0, 0)
    assert (found["writes_upto_64KiB"], found["written_upto_64KiB"]) == (1, 5000)
    assert (found["writes_upto_1MiB"], found["written_upto_1MiB"]) == (1, 100000)
    assert found["writes_over_1MiB"] == 0
    # the table at the end of the same output is the one -c gave
    table = syscalls.parse_table(PROFILED)
    assert table["openat"]["calls"] == 5 and table["newfstatat"]["calls"] == 5


def test_calls_on_paths_outside_the_run_folder_are_counted_apart():
    """The loader's opens of /etc and /lib are not the tier's; the folder, its files, and
    calls by relative name or descriptor are."""
    everything = syscalls.profile(PROFILED)
    found = syscalls.profile(PROFILED, ("/tmp/pf",))
    assert found["ops_file_read"] == everything["ops_file_read"] - 2 == 2
    assert found[syscalls.ELSEWHERE] == 2
    for op in ("file_create", "file_stat", "file_rename", "file_remove", "dir_create", "fsync"):
        assert found[f"ops_{op}"] == everything[f"ops_{op}"], op
    assert syscalls.ELSEWHERE not in everything
    # a sibling whose name starts like the folder is not inside it
    assert not syscalls.on_the_tier('"/tmp/pfx/a", O_RDONLY', ("/tmp/pf",))
    assert syscalls.on_the_tier('AT_FDCWD, "a", O_RDONLY', ("/tmp/pf",))


def test_a_call_refused_before_the_file_system_is_counted_apart():
    """FUSE without RENAME_NOREPLACE: mv's renameat2 fails with EINVAL and it falls back to
    a stat of the target (a lookup that fails with ENOENT) and a rename; the refused call
    is counted apart, and as a rename without replacing (the metadata workload prices it)."""
    text = (
        '9  renameat2(AT_FDCWD, "f1", AT_FDCWD, "f1.x", RENAME_NOREPLACE) = -1 EINVAL '
        "(Invalid argument)\n"
        '9  newfstatat(AT_FDCWD, "f1.x", 0x7ffd, AT_SYMLINK_NOFOLLOW) = -1 ENOENT '
        "(No such file or directory)\n"
        '9  rename("f1", "f1.x")              = 0\n'
    )
    found = syscalls.profile(text)
    assert found["ops_file_rename"] == 1 and found[syscalls.REFUSED_OPS] == 1
    assert found["ops_file_stat"] == 1
    assert found[syscalls.NOREPLACE_OPS] == found[syscalls.NOREPLACE_REFUSED_OPS] == 1
    # where the tier renames without replacing, mv makes that one call
    accepted = syscalls.profile(
        '9  renameat2(AT_FDCWD, "f1", AT_FDCWD, "f1.x", RENAME_NOREPLACE) = 0\n'
        '9  renameat2(AT_FDCWD, "f2", AT_FDCWD, "f2.x", RENAME_EXCHANGE) = 0\n'
    )
    assert accepted["ops_file_rename"] == 2 and accepted[syscalls.NOREPLACE_OPS] == 1
    assert accepted[syscalls.REFUSED_OPS] == accepted[syscalls.NOREPLACE_REFUSED_OPS] == 0


def test_an_interrupted_call_counts_once_when_it_resumes():
    text = (
        '7  newfstatat(AT_FDCWD, "/x",  <unfinished ...>\n'
        '8  mkdir("/y", 0755) = 0\n'
        "7  <... newfstatat resumed>{st_mode=S_IFDIR|0755, ...}, 0) = 0\n"
        "8  <... rmdir resumed>) = 0\n"  # its start was before the trace: not counted
    )
    found = syscalls.profile(text)
    assert found["ops_file_stat"] == 1 and found["ops_dir_create"] == 1
    assert found["ops_dir_remove"] == 0


def test_every_operation_is_a_phase_of_the_metadata_workload():
    """ops_<phase> joins <phase>_cost of the metadata workload, phase by phase."""
    from tierbench.workloads import metadata

    assert set(syscalls.OPERATIONS) - {"fsync"} <= set(metadata.CYCLE)


@needs_strace
@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")
def test_a_traced_metadata_job_profiles_the_operations_it_reports(tmp_path):
    from tierbench.workloads import metadata

    params = {"items": 30, "layout": "tree", "branching": 2, "depth": 2, "fsync": True}
    record = runner.run_job(
        job_spec("metadata", tmp_path, params, count_syscalls=True), metadata.run
    )
    values = {m["metric"]: m["value"] for m in record["metrics"]}
    items, folders = 30, metadata.tree_folders({**params, "layout": "tree"})
    assert values["ops_file_rename"] == 2 * items and values["ops_fsync"] == items
    assert values["ops_rename_noreplace"] == items  # the way back
    # besides the loop's: its own folder in the run folder; the scratch folder gcc builds in
    # is not on the tier
    assert values["ops_dir_create"] == values["ops_dir_remove"] == items + folders + 1
    assert values["ops_elsewhere"] > 0
    assert record["extra"]["syscalls"]["profile"]["ops_fsync"] == items
