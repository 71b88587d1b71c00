"""STREAM: byte counting, the array-size rule, parsing real output, a real run."""

import shutil
from pathlib import Path

import pytest
from conftest import fixture_text
from tierbench.errors import ConfigError, PointFailed
from tierbench.matrix import check_point
from tierbench.runner import run_job
from tierbench.workloads import stream

MiB = 1024**2


def test_bytes_are_counted_as_stream_counts_them():
    n = 1000
    assert stream.kernel_bytes("copy", n) == 2 * 8 * n
    assert stream.kernel_bytes("scale", n) == 2 * 8 * n
    assert stream.kernel_bytes("add", n) == 3 * 8 * n
    assert stream.kernel_bytes("triad", n) == 3 * 8 * n


def test_document_003_rates_follow_from_stream_byte_count():
    """STREAM's published table (document 003): rate = bytes / min time, to print precision."""
    parsed = stream.parse_stream(fixture_text("stream_document_003.txt"))
    assert parsed["elements"] == 100_000_000
    assert parsed["threads"] == 6
    assert parsed["validates"]
    for name, kernel in parsed["kernels"].items():
        recomputed = 1e-6 * stream.kernel_bytes(name, parsed["elements"]) / kernel["min"]
        assert recomputed == pytest.approx(kernel["rate"], rel=1e-4), name
        assert kernel["min"] <= kernel["avg"] <= kernel["max"]
    assert parsed["kernels"]["copy"]["rate"] == 53443.8


def test_our_build_prints_the_same_table():
    """Output of csrc/stream.c captured from a real run: same parser, same arithmetic."""
    parsed = stream.parse_stream(fixture_text("stream_tierbench_2threads.txt"))
    assert parsed["threads"] == 2 and parsed["validates"]
    for name, kernel in parsed["kernels"].items():
        recomputed = 1e-6 * stream.kernel_bytes(name, parsed["elements"]) / kernel["min"]
        assert recomputed == pytest.approx(kernel["rate"], rel=1e-3), name
    metrics = {m["metric"]: m for m in stream.stream_metrics(parsed)}
    assert metrics["triad_bandwidth"]["unit"] == "MB/s"
    assert metrics["triad_bytes"]["value"] == 3 * 8 * parsed["elements"]
    assert metrics["array_bytes"]["value"] == 8 * parsed["elements"]


def test_failed_validation_is_a_failure():
    text = fixture_text("stream_tierbench_2threads.txt").replace(
        "Solution Validates: avg error less than 1.000000e-13 on all three arrays",
        "Failed Validation on array a[], AvgRelAbsErr > epsilon (1.000000e-13)",
    )
    with pytest.raises(PointFailed, match="does not validate.*Failed Validation on array a"):
        stream.stream_metrics(stream.parse_stream(text))


@pytest.mark.parametrize("text", ["", "Copy: 1 2 3 4\n", "segfault"])
def test_output_without_the_table_is_a_clear_failure(text):
    with pytest.raises(PointFailed, match="four kernels"):
        stream.parse_stream(text)


def test_arrays_are_four_times_the_last_level_cache():
    llc = 32 * MiB
    assert stream.array_elements({"threads": 1}, llc) == 4 * llc // 8
    assert stream.array_elements({"threads": 1, "llc_factor": 8}, llc) == 8 * llc // 8
    assert stream.array_elements({"threads": 1, "array_size": 10**8}, llc) == 10**8


def test_array_size_below_the_rule_is_refused():
    with pytest.raises(ValueError, match="below 4 x the 32 MiB of last-level cache"):
        stream.array_elements({"threads": 1, "array_size": 1000}, 32 * MiB)


def test_no_cap_on_the_array_size_can_be_set():
    """The node's memory bounds the arrays, never a constant a study file carries."""
    with pytest.raises(ConfigError, match="max_array_size"):
        check_point("stream", {"threads": 1, "max_array_size": "1GiB"}, "s.memory[single]")


def test_schema_names_unknown_key():
    with pytest.raises(ConfigError, match="thread"):
        check_point("stream", {"thread": 2}, "s.memory[single]")


