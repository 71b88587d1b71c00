"""The MPI program of ``cfd_proxy``: a decomposed solver that computes and writes.

Run under a launcher, one process per rank::

    mpiexec -n 4 python -m tierbench.workloads.cfd.cfd_writer --case DIR --config JSON \
        --out result.json

Every step each rank does a real compute phase (Jacobi sweeps of a 2-D
Laplace problem on its slab of ``cells`` cells, exchanging halo rows with its
neighbours, as a coupled solver does; the master writes its log lines among
the sweeps, and the step takes fresh memory from the kernel and gives it back,
as the application's does: :class:`StepExtras`), then, every ``write_interval`` steps,
the write phase of :mod:`tierbench.workloads.cfd.foam` (uncollated or collated), then a
barrier. Steps are timed on every rank; a step's time is the maximum over
ranks (the barrier makes them nearly equal). Steps with and without a write
are reported apart, and the write phase is timed on its own.

What a write puts on disk is ``file_set``'s (:mod:`tierbench.workloads.cfd.foam`): ``v1912``
(the default) the 9 files per rank per write of OpenFOAM v1912, their fields'
boundary patches those of the rank's block of the duct (rank 0 has the inlet,
the last rank the outlet, every rank a processor patch per neighbour), or
``document_001`` the 8 files document 001 lists. The Jacobi sweeps run on a
2-D slab of the rank's cells; the files describe the 3-D block the openfoam
workload meshes for the same cells (:func:`tierbench.workloads.cfd.foam.block_shape`).

The program counts the files and folders it creates and checks them against
the layout (uncollated: ranks x writes x 9 files, or 8 in document_001's set,
and x 3 folders; collated: writes x 9 (8) files and x 3 folders, the master's)
and against what is on disk at the end; a mismatch fails the run.

How much a step computes is a time, ``compute_target`` (s): the
application's at this shape. With ``sweeps`` unset the ranks first find the
sweeps per step that take that long here (:func:`calibrate`: each amount timed
on all ranks at once, halo exchanges included, the slowest rank's time
counting); a job whose members run side by side gives them ``sweeps`` found by
a launch of its own with ``--calibrate``, alone on the node, as the
application's time was measured. The result holds the target, the sweeps, the
samples they rest on and the compute time each measured step took.

``--gate DIR`` lets several launches start their measured loop together: rank
0 creates ``DIR/ready-<name>`` and waits for ``DIR/go`` before the first step.

``--run-folder DIR`` names the job's run folder on the tier. On a cluster the
ranks of one run may sit on several nodes of a node-local tier, where the run
folder exists on the job's first node only: a rank that finds none on its
node makes it, with the marker of :mod:`tierbench.rundir` (so a killed run's
folder is swept by the next job there), and removes it at the end.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import mmap
import os
import resource
import shutil
import socket
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ... import compute, native
from ...records import utc_now
from ...rundir import MARKER
from . import foam, foam_read, foam_write
from .cfd_launch import write_steps

GATE_TIMEOUT_S = 300.0
#: glibc's mallopt parameters, and the largest block a kept heap serves (glibc's own limit)
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
HEAP_SERVES_UP_TO = 32 * 1024 * 1024
#: what a proxy's log line says (padded or cut to its length)
LOG_LINE = b"cfd_writer:  Jacobi sweeps, residual not computed (a proxy's log line)"


def keep_heap() -> bool:
    """Keep freed memory in the rank's heap from write to write, as simpleFoam's stays.

    A write's blocks and receive buffers are made afresh at every write. glibc
    hands such memory back to the kernel when it is freed (it trims the heap)
    and the next write faults it in again. Traced (strace -f, brk and mmap) at
    2 ranks x 20,000 cells collated, simpleFoam's processes made 7 brk calls
    over 20 writes, the proxy's 164, and the proxy's write cost 1.5x
    simpleFoam's; with the heap kept, 1.0x. Whether it took (glibc only) goes
    into the result.
    """
    try:
        libc = ctypes.CDLL(None)
        kept = libc.mallopt(M_TRIM_THRESHOLD, 2**31 - 1)
        return bool(kept and libc.mallopt(M_MMAP_THRESHOLD, HEAP_SERVES_UP_TO))
    except (OSError, AttributeError):  # not glibc: its allocator's own ways
        return False


def grid_shape(cells: int) -> tuple[int, int]:
    """A slab of (rows, columns) with rows x columns >= cells, close to square."""
    columns = max(1, math.isqrt(cells))
    rows = -(-cells // columns)
    return rows, columns


@dataclass(frozen=True)
class StepExtras:
    """What an application's step does besides its arithmetic, and the proxy's does too.

    Measured of simpleFoam (v1912, the openfoam workload's duct, 1 rank, no
    writes; ``strace -f -e write`` and ``/usr/bin/time``'s minor faults at two
    run lengths): its master writes its log in 9 write calls per step, 797
    bytes, each flushed line passing through the launcher's output forwarding
    (``srun``, ``slurmstepd``, ``mpiexec``), which runs on the node's cores;
    and it takes about 300 B per cell of fresh memory from the kernel every
    step and gives it back (0.0736 minor faults per cell and step at 10,000
    cells, 0.0743 at 40,000), 12 % of its step in the kernel. On the cluster
    about half of simpleFoam's slowdown beside a second member was its own CPU
    time growing and half waiting for a core while the launcher's daemons ran;
    a proxy that only swept did neither, and its members slowed each other
    less. The calibration times a step with these in it, so the sweeps make up
    the rest of the application's time.
    """

    log_writes: int = 0
    log_bytes: int = 0
    fresh_bytes: int = 0

    def lines(self) -> list[bytes]:
        """The step's log: ``log_writes`` lines of ``log_bytes`` in all."""
        if not self.log_writes:
            return []
        size, extra = divmod(max(self.log_bytes, self.log_writes), self.log_writes)
        lengths = [size + (i < extra) for i in range(self.log_writes)]
        return [LOG_LINE[: n - 1].ljust(n - 1) + b"\n" for n in lengths]

    def churn(self) -> None:
        """Take ``fresh_bytes`` from the kernel, touch every page, and give them back."""
        if self.fresh_bytes <= 0:
            return
        block = mmap.mmap(-1, self.fresh_bytes)
        pages = np.frombuffer(block, dtype=np.uint8)
        pages[:: mmap.PAGESIZE] = 1
        del pages
        block.close()

    @classmethod
    def of(cls, config: dict) -> StepExtras:
        return cls(
            int(config.get("log_writes", 0)),
            int(config.get("log_bytes", 0)),
            int(config.get("fresh_bytes", 0)),
        )


