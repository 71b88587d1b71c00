"""The proxy asks the file system for what simpleFoam asks, call for call, per write.

On a local tier a stat or a failed mkdir costs a microsecond; on a network
file system each is a round trip to the server, so the proxy's write cost
follows the application's only if its calls do. Both are traced at the same
shape (the duct, a write every iteration, purgeWrite 1) and the calls per
write are compared by category (:data:`tierbench.syscalls.CATEGORIES`).
Uncollated, one rank: ``strace -f -c`` with writes and without. Collated, two
ranks under MPI: MPI's own pipes and sockets make a number of calls that
varies from run to run, so there only the calls that name the output folder
count, rank by rank.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from tierbench import native as native_helpers
from tierbench import syscalls
from tierbench.workloads.cfd import (
    cfd_launch,
    cfd_proxy_plan,
    foam,
    foam_read,
    foam_write,
    openfoam,
    openfoam_plan,
)

REPO = Path(__file__).resolve().parents[1]
STEPS = 6
#: a decade of cells per rank: at the larger, binary boundary lists pass the 1024-byte
#: mark at which libstdc++ writes them apart, and an ascii field is dozens of writes
SHAPES = (2000, 24000)
#: the categories that reach the file system when a time folder is written and purged
COMPARED = ("mkdir", "stat", "open", "write", "close", "unlink")

needs_strace = pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")
needs_mpi = pytest.mark.skipif(shutil.which("mpiexec") is None, reason="mpiexec is not installed")

PROXY = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[1])
    import numpy as np
    from tierbench.workloads.cfd import cfd_writer, foam, foam_write
    root, writes, fmt, cells = Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
    fields = {**cfd_writer.static_fields(cells, 0), "p": np.linspace(0.0, 1.0, cells)}
    writer, kept = foam_write.UncollatedWriter(root, fields, fmt, False), []
    for step in range(1, writes + 1):
        kept.append(foam.time_name(step))
        writer.write(kept[-1], step)
        foam_write.purge(root, kept, 1)
    """
)


def traced(argv: list[str], cwd: Path, env: dict, out: Path) -> dict[str, int]:
    subprocess.run(["strace", "-f", "-c", "-o", str(out), *argv], cwd=cwd, env=env,
                   check=True, capture_output=True, timeout=120)  # fmt: skip
    return syscalls.categorise(syscalls.parse_table(out.read_text()))


def per_write(with_writes: dict[str, int], without: dict[str, int]) -> dict[str, float]:
    return {key: (with_writes.get(key, 0) - without.get(key, 0)) / STEPS for key in COMPARED}


def meshed_cases(folder: Path, params: dict, env: dict, *prepare: list[str]) -> dict:
    """Per write interval (``params``' keys), a case of its own, meshed (and decomposed)
    once: the cases differ in their controlDict alone."""
    cases = {}
    for interval, its_params in params.items():
        case = folder / f"simpleFoam-{interval}"
        if cases:  # the first case's mesh, this interval's controlDict
            shutil.copytree(next(iter(cases.values())), case)
            openfoam_plan.write_case(case, its_params)
        else:
            openfoam_plan.write_case(case, its_params)
            for argv in prepare:
                subprocess.run(argv, cwd=case, env=env, check=True, capture_output=True)
        cases[interval] = case
    return cases


def simplefoam_calls(folder: Path, fmt: str, cells: int) -> dict[str, float]:
    env, _ = openfoam_plan.openfoam_environment(None)
    params = {
        interval: {"ranks": 1, "steps": STEPS, "write_interval": interval, "purge_write": 1,
                   "cells_per_rank": cells, "write_format": fmt}
        for interval in (1, "none")
    }  # fmt: skip
    counts = {}
    for interval, case in meshed_cases(folder, params, env, ["blockMesh"]).items():
        counts[interval] = traced(["simpleFoam"], case, env, folder / f"sf-{interval}.txt")
    return per_write(counts[1], counts["none"])


def built_beforehand(native: bool) -> None:
    """The C writer built (and cached) before a trace: where no build is cached, the first
    traced proxy would build it, and gcc's calls would count as the writes'."""
    if native:
        native_helpers.foamio()


def proxy_calls(folder: Path, fmt: str, cells: int, native: bool) -> dict[str, float]:
    built_beforehand(native)
    env = {**os.environ, "TIERBENCH_NATIVE": "1" if native else "0"}
    counts = {}
    for writes in (STEPS, 0):
        root = folder / f"proxy-{native}-{writes}"
        root.mkdir()
        argv = [sys.executable, "-c", PROXY, str(REPO / "workflow"), str(root), str(writes), fmt,
                str(cells)]  # fmt: skip
        counts[writes] = traced(argv, folder, env, folder / f"proxy-{native}-{writes}.txt")
    return per_write(counts[STEPS], counts[0])


