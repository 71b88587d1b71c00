"""Expand the configuration into points and hold every input function.

Rules stay small: they name paths, and the functions below turn wildcards into
the inputs and parameters a job needs.
"""

import inspect
import json
import os
import shlex
import socket
import sys
from pathlib import Path

from snakemake.common import overwrite_function_params
from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

# Snakemake starts a local `run:` job (the plan rule) through a shell with the
# path of the Python running it unquoted (snakemake/snakemake#3211): from a
# clone in a folder whose path has a space, every run stopped at its first job
# with only "sh: 1: <the path up to the space>: not found".
if shlex.quote(sys.executable) != sys.executable:
    raise WorkflowError(
        f"Snakemake cannot run this pipeline with the Python at {sys.executable!r}: it "
        "starts jobs through a shell with that path unquoted (snakemake/snakemake#3211). "
        "Put the clone and its .venv in a folder whose path has no spaces or quotes."
    )

# The tierbench package lives in workflow/; jobs (local, conda or Slurm) find
# it through PYTHONPATH, which they inherit from this process. Without conda,
# `python` in a job is the interpreter running Snakemake (the project venv);
# with --software-deployment-method conda the job's env comes first on PATH.
PACKAGE_DIR = str(Path(workflow.basedir) / "workflow")
sys.path.insert(0, PACKAGE_DIR)


def _prepend_env(name, entry):
    parts = [p for p in os.environ.get(name, "").split(os.pathsep) if p and p != entry]
    os.environ[name] = os.pathsep.join([entry] + parts)


_prepend_env("PYTHONPATH", PACKAGE_DIR)
_prepend_env("PATH", os.path.dirname(sys.executable))

from tierbench import matrix, units  # noqa: E402
from tierbench.errors import ConfigError  # noqa: E402
from tierbench.workloads import estimate, registry  # noqa: E402
from tierbench.workloads import get as get_workload  # noqa: E402


def _validate_config():
    """Snakemake's validation, which fills in the schema's defaults; a mistake stops the
    run with the key and what is wrong with it as its last line, not a dump of the
    whole configuration."""
    schema = Path(workflow.basedir) / "workflow/schemas/config.schema.yaml"
    try:
        validate(config, str(schema))
    except WorkflowError as error:
        # jsonschema's ValidationError, which Snakemake raised its error in
        cause = error.__context__
        if not hasattr(cause, "absolute_path"):
            raise
        where = ".".join(str(p) for p in cause.absolute_path) or "(top level)"
        raise SystemExit(f"invalid configuration: {where}: {cause.message}") from None


_validate_config()


def per_job(func):
    """Mark a function Snakemake calls for every job, and give it its signature now.

    Snakemake inspects an input or resource function's signature on each
    call, several times for every job, which a large study's dry run pays on
    every call.
    """
    overwrite_function_params(func, inspect.signature(func).parameters)
    return func


BASE = Path(workflow.basedir)
PAPER_STUDIES = matrix.PAPER_STUDIES
#: every workload of the registry (tierbench.workloads): one rule each, see benchmarks.smk
WORKLOADS = registry()


def machine_name():
    """What this run's results belong to: the hardware file, else the host.

    The name is handed to every job in the environment: a job that re-reads
    this file on a compute node must key its outputs by the submit host's
    machine, not by the node it runs on.
    """
    name = config.get("hardware") or os.environ.get("TIERBENCH_MACHINE")
    name = name or socket.gethostname().split(".")[0]
    return "".join(c if c.isalnum() or c in "_.-" else "_" for c in name)


MACHINE = machine_name()
os.environ["TIERBENCH_MACHINE"] = MACHINE
#: every output of this run lives under results/<machine>/: machines never share a path
OUT = f"results/{MACHINE}"
#: one database of every finished study run, of every machine (`database:` moves it)
DATABASE = config.get("database") or "results/tierbench.sqlite"
RAW = f"{OUT}/{{study}}/raw/{{workload}}/{{experiment}}/{{tier}}/{{point}}/rep{{rep}}.json"
#: a benchmark job's log: the same path as its raw record, under logs/
RAW_LOG = f"{OUT}/{{study}}/logs/{{workload}}/{{experiment}}/{{tier}}/{{point}}/rep{{rep}}.log"
REFERENCE_CSVS = sorted(str(p) for p in (BASE / "config/reference").glob("*.csv"))


envvars:
    "TIERBENCH_MACHINE",


def _hardware():
    """The hardware file (empty without one); its environment is set for the run and its jobs."""
    if not config.get("hardware"):
        return {}
    try:
        hardware = matrix.load_hardware(config["hardware"], BASE / "config/hardware")
        variables, folders = matrix.site_environment(hardware)
    except ConfigError as error:
        raise SystemExit(str(error)) from None  # its last line
    os.environ.update(variables)
    for folder in reversed(folders):
        _prepend_env("PATH", folder)
    return hardware


