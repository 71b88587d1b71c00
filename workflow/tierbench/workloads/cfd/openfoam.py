"""openfoam: the real OpenFOAM solver writing its results on a tier (document 001).

One job runs one point: ``ensemble`` independent simpleFoam runs (kOmegaSST,
so the fields written are those of document 001: U p k omega nut phi) of
``ranks`` ranks each, on the same tier, each in its own case folder of the run
folder (``member<i>/``). The case is rendered at run time from the templates
in ``openfoam_case/`` (``string.Template``): a straight 3D duct meshed by
blockMesh with ``cells_per_rank`` x ``ranks`` hexahedra, cut by decomposePar
(method simple, slabs along the duct: Debian's scotch and metis are stubs)
into ``ranks`` equal pieces. Every member's ``simpleFoam -parallel`` is
started through the launcher Snakemake gives the rule (``mpiexec`` here,
``srun --mpi=pmix`` under Slurm; :func:`cfd_launch.launch_command`), back to
back: the real solver has no start gate, so each member's start and end are
recorded (``job.extra["overlap"]``: the share of the run all members ran at
once). One rank runs serially (v1912 refuses ``-parallel`` on one processor,
so there is no decomposePar) and writes its time folders in the case itself,
the same 9 files and 3 folders per write; serial collated output is ordinary
files.

The run does exactly ``steps`` iterations: fvSolution has no residualControl.
``write_interval: none`` is the no-I/O baseline: controlDict's writeInterval
is then ``steps + 1`` time steps, so no iteration is a write time, and
simpleFoam writes nothing at endTime either (the run checks that no file was
created and fails the point otherwise). Collated output is unthreaded
(``-opt-switch maxThreadFileBufferSize=0``) unless ``thread_buffer`` says
otherwise. OpenFOAM neither fsyncs nor renames: its writes are buffered, they
land in the page cache.

Measured, per iteration: the CPU time from the log's ``ExecutionTime`` (v1912
counts it in 10 ms ticks) and the wall time as the gap between the arrivals of
consecutive ``ExecutionTime = ... ClockTime = ...`` lines, timestamped as the
solver's output reaches the job through a pipe (v1912 prints ClockTime in
whole seconds, too coarse for an iteration; it is kept as a check). The log is
saved as ``member<i>/log.simpleFoam``. The first iteration has no start in the
log (it includes reading the mesh) and is never measured; neither are the
first ``warmup_steps``. The cost of a write within the run, ``write_cost``
(and its standard error ``write_cost_se``), is the write steps' extra time
once the solver's own work is taken out: an iteration's time varies by more
than a write costs, with the iterations its linear solvers took (the log's
``No Iterations`` per solved field, which fall as the flow settles), so the
step times are fitted by least squares to a constant, those iteration counts
and whether the step wrote. Files, folders and bytes written are counted in the
write trees after the run against a listing taken before the solver started;
with ``purge_write`` the purged time folders are gone, so totals are the kept
folders' counts per write times the writes (``job.extra["members"][i]["tree"]``
says what was counted; ``job.extra["write_tree"]`` lists one write time's
files and folders with their sizes, per writer). blockMesh and decomposePar
times are recorded apart, they are not the measured loop. The figures derive
the I/O bandwidth as document 001 does, from the no-I/O baseline of the same
shape; the metric names are cfd_proxy's where the meaning is the same.

Getting OpenFOAM: the job spec may hold ``openfoam`` (from the hardware file),
one of::

    openfoam: {bashrc: /opt/OpenFOAM/OpenFOAM-v2312/etc/bashrc}  # sourced by bash
    openfoam: {module: openfoam/2312}       # `module load` in a login bash
    openfoam: {module: [gcc/12, openfoam/2312]}

The environment that results is captured once and used for every tool and
launch. Without the key: Debian's package (``apt-get install openfoam``),
binaries on PATH, ``WM_PROJECT_DIR=/usr/share/openfoam`` (its bashrc prints
errors, that variable is all it needs). The case's dictionaries are written
for v1912 (``constant/turbulenceProperties``); a release that wants
``momentumTransport`` (OpenFOAM.org 8 and later) is not supported.

A case of your own (``case``: a folder; :mod:`tierbench.workloads.cfd.foamcase` reads and
edits its dictionaries): each member gets a copy of it (timed,
``case_copy_time``), the controlDict entries the study overrides are
set and nothing else (``steps``: endTime = start + steps x deltaT at a fixed
time step; ``write_interval``: writeControl timeStep; ``purge_write``;
``write_format``; ``file_handler`` on the command line), ``prepare`` runs (the
case's own script or utilities, e.g. blockMesh then setFields; untimed by the
solver's clock, logged, ``prepare_time``), else blockMesh where the case has a
system/blockMeshDict and no constant/polyMesh; ``0.orig/`` becomes ``0/`` where the
case has no ``0/`` (as the tutorials' restore0Dir), and decomposePar cuts it for ``ranks``
with the case's own method, or ``simple`` where that fails here (Debian's
v1912 scotch, metis and kahip are stubs). The application the controlDict
names runs; a "step" is its time step (a transient solver's deltaT, a steady
one's iteration), timed from its ExecutionTime lines as the duct's. Which
steps wrote is worked out from the log as OpenFOAM's Time decides it
(writeControl timeStep, runTime, adjustableRunTime); a case writing by
cpuTime or clockTime must be given ``write_interval``. What it creates beside
its time folders (a function object's ``postProcessing/``) is counted in its
files, folders and bytes.
"""

