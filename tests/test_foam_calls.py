"""The proxy asks the file system for what simpleFoam asks, call for call, per write.

On a local tier a stat or a failed mkdir costs a microsecond; on a network
file system each is a round trip to the server, so the proxy's write cost
follows the application's only if its calls do. Both are traced with
``strace -f -c`` at the same shape (the duct, one rank, a write every
iteration, purgeWrite 1) and without writes; the difference per write is
compared by category (:data:`tierbench.syscalls.CATEGORIES`).
"""

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from tierbench import foam, syscalls
from tierbench.workloads import openfoam

REPO = Path(__file__).resolve().parents[1]
STEPS = 6
#: a decade of cells per rank: at the larger, binary boundary lists pass the 1024-byte
#: mark at which libstdc++ writes them apart, and an ascii field is dozens of writes
SHAPES = (2000, 24000)
#: the categories that reach the file system when a time folder is written and purged
COMPARED = ("mkdir", "stat", "open", "write", "close", "unlink")

needs_strace = pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")

PROXY = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[1])
    import numpy as np
    from tierbench import cfd_writer, foam
    root, writes, fmt, cells = Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
    fields = {**cfd_writer.static_fields(cells, 0), "p": np.linspace(0.0, 1.0, cells)}
    writer, kept = foam.UncollatedWriter(root, fields, fmt, False), []
    for step in range(1, writes + 1):
        kept.append(foam.time_name(step))
        writer.write(kept[-1], step)
        foam.purge(root, kept, 1)
    """
)


def traced(argv: list[str], cwd: Path, env: dict, out: Path) -> dict[str, int]:
    subprocess.run(["strace", "-f", "-c", "-o", str(out), *argv], cwd=cwd, env=env,
                   check=True, capture_output=True, timeout=120)  # fmt: skip
    return syscalls.categorise(syscalls.parse_table(out.read_text()))


def per_write(with_writes: dict[str, int], without: dict[str, int]) -> dict[str, float]:
    return {key: (with_writes.get(key, 0) - without.get(key, 0)) / STEPS for key in COMPARED}


def simplefoam_calls(folder: Path, fmt: str, cells: int) -> dict[str, float]:
    env, _ = openfoam.openfoam_environment(None)
    counts = {}
    for interval in (1, "none"):
        case = folder / f"simpleFoam-{interval}"
        params = {"ranks": 1, "steps": STEPS, "write_interval": interval, "purge_write": 1,
                  "cells_per_rank": cells, "write_format": fmt}  # fmt: skip
        openfoam.write_case(case, params)
        subprocess.run(["blockMesh"], cwd=case, env=env, check=True, capture_output=True)
        counts[interval] = traced(["simpleFoam"], case, env, folder / f"sf-{interval}.txt")
    return per_write(counts[1], counts["none"])


def proxy_calls(folder: Path, fmt: str, cells: int, native: bool) -> dict[str, float]:
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


def joined(calls) -> bytes:
    return b"".join(bytes(part) for call in calls for part in call)


def test_a_large_binary_list_leaves_with_the_buffer_and_a_small_one_waits():
    pieces = [(b"h" * 900, False), (bytes(16000), True), (b"t" * 300, False),
              (bytes(160), True), (b"f" * 90, False)]  # fmt: skip
    calls = foam.stream_calls(pieces)
    assert [sum(map(len, call)) for call in calls] == [16900, 550]
    assert joined(calls) == b"".join(data for data, _ in pieces)


def test_a_list_bigger_than_the_room_left_goes_at_once_even_below_1024_bytes():
    calls = foam.stream_calls([(b"x" * 8000, False), (bytes(500), True), (b"y", False)])
    assert [sum(map(len, call)) for call in calls] == [8500, 1]


def test_streamed_text_leaves_a_full_buffer_at_a_time():
    text = bytes(range(256)) * 80  # 20,480 bytes
    calls = foam.stream_calls([(b"head", False), (text, False)])
    assert [sum(map(len, call)) for call in calls] == [8191, 8191, 20484 - 2 * 8191]
    assert joined(calls) == b"head" + text


def test_uniform_time_goes_down_entry_by_entry_as_v1912_writes_it():
    text = foam.uniform_texts("4", 4, "binary")["uniform/time"]
    calls = foam.time_dict_calls(text)
    assert joined(calls) == text
    starts = [bytes(call[0][:8]) for call in calls[1:]]
    assert starts == [b"\nname   ", b"\nindex  ", b"\ndeltaT ", b"\ndeltaT0", b"\n\n// ***"]
    assert bytes(calls[0][0]).rstrip().endswith(b"value           4;")
