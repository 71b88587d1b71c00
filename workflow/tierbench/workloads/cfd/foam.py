"""OpenFOAM-style output files: what a decomposed solver writes at a write time.

The layout only, no MPI, no system calls and no files written: which files a
write makes, the text of every file (banner, FoamFile dictionary, boundary
patches), where its values go and how many bytes they take, and the collated
container's framing. :mod:`tierbench.workloads.cfd.foam_write` encodes the
values and writes the files with OpenFOAM's calls;
:mod:`tierbench.workloads.cfd.foam_read` reads them back.

A file set (``file_set``) is one entry of :data:`FILE_SET_LAYOUTS`, a
:class:`FileSet` that holds every way it differs from the others; the
functions here read it and never ask which set it is, so a new layout is a
new entry.

``v1912`` (the default) is what OpenFOAM v1912's simpleFoam (kOmegaSST, the
duct case of :mod:`tierbench.workloads.cfd.openfoam`, ``fileHandler
uncollated``) writes, measured::

    processor<rank>/<time>/{U,p,k,omega,nut,phi}
    processor<rank>/<time>/uniform/{time,cumulativeContErr}
    processor<rank>/<time>/uniform/functionObjects/functionObjectProperties

that is 9 files and 3 folders (``<time>``, ``uniform``, ``functionObjects``)
per rank per write. A field file holds its internalField and a boundaryField
with the duct's patches (inlet, outlet, walls) and a processor patch per
neighbouring rank, each written as v1912 writes the case's boundary
conditions: a value per face for wall functions, processor and calculated
patches, a ``uniform`` value once, nothing for zeroGradient and noSlip. The
faces follow the mesh the proxy claims, the openfoam workload's: per rank one
block of ``cells`` hexahedra as close to a cube as the count factors
(:func:`block_shape`), the ranks stacked along the duct, so rank 0 holds the
inlet, the last rank the outlet, every rank its four walls; phi holds a value
per internal face. Banner, headers and dictionaries are laid out byte for byte
as v1912 lays them out (the banner names the proxy in a cell of the same
width; ``uniform/time`` and ``functionObjectProperties`` are ascii in either
format, as v1912 writes them). Binary values are 8-byte doubles; ascii numbers
have a fixed width per field (:data:`V1912_WIDTHS`), about what v1912 prints
at writePrecision 6 for the duct's values, so sizes are exact in both formats.

``document_001`` is the layout document 001 lists, kept as it was::

    processor<rank>/<time>/{U,p,k,omega,nut,phi}
    processor<rank>/<time>/uniform/time
    processor<rank>/<time>/uniform/functionObjects/functionObjectProperties

8 files and 3 folders per rank per write; fields without boundary values
(three ``calculated`` patches), phi 3 values per cell (the internal faces of
a hexahedral mesh, about), ascii numbers 15 characters wide
(``+1.23456789e-01``): 80 B per cell per write in binary, 162 in ascii.

``collated`` writes ``processors<N>/<time>/<field>``: one file per field
holding one block per rank (written by the master), plus the ``uniform``
files once: 9 (document_001: 8) files and 3 folders per write for all ranks.
As v1912 writes it, the container's header names the file's absolute path
and the number of blocks, each block follows a ``// Processor<rank>`` line,
the master's block is its whole uncollated file and every other rank's leaves
out the header and the closing line.
"""

from __future__ import annotations

