"""Hostile input: truncated or garbage tool output and config values give a clear
error, never a traceback and never a wrong number."""

import json
import math
import os
import signal
import subprocess
import sys
import time

from conftest import REPO, fixture_text, job_spec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tierbench import matrix
from tierbench.errors import ConfigError, PointFailed
from tierbench.units import parse_size
from tierbench.workloads import fio

FIO_FIXTURES = [
    "fio_randrw_fsync_shm.json",
    "fio_write_direct_disk.json",
    "fio_read_direct_disk.json",
]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


def assert_sane(metrics):
    assert metrics
    for m in metrics:
        assert math.isfinite(m["value"]) and m["value"] >= 0 and m["unit"]


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(FIO_FIXTURES), st.data())
def test_truncated_fio_output(name, data):
    text = fixture_text(name)
    cut = data.draw(st.integers(min_value=0, max_value=len(text) - 1))
    try:
        assert_sane(fio.parse_fio_json(text[:cut]))
    except PointFailed as error:
        assert str(error)


@settings(max_examples=200)
@given(json_values)
def test_garbage_fio_json(value):
    try:
        assert_sane(fio.parse_fio_json(json.dumps({"jobs": [value]})))
    except PointFailed as error:
        assert str(error)


@settings(max_examples=100)
@given(st.sampled_from(["bw_bytes", "iops", "io_bytes"]), json_values)
def test_one_corrupted_field(field, value):
    data = json.loads(fixture_text("fio_write_direct_disk.json"))
    data["jobs"][0]["write"][field] = value
    try:
        metrics = fio.parse_fio_json(json.dumps(data))
    except PointFailed:
        return
    assert_sane(metrics)
    by_name = {m["metric"]: m["value"] for m in metrics}
    if field == "bw_bytes":  # never a silently wrong number: it is the value given
        assert by_name["write_bandwidth"] == float(value) / 1e6


@settings(max_examples=200)
@given(st.text(max_size=12) | st.integers() | st.floats() | st.none())
def test_parse_size_never_crashes(value):
    try:
        size = parse_size(value)
    except (ValueError, TypeError):
        return
    assert isinstance(size, int) and size >= 0


CONFIG = matrix.load_yaml(REPO / "config/config.yaml")


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(
        [
            "repetitions",
            "scale",
            "noise_threshold",
            "warmup",
            "study",
            "tiers",
            "experiments",
            "hardware",
        ]
    ),
    json_values,
)
def test_config_values_are_validated_with_the_key_named(key, value):
    config = {**CONFIG, key: value}
    try:
        matrix.validate(config, "config.schema.yaml", "config")
    except ConfigError as error:
        assert key in str(error)


TEXT_FIXTURES = {
    "dd": [
        "dd_buffered_shm.txt",
        "dd_fdatasync_disk.txt",
        "dd_enospc_tmpfs.txt",
        "dd_document_003_home.txt",
    ],
    "pv": ["pv_disk_450m.txt", "pv_void_450m.txt", "pv_bindfs_450m.txt"],
}


def dd_numbers(text):
    from tierbench.workloads import dd

    parsed = dd.parse_dd(text)
    return dd.dd_metrics(parsed)


def pv_numbers(text):
    from tierbench.records import metric
    from tierbench.workloads import pv

    return [metric("throughput", pv.parse_rate(text)["bps"] / 1e6, "MB/s")]


PARSERS = {"dd": dd_numbers, "pv": pv_numbers}


def parses_or_says_why(tool, text):
    """A parser either returns sane metrics or raises PointFailed with a reason."""
    try:
        metrics = PARSERS[tool](text)
    except PointFailed as error:
        assert str(error)
        return
    assert_sane(metrics)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(TEXT_FIXTURES)), st.data())
def test_truncated_or_mangled_tool_output(tool, data):
    text = fixture_text(data.draw(st.sampled_from(TEXT_FIXTURES[tool])))
    cut = data.draw(st.integers(min_value=0, max_value=len(text)))
    noise = data.draw(st.text(max_size=40))
    where = data.draw(st.integers(min_value=0, max_value=cut))
    mangled = text[:where] + noise + text[where:cut]
    parses_or_says_why(tool, mangled)