from __future__ import annotations

import json
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from decimal import Decimal
from pathlib import Path

from ... import syscalls
from ...cluster import in_job_step
from ...errors import PointFailed, PointNotApplicable
from ...job import Job
from ...records import CPU_TIME_ELSEWHERE, JOB_CPU_TIME, JOB_TIME, metric, whole_run_timed
from .. import Tool, Workload
from . import foamcase
from .cfd_launch import (
    DEFAULT_LAUNCHER,
    alone_first,
    copy_output,
    launch_command,
    launch_env,
    launcher_tool,
    member_nodes,
    page_cache_rule,
    private_folders,
    private_folders_said,
    remove_private_folders,
    spans_nodes,
    under_slurm,
    write_interval,
)
from .openfoam_log import (
    EXECUTION_LINE,
    FATAL,
    build_of,
    check_log,
    check_stamps,
    fatal_error,
    last_lines,
    log_per_step,
    step_statistics,
    writing_steps,
)
from .openfoam_plan import (
    DEBIAN_PROJECT_DIR,
    PROJECT_VIEW,
    RUN_FUNCTIONS,
    SOLVER_TIMEOUT_S,
    STAND_IN,
    check_params,
    find_tools,
    kept_writes,
    mesh,
    openfoam_environment,
    planned_bytes,
    runtime_s,
    tasks,
    with_defaults,
    write_case,
)
from .openfoam_results import (
    case_record,
    check_writes,
    describe,
    ensemble_metrics,
    overlap,
    preprocessing_metrics,
    rank_hosts,
)
from .openfoam_tree import (
    per_rank_layout,
    tree,
    write_tree,
)
from .openfoam_usercase import (
    OWN,
    CasePlan,
    case_path_problem,
    case_plan,
)

# ------------------------------------------------------------------ the run


@dataclass
class Member:
    """One simulation of the ensemble: its case, its launch and when its lines arrived."""

    index: int
    case: Path
    command: list[str] | None = None
    process: subprocess.Popen | None = None
    reader: threading.Thread | None = None
    folders: dict[str, str] = field(default_factory=dict)
    started: float = 0.0
    ended: float | None = None
    stamps: list[float] = field(default_factory=list)


def tee(stream, log_path: Path, stamps: list[float], origin: float) -> None:
    """Copy the solver's output into its log, noting when each ExecutionTime line arrives."""

    def note(line: bytes) -> None:
        if EXECUTION_LINE.search(line):
            stamps.append(time.perf_counter() - origin)

    copy_output(stream, log_path, note)


