"""Probing: mountinfo parsing (captured from a real host), mount lookup, /sys devices."""

import json
import os

from conftest import fixture_text, study_for_report
from test_answer import rows
from tierbench import probe, report


def test_parse_captured_mountinfo():
    mounts = probe.parse_mountinfo(fixture_text("mountinfo.txt"))
    points = {m["mount_point"]: m for m in mounts}
    assert points["/"]["fs_type"] and points["/dev/shm"]["fs_type"] == "tmpfs"


def test_longest_mount_point_wins():
    mounts = [
        {"mount_point": "/", "fs_type": "ext4"},
        {"mount_point": "/dev", "fs_type": "devtmpfs"},
        {"mount_point": "/dev/shm", "fs_type": "tmpfs"},
    ]
    assert probe.mount_of("/dev/shm/x/y", mounts)["fs_type"] == "tmpfs"
    assert probe.mount_of("/dev/shmfoo", mounts)["fs_type"] == "devtmpfs"
    assert probe.mount_of("/home", mounts)["fs_type"] == "ext4"


def test_escaped_mount_point():
    line = "36 35 98:0 / /mnt/with\\040space rw,noatime - ext4 /dev/sda1 rw"
    assert probe.parse_mountinfo(line)[0]["mount_point"] == "/mnt/with space"


def test_block_device_from_fake_sys(tmp_path):
    sys_root = tmp_path / "sys"
    disk = sys_root / "devices/pci/nvme0n1"
    (disk / "queue").mkdir(parents=True)
    (disk / "device").mkdir()
    (disk / "queue/rotational").write_text("0\n")
    (disk / "device/model").write_text("Samsung SSD 970 EVO\n")
    (disk / "size").write_text("1000\n")
    part = disk / "nvme0n1p2"
    part.mkdir()
    (sys_root / "class/block").mkdir(parents=True)
    os.symlink(disk, sys_root / "class/block/nvme0n1")
    os.symlink(part, sys_root / "class/block/nvme0n1p2")
    dev = tmp_path / "dev"
    dev.mkdir()
    (dev / "nvme0n1p2").touch()
    info = probe.block_device("/dev/nvme0n1p2", str(sys_root))
    assert info["disk"] == "nvme0n1"
    assert info["rotational"] is False and info["model"] == "Samsung SSD 970 EVO"
    assert info["size_bytes"] == 512_000


def test_probe_tier_and_host_on_this_machine(tmp_path):
    tier = probe.probe_tier(tmp_path)
    assert tier["exists"] and tier["writable"] and tier["fs_type"] and tier["free_bytes"] > 0
    host = probe.probe_host()
    assert host["cores"] >= 1 and host["memory_bytes"] > 0 and host["kernel"]
    versions = probe.tool_versions({"true": ["true"], "missing": ["no-such-tool-xyz"]})
    assert versions["missing"] is None and versions["python"]


def test_host_says_how_many_cores_the_run_may_use(tmp_path, monkeypatch):
    """Under `taskset -c 0` on 2 cores the report said "2 cores": the run had one."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    host = probe.probe_host()
    assert host["usable_cores"] == 1 and host["cores"] == os.cpu_count()
    frame = rows("fio", "write_bandwidth", "MB/s", {"disk": [100, 101, 99]}).assign(
        study="s", host="h", started_at="t", duration_s=1
    )
    study_for_report(tmp_path / "m" / "s", frame, ["disk"])
    tiers = tmp_path / "m/s/provenance/tiers.json"
    found = json.loads(tiers.read_text())
    found["host"].update(cores=2, usable_cores=1)
    tiers.write_text(json.dumps(found))
    assert "2 cores (1 usable by this run)" in report.render(tmp_path / "m", ["s"], {"s": "S"})
    found["host"]["usable_cores"] = 2
    tiers.write_text(json.dumps(found))
    assert "2 cores, " in report.render(tmp_path / "m", ["s"], {"s": "S"})


def test_version_strings_lose_their_copyright_notice():
    from tierbench.probe import clean_version

    assert clean_version("pv 1.6.20 - Copyright 2015 Andrew Wood <andrew.wood@ivarch.com>\n") == (
        "pv 1.6.20"
    )
    assert clean_version("fio-3.33\n") == "fio-3.33"
    assert clean_version("gcc (Debian 12.2.0-14) 12.2.0\nCopyright (C) 2022\n") == (
        "gcc (Debian 12.2.0-14) 12.2.0"
    )
    assert clean_version("\n\n") is None