def _cache(root: Path, cpu: int, index: int, level: int, kind: str, size: str, shared: str):
    """One cache of one CPU, as sysfs shows it under cpu<N>/cache/index<M>."""
    folder = root / f"cpu{cpu}" / "cache" / f"index{index}"
    folder.mkdir(parents=True)
    for name, value in (
        ("level", level),
        ("type", kind),
        ("size", size),
        ("shared_cpu_list", shared),
    ):
        (folder / name).write_text(f"{value}\n")


def test_last_level_cache_sums_distinct_instances(tmp_path):
    """Two sockets of 2 CPUs, each with its own 16 MiB L3: 32 MiB in all."""
    for cpu in range(4):
        shared = "0-1" if cpu < 2 else "2-3"
        _cache(tmp_path, cpu, 0, 1, "Data", "32K", str(cpu))
        _cache(tmp_path, cpu, 1, 1, "Instruction", "32K", str(cpu))
        _cache(tmp_path, cpu, 2, 2, "Unified", "1024K", str(cpu))
        _cache(tmp_path, cpu, 3, 3, "Unified", "16384K", shared)
    assert stream.last_level_cache(tmp_path) == (16 * MiB, 32 * MiB)


def test_last_level_cache_without_sysfs(tmp_path):
    assert stream.last_level_cache(tmp_path) == (0, 0)


def test_last_level_cache_of_this_machine():
    one, total = stream.last_level_cache()
    if not total:
        pytest.skip("no cache information in /sys on this machine")
    assert 0 < one <= total


def void_spec(**params):
    return {
        "study": "t",
        "experiment": "memory",
        "workload": "stream",
        "tier": "void",
        "tier_path": "/dev/null",
        "tier_class": "void",
        "max_bytes": None,
        "point": "single",
        "params": {"threads": 2, **params},
        "repetition": 1,
        "phase": "measured",
    }


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")
def test_real_run_builds_outside_the_repo_and_validates(monkeypatch):
    """A small real run (cache pretended to be 256 KiB, so arrays of 1 MiB): fast, validated."""
    monkeypatch.setattr(stream, "last_level_cache", lambda: (256 * 1024, 256 * 1024))
    before = sorted(p.name for p in stream.SOURCE.parent.iterdir())
    record = run_job(void_spec(), stream.run)
    metrics = {m["metric"]: m for m in record["metrics"]}
    assert metrics["copy_bandwidth"]["status"] == "ok", record["metrics"]
    assert metrics["array_bytes"]["value"] == 1 * MiB
    assert metrics["threads"]["value"] == 2
    assert metrics["triad_bytes"]["value"] == 3 * MiB
    assert "Solution Validates" in record["extra"]["stream_output"]
    assert "-O3 -fopenmp" in record["extra"]["compile_command"]
    assert sorted(p.name for p in stream.SOURCE.parent.iterdir()) == before  # no binary left
    assert not Path(record["extra"]["compile_command"].split(" -o ")[1].split()[0]).exists()


def test_missing_gcc_is_named_by_the_preflight(monkeypatch):
    from tierbench import preflight

    monkeypatch.setattr(preflight.shutil, "which", lambda tool: None if tool == "gcc" else "/x")
    problems = preflight.check_tools({"stream"})
    assert len(problems) == 1
    assert "tool gcc is not installed" in problems[0] and "apt-get install -y gcc" in problems[0]


# A node with a large last-level cache (current servers: 256 MiB to over 1 GiB of L3).
# sysfs and /proc/meminfo are the seams: the fake cache below is what such a CPU shows.
LARGE_LLC = 260 * MiB
GiB = 1024 * MiB


def large_cache(root: Path, size: int = LARGE_LLC) -> Path:
    """Two CPUs sharing one L3 of ``size`` bytes, laid out as sysfs lays it out."""
    for cpu in range(2):
        _cache(root, cpu, 0, 1, "Data", "48K", str(cpu))
        _cache(root, cpu, 1, 2, "Unified", "2048K", str(cpu))
        _cache(root, cpu, 2, 3, "Unified", f"{size // 1024}K", "0-1")
    return root


