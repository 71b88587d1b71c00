"""Expand the configuration into points and hold every input function.

Rules stay small: they name paths, and the functions below turn wildcards into
the inputs and parameters a job needs.
"""

import inspect
import json
import os
import sys
from pathlib import Path

from snakemake.common import overwrite_function_params
from snakemake.exceptions import WorkflowError

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
from tierbench.workloads import estimate  # noqa: E402


def per_job(func):
    """Mark a function Snakemake calls for every job, and give it its signature now.

    Snakemake inspects an input or resource function's signature on each
    call, several times for every job: a few percent of a large dry run.
    """
    overwrite_function_params(func, inspect.signature(func).parameters)
    return func


BASE = Path(workflow.basedir)
PAPER_STUDIES = [
    "fe_tmpfs",
    "cfd_dcpmm",
    "ramdisk_macos",
    "tmpfs_advent",
    "eagle_local",
]
RAW = "results/{study}/raw/{workload}/{experiment}/{tier}/{point}/rep{rep}.json"
REFERENCE_CSVS = sorted(str(p) for p in (BASE / "config/reference").glob("*.csv"))
#: workload -> the notebook (figure family) that plots it
FIGURE_FAMILY = {
    "fio": "fio",
    "dd": "sequential",
    "pv": "pv",
    "stream": "sequential",
    "fe_proxy": "fe",
    "cfd_proxy": "cfd",
}


def _load():
    try:
        tiers = matrix.resolve_tiers(config, BASE / "config/hardware", os.getcwd())
        studies = {config["study"]: matrix.study_of(config)}
        for study_id in PAPER_STUDIES:
            path = BASE / "config/studies" / f"{study_id}.yaml"
            if study_id not in studies and path.is_file():
                studies[study_id] = matrix.load_study(path, config)
        points = {}
        for study in studies.values():
            for point in matrix.expand_study(study, tiers, config["scale"]):
                points[point.key] = point
    except ConfigError as error:
        raise WorkflowError(str(error)) from None
    return tiers, studies, points


TIERS, STUDIES, POINTS = _load()
ACTIVE_STUDY = config["study"]


wildcard_constraints:
    study="[a-z][a-z0-9_]*",
    experiment="[a-z][a-z0-9_]*",
    tier="[a-z][a-z0-9_]*",
    point="[^/]+",
    rep="[0-9]+",
    family="[a-z_]+",


def study_points(study):
    return [point for point in POINTS.values() if point.study == study]


def raw_records(study):
    """Every raw JSON record of a study: all points, all repetitions."""
    reps = matrix.repetitions(STUDIES[study])
    return [
        RAW.format(
            study=p.study,
            workload=p.workload,
            experiment=p.experiment,
            tier=p.tier,
            point=p.name,
            rep=rep,
        )
        for p in study_points(study)
        for rep in reps
    ]


def study_tiers(study):
    return sorted({point.tier for point in study_points(study)})


def study_families(study):
    """Figure families of a study; a study that re-runs a document also gets `paper`."""
    families = {FIGURE_FAMILY[point.workload] for point in study_points(study)}
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


def run_spec(workload):
    """Input function: the JSON spec a workload runner gets for one job."""

    @per_job
    def spec(wildcards):
        point = point_of(wildcards, workload)
        return matrix.run_spec(
            point, TIERS[point.tier], int(wildcards.rep), experiment_description(point)
        )

    return spec


def benchmark_inputs(workload):
    """Input function: a benchmark waits for the preflight and, if measured, its warm-up."""

    @per_job
    def inputs(wildcards):
        needed = {"preflight": f"results/{wildcards.study}/preflight.json"}
        if int(wildcards.rep) > 0 and STUDIES[wildcards.study].get("warmup", True):
            needed["warmup"] = RAW.format(
                **{**dict(wildcards.items()), "workload": workload, "rep": 0}
            )
        return needed

    return inputs


def preflight_spec(wildcards):
    """What the preflight must check for a study: its tiers, bytes and tools."""
    points = study_points(wildcards.study)
    tiers = {name: TIERS[name] for name in study_tiers(wildcards.study)}
    return json.dumps(
        {
            "study": wildcards.study,
            "tiers": tiers,
            "points": [
                {"workload": p.workload, "tier": p.tier, "params": p.params}
                for p in points
            ],
            "safety_factor": config.get("safety_factor", 1.2),
        },
        sort_keys=True,
    )


def report_inputs(studies):
    """Everything the HTML report of some studies is made from."""
    return {
        "summaries": [f"results/{s}/summary.csv" for s in studies],
        "results": [f"results/{s}/results.csv" for s in studies],
        "provenance": [f"results/{s}/provenance/tiers.json" for s in studies],
        "nodes": [f"results/{s}/provenance/nodes.json" for s in studies],
        "figures": [
            f"results/{s}/figures/{family}"
            for s in studies
            for family in study_families(s)
        ],
        "verdicts": [
            f"results/{s}/verdict.json" for s in studies if STUDIES[s].get("document")
        ],
    }


def study_title(study):
    return STUDIES[study].get("title", study)


def point_resource(workload, name, default=1):
    """Input function: a job resource computed by the workload from its point.

    A workload module may define e.g. ``threads(params)`` or ``tasks(params)``;
    without it every job gets ``default``.
    """

    @per_job
    def resource(wildcards):
        params = point_of(wildcards, workload).params
        return int(estimate(workload, name, params, default=default))

    return resource


# Resources of the jobs, under the names snakemake-executor-plugin-slurm reads
# (runtime in minutes, mem_mb, slurm_partition, slurm_extra, mpi, tasks, nodes).
# The rules are the one place they are declared: no profile sets
# default-resources or set-resources. Running locally, only `bench` and the
# threads matter; the rest is ignored.
from tierbench import cluster  # noqa: E402

HARDWARE = (
    matrix.load_hardware(config["hardware"], BASE / "config/hardware")
    if config.get("hardware")
    else {}
)
_WARNED_PARTITIONS = set()


def executor_name():
    """'local', 'slurm' (submitting), 'slurm-jobstep' (inside a Slurm job), ..."""
    plugin = workflow.executor_plugin
    return plugin.name if plugin is not None else None


def bench_slots(workload):
    """Resource `bench`: 1 = one benchmark at a time (the profile caps bench=1), 0 = side by side.

    Only `exclusive: true` lets it depend on the executor and the tier;
    otherwise it is 1 for every job, and a number spares a call per job.
    """
    if not config.get("exclusive"):
        return 1

    @per_job
    def slots(wildcards):
        tier = TIERS[point_of(wildcards, workload).tier]
        return cluster.bench_slots(executor_name(), bool(config.get("exclusive")), tier)

    return slots


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
            estimate(workload, "planned_bytes", params) or 0,
            estimate(workload, "mem_mb", params) or 0,
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


#: Resource `slurm_extra`: whole nodes for benchmark jobs with `exclusive: true`.
BENCH_SLURM_EXTRA = cluster.slurm_extra(bool(config.get("exclusive")))


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


@per_job
def mpi_launcher(wildcards):
    """Resource `mpi`: `srun --mpi=pmix` under Slurm, `mpiexec` locally
    (or the hardware file's `mpi`). Use as `{resources.mpi} -n {resources.tasks} ...`.
    """
    return cluster.mpi_launcher(executor_name(), HARDWARE)


def paper_studies():
    """The document studies whose files are present, in document order."""
    return [study for study in PAPER_STUDIES if study in STUDIES]
