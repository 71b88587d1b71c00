"""A user's own OpenFOAM case as its owner has it: what prepares it (its Allrun, or the
tools it names), how many steps it runs and which of them write, from its controlDict.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from . import foamcase

#: a parameter's value that keeps the case's own setting (the default with ``case``)
OWN = "case"
#: the settings a study may override in a case
OVERRIDABLE = ("steps", "write_interval", "file_handler", "write_format", "purge_write")
#: writeInterval of a run without writes whose length is not known: longer than any run
NO_WRITE_STEPS = 1_000_000_000
#: bytes per value of a written field (the duct's BYTES_PER_CELL over its 10 values per cell)
BYTES_PER_VALUE = {"binary": 8, "ascii": 16}
#: a rank's boundary values, headers and uniform/ files, generously (per rank per write)
BYTES_PER_RANK_WRITE = 64 * 1024


def check_measured_steps(steps: int, warmup_steps: int) -> None:
    if max(2, warmup_steps + 1) > steps:
        raise ValueError(
            f"steps {steps} leaves no measured iteration: the first iteration (it reads "
            f"the mesh) and warmup_steps {warmup_steps} are not measured"
        )


@dataclass(frozen=True)
class CasePlan:
    """How a point runs a user's case: what it reads of the case, what the study overrides."""

    folder: Path
    application: str
    #: time steps the run must do; None: as many as the case takes (it adjusts its time step)
    steps: int | None
    #: its time steps, known or estimated (endTime - start) / deltaT (for the time limit)
    estimated_steps: int
    start: Decimal | None
    #: which steps write: ("timeStep", n), ("runTime", interval) or ("none", None)
    write: tuple[str, Decimal | None]
    #: writes of one run
    writes: int
    purge: int | None
    write_format: str
    #: controlDict entries the study overrides (name -> value)
    entries: dict
    #: cells of its mesh or blockMeshDict; None where only its preparation makes them
    #: (a computed blockMeshDict, another mesher): the job reads them once it is prepared
    cells: int | None
    #: values a write holds per cell (the start time's fields, and phi)
    values_per_cell: int
    #: bytes of the case as it is (each member's copy)
    size: int
    #: what runs in each member's copy before the solver: (log name, argv) each
    prepare: tuple[tuple[str, tuple[str, ...]], ...]

    def bytes_per_write(self, ranks: int, ensemble: int) -> int:
        per_value = BYTES_PER_VALUE.get(self.write_format, BYTES_PER_VALUE["ascii"])
        one = (self.cells or 0) * self.values_per_cell * per_value + ranks * BYTES_PER_RANK_WRITE
        return one * ensemble


def case_plan(p: dict) -> CasePlan:
    """Read the case and apply the study's overrides; ValueError (one line) where the case
    cannot run here or what an estimate needs cannot be known before the run."""
    folder = foamcase.case_folder(p["case"])
    problem = foamcase.case_problem(folder)
    if problem is None and p["prepare"] is None:
        problem = foamcase.mesh_problem(folder)
    if problem:
        raise ValueError(problem)
    control = foamcase.read_control(folder)
    if not control.application:
        raise ValueError(f"case {folder}: its controlDict names no application (e.g. simpleFoam)")
    start = foamcase.start_time(folder, control)
    entries: dict = {}
    steps = case_steps(p, folder, control, start, entries)
    write = case_writes(p, folder, control, steps, entries)
    writes = count_writes(write, steps, control, start)
    if writes is None:
        why = (
            "adjusts its time step"
            if control.adjusts_time_step
            else "computes its endTime or deltaT as OpenFOAM reads it (#calc, an #include)"
        )
        raise ValueError(
            f"case {folder} {why}: how many times it writes with writeControl "
            f"{control.write_control} is known only once it ran; give steps (a fixed time step)"
        )
    if p["purge_write"] != OWN:
        entries["purgeWrite"] = p["purge_write"]
    if p["write_format"] != OWN:
        entries["writeFormat"] = p["write_format"]
    estimated = steps or own_estimate(control, start)
    return CasePlan(
        folder=folder,
        application=control.application,
        steps=steps,
        estimated_steps=estimated,
        start=start,
        write=write,
        writes=writes,
        purge=p["purge_write"] if p["purge_write"] != OWN else control.purge_write,
        write_format=p["write_format"] if p["write_format"] != OWN else control.write_format,
        entries=entries,
        cells=foamcase.cells(folder),
        values_per_cell=foamcase.values_per_cell(folder, _time_name(start)),
        size=foamcase.size_bytes(folder),
        prepare=preparation(p["prepare"], folder),
    )