def run_tool(command: list[str], case: Path, name: str, env: dict) -> float:
    """Run a preprocessing tool on the case, its output in log.<name>; its wall time."""
    start = time.perf_counter()
    with open(case / f"log.{name}", "wb") as log:
        try:
            done = subprocess.run(
                command, cwd=case, stdout=log, stderr=subprocess.STDOUT, env=env, timeout=3600
            )
        except FileNotFoundError:
            raise PointFailed(f"{name}: {command[0]} not found (in {case})") from None
        except subprocess.TimeoutExpired:
            raise PointFailed(f"{name} ran longer than 3600 s") from None
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        text = (case / f"log.{name}").read_text(errors="replace")
        reason = fatal_error(text)
        fatal = FATAL.search(text)  # what it printed before its error, not the error's trailer
        shown = text[: text.rfind("\n", 0, fatal.start()) + 1] if fatal else text
        lines = f"its last lines: {last_lines(shown)}"
        raise PointFailed(
            f"{name} exited with {done.returncode}: {f'{reason}; {lines}' if reason else lines}"
        )
    return elapsed


def handler_args(p: dict) -> list[str]:
    """The file handler on the command line; collated writes unthreaded unless asked.

    The duct's uncollated runs give none (OpenFOAM's default); a case's give
    the one the study asks for, since the case may set another, and none when
    the study keeps the case's own (``case``).
    """
    if p["file_handler"] == OWN:
        return []
    if p["file_handler"] != "collated":
        return ["-fileHandler", "uncollated"] if p["case"] is not None else []
    return [
        "-fileHandler", "collated",
        "-opt-switch", f"maxThreadFileBufferSize={int(p['thread_buffer'])}",
    ]  # fmt: skip


def parallel(p: dict) -> bool:
    """More than one rank: decomposed and run with -parallel (one rank runs serially:
    v1912 refuses ``-parallel`` on 1 processor)."""
    return p["ranks"] > 1


def prepare(member: Member, p: dict, env: dict) -> dict:
    """Render, mesh and decompose one member's case; the preprocessing times."""
    write_case(member.case, p)
    times = {"blockMesh": run_tool(["blockMesh"], member.case, "blockMesh", env)}
    if parallel(p):
        times["decomposePar"] = run_tool(
            ["decomposePar", "-force", *handler_args(p)], member.case, "decomposePar", env
        )
    return times


def prepare_case(job: Job, member: Member, p: dict, plan: CasePlan, env: dict) -> dict:
    """Copy the user's case into the member's folder, set what the study overrides, prepare
    it (``prepare``, else blockMesh where it has no mesh), make its ``0/`` from ``0.orig/``
    where it has none, decompose it; the preprocessing times (the copy's too). Each
    command's output is in the copy's ``log.<name>``; one that fails fails the point with
    its last lines."""
    began = time.perf_counter()
    shutil.copytree(plan.folder, member.case)
    times = {"copy": time.perf_counter() - began}
    if plan.entries:
        foamcase.edit_control(member.case, plan.entries)
    ready = run_functions_env(env, job.folder.path / PROJECT_VIEW) if p["prepare"] else env
    steps = {name: run_tool(list(argv), member.case, name, ready) for name, argv in plan.prepare}
    original = member.case / "0.orig"
    if not (member.case / "0").exists() and original.is_dir():
        # as the tutorials' restore0Dir, after the meshing (createBaffles must not find a 0/)
        shutil.copytree(original, member.case / "0")
    if p["prepare"] is None:
        times.update(steps)  # blockMesh where the case had no mesh: blockmesh_time
    elif steps:
        times["prepare"] = sum(steps.values())
        times["prepare_steps"] = steps
    if parallel(p):
        times["decomposePar"] = decompose_case(job, member.case, p, env)
    return times


def run_functions_env(env: dict, view: Path) -> dict:
    """The environment a study's ``prepare`` runs in: OpenFOAM's, and where its
    installation has no ``bin/tools/RunFunctions`` (Debian's), WM_PROJECT_DIR naming
    ``view``: the installation's folders linked, and tierbench's stand-in for that file
    (``openfoam_tools/RunFunctions``), which the tutorials' Allrun scripts source. Made
    once per job, in its run folder beside the members' cases."""
    project = Path(env.get("WM_PROJECT_DIR", DEBIAN_PROJECT_DIR))
    if (project / RUN_FUNCTIONS).is_file():
        return env
    if not view.is_dir():
        tools = view / RUN_FUNCTIONS.parent
        tools.mkdir(parents=True)
        for here, made in (
            (project, view),
            (project / "bin", view / "bin"),
            (project / "bin/tools", tools),
        ):
            for entry in sorted(here.iterdir()) if here.is_dir() else []:
                if not (made / entry.name).exists():
                    (made / entry.name).symlink_to(entry)
        shutil.copyfile(STAND_IN, view / RUN_FUNCTIONS)
    return {**env, "WM_PROJECT_DIR": str(view)}


