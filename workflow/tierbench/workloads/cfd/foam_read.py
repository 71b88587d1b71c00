"""OpenFOAM-style output read back: a field file's header and values, a collated
container's blocks, and the files and folders of a tree. The proxy's checks and the
tests read what :mod:`tierbench.workloads.cfd.foam_write` wrote with these, against
:mod:`tierbench.workloads.cfd.foam`'s layout.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np

from .foam import FOOTER, SEPARATOR

_ENTRY = re.compile(r"^\s*(\w+)\s+(.*?);\s*$")
_INTERNAL = re.compile(rb"internalField\s+nonuniform\s+(?:List<(\w+)>\s*\n(\d+)\n\(|0(?:\(\))?;)")


def parse_header(data: bytes) -> tuple[dict, int]:
    """The FoamFile dictionary of a file and the offset just after it."""
    start = data.find(b"FoamFile")
    if start < 0:
        raise ValueError("no FoamFile header")
    open_brace = data.index(b"{", start)
    close_brace = data.index(b"}", open_brace)
    entries = {}
    for line in data[open_brace + 1 : close_brace].decode().splitlines():
        if not line.strip():
            continue
        match = _ENTRY.match(line)
        if not match:
            raise ValueError(f"bad FoamFile entry: {line!r}")
        entries[match.group(1)] = match.group(2).strip('"')
    missing = {"version", "format", "class", "location", "object"} - set(entries)
    if missing:
        raise ValueError(f"FoamFile header lacks {sorted(missing)}")
    return entries, close_brace + 1


def read_field(data: bytes, fmt: str | None = None) -> tuple[dict, np.ndarray]:
    """Header and internalField values (n x components) of a field file written here.

    A v1912 collated block of a rank other than the master has no header:
    give its ``fmt`` (the header returned is then ``{"format": fmt}``).
    """
    if data.lstrip().startswith(b"dimensions"):
        if fmt is None:
            raise ValueError("a block without a header: give its format")
        head, offset = {"format": fmt}, 0
    else:
        head, offset = parse_header(data)
    match = _INTERNAL.search(data, offset)
    if not match:
        raise ValueError("no nonuniform internalField")
    if match.group(1) is None:  # an empty list
        return head, np.zeros((0, 1))
    kind, count = match.group(1).decode(), int(match.group(2))
    components = 3 if kind == "vector" else 1
    start = match.end()
    if head["format"] == "binary":
        end = start + 8 * count * components
        values = np.frombuffer(data[start:end], dtype="<f8")
        closed = data[end : end + 3] == b")\n;" or data[end : end + 2] == b");"
    else:
        end = data.index(b")\n;", start)
        text = data[start:end].decode().replace("(", " ").replace(")", " ")
        values = np.array(text.split(), dtype=np.float64)
        closed = True
    if values.size != count * components or not closed:
        raise ValueError(
            f"internalField holds {values.size} numbers, expected {count * components}"
        )
    return head, values.reshape(count, components)


def read_collated(data: bytes) -> tuple[dict, list[bytes]]:
    """Header and the per-rank blocks of a collated file (either file set's container)."""
    head, offset = parse_header(data)
    if head["class"] != "decomposedBlockData":
        raise ValueError(f"class {head['class']} is not decomposedBlockData")
    line = data.index(SEPARATOR.encode(), offset) + len(SEPARATOR)
    if data.startswith(b"\n\n// Processor", line):  # v1912
        pattern, closing, position, end = (
            re.compile(rb"\n\n// Processor(\d+)\n\n(\d+)\n\("),
            b")",
            line,
            b"",
        )
    else:
        pattern, closing, position = re.compile(rb"\n()(\d+)\n\("), b")\n", line + 1
        end = FOOTER.encode()
    blocks = []
    while True:
        match = pattern.match(data, position)
        if not match:
            break
        if match.group(1) and int(match.group(1)) != len(blocks):
            raise ValueError(f"block {len(blocks)} is labelled Processor{match.group(1)}")
        size = int(match.group(2))
        start = match.end()
        if data[start + size : start + size + len(closing)] != closing:
            raise ValueError(f"block {len(blocks)} is not closed after {size} bytes")
        blocks.append(data[start : start + size])
        position = start + size + len(closing)
    if data[position:] != end:
        raise ValueError("collated file does not end after its blocks")
    if "blocks" in head and int(head["blocks"]) != len(blocks):
        raise ValueError(f"the header says {head['blocks']} blocks, the file holds {len(blocks)}")
    return head, blocks


def count_tree(root: Path) -> tuple[int, int]:
    """(files, folders) below ``root`` (root itself not counted)."""
    files = dirs = 0
    for _, subdirs, names in os.walk(root):
        files += len(names)
        dirs += len(subdirs)
    return files, dirs
