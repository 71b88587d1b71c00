"""OpenFOAM-style output written to a tier: a write time's files with the system calls
OpenFOAM v1912 makes for them (its OFstream's buffer, Foam::mkDir, Foam::rmDir),
uncollated or collated, and purgeWrite.

Where every byte goes is :mod:`tierbench.workloads.cfd.foam`'s (the layout, no
system calls); this module turns the solver's arrays into those bytes (through
the C helper of :mod:`tierbench.native` where it builds) and writes them.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ... import native
from ...files import CREATE, write_all
from .foam import (
    DEFAULT_FILE_SET,
    FIELDS,
    NUMBER_WIDTH,
    Layout,
    block_frame,
    cells_of,
    check_file_set,
    container_footer,
    container_head,
    field_layout,
    headless_block,
    number_width,
    uniform_templates,
    uniform_values,
)


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


# ---------------------------------------------------------------- values to bytes


def largest_number(width: int) -> float:
    """The largest magnitude a number ``width`` characters wide shows: 9.9..e99."""
    return float("9." + "9" * (width - 7) + "e99")


def format_numbers(values: np.ndarray, components: int, width: int = NUMBER_WIDTH) -> bytes:
    """Numbers as ascii lines, one conversion per number, as a solver's ascii stream makes them.

    OpenFOAM's ascii Ostream hands every number to libstdc++'s ``ostream <<
    double``, which converts it with snprintf: that conversion is most of what
    an ascii write costs the solver, so the proxy pays it too, number by
    number (in C where :mod:`tierbench.native` builds, else Python's own
    conversion, which gives the same bytes). ``%+.<width - 7>e``: every number
    is ``width`` characters (``+1.2345e-01`` at 11), magnitudes below 1e-99
    written as zero and above 9.9..e99 clipped, so file sizes follow the
    formula. A row of one number ends in a newline; vectors are ``(a b c)``.
    """
    if not 8 <= width <= 40:
        raise ValueError(f"an ascii number here is 8 to 40 characters wide, not {width}")
    array = np.ascontiguousarray(values, dtype=np.float64)
    helper = native.foamio()
    if helper is not None:
        return helper.format_ascii(memoryview(array.ravel()).cast("B"), components, width)
    largest = largest_number(width)
    v = array.ravel()
    v = np.where(np.abs(v) >= 1e-99, np.clip(v, -largest, largest), 0.0)
    spec = f"+.{width - 7}e"
    numbers = [format(x, spec) for x in v.tolist()]
    if components == 1:
        return ("\n".join(numbers) + "\n").encode() if numbers else b""
    rows = (
        "(" + " ".join(numbers[i : i + components]) + ")\n"
        for i in range(0, len(numbers), components)
    )
    return "".join(rows).encode()


def encode_values(
    values: np.ndarray, components: int, fmt: str, width: int = NUMBER_WIDTH
) -> bytes | memoryview:
    """Values on disk: raw doubles (no copy when contiguous) or ascii lines of ``width`` numbers."""
    if fmt == "binary":
        array = np.ascontiguousarray(values, dtype="<f8")
        return memoryview(array).cast("B")
    return format_numbers(values, components, width)


def patch_values(data: np.ndarray, faces: int, components: int) -> np.ndarray:
    """A patch's values from its field's: the first ``faces`` values (a view), repeated when
    the patch has more faces than the field values (a copy, made once)."""
    flat = np.asarray(data).reshape(-1, components) if components > 1 else np.ravel(data)
    if faces <= flat.shape[0]:
        return flat[:faces]
    if flat.shape[0] == 0:
        return np.zeros((faces, components) if components > 1 else faces)
    return np.resize(flat, (faces, components) if components > 1 else faces)


# ---------------------------------------------------------------- OpenFOAM's calls

#: libstdc++'s std::filebuf, which OpenFOAM's OFstream writes through: BUFSIZ (8192)
#: bytes of buffer, of which 8191 hold data, and a write of at least 1024 bytes (or of
#: more than the room left) that goes to the kernel at once, with what the buffer holds
STREAM_BUFFER, STREAM_DIRECT = 8191, 1024
#: the entries of ``uniform/time`` v1912 hands the kernel one by one (its traced calls)
TIME_ENTRIES = (b"name", b"index", b"deltaT", b"deltaT0")
#: pieces the buffer holds before they are joined into one (a call of the C helper takes
#: at most 64 buffers; many ranks' small collated blocks would hold more)
HELD_PIECES = 32


def _bounded(pending: list) -> list:
    """The buffer's pieces, joined into one once there are HELD_PIECES of them."""
    return [b"".join(pending)] if len(pending) >= HELD_PIECES else pending