def decompose_case(job: Job, case: Path, p: dict, env: dict) -> float:
    """decomposePar with the case's own method for ``ranks``; where that fails here (Debian's
    v1912 ships scotch, metis and kahip as stubs that stop with "dummy ... stub library"),
    once more with ``simple``, slabs along x. The method used is in ``job.extra``."""
    command = ["decomposePar", "-force", *handler_args(p)]
    method = foamcase.decompose_for(case, p["ranks"])
    try:
        took = run_tool(command, case, "decomposePar", env)
        job.extra["decomposition"] = {"method": method}
    except PointFailed as error:
        if method == "simple":
            raise
        foamcase.decompose_for(case, p["ranks"], "simple")
        took = run_tool(command, case, "decomposePar", env)
        job.extra["decomposition"] = {
            "method": "simple",
            "instead_of": method,
            "because": str(error),
        }
    return took


def on_member_nodes(job: Job, member: Member, argv: list[str]) -> list[str]:
    """What ``argv`` printed on each node of a member's (one line each), run there by
    ``srun``; PointFailed with its last line where it failed on any of them."""
    each = member_nodes(job)
    command = ["srun", "-N", str(each), f"--relative={member.index * each}"]
    command += ["--ntasks-per-node=1", *(["--overlap"] if in_job_step() else []), *argv]
    env, _ = launch_env(job.spec.get("launcher") or DEFAULT_LAUNCHER, local=False)
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=3600)
    if done.returncode != 0:
        raise PointFailed(
            f"on the nodes of member {member.index}: {shlex.join(argv[:2])} exited with "
            f"{done.returncode}: {last_lines(done.stderr + done.stdout, 1)}"
        )
    return done.stdout.splitlines()


def on_node_local_tier_across_nodes(job: Job, member: Member) -> bool:
    """Does a member's solver run on nodes that do not see the case it was prepared in?
    (On a node-local tier, its ranks span nodes or it runs on nodes other than the job's
    own; a member of one node that is the job's first node needs no copy.)"""
    if not spans_nodes(job) or job.spec.get("tier_shared"):
        return False
    return member_nodes(job) > 1 or member.index > 0


def stage_to_member_nodes(job: Job, member: Member) -> float:
    """The prepared case copied to the same path on every node the member runs on, as
    document 001 staged its cases to node-local storage: each rank reads its own
    ``processor<N>`` there. Untimed; through an archive in the job's control folder, which
    every node sees. Its seconds."""
    began = time.perf_counter()
    archive = Path(job.spec["control_dir"]) / f"{member.case.name}.tar"
    archive.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-cf", str(archive), "-C", str(member.case), "."], check=True)
    unpack = 'mkdir -p "$1" && tar -xf "$2" -C "$1"'
    on_member_nodes(job, member, ["sh", "-c", unpack, "sh", str(member.case), str(archive)])
    archive.unlink()
    job.extra.setdefault("staged_to_nodes", []).append(member.case.name)
    return time.perf_counter() - began


def member_tree(job: Job, member: Member, everything: bool) -> dict[str, int]:
    """:func:`tree` of the member's case over all of its nodes (each writes its ranks')."""
    if not on_node_local_tier_across_nodes(job, member):
        return tree(member.case, everything)
    code = (
        "import json, sys; from pathlib import Path; "
        "from tierbench.workloads.cfd.openfoam import tree; "
        "print(json.dumps(tree(Path(sys.argv[1]), sys.argv[2] == '1')))"
    )
    found: dict[str, int] = {}
    argv = [sys.executable, "-c", code, str(member.case), "1" if everything else "0"]
    for line in on_member_nodes(job, member, argv):
        found.update(json.loads(line))
    return found


