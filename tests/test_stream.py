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


def test_cap_below_the_rule_is_refused_not_silently_applied():
    with pytest.raises(
        ValueError, match="max_array_size is 64MiB: the kernels would run from cache"
    ):
        stream.array_elements({"threads": 1, "max_array_size": "64MiB"}, 32 * MiB)
    params = {"threads": 1, "max_array_size": "128MiB"}
    assert stream.array_elements(params, 32 * MiB) == 128 * MiB // 8


def test_explicit_size_above_cap_stops_at_parse_time():
    params = {"threads": 2, "array_size": 10**9, "max_array_size": "1GiB"}
    with pytest.raises(ConfigError, match=r"study\.memory\[single\]: array_size 1000000000"):
        check_point("stream", params, "study.memory[single]")


def test_schema_names_unknown_key():
    with pytest.raises(ConfigError, match="thread"):
        check_point("stream", {"thread": 2}, "s.memory[single]")


def _cache(root: Path, cpu: int, index: int, level: int, kind: str, size: str, shared: str):
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
