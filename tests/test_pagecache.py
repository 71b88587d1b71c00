"""Page-cache validity of a point: could what it measured have stayed in memory?"""

import json

import pytest
from tierbench import aggregate, matrix, pagecache
from tierbench.pagecache import DEVICE, IN_MEMORY, NOT_APPLICABLE, RAM_TIER, UNKNOWN
from tierbench.records import metric
from tierbench.workloads import Workload, get, registry

GIB = 2**30
#: a node with 24 GiB of RAM and a 4 GiB dirty limit
LIMITS = {"ram": 24 * GIB, "dirtyable": 20 * GIB, "dirty_limit": 4 * GIB, "dirty_background": GIB}


def assess(workload, params, tier_class="disk", limits=LIMITS):
    """The page cache of a point of the registry's ``workload``."""
    return pagecache.assess(get(workload), params, tier_class, limits)


def state(workload, params, tier_class="disk", limits=LIMITS):
    return assess(workload, params, tier_class, limits)["page_cache"]


def fio(**params):
    return {"rw": "write", "block_size": "4k", "size": "1GiB", "runtime": 5, **params}


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        (fio(io_mode="direct"), DEVICE),
        (fio(io_mode="fsync", rw="randrw"), DEVICE),
        (fio(io_mode="buffered"), IN_MEMORY),
        (fio(io_mode="buffered", size="8GiB"), DEVICE),
        # a read of a file whose pages were dropped first, read once, reaches the device
        (fio(io_mode="buffered", rw="randread"), DEVICE),
        # read four times: after the first pass the file is in the page cache
        (fio(io_mode="buffered", rw="randread", io_size="4GiB"), IN_MEMORY),
        (fio(io_mode="buffered", rw="read", size="32GiB", io_size="64GiB"), DEVICE),
        (fio(io_mode="direct", rw="randread", io_size="4GiB"), DEVICE),
    ],
)
def test_fio(params, expected):
    assert state("fio", params) == expected


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"block_size": "1M", "count": 200, "sync": "buffered"}, IN_MEMORY),
        ({"block_size": "1M", "count": "10k", "sync": "buffered"}, DEVICE),
        ({"block_size": "1M", "count": 200, "sync": "fdatasync"}, DEVICE),
        ({"block_size": "1M", "count": 200, "sync": "buffered", "oflag": "direct"}, DEVICE),
        ({"block_size": "1M", "count": 200, "sync": "buffered", "conv": "notrunc,fsync"}, DEVICE),
    ],
)
def test_dd(params, expected):
    assert state("dd", params) == expected


def test_dd_cliff_points_are_sized_from_the_node_s_limits():
    cliff = {"block_size": "1M", "relative_to": "dirty_limit", "max_file_size": "64GiB"}
    cliff["sync"] = "buffered"
    assert state("dd", {**cliff, "file_fraction": 0.5}) == IN_MEMORY
    assert state("dd", {**cliff, "file_fraction": 2}) == DEVICE
    assert state("dd", {**cliff, "file_fraction": 2}, limits=None) == UNKNOWN


def test_pv_is_always_buffered_and_the_size_decides():
    assert state("pv", {"size": "450MiB"}) == IN_MEMORY
    assert state("pv", {"size": "16GiB"}) == DEVICE
    assert state("pv", {"size": "450MiB"}, limits=None) == UNKNOWN


def test_cfd_proxy_fsync_and_the_peak_on_the_tier():
    point = {"ranks": 1, "steps": 100, "write_interval": 1, "cells_per_rank": 125000}
    assert state("cfd_proxy", {**point, "purge_write": 1}) == IN_MEMORY
    assert state("cfd_proxy", {**point, "fsync": True}) == DEVICE
    tiny = {**LIMITS, "dirty_limit": 1 << 20}
    assert state("cfd_proxy", {**point, "purge_write": 0}, limits=tiny) == DEVICE
    assert state("cfd_proxy", {**point, "write_interval": "none"}) == NOT_APPLICABLE


def test_ram_tiers_void_and_unknown_classes():
    params = {"size": "450MiB"}
    for ram in ("shm", "tmpfs", "pmem-fsdax"):
        assert state("pv", params, tier_class=ram) == RAM_TIER
    assert state("pv", params, tier_class="void") == NOT_APPLICABLE
    assert state("stream", {}, tier_class="void") == NOT_APPLICABLE
    assert state("pv", params, tier_class="fuse") == UNKNOWN


