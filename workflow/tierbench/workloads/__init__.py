"""The workload registry: each workload module declares itself once.

A workload is a module of this package, or of a sub-package of it (an application
beside its proxy and their helpers), named after the workload, that defines
``WORKLOAD = Workload(...)`` and has a parameter schema
``workflow/schemas/params/<name>.schema.yaml``. Everything else follows from that
declaration: the Snakemake rule that runs its points, the config schema's list of
workloads, the tools preflight checks and set-up installs, the figure family that
plots it and the resources its jobs ask for. Hooks are typed fields, so a misspelt
one is an error when the module is imported (at parse time), never a silent
fallback to default resources.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache

from ..packages import package_of

#: a function of a point's complete parameters
Hook = Callable[[dict], float] | None
#: the estimates a workload may give for one of its points, and what a point gets without one
HOOK_DEFAULTS = {
    "planned_bytes": 0,
    "threads": 1,
    "tasks": 1,
    "nodes": None,
    "runtime_s": None,
    "mem_mb": 0,
}


@dataclass(frozen=True)
class Tool:
    """A program a workload runs; the package that provides it is in tierbench.packages."""

    command: str
    #: how to ask it its version for the provenance; None: do not ask
    version: tuple[str, ...] | None = field(default=("--version",), kw_only=True)

    def __post_init__(self):
        package_of(self.command)  # a command the table lacks fails where it is declared

    @property
    def package(self) -> str:
        """The Debian/Ubuntu package that provides the command."""
        return package_of(self.command)


@dataclass(frozen=True)
class Pair:
    """A proxy, its real application, and how their points are matched and measured: what
    the fidelity table (tierbench.fidelity) compares, declared by the proxy (``stands_for``).
    """

    proxy: str
    real: str
    #: per what the output is counted: "write" (CFD) or "evaluation" (FE)
    unit: str
    #: parameters that must be equal for two points to be compared
    shape: tuple[str, ...]
    #: per workload, the parameters that make a point the no-output (or minimal) baseline
    baseline: dict = field(default_factory=dict)
    #: time per unit whose difference to the baseline is the I/O cost
    time_metric: str = ""
    #: the time the tier ratio is taken of
    headline: str = ""
    files: str = ""
    dirs: str | None = None
    #: what a proxy point must be set to to stand for this application (a proxy may also
    #: imitate something else, such as a document's own output, in the same study)
    imitates: dict = field(default_factory=dict)
    #: FE: the metric of increments per evaluation. Each solver converges in its own
    #: number of increments and writes its output per increment, so bytes are judged
    #: per increment, and per evaluation shown beside them
    increments: str | None = None
    #: FE: the metric of bytes per increment, each run's bytes over its increments (the
    #: evaluations' own counts, not the median's: ccx cuts back on some individuals only)
    increment_bytes: str | None = None
    #: a cost per write each workload measures within one run or job, preferred to the
    #: difference of a point and its baseline, which the machine's drift between two jobs
    #: minutes apart can move by more than a write costs: CFD's ``write_cost`` (the steps
    #: that write against those that do not), FE's ``output_cost_per_increment`` (each
    #: evaluation against the same analysis without field output, ``paired_baseline``);
    #: its standard error per run, where the workload gives one, is ``<cost_metric>_se``
    cost_metric: str | None = None
    #: the part of ``cost_metric`` spent in the kernel (FE: system CPU time, its system
    #: calls and page faults, where the file system's work is; the rest is formatting the
    #: output): beside a cost line, it tells a write path that is off from formatting
    cost_kernel_metric: str | None = None
    #: the compute: what it is called, its metric on a no-output baseline point and the same
    #: time measured within an output run (CFD: its steps without a write; FE: each
    #: evaluation's paired analysis without field output)
    compute: tuple[str, str, str] = ("", "", "")
    #: the proxy's metric of the compute it was set to (its target): set beside the
    #: application's measured compute, it tells a target that was off (the application
    #: timed in a slow minute) from a proxy whose work missed a right target
    compute_target: str | None = None
    #: the shape parameters that set how many bytes a write puts out (CFD: cells per rank;
    #: FE: elements): over shapes that differ in these alone the I/O cost per write is
    #: split into a part every write pays and a part per byte, proxy beside real
    size: tuple[str, ...] = ()
    #: the real application's parameters that name a user's own input (calculix's deck): a
    #: point with one runs a model the proxy does not imitate, and is never compared
    own_input: tuple[str, ...] = ()
    #: CFD: the metric of an ensemble's member timed alone in the same job. Without
    #: output, an ensemble's time per step over it is what the members' compute loses to
    #: each other (caches, memory bandwidth), compared proxy beside real
    alone: str | None = None

    @property
    def write_unit(self) -> str:
        """What one write is: a write time (CFD), an increment's output (FE)."""
        return "increment" if self.increments else self.unit