import functools
import math
import os
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass

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
FORMATS = ("binary", "ascii")
HANDLERS = ("uncollated", "collated")
#: width of an ascii number, document_001: "+1.23456789e-01"
NUMBER_WIDTH = 15
#: v1912, width of an ascii number per field: v1912 prints 6 significant digits
#: (writePrecision 6) in %g style, so a number is as wide as its magnitude makes it;
#: measured in the duct's output (mean characters per number): U 9.8 (about 1 along
#: the duct, +-1e-3 across), p 8.9, k 9.9, omega 6.9, nut 10.9, phi 11.2. The proxy
#: writes "+1.2345e-01"-style numbers of that width (omega 8: two significant digits
#: at least), as many significant digits as fit.
V1912_WIDTHS = {"U": 10, "p": 9, "k": 10, "omega": 8, "nut": 11, "phi": 11}
ARCH = "LSB;label=32;scalar=64"
DOCUMENT_001_BANNER = (
    "/*--------------------------------*- C++ -*----------------------------------*\\\n"
    "  =========                 |\n"
    "  \\\\      /  F ield         | OpenFOAM: The Open Source CFD Toolbox\n"
    "   \\\\    /   O peration     |\n"
    "    \\\\  /    A nd           | tierbench cfd_proxy (output proxy)\n"
    "     \\\\/     M anipulation  |\n"
    "\\*---------------------------------------------------------------------------*/\n"
)
#: v1912's banner, line for line (80 columns); the empty cell of its last line names the proxy
V1912_BANNER = (
    "/*--------------------------------*- C++ -*----------------------------------*\\\n"
    "| =========                 |                                                 |\n"
    "| \\\\      /  F ield         | OpenFOAM: The Open Source CFD Toolbox           |\n"
    "|  \\\\    /   O peration     | Version:                                        |\n"
    "|   \\\\  /    A nd           | Website:  www.openfoam.com                      |\n"
    "|    \\\\/     M anipulation  | tierbench cfd_proxy (output proxy)              |\n"
    "\\*---------------------------------------------------------------------------*/\n"
)
#: the line after the FoamFile dictionary; a file's own text starts after a blank line
SEPARATOR = "// * * * * * * * * * * * * * * * * * * * * * * * * * * * * * * * * * * * * * //\n"
#: a blank line and the closing line (document_001's end of a file)
FOOTER = "\n// ************************************************************************* //\n"
V1912_FOOTER = "\n" + FOOTER  # after a dictionary's last entry: two blank lines, the line
#: the duct case's uniform boundary values (``openfoam_plan.FLOW``: inflow 1 m/s, k, omega)
CASE_VALUES = {"U": "(1 0 0)", "k": "0.00375", "omega": "16", "p": "0", "phi": "0"}
#: a value per face (a nonuniform list)
LIST = "list"


def _patch(kind: str, value: str | None, before=(), after=()) -> tuple:
    return (*before, ("type", kind), *after), value


#: v1912's boundaryField of the duct case (openfoam_case/0/*), per field and patch:
#: the entries it writes (in its order) and the value (None: none, LIST, or uniform text)
BOUNDARY_V1912 = {
    "U": {
        "inlet": _patch("fixedValue", CASE_VALUES["U"]),
        "outlet": _patch("zeroGradient", None),
        "walls": _patch("noSlip", None),
    },
    "p": {
        "inlet": _patch("zeroGradient", None),
        "outlet": _patch("fixedValue", CASE_VALUES["p"]),
        "walls": _patch("zeroGradient", None),
    },
    "k": {
        "inlet": _patch("fixedValue", CASE_VALUES["k"]),
        "outlet": _patch("zeroGradient", None),
        "walls": _patch("kqRWallFunction", LIST),
    },
    "omega": {
        "inlet": _patch("fixedValue", CASE_VALUES["omega"]),
        "outlet": _patch("zeroGradient", None),
        "walls": _patch("omegaWallFunction", LIST, before=(("blended", "1"), ("beta1", "0.075"))),
    },
    "nut": {
        "inlet": _patch("calculated", LIST),
        "outlet": _patch("calculated", LIST),
        "walls": _patch(
            "nutkWallFunction", LIST, after=(("Cmu", "0.09"), ("kappa", "0.41"), ("E", "9.8"))
        ),
    },
    "phi": {
        "inlet": _patch("calculated", LIST),
        "outlet": _patch("calculated", LIST),
        "walls": _patch("calculated", CASE_VALUES["phi"]),
    },
}
PROCESSOR_PATCH = _patch("processor", LIST)

#: stand-ins for the parts of a file that change per write, in the cached templates
_TIME, _INDEX, _CONTERR = "\0time\0", "\0index\0", "\0conterr\0"


