"""Expand the configuration into points and hold every input function.

Rules stay small: they name paths, and the functions below turn wildcards into
the inputs and parameters a job needs.
"""

import json
import os
import sys
from pathlib import Path

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

    def spec(wildcards):
        point = point_of(wildcards, workload)
        return matrix.run_spec(
            point, TIERS[point.tier], int(wildcards.rep), experiment_description(point)
        )

    return spec


def benchmark_inputs(workload):
    """Input function: a benchmark waits for the preflight and, if measured, its warm-up."""

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
    import importlib

    workload_module = importlib.import_module(f"tierbench.workloads.{workload}")

    def resource(wildcards):
        estimate = getattr(workload_module, name, None)
        return (
            int(estimate(point_of(wildcards, workload).params)) if estimate else default
        )

    return resource


def paper_studies():
    """The document studies whose files are present, in document order."""
    return [study for study in PAPER_STUDIES if study in STUDIES]