def node_memory(monkeypatch, tmp_path: Path, available: int) -> None:
    """This job may use ``available`` bytes: no cgroup limit, no Slurm allocation."""
    meminfo = tmp_path / "meminfo"
    meminfo.write_text(
        f"MemTotal: {2 * available // 1024} kB\nMemAvailable: {available // 1024} kB\n"
    )
    monkeypatch.setattr(stream, "PROC_MEMINFO", str(meminfo))
    monkeypatch.setattr(stream, "PROC_CGROUP", str(tmp_path / "no-cgroup"))
    for name in ("SLURM_MEM_PER_NODE", "SLURM_MEM_PER_CPU"):
        monkeypatch.delenv(name, raising=False)


def test_a_large_cache_sizes_the_arrays_from_the_cache(tmp_path):
    llc = stream.last_level_cache(large_cache(tmp_path))
    assert llc == (LARGE_LLC, LARGE_LLC)
    assert stream.array_elements({"threads": 2}, llc[1]) * 8 == 4 * LARGE_LLC


def paper_stream_points():
    """(study, scale, params) of every STREAM point the document studies run."""
    from conftest import REPO
    from tierbench import matrix

    defaults = matrix.load_yaml(REPO / "config/config.yaml")
    tiers = {"void": {"class": "void", "path": "/dev/null"}}
    found = []
    for path in sorted((REPO / "config/studies").glob("*.yaml")):
        study = matrix.load_study(path, defaults)
        for experiment in study["experiments"]:
            if experiment["workload"] != "stream":
                continue
            scales = {"smoke", "default", "full"} | set(experiment.get("scale") or {})
            for scale in sorted(scales):
                one = {**study, "experiments": [experiment]}
                for point in matrix.expand_study(one, tiers, scale):
                    found.append((study["study"], scale, point.params))
    return found


@pytest.mark.parametrize(
    "llc", [LARGE_LLC, 480 * MiB, 1152 * MiB], ids=["260MiB", "480MiB", "1152MiB"]
)
def test_paper_studies_size_stream_for_any_cache(llc):
    """On a node with room, every paper study's STREAM point asks for STREAM's rule and
    runs within a few seconds, its arrays still outgrowing the cache.

    Only ``full`` may pin the document's own array_size; everywhere else the
    cache sets the size and nothing in a study file may cap it.
    """
    points = paper_stream_points()
    assert {study for study, _, _ in points} >= {"tmpfs_advent", "eagle_local", "ramdisk_macos"}
    for study, scale, params in points:
        if params.get("array_size"):
            assert scale == "full", (study, scale)
            continue
        assert stream.array_elements(params, llc) * 8 >= 4 * llc, (study, scale)
        room = (24 * GiB, "available memory")
        elements, _ = stream.plan_arrays(params, llc, params["threads"], room)
        assert 3 * elements * 8 > llc, (study, scale)
        seconds = stream.estimated_seconds(elements, params.get("ntimes", 10), params["threads"])
        # within the budget, unless arrays that just outgrow the cache take longer
        assert seconds <= 5 or elements == stream.floor_elements(llc), (study, scale)


def test_a_node_that_cannot_hold_the_arrays_fails_in_one_line(monkeypatch, tmp_path):
    """Memory below the cache: no cap can leave arrays that stream from memory."""
    monkeypatch.setattr(stream, "SYS_CPU", str(large_cache(tmp_path / "cpu")))
    node_memory(monkeypatch, tmp_path, 256 * MiB)
    record = run_job(void_spec(ntimes=2), stream.run)
    (failed,) = {m["status"] for m in record["metrics"]}
    reason = record["metrics"][0]["reason"]
    assert failed == "failed" and "\n" not in reason, record["metrics"]
    assert "3 arrays that together outgrow the 260 MiB of last-level cache" in reason
    assert "available memory is 256 MiB" in reason and "at least 325 MiB" in reason


def test_a_small_cache_keeps_streams_rule():
    """This machine's kind of cache (32 MiB): 4 x the cache per array, nothing capped."""
    params = {"threads": 2, "ntimes": 10}
    elements, capped = stream.plan_arrays(params, 32 * MiB, 2, (20 * GiB, "available memory"))
    assert elements * 8 == 4 * 32 * MiB and capped is None
    assert stream.estimated_seconds(elements, 10, 2) <= stream.RUN_BUDGET_S