# ---------------------------------------------------------------- the file sets


@dataclass(frozen=True)
class UniformFile:
    """A dictionary of ``<time>/uniform``: its path below the time folder, its class and
    its entries (the time, index and continuity error as stand-ins)."""

    path: str
    cls: str
    entries: str
    #: ascii whatever the write's format (else in the write's format)
    always_ascii: bool = False


@dataclass(frozen=True)
class FileSet:
    """Everything one file set writes differently from another, as data.

    The functions of this module read these fields and nothing else about a
    file set, so a new layout is a new entry of :data:`FILE_SET_LAYOUTS`.
    """

    #: the dictionaries of ``<time>/uniform``, in the order written (uniform/time first)
    uniform: tuple[UniformFile, ...]
    #: characters of an ascii number, per field
    number_widths: Mapping[str, int]
    #: phi holds a value per internal face of the rank's block (else 3 per cell)
    phi_on_faces: bool
    #: what every file starts with, before its FoamFile dictionary
    banner: str
    #: in a binary file's FoamFile dictionary ``arch`` follows ``format`` (else ``class``)
    arch_after_format: bool
    #: blank lines between a field's dimensions (phi: its ``oriented``) and its internalField
    blank_lines_before_values: int
    #: phi says ``oriented oriented;``, as a surface field of OpenFOAM does
    oriented_phi: bool
    #: what closes a binary list of values (an ascii one closes with ")\n;\n")
    binary_list_end: str
    #: field -> patch kind -> (entries, value) of the patches written (:data:`BOUNDARY_V1912`);
    #: a rank's patches of :func:`patches` whose kind is not here are left out
    boundary: Mapping[str, Mapping[str, tuple]]
    #: what ends a file after its last entry
    footer: str
    #: collated: the container's header is OpenFOAM's decomposedBlockData header (binary in
    #: either format, its blocks counted, its own absolute path named), else a field file's
    openfoam_container: bool
    #: collated: a rank other than the master hands in its file without header and footer
    headless_blocks: bool
    #: collated: the line before each block (``{rank}`` filled in) and the container's end
    block_label: str
    container_footer: str


_V1912_TIME = (
    f"value           {_TIME};\n\n"
    f'name            "{_TIME}";\n\n'
    f"index           {_INDEX};\n\n"
    "deltaT          1;\n\n"
    "deltaT0         1;\n"
)
_DOCUMENT_001_TIME = (
    f"value           {_TIME};\n"
    f'name            "{_TIME}";\n'
    f"index           {_INDEX};\n"
    "deltaT          1;\n"
    "deltaT0         1;\n"
)
_CALCULATED = _patch("calculated", None)

#: the file sets, the default first
FILE_SET_LAYOUTS = {
    "v1912": FileSet(
        uniform=(
            # v1912 writes uniform/time and functionObjectProperties in ascii in either format
            UniformFile("uniform/time", "dictionary", _V1912_TIME, always_ascii=True),
            UniformFile(
                "uniform/cumulativeContErr",
                "uniformDimensionedScalarField",
                f"dimensions      [0 0 0 0 0 0 0];\nvalue           {_CONTERR};\n\n",
            ),
            UniformFile(
                "uniform/functionObjects/functionObjectProperties",
                "dictionary",
                "",
                always_ascii=True,
            ),
        ),
        number_widths=V1912_WIDTHS,
        phi_on_faces=True,
        banner=V1912_BANNER,
        arch_after_format=False,
        blank_lines_before_values=2,
        oriented_phi=True,
        binary_list_end=");\n",
        boundary={
            name: {**patches, "processor": PROCESSOR_PATCH}
            for name, patches in BOUNDARY_V1912.items()
        },
        footer=V1912_FOOTER,
        openfoam_container=True,
        headless_blocks=True,
        block_label="// Processor{rank}\n\n",
        container_footer="",
    ),
    "document_001": FileSet(
        uniform=(
            UniformFile("uniform/time", "dictionary", _DOCUMENT_001_TIME),
            UniformFile(
                "uniform/functionObjects/functionObjectProperties",
                "dictionary",
                "// no function objects\n",
            ),
        ),
        number_widths=dict.fromkeys(FIELDS, NUMBER_WIDTH),
        phi_on_faces=False,
        banner=DOCUMENT_001_BANNER,
        arch_after_format=True,
        blank_lines_before_values=1,
        oriented_phi=False,
        binary_list_end=")\n;\n",
        boundary={
            name: dict.fromkeys(("inlet", "outlet", "walls"), _CALCULATED) for name in FIELDS
        },
        footer=FOOTER,
        openfoam_container=False,
        headless_blocks=False,
        block_label="",
        container_footer="\n" + FOOTER,
    ),
}
#: the files a write puts in the time folder (``file_set``), the default first
FILE_SETS = tuple(FILE_SET_LAYOUTS)
DEFAULT_FILE_SET = FILE_SETS[0]