HARDWARE = _hardware()


def _queue_limit():
    """The hardware file's `allocations: queue`: at most that many of a run's jobs wait in
    the queue at once (--jobs lowered to it). A local run has no --jobs and keeps none.
    """
    queue = HARDWARE.get("allocations", {}).get("queue")
    jobs = workflow.global_resources["_nodes"].value
    if queue and jobs is not None and jobs > queue:
        workflow.global_resources["_nodes"] = queue


_queue_limit()
# One benchmark at a time (each takes bench=1), also where no profile says so: inside a
# Slurm allocation, whose Snakemake lays its group's jobs end to end only under this
# limit (otherwise it would add their CPUs and nodes up for the step it starts them in).
workflow.global_resources.setdefault("bench", 1)
# One notebook at a time (each figures job takes notebook=1): Jupyter's client picks its
# kernel's ports by binding and releasing them, and two kernels started at once may pick
# the same one; the loser waits a minute and fails (snakemake/snakemake#3689).
workflow.global_resources.setdefault("notebook", 1)


def _load():
    try:
        matrix.validate_config(config)
        tiers = matrix.resolve_tiers(config, BASE / "config/hardware", os.getcwd())
        studies = {config["study"]: matrix.study_of(config)}
        for study_id in PAPER_STUDIES:
            path = BASE / "config/studies" / f"{study_id}.yaml"
            if study_id not in studies and path.is_file():
                studies[study_id] = matrix.load_study(path, config)
        points = {}
        for study in studies.values():
            matrix.repetition_bounds(
                study
            )  # a range whose max is below its min stops here
            for point in matrix.expand_study(study, tiers, config["scale"]):
                points[point.key] = point
    except ConfigError as error:
        raise SystemExit(str(error)) from None  # its last line
    return tiers, studies, points


TIERS, STUDIES, POINTS = _load()
ACTIVE_STUDY = config["study"]
#: proxy point key -> the application point its repetitions run right after
PARTNERS = matrix.fidelity_partners(list(POINTS.values()))


wildcard_constraints:
    study="[a-z][a-z0-9_]*",
    experiment="[a-z][a-z0-9_]*",
    tier="[a-z][a-z0-9_]*",
    point="[^/]+",
    rep="[0-9]+",
    family="[a-z_]+",


def study_points(study):
    return [point for point in POINTS.values() if point.study == study]


def raw_path(point, rep):
    return RAW.format(
        study=point.study,
        workload=point.workload,
        experiment=point.experiment,
        tier=point.tier,
        point=point.name,
        rep=rep,
    )


def raw_records(study, experiments=None):
    """Raw JSON records of a study's first round (or of some of its experiments)."""
    spec = STUDIES[study]
    reps = {e["name"]: matrix.repetitions(spec, e["name"]) for e in spec["experiments"]}
    return [
        raw_path(p, rep)
        for p in study_points(study)
        if experiments is None or p.experiment in experiments
        for rep in reps[p.experiment]
    ]


def study_records(wildcards):
    """Every raw record a study's tables are made of: the first round and, in a study
    with a repetition range, the further repetitions its undecided lessons asked for."""
    study = wildcards.study
    records = raw_records(study)
    if not matrix.adaptive(STUDIES[study]):
        return records
    decided = checkpoints.extra_repetitions.get(study=study).output[0]
    wanted = json.loads(Path(decided).read_text())["points"]
    first = matrix.repetition_bounds(STUDIES[study])[0]
    fixed = matrix.fixed_repetitions(STUDIES[study])
    for point in study_points(study):
        if point.experiment in fixed:
            continue
        more = wanted.get(matrix.point_id(point), first)
        records += [raw_path(point, rep) for rep in range(first + 1, more + 1)]
    return records


def holds_a_pair(study):
    """Does the study run a proxy beside the real application it stands for?"""
    workloads = {p.workload for p in study_points(study)}
    pairs = [WORKLOADS[w].stands_for for w in workloads if WORKLOADS[w].stands_for]
    return any(pair.real in workloads for pair in pairs)


def traced_records(wildcards):
    """Raw records of the study's experiments with count_syscalls: whether strace counted."""
    experiments = STUDIES[wildcards.study]["experiments"]
    return raw_records(
        wildcards.study, {e["name"] for e in experiments if e.get("count_syscalls")}
    )


def predicts(study):
    """Does the study time and trace the same job (tierbench.predict: its time on other
    tiers)? The same workload, parameters and scale presets, traced in one experiment.
    """

    def job(e):
        return (
            e["workload"],
            json.dumps([e.get("params"), e.get("scale")], sort_keys=True),
        )

    experiments = STUDIES[study]["experiments"]
    traced = {job(e) for e in experiments if e.get("count_syscalls")}
    timed = {job(e) for e in experiments if not e.get("count_syscalls")}
    return any(WORKLOADS[workload].run_time for workload, _ in traced & timed)


