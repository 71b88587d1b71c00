"""dd: the documents' invocations, parsing dd's own output, ENOSPC, the file-size sweep."""

import os
import re
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from conftest import fixture_text, job_spec
from tierbench.errors import ConfigError, PointFailed
from tierbench.matrix import check_point
from tierbench.rundir import RunFolder
from tierbench.runner import run_job
from tierbench.workloads import dd

MiB = 1024**2
GiB = 1024**3


def test_document_invocations_are_kept_as_written():
    doc003 = {"block_size": "10M", "count": 1024, "sync": "buffered"}
    assert dd.command_line(doc003, "random.img", doc003["count"]) == [
        "dd",
        "if=/dev/zero",
        "of=random.img",
        "bs=10M",
        "count=1024",
    ]
    doc004 = {"block_size": "1M", "count": "10k", "sync": "fdatasync"}
    assert " ".join(dd.command_line(doc004, "X", doc004["count"])) == (
        "dd if=/dev/zero of=X bs=1M count=10k conv=fdatasync"
    )
    # sizes dd would read differently are passed in bytes
    odd = {"block_size": "64MiB", "count": 2, "sync": "buffered"}
    assert "bs=67108864" in dd.command_line(odd, "x", 2)


def test_planned_bytes_are_count_times_block():
    assert dd.planned_bytes({"block_size": "1M", "count": "10k", "sync": "buffered"}) == 10 * GiB
    assert dd.planned_bytes({"block_size": "10M", "count": 1024, "sync": "buffered"}) == 10 * GiB
    sweep = {
        "block_size": "1M",
        "file_fraction": 0.5,
        "relative_to": "ram",
        "max_file_size": "2GiB",
        "sync": "buffered",
    }
    assert dd.planned_bytes(sweep) == 2 * GiB


def close_to_dd_rate(parsed):
    """dd prints its rate to 2-3 significant digits; bytes / seconds must round to it."""
    return parsed["rate_bps"] == pytest.approx(parsed["bytes"] / parsed["seconds"], rel=0.05)


@pytest.mark.parametrize(
    ("name", "n_bytes", "seconds", "rate_bps"),
    [
        ("dd_buffered_shm.txt", 209715200, 0.155515, 1.3e9),
        ("dd_fdatasync_disk.txt", 67108864, 0.0800966, 838e6),
        ("dd_one_small_block_disk.txt", 512, 4.3775e-05, 11.7e6),
        ("dd_document_003_home.txt", 10737418240, 4.93953, 2.2e9),
    ],
)
def test_parse_real_dd_output(name, n_bytes, seconds, rate_bps):
    parsed = dd.parse_dd(fixture_text(name))
    assert (parsed["bytes"], parsed["seconds"], parsed["rate_bps"]) == (n_bytes, seconds, rate_bps)
    assert parsed["errors"] == []
    assert close_to_dd_rate(parsed)
    metrics = {m["metric"]: m for m in dd.dd_metrics(parsed)}
    assert metrics["write_bandwidth"]["unit"] == "MB/s"
    assert metrics["write_bandwidth"]["value"] == pytest.approx(n_bytes / seconds / 1e6)
    assert metrics["bytes"]["value"] == n_bytes and metrics["time"]["unit"] == "s"


def test_document_003_home_matches_its_published_rate():
    parsed = dd.parse_dd(fixture_text("dd_document_003_home.txt"))
    assert parsed["records_out"] == (1024, 0)
    assert parsed["bytes"] / parsed["seconds"] / 1e9 == pytest.approx(2.17, abs=0.01)


@pytest.mark.parametrize(
    ("name", "written"),
    [
        ("dd_enospc_tmpfs.txt", 4194304),
        ("dd_enospc_partial_block_tmpfs.txt", 4194304),
        ("dd_document_003_tmpfs_enospc.txt", 10737418240),
    ],
)
def test_enospc_is_a_readable_failure_with_bytes_written(name, written):
    parsed = dd.parse_dd(fixture_text(name))
    assert parsed["errors"] == ["dd: error writing 'random.img': No space left on device"]
    assert parsed["bytes"] == written
    message = dd.failure_message(parsed, 10 * MiB)
    assert message.startswith("dd: error writing 'random.img': No space left on device: ")
    assert f"wrote {written} B" in message and f"of {10 * MiB} B" in message


def test_partial_block_is_counted_in_bytes_not_records():
    parsed = dd.parse_dd(fixture_text("dd_enospc_partial_block_tmpfs.txt"))
    assert parsed["records_out"] == (0, 0) and parsed["bytes"] == 4 * MiB