def check_file_set(file_set: str) -> str:
    if file_set not in FILE_SET_LAYOUTS:
        raise ValueError(f"file_set {file_set!r} is not one of {', '.join(FILE_SETS)}")
    return file_set


def file_set_layout(file_set: str = DEFAULT_FILE_SET) -> FileSet:
    return FILE_SET_LAYOUTS[check_file_set(file_set)]


def uniform_files(file_set: str = DEFAULT_FILE_SET) -> tuple[str, ...]:
    """The files of ``<time>/uniform`` a write makes (once per write when collated)."""
    return tuple(file.path for file in file_set_layout(file_set).uniform)


def time_dirs(file_set: str = DEFAULT_FILE_SET) -> tuple[str, ...]:
    """Folders a write makes (per rank when uncollated): the time folder, ``""``, and
    every folder below it that holds a ``uniform`` file."""
    found = {""}
    for path in uniform_files(file_set):
        folder = posixpath.dirname(path)
        while folder:
            found.add(folder)
            folder = posixpath.dirname(folder)
    return tuple(sorted(found))


def files_per_write(file_set: str = DEFAULT_FILE_SET) -> int:
    """Files per rank per write (uncollated), per write (collated): v1912 9, document_001 8."""
    return len(FIELDS) + len(uniform_files(file_set))


def dirs_per_write(file_set: str = DEFAULT_FILE_SET) -> int:
    """Folders per rank per write (uncollated), per write (collated): 3 in either set."""
    return len(time_dirs(file_set))


TIME_DIRS = time_dirs()  # "", "uniform", "uniform/functionObjects"
FILES_PER_WRITE = files_per_write()  # the default set's: 9 (document_001: 8)
DIRS_PER_WRITE = dirs_per_write()  # 3


def time_name(step: int, delta_t: float = 1.0) -> str:
    """Name of a time folder, as OpenFOAM prints it (``1``, ``10``, ``0.5``)."""
    value = step * delta_t
    return f"{value:g}"


# ---------------------------------------------------------------- the mesh


@functools.lru_cache(maxsize=256)
def block_shape(cells: int) -> tuple[int, int, int]:
    """One rank's cells as (x, y, z) counts, as close to a cube as ``cells`` factors.

    Both the openfoam workload's blockMesh and the proxy's patch sizes use it,
    so the proxy sizes the boundaries of the very block the solver meshes.
    Ties go to the longest side along x, the direction the ranks are stacked in.
    """
    if cells < 1:
        raise ValueError(f"a rank needs at least one cell, not {cells}")
    best = None
    for y in range(1, math.isqrt(cells) + 1):
        if cells % y:
            continue
        rest = cells // y
        for z in range(y, math.isqrt(rest) + 1):
            if rest % z:
                continue
            x = rest // z
            shape = (max(x, y, z), *sorted((x, y, z))[:2][::-1])
            key = (max(shape) / min(shape), -shape[0])
            if best is None or key < best[0]:
                best = (key, shape)
    return best[1]


