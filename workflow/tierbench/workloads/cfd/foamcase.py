"""A user's OpenFOAM case: its dictionaries read and edited, its mesh, its size.

The openfoam workload runs a case folder a study names (``case``) instead of
its generated duct. It must read what the case says (the application, its
time step and end time, how it writes) and change only what a study
overrides, in a case written by someone else in any style OpenFOAM accepts.

Dictionaries are read and edited with foamlib (pinned in pyproject.toml): it
parses OpenFOAM's own syntax (comments, ``#include`` and other directives,
``$macros``, quoted regex keys, sub-dictionaries such as ``functions``), and an
edit rewrites only the entry it changes, so the rest of the file stays as its
author wrote it. Regular expressions break on the first dictionary written in
another style (an entry over two lines, a ``writeInterval`` inside a function
object, a commented-out entry). foamlib 1.9.0 needs Python 3.12; 1.7.10 is its
last release for Python 3.11, the oldest this project supports. It parses all
but 2 of the 666 controlDict and decomposeParDict files of Debian's OpenFOAM
v1912 tutorials (openfoam-examples); those two build entries with ``#eval #{
... #}`` and a macro of a macro, and are refused with one line that says so
(:class:`CaseError`).

A value written as a macro of the same dictionary (``endTime $tEnd;``) is
followed; one that OpenFOAM computes as it reads (``#calc``, a macro from an
``#include``d file) cannot be known before the run: it is None here, and where
an estimate needs it the study must give that setting itself. Debian's
tutorials are gzipped where large (``U.gz``): OpenFOAM reads either, and a
dictionary that is edited is unpacked first.
"""

from __future__ import annotations

import functools
import gzip
import math
import os
import re
import shutil
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path

import numpy as np

CONTROL = "system/controlDict"
DECOMPOSE = "system/decomposeParDict"
BLOCK_MESH = "system/blockMeshDict"
POLY_MESH = "constant/polyMesh"
#: writeControl values whose write times follow the simulated time
RUN_TIME_CONTROLS = {"runTime", "adjustableRunTime", "adjustable"}
#: writeControl values whose write times follow the machine's speed: no two tiers would agree
WALL_CLOCK_CONTROLS = {"cpuTime", "clockTime"}
#: values per cell of a field class (volVectorField: 3, ...)
COMPONENTS = {"Scalar": 1, "Vector": 3, "SphericalTensor": 1, "SymmTensor": 6, "Tensor": 9}
FIELD_CLASS = re.compile(rb"class\s+vol(\w+?)Field\s*;")
#: the FoamFile header of a mesh file (a dictionary without sub-dictionaries)
FOAM_HEADER = re.compile(rb"FoamFile\s*\{[^}]*\}")
#: a list's size and its opening: ``N (`` or the uniform ``N{``
LIST_START = re.compile(rb"(\d+)\s*([({])")


class CaseError(ValueError):
    """A case that cannot be run as it is: the message says what to change."""


def case_folder(value: str | os.PathLike) -> Path:
    """The case a study names: ``~`` is the user's home, a relative path is from the
    folder the run starts in (where snakemake runs, as a tier's path)."""
    return Path(os.path.expanduser(os.fspath(value)))


def existing(case: Path, rel: str) -> Path | None:
    """``case/rel``, or its gzipped copy (``rel.gz``), or None."""
    for path in (case / rel, case / f"{rel}.gz"):
        if path.is_file():
            return path
    return None


def case_problem(case: Path) -> str | None:
    """Why ``case`` is no OpenFOAM case folder, or None."""
    if not case.is_dir():
        return f"case {case} is not a folder"
    if existing(case, CONTROL) is None:
        return (
            f"case {case} has no system/controlDict: give the case's top folder, "
            "the one that holds system/, constant/ and its start time (0/)"
        )
    return None


def unpacked(path: Path) -> Path:
    """``path`` as a plain file, unpacked in place if it is gzipped (a copy's, to edit)."""
    if path.suffix != ".gz":
        return path
    plain = path.with_suffix("")
    with gzip.open(path) as source, open(plain, "wb") as target:
        shutil.copyfileobj(source, target)
    path.unlink()
    return plain