def fidelity_of(wildcards):
    """A study's fidelity.json where it runs a proxy beside its application; else none."""
    if holds_a_pair(wildcards.study):
        return [f"{OUT}/{wildcards.study}/fidelity.json"]
    return []


def paper_of(study):
    """What a paper study's verdicts judge: its document and the lessons its file declares
    (and its published figure, which the verdict carries to the paper figures)."""
    spec = STUDIES[study]
    return {
        "study": study,
        **{key: spec[key] for key in matrix.DOCUMENT_KEYS if key in spec},
    }


def document_parameter(study):
    """papermill's parameter for the document a study re-runs, whose published rows the
    figures draw beside ours: raw (-r), so "001" stays text; None for a study without one.
    """
    document = STUDIES[study].get("document")
    if not document:
        return "-p document None"
    return f"-r document {shlex.quote(str(document))}"


def verdict_of(wildcards):
    """A paper study's verdict.json; other studies have none."""
    if STUDIES[wildcards.study].get("document"):
        return [f"{OUT}/{wildcards.study}/verdict.json"]
    return []


def study_tiers(study):
    return sorted({point.tier for point in study_points(study)})


def study_families(study):
    """Figure families of a study; a study that re-runs a document also gets `paper`."""
    families = {WORKLOADS[point.workload].family for point in study_points(study)}
    if STUDIES[study].get("document"):
        families.add("paper")
    return sorted(families)


def point_of(wildcards, workload):
    key = (
        wildcards.study,
        workload,
        wildcards.experiment,
        wildcards.tier,
        wildcards.point,
    )
    if key not in POINTS:
        raise WorkflowError(f"no such point in the configuration: {'/'.join(key)}")
    return POINTS[key]


def experiment_description(point):
    for experiment in STUDIES[point.study]["experiments"]:
        if experiment["name"] == point.experiment:
            return experiment.get("description", "")
    return ""


def job_point(workload):
    """Param: how a job names its point in the study's plan (workload/experiment/tier/point)."""

    @per_job
    def point(wildcards):
        return f"{workload}/{wildcards.experiment}/{wildcards.tier}/{wildcards.point}"

    return point


def study_plan(study):
    """Everything the jobs of a study read from its plan.json (see matrix.study_plan)."""
    points = study_points(study)
    tools = {
        tool.command: [tool.command, *tool.version]
        for name in sorted({p.workload for p in points})
        for tool in WORKLOADS[name].tools
        if tool.version is not None
    }
    return matrix.study_plan(
        STUDIES[study],
        points,
        TIERS,
        machine=MACHINE,
        safety_factor=config.get("safety_factor", 1.2),
        tools=tools,
    )


def benchmark_inputs(workload):
    """Input function: a benchmark waits for the preflight, if measured its warm-up, and a
    proxy's repetition for the same repetition of its application (its partner)."""

    @per_job
    def inputs(wildcards):
        needed = {
            "plan": f"{OUT}/{wildcards.study}/plan.json",
            "preflight": f"{OUT}/{wildcards.study}/preflight.json",
        }
        if int(wildcards.rep) > 0 and STUDIES[wildcards.study].get("warmup", True):
            needed["warmup"] = RAW.format(
                **{**dict(wildcards.items()), "workload": workload, "rep": 0}
            )
        partner = partner_run(wildcards, workload)
        if partner:
            needed["partner"] = partner
        previous = run_before(wildcards, workload)
        if previous:
            needed["previous"] = previous
        return needed

    return inputs


def partner_run(wildcards, workload):
    """The raw record a proxy's repetition runs after: its application's same measured
    repetition of the first round, or None. With the proxy rules' higher priority and one
    benchmark at a time, the two run back to back, so drift between them is paired out.
    """
    key = (
        wildcards.study,
        workload,
        wildcards.experiment,
        wildcards.tier,
        wildcards.point,
    )
    partner, rep = PARTNERS.get(key), int(wildcards.rep)
    if partner is None or rep < 1:
        return None
    spec = STUDIES[wildcards.study]
    rounds = (
        matrix.repetitions(spec, e) for e in (wildcards.experiment, partner.experiment)
    )
    return raw_path(partner, rep) if all(rep in reps for reps in rounds) else None


