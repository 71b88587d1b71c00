"""Run folders: a benchmark writes only in its own folder and removes only what it made."""

import json
import os
import socket
import subprocess
import sys

import pytest
from tierbench import rundir
from tierbench.errors import PointFailed


def user_files(root):
    (root / "thesis.tex").write_text("precious")
    (root / "tierbench-lookalike").mkdir()  # our prefix, but no marker: not ours
    (root / "tierbench-lookalike" / "data.bin").write_bytes(b"\x00\x01")


def snapshot(root):
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
    }


def test_run_folder_is_removed_and_neighbours_kept(tmp_path):
    user_files(tmp_path)
    before = snapshot(tmp_path)
    with rundir.RunFolder(tmp_path, "label") as folder:
        assert folder.path.parent == tmp_path and folder.path.name.startswith("tierbench-label-")
        (folder.path / "big.dat").write_bytes(b"x" * 1000)
    assert snapshot(tmp_path) == before


def test_run_folder_removed_on_error(tmp_path):
    user_files(tmp_path)
    before = snapshot(tmp_path)
    with pytest.raises(RuntimeError), rundir.RunFolder(tmp_path, "boom") as folder:
        (folder.path / "partial.dat").write_bytes(b"x")
        raise RuntimeError("benchmark crashed")
    assert snapshot(tmp_path) == before


def test_folder_without_marker_is_never_removed(tmp_path):
    user_files(tmp_path)
    assert rundir.remove_run_folder(tmp_path / "tierbench-lookalike") is False
    assert (tmp_path / "tierbench-lookalike" / "data.bin").exists()


def test_sweep_removes_only_dead_runs_of_this_host(tmp_path):
    user_files(tmp_path)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    dead_pid = int(dead.stdout)

    def make(name, host, pid):
        folder = tmp_path / f"tierbench-{name}"
        folder.mkdir()
        (folder / rundir.MARKER).write_text(json.dumps({"host": host, "pid": pid}))
        return folder

    stale = make("stale", socket.gethostname(), dead_pid)
    running = make("running", socket.gethostname(), os.getpid())
    elsewhere = make("elsewhere", "another-node", dead_pid)
    assert rundir.stale_folders(tmp_path) == [stale]  # what the end-to-end test calls left over
    removed = rundir.sweep_stale(tmp_path)
    assert removed == [stale]
    assert running.exists() and elsewhere.exists()
    assert (tmp_path / "thesis.tex").read_text() == "precious"


def test_ensure_space_respects_cap_and_free_space(tmp_path):
    with rundir.RunFolder(tmp_path, "space") as folder:
        folder.ensure_space(1024, 4096)
        with pytest.raises(PointFailed, match="max_bytes"):
            folder.ensure_space(8192, 4096)
        with pytest.raises(PointFailed, match="free"):
            folder.ensure_space(rundir.free_bytes(tmp_path) * 2, None)


def test_missing_tier_path_is_a_failure(tmp_path):
    with pytest.raises(PointFailed, match="not a directory"):
        with rundir.RunFolder(tmp_path / "nope", "x"):
            pass