def open_dictionary(path: Path):
    """The dictionary as foamlib parses it; CaseError naming the file where it cannot."""
    from foamlib import FoamFile  # only a user's case needs it (the duct's jobs do not)

    dictionary = FoamFile(path)
    try:
        list(dictionary.keys())  # parses the whole file now
    except Exception as error:  # foamlib's parse errors have no common public base
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise CaseError(f"{path} cannot be parsed ({first})") from None
    return dictionary


def value(dictionary, key: str):
    """An entry's value, following a macro of the same dictionary's top level; None when
    the entry is missing or computed as OpenFOAM reads it (#calc, an #include's macro)."""
    seen = set()
    found = dictionary.get(key) if key in dictionary else None
    while isinstance(found, str) and found.startswith("$") and found not in seen:
        seen.add(found)
        name = found[1:].strip("{}")
        found = dictionary.get(name) if name in dictionary else None
    if isinstance(found, str) and found.startswith(("$", "#")):
        return None
    return None if isinstance(found, tuple) else found  # foamlib's (directive, argument)


def number(raw) -> Decimal | None:
    """A dictionary number as an exact decimal (endTime = start + steps x deltaT must not
    become 0.30000000000000004), or None."""
    if isinstance(raw, bool) or raw is None:
        return None
    try:
        return Decimal(str(raw))
    except InvalidOperation:
        return None


@dataclass(frozen=True)
class Control:
    """What a case's controlDict says, as far as it can be known before the run."""

    application: str | None
    start_from: str
    start_time: Decimal | None
    stop_at: str
    end_time: Decimal | None
    delta_t: Decimal | None
    adjusts_time_step: bool
    write_control: str
    write_interval: Decimal | None
    purge_write: int | None
    write_format: str


def read_control(case: Path) -> Control:
    """The case's controlDict (its defaults where it is silent, as OpenFOAM's)."""
    d = open_dictionary(existing(case, CONTROL))
    purge = value(d, "purgeWrite")
    application = value(d, "application")
    return Control(
        application=str(application) if application is not None else None,
        start_from=str(value(d, "startFrom") or "startTime"),
        start_time=number(value(d, "startTime")) if "startTime" in d else Decimal(0),
        stop_at=str(value(d, "stopAt") or "endTime"),
        end_time=number(value(d, "endTime")),
        delta_t=number(value(d, "deltaT")),
        adjusts_time_step=value(d, "adjustTimeStep") is True,
        write_control=str(value(d, "writeControl") or "timeStep"),
        write_interval=number(value(d, "writeInterval")),
        purge_write=int(purge) if isinstance(purge, int) else (0 if purge is None else None),
        write_format=str(value(d, "writeFormat") or "ascii"),
    )


def time_folders(case: Path) -> list[str]:
    """The case's time folders (``0``, ``0.5``, ...), oldest first."""
    found = []
    for entry in case.iterdir():
        if entry.is_dir() and number(entry.name) is not None:
            found.append(entry.name)
    return sorted(found, key=Decimal)


def start_time(case: Path, control: Control) -> Decimal | None:
    """Where the run starts: startFrom firstTime / latestTime pick a time folder."""
    folders = time_folders(case)
    if control.start_from == "firstTime" and folders:
        return Decimal(folders[0])
    if control.start_from == "latestTime" and folders:
        return Decimal(folders[-1])
    return control.start_time


def own_steps(control: Control, start: Decimal | None) -> int | None:
    """Time steps the case runs as it is, or None where that is not known before the run
    (it adjusts its time step, stops other than at endTime, or computes its times)."""
    if control.adjusts_time_step or control.stop_at != "endTime":
        return None
    if None in (start, control.end_time, control.delta_t) or control.delta_t <= 0:
        return None
    return int(((control.end_time - start) / control.delta_t).to_integral_value())


def edit(path: Path, entries: dict) -> Path:
    """Set ``entries`` (name -> value) in the dictionary at ``path``; the rest stays as written.

    Numbers, words and booleans (no/yes) as foamlib writes them; a dict sets a
    sub-dictionary's entries. Returns the path (unpacked if it was gzipped).
    """
    path = unpacked(path)
    dictionary = open_dictionary(path)
    for key, new in entries.items():
        if isinstance(new, dict) and key in dictionary and _is_dict(dictionary[key]):
            for sub, sub_value in new.items():
                dictionary[key][sub] = sub_value
        else:
            dictionary[key] = new
    return path