@needs_strace
@pytest.mark.parametrize("cells", SHAPES)
@pytest.mark.parametrize("fmt", ["binary", "ascii"])
def test_the_proxy_makes_simplefoams_calls_per_write(tmp_path, fmt, cells):
    if shutil.which("simpleFoam") is None:
        pytest.skip("simpleFoam is not installed (apt-get install -y openfoam)")
    real = simplefoam_calls(tmp_path, fmt, cells)
    for native in (True, False):
        proxy = proxy_calls(tmp_path, fmt, cells, native)
        for key in COMPARED:
            # ascii: the proxy's numbers have a fixed width near v1912's, a few % more bytes
            assert abs(proxy[key] - real[key]) <= max(1.0, 0.05 * real[key]), (key, proxy, real)


# ------------------------------------------------------------------ collated

RANKS = 2
#: each rank under strace, following its threads, fds shown with their paths
TRACE_RANK = 'exec strace -f -qq -y -s 0 -e trace=%file,%desc -o "$0.$OMPI_COMM_WORLD_RANK" "$@"'
#: a traced call's name, unless the line resumes a call already counted
_CALL = re.compile(r"^(?:\d+\s+)?(\w+)\(")


def calls_below(trace: Path, folder: Path) -> dict[str, int]:
    """Calls of one trace that name a path below ``folder`` (or a file opened there)."""
    below, table = str(folder) + os.sep, {}
    for line in trace.read_text().splitlines():
        call = _CALL.match(line)
        if call and below in line:
            entry = table.setdefault(call.group(1), {"calls": 0})
            entry["calls"] += 1
    return syscalls.categorise(table)


def traced_ranks(argv: list[str], cwd: Path, env: dict, out: Path) -> list[dict[str, int]]:
    """Each rank's calls on the case's ``processors2`` folder, ``argv`` run on RANKS ranks."""
    launcher = cfd_launch.launch_command("mpiexec", RANKS, 1, local=True)
    command = [*launcher, "sh", "-c", TRACE_RANK, str(out), *argv]
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, timeout=300)
    assert done.returncode == 0, done.stdout.decode()[-2000:] + done.stderr.decode()[-2000:]
    folder = cwd / f"processors{RANKS}"
    return [calls_below(Path(f"{out}.{rank}"), folder) for rank in range(RANKS)]


def collated_per_write(runs: dict) -> list[dict[str, float]]:
    """Per rank, the calls of a write and its purge: a write every step against one write
    at the end (both end with one time folder kept, so reading the case, the last write
    and what follows it cancel out)."""
    every, last = runs[1], runs[STEPS]
    return [
        {key: (mine[key] - once[key]) / (STEPS - 1) for key in COMPARED}
        for mine, once in zip(every, last, strict=True)
    ]


def simplefoam_collated_calls(folder: Path, fmt: str, cells: int) -> list[dict[str, float]]:
    env, _ = openfoam_plan.openfoam_environment(
        None, cfd_launch.launch_env("mpiexec", local=True)[0]
    )
    params = {
        interval: openfoam_plan.with_defaults({
            "ranks": RANKS, "steps": STEPS, "write_interval": interval, "purge_write": 1,
            "cells_per_rank": cells, "write_format": fmt, "file_handler": "collated",
        })
        for interval in (1, STEPS)
    }  # fmt: skip
    decompose = ["decomposePar", "-force", *openfoam.handler_args(params[1])]
    runs = {}
    for interval, case in meshed_cases(folder, params, env, ["blockMesh"], decompose).items():
        argv = openfoam.solver_command(params[interval])
        runs[interval] = traced_ranks(argv, case, env, folder / f"sf-{interval}")
    return collated_per_write(runs)


def proxy_collated_calls(folder: Path, fmt: str, cells: int, native: bool) -> list[dict]:
    built_beforehand(native)
    env = cfd_launch.launch_env("mpiexec", local=True)[0]
    env["TIERBENCH_NATIVE"] = "1" if native else "0"
    runs = {}
    for interval in (1, STEPS):
        params = {"ranks": RANKS, "steps": STEPS, "write_interval": interval, "purge_write": 1,
                  "cells_per_rank": cells, "write_format": fmt, "file_handler": "collated",
                  "compute_per_cell_step": 0, "warmup_steps": 0}  # fmt: skip
        name = f"proxy-{native}-{interval}"
        case = folder / name
        case.mkdir()
        config = json.dumps(cfd_proxy_plan.writer_config(params))
        argv = [sys.executable, "-m", "tierbench.workloads.cfd.cfd_writer", "--case", str(case),
                "--config", config, "--out", str(folder / f"{name}.json")]  # fmt: skip
        runs[interval] = traced_ranks(argv, case, env, folder / name)
    return collated_per_write(runs)


#: collated, simpleFoam makes the same calls per write at either shape and in either format
#: (one write per rank's block, however long: measured at 2000 and 24000 cells, binary and
#: ascii): each format once, as the proxy makes each one's blocks its own way, and the
#: longer blocks once
COLLATED_SHAPES = [("binary", 24000), ("ascii", 2000)]