def remove_from_member_nodes(job: Job, member: Member) -> None:
    """The run folder removed from the member's nodes other than the job's own, where the
    case was copied to (on the job's own node it goes with the job, after its log is kept)."""
    if not on_node_local_tier_across_nodes(job, member):
        return
    remove = '[ "$(hostname)" = "$2" ] || rm -rf "$1"'
    folder, here = str(job.folder.path), socket.gethostname()
    try:
        on_member_nodes(job, member, ["sh", "-c", remove, "sh", folder, here])
    except (PointFailed, subprocess.SubprocessError) as error:
        job.log(f"could not remove member {member.index}'s copies on its nodes: {error}")


@dataclass(frozen=True)
class Solver:
    """What the members run and how their logs are read: the duct's simpleFoam, or the
    application a case's controlDict names."""

    name: str
    #: time steps the run must do; None: as many as it takes (a case adjusting its time step)
    steps: int | None
    #: which steps write (:func:`writing_steps`)
    write: tuple
    start: Decimal
    #: the log's time names are the iteration numbers (the duct)
    numbered: bool
    timeout_s: float
    #: the run writes elsewhere than its time folders too (a case's function objects)
    everything: bool


def duct_solver(p: dict) -> Solver:
    interval = write_interval(p)
    write = ("none", None) if interval is None else ("timeStep", Decimal(interval))
    return Solver("simpleFoam", p["steps"], write, Decimal(0), True, SOLVER_TIMEOUT_S, False)


def case_solver(p: dict, plan: CasePlan) -> Solver:
    timeout = max(SOLVER_TIMEOUT_S, 10 * runtime_s(p))
    start = plan.start if plan.start is not None else Decimal(0)
    return Solver(plan.application, plan.steps, plan.write, start, False, timeout, True)


def solver_command(p: dict, solver: str = "simpleFoam") -> list[str]:
    return [solver, *(["-parallel"] if parallel(p) else []), *handler_args(p)]


def start(
    job: Job, launcher: str, members: list[Member], p: dict, env: dict, solver: Solver
) -> None:
    """Start every member's solver back to back, each with its own MPI folders.

    The output comes through a pipe so that each iteration's end is timestamped
    as it arrives; OpenFOAM flushes its log at every line.
    """
    local = not under_slurm()
    _, added = launch_env(launcher, local)
    added.pop("PYTHONPATH", None)  # for cfd_proxy's Python ranks; the solver needs none
    launch = {**env, **added}
    said = {**added, **private_folders_said(launcher, local)}
    job.extra.update({"launcher": launcher, "launcher_env": said, "local": local})
    origin = time.perf_counter()
    for member in members:
        each = member_nodes(job)
        member.command = launch_command(
            launcher, p["ranks"], p["ensemble"], local, each, member.index
        )
        member.command += syscalls.rank_prefix(job) + solver_command(p, solver.name)
        member.folders = private_folders(launcher, local)
        member.started = time.perf_counter() - origin
        try:
            member.process = subprocess.Popen(
                member.command,
                cwd=member.case,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env={**launch, **member.folders},
            )
        except FileNotFoundError:
            raise PointFailed(f"the mpi launcher {member.command[0]!r} is not installed") from None
        log = member.case / f"log.{solver.name}"
        member.reader = threading.Thread(
            target=tee, args=(member.process.stdout, log, member.stamps, origin), daemon=True
        )
        member.reader.start()
    job.extra["commands"] = [shlex.join(m.command) for m in members]
    job.log(f"{len(members)} launch(es) of {solver.name} started back to back")
    deadline = time.monotonic() + solver.timeout_s
    for member in members:
        try:
            member.process.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            raise PointFailed(f"{solver.name} ran longer than {solver.timeout_s:.0f} s") from None
        member.ended = time.perf_counter() - origin
        member.reader.join()


def stop(members: list[Member]) -> None:
    """End what still runs and remove the launches' own folders (idempotent)."""
    for member in members:
        if member.process is not None and member.process.poll() is None:
            member.process.terminate()
            try:
                member.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                member.process.kill()
                member.process.wait()
        if member.reader is not None:
            member.reader.join(timeout=10)
        remove_private_folders(member.folders)