def internal_faces(cells: int) -> int:
    """Faces between two cells of a rank's block (phi's values in v1912)."""
    x, y, z = block_shape(cells)
    return (x - 1) * y * z + x * (y - 1) * z + x * y * (z - 1)


@functools.lru_cache(maxsize=4096)
def patches(cells: int, rank: int = 0, ranks: int = 1) -> tuple[tuple[str, str, int], ...]:
    """(name, kind, faces) of a rank's boundary patches, in the order v1912 writes them.

    The ranks' blocks are stacked along the duct (decomposePar's simple method
    ``n (ranks 1 1)``): inlet and outlet have faces on the first and the last
    rank only (both when serial), every rank has its four walls, and a
    processor patch to each neighbour, the lower first.
    """
    if not 0 <= rank < ranks:
        raise ValueError(f"rank {rank} is not one of {ranks} ranks")
    x, y, z = block_shape(cells)
    end = y * z
    found = [
        ("inlet", "inlet", end if rank == 0 else 0),
        ("outlet", "outlet", end if rank == ranks - 1 else 0),
        ("walls", "walls", 2 * x * (y + z)),
    ]
    for neighbour in (rank - 1, rank + 1):
        if 0 <= neighbour < ranks:
            found.append((f"procBoundary{rank}to{neighbour}", "processor", end))
    return tuple(found)


def values_per_field(name: str, cells: int, file_set: str = DEFAULT_FILE_SET) -> int:
    """Values (vectors count once) of a field's internalField for ``cells`` cells."""
    if name == "phi" and file_set_layout(file_set).phi_on_faces:
        return internal_faces(cells)
    return FIELDS[name][3] * cells


def cells_of(name: str, numbers: int, file_set: str = DEFAULT_FILE_SET) -> int:
    """A rank's cells from the numbers of one of its fields (phi: only at 3 values per cell)."""
    components, per_cell = FIELDS[name][2:]
    if name == "phi" and file_set_layout(file_set).phi_on_faces:
        raise ValueError("phi's values are the internal faces: give the cells")
    return numbers // components // per_cell


def number_width(name: str, file_set: str = DEFAULT_FILE_SET) -> int:
    """Characters of one ascii number of a field."""
    return file_set_layout(file_set).number_widths[name]


def value_bytes(name: str, fmt: str, file_set: str = DEFAULT_FILE_SET) -> int:
    """Bytes of one value on disk: doubles, or fixed-width numbers and their separators."""
    components = FIELDS[name][2]
    if fmt == "binary":
        return 8 * components
    width = number_width(name, file_set)
    return width + 1 if components == 1 else components * (width + 1) + 2  # "(a b c)\n"


# ---------------------------------------------------------------- headers and layouts


def header(
    cls: str,
    location: str,
    obj: str,
    fmt: str,
    file_set: str = DEFAULT_FILE_SET,
    blocks: int | None = None,
) -> str:
    """The banner and FoamFile dictionary every file starts with, up to its separator line.

    A binary file says its ``arch``; a collated container (``blocks``) says
    its blocks instead.
    """
    layout = file_set_layout(file_set)
    lines = ["version     2.0", f"format      {fmt}", f"class       {cls}"]
    if blocks is not None:
        lines.append(f"blocks      {blocks}")
    elif fmt == "binary":
        lines.insert(2 if layout.arch_after_format else 3, f'arch        "{ARCH}"')
    lines += [f'location    "{location}"', f"object      {obj}"]
    entries = "".join(f"    {line};\n" for line in lines)
    return layout.banner + "FoamFile\n{\n" + entries + "}\n" + SEPARATOR


@dataclass(frozen=True)
class Layout:
    """A field file in pieces: text and, between the texts, lists of values.

    The file is ``head[0] + <time> + head[1] + texts[0] + <values of
    slots[0]> + texts[1] + ... + texts[-1]``. A slot is ``(source, values)``:
    source -1 is the internalField, i >= 0 the i-th patch of
    :func:`patches`. ``tail`` is the closing text a headless collated block
    leaves out, with the header (:attr:`FileSet.headless_blocks`).
    """

    head: tuple[bytes, bytes]
    texts: tuple[bytes, ...]
    slots: tuple[tuple[int, int], ...]
    tail: int = 0


