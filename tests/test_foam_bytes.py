"""The CFD proxy's time folders stay byte for byte what they were recorded as.

Every file set, format and file handler writes a small 3-rank time folder
(every rank's place in the duct: inlet, middle, outlet); the sha256 of each
file is compared with ``fixtures/foam_time_folders.json``, recorded from the
code that was checked against v1912's output. A new file set records its own
entry: ``python tests/test_foam_bytes.py > tests/fixtures/foam_time_folders.json``.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES
from tierbench import schemas
from tierbench.workloads.cfd import cfd_writer, foam, foam_write

RECORDED = FIXTURES / "foam_time_folders.json"
RANKS, CELLS, STEP = 3, 24, 10
CASES = [
    (file_set, fmt, handler)
    for file_set in foam.FILE_SETS
    for fmt in foam.FORMATS
    for handler in foam.HANDLERS
]


def rank_fields(rank: int, file_set: str) -> dict:
    data = cfd_writer.static_fields(CELLS, rank, file_set)
    data["p"] = np.linspace(0, 1, CELLS) + rank
    return data


def write_case(root: Path, file_set: str, fmt: str, handler: str) -> None:
    time = foam.time_name(STEP)
    if handler == "uncollated":
        for rank in range(RANKS):
            folder = root / f"processor{rank}"
            folder.mkdir(parents=True)
            data = rank_fields(rank, file_set)
            foam_write.write_uncollated(folder, time, STEP, data, fmt, False, file_set, rank, RANKS)
        return
    blocks = {name: [] for name in foam.FIELDS}
    for rank in range(RANKS):
        data = rank_fields(rank, file_set)
        for name in foam.FIELDS:
            blocks[name].append(
                foam_write.collated_block(name, data[name], fmt, time, file_set, CELLS, rank, RANKS)
            )
    folder = root / f"processors{RANKS}"
    folder.mkdir(parents=True)
    foam_write.write_collated(folder, time, STEP, blocks, fmt, False, file_set)


def digests(root: Path) -> dict[str, str]:
    """sha256 per file below root; root's own path (v1912's collated header names it) as <root>."""
    where = os.fsencode(root.resolve())
    return {
        str(path.relative_to(root)): hashlib.sha256(
            path.read_bytes().replace(where, b"<root>")
        ).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def case_key(file_set: str, fmt: str, handler: str) -> str:
    return f"{file_set}/{fmt}/{handler}"


@pytest.mark.parametrize("file_set, fmt, handler", CASES)
def test_a_time_folder_is_the_bytes_recorded(tmp_path, file_set, fmt, handler):
    recorded = json.loads(RECORDED.read_text())[case_key(file_set, fmt, handler)]
    write_case(tmp_path, file_set, fmt, handler)
    assert digests(tmp_path) == recorded


def test_every_file_set_is_recorded():
    assert set(json.loads(RECORDED.read_text())) == {case_key(*case) for case in CASES}


@pytest.mark.parametrize("workload", ["cfd_proxy", "stage"])
def test_the_schemas_offer_every_file_set(workload):
    """A new entry of foam.FILE_SET_LAYOUTS is a value a study may name."""
    file_set = schemas.params_schema(workload)["properties"]["file_set"]
    assert file_set["enum"] == list(foam.FILE_SETS)
    assert file_set["default"] == foam.DEFAULT_FILE_SET


if __name__ == "__main__":
    import tempfile

    found = {}
    for case in CASES:
        with tempfile.TemporaryDirectory() as scratch:
            write_case(Path(scratch), *case)
            found[case_key(*case)] = digests(Path(scratch))
    json.dump(found, sys.stdout, indent=1, sort_keys=True)
    print()