def test_a_480MiB_cache_is_capped_to_a_few_seconds_and_says_so(tmp_path):
    """The issue's Xeon: 4 x 480 MiB per array took 19 s a run; the cap keeps it within 5 s."""
    llc = stream.last_level_cache(large_cache(tmp_path, 480 * MiB))
    assert llc == (480 * MiB, 480 * MiB)
    params = {"threads": 2, "ntimes": 10}
    rule = stream.array_elements(params, llc[1])
    assert rule * 8 == 4 * 480 * MiB
    assert stream.estimated_seconds(rule, 10, 2) > 5  # what the rule alone would cost
    elements, capped = stream.plan_arrays(params, llc[1], 2, (22 * GiB, "available memory"))
    assert elements < rule
    assert stream.estimated_seconds(elements, 10, 2) <= stream.RUN_BUDGET_S <= 5
    assert 3 * elements * 8 > llc[1]  # together the arrays still outgrow the cache
    assert capped.startswith(f"arrays capped at {stream.format_size(elements * 8)}")
    assert "480 MiB of last-level cache instead of 4 x (STREAM's rule)" in capped
    assert "1.9 GiB per array would take about" in capped
    assert "smaller than the cache" in capped


def test_fewer_iterations_leave_larger_arrays():
    """The cap is on the run's time: three iterations may stream larger arrays than ten."""
    ten = stream.plan_arrays({"threads": 2, "ntimes": 10}, 480 * MiB, 2, None)[0]
    three = stream.plan_arrays({"threads": 2, "ntimes": 3}, 480 * MiB, 2, None)[0]
    assert three > ten


def test_the_time_cap_never_goes_below_arrays_that_outgrow_the_cache(monkeypatch):
    monkeypatch.setattr(stream, "RUN_BUDGET_S", 0.001)
    elements, capped = stream.plan_arrays({"threads": 1}, 480 * MiB, 1, None)
    assert elements == stream.floor_elements(480 * MiB)
    assert 3 * elements * 8 > 480 * MiB >= 3 * (elements - 1) * 8
    assert "would take about" in capped


