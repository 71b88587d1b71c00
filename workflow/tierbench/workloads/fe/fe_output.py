"""CalculiX's output as the FE proxy writes it: an evaluation's folder with ccx's system
calls (its stdio buffer, lseeks and fstats), and the files ccx 2.20 writes for a deck,
byte for byte in size and shape (.inp .log .dat .frd .sta .cvg .12d spooles.out).
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import time
from dataclasses import dataclass

from ...files import APPEND, CREATE, write_all
from . import fe_deck, fe_model, frd

JOB = "job"

# CALCULIX OUTPUT, measured with CalculiX 2.20 (Debian 12 calculix-ccx,
# OMP_NUM_THREADS=1) under `strace -f`, on decks of the bar: a row of E C3D8
# elements (E = 1, 2, 5, 10, 20; 4 (E + 1) nodes), *PLASTIC, *STEP, NLGEOM,
# *STATIC, *NODE FILE U, RF; *EL FILE S, E, PEEQ; *NODE PRINT of the total
# reaction force of the loaded face and of one loaded node's displacement, as
# in ``fe_deck``'s deck, which the proxy writes (tests/test_fe_proxy.py runs
# ccx on it and compares what both leave). ccx first removes what an
# earlier run left (open O_RDWR|O_CREAT, unlink, close: .dat .frd .fcv .sta
# .cvg .cel), keeps .dat, .sta and .cvg open for the whole run, reads the deck
# (open, 2 reads, close), creates an empty .12d and a scratch .nam (created,
# unlinked, 31 bytes written, closed), then appends the .frd header. Every
# iteration reopens spooles.out for append (open, lseek, close: nothing
# written) and writes one .cvg line. Every increment writes one .sta line, the
# two *NODE PRINT tables into .dat (one write of 229 bytes) and reopens .frd in
# append mode for its results, written through a 4096-byte stdio buffer. At
# the end .dat, .sta and .cvg are closed and .frd is reopened once more for its
# last line. Before the first write through a stdio FILE, glibc stats it (fstat,
# for its buffer size): once for each file kept open and the log, at every
# reopening of .frd that writes. ccx's standard output goes to job.log in the folder (the
# ``calculix`` workload's ``solver_log: file``, as a batch script redirects
# it): created before ccx starts, its banner, then one write each time ccx
# starts the equation solver (once per iteration: the increment's heading with
# the first, the last iteration's residuals with the next), three at the end.
# The folder then holds .inp .log .dat .frd .sta .cvg .12d and spooles.out.
# The .frd's layout and formats are ccx's to the byte (``frd``); .dat and the log
# do not grow with E. With *NODE FILE and *EL FILE FREQUENCY=n (frd_every n),
# .frd is reopened only at the increments with output, the mesh coming with
# the first; without them (frd_every 0) it is still reopened every increment,
# the mesh written with the first and nothing after (measured with E = 2, 10
# increments).
STDIO_BUFFER = 4096
NAM_BYTES = 31
STA_HEAD = (
    b"SUMMARY OF JOB INFORMATION\n"
    b"  STEP      INC     ATT  ITRS     TOT TIME     STEP TIME      INC TIME\n"
)
# ccx writes its .sta, .cvg and .dat lines from Fortran (writesta.f, writecvg.f, its
# *NODE PRINT), a record a line, flushed every line (.sta, .cvg) or increment (.dat): times
# and residuals with Ew.d (0.ddddE+xx, see fortran_e), the .dat's values with a scale
# factor of 1 (1PE13.6, which is C's %.6E). Step 1's constant fields are formatted once.
#: .sta (1x,i5,1x,i10,2(1x,i5),3(1x,e13.6)), the times as fortran_e's
STA_STEP1 = b"     1%11d%6d%6d%14s%14s%14s\n"
CVG_HEAD = (
    b"SUMMARY OF C0NVERGENCE INFORMATION\n"
    b"  STEP   INC  ATT   ITER     CONT.   RESID.        CORR.      RESID.      CORR.\n"
    b"                              EL.    FORCE         DISP       FLUX        TEMP.\n"
    b"                              (#)     (%)           (%)        (%)         (%)\n"
)
#: .cvg without contact or heat (2x,i4,2x,i4,2x,i4,2x,i4,2x,i7,4(1x,e11.4)), the force
#: residual as fortran_e's; the proxy's correction, flux and temperature are zero
CVG_STEP1 = b"     1%6d%6d%6d        0%12s"
CVG_TAIL = b"  0.0000E+00" * 3 + b"\n"
#: an increment's .dat: total force of the loaded face, displacement of the tip node, each
#: after a heading with the time (e14.7, as fortran_e's)
DAT_INCREMENT = (
    b"\n total force (fx,fy,fz) for set LOAD and time %14s\n\n"
    b"      %14.6E%14.6E%14.6E\n"
    b"\n displacements (vx,vy,vz) for set TIP and time %14s\n\n"
    b"%10d%14.6E%14.6E%14.6E\n"
)
DAT_BYTES = 229
#: job.log, ccx's standard output: the banner; the writes at the first solver call of the
#: run, of a later increment, of a further iteration; the three at the end
LOG_BANNER = 395
LOG_FIRST, LOG_INCREMENT, LOG_ITERATION = 882, 864, 474
LOG_END = (202, 1480, 113)
#: files ccx removes before it starts, in its order; those it keeps open, then
CALCULIX_CLEARED = (".dat", ".frd", ".fcv", ".sta", ".cvg", ".cel")
CALCULIX_KEPT = (".dat", ".sta", ".cvg")
#: the file calls an evaluation counts
CALLS = ("open", "read", "write", "lseek", "fstat", "fsync", "close", "unlink")
RDWR_CREATE = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
READ = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)


# ---------------------------------------------------------------- the evaluation folder


class Disk:
    """The evaluation's folder: its file-system calls counted, timed, kept inside ``root``.

    Paths are plain strings; every one passes :meth:`target` before it is
    opened. The output writers make their calls with ``os`` directly (one
    Python call per system call) and add what they did with :meth:`account`.
    """

    def __init__(self, root: str | os.PathLike, fsync: str):
        self.root = os.fspath(root)
        self.fsync = fsync
        self.seconds = 0.0
        self.bytes = 0
        self.calls = dict.fromkeys(CALLS, 0)
        #: every file name the evaluation created, and whether it is still there
        self.names: dict[str, bool] = {}

    @property
    def files(self) -> int:
        """Files the evaluation leaves in its folder (until the folder is deleted)."""
        return sum(self.names.values())

    def path(self, name: str) -> str:
        return self.root + os.sep + name

    def target(self, path: str) -> str:
        """Where ``path`` is opened: the path itself, once checked to be in the folder."""
        path = os.fspath(path)
        if path.rpartition(os.sep)[0] != self.root:
            raise RuntimeError(f"refusing to write {path}: outside the evaluation folder")
        return path

    def created(self, *paths: str) -> None:
        for path in paths:
            self.names[os.path.basename(path)] = True

    def account(self, seconds: float, written: int = 0, **calls: int) -> None:
        self.seconds += seconds
        self.bytes += written
        for name, count in calls.items():
            self.calls[name] += count

    def mkdir(self) -> None:
        start = time.perf_counter()
        os.mkdir(self.root)
        self.seconds += time.perf_counter() - start

    def create(self, path: str, parts) -> int:
        """A whole file in one go: created or emptied, written, fsync'd unless ``none``, closed."""
        target, sync = self.target(path), self.fsync != "none"
        start = time.perf_counter()
        fd = os.open(target, CREATE, 0o666)
        try:
            written = write_all(fd, parts)
            if sync:
                os.fsync(fd)
        except OSError as error:
            error.filename = target  # a full tier names the file
            raise
        finally:
            os.close(fd)
        self.created(path)
        self.account(time.perf_counter() - start, written, open=1, write=1, fsync=sync, close=1)
        return written

    def unlink(self, path: str) -> None:
        """Remove a file of the folder; one that :meth:`target` sends elsewhere is left alone."""
        target = self.target(path)
        if target.rpartition(os.sep)[0] == self.root:
            os.unlink(target)
            self.calls["unlink"] += 1
        self.names[os.path.basename(path)] = False

    def read(self, path: str) -> bytes:
        """A whole file, as a solver reads its deck: open, read to the end, close."""
        target = self.target(path)
        start = time.perf_counter()
        fd = os.open(target, READ)
        try:
            parts = [os.read(fd, 1 << 20)]
            while parts[-1]:
                parts.append(os.read(fd, 1 << 20))
        finally:
            os.close(fd)
        self.account(time.perf_counter() - start, open=1, read=len(parts), close=1)
        return b"".join(parts)

    def remove(self) -> None:
        """Delete the evaluation folder."""
        start = time.perf_counter()
        shutil.rmtree(self.root, ignore_errors=True)
        self.seconds += time.perf_counter() - start


