"""OpenFOAM-style output files: what a decomposed solver writes at a write time.

Pure functions, no MPI: the layout of a time folder, the bytes of every file
(FoamFile header, field payload in ``binary`` or ``ascii``), the collated
container that holds one block per rank, purgeWrite, and a reader that parses
all of it back (used by the checks and the tests).

Layout (``fileHandler uncollated``, document 001)::

    processor<rank>/<time>/{U,p,k,omega,nut,phi}
    processor<rank>/<time>/uniform/time
    processor<rank>/<time>/uniform/functionObjects/functionObjectProperties

that is 8 files and 3 folders (``<time>``, ``uniform``, ``functionObjects``)
per rank per write. ``collated`` writes ``processors<N>/<time>/<field>``: one
file per field holding one block per rank (written by the master), plus the
``uniform`` files once: 8 files and 3 folders per write for all ranks.

Field sizes follow the cell count: ``U`` has 3 values per cell, ``p``, ``k``,
``omega`` and ``nut`` one, ``phi`` (a face flux) 3 per cell, the number of
internal faces of a hexahedral mesh. Binary values are 8-byte doubles (80 B
per cell per write); ascii values are written in a fixed width of 15
characters (``+1.23456789e-01``), so sizes are exact in both formats.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import native
from .files import CREATE, IOV_MAX, write_all

#: field name -> (OpenFOAM class, value type, components per value, values per cell)
FIELDS = {
    "U": ("volVectorField", "vector", 3, 1),
    "p": ("volScalarField", "scalar", 1, 1),
    "k": ("volScalarField", "scalar", 1, 1),
    "omega": ("volScalarField", "scalar", 1, 1),
    "nut": ("volScalarField", "scalar", 1, 1),
    "phi": ("surfaceScalarField", "scalar", 1, 3),
}
DIMENSIONS = {
    "U": "[0 1 -1 0 0 0 0]",
    "p": "[0 2 -2 0 0 0 0]",
    "k": "[0 2 -2 0 0 0 0]",
    "omega": "[0 0 -1 0 0 0 0]",
    "nut": "[0 2 -1 0 0 0 0]",
    "phi": "[0 3 -1 0 0 0 0]",
}
UNIFORM_FILES = ("uniform/time", "uniform/functionObjects/functionObjectProperties")
#: folders made per write (per rank when uncollated): the time folder and two below it
TIME_DIRS = ("", "uniform", "uniform/functionObjects")
FILES_PER_WRITE = len(FIELDS) + len(UNIFORM_FILES)  # 8
DIRS_PER_WRITE = len(TIME_DIRS)  # 3
FORMATS = ("binary", "ascii")
HANDLERS = ("uncollated", "collated")
#: bytes per value on disk: a double, or a fixed-width number and its separator
SCALAR_BYTES = {"binary": 8, "ascii": 16}  # "+1.23456789e-01\n"
VECTOR_BYTES = {"binary": 24, "ascii": 50}  # "(a b c)\n"
NUMBER_WIDTH = 15
ARCH = "LSB;label=32;scalar=64"
BANNER = (
    "/*--------------------------------*- C++ -*----------------------------------*\\\n"
    "  =========                 |\n"
    "  \\\\      /  F ield         | OpenFOAM: The Open Source CFD Toolbox\n"
    "   \\\\    /   O peration     |\n"
    "    \\\\  /    A nd           | tierbench cfd_proxy (output proxy)\n"
    "     \\\\/     M anipulation  |\n"
    "\\*---------------------------------------------------------------------------*/\n"
)
SEPARATOR = "// * * * * * * * * * * * * * * * * * * * * * * * * * * * * * * * * * * * * * //\n\n"
FOOTER = "\n// ************************************************************************* //\n"
BOUNDARY = (
    "boundaryField\n{\n"
    "    inlet\n    {\n        type            calculated;\n    }\n"
    "    outlet\n    {\n        type            calculated;\n    }\n"
    "    walls\n    {\n        type            calculated;\n    }\n"
    "}\n"
)


def time_name(step: int, delta_t: float = 1.0) -> str:
    """Name of a time folder, as OpenFOAM prints it (``1``, ``10``, ``0.5``)."""
    value = step * delta_t
    return f"{value:g}"


def values_per_field(name: str, cells: int) -> int:
    """Number of values (vectors count once) a field of ``cells`` cells holds."""
    return FIELDS[name][3] * cells


def header(cls: str, location: str, obj: str, fmt: str) -> str:
    """Banner and FoamFile dictionary that every OpenFOAM file starts with."""
    arch = f'    arch        "{ARCH}";\n' if fmt == "binary" else ""
    return (
        BANNER + "FoamFile\n{\n"
        "    version     2.0;\n"
        f"    format      {fmt};\n"
        f"{arch}"
        f"    class       {cls};\n"
        f'    location    "{location}";\n'
        f"    object      {obj};\n"
        "}\n" + SEPARATOR
    )


#: stand-ins for the parts of a header that change per write, in the cached templates
_TIME, _INDEX = "\0time\0", "\0index\0"


def _field_prefix_text(name: str, time: str, count: int, fmt: str) -> str:
    cls, kind, _, _ = FIELDS[name]
    text = header(cls, time, name, fmt)
    text += f"dimensions      {DIMENSIONS[name]};\n\n"
    text += f"internalField   nonuniform List<{kind}> \n{count}\n("
    if fmt == "ascii":
        text += "\n"
    return text


@functools.lru_cache(maxsize=1024)
def _field_prefix_around_time(name: str, count: int, fmt: str) -> tuple[bytes, bytes]:
    """A field's header up to its time and after it (the time is its only part that changes)."""
    before, after = _field_prefix_text(name, _TIME, count, fmt).split(_TIME)
    return before.encode(), after.encode()