def test_memory_below_the_rule_caps_the_arrays_and_says_so():
    """The cache asks for more than the job may use: capped to fit, not a failed point."""
    room = (768 * MiB, "the Slurm job's memory")
    elements, capped = stream.plan_arrays({"threads": 2, "ntimes": 10}, LARGE_LLC, 2, room)
    assert elements == int(0.8 * 768 * MiB // 24)
    assert "the Slurm job's memory is 768 MiB: three arrays may take 80% of it" in capped


def test_an_explicit_array_size_is_run_as_given():
    params = {"threads": 2, "array_size": 10**9}
    assert stream.plan_arrays(params, 32 * MiB, 2, None) == (10**9, None)
    with pytest.raises(PointFailed, match="STREAM needs 3 arrays of 7.5 GiB"):
        stream.plan_arrays(params, 32 * MiB, 2, (4 * GiB, "available memory"))


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")
def test_a_capped_run_says_so_in_its_record(monkeypatch, tmp_path):
    """A cap found while running reaches extra and the point's page-cache reason."""
    monkeypatch.setattr(stream, "SYS_CPU", str(large_cache(tmp_path / "cpu", 6 * MiB)))
    monkeypatch.setattr(stream, "RUN_BUDGET_S", 0.001)
    node_memory(monkeypatch, tmp_path, 8 * GiB)
    record = run_job(void_spec(ntimes=2), stream.run)
    metrics = {m["metric"]: m for m in record["metrics"]}
    assert metrics["triad_bandwidth"]["status"] == "ok", record["metrics"]
    assert metrics["array_bytes"]["value"] == 8 * stream.floor_elements(6 * MiB)
    capped = record["extra"]["array_capped"]
    assert capped.startswith("arrays capped at 2 MiB, 0.33 x the 6 MiB of last-level cache")
    assert record["page_cache"]["page_cache"] == "not_applicable"
    assert record["page_cache"]["page_cache_reason"].endswith("; " + capped)
    assert record["extra"]["estimated_s"] >= 0


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")
def test_a_large_cache_on_a_large_node_runs(monkeypatch, tmp_path):
    """The 480 MiB cache of the issue's Xeon on this node: capped arrays, a valid run."""
    if stream.meminfo()["MemAvailable"] < 2 * GiB:
        pytest.skip("needs 2 GiB of available memory for the capped arrays")
    monkeypatch.setattr(stream, "SYS_CPU", str(large_cache(tmp_path / "cpu", 480 * MiB)))
    monkeypatch.setattr(stream, "usable_cores", lambda: 2)
    node_memory(monkeypatch, tmp_path, 24 * GiB)
    record = run_job(void_spec(ntimes=2), stream.run)
    metrics = {m["metric"]: m for m in record["metrics"]}
    assert metrics["triad_bandwidth"]["status"] == "ok", record["metrics"]
    planned, _ = stream.plan_arrays({"threads": 2, "ntimes": 2}, 480 * MiB, 2, None)
    assert metrics["array_bytes"]["value"] == 8 * planned < 4 * 480 * MiB
    assert metrics["llc_total_bytes"]["value"] == 480 * MiB
    assert "480 MiB of last-level cache instead of 4 x" in record["extra"]["array_capped"]


def test_memory_room_is_the_smallest_limit(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal: 25165824 kB\nMemAvailable: 20971520 kB\n")  # 20 GiB free
    none = tmp_path / "none"
    assert stream.memory_room(meminfo, none, tmp_path, {}) == (20 * GiB, "available memory")
    slurm = {"SLURM_MEM_PER_NODE": "4096"}
    assert stream.memory_room(meminfo, none, tmp_path, slurm) == (
        4 * GiB,
        "the Slurm job's memory",
    )
    per_cpu = {"SLURM_MEM_PER_CPU": "1024", "SLURM_CPUS_ON_NODE": "2"}
    assert stream.memory_room(meminfo, none, tmp_path, per_cpu)[0] == 2 * GiB
    # cgroup v2: the limit less what the group already uses
    (tmp_path / "job").mkdir()
    (tmp_path / "job/memory.max").write_text(f"{3 * GiB}\n")
    (tmp_path / "job/memory.current").write_text(f"{GiB}\n")
    v2 = tmp_path / "cgroup-v2"
    v2.write_text("0::/job\n")
    assert stream.memory_room(meminfo, v2, tmp_path, {}) == (2 * GiB, "the job's cgroup limit")
    # cgroup v1 with no limit ("unlimited" is a huge number there)
    (tmp_path / "memory/job").mkdir(parents=True)
    (tmp_path / "memory/job/memory.limit_in_bytes").write_text("9223372036854771712\n")
    (tmp_path / "memory/job/memory.usage_in_bytes").write_text(f"{GiB}\n")
    v1 = tmp_path / "cgroup-v1"
    v1.write_text("4:memory:/job\n0::/\n")
    assert stream.memory_room(meminfo, v1, tmp_path, {}) == (20 * GiB, "available memory")


def test_the_job_asks_slurm_for_its_arrays(monkeypatch):
    monkeypatch.setattr(stream, "usable_cores", lambda: 2)
    monkeypatch.setattr(stream, "last_level_cache", lambda: (32 * MiB, 32 * MiB))
    assert stream.mem_mb({"threads": 2}) == pytest.approx(3 * 4 * 32 * MiB / 0.8 / 1e6)
    monkeypatch.setattr(stream, "last_level_cache", lambda: (LARGE_LLC, LARGE_LLC))
    capped, _ = stream.plan_arrays({"threads": 2}, LARGE_LLC, 2, None)
    assert capped < 4 * LARGE_LLC // 8  # the run's time caps what the job asks for
    assert stream.mem_mb({"threads": 2}) == pytest.approx(3 * 8 * capped / 0.8 / 1e6)


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")
def test_threads_are_capped_at_the_cpus_the_job_may_use(monkeypatch):
    """Two threads on one usable CPU would time the scheduler: one runs, and it says so."""
    monkeypatch.setattr(stream, "last_level_cache", lambda: (256 * 1024, 256 * 1024))
    monkeypatch.setattr(stream.os, "sched_getaffinity", lambda pid: {0})
    record = run_job(void_spec(), stream.run)
    metrics = {m["metric"]: m for m in record["metrics"]}
    assert metrics["threads"]["value"] == 1, record["metrics"]
    assert record["extra"]["threads_capped"] == "2 threads asked, 1 CPU(s) usable by this job"