def _list_open(kind: str, count: int, fmt: str) -> str:
    return f"nonuniform List<{kind}> \n{count}\n(" + ("\n" if fmt == "ascii" else "")


@functools.lru_cache(maxsize=4096)
def field_layout(
    name: str,
    count: int,
    cells: int,
    fmt: str,
    file_set: str = DEFAULT_FILE_SET,
    rank: int = 0,
    ranks: int = 1,
) -> Layout:
    """The pieces of a field file of ``count`` internal values on a rank of ``cells`` cells."""
    layout = file_set_layout(file_set)
    cls, kind, _, _ = FIELDS[name]
    before, after = (header(cls, _TIME, name, fmt, file_set) + "\n").split(_TIME)
    texts, slots = [], []
    closing = layout.binary_list_end if fmt == "binary" else ")\n;\n"
    text = f"dimensions      {DIMENSIONS[name]};\n"
    if name == "phi" and layout.oriented_phi:
        text += "oriented        oriented;\n"
    text += "\n" * layout.blank_lines_before_values + "internalField   "

    def add_list(source: int, n: int) -> None:
        """``nonuniform`` and a list of n values (a slot); an empty list is text only."""
        nonlocal text
        if n == 0:
            text += ("nonuniform 0()" if fmt == "ascii" else "nonuniform 0") + ";\n"
            return
        texts.append(text + _list_open(kind, n, fmt))
        slots.append((source, n))
        text = closing

    add_list(-1, count)
    text += "\nboundaryField\n{\n"
    for index, (patch, patch_kind, faces) in enumerate(patches(cells, rank, ranks)):
        if patch_kind not in layout.boundary[name]:
            continue
        entries, value = layout.boundary[name][patch_kind]
        text += f"    {patch}\n    {{\n"
        text += "".join(f"        {key:<15} {val};\n" for key, val in entries)
        if value is not None:
            text += f"        {'value':<15} "
            if value == LIST or faces == 0:
                add_list(index, faces)
            else:
                text += f"uniform {value};\n"
        text += "    }\n"
    text += "}\n" + layout.footer
    texts.append(text)
    return Layout(
        (before.encode(), after.encode()),
        tuple(t.encode() for t in texts),
        tuple(slots),
        len(layout.footer) if layout.headless_blocks else 0,
    )


def _layout_bytes(layout: Layout, name: str, fmt: str, file_set: str, time: str) -> int:
    text = sum(map(len, layout.head)) + len(time) + sum(map(len, layout.texts))
    return text + sum(n for _, n in layout.slots) * value_bytes(name, fmt, file_set)


def payload_bytes(name: str, cells: int, fmt: str, file_set: str = DEFAULT_FILE_SET) -> int:
    """The formula: bytes of a field's internalField values in a format (text excluded)."""
    return values_per_field(name, cells, file_set) * value_bytes(name, fmt, file_set)


def field_file_bytes(
    name: str,
    cells: int,
    fmt: str,
    time: str,
    file_set: str = DEFAULT_FILE_SET,
    rank: int = 0,
    ranks: int = 1,
) -> int:
    """Bytes of one field file of a rank (uncollated)."""
    count = values_per_field(name, cells, file_set)
    layout = field_layout(name, count, cells, fmt, file_set, rank, ranks)
    return _layout_bytes(layout, name, fmt, file_set, time)


def cumulative_cont_err(index: int) -> str:
    """The value of ``uniform/cumulativeContErr`` (v1912): 12 characters, growing with the index.

    v1912 prints the solver's cumulative continuity error at writePrecision 6
    (``-0.000277832`` in the duct's output); the proxy computes none, so its
    number only has that width.
    """
    return f"-0.000{100_000 + index % 900_000:06d}"