@pytest.mark.parametrize(
    "text",
    ["", "dd: failed to open 'x': Permission denied\n", "1+0 records in\n1+0 records out\n"],
)
def test_no_summary_line_is_a_clear_failure(text):
    with pytest.raises(PointFailed, match="no summary line"):
        dd.parse_dd(text)


def test_infinite_rate_keeps_bytes_and_time():
    parsed = dd.parse_dd("0+0 records in\n0+0 records out\n0 bytes copied, 0 s, Infinity B/s\n")
    assert parsed["bytes"] == 0 and parsed["rate_bps"] == float("inf")
    with pytest.raises(PointFailed, match="too short"):
        dd.dd_metrics(parsed)


def test_binary_rate_units():
    parsed = dd.parse_dd("1048576 bytes (1.0 MB, 1.0 MiB) copied, 1 s, 1.0 MiB/s\n")
    assert parsed["rate_bps"] == 1024**2


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"block_size": "1M", "sync": "buffered"}, "exactly one of count"),
        (
            {
                "block_size": "1M",
                "count": 4,
                "file_fraction": 0.5,
                "relative_to": "ram",
                "max_file_size": "1GiB",
                "sync": "buffered",
            },
            "exactly one of count",
        ),
        (
            {"block_size": "1M", "file_fraction": 0.5, "relative_to": "ram", "sync": "buffered"},
            "max_file_size",
        ),
        (
            {
                "block_size": "10M",
                "file_fraction": 0.5,
                "relative_to": "ram",
                "max_file_size": "1M",
                "sync": "buffered",
            },
            "smaller than one block",
        ),
        ({"block_size": "1M", "count": 4, "sync": "direct"}, "sync"),
        ({"block_size": "1M", "count": "ten", "sync": "buffered"}, "count"),
    ],
)
def test_bad_params_are_named_at_parse_time(params, message):
    with pytest.raises(ConfigError, match=message):
        check_point("dd", params, "s.dd_zero[p]")


def fake_proc(
    root: Path, dirty_ratio=20, dirty_bytes=0, background_ratio=10, background_bytes=0
) -> Path:
    (root / "sys" / "vm").mkdir(parents=True)
    (root / "meminfo").write_text(
        "MemTotal:       24000000 kB\nMemFree:        20000000 kB\n"
        "MemAvailable:   22000000 kB\nActive(file):     500000 kB\n"
        "Inactive(file):   500000 kB\n"
    )
    values = {
        "dirty_ratio": dirty_ratio,
        "dirty_bytes": dirty_bytes,
        "dirty_background_ratio": background_ratio,
        "dirty_background_bytes": background_bytes,
    }
    for name, value in values.items():
        (root / "sys" / "vm" / name).write_text(f"{value}\n")
    return root


def test_dirty_limits_from_ratios(tmp_path):
    limits = dd.memory_limits(fake_proc(tmp_path))
    dirtyable = 21000000 * 1024
    assert limits["ram"] == 24000000 * 1024
    assert limits["dirty_limit"] == 20 * dirtyable // 100
    assert limits["dirty_background"] == 10 * dirtyable // 100


def test_dirty_bytes_win_over_ratios_and_background_stays_below(tmp_path):
    limits = dd.memory_limits(fake_proc(tmp_path, dirty_bytes=GiB, background_bytes=2 * GiB))
    assert limits["dirty_limit"] == GiB
    assert limits["dirty_background"] == GiB // 2  # as the kernel does


def test_dirty_limits_of_this_machine():
    limits = dd.memory_limits()
    assert 0 < limits["dirty_background"] < limits["dirty_limit"] < limits["ram"]


def spec(tmp_path, **params):
    params = {"block_size": "1M", "count": 4, "sync": "buffered", **params}
    return job_spec("dd", tmp_path, params, experiment="dd_zero")


def sweep_spec(tmp_path, fraction, cap="64MiB", sync="buffered", **extra):
    record = spec(
        tmp_path, file_fraction=fraction, relative_to="dirty_limit", max_file_size=cap, sync=sync
    )
    del record["params"]["count"]
    return {**record, **extra}


LIMITS = {
    "ram": 24 * GiB,
    "dirtyable": 20 * GiB,
    "dirty_limit": 4 * GiB,
    "dirty_background": 2 * GiB,
}


def test_sweep_point_above_the_cap_is_skipped_before_writing(tmp_path, monkeypatch):
    monkeypatch.setattr(dd, "memory_limits", lambda: LIMITS)
    record = run_job(sweep_spec(tmp_path, 0.5), dd.run)
    (only,) = record["metrics"]
    assert only["status"] == "skipped"
    assert only["reason"] == (
        "file of 2 GiB (0.5 x dirty_limit 4 GiB) is above the sweep cap max_file_size=64 MiB"
    )
    assert list(tmp_path.iterdir()) == []


