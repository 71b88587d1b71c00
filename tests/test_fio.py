"""fio: job rendering and parsing of fio's JSON output captured from real runs."""

import errno
import re

import pytest
from conftest import fixture_text, job_spec
from tierbench.errors import PointFailed
from tierbench.matrix import complete
from tierbench.runner import run_job
from tierbench.workloads import fio

WORST = complete(
    "fio",
    {
        "rw": "randrw",
        "block_size": "4k",
        "io_mode": "fsync",
        "size": "8MiB",
        "io_size": "16MiB",
        "runtime": 2,
        "ramp_time": 0,
        "iodepth": 1,
        "numjobs": 1,
    },
)


def by_name(metrics):
    return {m["metric"]: m for m in metrics}


def test_worst_case_fixture_has_read_write_and_fsync():
    metrics = by_name(fio.parse_fio_json(fixture_text("fio_randrw_fsync_shm.json")))
    for name in (
        "read_bandwidth",
        "write_bandwidth",
        "read_iops",
        "write_clat_p99",
        "fsync_lat_p50",
    ):
        assert metrics[name]["value"] > 0, name
    assert metrics["read_bandwidth"]["unit"] == "MB/s"
    assert metrics["write_clat_p50"]["unit"] == "us"
    # bandwidth and bytes agree with fio's own runtime: bytes / bw is a plausible time
    seconds = metrics["write_bytes"]["value"] / (metrics["write_bandwidth"]["value"] * 1e6)
    assert 0.01 < seconds < 10
    # fio's usr_cpu and sys_cpu (37.5 % each): how much of its time it spent on a CPU
    assert metrics["cpu_usage"]["value"] == pytest.approx(75.0)
    assert metrics["cpu_usage"]["unit"] == "%"
    # a run too short for the kernel's CPU accounting reads 0 %: no reading, not a zero
    text = re.sub(
        r'"(usr|sys)_cpu" : [0-9.]+',
        r'"\1_cpu" : 0.000000',
        fixture_text("fio_randrw_fsync_shm.json"),
    )
    assert "cpu_usage" not in by_name(fio.parse_fio_json(text))


def test_sequential_write_fixture_has_only_write():
    metrics = by_name(fio.parse_fio_json(fixture_text("fio_write_direct_disk.json")))
    assert "write_bandwidth" in metrics and "read_bandwidth" not in metrics
    assert metrics["write_bytes"]["value"] == 16 * 1024**2


def test_sequential_read_fixture_has_only_read():
    metrics = by_name(fio.parse_fio_json(fixture_text("fio_read_direct_disk.json")))
    assert "read_bandwidth" in metrics and "write_bandwidth" not in metrics


def test_enospc_fixture_is_a_readable_failure():
    with pytest.raises(PointFailed, match=r"No space left on device.*after writing \d+ B"):
        fio.parse_fio_json(fixture_text("fio_write_enospc_tmpfs.json"))


@pytest.mark.parametrize(
    "text",
    [
        "",
        "not json",
        "{}",
        '{"jobs": []}',
        '{"jobs": [1]}',
        '{"jobs": [{"read": {"io_bytes": 5}}]}',
    ],
)
def test_garbage_is_a_clear_failure(text):
    with pytest.raises(PointFailed):
        fio.parse_fio_json(text)


def test_preamble_before_json_is_ignored():
    text = "fio: some note\n" + fixture_text("fio_write_direct_disk.json")
    assert fio.parse_fio_json(text)


def test_rendered_job_states_the_mode():
    job = fio.render_job(
        WORST, "/x/file", {"experiment": "worst_case", "point": "single", "tier": "shm"}
    )
    assert "rw=randrw" in job and "bs=4096" in job and "fsync=1" in job and "direct=0" in job
    assert "size=8388608" in job and "io_size=16777216" in job and "fsync after every write" in job
    sequential = {k: v for k, v in WORST.items() if k != "io_size"}
    direct = fio.render_job(
        {**sequential, "io_mode": "direct", "rw": "write"},
        "/x/f",
        {"experiment": "seq", "point": "p", "tier": "disk"},
    )
    assert "direct=1" in direct and "fsync=0" in direct and "io_size" not in direct


def test_check_params_rejects_block_larger_than_file():
    with pytest.raises(ValueError, match="larger than the file"):
        fio.check_params({**WORST, "block_size": "16M"})


def spec(tmp_path, **params):
    return job_spec("fio", tmp_path, {**WORST, **params}, experiment="worst_case", point="single")


def test_direct_refused_is_not_applicable(tmp_path, monkeypatch):
    real_open = fio.os.open

    def refuse(path, flags, *args, **kwargs):
        if flags & fio.os.O_DIRECT:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(fio.os, "open", refuse)
    record = run_job(spec(tmp_path, io_mode="direct", rw="write"), fio.run)
    assert record["metrics"][0]["status"] == "not_applicable"
    assert "O_DIRECT" in record["metrics"][0]["reason"]
    assert list(tmp_path.iterdir()) == []  # the run folder is gone


def test_cap_below_file_size_fails_before_writing(tmp_path):
    record = run_job({**spec(tmp_path), "max_bytes": 1024 * 1024}, fio.run)
    assert record["metrics"][0]["status"] == "failed"
    assert "max_bytes" in record["metrics"][0]["reason"]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(fio.shutil.which("fio") is None, reason="fio not installed")
def test_real_fio_run_in_its_own_folder(tmp_path):
    (tmp_path / "users-file.txt").write_text("keep me")
    record = run_job(spec(tmp_path, size="1MiB", io_size="1MiB", runtime=1), fio.run)
    metrics = by_name(record["metrics"])
    assert metrics["write_bandwidth"]["value"] > 0 and metrics["read_bandwidth"]["value"] > 0
    assert "rw=randrw" in record["extra"]["fio_job"]
    assert record["context"]["tier"]["fs_type"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["users-file.txt"]
    assert (tmp_path / "users-file.txt").read_text() == "keep me"