def field_prefix(name: str, time: str, count: int, fmt: str) -> bytes:
    """Banner, FoamFile header and the start of the internalField list of a field file."""
    before, after = _field_prefix_around_time(name, count, fmt)
    return before + time.encode() + after


_FIELD_SUFFIX = (")\n;\n\n" + BOUNDARY + FOOTER).encode()


def field_suffix() -> bytes:
    return _FIELD_SUFFIX


def payload_bytes(name: str, cells: int, fmt: str) -> int:
    """The formula: bytes of a field's values in a format (headers excluded)."""
    per_value = VECTOR_BYTES[fmt] if FIELDS[name][2] == 3 else SCALAR_BYTES[fmt]
    return values_per_field(name, cells) * per_value


def field_file_bytes(name: str, cells: int, fmt: str, time: str) -> int:
    count = values_per_field(name, cells)
    return (
        len(field_prefix(name, time, count, fmt))
        + payload_bytes(name, cells, fmt)
        + len(field_suffix())
    )


@functools.lru_cache(maxsize=8)
def _uniform_templates(fmt: str) -> tuple[tuple[str, bytes], ...]:
    """``(path, bytes %-template of time and index)`` of the two dictionaries, built once."""

    def template(text: str) -> bytes:
        text = text.replace("%", "%%").replace(_TIME, "%(time)b")
        return text.replace(_INDEX, "%(index)d").encode()

    time_text = header("dictionary", f"{_TIME}/uniform", "time", fmt) + (
        f"value           {_TIME};\n"
        f'name            "{_TIME}";\n'
        f"index           {_INDEX};\n"
        "deltaT          1;\n"
        "deltaT0         1;\n" + FOOTER
    )
    props = header(
        "dictionary", f"{_TIME}/uniform/functionObjects", "functionObjectProperties", fmt
    ) + ("// no function objects\n" + FOOTER)
    return (UNIFORM_FILES[0], template(time_text)), (UNIFORM_FILES[1], template(props))


def uniform_texts(time: str, index: int, fmt: str) -> dict[str, bytes]:
    """The two small dictionaries of ``<time>/uniform``."""
    values = {b"time": time.encode(), b"index": index}
    return {path: template % values for path, template in _uniform_templates(fmt)}


def rank_write_bytes(cells: int, fmt: str, time: str, index: int) -> int:
    """Bytes one rank writes at one write time when uncollated (8 files)."""
    fields = sum(field_file_bytes(name, cells, fmt, time) for name in FIELDS)
    return fields + sum(len(text) for text in uniform_texts(time, index, fmt).values())


def approx_bytes_per_cell(fmt: str) -> int:
    """Payload bytes per cell per write (80 binary, 162 ascii), headers excluded."""
    return sum(payload_bytes(name, 1, fmt) for name in FIELDS)


# ---------------------------------------------------------------- payloads