def test_sweep_point_above_the_tier_cap_is_skipped(tmp_path, monkeypatch):
    monkeypatch.setattr(dd, "memory_limits", lambda: LIMITS)
    record = run_job(sweep_spec(tmp_path, 1 / 512, max_bytes=MiB), dd.run)
    assert record["metrics"][0]["status"] == "skipped"
    assert "above the tier's max_bytes=1 MiB" in record["metrics"][0]["reason"]


def test_sweep_point_beyond_free_space_is_skipped(tmp_path, monkeypatch):
    monkeypatch.setattr(dd, "memory_limits", lambda: LIMITS)
    usage = shutil.disk_usage(tmp_path)._replace(free=MiB)
    monkeypatch.setattr(dd.shutil, "disk_usage", lambda path: usage)
    record = run_job(sweep_spec(tmp_path, 1 / 512), dd.run)
    assert "does not fit the tier's 1 MiB free space" in record["metrics"][0]["reason"]


@pytest.mark.skipif(shutil.which("dd") is None, reason="dd not installed")
def test_real_sweep_point_writes_its_fraction(tmp_path, monkeypatch):
    monkeypatch.setattr(dd, "memory_limits", lambda: LIMITS)
    record = run_job(sweep_spec(tmp_path, 1 / 1024, sync="fdatasync"), dd.run)
    metrics = {m["metric"]: m for m in record["metrics"]}
    assert metrics["bytes"]["value"] == 4 * MiB  # 4 GiB / 1024, in 1 MiB blocks
    assert metrics["target_bytes"]["value"] == 4 * MiB
    assert metrics["dirty_limit_bytes"]["value"] == 4 * GiB
    assert record["extra"]["command"].endswith("bs=1M count=4 conv=fdatasync")


@pytest.mark.skipif(shutil.which("dd") is None, reason="dd not installed")
def test_real_run_in_its_own_folder(tmp_path):
    (tmp_path / "users-file.txt").write_text("keep me")
    record = run_job(spec(tmp_path, count=3), dd.run)
    metrics = {m["metric"]: m for m in record["metrics"]}
    assert metrics["bytes"]["value"] == 3 * MiB
    assert metrics["write_bandwidth"]["value"] > 0
    assert close_to_dd_rate(dd.parse_dd(record["extra"]["dd_output"]))
    assert record["extra"]["command"] == "dd if=/dev/zero of=random.img bs=1M count=3"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["users-file.txt"]


def test_cap_below_file_size_fails_before_writing(tmp_path):
    record = run_job({**spec(tmp_path), "max_bytes": MiB}, dd.run)
    assert record["metrics"][0]["status"] == "failed"
    assert "max_bytes" in record["metrics"][0]["reason"]
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def tiny_tmpfs():
    """A 4 MiB tmpfs (needs root); unmounted afterwards."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    mount_point = Path(f"/mnt/tierbench-test-{uuid.uuid4().hex[:8]}")
    mount_point.mkdir(parents=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        mount_point.rmdir()
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", str(mount_point)], check=True)
        mount_point.rmdir()


def test_a_point_larger_than_the_free_space_does_not_start(tiny_tmpfs):
    record = run_job(spec(tiny_tmpfs, count=10), dd.run)
    assert record["metrics"][0]["status"] == "failed"
    assert re.search(
        r"needs 10 MiB but .* has [\d.]+ [KM]iB free \(10,485,760 > [\d,]+ bytes\)",
        record["metrics"][0]["reason"],
    ), record["metrics"][0]["reason"]
    assert "dd_output" not in record["extra"]


@pytest.mark.skipif(shutil.which("dd") is None, reason="dd not installed")
def test_real_enospc_is_recorded_with_dd_line_and_bytes(tiny_tmpfs, monkeypatch):
    """The tier fills up while dd runs (space taken after the check): dd's own error line."""
    monkeypatch.setattr(RunFolder, "ensure_space", lambda self, needed, cap: None)
    record = run_job(spec(tiny_tmpfs, count=10), dd.run)
    (only,) = record["metrics"]
    assert only["status"] == "failed"
    assert "dd: error writing 'random.img': No space left on device" in only["reason"]
    assert f"of {10 * MiB} B" in only["reason"]
    written = int(only["reason"].split("wrote ")[1].split(" B")[0])
    assert 0 < written < 10 * MiB
    assert list(tiny_tmpfs.iterdir()) == []  # the run folder is gone, the tier is empty again


def test_missing_dd_is_named_by_the_preflight(monkeypatch):
    from tierbench import preflight

    monkeypatch.setattr(preflight.shutil, "which", lambda tool: None)
    problems = preflight.check_tools({"dd"})
    assert problems and "tool dd is not installed" in problems[0]