def stream_calls(pieces) -> list[tuple]:
    """The system calls an OFstream makes for ``pieces``: one tuple of buffers per writev.

    ``pieces`` are ``(bytes-like, block)`` in the order the solver streams them.
    A block (a binary list: one ``write`` of its whole memory) of at least
    STREAM_DIRECT bytes leaves with the buffer in one writev, a smaller one is
    buffered; text (headers, ascii numbers) fills the buffer and leaves 8191 bytes
    at a time, and what is left goes at close. Traced from v1912's simpleFoam:
    in binary a field is a writev of its header and internalField values, one per
    boundary list of 1024 bytes or more, then the rest; in ascii 8 KiB at a time.
    """
    calls, pending, held = [], [], 0
    for data, block in pieces:
        size = len(data)
        if not size:
            continue
        if block:
            if size >= min(STREAM_DIRECT, STREAM_BUFFER - held):
                calls.append((*pending, data))
                pending, held = [], 0
            else:
                pending = _bounded([*pending, data])
                held += size
            continue
        view, start = memoryview(data).cast("B"), 0
        while size - start >= STREAM_BUFFER - held:
            room = STREAM_BUFFER - held
            calls.append((*pending, view[start : start + room]))
            pending, held, start = [], 0, start + room
        if start < size:
            pending = _bounded([*pending, view[start:] if start else data])
            held += size - start
    if pending:
        calls.append(tuple(pending))
    return calls


def time_dict_calls(text: bytes) -> list[tuple]:
    """``uniform/time`` as v1912 writes it: up to its ``value`` entry, then each entry in
    a call of its own (the line break before it included), then the closing line."""
    cuts = [text.find(b"\n" + name + b" ") for name in TIME_ENTRIES]
    cuts = sorted(cut for cut in cuts if cut > 0)
    if cuts:
        footer = text.rfind(b"\n\n//")
        if footer > cuts[-1]:
            cuts.append(footer)
    bounds = [0, *cuts, len(text)]
    return [(text[a:b],) for a, b in zip(bounds, bounds[1:], strict=False) if b > a]


def foam_mkdir(path: bytes) -> int:
    """Foam::mkDir: mkdir, an existing folder is success, a missing parent is made first.
    Returns the folders made."""
    try:
        os.mkdir(path)
        return 1
    except FileExistsError:
        return 0
    except FileNotFoundError:
        parent = os.path.dirname(path)
        if not parent or parent == path:
            raise
    made = foam_mkdir(parent)
    try:
        os.mkdir(path)
    except FileExistsError:
        return made
    return made + 1


def write_files(files, fsync: bool, mkdirs: int = 1) -> tuple[int, int]:
    """Make each ``(path, calls)`` with OFstream's system calls; (bytes written, folders made).

    Per file, as traced from v1912: mkdir of its folder (Foam::mkDir: on a
    network file system a round trip even when the folder exists), ``mkdirs``
    times (the collated master asks twice: :class:`CollatedWriter`), a stat of
    ``<path>.gz`` and of ``<path>`` (OFstream looks for a compressed twin), open,
    one writev per call (:func:`stream_calls`), close. The C helper of
    :mod:`tierbench.native` makes the same calls without the interpreter between them.
    """
    written = made = 0
    for path, calls in files:
        folder = os.path.dirname(path)
        for _ in range(mkdirs if folder else 0):
            made += foam_mkdir(folder)
        for probe in (path + b".gz", path):
            try:
                os.stat(probe)
            except FileNotFoundError:
                pass
        fd = os.open(path, CREATE, 0o666)
        try:
            for call in calls:
                written += write_all(fd, call)
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
    return written, made


def foam_rm_dir(path: str, top: bool = True) -> WriteCount:
    """Foam::rmDir, as purgeWrite removes a time folder, call for call.

    v1912 (traced): a stat of the folder, opendir, an lstat of every entry, unlink
    of a file, the same for a folder below it, then unlink of the folder (which
    fails: it is a folder) and rmdir. On a network file system each is a round trip.
    """
    count = WriteCount()
    if top:
        os.stat(path)
    with os.scandir(path) as entries:
        names = [entry.name for entry in entries]
    for name in names:
        inner = os.path.join(path, name)
        if stat.S_ISDIR(os.lstat(inner).st_mode):
            count.add(foam_rm_dir(inner, top=False))
        else:
            os.unlink(inner)
            count.files_removed += 1
    try:
        os.unlink(path)
    except (IsADirectoryError, PermissionError):
        pass
    os.rmdir(path)
    count.dirs_removed += 1
    return count