@dataclass(frozen=True, kw_only=True)
class Workload:
    """One workload: how to run a point and what a point needs.

    ``run(job) -> list[metric dict]`` measures one repetition (see
    :mod:`tierbench.runner`). ``check_params`` holds only the cross-field rules
    a JSON schema cannot state; the schema fills in the defaults.
    """

    name: str
    summary: str
    run: Callable
    #: the figure family (tierbench.figures.<family>) that plots it; generic plots any workload
    family: str = "generic"
    #: conda environment file envs/<env>.yaml its jobs use with --software-deployment-method conda
    env: str = "python"
    tools: tuple[Tool, ...] = ()
    #: folders a parameter may name that a Debian/Ubuntu package installs, as (path prefix,
    #: package): set-up installs the package for a study that names a path below the prefix
    #: (openfoam's ``case`` in the tutorials of openfoam-examples)
    packaged_paths: tuple[tuple[str, str], ...] = ()
    #: started through the `mpi` launcher with `tasks` ranks (mpiexec, srun --mpi=pmix); its
    #: jobs hold a core per rank (``threads`` defaults to ``tasks``)
    mpi: bool = False
    #: for a proxy: the real application it stands for, and how their points are matched
    #: and measured (the report checks its fidelity)
    stands_for: Pair | None = None
    #: the metrics that say what a faster tier buys a job (the report's first screen ranks the
    #: tiers on them); the first a point measured counts. Times: lower is better; rates: higher.
    headline: tuple[str, ...] = ()
    #: the metric (s) that times one whole run, the span a traced run counts the job's calls
    #: over: its time on a tier it did not run on is predicted from it (tierbench.predict)
    run_time: str = ""
    #: the metric (s) of the same run's CPU time, user and system: what the job computed,
    #: which waiting for a slow tier does not add to (tierbench.predict)
    run_cpu_time: str = ""
    #: where its writes go on a tier with a device behind it: ``page_cache(params, limits)``,
    #: limits the node's tierbench.pagecache.memory_limits (None: not read), returns
    #: tierbench.pagecache.result(...), mostly buffered_write(...). None: its points' page
    #: cache is ``unknown`` in the report
    page_cache: Callable[[dict, dict | None], dict] | None = None
    #: False: its points store nothing on their tier (STREAM measures memory), so the page
    #: cache does not arise
    writes_to_tier: bool = True
    #: every write of its output creates files or folders on the tier (not one file written
    #: once, as dd's): on a network file system each is a round trip to the server that no
    #: page cache absorbs (tierbench.pagecache)
    creates_files: bool = False
    #: (files, folders) one write creates on the tier, from a point's parameters, where the
    #: workload can tell; None: it cannot
    created_per_write: Callable[[dict], tuple[int, int]] | None = None
    check_params: Callable[[dict], None] | None = None
    #: parameters that name another tier of the run (a tier's name, or ``shared``): resolved
    #: when the study is planned, so a job's spec carries ``<param>_path`` and the rest of
    #: that tier (tierbench.matrix.named_tier); the named tier itself gets no point
    tier_params: tuple[str, ...] = ()
    #: parameters whose value is itself a list (an argv, input files): a list there is one
    #: value, and only a list of lists is an axis (tierbench.matrix.is_axis)
    list_params: tuple[str, ...] = ()
    #: counts its own system calls where the experiment asks (``count_syscalls``), tracing
    #: only the application's processes: the runner then attaches no strace of its own
    traces_itself: bool = False
    planned_bytes: Hook = None
    threads: Hook = None
    tasks: Hook = None
    #: cluster nodes a job asks for (None: Slurm chooses); for an MPI workload, or one that
    #: starts a command on each node itself (stage: srun -N), which then asks for a task on each
    nodes: Hook = None
    runtime_s: Hook = None
    mem_mb: Hook = None

    def __post_init__(self):
        for hook in ("run", "check_params", "created_per_write", "page_cache", *HOOK_DEFAULTS):
            value = getattr(self, hook)
            if value is not None and not callable(value):
                raise TypeError(f"workload {self.name}: {hook} must be a function of the params")
        if self.stands_for is not None and self.stands_for.proxy != self.name:
            raise TypeError(f"workload {self.name}: stands_for must be Pair(proxy={self.name!r})")

    @property
    def schema(self) -> str:
        """The parameter schema, relative to workflow/schemas/."""
        return f"params/{self.name}.schema.yaml"

    def estimate(self, hook: str, params: dict):
        """What one point needs (a ``hook`` of HOOK_DEFAULTS), or its default."""
        if hook not in HOOK_DEFAULTS:
            raise KeyError(f"no such workload estimate: {hook} (known: {', '.join(HOOK_DEFAULTS)})")
        function = getattr(self, hook)
        if function is None and hook == "threads" and self.mpi:
            # every rank is a process on a core of its own: locally, Snakemake must not
            # start another job on a core a rank needs (a rank that waits for a
            # descheduled peer slows the whole run several times over)
            function = self.tasks
        return function(params) if function is not None else HOOK_DEFAULTS[hook]