class Solver:
    """Jacobi sweeps of a Laplace problem on this rank's slab, halo rows exchanged, and
    what else an application's step does besides its arithmetic (:class:`StepExtras`)."""

    def __init__(self, comm, cells: int, sweeps: int = 0, extras: StepExtras | None = None):
        self.comm = comm
        self.cells = cells
        self.sweeps = sweeps
        rows, columns = grid_shape(cells)
        self.u = np.zeros((rows + 2, columns + 2))
        self.v = np.zeros_like(self.u)
        self.tmp = np.empty((rows, columns))
        rank, size = comm.Get_rank(), comm.Get_size()
        self.up = rank + 1 if rank + 1 < size else None
        self.down = rank - 1 if rank > 0 else None
        if self.up is None:  # the lid of the cavity: the top boundary is hot
            self.u[-1, :] = self.v[-1, :] = 1.0
        self.pressure = np.zeros(rows * columns)
        self.extras = extras or StepExtras()
        # the application's log is its master's (OpenFOAM's Info)
        self.log_lines = self.extras.lines() if rank == 0 else []

    def exchange(self) -> None:
        from mpi4py import MPI

        u = self.u
        up = MPI.PROC_NULL if self.up is None else self.up
        down = MPI.PROC_NULL if self.down is None else self.down
        # a receive from PROC_NULL leaves the row alone: the slab's ends keep their boundary
        self.comm.Sendrecv(u[-2], dest=up, recvbuf=u[0], source=down)
        self.comm.Sendrecv(u[1], dest=down, recvbuf=u[-1], source=up)

    def sweep(self) -> None:
        self.exchange()
        u, v, tmp = self.u, self.v, self.tmp
        np.add(u[:-2, 1:-1], u[2:, 1:-1], out=tmp)
        tmp += u[1:-1, :-2]
        tmp += u[1:-1, 2:]
        np.multiply(tmp, 0.25, out=v[1:-1, 1:-1])
        self.u, self.v = v, u

    def step(self, sweeps: int | None = None) -> None:
        """One step's compute: ``sweeps`` sweeps (the solver's own number by default), the
        log lines spread among them, and the step's fresh memory."""
        sweeps = self.sweeps if sweeps is None else sweeps
        lines = self.log_lines
        due = spread(len(lines), sweeps)
        written = 0
        for i in range(sweeps):
            while written < len(lines) and due[written] == i:
                os.write(1, lines[written])
                written += 1
            self.sweep()
        for line in lines[written:]:
            os.write(1, line)
        self.extras.churn()
        # the solver's pressure field in memory, ready to be written
        np.copyto(self.pressure.reshape(self.tmp.shape), self.u[1:-1, 1:-1])

    def fields(self, static: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {**static, "p": self.pressure[: self.cells]}


def spread(lines: int, sweeps: int) -> list[int]:
    """Before which sweep each of ``lines`` log lines goes: evenly over the step, as a
    solver logs each equation it solves (all at the start of a step without sweeps)."""
    return [line * sweeps // lines for line in range(lines)]


def static_fields(
    cells: int, rank: int, file_set: str = foam.DEFAULT_FILE_SET
) -> dict[str, np.ndarray]:
    """The fields other than p, seeded by rank (so each rank's data is its own).

    phi has a value per internal face of the rank's block (v1912) or 3 per
    cell (document_001).
    """
    rng = np.random.default_rng(1000 + rank)
    return {
        "U": rng.standard_normal((cells, 3)),
        "k": rng.random(cells) + 0.01,
        "omega": rng.random(cells) * 100 + 1,
        "nut": rng.random(cells) * 1e-3,
        "phi": rng.standard_normal(foam.values_per_field("phi", cells, file_set)) * 1e-4,
    }


def file_set_of(config: dict) -> str:
    return foam.check_file_set(config.get("file_set", foam.DEFAULT_FILE_SET))


def expected_counts(config: dict, ranks: int) -> tuple[int, int, int]:
    """(writes, files created, folders created) the layout prescribes."""
    writes = write_steps(config["steps"], config["write_interval"])
    writers = ranks if config["file_handler"] == "uncollated" else 1
    file_set = file_set_of(config)
    return (
        len(writes),
        writers * len(writes) * foam.files_per_write(file_set),
        writers * len(writes) * foam.dirs_per_write(file_set),
    )


def timed_step(solver: Solver, sweeps: int) -> float:
    """Seconds one step of ``sweeps`` sweeps takes, started together, on the slowest rank
    (every rank gets the same number, so all make the same choices from it)."""
    from mpi4py import MPI

    solver.comm.Barrier()
    start = time.perf_counter()
    solver.step(sweeps)
    return solver.comm.allreduce(time.perf_counter() - start, op=MPI.MAX)


def calibrate(solver: Solver, target: float) -> dict:
    """The sweeps per step whose compute takes ``target`` s here, and what they rest on."""
    sweeps, samples = compute.calibrate(lambda n: timed_step(solver, n), target)
    return {"target": target, "sweeps": sweeps, "samples": [list(s) for s in samples]}


def sweeps_of(solver: Solver, config: dict) -> tuple[int, dict | None]:
    """The sweeps per step: given (``sweeps``), or found for ``compute_target``."""
    if config.get("sweeps") is not None:
        return int(config["sweeps"]), None
    if not config["compute_target"]:
        return 0, None
    found = calibrate(solver, float(config["compute_target"]))
    return found["sweeps"], found


def wait_for_gate(gate: Path, name: str) -> None:
    (gate / f"ready-{name}").touch()
    deadline = time.monotonic() + GATE_TIMEOUT_S
    while not (gate / "go").exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no go signal in {gate} after {GATE_TIMEOUT_S:.0f} s")
        time.sleep(0.002)


def own_baseline(comm, solver, steps: int) -> float | None:
    """Mean time of ``steps`` timed steps without writes, after the start signal and before
    the first write: this run's own speed, which a ratio of two runs divides by so that the
    machine's drift between jobs cancels; the slowest rank's steps, as the loop's. None: 0."""
    from mpi4py import MPI

    if not steps:
        return None
    times = np.zeros(steps)
    for i in range(steps):
        start = time.perf_counter()
        solver.step()
        comm.Barrier()
        times[i] = time.perf_counter() - start
    slowest = np.zeros(steps) if comm.Get_rank() == 0 else None
    comm.Reduce(times, slowest, op=MPI.MAX, root=0)
    return float(slowest.mean()) if slowest is not None else None


def claim_run_folder(comm, run_folder: Path | None) -> bool:
    """Make the run folder where this node has none; True for the rank that made it."""
    made = False
    if run_folder is not None and not run_folder.exists():
        try:
            run_folder.mkdir()
            marker = {"created_at": utc_now(), "host": socket.gethostname(), "pid": os.getpid()}
            (run_folder / MARKER).write_text(json.dumps(marker) + "\n")
            made = True
        except FileExistsError:
            pass  # another rank on this node made it
    comm.Barrier()
    return made


def run(
    comm,
    case: Path,
    config: dict,
    gate: Path | None = None,
    name: str = "0",
    run_folder: Path | None = None,
) -> dict:
    """Run the proxy on ``comm``; rank 0 returns the result, other ranks None."""
    from mpi4py import MPI

    heap_kept = keep_heap()  # before the fields and buffers are made
    rank, size = comm.Get_rank(), comm.Get_size()
    made_run_folder = claim_run_folder(comm, run_folder)
    cells, fmt, fsync = config["cells"], config["write_format"], config.get("fsync", False)
    collated = config["file_handler"] == "collated"
    file_set = file_set_of(config)
    writes = set(write_steps(config["steps"], config["write_interval"]))
    purge_keep = config.get("purge_write", 0)
    solver = Solver(comm, cells, extras=StepExtras.of(config))
    solver.sweeps, calibration = sweeps_of(solver, config)
    static = static_fields(cells, rank, file_set)
    if collated:
        root = case / f"processors{size}"
        if rank == 0:
            root.mkdir(parents=True, exist_ok=True)
    else:
        root = case / f"processor{rank}"
        root.mkdir(parents=True, exist_ok=True)
    # the solver updates its fields in place, so the writer prepares their files once
    # (and loads its C helper) before the ranks start together
    fields = solver.fields(static)
    if collated:
        writer = CollatedOutput(comm, root, fields, fmt, fsync, file_set)
    else:
        writer = foam_write.UncollatedWriter(root, fields, fmt, fsync, file_set, rank, size)
    for _ in range(config.get("warmup_steps", 0)):  # untimed: caches, clocks, first sweeps
        solver.step()
    comm.Barrier()
    if gate is not None and rank == 0:
        wait_for_gate(gate, name)
    comm.Barrier()
    baseline = own_baseline(comm, solver, config.get("baseline_steps", 0))

    steps = config["steps"]
    step_times = np.zeros(steps)
    compute_times = np.zeros(steps)
    write_times = np.zeros(steps)
    count = foam_write.WriteCount()
    kept: list[str] = []
    faults_before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    loop_start = time.perf_counter()
    for step in range(1, steps + 1):
        start = time.perf_counter()
        solver.step()
        compute_times[step - 1] = time.perf_counter() - start
        if step in writes:
            write_start = time.perf_counter()
            tname = foam.time_name(step)
            done = writer.write(tname, step)
            if rank == 0 or not collated:
                kept.append(tname)
                if purge_keep:
                    done.add(foam_write.purge(root, kept, purge_keep))
            write_times[step - 1] = time.perf_counter() - write_start
            count.add(done)  # bookkeeping, not the write phase
        comm.Barrier()
        step_times[step - 1] = time.perf_counter() - start
    loop_time = time.perf_counter() - loop_start
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults_before

    slowest_steps = np.zeros(steps) if rank == 0 else None
    slowest_writes = np.zeros(steps) if rank == 0 else None
    slowest_compute = np.zeros(steps) if rank == 0 else None
    comm.Reduce(step_times, slowest_steps, op=MPI.MAX, root=0)
    comm.Reduce(write_times, slowest_writes, op=MPI.MAX, root=0)
    comm.Reduce(compute_times, slowest_compute, op=MPI.MAX, root=0)
    totals = comm.gather(vars(count), root=0)
    # each writer counts its own folder, so node-local tiers on several nodes add up too
    comm.Barrier()
    mine = (0, 0)
    if rank == 0 or not collated:
        files, dirs = foam_read.count_tree(root)
        mine = (files, dirs + 1)
    found = comm.gather(mine, root=0)
    hosts = comm.gather(socket.gethostname(), root=0)
    comm.Barrier()  # every rank has counted its tree
    if made_run_folder:
        shutil.rmtree(run_folder, ignore_errors=True)
    if rank != 0:
        return None
    on_disk = (sum(f for f, _ in found), sum(d for _, d in found))
    result = summarise(config, size, slowest_steps, slowest_writes, totals, on_disk, loop_time)
    result["hosts"] = sorted(set(hosts))
    result["time_per_step_baseline"] = baseline
    result.update(
        compute_target_per_step=config.get("compute_target"),
        sweeps=solver.sweeps,
        calibration=calibration,
        compute_per_step=float(slowest_compute.mean()),
        # rank 0's, writes included: the step's fresh memory shows here
        page_faults_per_step=faults / steps,
        step_extras=vars(solver.extras),
        heap_kept=heap_kept,
    )
    return result


class CollatedOutput:
    """A rank's part of the collated writes: its blocks go to the master, which makes the files.

    As v1912 without a write thread: every rank serialises each field into one
    block, the master gathers the blocks (their sizes, then their bytes) and
    writes the time folder (:class:`tierbench.workloads.cfd.foam_write.CollatedWriter`); the other
    ranks touch no file.
    """

    def __init__(self, comm, root: Path, fields, fmt: str, fsync: bool, file_set: str):
        rank, size = comm.Get_rank(), comm.Get_size()
        self.comm, self.master = comm, rank == 0
        self.prepared = foam_write.RankFields(fields, fmt, file_set, rank, size)
        self.writer = (
            foam_write.CollatedWriter(root, fmt, fsync, file_set, size) if self.master else None
        )

    def write(self, tname: str, index: int) -> foam_write.WriteCount:
        stamp = tname.encode()
        blocks = {name: self.gather(self.prepared.block(name, stamp)) for name in foam.FIELDS}
        if not self.master:
            return foam_write.WriteCount()
        return self.writer.write(tname, index, blocks)

    def gather(self, block: bytes) -> list | None:
        """Every rank's block, on the master (None on the other ranks)."""
        local = np.frombuffer(block, dtype=np.uint8)
        sizes = self.comm.gather(local.size, root=0)
        if not self.master:
            self.comm.Gatherv(local, None, root=0)
            return None
        buffer = np.empty(sum(sizes), dtype=np.uint8)
        self.comm.Gatherv(local, (buffer, sizes), root=0)
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        return [memoryview(buffer[offsets[i] : offsets[i + 1]]) for i in range(len(sizes))]


def write_cost(step_times: np.ndarray, write_mask: np.ndarray) -> dict:
    """A write's cost within the run: mean time of the steps that write - of those that do
    not, with its standard error (the proxy's steps do the same work, writes aside)."""
    wrote, quiet = step_times[write_mask], step_times[~write_mask]
    if len(wrote) < 2 or len(quiet) < 2:
        return {"write_cost": None, "write_cost_se": None}
    error = np.sqrt(wrote.var(ddof=1) / len(wrote) + quiet.var(ddof=1) / len(quiet))
    return {"write_cost": float(wrote.mean() - quiet.mean()), "write_cost_se": float(error)}


def summarise(config, ranks, step_times, write_times, totals, on_disk, loop_time) -> dict:
    total = foam_write.WriteCount()
    for entry in totals:
        total.add(foam_write.WriteCount(**entry))
    writes, files, dirs = expected_counts(config, ranks)
    write_mask = np.zeros(len(step_times), dtype=bool)
    for step in write_steps(config["steps"], config["write_interval"]):
        write_mask[step - 1] = True
    problems = []
    if (total.files, total.dirs) != (files, dirs):
        problems.append(
            f"created {total.files} files and {total.dirs} folders; the {config['file_handler']} "
            f"layout needs {files} and {dirs} ({ranks} ranks x {writes} writes)"
        )
    disk_files = total.files - total.files_removed
    disk_dirs = total.dirs - total.dirs_removed
    processor_dirs = 1 if config["file_handler"] == "collated" else ranks
    if on_disk != (disk_files, disk_dirs + processor_dirs):
        problems.append(
            f"found {on_disk[0]} files and {on_disk[1]} folders on disk, "
            f"expected {disk_files} and {disk_dirs + processor_dirs}"
        )
    result = {
        "ranks": ranks,
        "steps": len(step_times),
        "writes": writes,
        "step_times": step_times.tolist(),
        "write_phase_times": write_times[write_mask].tolist(),
        "write_steps": np.flatnonzero(write_mask).tolist(),
        "time_per_step": float(step_times.mean()),
        "time_per_step_write": float(step_times[write_mask].mean()) if writes else None,
        "time_per_step_nowrite": (
            float(step_times[~write_mask].mean()) if writes < len(step_times) else None
        ),
        "write_phase_time": float(write_times[write_mask].mean()) if writes else None,
        **write_cost(step_times, write_mask),
        "loop_time": loop_time,
        "bytes_written": total.bytes,
        "files_created": total.files,
        "dirs_created": total.dirs,
        "files_removed": total.files_removed,
        "dirs_removed": total.dirs_removed,
        "on_disk": list(on_disk),
        "problems": problems,
        # who made the files: the C helper ("c") or Python, and why (tierbench.native)
        "file_writer": native.status("foamio"),
    }
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", required=True, help="case folder (made if missing)")
    parser.add_argument("--config", required=True, help="cells, steps, ... as JSON")
    parser.add_argument("--out", help="result JSON written by rank 0")
    parser.add_argument("--gate", help="folder for the ready/go start signal")
    parser.add_argument("--name", default="0", help="name of this launch at the gate")
    parser.add_argument("--run-folder", help="the job's run folder on the tier (see above)")
    parser.add_argument(
        "--calibrate", action="store_true", help="only find the sweeps per step (see above)"
    )
    args = parser.parse_args(argv)
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    config = json.loads(args.config)
    try:
        if args.calibrate:
            solver = Solver(comm, config["cells"], extras=StepExtras.of(config))
            result = calibrate(solver, float(config["compute_target"]))
            result = {**result, "problems": []} if comm.Get_rank() == 0 else None
        else:
            result = run(
                comm,
                Path(args.case),
                config,
                Path(args.gate) if args.gate else None,
                args.name,
                Path(args.run_folder) if args.run_folder else None,
            )
    except Exception as error:  # one rank failing must not leave the others hanging
        print(f"rank {comm.Get_rank()}: {type(error).__name__}: {error}", file=sys.stderr)
        traceback.print_exc(file=sys.stderr)
        sys.stderr.flush()
        comm.Abort(3)
        return 3
    if result is None:
        return 0
    text = json.dumps(result) + "\n"
    if args.out:
        tmp = Path(args.out + ".tmp")
        tmp.write_text(text)
        os.replace(tmp, args.out)
    else:
        sys.stdout.write(text)
    return 1 if result["problems"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