@needs_strace
@needs_mpi
@pytest.mark.parametrize("fmt, cells", COLLATED_SHAPES)
def test_collated_the_proxy_makes_simplefoams_calls_per_write(tmp_path, fmt, cells):
    """The master makes every file (v1912: two mkDir per file, the .gz probe, one write per
    rank's block); the other rank only sends its blocks."""
    if shutil.which("simpleFoam") is None:
        pytest.skip("simpleFoam is not installed (apt-get install -y openfoam)")
    real = simplefoam_collated_calls(tmp_path, fmt, cells)
    assert real[0]["open"] >= foam.FILES_PER_WRITE, real  # the master writes the files
    for native in (True, False):
        proxy = proxy_collated_calls(tmp_path, fmt, cells, native)
        for rank in range(RANKS):
            for key in COMPARED:
                mine, theirs = proxy[rank][key], real[rank][key]
                assert abs(mine - theirs) <= max(1.0, 0.05 * theirs), (rank, key, proxy, real)


def joined(calls) -> bytes:
    return b"".join(bytes(part) for call in calls for part in call)


def test_a_large_binary_list_leaves_with_the_buffer_and_a_small_one_waits():
    pieces = [(b"h" * 900, False), (bytes(16000), True), (b"t" * 300, False),
              (bytes(160), True), (b"f" * 90, False)]  # fmt: skip
    calls = foam_write.stream_calls(pieces)
    assert [sum(map(len, call)) for call in calls] == [16900, 550]
    assert joined(calls) == b"".join(data for data, _ in pieces)


def test_a_list_bigger_than_the_room_left_goes_at_once_even_below_1024_bytes():
    calls = foam_write.stream_calls([(b"x" * 8000, False), (bytes(500), True), (b"y", False)])
    assert [sum(map(len, call)) for call in calls] == [8500, 1]


def test_streamed_text_leaves_a_full_buffer_at_a_time():
    text = bytes(range(256)) * 80  # 20,480 bytes
    calls = foam_write.stream_calls([(b"head", False), (text, False)])
    assert [sum(map(len, call)) for call in calls] == [8191, 8191, 20484 - 2 * 8191]
    assert joined(calls) == b"head" + text


def test_uniform_time_goes_down_entry_by_entry_as_v1912_writes_it():
    text = foam.uniform_texts("4", 4, "binary")["uniform/time"]
    calls = foam_write.time_dict_calls(text)
    assert joined(calls) == text
    starts = [bytes(call[0][:8]) for call in calls[1:]]
    assert starts == [b"\nname   ", b"\nindex  ", b"\ndeltaT ", b"\ndeltaT0", b"\n\n// ***"]
    assert bytes(calls[0][0]).rstrip().endswith(b"value           4;")


def collated_calls(folder: Path, blocks: dict, monkeypatch) -> tuple[dict, int]:
    """The calls the collated master hands the file writer per file, and its mkDir count."""
    made = []

    def keep(helper, files, fsync, mkdirs=1):
        made.append((files, mkdirs))
        return 0, 0

    monkeypatch.setattr(foam_write, "_write_time", keep)
    ranks = len(blocks["p"])
    foam_write.CollatedWriter(folder, "binary", False, "v1912", ranks).write("3", 3, blocks)
    ((files, mkdirs),) = made
    return {
        os.path.relpath(os.fsdecode(path), folder / "3"): calls for path, calls in files
    }, mkdirs


def test_a_collated_field_is_a_call_per_rank_block_then_its_closing_bracket(tmp_path, monkeypatch):
    blocks = {name: [bytes(5000), bytes(3000)] for name in foam.FIELDS}
    files, mkdirs = collated_calls(tmp_path, blocks, monkeypatch)
    assert mkdirs == 2  # the file handler's Foam::mkDir, then the stream's
    second = len(b")\n\n// Processor1\n\n3000\n(") + 3000
    for name in foam.FIELDS:
        sizes = [sum(map(len, call)) for call in files[name]]
        assert sizes[1:] == [second, 1] and sizes[0] > 5000
    for name in foam.uniform_files():
        assert len(files[name]) == 1  # handed over whole


def test_collated_blocks_below_1024_bytes_wait_in_the_buffer(tmp_path, monkeypatch):
    blocks = {name: [bytes(5000), bytes(500), bytes(500)] for name in foam.FIELDS}
    files, _ = collated_calls(tmp_path, blocks, monkeypatch)
    assert [len(files["U"]), sum(map(len, files["U"][-1]))] == [2, 2 * (500 + 23) + 1]


@pytest.mark.parametrize("native", [True, False])
def test_many_ranks_small_blocks_stay_within_a_calls_buffers(tmp_path, native):
    blocks = {name: [bytes([rank % 256]) * 40 for rank in range(300)] for name in foam.FIELDS}
    writer = foam_write.CollatedWriter(tmp_path, "binary", False, "v1912", 300)
    if not native:
        writer.native = None
    count = writer.write("1", 1, blocks)
    assert (count.files, count.dirs) == (foam.FILES_PER_WRITE, 3)
    _, found = foam_read.read_collated((tmp_path / "1" / "U").read_bytes())
    assert found == blocks["U"]