def _static_payload(values: np.ndarray, fmt: str) -> memoryview | None:
    """The binary bytes of ``values`` as a view of their own memory, or None when they need
    converting (a copy would not follow the solver's updates: encode per write)."""
    if fmt != "binary":
        return None
    array = np.ascontiguousarray(values, dtype="<f8")
    return memoryview(array).cast("B") if array is values else None


@dataclass(frozen=True)
class _PreparedField:
    """A field's file with what is the same at every write made once."""

    components: int
    width: int
    layout: Layout
    #: the header after the time name, then the body's first text
    opening: bytes
    #: per list of values: (the values, their bytes when a view of them serves, else None)
    lists: tuple
    #: the texts after each list; a headless block's last one without the closing line
    texts: tuple[bytes, ...]
    headless_texts: tuple[bytes, ...]


class RankFields:
    """One rank's fields as its field files lay them out, prepared once for every write.

    What is the same at every write is prepared once: each field's text on
    either side of its time name and between its lists of values
    (internalField, boundary patches), and, in binary, a view of each list's
    memory (little-endian doubles, C order; a patch's values are a view of the
    first values of its field, or a copy made once when the patch has more
    faces than the field values). The solver updates its arrays in place, so
    the views show the values of the moment; ascii values (and arrays of
    another type) are encoded anew at every write. Uncollated, a field file is
    streamed in these pieces (:meth:`pieces`); collated, each rank hands the
    master its file as one block (:meth:`block`).

    The rank's cells are p's values unless given; ``rank`` and ``ranks`` place
    its block in the duct (which boundary patches it has).
    """

    def __init__(
        self,
        fields: dict[str, np.ndarray],
        fmt: str,
        file_set: str = DEFAULT_FILE_SET,
        rank: int = 0,
        ranks: int = 1,
        cells: int | None = None,
    ):
        self.fmt, self.file_set, self.rank = fmt, check_file_set(file_set), rank
        cells = int(np.size(fields["p"])) if cells is None else cells
        self.fields: dict[str, _PreparedField] = {}
        for name, (_, _, components, _) in FIELDS.items():
            if name in fields:
                self.fields[name] = self._prepare(name, fields[name], cells, ranks, components)

    def _prepare(self, name, data, cells: int, ranks: int, components: int) -> _PreparedField:
        fmt, file_set = self.fmt, self.file_set
        count = np.size(data) // components
        layout = field_layout(name, count, cells, fmt, file_set, self.rank, ranks)
        lists = []
        for source, n in layout.slots:
            values = data if source < 0 else patch_values(data, n, components)
            lists.append((values, _static_payload(values, fmt)))
        texts = layout.texts[1:]
        headless = (*texts[:-1], texts[-1][: -layout.tail]) if layout.tail else texts
        return _PreparedField(
            components,
            number_width(name, file_set),
            layout,
            layout.head[1] + layout.texts[0],
            tuple(lists),
            texts,
            headless,
        )

    def pieces(self, name: str, stamp: bytes, headless: bool = False) -> list[tuple]:
        """A field file as ``(bytes-like, block)`` in the order the solver streams it.

        Its header goes down in the pieces around the time name, unjoined; a
        binary list is a block (one write of its memory), ascii numbers are
        streamed text. ``headless``: no header and no closing line (v1912's
        collated block of a rank other than the master).
        """
        field, fmt = self.fields[name], self.fmt
        block = fmt == "binary"
        if headless:
            pieces, texts = [(field.layout.texts[0], False)], field.headless_texts
        else:
            before = field.layout.head[0]
            pieces, texts = [(before, False), (stamp, False), (field.opening, False)], field.texts
        for (data, payload), text in zip(field.lists, texts, strict=True):
            if payload is None:
                payload = encode_values(data, field.components, fmt, field.width)
            pieces += [(payload, block), (text, False)]
        return pieces

    def block(self, name: str, stamp: bytes) -> bytes:
        """This rank's block of a collated field file: its whole file, which v1912 leaves
        headless on every rank but the master."""
        headless = headless_block(self.rank, self.file_set)
        return b"".join(part for part, _ in self.pieces(name, stamp, headless))