def member_result(job: Job, member: Member, p: dict, before: dict, solver: Solver) -> dict:
    """One member's statistics and what it wrote; PointFailed ending with the solver's
    last lines where it failed."""
    text = (member.case / f"log.{solver.name}").read_text(errors="replace")
    code = member.process.returncode
    try:
        iterations = check_log(text, solver.steps, solver.name, solver.numbered)
        if code != 0:
            raise PointFailed(f"{solver.name} exited with {code}")
    except PointFailed as error:
        job.log(f"member {member.index} log (end):\n{text[-2000:]}")
        raise PointFailed(
            f"member {member.index}: {error}; its last lines: {last_lines(text)}"
        ) from None
    check_stamps(iterations, member.stamps)
    job.extra["openfoam_build"] = build_of(text)
    writes = writing_steps(solver.write, iterations, solver.start)
    names = [iterations[step - 1].time for step in writes]
    found = write_tree(before, member_tree(job, member, solver.everything), names)
    return {
        "steps": step_statistics(iterations, member.stamps, p["warmup_steps"], writes),
        "tree": found,
        "writes": len(writes),
        "time_steps": len(iterations),
        "log_per_step": log_per_step(text),
        "started_s": round(member.started, 4),
        "ended_s": round(member.ended, 4),
        "hosts": rank_hosts(text),
    }


def run(job: Job) -> list[dict]:
    if job.folder is None:
        raise PointNotApplicable("openfoam writes files; the void tier has no folder")
    problem = case_path_problem(job.folder.path)
    if problem:
        raise PointNotApplicable(f"{problem}: give tier {job.spec['tier']} a path without it")
    p = with_defaults(job.params)
    plan = None
    if p["case"] is not None:
        try:
            plan = case_plan(p)
        except ValueError as error:  # checked when planned; the case changed since
            raise PointFailed(str(error)) from None
    solver = case_solver(p, plan) if plan else duct_solver(p)
    job.folder.ensure_space(planned_bytes(p), job.max_bytes)
    launcher = job.spec.get("launcher") or DEFAULT_LAUNCHER
    env, how = openfoam_environment(job.spec.get("openfoam"))
    job.extra["openfoam_env"] = how
    tools = ("blockMesh", "decomposePar", solver.name, *prepare_tools(plan))
    job.extra["openfoam_tools"] = find_tools(env, tools)
    job.log(f"{p['ensemble']} x {solver.name} on {p['ranks']} ranks, {describe(p, plan)}; "
            f"OpenFOAM: {how}")  # fmt: skip
    if plan is None:
        job.extra["mesh"] = mesh(p)
    else:
        job.extra["case"] = case_record(plan)

    def prepared(member: Member) -> dict:
        if plan is None:
            made = prepare(member, p, env)
        else:
            made = prepare_case(job, member, p, plan, env)
            prepared_cells(job, member.case, p, plan)
        if on_node_local_tier_across_nodes(job, member):
            made["stage_to_nodes"] = stage_to_member_nodes(job, member)
        return made

    alone = None
    if alone_first(p):
        alone = run_alone(job, launcher, prepared, p, env, solver, plan)
    members = [Member(i, job.folder.path / f"member{i}") for i in range(p["ensemble"])]
    preprocessing = [prepared(m) for m in members]
    job.extra["preprocessing_s"] = preprocessing
    try:
        before = [member_tree(job, m, solver.everything) for m in members]
        start(job, launcher, members, p, env, solver)
        results = [
            member_result(job, m, p, b, solver) for m, b in zip(members, before, strict=True)
        ]
    finally:
        stop(members)
        for member in members:
            remove_from_member_nodes(job, member)
    check_writes(results, plan.purge if plan else p["purge_write"], strict=plan is None)
    job.extra["members"] = results
    job.extra["rank_hosts"] = sorted({host for r in results for host in r["hosts"]})
    sample = results[0]["tree"]["sample"]
    collated = any(path.startswith("processors") for path in sample)
    job.extra["write_tree"] = per_rank_layout(sample, collated)
    job.extra["overlap"] = overlap(results)
    metrics = ensemble_metrics(results) + preprocessing_metrics(preprocessing)
    if alone is not None:
        job.extra["alone"] = alone
        metrics.append(metric("time_per_step_alone", alone["steps"]["time_per_step"], "s"))
    if launched_elsewhere(launcher):
        solved = results + ([alone] if alone is not None else [])
        cpu = sum(r["steps"]["solver_cpu_time"] for r in solved) * p["ranks"]
        metrics.append(metric(CPU_TIME_ELSEWHERE, cpu, "s"))
    job.log(
        "per step "
        + ", ".join(f"{m['metric']}={m['value']:.4g}" for m in metrics if m["unit"] == "s")
    )
    return metrics