def report_inputs(studies, elsewhere=None):
    """Everything the HTML report of some studies is made from; a study in `elsewhere`
    (study -> machine) is read from that machine's results, which an earlier run made.
    """
    elsewhere = elsewhere or {}

    def out(study):
        return f"results/{elsewhere[study]}" if study in elsewhere else OUT

    return {
        "summaries": [f"{out(s)}/{s}/summary.csv" for s in studies],
        "results": [f"{out(s)}/{s}/results.csv" for s in studies],
        "provenance": [f"{out(s)}/{s}/provenance/tiers.json" for s in studies],
        "plans": [f"{out(s)}/{s}/plan.json" for s in studies],
        # each study's run recorded in the results database (its run id is shown)
        "runs": [f"{out(s)}/{s}/run.json" for s in studies],
        "preflights": [f"{out(s)}/{s}/preflight.json" for s in studies],
        "nodes": [f"{out(s)}/{s}/provenance/nodes.json" for s in studies],
        "allocations": [f"{out(s)}/{s}/provenance/allocations.json" for s in studies],
        "figures": [
            f"{out(s)}/{s}/figures/{family}"
            for s in studies
            for family in study_families(s)
        ],
        "verdicts": [
            f"{out(s)}/{s}/verdict.json" for s in studies if STUDIES[s].get("document")
        ],
        "fidelity": [f"{out(s)}/{s}/fidelity.json" for s in studies if holds_a_pair(s)],
        "predictions": [
            f"{out(s)}/{s}/prediction.json" for s in studies if predicts(s)
        ],
        "repetitions": [
            f"{out(s)}/{s}/repetitions.json"
            for s in studies
            if matrix.adaptive(STUDIES[s])
        ],
    }


def deleted_since(page, studies, elsewhere=None):
    """The studies' records and tables that are missing while their page is there. Snakemake
    makes a deleted file again only for a job that must run, and a page still newer than
    every file left needs nothing ("Nothing to be done"); listed on the target, they are
    measured or made again, and the page anew."""
    if not os.path.exists(page):
        return []
    groups = report_inputs(studies, elsewhere).values()
    tables = [path for group in groups for path in group]
    here = [s for s in studies if s not in (elsewhere or {})]
    records = [record for s in here for record in raw_records(s)]
    return [path for path in tables + records if not os.path.exists(path)]


def study_title(study):
    return STUDIES[study].get("title", study)


def point_resource(workload, name):
    """Input function: a job resource (threads, tasks) the workload estimates from its point."""

    @per_job
    def resource(wildcards):
        params = point_of(wildcards, workload).params
        return int(estimate(workload, name, params))

    return resource


# Resources of the jobs, under the names snakemake-executor-plugin-slurm reads
# (runtime in minutes, mem_mb, slurm_partition, slurm_extra, mpi, tasks, nodes).
# The rules are the one place they are declared: no profile sets
# default-resources or set-resources. Running locally, only `bench` and the
# threads matter; the rest is ignored.
from tierbench import cluster  # noqa: E402

_WARNED_PARTITIONS = set()


def executor_name():
    """'local', 'slurm' (submitting), 'slurm-jobstep' (inside a Slurm job), ..."""
    plugin = workflow.executor_plugin
    return plugin.name if plugin is not None else None


def bench_threads(workload):
    """Threads of a benchmark job: the workload's own, and on this machine every core.

    Benchmarks run one at a time, but a figure or report job could still run
    beside one and take its CPU: in three paper runs, dd's 200 MB buffered
    write to the disk ranged from 760 to 6,500 MB/s in one run and from 6,100
    to 6,700 MB/s alone. Locally, then, a benchmark holds all cores (Snakemake
    caps threads at --cores) unless `exclusive: true` lets benchmarks run side
    by side; under Slurm a job asks for what it uses (the dry run shows what a
    local run would do; its MPI launcher is the planned run's, see planned_executor).
    """
    own = point_resource(workload, "threads")
    if config.get("exclusive"):
        return own

    @per_job
    def threads(wildcards):
        # a dry run shows a local run
        local = executor_name() in (None, "local", "dryrun")
        cores = workflow._cores if local else None
        return max(own(wildcards), cores or 0)

    return threads


def bench_nodes(workload):
    """Resource `nodes`: the nodes a point spans (point_nodes); in an allocation, its."""

    @per_job
    def nodes(wildcards):
        if in_allocations():
            return allocation_of(wildcards, workload).nodes
        return point_nodes(point_of(wildcards, workload))

    return nodes


def bench_tasks(workload):
    """Resource `tasks`: what the workload estimates; in an allocation, as many on every
    node as any of its jobs puts on one (with `--ntasks-per-node`, bench_slurm_extra).
    """
    own = (
        point_resource(workload, "tasks")
        if get_workload(workload).mpi
        else bench_nodes(workload)
    )

    @per_job
    def tasks(wildcards):
        if in_allocations():
            return allocation_of(wildcards, workload).tasks
        return own(wildcards)

    return tasks