def fixed_width(values: np.ndarray) -> np.ndarray:
    """Numbers as ``+d.dddddddde+xx`` in a (n, 15) uint8 array, vectorised.

    Magnitudes below 1e-99 are written as zero and above 9.99e99 clipped, so
    every number has the same width and the file sizes follow the formula.
    """
    v = np.asarray(values, dtype=np.float64).ravel()
    v = np.where(np.abs(v) < 1e-99, 0.0, np.clip(v, -9.99999999e99, 9.99999999e99))
    a = np.abs(v)
    nonzero = a > 0
    exponent = np.zeros(v.size, dtype=np.int64)
    exponent[nonzero] = np.floor(np.log10(a[nonzero])).astype(np.int64)
    mantissa = np.zeros(v.size, dtype=np.int64)
    scaled = a[nonzero] / 10.0 ** exponent[nonzero]
    mantissa[nonzero] = np.rint(scaled * 1e8).astype(np.int64)
    # log10 may be off by one at powers of ten: renormalise to 1e8 <= mantissa < 1e9
    high = mantissa >= 1_000_000_000
    mantissa[high] = np.rint(mantissa[high] / 10).astype(np.int64)
    exponent[high] += 1
    low = nonzero & (mantissa < 100_000_000)
    mantissa[low] = np.rint(a[low] / 10.0 ** (exponent[low] - 1) * 1e8).astype(np.int64)
    exponent[low] -= 1
    out = np.empty((v.size, NUMBER_WIDTH), dtype=np.uint8)
    out[:, 0] = np.where(v < 0, ord("-"), ord("+"))
    digits = mantissa.copy()
    for position in (10, 9, 8, 7, 6, 5, 4, 3, 1):
        out[:, position] = digits % 10 + ord("0")
        digits //= 10
    out[:, 2] = ord(".")
    out[:, 11] = ord("e")
    out[:, 12] = np.where(exponent < 0, ord("-"), ord("+"))
    magnitude = np.abs(exponent)
    out[:, 13] = magnitude // 10 + ord("0")
    out[:, 14] = magnitude % 10 + ord("0")
    return out


def encode_values(values: np.ndarray, components: int, fmt: str) -> bytes | memoryview:
    """The payload of a field: raw doubles (no copy when contiguous) or ascii lines."""
    if fmt == "binary":
        array = np.ascontiguousarray(values, dtype="<f8")
        return memoryview(array).cast("B")
    numbers = fixed_width(values)
    if components == 1:
        lines = np.empty((numbers.shape[0], NUMBER_WIDTH + 1), dtype=np.uint8)
        lines[:, :NUMBER_WIDTH] = numbers
        lines[:, NUMBER_WIDTH] = ord("\n")
        return lines.tobytes()
    numbers = numbers.reshape(-1, components, NUMBER_WIDTH)
    width = 1 + components * (NUMBER_WIDTH + 1) + 1
    lines = np.empty((numbers.shape[0], width), dtype=np.uint8)
    lines[:, 0] = ord("(")
    for c in range(components):
        start = 1 + c * (NUMBER_WIDTH + 1)
        lines[:, start : start + NUMBER_WIDTH] = numbers[:, c]
        lines[:, start + NUMBER_WIDTH] = ord(" ")
    lines[:, width - 2] = ord(")")
    lines[:, width - 1] = ord("\n")
    return lines.tobytes()