@functools.lru_cache(maxsize=8)
def uniform_templates(fmt: str, file_set: str = DEFAULT_FILE_SET) -> tuple[tuple[str, bytes], ...]:
    """``(path, bytes %-template)`` of each ``uniform`` dictionary, built once; fill them
    with :func:`uniform_values`."""
    layout = file_set_layout(file_set)
    found = []
    for file in layout.uniform:
        folder, obj = posixpath.split(file.path)
        form = "ascii" if file.always_ascii else fmt
        text = header(file.cls, f"{_TIME}/{folder}", obj, form, file_set)
        text = (text + "\n" + file.entries + layout.footer).replace("%", "%%")
        text = text.replace(_TIME, "%(time)b").replace(_INDEX, "%(index)d")
        found.append((file.path, text.replace(_CONTERR, "%(conterr)b").encode()))
    return tuple(found)


def uniform_values(time: bytes, index: int) -> dict[bytes, bytes | int]:
    """What fills the templates of :func:`uniform_templates` at a write."""
    return {b"time": time, b"index": index, b"conterr": cumulative_cont_err(index).encode()}


def uniform_texts(
    time: str, index: int, fmt: str, file_set: str = DEFAULT_FILE_SET
) -> dict[str, bytes]:
    """The small dictionaries of ``<time>/uniform`` (relative path -> bytes)."""
    values = uniform_values(time.encode(), index)
    return {path: template % values for path, template in uniform_templates(fmt, file_set)}


def rank_write_bytes(
    cells: int,
    fmt: str,
    time: str,
    index: int,
    file_set: str = DEFAULT_FILE_SET,
    rank: int = 0,
    ranks: int = 1,
) -> int:
    """Bytes one rank writes at one write time when uncollated (9 files; document_001 8)."""
    fields = sum(field_file_bytes(name, cells, fmt, time, file_set, rank, ranks) for name in FIELDS)
    return fields + sum(len(text) for text in uniform_texts(time, index, fmt, file_set).values())


def write_bytes(
    cells: int, fmt: str, time: str, index: int, ranks: int, file_set: str = DEFAULT_FILE_SET
) -> int:
    """Bytes all ranks of one simulation write at one write time when uncollated."""
    return sum(
        rank_write_bytes(cells, fmt, time, index, file_set, rank, ranks) for rank in range(ranks)
    )


def approx_bytes_per_cell(fmt: str, file_set: str = DEFAULT_FILE_SET) -> int:
    """Values' bytes per cell per write (phi 3 per cell), headers and boundaries excluded.

    document_001: 80 binary, 162 ascii; v1912: 80 binary, 113 ascii.
    """
    return sum(FIELDS[name][3] * value_bytes(name, fmt, file_set) for name in FIELDS)


# ---------------------------------------------------------------- the collated container


def container_head(
    name: str, fmt: str, folder: str, ranks: int, file_set: str = DEFAULT_FILE_SET
) -> tuple[bytes, bytes]:
    """A collated field file's header in ``folder`` (``processors<N>``), split where the
    time name goes."""
    if file_set_layout(file_set).openfoam_container:
        location = os.path.join(os.path.abspath(folder), _TIME, name)
        text = header("decomposedBlockData", location, name, "binary", file_set, ranks)
    else:
        text = header("decomposedBlockData", _TIME, name, fmt, file_set)
    before, after = text.split(_TIME)
    return before.encode(), after.encode()


def block_frame(rank: int, size: int, file_set: str = DEFAULT_FILE_SET) -> tuple[bytes, bytes]:
    """The text before and after a rank's block of ``size`` bytes in a collated file."""
    label = file_set_layout(file_set).block_label.format(rank=rank)
    return f"\n\n{label}{size}\n(".encode(), b")"


def container_footer(file_set: str = DEFAULT_FILE_SET) -> bytes:
    """What ends a collated file after its last block."""
    return file_set_layout(file_set).container_footer.encode()


def headless_block(rank: int, file_set: str = DEFAULT_FILE_SET) -> bool:
    """Whether a rank's collated block leaves out its file's header and closing line."""
    return file_set_layout(file_set).headless_blocks and rank != 0
