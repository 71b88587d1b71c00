"""Tiers mounted at run time (bindfs, mount --bind): always unmounted, skipped where impossible."""

from __future__ import annotations

import copy
import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest
from conftest import REPO
from tierbench import matrix, mounts, preflight, probe, rundir
from tierbench.errors import ConfigError, PointFailed
from tierbench.records import metric
from tierbench.runner import run_job

CONFIG = matrix.load_yaml(REPO / "config/config.yaml")
CAN_BINDFS = mounts.unavailable(mounts.BINDFS) is None
CAN_BIND = mounts.unavailable(mounts.BIND) is None
needs_bindfs = pytest.mark.skipif(not CAN_BINDFS, reason="bindfs or /dev/fuse missing here")
needs_bind = pytest.mark.skipif(not CAN_BIND, reason="mount --bind needs root")


def mountinfo_mentions(path: Path) -> list[str]:
    """Mount points in /proc/self/mountinfo that lie under ``path``.

    Unescaped first: mountinfo writes a space as \\040, so under a TMPDIR with
    a space a raw prefix match finds nothing and every "no mount left" check
    would pass whatever was left mounted.
    """
    prefix = os.path.realpath(path)
    found = probe.parse_mountinfo(Path("/proc/self/mountinfo").read_text())
    return [m["mount_point"] for m in found if m["mount_point"].startswith(prefix)]


def tiers_in(tmp_path: Path, method: str = mounts.BINDFS) -> tuple[Path, Path, dict]:
    """A backing folder and a mount-points folder under tmp_path, and the job spec of a view."""
    backing, holders = tmp_path / "backing", tmp_path / "holders"
    backing.mkdir()
    holders.mkdir()
    spec = {
        "study": "t",
        "experiment": "sinks",
        "workload": "pv",
        "tier": "ram_view",
        "tier_path": str(holders),
        "tier_class": "fuse" if method == mounts.BINDFS else "tmpfs",
        "backing": "ram",
        "backing_path": str(backing),
        "mount": method,
        "max_bytes": None,
        "point": "single",
        "params": {"size": "1MiB"},
        "repetition": 1,
        "phase": "measured",
    }
    return backing, holders, spec


def hide_tool(monkeypatch, name: str) -> None:
    real_which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda tool: None if tool == name else real_which(tool))


def leftovers(*folders: Path) -> list[Path]:
    return [p for folder in folders for p in folder.iterdir()]


@needs_bindfs
def test_bindfs_view_writes_land_on_the_backing_tier_and_everything_goes(tmp_path):
    backing, holders, spec = tiers_in(tmp_path)
    seen = {}

    def workload(job):
        seen["mounted"] = mounts.is_mounted(job.folder.path)
        (job.folder.path / "data").write_bytes(b"x" * 4096)
        seen["backing_files"] = sorted(p.name for p in next(backing.iterdir()).iterdir())
        seen["fs_type"] = job.extra["mount"]["fs_type"]
        return [metric("throughput", 1.0, "MB/s")]

    record = run_job(spec, workload)
    assert record["metrics"][0]["status"] == "ok"
    assert seen["mounted"] and seen["fs_type"].startswith("fuse")
    assert "data" in seen["backing_files"] and rundir.MARKER in seen["backing_files"]
    assert record["extra"]["mount"]["command"].startswith("bindfs ")
    assert mountinfo_mentions(tmp_path) == []
    assert leftovers(backing, holders) == []


@needs_bindfs
@pytest.mark.parametrize("failure", [RuntimeError("crash mid-way"), PointFailed("tier broke")])
def test_a_job_failing_mid_way_leaves_no_mount(tmp_path, failure):
    backing, holders, spec = tiers_in(tmp_path)

    def workload(job):
        with open(job.folder.path / "test", "wb") as handle:
            handle.write(b"\0" * (1 << 20))
        assert mountinfo_mentions(tmp_path), "the view is mounted while the job runs"
        raise failure

    if isinstance(failure, PointFailed):
        record = run_job(spec, workload)
        assert record["metrics"][0]["status"] == "failed"
        assert record["metrics"][0]["reason"] == "tier broke"
    else:
        with pytest.raises(RuntimeError, match="crash mid-way"):
            run_job(spec, workload)
    assert mountinfo_mentions(tmp_path) == []
    assert leftovers(backing, holders) == []


@needs_bindfs
def test_a_busy_mount_is_detached_lazily(tmp_path, monkeypatch):
    monkeypatch.setattr(mounts, "WAIT_S", 0.3)
    backing, holders, spec = tiers_in(tmp_path)
    logged = []
    with mounts.MountedFolder(spec, "busy", logged.append) as folder:
        # a file still open when the job ends keeps the mount busy
        still_open = open(folder.path / "still-open", "wb")  # noqa: SIM115
    still_open.close()
    assert mountinfo_mentions(tmp_path) == []
    assert any("lazily" in line for line in logged)
    assert leftovers(backing, holders) == []


@needs_bind
def test_kernel_bind_view_is_unmounted(tmp_path):
    backing, holders, spec = tiers_in(tmp_path, mounts.BIND)

    def workload(job):
        assert job.extra["mount"]["fs_type"] == mounts.mount_of(backing, mounts.mounts())["fs_type"]
        (job.folder.path / "test").write_bytes(b"y")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        run_job(spec, workload)
    assert mountinfo_mentions(tmp_path) == []
    assert leftovers(backing, holders) == []


