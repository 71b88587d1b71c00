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

from tierbench import matrix  # noqa: E402
from tierbench.errors import ConfigError  # noqa: E402
from tierbench.workloads import estimate, registry  # noqa: E402
from tierbench.workloads import get as get_workload  # noqa: E402


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
        raise WorkflowError(str(error)) from None
    os.environ.update(variables)
    for folder in reversed(folders):
        _prepend_env("PATH", folder)
    return hardware


HARDWARE = _hardware()


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
        raise WorkflowError(str(error)) from None
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


def report_inputs(studies):
    """Everything the HTML report of some studies is made from."""
    return {
        "summaries": [f"{OUT}/{s}/summary.csv" for s in studies],
        "results": [f"{OUT}/{s}/results.csv" for s in studies],
        "provenance": [f"{OUT}/{s}/provenance/tiers.json" for s in studies],
        "plans": [f"{OUT}/{s}/plan.json" for s in studies],
        # each study's run recorded in the results database (its run id is shown)
        "runs": [f"{OUT}/{s}/run.json" for s in studies],
        "preflights": [f"{OUT}/{s}/preflight.json" for s in studies],
        "nodes": [f"{OUT}/{s}/provenance/nodes.json" for s in studies],
        "figures": [
            f"{OUT}/{s}/figures/{family}"
            for s in studies
            for family in study_families(s)
        ],
        "verdicts": [
            f"{OUT}/{s}/verdict.json" for s in studies if STUDIES[s].get("document")
        ],
        "fidelity": [f"{OUT}/{s}/fidelity.json" for s in studies if holds_a_pair(s)],
        "repetitions": [
            f"{OUT}/{s}/repetitions.json"
            for s in studies
            if matrix.adaptive(STUDIES[s])
        ],
    }


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


@per_job
def bench_slots(wildcards):
    """Resource `bench`: 1 = one benchmark at a time (the profile caps bench=1), 0 = left to
    Slurm, which keeps apart the jobs that must not overlap (bench_slurm_extra).

    A function: the executor is known only once the workflow is parsed.
    """
    return cluster.bench_slots(executor_name())


def bench_threads(workload):
    """Threads of a benchmark job: the workload's own, and on this machine every core.

    Benchmarks run one at a time, but a figure or report job could still run
    beside one and take its CPU: in three paper runs, dd's 200 MB buffered
    write to the disk ranged from 760 to 6,500 MB/s in one run and from 6,100
    to 6,700 MB/s alone. Locally, then, a benchmark holds all cores (Snakemake
    caps threads at --cores) unless `exclusive: true` lets benchmarks run side
    by side; under Slurm a job asks for what it uses (the dry run shows what a
    local run would do, as it does for the MPI launcher).
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
    """Resource `nodes`: the nodes a point spans (its `nodes` estimate, e.g. nodes x ensemble).

    An MPI point that names none is packed on as few nodes as hold its tasks
    (the hardware file's `cores` per node): its ranks then share the node's
    local tiers, as on this machine. Unset where neither says.
    """
    cores = HARDWARE.get("cores")
    tasks = point_resource(workload, "tasks")

    @per_job
    def nodes(wildcards):
        asked = estimate(workload, "nodes", point_of(wildcards, workload).params)
        if asked is None and cores and get_workload(workload).mpi:
            return -(-tasks(wildcards) // cores)
        return asked

    return nodes


def bench_runtime(workload):
    """Resource `runtime` (minutes): from the workload's `runtime_s(params)` estimate."""

    @per_job
    def runtime(wildcards):
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
    """Resource `mem_mb_per_cpu` for MPI jobs: `mem_mb` spread over the tasks, so
    each `srun --exact` launch in the allocation gets its share and ensemble
    members start together instead of waiting for the first one's memory."""
    total = bench_mem_mb(workload)
    tasks = point_resource(workload, "tasks")

    @per_job
    def mem_mb_per_cpu(wildcards):
        return -(-total(wildcards) // max(1, tasks(wildcards)))

    return mem_mb_per_cpu


def bench_slurm_extra(workload):
    """Resource `slurm_extra`: whole nodes with `exclusive: true`, and one benchmark at a time
    unless its nodes are exclusive and its tier node-local (tierbench.cluster.one_at_a_time).

    A function: the executor is known only once the workflow is parsed.
    """
    exclusive = bool(config.get("exclusive"))

    @per_job
    def extra(wildcards):
        if not cluster.on_slurm(executor_name()):
            return cluster.slurm_extra(exclusive)
        tier = TIERS[point_of(wildcards, workload).tier] if exclusive else {}
        return cluster.slurm_extra(exclusive, cluster.one_at_a_time(exclusive, tier))

    return extra


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


def mpi_launcher():
    """`srun --mpi=pmix` under Slurm, `mpiexec` locally, or the hardware file's `mpi`."""
    return cluster.mpi_launcher(executor_name(), HARDWARE)


def bench_mpi(workload):
    """Resource `mpi`: the launcher, for jobs of two tasks or more; unset for one.

    snakemake-executor-plugin-slurm refuses an MPI job of one task, so such a
    job runs as any other, inside a job step, and its launcher starts the one
    rank there (tierbench.workloads.cfd_proxy.launch_command).
    """
    tasks = point_resource(workload, "tasks")

    @per_job
    def mpi(wildcards):
        return mpi_launcher() if tasks(wildcards) > 1 else None

    return mpi


def paper_studies():
    """The document studies whose files are present, in document order."""
    return [study for study in PAPER_STUDIES if study in STUDIES]


def benchmark_resources(workload):
    """Resources of a workload's jobs, under the names snakemake-executor-plugin-slurm reads.

    An MPI workload asks for `tasks` ranks and memory per CPU (so each member
    of an ensemble gets its share of the allocation) and gets its launcher as
    the `mpi` resource; any other asks for one node and memory per job, or, with
    a `nodes` estimate, for those nodes and a task on each.
    """
    name = workload.name
    common = {
        "bench": bench_slots,
        "runtime": bench_runtime(name),
        "slurm_partition": SLURM_PARTITION,
        "slurm_extra": bench_slurm_extra(name),
    }
    if workload.mpi:
        return {
            **common,
            "mpi": bench_mpi(name),
            "tasks": point_resource(name, "tasks"),
            "nodes": bench_nodes(name),
            "cpus_per_task": 1,
            "mem_mb_per_cpu": bench_mem_mb_per_cpu(name),
        }
    if workload.nodes is not None:
        # a command on each of its nodes (stage: srun -N <n> --ntasks-per-node=1 cp):
        # Slurm keeps the nodes of a job only when it asks for a task on each
        nodes = bench_nodes(name)
        return {**common, "mem_mb": bench_mem_mb(name), "nodes": nodes, "tasks": nodes}
    return {**common, "mem_mb": bench_mem_mb(name), "nodes": 1}


#: The shell command of every benchmark job: one short line, pasteable to re-run
#: it by hand. A constant on purpose: Snakemake evaluates a rule's `shell:`
#: expression again when the job runs, so one built from the loop variable of
#: benchmarks.smk would be the last workload's in every job.
RUN_POINT = (
    "python -m tierbench.runner --plan {input.plan} --point {params.point:q}"
    " --rep {wildcards.rep}{params.launcher}{params.partner} --out {output} 2> {log}"
)


def launcher_option(workload):
    """Param `launcher`: ` --launcher <the MPI launcher>` for an MPI workload, else empty."""
    if not workload.mpi:
        return ""

    @per_job
    def option(wildcards):
        return f" --launcher {shlex.quote(mpi_launcher())}"

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