def field_parts(name: str, data: np.ndarray, fmt: str, time: str) -> list:
    """Prefix, payload and suffix of one field file (written one after the other)."""
    components = FIELDS[name][2]
    before, after = _field_prefix_around_time(name, data.size // components, fmt)
    return [before + time.encode() + after, encode_values(data, components, fmt), _FIELD_SUFFIX]


# ---------------------------------------------------------------- writing


@dataclass
class WriteCount:
    """What a writer created and removed, counted as it goes."""

    files: int = 0
    dirs: int = 0
    bytes: int = 0
    files_removed: int = 0
    dirs_removed: int = 0

    def add(self, other: WriteCount) -> None:
        for key in vars(self):
            setattr(self, key, getattr(self, key) + getattr(other, key))


def _write_files(files: list[tuple[str, list]], count: WriteCount, fsync: bool) -> None:
    """Create each ``(path, parts)``: open, one ``writev`` of its parts, (fsync,) close.

    Plain system calls in one loop: a field's header, its values (the
    array's own memory, not copied) and its footer reach the kernel in one
    call. A buffered file object per file cost a copy of the header and
    footer, three write calls and ~20 us of Python, more than tmpfs takes to
    create a small file. Parts are bytes or byte-format memoryviews (their
    ``len`` is their size in bytes).
    """
    open_, writev, close = os.open, os.writev, os.close
    written = 0
    for path, parts in files:
        fd = open_(path, CREATE, 0o666)
        try:
            done = writev(fd, parts) if len(parts) <= IOV_MAX else 0
            if done != sum(map(len, parts)):
                done = write_all(fd, parts, done)
            if fsync:
                os.fsync(fd)
        finally:
            close(fd)
        written += done
    count.bytes += written
    count.files += len(files)


def _write_parts(path: str | Path, parts: list, count: WriteCount, fsync: bool) -> None:
    """Create ``path`` holding ``parts`` (see :func:`_write_files`)."""
    _write_files([(path, parts)], count, fsync)


def make_time_dirs(root: str | Path, time: str, count: WriteCount) -> str:
    """``<root>/<time>/uniform/functionObjects``: 3 folders, made one by one; returns the first.

    Paths are strings joined once: pathlib's parsing per path cost more than
    the mkdir itself on tmpfs.
    """
    folder = f"{os.fspath(root)}{os.sep}{time}"
    for sub in TIME_DIRS:
        os.mkdir(f"{folder}{os.sep}{sub}" if sub else folder)
    count.dirs += len(TIME_DIRS)
    return folder


class UncollatedWriter:
    """One rank's writes of the same fields, write time after write time (uncollated).

    What is the same at every write is prepared once: the file names, each
    field's header on either side of its time name, the footers and, in
    binary, a view of each field's memory (little-endian doubles, C order).
    The solver updates its arrays in place, so the views show the values of
    the moment; ascii values (and arrays of another type) are encoded anew
    at every write. Per write: the three folders and the eight files, made
    by the C helper of :mod:`tierbench.native` in one call where it builds,
    else by the same system calls from Python. With 1-cell fields on tmpfs
    the Python between the calls cost about as much as the calls.
    """

    def __init__(
        self, processor_dir: str | Path, fields: dict[str, np.ndarray], fmt: str, fsync: bool
    ):
        # paths as bytes: os calls take them as they are, a str is encoded at every call
        self.root, self.fmt, self.fsync = os.fsencode(processor_dir), fmt, fsync
        self.fields = []
        for name, (_, _, components, _) in FIELDS.items():
            data = fields[name]
            before, after = _field_prefix_around_time(name, data.size // components, fmt)
            payload = encode_values(data, components, fmt) if fmt == "binary" else None
            if payload is not None and payload.obj is not data:
                payload = None  # a converted copy would not follow the solver: encode per write
            self.fields.append((name.encode(), data, components, before, after, payload))
        self.uniform = [(os.fsencode(path), template) for path, template in _uniform_templates(fmt)]
        self.dirs = tuple(os.fsencode(os.sep + sub) if sub else b"" for sub in TIME_DIRS)
        #: the C helper that makes the folders and files in one call, or None (Python)
        self.native = native.foamio()

    def write(self, time: str, index: int) -> WriteCount:
        """``<processor_dir>/<time>/`` with its 8 files."""
        stamp = time.encode()
        folder = self.root + os.sep.encode() + stamp
        inside = folder + os.sep.encode()
        # a field's header goes down in the pieces around its time name, unjoined
        files = [
            (
                inside + name,
                (
                    before,
                    stamp,
                    after,
                    encode_values(data, components, self.fmt) if payload is None else payload,
                    _FIELD_SUFFIX,
                ),
            )
            for name, data, components, before, after, payload in self.fields
        ]
        values = {b"time": stamp, b"index": index}
        files += [(inside + path, (template % values,)) for path, template in self.uniform]
        if self.native is not None:
            written = self.native.write_time(folder, self.dirs, files, self.fsync)
            return WriteCount(files=len(files), dirs=len(self.dirs), bytes=written)
        for sub in self.dirs:
            os.mkdir(folder + sub)
        count = WriteCount(dirs=len(self.dirs))
        _write_files(files, count, self.fsync)
        return count


def write_uncollated(
    processor_dir: Path,
    time: str,
    index: int,
    fields: dict[str, np.ndarray],
    fmt: str,
    fsync: bool = False,
) -> WriteCount:
    """One rank's write: ``processor<rank>/<time>/`` with its 8 files."""
    return UncollatedWriter(processor_dir, fields, fmt, fsync).write(time, index)


def collated_prefix(name: str, time: str, fmt: str) -> bytes:
    return header("decomposedBlockData", time, name, fmt).encode()


def block_parts(block: bytes | memoryview) -> list:
    """One rank's block in a collated file: ``List<char>`` of its file's bytes."""
    return [f"\n{len(block)}\n(".encode(), block, b")\n"]


def write_collated(
    processors_dir: Path,
    time: str,
    index: int,
    blocks: dict[str, list],
    fmt: str,
    fsync: bool = False,
) -> WriteCount:
    """The master's write: ``processors<N>/<time>/<field>`` with one block per rank.

    ``blocks[field][rank]`` is the complete uncollated file of that rank (the
    bytes of its header and values), as OpenFOAM's decomposedBlockData holds.
    """
    count = WriteCount()
    folder = make_time_dirs(processors_dir, time, count) + os.sep
    for name in FIELDS:
        parts = [collated_prefix(name, time, fmt)]
        for block in blocks[name]:
            parts += block_parts(block)
        parts.append(FOOTER.encode())
        _write_parts(folder + name, parts, count, fsync)
    files = [(folder + rel, [text]) for rel, text in uniform_texts(time, index, fmt).items()]
    _write_files(files, count, fsync)
    return count


def purge(root: Path, kept: list[str], keep: int) -> WriteCount:
    """purgeWrite: remove the oldest time folders of ``kept`` until ``keep`` remain."""
    count = WriteCount()
    if keep <= 0:
        return count
    while len(kept) > keep:
        oldest = root / kept.pop(0)
        # one bottom-up pass that removes and counts (rmtree would walk it again)
        for here, dirs, files in os.walk(oldest, topdown=False):
            for name in files:
                os.unlink(os.path.join(here, name))
            for name in dirs:
                os.rmdir(os.path.join(here, name))
            count.files_removed += len(files)
            count.dirs_removed += len(dirs)
        os.rmdir(oldest)
        count.dirs_removed += 1
    return count


# ---------------------------------------------------------------- reading

_ENTRY = re.compile(r"^\s*(\w+)\s+(.*?);\s*$")


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


def read_field(data: bytes) -> tuple[dict, np.ndarray]:
    """Header and values (n x components) of a field file written by this module."""
    head, offset = parse_header(data)
    match = re.compile(rb"internalField\s+nonuniform List<(\w+)>\s*\n(\d+)\n\(").search(
        data, offset
    )
    if not match:
        raise ValueError("no nonuniform internalField")
    kind, count = match.group(1).decode(), int(match.group(2))
    components = 3 if kind == "vector" else 1
    start = match.end()
    if head["format"] == "binary":
        end = start + 8 * count * components
        values = np.frombuffer(data[start:end], dtype="<f8")
    else:
        end = data.index(b")\n;", start)
        text = data[start:end].decode().replace("(", " ").replace(")", " ")
        values = np.array(text.split(), dtype=np.float64)
    if values.size != count * components or data[end : end + 3] != b")\n;":
        raise ValueError(
            f"internalField holds {values.size} numbers, expected {count * components}"
        )
    return head, values.reshape(count, components)


def read_collated(data: bytes) -> tuple[dict, list[bytes]]:
    """Header and the per-rank blocks of a collated file."""
    head, offset = parse_header(data)
    if head["class"] != "decomposedBlockData":
        raise ValueError(f"class {head['class']} is not decomposedBlockData")
    blocks = []
    position = data.index(SEPARATOR.encode(), offset) + len(SEPARATOR)
    pattern = re.compile(rb"\n(\d+)\n\(")
    while True:
        match = pattern.match(data, position)
        if not match:
            break
        size = int(match.group(1))
        start = match.end()
        if data[start + size : start + size + 2] != b")\n":
            raise ValueError(f"block {len(blocks)} is not closed after {size} bytes")
        blocks.append(data[start : start + size])
        position = start + size + 2
    if data[position:] != FOOTER.encode():
        raise ValueError("collated file does not end after its blocks")
    return head, blocks


def count_tree(root: Path) -> tuple[int, int]:
    """(files, folders) below ``root`` (root itself not counted)."""
    files = dirs = 0
    for _, subdirs, names in os.walk(root):
        files += len(names)
        dirs += len(subdirs)
    return files, dirs