@cache
def modules() -> dict[str, str]:
    """Every module of this package and of its sub-packages, by its own name: the dotted
    path below this package. A workload's name is its module's own name, so the
    names are unique across the sub-packages."""
    found = {}

    def walk(path: str, prefix: str) -> None:
        for info in pkgutil.iter_modules([path]):
            if info.ispkg:
                walk(os.path.join(path, info.name), f"{prefix}{info.name}.")
            elif info.name in found:
                raise TypeError(
                    f"two modules named {info.name}: {found[info.name]}, {prefix}{info.name}"
                )
            else:
                found[info.name] = f"{prefix}{info.name}"

    for path in __path__:
        walk(path, "")
    return found


def _declared(module_name: str) -> Workload | None:
    """The WORKLOAD a module of this package declares (None: a helper module, not a workload)."""
    module = importlib.import_module(f"{__name__}.{modules()[module_name]}")
    declared = getattr(module, "WORKLOAD", None)
    if declared is not None and (
        not isinstance(declared, Workload) or declared.name != module_name
    ):
        raise TypeError(f"{module.__name__}.WORKLOAD must be Workload(name={module_name!r}, ...)")
    return declared


@cache
def registry() -> dict[str, Workload]:
    """Every workload of this package, by name, in name order."""
    found = {}
    for name in modules():
        declared = _declared(name)
        if declared is not None:
            found[declared.name] = declared
    return dict(sorted(found.items()))


@cache
def get(name: str) -> Workload:
    """One workload; only its own module is imported (a job's environment has its tools only)."""
    declared = _declared(name) if name in modules() else None
    if declared is None:
        raise KeyError(f"no workload {name} (known: {', '.join(registry())})")
    return declared


@cache
def find(name: str) -> Workload | None:
    """The workload, or None for a name the registry does not know (the results of a
    workload since renamed or removed)."""
    try:
        return get(name)
    except KeyError:
        return None


def estimate(workload: str, name: str, params: dict):
    """What one point of ``workload`` needs: ``get(workload).estimate(name, params)``."""
    return get(workload).estimate(name, params)