def point_nodes(point):
    """The nodes a point spans: its `nodes` estimate (e.g. nodes x ensemble), else under
    Slurm each member's nodes times the members (member_nodes), else an MPI point packed
    on as few nodes as hold its tasks (the hardware file's `cores` per node). None where
    nothing says."""
    workload = get_workload(point.workload)
    asked = estimate(point.workload, "nodes", point.params)
    if asked is not None or not workload.mpi:
        return asked
    each = member_nodes(point)
    if each:
        return each * int(point.params.get("ensemble", 1))
    cores = HARDWARE.get("cores")
    return (
        -(-int(estimate(point.workload, "tasks", point.params)) // cores)
        if cores
        else None
    )


def member_nodes(point):
    """Nodes of its own for each member of an MPI point under Slurm, when it names none:
    as many as hold one member's ranks (the hardware file's `cores` per node), where the
    partition has that many for every member (document 001 gave each member nodes of its
    own); None otherwise (members packed, as Slurm places them)."""
    cores = HARDWARE.get("cores")
    if not in_allocations() or not cores or not get_workload(point.workload).mpi:
        return None
    if point.params.get("nodes"):
        return None
    each = -(-int(point.params["ranks"]) // cores)
    members = int(point.params.get("ensemble", 1))
    return each if each * members <= cluster.nodes_to_spread_over(HARDWARE) else None


def bench_runtime(workload):
    """Resource `runtime` (minutes): from the workload's `runtime_s(params)` estimate; in an
    allocation its share, which Snakemake adds up to the allocation's time limit."""

    @per_job
    def runtime(wildcards):
        if in_allocations():
            return packed(wildcards, workload)[1]
        params = point_of(wildcards, workload).params
        return cluster.runtime_minutes(estimate(workload, "runtime_s", params))

    return runtime


def bench_mem_mb(workload):
    """Resource `mem_mb`: what the point writes (tmpfs data or page cache) plus a base."""
    from tierbench.units import parse_size

    node_memory = parse_size(HARDWARE["memory"]) if HARDWARE.get("memory") else None

    @per_job
    def mem_mb(wildcards):
        params = point_of(wildcards, workload).params
        return cluster.memory_mb(
            estimate(workload, "planned_bytes", params),
            estimate(workload, "mem_mb", params),
            node_memory,
        )

    return mem_mb


def bench_mem_mb_per_cpu(workload):
    """Resource `mem_mb_per_cpu`: `mem_mb` spread over the job's CPUs (an MPI job's
    tasks, another's threads or nodes), so each `srun --exact` launch in the allocation
    gets its share and ensemble members start together instead of waiting for the first
    one's memory. At most a CPU's share of a node: an allocation asks for the most any
    of its jobs does per CPU, times its CPUs."""
    total = bench_mem_mb(workload)
    spec = get_workload(workload)
    cpus = point_resource(
        workload, "tasks" if spec.mpi else ("nodes" if spec.nodes else "threads")
    )
    node_share = None
    if HARDWARE.get("memory") and HARDWARE.get("cores"):
        from tierbench.units import parse_size

        node_share = int(0.9 * parse_size(HARDWARE["memory"]) / 1e6 / HARDWARE["cores"])

    @per_job
    def mem_mb_per_cpu(wildcards):
        share = -(-total(wildcards) // max(1, cpus(wildcards)))
        return min(share, node_share) if node_share else share

    return mem_mb_per_cpu


def bench_slurm_extra(workload):
    """Resource `slurm_extra`: whole nodes with `exclusive: true` (one value for all jobs of an
    allocation; allocations run one at a time, see in_allocations).

    A function: the executor is known only once the workflow is parsed.
    """
    exclusive = bool(config.get("exclusive"))

    @per_job
    def extra(wildcards):
        if not in_allocations():
            return cluster.slurm_extra(exclusive)
        per_node = allocation_of(wildcards, workload).tasks_per_node
        return cluster.slurm_extra(exclusive, tasks_per_node=per_node)

    return extra


def stop_if_slurm_cannot_be_asked():
    """Before a run submits anything: stop with the reason when Slurm cannot be asked
    (a cluster that is not up), not with a first job that fails minutes later."""
    if executor_name() != "slurm":
        return
    problem = cluster.slurm_problem()
    if problem:
        hint = (
            "./tierbench cluster up starts it"
            if config.get("hardware") == "minicluster"
            else "run where sbatch and sinfo work, or without --profile slurm"
        )
        # SystemExit, not WorkflowError: its message is then the run's last line
        raise SystemExit(f"Cannot submit to Slurm: {problem} ({hint}).")


@per_job
def slurm_partition(wildcards):
    """Resource `slurm_partition`: the tier's partition, else the hardware file's.

    When submitting to Slurm, a partition the cluster does not have is left
    out (the job goes to the default partition) and the job, which knows its
    point's partition from the spec, records the point as failed with the
    reason instead of measuring: one clear error per point, the rest runs.
    """
    tier = wildcards.get("tier")
    wanted = (
        TIERS[tier].get("partition") if tier in TIERS else HARDWARE.get("partition")
    )
    if not wanted or executor_name() != "slurm":
        return wanted or ""
    missing = cluster.missing_partitions(wanted, cluster.slurm_partitions())
    if not missing:
        return wanted
    if wanted not in _WARNED_PARTITIONS:
        _WARNED_PARTITIONS.add(wanted)
        known = ", ".join(sorted(cluster.slurm_partitions()))
        logger.warning(
            f"Slurm partition '{wanted}' of hardware file {config.get('hardware')} does not "
            f"exist on this cluster (partitions: {known}). Its jobs go to the default "
            "partition and record their points as failed, with this reason."
        )
    return ""


#: Resource `slurm_partition` of the rules: a function only when some partition is named.
SLURM_PARTITION = (
    slurm_partition
    if HARDWARE.get("partition") or any(t.get("partition") for t in TIERS.values())
    else ""
)


def planned_executor():
    """The executor of the run a job's params describe: a dry run's is the run it plans,
    Slurm for a hardware file whose scheduler is Slurm, else local (in_allocations too).
    A param that differs between the two made a dry run after a finished Slurm run list
    every job as changed (params are a rerun trigger), while the run itself had nothing
    to do."""
    executor = executor_name()
    if executor == "dryrun":
        return "slurm" if HARDWARE.get("scheduler") == "slurm" else "local"
    return executor


def mpi_launcher():
    """`srun --mpi=pmix` under Slurm, `mpiexec` locally, or the hardware file's `mpi`."""
    return cluster.mpi_launcher(planned_executor(), HARDWARE)


def bench_mpi(workload):
    """Resource `mpi`: the launcher, for jobs of two tasks or more; unset for one.

    snakemake-executor-plugin-slurm refuses an MPI job of one task, so such a
    job runs as any other, inside a job step, and its launcher starts the one
    rank there (tierbench.workloads.cfd.cfd_launch.launch_command).
    """
    tasks = point_resource(workload, "tasks")
    is_mpi = get_workload(workload).mpi

    @per_job
    def mpi(wildcards):
        if in_allocations():
            # one value for the whole group (Snakemake requires it of a text resource)
            ranks = allocation_of(wildcards, workload).tasks
            return mpi_launcher() if ranks > 1 else None
        return mpi_launcher() if is_mpi and tasks(wildcards) > 1 else None

    return mpi


# Allocations (tierbench.allocations): under the Slurm executor a study's benchmarks are
# packed into a few Slurm jobs, Snakemake job groups named by allocation_group. Each job
# takes bench=1, as locally: the group's jobs are then laid end to end (its time limit is
# their sum, its nodes their most), and one allocation runs at a time.
from functools import cache  # noqa: E402

from tierbench import allocations  # noqa: E402
from tierbench.units import parse_duration_minutes  # noqa: E402

#: the group of an allocation's jobs: Snakemake merges its unconnected parts into one job
ALLOCATION_GROUP = "allocation"


def in_allocations():
    """Are benchmarks packed into allocations? Under the Slurm executor, inside one of its
    allocations (where Snakemake runs the jobs with its local executor), and in a dry run
    for a hardware file whose scheduler is Slurm (the plan a user checks first)."""
    if executor_name() == "dryrun":
        return cluster.on_slurm(planned_executor())
    return cluster.on_slurm(executor_name()) or cluster.in_slurm_job()


def allocation_limits():
    """The site's limits from the hardware file's `allocations`; at most the partition's
    own time limit where Slurm can say (sinfo) and it has one, else a day."""
    wanted = HARDWARE.get("allocations", {})
    at_most = wanted.get("at_most")
    if at_most is None:
        at_most = cluster.partition_time_limit(HARDWARE.get("partition"))
        at_most = at_most or allocations.DEFAULT_AT_MOST_MINUTES
    else:
        at_most = parse_duration_minutes(at_most)
    return allocations.Limits(
        at_most_minutes=at_most,
        at_least_minutes=parse_duration_minutes(wanted.get("at_least", 0)),
        queue=wanted.get("queue"),
    )


def allocation_bench(point, rep):
    """A repetition as the packing sees it: its minutes, nodes, ranks and partition."""
    params, workload = point.params, point.workload
    tier = TIERS.get(point.tier, {})
    ranks = estimate(workload, "tasks", params) if get_workload(workload).mpi else 1
    nodes = point_nodes(point)
    return allocations.Bench(
        point=matrix.point_id(point),
        rep=rep,
        seconds=allocations.step_seconds(estimate(workload, "runtime_s", params)),
        nodes=int(nodes or 1),
        tasks=int(ranks),
        partition=tier.get("partition") or HARDWARE.get("partition") or "",
    )


def allocation_units(study, reps_of):
    """A study's jobs in the order they run: each point's warm-up and repetitions together,
    a proxy's interleaved with its application's. Snakemake submits of an allocation only
    the jobs that have no result yet, so a second run fills its allocations with what the
    first left (the time limit is of those jobs alone)."""
    proxies = {}
    for proxy_key, partner in PARTNERS.items():
        proxies.setdefault(partner.key, []).append(POINTS[proxy_key])
    paired = {proxy.key for group in proxies.values() for proxy in group}

    def to_run(point):
        return [allocation_bench(point, rep) for rep in reps_of(point)]

    units = []
    for point in study_points(study):
        if point.key in paired:
            continue
        unit = to_run(point)
        for proxy in proxies.get(point.key, []):
            unit = allocations.interleave(unit, to_run(proxy))
        units.append(unit)
    return units


def first_round(point):
    return matrix.repetitions(STUDIES[point.study], point.experiment)


@cache
def first_round_order(study):
    """A study's first round as it runs: units of jobs kept together, in order; in rounds
    (allocations.rounds) when the study asks for `order: rounds`. Cached: both the
    packing and each job's run before it read it."""
    units = allocation_units(study, first_round)
    return allocations.rounds(units) if matrix.in_rounds(STUDIES[study]) else units


_RUNS_BEFORE = {}


def run_before(wildcards, workload):
    """The raw record a job of a study in rounds waits for, so that its first round runs
    in that order: the run before it on its partition (allocations.predecessors); None
    for the first, for another order, and for the repetitions an adaptive study adds."""
    study = wildcards.study
    if not matrix.in_rounds(STUDIES[study]):
        return None
    if study not in _RUNS_BEFORE:
        _RUNS_BEFORE[study] = allocations.predecessors(first_round_order(study))
    point = point_of(wildcards, workload)
    found = _RUNS_BEFORE[study].get((matrix.point_id(point), int(wildcards.rep)))
    if found is None:
        return None
    point_id, rep = found
    return raw_path(POINTS[(study, *point_id.split("/"))], rep)


_ALLOCATIONS = {}
#: (point id, repetition) -> (its allocation, its whole minutes of the time limit)
_ALLOCATION_OF = {}


def study_allocations(study, extra=False):
    """The allocations of a study's first round, or of the repetitions its undecided
    lessons asked for (one more round, packed alike once the checkpoint has said)."""
    key = (study, extra)
    if key not in _ALLOCATIONS:
        reps_of = first_round
        if extra:
            # what the adaptive step decided, read as a file: inside an allocation the
            # checkpoint is not part of Snakemake's graph and cannot be asked
            decided = Path(f"{OUT}/{study}/repetitions.json")
            wanted = (
                json.loads(decided.read_text())["points"] if decided.exists() else {}
            )

            fixed = matrix.fixed_repetitions(STUDIES[study])

            def reps_of(point):
                if point.experiment in fixed:
                    return []
                last = first_round(point)[-1]
                return list(
                    range(last + 1, wanted.get(matrix.point_id(point), last) + 1)
                )

        limits = allocation_limits()
        made = allocations.pack(
            allocation_units(study, reps_of) if extra else first_round_order(study),
            limits,
            f"{study}-{'more' if extra else 'round1'}",
        )
        _ALLOCATIONS[key] = made
        for allocation in made:
            for job, share in allocation.shares().items():
                _ALLOCATION_OF[job] = (allocation, share)
        if made:
            what = "the added repetitions" if extra else "benchmarks"
            lines = [allocations.describe(a) for a in made]
            logger.info(
                f"Slurm allocations of study {study}, {what}:\n" + "\n".join(lines)
            )
        for line in allocations.short_ones(made, limits):
            logger.warning(line)
    return _ALLOCATIONS[key]


def allocation_plan(study):
    """What plan.json says of the allocations under Slurm (nothing locally)."""
    if not in_allocations():
        return {}
    return {
        "allocations": [a.summary() for a in study_allocations(study)],
        "allocation_limits": vars(allocation_limits()),
    }


def packed(wildcards, workload):
    """A benchmark job's allocation and its whole minutes of the allocation's time limit
    (Allocation.shares), its round packed on first asking."""
    point = point_of(wildcards, workload)
    rep, wanted = int(wildcards.rep), matrix.point_id(point)
    study_allocations(point.study, extra=rep not in first_round(point))
    if (wanted, rep) not in _ALLOCATION_OF:
        raise WorkflowError(f"no allocation holds {wanted} repetition {rep}")
    return _ALLOCATION_OF[(wanted, rep)]


def allocation_of(wildcards, workload):
    """The allocation a benchmark job runs in."""
    return packed(wildcards, workload)[0]


def allocation_group(workload):
    """Group: the allocation of a benchmark job under Slurm; None locally (no groups)."""

    @per_job
    def group(wildcards):
        if not in_allocations():
            return None
        name = allocation_of(wildcards, workload).name
        merge_allocation_parts(name)
        return name

    return group


@per_job
def setup_group(wildcards):
    """Group: under Slurm a study's preflight and probe are one job, not two to queue for."""
    return f"{wildcards.study}-setup" if in_allocations() else None


def merge_allocation_parts(name):
    """Snakemake submits each connected part of a group as a job of its own unless told how
    many parts to merge (--group-components, per group or per the group it was named
    from): every allocation merges all of its parts. Set as the graph is built, once the
    command line's settings have replaced those of the parse."""
    workflow.parent_groupids[name] = ALLOCATION_GROUP
    settings = workflow.group_settings
    if ALLOCATION_GROUP not in settings.group_components:
        settings.group_components = {
            **settings.group_components,
            ALLOCATION_GROUP: 10**9,
        }


def paper_studies():
    """The document studies whose files are present, in document order."""
    return [study for study in PAPER_STUDIES if study in STUDIES]


def repetition_budget(study):
    """`--budget SECONDS` of the study's `repetitions: {budget}`, else nothing."""
    budget = STUDIES[study].get("repetitions", {})
    budget = budget.get("budget") if isinstance(budget, dict) else None
    if budget is None:
        return ""
    return f"--budget {units.parse_duration_minutes(budget) * 60}"


def paper_elsewhere():
    """Document studies the paper page takes from another machine's results (study ->
    machine), each checked to be there: an earlier command ran them."""
    elsewhere = config.get("paper_elsewhere", {})
    for study, machine in elsewhere.items():
        verdict = Path("results", machine, study, "verdict.json")
        if study not in paper_studies() or not verdict.is_file():
            raise WorkflowError(
                f"paper_elsewhere: {verdict} is missing: run {study} on {machine} first"
                " (./tierbench paper runs document 001 on the cluster on one machine)"
            )
    return elsewhere


def benchmark_resources(workload):
    """Resources of a workload's jobs, under the names snakemake-executor-plugin-slurm reads.

    Every job asks for memory per CPU, so that each member of an ensemble gets
    its share of the allocation and the jobs of one allocation add up alike. An
    MPI workload asks for `tasks` ranks of one CPU each; any other for one task
    of its threads, or, with a `nodes` estimate, for those nodes and a task on
    each. `mpi` is the launcher (one value for all jobs of an allocation).
    """
    name = workload.name
    common = {
        "bench": 1,
        "runtime": bench_runtime(name),
        "slurm_partition": SLURM_PARTITION,
        "slurm_extra": bench_slurm_extra(name),
        "mpi": bench_mpi(name),
        "mem_mb_per_cpu": bench_mem_mb_per_cpu(name),
    }
    if workload.mpi or workload.nodes is not None:
        # stage runs a command on each of its nodes (srun -N <n> --ntasks-per-node=1 cp):
        # Slurm keeps the nodes of a job only when it asks for a task on each
        return {
            **common,
            "tasks": bench_tasks(name),
            "nodes": bench_nodes(name),
            "cpus_per_task": 1,
        }
    return {
        **common,
        "nodes": bench_nodes(name),
        "cpus_per_task": point_resource(name, "threads"),
    }


#: The shell command of every benchmark job: one short line, pasteable to re-run
#: it by hand. A constant on purpose: Snakemake evaluates a rule's `shell:`
#: expression again when the job runs, so one built from the loop variable of
#: benchmarks.smk would be the last workload's in every job.
RUN_POINT = (
    "python -m tierbench.runner --plan {input.plan} --point {params.point:q}"
    " --rep {wildcards.rep}{params.launcher}{params.partner} --out {output} 2> {log}"
)


def launcher_option(workload):
    """Param `launcher`: ` --launcher <the MPI launcher>` for an MPI workload, and under
    Slurm ` --member-nodes N`, the nodes of its own each member spans (member_nodes)."""
    if not workload.mpi:
        return ""

    @per_job
    def option(wildcards):
        each = member_nodes(point_of(wildcards, workload.name))
        spread = f" --member-nodes {each}" if each else ""
        return f" --launcher {shlex.quote(mpi_launcher())}{spread}"

    return option


def partner_option(workload):
    """Param `partner`: ` --partner <its application's record>` for a proxy's repetition
    that runs after its partner (partner_run), else empty: a proxy set to the application's
    compute takes it from the run just before its own."""
    if not workload.stands_for:
        return ""

    @per_job
    def option(wildcards):
        partner = partner_run(wildcards, workload.name)
        return f" --partner {shlex.quote(partner)}" if partner else ""

    return option


def write_json(data, path):
    """Write a file of the pipeline's own atomically: a reader never sees half of it."""
    tmp = Path(f"{path}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)