def _uniform_of_write(templates, inside: bytes, stamp: bytes, index: int) -> list:
    """``(path, text)`` of the ``uniform`` dictionaries of a write, ``uniform/time`` first."""
    values = uniform_values(stamp, index)
    return [(inside + path, template % values) for path, template in templates]


class UncollatedWriter:
    """One rank's writes of the same fields, write time after write time (uncollated).

    The fields are prepared once (:class:`RankFields`). Per write: the three
    folders and the 9 files (document_001: 8) with the system calls v1912's
    OFstream makes (:func:`write_files`, :func:`stream_calls`), by the C helper of
    :mod:`tierbench.native` in one call where it builds, else from Python. With
    1-cell fields on tmpfs the Python between the calls cost about as much as the
    calls.
    """

    def __init__(
        self,
        processor_dir: str | Path,
        fields: dict[str, np.ndarray],
        fmt: str,
        fsync: bool,
        file_set: str = DEFAULT_FILE_SET,
        rank: int = 0,
        ranks: int = 1,
    ):
        # paths as bytes: os calls take them as they are, a str is encoded at every call
        self.root, self.fsync = os.fsencode(processor_dir), fsync
        self.prepared = RankFields(fields, fmt, file_set, rank, ranks)
        self.uniform = [
            (os.fsencode(path), template) for path, template in uniform_templates(fmt, file_set)
        ]
        #: the C helper that makes the folders and files in one call, or None (Python)
        self.native = native.foamio()

    def write(self, time: str, index: int) -> WriteCount:
        """``<processor_dir>/<time>/`` with its 9 files (document_001: 8), OFstream's calls."""
        stamp = time.encode()
        inside = self.root + os.sep.encode() + stamp + os.sep.encode()
        uniform = _uniform_of_write(self.uniform, inside, stamp, index)
        # uniform/time first, as v1912: its folder's mkdir finds no <time> and makes both
        (time_path, time_text), rest = uniform[0], uniform[1:]
        files = [(time_path, tuple(time_dict_calls(time_text)))]
        for name in self.prepared.fields:
            pieces = self.prepared.pieces(name, stamp)
            files.append((inside + name.encode(), tuple(stream_calls(pieces))))
        files += [(path, tuple(stream_calls([(text, False)]))) for path, text in rest]
        written, made = _write_time(self.native, files, self.fsync)
        return WriteCount(files=len(files), dirs=made, bytes=written)


def _write_time(helper, files: list, fsync: bool, mkdirs: int = 1) -> tuple[int, int]:
    """A write time's files by the C helper when it is there, else from Python."""
    if helper is not None:
        return helper.write_time(files, fsync, mkdirs)
    return write_files(files, fsync, mkdirs)


def write_uncollated(
    processor_dir: Path,
    time: str,
    index: int,
    fields: dict[str, np.ndarray],
    fmt: str,
    fsync: bool = False,
    file_set: str = DEFAULT_FILE_SET,
    rank: int = 0,
    ranks: int = 1,
) -> WriteCount:
    """One rank's write: ``processor<rank>/<time>/`` with its 9 files (document_001: 8)."""
    writer = UncollatedWriter(processor_dir, fields, fmt, fsync, file_set, rank, ranks)
    return writer.write(time, index)