def _is_dict(entry) -> bool:
    return hasattr(entry, "keys")


def edit_control(case: Path, entries: dict) -> Path:
    return edit(existing(case, CONTROL), entries)


# ------------------------------------------------------------------ decomposition

#: methods that split the mesh along coordinates with ``n (nx ny nz)``, nx * ny * nz ranks
COORDINATE_METHODS = ("simple", "hierarchical")


def simple_decomposition(ranks: int) -> str:
    """A decomposeParDict of our own, for a case without one (or whose method fails)."""
    return (
        "FoamFile\n{\n    version     2.0;\n    format      ascii;\n    class       dictionary;\n"
        '    location    "system";\n    object      decomposeParDict;\n}\n\n'
        f"numberOfSubdomains {ranks};\n\nmethod          simple;\n\n"
        f"simpleCoeffs\n{{\n    n           ({ranks} 1 1);\n    delta       0.001;\n}}\n"
    )


def decompose_for(case: Path, ranks: int, method: str | None = None) -> str:
    """Make the case's decomposeParDict cut ``ranks`` pieces; the method it names.

    The case's own method is kept (``method`` replaces it, e.g. ``simple``
    where the case's cannot run here). A coordinate method whose ``n`` does
    not multiply out to ``ranks`` gets ``(ranks 1 1)``: slabs along x.
    """
    path = existing(case, DECOMPOSE)
    if path is None:
        (case / DECOMPOSE).write_text(simple_decomposition(ranks))
        return "simple"
    path = unpacked(path)
    dictionary = open_dictionary(path)
    entries: dict = {"numberOfSubdomains": ranks}
    if method is not None:
        entries["method"] = method
    chosen = method or str(value(dictionary, "method"))
    if chosen in COORDINATE_METHODS:
        for coeffs in ("coeffs", f"{chosen}Coeffs"):
            given = dictionary[coeffs].get("n") if coeffs in dictionary else None
            if coeffs in dictionary and _product(given) != ranks:
                entries[coeffs] = {"n": [ranks, 1, 1]}
        if "coeffs" not in dictionary and f"{chosen}Coeffs" not in dictionary:
            entries[f"{chosen}Coeffs"] = {"n": [ranks, 1, 1]}
    edit(path, entries)
    return chosen


def _product(n) -> int | None:
    if not isinstance(n, list | tuple) or not all(isinstance(k, int) for k in n):
        return None
    return math.prod(n)


# ------------------------------------------------------------------ mesh and size


def has_mesh(case: Path) -> bool:
    return existing(case, f"{POLY_MESH}/owner") is not None


def can_block_mesh(case: Path) -> bool:
    return existing(case, BLOCK_MESH) is not None


def mesh_problem(case: Path) -> str | None:
    """Why the workload cannot mesh the case itself (with no ``prepare``), or None."""
    if has_mesh(case) or can_block_mesh(case):
        return None
    return (
        f"case {case} has no mesh (constant/polyMesh) and no system/blockMeshDict: name what "
        "meshes it in prepare (its Allrun.pre, [snappyHexMesh -overwrite], ...), or give it meshed"
    )


def per_file_version(read):
    """``read(path)`` once per version of the file (its mtime and size): Snakemake plans
    every job's resources from a case, and a plan reads it for every estimate."""

    @functools.lru_cache(maxsize=32)
    def once(path: Path, mtime_ns: int, size: int):
        return read(path)

    @functools.wraps(read)
    def cached(path: Path):
        stat = path.stat()
        return once(path, stat.st_mtime_ns, stat.st_size)

    return cached


def cells(case: Path) -> int | None:
    """Cells of the case's mesh where it has one (:func:`mesh_cells`), else of its
    blockMeshDict's blocks; None where neither says before OpenFOAM runs (a blockMeshDict
    foamlib cannot parse, ``#eval{ }``, is one blockMesh alone can read: its mesh tells)."""
    if has_mesh(case):
        return mesh_cells(existing(case, f"{POLY_MESH}/owner"))
    path = existing(case, BLOCK_MESH)
    return None if path is None else _block_mesh_cells(path)


@per_file_version
def _block_mesh_cells(path: Path) -> int | None:
    """:func:`cells` of a blockMeshDict (foamlib takes over a second to parse pitzDaily's)."""
    try:
        return block_cells(open_dictionary(path))
    except CaseError:
        return None