def _write(fd: int, data) -> None:
    """One write call; a short one (a nearly full tier) is finished by more."""
    done = os.write(fd, data)
    if done != len(data):
        write_all(fd, (data,), done)


#: a C exponent (%E's) -> Fortran's exponent field for the same number, one higher as the
#: mantissa moves a place: E+xx, or +xxx beyond 99 (doubles: 1e-324 to 1e308)
FORTRAN_EXPONENT = {
    b"%+03d" % p: b"E%+03d" % (p + 1) if -99 <= p + 1 <= 99 else b"%+04d" % (p + 1)
    for p in range(-330, 310)
}


def fortran_e(value: float, digits: int) -> bytes:
    """``value`` as Fortran's E edit descriptor writes it with ``digits`` digits and no
    scale factor, 0.ddddE+xx (ccx's .sta, .cvg and .dat times).

    Python's own correctly rounded digits, moved one place: what gfortran prints, as glibc
    rounds the same way (tests/test_fe_proxy.py compares the two).
    """
    mantissa, _, power = (b"%.*E" % (digits - 1, value)).partition(b"E")
    if value and power:  # neither zero nor infinite nor NaN
        if value < 0:
            return b"-0." + mantissa[1:2] + mantissa[3:] + FORTRAN_EXPONENT[power]
        return b"0." + mantissa[:1] + mantissa[2:] + FORTRAN_EXPONENT[power]
    if not power:
        return b"NaN" if math.isnan(value) else b"-Infinity" if value < 0 else b"Infinity"
    return b"-" * (math.copysign(1.0, value) < 0) + b"0." + b"0" * digits + b"E+00"