def test_a_workload_without_a_rule_is_unknown_on_a_device_and_says_why():
    """A new workload needs no entry elsewhere: without a rule in its declaration its device
    points read ``unknown``, with the reason; its RAM-tier points need none."""
    plain = Workload(name="plain", summary="", run=print)
    found = pagecache.assess(plain, {}, "ssd", LIMITS)
    assert found["page_cache"] == UNKNOWN
    assert "plain: its declaration has no page-cache rule" in found["page_cache_reason"]
    assert pagecache.assess(plain, {}, "tmpfs", LIMITS)["page_cache"] == RAM_TIER


#: workloads whose writes only the user knows (a command line of theirs: it may fsync or not)
USERS_OWN = ("command",)


def test_every_workload_that_writes_to_its_tier_declares_its_rule():
    for name, declared in registry().items():
        if name not in USERS_OWN and declared.writes_to_tier:
            assert declared.page_cache is not None, name


@pytest.mark.parametrize("workload", ["cfd_proxy", "openfoam"])
def test_both_cfd_workloads_the_peak_of_their_buffered_output(workload):
    """simpleFoam writes buffered like the proxy: a verdict comparing a disk that kept its
    time folders in the page cache with /dev/shm says the device was never reached."""
    point = {"ranks": 1, "steps": 100, "write_interval": 1, "cells_per_rank": 20000}
    point = matrix.complete(workload, point)
    assert state(workload, point) == IN_MEMORY
    assert "no fsync" in assess(workload, point)["page_cache_reason"]
    assert state(workload, point, limits={**LIMITS, "dirty_limit": 1 << 20}) == DEVICE
    assert state(workload, {**point, "write_interval": "none"}) == NOT_APPLICABLE


@pytest.mark.parametrize("workload", ["fe_proxy", "calculix"])
def test_both_fe_workloads_buffered_unless_fsynced(workload):
    point = matrix.complete(workload, {"cores": 2, "population": 4, "generations": 1})
    assert state(workload, point) == IN_MEMORY
    assert state(workload, point, limits={**LIMITS, "dirty_limit": 1 << 10}) == DEVICE
    if workload == "fe_proxy":
        assert state(workload, {**point, "fsync": "increment"}) == DEVICE


#: a CFD point of a few MB: far under the dirty limit
SMALL_CFD = {"ranks": 2, "steps": 100, "write_interval": 1, "cells_per_rank": 20000}


@pytest.mark.parametrize("workload", ["cfd_proxy", "openfoam"])
@pytest.mark.parametrize("network", ["lustre", "glusterfs"])
def test_cfd_output_on_a_network_tier_reaches_the_server_whatever_its_size(workload, network):
    """Every write creates files and folders, each a round trip to the server: the page cache
    holds the data, not the creates. On a local disk the same point may stay in memory."""
    point = matrix.complete(workload, SMALL_CFD)
    found = assess(workload, point, network)
    assert found["page_cache"] == DEVICE
    reason = found["page_cache_reason"]
    assert f"{workload} on a {network} tier" in reason and "not metadata" in reason
    assert state(workload, point, tier_class="disk") == IN_MEMORY
    # no dirty limit is needed to know it, and a run that writes nothing still writes nothing
    assert state(workload, point, tier_class=network, limits=None) == DEVICE
    no_io = {**point, "write_interval": "none"}
    assert state(workload, no_io, tier_class=network) == NOT_APPLICABLE


def test_the_proxy_counts_the_files_and_folders_a_write_creates():
    """2 ranks, uncollated, OpenFOAM v1912's set: 9 files and 3 folders per rank and write."""
    point = matrix.complete("cfd_proxy", SMALL_CFD)
    reason = assess("cfd_proxy", point, "lustre")["page_cache_reason"]
    assert "each write creates 18 files and 6 folders" in reason
    collated = {**point, "file_handler": "collated", "ensemble": 2}
    reason = assess("cfd_proxy", collated, "lustre")["page_cache_reason"]
    assert "each write creates 18 files and 6 folders" in reason
    openfoam = matrix.complete("openfoam", SMALL_CFD)
    reason = assess("openfoam", openfoam, "lustre")["page_cache_reason"]
    assert "each write creates files and folders" in reason


@pytest.mark.parametrize("workload", ["fe_proxy", "calculix"])
def test_fe_output_on_a_network_tier_reaches_the_server(workload):
    point = matrix.complete(workload, {"cores": 2, "population": 4, "generations": 1})
    assert state(workload, point, tier_class="nfs") == DEVICE
    assert state(workload, point, tier_class="ssd") == IN_MEMORY