@per_file_version
def mesh_cells(owner: Path) -> int | None:
    """Cells of a mesh: one more than the largest label of its ``owner`` list (every cell
    owns a face), read as OpenFOAM reads it: gzipped or not, ascii or binary (the
    header's ``arch`` gives the label's width), with or without the ``note`` some
    writers put in the header (the tutorials' meshes have none). None for an empty
    list; CaseError where the file is no label list."""
    opener = gzip.open if owner.suffix == ".gz" else open
    with opener(owner, "rb") as handle:
        data = handle.read()
    header = FOAM_HEADER.search(data)
    if header is None:
        raise CaseError(f"{owner} has no FoamFile header: it is no OpenFOAM mesh file")
    binary = re.search(rb"format\s+binary\s*;", header.group(0)) is not None
    width = re.search(rb"label\s*=\s*(\d+)", header.group(0))
    big_endian = b"MSB" in header.group(0)
    body = _skip_comments(data, header.end())
    found = LIST_START.match(data, body)
    if found is None:
        raise CaseError(f"{owner}: no list of labels after its header (N followed by '(')")
    count, opening = int(found.group(1)), found.group(2)
    if count == 0:
        return None
    start = found.end()
    if opening == b"{":  # a uniform list, N{label}
        return int(data[start : data.index(b"}", start)]) + 1
    if binary:
        size = (int(width.group(1)) if width else 32) // 8
        dtype = np.dtype(f"{'>' if big_endian else '<'}i{size}")
        labels = np.frombuffer(data, dtype=dtype, count=count, offset=start)
    else:
        text = data[start : data.index(b")", start)].decode("ascii")
        labels = np.array(text.split(), dtype=np.int64)
    if len(labels) != count:
        raise CaseError(f"{owner} says {count} labels and holds {len(labels)}")
    return int(labels.max()) + 1


def _skip_comments(data: bytes, at: int) -> int:
    """Where the first token at or after ``at`` starts, past blanks and comments."""
    while True:
        while at < len(data) and data[at : at + 1].isspace():
            at += 1
        if data.startswith(b"//", at):
            end = data.find(b"\n", at)
            at = len(data) if end < 0 else end + 1
        elif data.startswith(b"/*", at):
            end = data.find(b"*/", at)
            at = len(data) if end < 0 else end + 2
        else:
            return at


def block_cells(dictionary) -> int | None:
    """Cells of blockMeshDict's blocks (``hex (v..) [zone] (nx ny nz) grading``), or None
    where a count is not a plain number or a macro of the same dictionary."""
    blocks = dictionary.get("blocks") if "blocks" in dictionary else None
    if not isinstance(blocks, list):
        return None
    total, after_hex = 0, False
    for item in blocks:
        if item == "hex":
            after_hex, vertices = True, None
            continue
        if not after_hex or not isinstance(item, list):
            continue
        if vertices is None:
            vertices = item  # the block's 8 vertices come first
            continue
        counts = [_resolve(dictionary, n) for n in item]
        if len(counts) != 3 or not all(isinstance(n, int) for n in counts):
            return None
        total += math.prod(counts)
        after_hex = False
    return total or None


def _resolve(dictionary, item):
    if isinstance(item, str) and item.startswith("$"):
        name = item[1:].strip("{}")
        return value(dictionary, name) if name in dictionary else None
    return item


def values_per_cell(case: Path, start: str | None) -> int:
    """Values a write holds per cell: the components of the start time's volume fields
    (U 3, p 1, ...) and 3 for the face flux phi and fields the solver adds."""
    folder = case / start if start is not None else None
    if folder is not None and not folder.is_dir():
        folder = case / f"{start}.orig"  # the tutorials' 0.orig/, which becomes 0/
    total = 3
    if folder is None or not folder.is_dir():
        return total
    for path in folder.iterdir():
        if not path.is_file():
            continue
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as handle:
            found = FIELD_CLASS.search(handle.read(2048))
        if found:
            total += COMPONENTS.get(found.group(1).decode(), 1)
    return total


def size_bytes(case: Path) -> int:
    """Bytes of every file of the case (what a copy puts on the tier)."""
    total = 0
    for here, _, files in os.walk(case):
        for name in files:
            total += os.lstat(os.path.join(here, name)).st_size
    return total