def _text_block(size: int) -> bytes:
    """``size`` bytes of text lines: what ccx prints to its standard output, by its size."""
    line = b" -1         1 0.00000E+00 0.00000E+00 0.00000E+00\n"
    if size <= 0:
        return b""
    return (line * (size // len(line) + 1))[: size - 1] + b"\n"


# ---------------------------------------------------------------- calculix output


@dataclass(frozen=True)
class CalculixLayout:
    """What ccx's files hold for one mesh, made once per worker: the .frd's writer,
    the standard output's writes by their sizes."""

    frd_writer: frd.Writer
    tip: int  # the node whose displacement .dat prints
    nam: bytes
    log_banner: bytes
    log_first: bytes  # the run's first solver call
    log_increment: bytes  # an increment's first solver call
    log_iteration: bytes  # a further iteration's
    log_end: tuple

    @classmethod
    def of(cls, bar: fe_model.Bar) -> CalculixLayout:
        return cls(
            frd_writer=frd.Writer(frd.Mesh(bar), material=fe_deck.MATERIAL),
            tip=fe_deck.Model.of(bar).tip,  # the node whose displacement the deck prints
            nam=_text_block(NAM_BYTES),
            log_banner=_text_block(LOG_BANNER),
            log_first=_text_block(LOG_FIRST),
            log_increment=_text_block(LOG_INCREMENT),
            log_iteration=_text_block(LOG_ITERATION),
            log_end=tuple(_text_block(size) for size in LOG_END),
        )


class CalculixOutput:
    """The files ccx 2.20 writes for the bar, call for call (see CALCULIX OUTPUT).

    An increment's calls are counted in the writer's own tallies, added to
    the Disk once, at :meth:`finish` (or :meth:`close` after an error): the
    Python around the calls is kept to the least, as the calls themselves are
    the application's and the rest is the proxy's own cost (docs/design.md,
    "Why the FE proxy's output stays Python").
    """

    def __init__(self, disk: Disk, layout: CalculixLayout, frd_every: int = 1):
        self.disk, self.layout, self.every = disk, layout, frd_every
        self.sync = disk.fsync == "increment"
        self.fds: tuple[int, ...] = ()
        self.log = -1  # job.log, ccx's standard output
        self.first = True
        self.mesh_written = False
        self.outputs = 0  # .frd output increments so far (ccx's kode)
        # per increment: spooles.out and .frd reopens, fstats, writes, bytes, fsyncs
        self.reopened = self.stats = self.writes = self.written = self.synced = 0

    def start(self, deck: str) -> None:
        """ccx's start: its log created, old files cleared, the kept ones opened, ``deck`` read
        (its heading goes into the .frd)."""
        disk, layout = self.disk, self.layout
        name = {s: disk.path(JOB + s) for s in (*CALCULIX_CLEARED, ".12d", ".nam", ".log")}
        path = {s: disk.target(name[s]) for s in name}
        self.frd = path[".frd"]
        self.spooles = disk.target(disk.path("spooles.out"))
        start = time.perf_counter()
        self.log = os.open(path[".log"], CREATE, 0o666)  # as the workload opens ccx's stdout
        disk.created(name[".log"])
        fds = []
        try:
            for suffix in CALCULIX_CLEARED:
                fd = os.open(path[suffix], RDWR_CREATE, 0o666)
                disk.unlink(name[suffix])
                os.close(fd)
                if suffix in CALCULIX_KEPT:
                    fds.append(os.open(path[suffix], RDWR_CREATE, 0o666))
        finally:
            self.fds = tuple(fds)
        os.fstat(self.log)  # stdio's, before its first write
        _write(self.log, layout.log_banner)
        disk.account(time.perf_counter() - start, LOG_BANNER, open=10, fstat=1, write=1, close=6)
        disk.created(*(name[s] for s in CALCULIX_KEPT))
        text = disk.read(deck)
        start = time.perf_counter()
        os.close(os.open(path[".12d"], RDWR_CREATE, 0o666))
        fd = os.open(path[".nam"], RDWR_CREATE, 0o666)
        try:
            disk.unlink(name[".nam"])
            os.fstat(fd)
            _write(fd, self.layout.nam)
        finally:
            os.close(fd)
        self._append_frd(layout.frd_writer.head(text.split(b"\n", 2)[1].strip()), sync=False)
        disk.account(time.perf_counter() - start, NAM_BYTES, open=2, fstat=1, write=1, close=2)
        disk.created(name[".12d"], name[".frd"], disk.path("spooles.out"))

    def _append_frd(self, text: bytes, sync: bool) -> None:
        """Reopen .frd for append (fopen "a": open, lseek), write ``text`` as a 4096-byte
        stdio buffer does, close; tallied, not timed."""
        fd = os.open(self.frd, APPEND, 0o666)
        try:
            os.lseek(fd, 0, os.SEEK_END)
            if text:
                os.fstat(fd)  # stdio's, before its first write
                view = memoryview(text)
                for at in range(0, len(text), STDIO_BUFFER):
                    _write(fd, view[at : at + STDIO_BUFFER])
                    self.writes += 1
                self.stats += 1
                self.written += len(text)
            if sync:
                os.fsync(fd)
                self.synced += 1
        except OSError as error:
            error.filename = self.frd
            raise
        finally:
            os.close(fd)
        self.reopened += 1

    def __call__(self, inc: fe_model.Increment) -> None:
        """One converged increment: its iterations' .cvg lines and log writes, .sta, .dat, .frd.

        The text is made before the calls, which are timed; the loop around them is kept
        lean, as what Python adds to a call is the proxy's cost, not the application's.
        """
        number, attempts, now, layout = inc.number, inc.attempts, inc.time, self.layout
        cvg = [
            CVG_STEP1 % (number, attempts, k, fortran_e(100.0 * r, 4)) + CVG_TAIL
            for k, r in enumerate(inc.residuals or (0.0,), 1)
        ]
        total = fortran_e(now, 6)
        sta = STA_STEP1 % (
            number,
            attempts,
            len(cvg),
            total,
            total,
            fortran_e(inc.time_increment, 6),
        )
        when = fortran_e(now, 7)
        force, tip = (when, inc.force, 0.0, 0.0), (when, layout.tip, inc.tip_displacement, 0.0, 0.0)
        dat = DAT_INCREMENT % (*force, *tip)
        # ccx's stdout, flushed at each solver call: the increment's heading with the first
        first, log = self.first, layout.log_increment
        if first:
            cvg[0], sta, log = CVG_HEAD + cvg[0], STA_HEAD + sta, layout.log_first
            self.first = False
        every = self.every  # .frd: reopened at the increments with output (see CALCULIX OUTPUT)
        if every and number % every:
            frd_text = None
        else:  # the mesh with the first reopening, then the results when requested
            frd_text = b"" if self.mesh_written else layout.frd_writer.mesh_block()
            self.mesh_written = True
            if every:
                self.outputs += 1
                frd_text += layout.frd_writer.results(self.outputs, inc)
        (dat_fd, sta_fd, cvg_fd), log_fd, spooles = self.fds, self.log, self.spooles
        write, open_, lseek, close, end = os.write, os.open, os.lseek, os.close, os.SEEK_END
        iteration = layout.log_iteration
        start = time.perf_counter()
        if first:  # the kept files' first writes through their stdio FILEs
            os.fstat(cvg_fd)
            os.fstat(sta_fd)
            os.fstat(dat_fd)
        text = log
        for line in cvg:
            fd = open_(spooles, APPEND, 0o666)  # ccx's fopen "a" of spooles.out, nothing written
            lseek(fd, 0, end)
            close(fd)
            if (done := write(log_fd, text)) != len(text):
                write_all(log_fd, (text,), done)
            if (done := write(cvg_fd, line)) != len(line):
                write_all(cvg_fd, (line,), done)
            text = iteration
        if (done := write(sta_fd, sta)) != len(sta):
            write_all(sta_fd, (sta,), done)
        if (done := write(dat_fd, dat)) != len(dat):
            write_all(dat_fd, (dat,), done)
        if self.sync:
            for fd in self.fds:
                os.fsync(fd)
        if frd_text is not None:
            self._append_frd(frd_text, self.sync)
        self.disk.seconds += time.perf_counter() - start
        n = len(cvg)
        self.stats += 3 * first
        self.reopened += n
        self.writes += 2 * n + 2
        self.written += (
            sum(map(len, cvg)) + len(log) + (n - 1) * len(iteration) + len(sta) + len(dat)
        )
        self.synced += 3 * self.sync

    def _tally(self) -> None:
        """The increments' calls and bytes, added to the Disk's counts (once)."""
        r = self.reopened
        self.disk.account(
            0.0, self.written, open=r, lseek=r, close=r, fstat=self.stats, write=self.writes,
            fsync=self.synced,
        )  # fmt: skip
        self.reopened = self.stats = self.writes = self.written = self.synced = 0

    def finish(self) -> None:
        """ccx's end: .dat, .sta, .cvg closed (fsync'd with ``end``), the .frd's last line, the
        log's last writes (by their sizes: ccx's words are not modelled)."""
        end = self.disk.fsync == "end"
        last, summary, total_time = self.layout.log_end
        start = time.perf_counter()
        _write(self.log, last)
        fds, self.fds = self.fds, ()
        for fd in fds:
            if end:
                os.fsync(fd)
            os.close(fd)
        self._append_frd(frd.END, sync=self.disk.fsync != "none")
        _write(self.log, summary)
        _write(self.log, total_time)
        log, self.log = self.log, -1
        os.close(log)
        self.disk.account(
            time.perf_counter() - start,
            sum(LOG_END),
            write=len(LOG_END),
            fsync=len(fds) * end,
            close=len(fds) + 1,
        )
        self._tally()

    def close(self) -> None:
        """After an error: close what is still open, quietly; count what was done."""
        fds, self.fds = self.fds, ()
        if self.log >= 0:
            fds, self.log = (*fds, self.log), -1
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._tally()