class CollatedWriter:
    """The master's writes of ``processors<N>/<time>/``, write time after write time.

    Traced from v1912's simpleFoam with fileHandler collated and no write
    thread (maxThreadFileBufferSize 0, the default of Debian's etc/controlDict):
    the master alone touches the file system, and the other ranks only send it
    their blocks. Per file it calls Foam::mkDir on the file's folder twice (the
    file handler's own, then the stream's), probes ``.gz`` and the plain name,
    opens, writes through an OFstream and closes (:func:`write_files`). A field's
    container is streamed as its header and ``// Processor0`` line, then each
    rank's block, a ``List<char>`` written as one block (so a block of 1024
    bytes or more leaves with what the buffer holds: a writev per rank), and the
    closing ``)`` at close. The ``uniform`` files are ordinary files the master
    hands the kernel whole, one write each. The container's header and each
    block's frame are the file set's (:func:`tierbench.workloads.cfd.foam.container_head`).
    """

    #: Foam::mkDir calls per file: the file handler's, then the stream's
    MKDIRS_PER_FILE = 2

    def __init__(
        self,
        processors_dir: str | Path,
        fmt: str,
        fsync: bool,
        file_set: str = DEFAULT_FILE_SET,
        ranks: int = 1,
    ):
        self.root, self.fsync = os.fsencode(processors_dir), fsync
        self.file_set, self.ranks = check_file_set(file_set), ranks
        folder = os.fspath(processors_dir)
        self.heads = {name: container_head(name, fmt, folder, ranks, file_set) for name in FIELDS}
        self.end = container_footer(file_set)
        self.uniform = [
            (os.fsencode(path), template) for path, template in uniform_templates(fmt, file_set)
        ]
        self.native = native.foamio()

    def framed(self, rank: int, block) -> list[tuple]:
        """One rank's block in the container, as ``(bytes-like, block)`` pieces."""
        opening, closing = block_frame(rank, len(block), self.file_set)
        return [(opening, False), (block, True), (closing, False)]

    def write(self, time: str, index: int, blocks: dict[str, list]) -> WriteCount:
        """``<processors_dir>/<time>/`` from ``blocks[field][rank]`` (:meth:`RankFields.block`)."""
        stamp = time.encode()
        inside = self.root + os.sep.encode() + stamp + os.sep.encode()
        uniform = _uniform_of_write(self.uniform, inside, stamp, index)
        # uniform/time first, as v1912: its folder's mkDir finds no <time> and makes both
        files = [(path, ((text,),)) for path, text in uniform[:1]]
        for name, (before, after) in self.heads.items():
            pieces = [(before, False), (stamp, False), (after, False)]
            for rank, block in enumerate(blocks[name]):
                pieces += self.framed(rank, block)
            pieces.append((self.end, False))
            files.append((inside + name.encode(), tuple(stream_calls(pieces))))
        files += [(path, ((text,),)) for path, text in uniform[1:]]
        written, made = _write_time(self.native, files, self.fsync, self.MKDIRS_PER_FILE)
        return WriteCount(files=len(files), dirs=made, bytes=written)


def write_collated(
    processors_dir: Path,
    time: str,
    index: int,
    blocks: dict[str, list],
    fmt: str,
    fsync: bool = False,
    file_set: str = DEFAULT_FILE_SET,
) -> WriteCount:
    """The master's write: ``processors<N>/<time>/<field>`` with one block per rank.

    ``blocks[field][rank]`` is that rank's block (:func:`collated_block`):
    its uncollated file, as OpenFOAM's decomposedBlockData holds it (v1912:
    the master's whole file, the others' without header and closing line).
    """
    ranks = len(next(iter(blocks.values())))
    return CollatedWriter(processors_dir, fmt, fsync, file_set, ranks).write(time, index, blocks)


def purge(root: Path, kept: list[str], keep: int) -> WriteCount:
    """purgeWrite: remove the oldest time folders of ``kept`` until ``keep`` remain,
    with Foam::rmDir's calls (:func:`foam_rm_dir`)."""
    count = WriteCount()
    if keep <= 0:
        return count
    while len(kept) > keep:
        count.add(foam_rm_dir(os.path.join(root, kept.pop(0))))
    return count


def field_parts(
    name: str,
    data: np.ndarray,
    fmt: str,
    time: str,
    file_set: str = DEFAULT_FILE_SET,
    cells: int | None = None,
    rank: int = 0,
    ranks: int = 1,
    headless: bool = False,
) -> list:
    """The parts of one field file, written one after the other.

    ``headless``: as a collated block of a rank other than the master holds
    it in v1912 (no header, no closing line).
    """
    if cells is None:
        cells = cells_of(name, np.size(data), file_set)
    prepared = RankFields({name: data}, fmt, file_set, rank, ranks, cells)
    return [part for part, _ in prepared.pieces(name, time.encode(), headless)]


def collated_block(
    name: str,
    data: np.ndarray,
    fmt: str,
    time: str,
    file_set: str = DEFAULT_FILE_SET,
    cells: int | None = None,
    rank: int = 0,
    ranks: int = 1,
) -> bytes:
    """A rank's block of a collated field file: its file (v1912: headless unless the master)."""
    if cells is None:
        cells = cells_of(name, np.size(data), file_set)
    prepared = RankFields({name: data}, fmt, file_set, rank, ranks, cells)
    return prepared.block(name, time.encode())