def preparation(prepare, folder: Path) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """What makes the case one its solver can run, (log name, argv) per command: the
    study's ``prepare`` (a shell command, or utilities run in turn), else blockMesh where
    the case has no mesh."""
    if prepare is None:
        return () if foamcase.has_mesh(folder) else (("blockMesh", ("blockMesh",)),)
    if isinstance(prepare, str):
        return (("prepare", ("bash", "-c", prepare)),)
    steps: list[tuple[str, tuple[str, ...]]] = []
    for i, item in enumerate(prepare, 1):
        argv = tuple(shlex.split(item))
        if not argv:
            raise ValueError(f"prepare: {item!r} is no command")
        name = Path(argv[0]).name
        if any(name == known for known, _ in steps):
            name = f"{name}.{i}"  # the same utility again (topoSet twice): a log of its own
        steps.append((name, argv))
    return tuple(steps)


def case_steps(p: dict, folder: Path, control, start, entries: dict) -> int | None:
    """The run's time steps; a study's ``steps`` sets endTime at a fixed time step."""
    if p["steps"] == OWN:
        steps = foamcase.own_steps(control, start)
    else:
        steps = p["steps"]
        if start is None or control.delta_t is None:
            raise ValueError(
                f"case {folder}: its startTime or deltaT is computed as OpenFOAM reads it, so "
                f"steps {steps} cannot set its endTime; write them as numbers, or leave steps out"
            )
        entries.update(stopAt="endTime", endTime=_decimal_value(start + steps * control.delta_t))
        if control.adjusts_time_step:
            entries["adjustTimeStep"] = False
    if steps is not None:
        check_measured_steps(steps, p["warmup_steps"])
    return steps


def case_writes(p: dict, folder: Path, control, steps: int | None, entries: dict) -> tuple:
    """Which steps write: the study's write_interval (time steps), or the case's own."""
    interval = p["write_interval"]
    if interval == "none":
        entries.update(writeControl="timeStep", writeInterval=(steps or NO_WRITE_STEPS) + 1)
        return ("none", None)
    if interval != OWN:
        if steps is not None and interval > steps:
            raise ValueError(
                f"write_interval {interval} is longer than the run (steps {steps}): "
                "no time step would write"
            )
        entries.update(writeControl="timeStep", writeInterval=interval)
        return ("timeStep", Decimal(interval))
    kind, every = control.write_control, control.write_interval
    if kind in foamcase.WALL_CLOCK_CONTROLS:
        raise ValueError(
            f"case {folder} writes by writeControl {kind}: its write times follow the "
            "machine's speed, so no two tiers would write alike; give write_interval"
        )
    if kind not in foamcase.RUN_TIME_CONTROLS | {"timeStep"} or every is None or every <= 0:
        raise ValueError(
            f"case {folder}: its writeControl {kind} / writeInterval cannot be read before "
            "the run; give write_interval"
        )
    return ("timeStep" if kind == "timeStep" else "runTime", every)


def count_writes(write: tuple, steps: int | None, control, start) -> int | None:
    """Writes of one run, or None where only the run can tell."""
    kind, every = write
    if kind == "none":
        return 0
    if kind == "timeStep":
        return steps // int(every) if steps is not None else None
    if control.end_time is None or start is None or control.stop_at != "endTime":
        return None
    return int((control.end_time - start) / every)


def own_estimate(control, start) -> int:
    """The case's time steps for a time limit: (endTime - start) / its first deltaT, which
    an adjusted time step outgrows; 1000 where that cannot be read."""
    if None in (control.end_time, start, control.delta_t) or not control.delta_t > 0:
        return 1000
    return max(1, int((control.end_time - start) / control.delta_t))


def _decimal_value(number: Decimal) -> int | float:
    """A time for a dictionary: whole numbers as integers, others as the shortest float."""
    return int(number) if number == number.to_integral_value() else float(number)


def _time_name(number: Decimal | None) -> str | None:
    """The folder name of a time (``0``, ``0.5``) as OpenFOAM's general format writes it."""
    if number is None:
        return None
    return str(_decimal_value(number))


def case_path_problem(path: str | os.PathLike) -> str | None:
    """Why OpenFOAM cannot run a case in ``path``, or None.

    Its fileName refuses whitespace and quotes, the working folder's too: blockMesh
    in ``/tmp/a dir/case`` stops with only "For debug level (= 2) > 1 this is
    considered fatal".
    """
    bad = sorted({c for c in str(path) if c.isspace() or c in "'\""})
    if not bad:
        return None
    return f"OpenFOAM refuses a case path with {' or '.join(map(repr, bad))}, as in {path}"