@settings(max_examples=200)
@given(st.sampled_from(sorted(PARSERS)), st.text(max_size=200))
def test_garbage_tool_output(tool, text):
    parses_or_says_why(tool, text)


def test_a_whole_dd_line_still_parses_to_its_own_numbers():
    text = fixture_text("dd_document_003_home.txt")
    by_name = {m["metric"]: m["value"] for m in dd_numbers(text)}
    assert by_name["bytes"] == 10737418240 and by_name["time"] == 4.93953


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(TEXT_FIXTURES)), st.data())
def test_truncation_gives_the_full_numbers_or_an_error(tool, data):
    """A cut in the middle of the summary must not yield a shorter, wrong number."""
    text = fixture_text(data.draw(st.sampled_from(TEXT_FIXTURES[tool])))
    try:
        full = PARSERS[tool](text)
    except PointFailed:
        return  # e.g. the ENOSPC fixture: an error whole, so also when cut
    cut = data.draw(st.integers(min_value=0, max_value=len(text)))
    try:
        partial = PARSERS[tool](text[:cut])
    except PointFailed:
        return
    assert partial == full


def test_a_sigterm_leaves_no_record_no_run_folder_and_says_why(tmp_path):
    """Slurm ends an allocation's processes with SIGTERM (time limit, scancel, a lost node):
    the repetition that was running writes no record, removes its run folder and says in
    its log's last line that the same command again measures it."""
    tier = tmp_path / "tier"
    tier.mkdir()
    spec = job_spec("command", tier, {"command": "sleep 60"})
    out = tmp_path / "rep1.json"
    runner = subprocess.Popen(
        [sys.executable, "-m", "tierbench.runner", "--spec", json.dumps(spec), "--out", str(out)],
        cwd=REPO / "workflow",
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not list(tier.glob("tierbench-*")):  # the run folder: the benchmark has begun
        assert runner.poll() is None and time.monotonic() < deadline, runner.stderr.read()
        time.sleep(0.05)
    time.sleep(0.5)
    runner.terminate()
    _, log = runner.communicate(timeout=30)
    assert runner.returncode == 128 + signal.SIGTERM, log
    assert "stopped by SIGTERM" in log.strip().splitlines()[-1], log
    assert "the same command again measures it" in log
    assert not out.exists()
    assert list(tier.iterdir()) == []


FORKED_WORKER = """
import os, signal, time
from tierbench import runner
runner.stop_on_sigterm()
pid = os.fork()
if pid == 0:  # as a process pool's worker
    time.sleep(30)
    os._exit(0)
time.sleep(0.3)
os.kill(pid, signal.SIGTERM)
_, status = os.waitpid(pid, 0)
print(os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM)
"""


def test_a_worker_the_runner_forks_ends_on_sigterm_as_it_would_have():
    """A pool ends its workers with SIGTERM: a worker that inherited the runner's handler
    and raised instead (holding the pool's queue lock) left the next worker waiting."""
    done = subprocess.run(
        [sys.executable, "-c", FORKED_WORKER],
        cwd=REPO / "workflow",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.strip() == "True", done.stdout + done.stderr


MANY_POOLS = """
import sys
from pathlib import Path
from tierbench import runner
from tierbench.workloads.fe import fe_optimisation, ga
def evaluate(task):
    return {"ok": True, "misfit": 1.0}
runner.stop_on_sigterm()
for _ in range(int(sys.argv[1])):
    fe_optimisation.optimise_in_pool(
        ga.Settings(population=4, generations=1), 2, Path("."), evaluate, (None, ())
    )
print("done")
"""


def test_the_ga_pool_ends_every_time_under_the_runners_handler():
    """A GA run ends its pool of workers and goes on: one run in some dozens waited forever
    for a worker when the pool ended its workers by signal (one holding the queue's lock)."""
    child = subprocess.Popen(
        [sys.executable, "-c", MANY_POOLS, "150"],
        cwd=REPO / "workflow",
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = child.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)  # the waiting worker too
        output, _ = child.communicate()
    assert output.strip() == "done", output