def test_missing_bindfs_is_a_skipped_point_with_the_reason(tmp_path, monkeypatch):
    backing, holders, spec = tiers_in(tmp_path)
    hide_tool(monkeypatch, "bindfs")
    record = run_job(spec, lambda job: pytest.fail("the workload must not run"))
    [status] = record["metrics"]
    assert status["status"] == "skipped"
    assert (
        "bindfs is not installed" in status["reason"]
        and "apt-get install bindfs" in status["reason"]
    )
    assert leftovers(backing, holders) == []


def test_missing_dev_fuse_is_a_skipped_point(tmp_path, monkeypatch):
    _, _, spec = tiers_in(tmp_path)
    monkeypatch.setattr(shutil, "which", lambda tool: f"/usr/bin/{tool}")
    real_exists = os.path.exists
    monkeypatch.setattr(os.path, "exists", lambda p: p != "/dev/fuse" and real_exists(p))
    record = run_job(spec, lambda job: pytest.fail("the workload must not run"))
    assert record["metrics"][0]["status"] == "skipped"
    assert "/dev/fuse does not exist" in record["metrics"][0]["reason"]


def test_bind_mount_without_root_is_skipped(tmp_path, monkeypatch):
    _, _, spec = tiers_in(tmp_path, mounts.BIND)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    record = run_job(spec, lambda job: pytest.fail("the workload must not run"))
    assert record["metrics"][0]["status"] == "skipped"
    assert "needs root" in record["metrics"][0]["reason"]


@needs_bindfs
def test_mount_left_by_a_killed_job_is_swept(tmp_path):
    backing, holders, _ = tiers_in(tmp_path)
    dead = subprocess.Popen(["true"])
    dead.wait()
    holder = holders / f"{rundir.PREFIX}killed-1234"
    point = holder / mounts.MOUNT_POINT
    point.mkdir(parents=True)
    (holder / rundir.MARKER).write_text(
        f'{{"host": "{socket.gethostname()}", "pid": {dead.pid}, "created_at": "x"}}\n'
    )
    subprocess.run(["bindfs", str(backing), str(point)], check=True)
    try:
        assert mounts.is_mounted(point)
        assert mounts.sweep_stale_mounts(holders) == [str(point)]
        assert not mounts.is_mounted(point)
        assert rundir.sweep_stale(holders) == [holder]
    finally:
        if mounts.is_mounted(point):
            subprocess.run(["fusermount", "-uz", str(point)], check=False)
    assert mountinfo_mentions(tmp_path) == []


def test_a_live_jobs_mount_is_not_swept(tmp_path):
    holder = tmp_path / f"{rundir.PREFIX}alive"
    holder.mkdir()
    (holder / rundir.MARKER).write_text(
        f'{{"host": "{socket.gethostname()}", "pid": {os.getpid()}, "created_at": "x"}}\n'
    )
    assert not mounts._stale(holder)


# --- configuration: backing tiers, `all` and `mounts` -------------------------------------


def resolve(config, tmp_path=REPO):
    return matrix.resolve_tiers(config, REPO / "config/hardware", str(tmp_path))


def test_default_views_resolve_to_their_backing_tier():
    tiers = resolve(CONFIG)
    assert tiers["shm_fuse"]["backing_path"] == "/dev/shm"
    assert tiers["shm_fuse"]["mount"] == "bindfs" and tiers["shm_bind"]["mount"] == "bind"
    # the data lands on shm: its cap applies to the view
    assert tiers["shm_fuse"]["max_bytes"] == tiers["shm"]["max_bytes"]


@pytest.mark.parametrize(
    "tier, message",
    [
        ({"path": "/x/a", "class": "fuse", "backing": "nope"}, "no tier named nope"),
        ({"path": "/x/b", "class": "fuse", "backing": "void"}, "no folder of its own"),
        ({"path": "/x/c", "class": "shm", "backing": "shm", "mount": "bindfs"}, "class fuse"),
        ({"path": "/x/d", "class": "fuse", "backing": "shm", "mount": "bind"}, "needs class shm"),
    ],
)
def test_bad_backing_is_a_config_error_naming_the_key(tier, message):
    config = copy.deepcopy(CONFIG)
    config["tiers"]["view"] = tier
    with pytest.raises(ConfigError, match=rf"tiers\.view\.(backing|mount): .*{message}"):
        resolve(config)


def test_all_leaves_views_out_and_mounts_names_them():
    tiers = resolve(CONFIG)
    assert matrix.experiment_tiers({"name": "e", "tiers": "all"}, tiers) == ["shm", "disk"]
    chosen = matrix.experiment_tiers({"name": "e", "tiers": ["void", "all", "mounts"]}, tiers)
    assert chosen == ["void", "shm", "disk", "shm_fuse", "shm_bind"]


def test_run_spec_carries_the_backing_tier():
    tiers = resolve(CONFIG)
    point = matrix.Point("s", "sinks", "pv", "shm_fuse", "single", {"size": "1MiB"})
    spec = matrix.run_spec(point, tiers["shm_fuse"], 1)
    assert spec["backing_path"] == "/dev/shm" and spec["mount"] == "bindfs"
    plain = matrix.run_spec(point, tiers["shm"], 1)
    assert "backing_path" not in plain and "mount" not in plain


def test_preflight_warns_that_a_view_without_bindfs_will_be_skipped(tmp_path, monkeypatch):
    backing, holders, spec = tiers_in(tmp_path)
    hide_tool(monkeypatch, "bindfs")
    tier = {
        "path": str(holders),
        "class": "fuse",
        "backing": "ram",
        "backing_path": str(backing),
        "backing_class": "tmpfs",
        "mount": "bindfs",
        "max_bytes": None,
    }
    problems, warnings = preflight.check_mounted_tier("ram_view", tier, [1 << 20], 1.2)
    assert problems == []
    assert any("bindfs is not installed" in w and "recorded as skipped" in w for w in warnings)