def test_a_data_only_buffered_write_on_a_network_tier_is_judged_by_its_bytes():
    """A client's page cache does absorb data: dd, pv and fio there count as on a disk."""
    small_dd = {"block_size": "1M", "count": 4, "sync": "buffered"}
    for network in ("nfs", "glusterfs"):
        assert state("dd", small_dd, tier_class=network) == IN_MEMORY
        assert state("dd", {**small_dd, "count": "10k"}, tier_class=network) == DEVICE
        assert state("pv", {"size": "4MiB"}, tier_class=network) == IN_MEMORY
        assert state("fio", fio(io_mode="buffered"), tier_class=network) == IN_MEMORY
        assert state("dd", small_dd, tier_class=network, limits=None) == UNKNOWN
    assert not pagecache.reaches_server(get("dd"), "nfs")
    assert pagecache.reaches_server(get("openfoam"), "gpfs")
    assert not pagecache.reaches_server(get("openfoam"), "nvme")
    assert not pagecache.reaches_server(None, "lustre")  # a workload the registry does not know


def test_the_reason_is_one_line_with_the_numbers():
    found = assess("pv", {"size": "450MiB"})
    assert set(found) == {"page_cache", "page_cache_reason"}
    assert "450 MiB" in found["page_cache_reason"] and "4 GiB" in found["page_cache_reason"]
    assert "\n" not in found["page_cache_reason"]


def test_memory_limits_from_a_fake_proc(tmp_path):
    (tmp_path / "sys" / "vm").mkdir(parents=True)
    (tmp_path / "meminfo").write_text(
        "MemTotal: 1000 kB\nMemFree: 600 kB\nActive(file): 100 kB\nInactive(file): 100 kB\n"
    )
    for name, value in {
        "dirty_bytes": 0,
        "dirty_ratio": 20,
        "dirty_background_bytes": 0,
        "dirty_background_ratio": 10,
    }.items():
        (tmp_path / "sys" / "vm" / name).write_text(f"{value}\n")
    limits = pagecache.memory_limits(tmp_path)
    assert limits == {
        "ram": 1024000,
        "dirtyable": 819200,
        "dirty_limit": 163840,
        "dirty_background": 81920,
    }
    spec = {"workload": "pv", "params": {"size": "1MiB"}, "tier_class": "disk"}
    assert pagecache.for_spec(spec, get("pv"), limits)["page_cache"] == DEVICE


def test_for_spec_reads_this_node_s_limits():
    spec = {"workload": "pv", "params": {"size": "4KiB"}, "tier_class": "disk"}
    assert pagecache.for_spec(spec, get("pv"))["page_cache"] == IN_MEMORY


def test_for_spec_never_fails_the_run_over_params_it_cannot_size():
    spec = {"workload": "pv", "params": {}, "tier_class": "disk"}
    found = pagecache.for_spec(spec, get("pv"), LIMITS)
    assert found["page_cache"] == UNKNOWN and "size" in found["page_cache_reason"]


def raw(tmp_path, rep, tier, page_cache):
    record = {
        "spec": {
            "study": "s",
            "experiment": "sinks",
            "workload": "pv",
            "tier": tier,
            "tier_class": "disk",
            "point": "size=450MiB",
            "params": {"size": "450MiB"},
            "repetition": rep,
            "phase": "measured",
        },
        "context": {"host": {"host": "node1"}},
        "started_at": f"2026-01-01T00:00:0{rep}+00:00",
        "duration_s": 1.0,
        "metrics": [metric("throughput", 100.0 + rep, "MB/s")],
    }
    if page_cache is not None:
        record["page_cache"] = page_cache
    path = tmp_path / f"{tier}-{rep}.json"
    path.write_text(json.dumps(record))
    return str(path)


def test_aggregate_carries_the_page_cache_per_run_and_per_point(tmp_path):
    found = assess("pv", {"size": "450MiB"})
    paths = [raw(tmp_path, rep, "disk", found) for rep in (1, 2)]
    paths += [raw(tmp_path, rep, "old", None) for rep in (1, 2)]
    frame = aggregate.load_records(paths)
    assert list(frame.columns[-2:]) == aggregate.PAGE_CACHE_COLUMNS
    assert "page_cache" not in aggregate.param_columns(frame)
    summary = aggregate.summarise(frame, 0.25).set_index("tier")
    assert summary.loc["disk", "page_cache"] == IN_MEMORY
    assert summary.loc["disk", "page_cache_reason"] == found["page_cache_reason"]
    assert summary.loc["old", "page_cache"] == ""  # records from before the runner set it