def launched_elsewhere(launcher: str) -> bool:
    """Does the launcher start the ranks outside this process's children? srun does: they
    are a job step's, so their CPU time is not in this job's rusage. mpiexec's ranks are its
    children (it waits for them), so theirs is."""
    return launcher_tool(launcher) == "srun"


def run_alone(
    job: Job, launcher: str, prepared, p: dict, env: dict, solver: Solver, plan: CasePlan | None
) -> dict:
    """Member 0 by itself, launched as in the ensemble, just before it: its result.

    The single run an ensemble's time per step is set against, in the same job,
    so the drift of a shared machine between jobs cancels in the ratio. Its case
    (``prepared`` makes it as a member's) is removed before the members' are made,
    so the tier never holds more than the ensemble's.
    """
    alone = Member(0, job.folder.path / "alone0")
    preprocessing = prepared(alone)
    try:
        before = member_tree(job, alone, solver.everything)
        start(job, launcher, [alone], p, env, solver)
        result = member_result(job, alone, p, before, solver)
    finally:
        stop([alone])
        remove_from_member_nodes(job, alone)
    check_writes([result], plan.purge if plan else p["purge_write"], strict=plan is None)
    shutil.copy2(alone.case / f"log.{solver.name}", job.folder.path / "alone0.log")
    shutil.rmtree(alone.case, ignore_errors=True)
    job.log(f"member 0 alone: {result['steps']['time_per_step']:.4g} s per step")
    return {**result, "preprocessing_s": preprocessing}


def prepare_tools(plan: CasePlan | None) -> tuple[str, ...]:
    """The commands a case's preparation runs from PATH (checked before any runs)."""
    if plan is None:
        return ()
    return tuple(dict.fromkeys(argv[0] for _, argv in plan.prepare if "/" not in argv[0]))


def prepared_cells(job: Job, case: Path, p: dict, plan: CasePlan) -> None:
    """The cells of the prepared mesh, in the job's record (the first member's); where the
    plan could not know them, the tier's space and max_bytes are checked again with them."""
    if "cells_prepared" in job.extra["case"]:
        return
    owner = foamcase.existing(case, f"{foamcase.POLY_MESH}/owner")
    if owner is None:
        raise PointFailed(
            f"the case has no mesh (constant/polyMesh) once prepared: its prepare "
            f"{p['prepare']!r} must make one"
        )
    try:
        cells = foamcase.mesh_cells(owner)
    except foamcase.CaseError as error:
        raise PointFailed(str(error)) from None
    job.extra["case"]["cells_prepared"] = cells
    if plan.cells is None and cells:
        meshed = replace(plan, cells=cells)
        kept = kept_writes(plan.writes, plan.purge)
        writes = (kept + 3) * meshed.bytes_per_write(p["ranks"], p["ensemble"])
        job.folder.ensure_space(plan.size * p["ensemble"] + writes, job.max_bytes)


#: where Debian's openfoam-examples installs the tutorial cases
TUTORIALS = "/usr/share/doc/openfoam-examples/examples"


WORKLOAD = Workload(
    name="openfoam",
    summary=(
        "the real OpenFOAM (simpleFoam, kOmegaSST) on a generated duct, or a case of your own "
        "(case): ranks x steps, writes"
    ),
    run=whole_run_timed(run),
    family="cfd",
    env="openfoam",
    tools=(
        Tool("simpleFoam", version=None),
        Tool("mpiexec"),
    ),
    packaged_paths=((TUTORIALS, "openfoam-examples"),),
    list_params=("prepare",),
    headline=("time_per_step",),
    run_time=JOB_TIME,
    run_cpu_time=JOB_CPU_TIME,
    mpi=True,
    check_params=check_params,
    planned_bytes=planned_bytes,
    creates_files=True,
    tasks=tasks,
    runtime_s=runtime_s,
    page_cache=page_cache_rule("openfoam", planned_bytes),
)
