"""Expand a study into its points: tier x workload x parameter axes x repetition.

A parameter given as a list is an axis; every combination of axis values is a
point. Points get readable names (``block_size=4k+io_mode=direct+rw=write``)
that become one folder each under ``results/<study>/raw/``. Nothing here
knows a workload: adding a value to an axis, a tier or a study needs no code.
"""

from __future__ import annotations

import copy
import itertools
import math
import os
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from . import units
from .errors import ConfigError
from .mounts import BINDFS, default_method
from .schemas import complete, load, load_yaml
from .tiers import NETWORK
from .tiers import role as tier_role
from .units import parse_size
from .workloads import get, registry

VOID = "void"
CONFIG_SCHEMA = "config.schema.yaml"
#: hardware-file keys that say how the machine provides an application (see the hardware schema)
SITE_SOFTWARE = ("openfoam",)
#: the study files; one with ``document:`` re-runs that document and belongs to the paper
STUDIES_DIR = Path(__file__).resolve().parents[2] / "config" / "studies"


def paper_studies(folder: Path = STUDIES_DIR) -> tuple[str, ...]:
    """The studies that re-run a document, in the documents' order: every study file of
    ``folder`` (not its subfolders: examples) with ``document:``, named by its file."""
    found = []
    for path in sorted(folder.glob("*.yaml")):
        data = load_yaml(path)
        if isinstance(data, dict) and data.get("document"):
            found.append((str(data["document"]), path.stem))
    return tuple(stem for _, stem in sorted(found))


#: the `paper` target: a new document's study file joins it, no list to edit
PAPER_STUDIES = paper_studies()
#: Keys a study file may set; everything else in a config is global.
STUDY_KEYS = (
    "study", "title", "document", "lessons", "published_figure", "staging", "experiments",
    "repetitions", "warmup", "order",
)  # fmt: skip
#: what says which document a study re-runs and how it is judged: a study file's own, never
#: the running config's (a study without them is no paper study, whatever config runs it)
DOCUMENT_KEYS = ("document", "lessons", "published_figure", "staging")


@dataclass(frozen=True)
class Point:
    """One experiment point on one tier; repetitions of it are separate jobs."""

    study: str
    experiment: str
    workload: str
    tier: str
    name: str
    params: dict = field(hash=False, compare=False)
    #: a parameter naming another tier -> that tier's name, or None with the reason
    #: (:func:`named_tier`); empty for workloads without such parameters
    named_tiers: dict = field(default_factory=dict, hash=False, compare=False)

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        return (self.study, self.workload, self.experiment, self.tier, self.name)


@cache
def _schema(name: str) -> dict:
    """A schema of workflow/schemas/; the config schema with the registry's workloads in it."""
    if name != CONFIG_SCHEMA:
        return load(name)
    # the workloads a study may name are the registry's, not a copied list
    schema = copy.deepcopy(load(name))
    schema["$defs"]["experiment"]["properties"]["workload"]["enum"] = list(registry())
    return schema


def validate_config(config: dict, what: str = "config") -> None:
    """The whole configuration (config.yaml, a study file, --config) against its schema."""
    validate(config, CONFIG_SCHEMA, what)


@cache
def _validator(schema_name: str):
    """One validator per schema: a study checks every point against its workload's."""
    import jsonschema
    from referencing import Registry, Resource

    def retrieve(uri: str) -> Resource:
        return Resource.from_contents(_schema(os.path.normpath(uri)))

    schemas = Registry(retrieve=retrieve)
    schema = dict(_schema(schema_name))
    schema["$id"] = schema_name
    return jsonschema.Draft202012Validator(schema, registry=schemas)


def validate(instance: dict, schema_name: str, what: str) -> None:
    """Validate against one of workflow/schemas/; the error names the offending key."""
    errors = sorted(
        _validator(schema_name).iter_errors(instance), key=lambda e: list(e.absolute_path)
    )
    if errors:
        lines = []
        for error in errors:
            where = ".".join(str(p) for p in error.absolute_path) or "(top level)"
            lines.append(f"  {what}: {where}: {error.message}")
        raise ConfigError("invalid configuration:\n" + "\n".join(lines))


def resolve_tiers(config: dict, hardware_dir: str | os.PathLike, workdir: str) -> dict:
    """Tier name -> spec with an absolute path and ``max_bytes`` in bytes.

    A hardware file, when named, replaces the config's tiers; the void tier
    (/dev/null) is always there for the pipe workloads.
    """
    tiers = dict(config["tiers"])
    partition = software = None
    if config.get("hardware"):
        hardware = load_hardware(config["hardware"], hardware_dir)
        tiers = dict(hardware["tiers"])
        partition = hardware.get("partition")
        software = {key: hardware[key] for key in SITE_SOFTWARE if key in hardware}
    tiers.setdefault(VOID, {"path": "/dev/null", "class": VOID})
    resolved = {}
    for name, spec in tiers.items():
        spec = dict(spec)
        # The Slurm partition whose nodes have the tier: its own, else the machine's.
        if partition and not spec.get("partition"):
            spec["partition"] = partition
        # how the machine provides a solver (a module, a bashrc): the jobs on its tiers need it
        spec.update(software or {})
        path = os.path.expanduser(os.path.expandvars(spec["path"]))
        if "$" in path:
            raise ConfigError(f"tiers.{name}.path: {spec['path']} names an unset variable")
        spec["path"] = os.path.normpath(os.path.join(workdir, path))
        spec["max_bytes"] = parse_size(spec["max_bytes"]) if "max_bytes" in spec else None
        resolved[name] = spec
    paths = {}
    for name, spec in resolved.items():
        if spec["class"] != VOID and os.path.exists(spec["path"]):
            if not os.path.isdir(spec["path"]):
                raise ConfigError(f"tiers.{name}.path: {spec['path']} is a file, not a directory")
        if spec["path"] in paths:
            raise ConfigError(
                f"tiers.{name}: path {spec['path']} is also the path of tier {paths[spec['path']]}"
            )
        paths[spec["path"]] = name
    for name, spec in resolved.items():
        if spec.get("backing"):
            _resolve_backing(name, spec, resolved)
    return resolved


def _resolve_backing(name: str, spec: dict, tiers: dict) -> None:
    """A tier mounted at run time over a folder of its backing tier (see tierbench.mounts).

    Adds the backing tier's path and class and the mount method; the tier's
    cap is the smaller of its own and its backing tier's, since the data lands
    on the backing tier.
    """
    backing = spec["backing"]
    target = tiers.get(backing)
    if target is None:
        raise ConfigError(
            f"tiers.{name}.backing: no tier named {backing} (defined: {', '.join(tiers)})"
        )
    if target["class"] == VOID or target.get("backing"):
        raise ConfigError(
            f"tiers.{name}.backing: {backing} has no folder of its own to mount "
            "(it is the void or is itself mounted at run time)"
        )
    method = spec.get("mount") or default_method(spec["class"])
    if (method == BINDFS) != (spec["class"] == "fuse"):
        raise ConfigError(
            f"tiers.{name}.mount: a {method} mount needs class "
            + ("fuse" if method == BINDFS else f"{target['class']} (what the backing tier is)")
            + f", not {spec['class']}"
        )
    caps = [cap for cap in (spec["max_bytes"], target["max_bytes"]) if cap is not None]
    spec.update(
        mount=method,
        backing_path=target["path"],
        backing_class=target["class"],
        max_bytes=min(caps) if caps else None,
    )


def load_hardware(name: str, hardware_dir: str | os.PathLike) -> dict:
    path = Path(hardware_dir) / f"{name}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in Path(hardware_dir).glob("*.yaml"))
        raise ConfigError(f"hardware: no file {path} (known: {', '.join(known)})")
    hardware = load_yaml(path)
    validate(hardware, "hardware.schema.yaml", str(path))
    return hardware


def site_environment(hardware: dict) -> tuple[dict[str, str], list[str]]:
    """(variables, folders first on PATH) a hardware file sets for the run and its jobs.

    Jobs inherit the submitting process's environment (sbatch exports it), so
    setting it where the workflow is parsed reaches every job; a job parses
    the workflow again and gets the same values.
    """
    variables = {}
    for name, value in (hardware.get("env") or {}).items():
        expanded = os.path.expandvars(value)
        if "$" in expanded:
            raise ConfigError(f"hardware env.{name}: {value} names an unset variable")
        variables[name] = expanded
    return variables, [os.path.expanduser(folder) for folder in hardware.get("path") or []]


def without(config: dict, keys) -> dict:
    return {k: v for k, v in config.items() if k not in keys}


def study_of(config: dict) -> dict:
    """The study-level part of a config (what a study file defines)."""
    return {key: config[key] for key in STUDY_KEYS if key in config}


def load_study(path: str | os.PathLike, defaults: dict) -> dict:
    """A study file merged over the global settings of the running config."""
    data = load_yaml(path)
    unknown = set(data) - set(STUDY_KEYS) - {"scale"}
    if unknown:
        raise ConfigError(f"{path}: keys {sorted(unknown)} do not belong in a study file")
    study = {**without(study_of(defaults), DOCUMENT_KEYS), **study_of(data)}
    validate_config({**without(defaults, DOCUMENT_KEYS), **study}, str(path))
    return study


def experiment_params(experiment: dict, scale: str) -> dict:
    """An experiment's parameters with the overrides of the chosen scale applied."""
    params = dict(experiment["params"])
    params.update((experiment.get("scale") or {}).get(scale) or {})
    return params


def experiment_tiers(experiment: dict, tiers: dict) -> list[str]:
    """Tier names of an experiment; ``all`` (alone or in a list) is every tier but the void.

    Studies name ``all`` rather than this machine's tier names, so the same
    study file runs on any hardware file. Tiers mounted at run time over
    another tier (``backing``) are views, not storage: ``all`` leaves them
    out and ``mounts`` (in a list) names every one of them.
    """
    chosen = experiment.get("tiers", "all")
    chosen = [chosen] if isinstance(chosen, str) else list(chosen)
    every = [name for name, spec in tiers.items() if spec["class"] != VOID]
    views = [name for name in every if tiers[name].get("backing")]
    groups = {"all": [name for name in every if name not in views], "mounts": views}
    chosen = [name for item in chosen for name in groups.get(item, [item])]
    chosen = list(dict.fromkeys(chosen))
    missing = [name for name in chosen if name not in tiers]
    if missing:
        raise ConfigError(
            f"experiment {experiment['name']}: tiers {missing} are not defined "
            f"(defined: {', '.join(tiers)})"
        )
    return list(chosen)


def _axis_text(value) -> str:
    """An axis value in a point name; a list (an argv, input files) as its words joined by _."""
    if not isinstance(value, list):
        return str(value)
    return "_".join("".join(c if c.isalnum() or c in "-." else "_" for c in str(v)) for v in value)


def point_name(values: dict) -> str:
    """Readable, filesystem-safe name of a combination of axis values.

    No commas: a job on a cluster gets its wildcards back through Snakemake's
    ``--target-jobs rule:key=value,key=value``, which splits at every comma
    (snakemake/snakemake#2366), so a comma inside a point name would cut it.
    """
    if not values:
        return "single"
    parts = []
    for key in sorted(values):
        text = _axis_text(values[key])
        for char in "/,=+":
            text = text.replace(char, "_")
        parts.append(f"{key}={text}")
    return "+".join(parts)


def is_axis(key: str, value, list_valued: tuple[str, ...] = ()) -> bool:
    """A list is an axis; for a parameter whose value is itself a list (a workload's
    ``list_params``: an argv, a list of input files) only a list of lists is one."""
    if not isinstance(value, list):
        return False
    return key not in list_valued or bool(value) and all(isinstance(v, list) for v in value)


def expand_params(params: dict, list_valued: tuple[str, ...] = ()) -> list[tuple[dict, dict]]:
    """(axis values, full parameters) for every combination of the axes (:func:`is_axis`)."""
    axes = sorted(key for key, value in params.items() if is_axis(key, value, list_valued))
    for key in axes:
        if not params[key]:
            raise ConfigError(f"parameter {key}: an axis needs at least one value")
    combos = []
    for values in itertools.product(*(params[key] for key in axes)):
        chosen = dict(zip(axes, values, strict=True))
        combos.append((chosen, {**params, **chosen}))
    return combos


def check_point(workload: str, params: dict, where: str) -> dict:
    """Schema of the workload's parameters, then its own cross-field rules; the complete params.

    The defaults are filled in here, once, so a job's spec, results.csv and the
    figures all carry every parameter of the point, written or not.
    """
    validate(params, f"params/{workload}.schema.yaml", where)
    params = complete(workload, params)
    check = get(workload).check_params
    if check is not None:
        try:
            check(params)
        except (ValueError, ConfigError) as error:
            raise ConfigError(f"{where}: {error}") from None
    return params


#: a tier parameter's value meaning "the tier every node of the run sees"
SHARED_TIER = "shared"


def shared_tier(tiers: dict) -> str | None:
    """The run's shared tier: the first marked ``shared: true``, else the first network
    file system (nfs, lustre, ...); None when it has neither. Views mounted per job and
    the void are never one."""
    usable = [n for n, s in tiers.items() if s["class"] != VOID and not s.get("backing")]
    marked = [name for name in usable if tiers[name].get("shared")]
    network = [name for name in usable if tier_role(tiers[name]["class"]) == NETWORK]
    return (marked + network + [None])[0]


def named_tier(param: str, value, tiers: dict, where: str) -> dict:
    """What a parameter naming a tier resolves to: ``{"tier": name}``, or ``{"tier": None,
    "reason": ...}`` for ``shared`` on a run without a shared tier (its points are then
    not applicable). A name that is no tier of the run is a configuration error."""
    if value == SHARED_TIER:
        found = shared_tier(tiers)
        if found is None:
            return {
                "tier": None,
                "reason": f"{param} {SHARED_TIER}: this run has no shared tier (none marked "
                "shared: true, none of a network file system's class)",
            }
        return {"tier": found}
    usable = [n for n, s in tiers.items() if s["class"] != VOID and not s.get("backing")]
    if value not in usable:
        why = "is mounted for its own jobs only" if value in tiers else "is not a tier of this run"
        raise ConfigError(
            f"{where}: {param} {value!r} {why} (tiers: {', '.join(usable)}; "
            f"or {SHARED_TIER!r}, the tier every node sees)"
        )
    return {"tier": value}


def expand_study(study: dict, tiers: dict, scale: str) -> list[Point]:
    points = []
    names = [experiment["name"] for experiment in study["experiments"]]
    duplicated = sorted({name for name in names if names.count(name) > 1})
    if duplicated:
        raise ConfigError(f"study {study['study']}: experiment names {duplicated} repeat")
    for experiment in study["experiments"]:
        params = experiment_params(experiment, scale)
        tier_names = experiment_tiers(experiment, tiers)
        list_valued = get(experiment["workload"]).list_params
        for axis_values, point_params in expand_params(params, list_valued):
            name = point_name(axis_values)
            where = f"{study['study']}.{experiment['name']}[{name}]"
            point_params = check_point(experiment["workload"], point_params, where)
            named = {
                param: named_tier(param, point_params[param], tiers, where)
                for param in get(experiment["workload"]).tier_params
            }
            # a point never runs on a tier it names (a copy from a tier to itself)
            for tier in [t for t in tier_names if t not in {n["tier"] for n in named.values()}]:
                points.append(
                    Point(
                        study=study["study"],
                        experiment=experiment["name"],
                        workload=experiment["workload"],
                        tier=tier,
                        name=name,
                        params=point_params,
                        named_tiers=named,
                    )
                )
    return points


def param_text(value) -> str:
    """A parameter as text that treats 1, 1.0 and "1" alike, and a missing value as ""."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    return str(int(number)) if number.is_integer() else repr(number)


def fidelity_partners(points: list[Point]) -> dict[tuple, Point]:
    """Each proxy point's application point: same study, tier and shape (its workload's
    ``stands_for``), where exactly one of each meets. The pipeline runs a proxy's repetition
    right after its partner's, so the fidelity table compares runs made moments apart
    (:func:`tierbench.intervals.paired`) instead of runs an hour apart on a machine whose
    speed drifts more than the band a proxy must meet.
    """
    pairs = [w.stands_for for w in registry().values() if w.stands_for]
    pair_of = {name: pair for pair in pairs for name in (pair.proxy, pair.real)}
    found: dict[tuple, list[Point]] = {}
    for point in points:
        pair = pair_of.get(point.workload)
        if pair is None:
            continue
        params = complete(point.workload, point.params)
        shape = tuple(param_text(params.get(k)) for k in pair.shape)
        found.setdefault((pair.proxy, point.study, point.tier, shape), []).append(point)
    partners = {}
    for (proxy, *_), group in found.items():
        proxies = [p for p in group if p.workload == proxy]
        reals = [p for p in group if p.workload != proxy]
        if len(proxies) == 1 and len(reals) == 1:
            partners[proxies[0].key] = reals[0]
    return partners


def repetition_bounds(study: dict) -> tuple[int, int]:
    """(min, max) measured repetitions per point; the same number twice when not adaptive."""
    value = study["repetitions"]
    if isinstance(value, dict):
        low, high = int(value["min"]), int(value["max"])
        if high < low:
            raise ConfigError(f"study {study['study']}: repetitions max {high} < min {low}")
        if "budget" in value:
            try:
                units.parse_duration_minutes(value["budget"])
            except ValueError:
                raise ConfigError(
                    f"study {study['study']}: repetitions budget {value['budget']!r} is not a"
                    " duration (10 min, 1h, 600s)"
                ) from None
        return low, high
    return int(value), int(value)


def repetitions(study: dict, experiment: str | None = None) -> list[int]:
    """Repetition numbers of a point: 0 is the warm-up (when enabled), then 1..N measured.

    N is the experiment's own ``repetitions`` when it gives one, else the
    study's (first-round) number.
    """
    first = 0 if study.get("warmup", True) else 1
    return list(range(first, measured_repetitions(study, experiment) + 1))


def measured_repetitions(study: dict, experiment: str | None = None) -> int:
    for entry in study["experiments"] if experiment else ():
        if entry["name"] == experiment and "repetitions" in entry:
            return int(entry["repetitions"])
    return repetition_bounds(study)[0]


def in_rounds(study: dict) -> bool:
    """Does the study run its first round in rounds (``order: rounds``, allocations.rounds)?"""
    return study.get("order", "points") == "rounds"


def fixed_repetitions(study: dict) -> set[str]:
    """Experiments with repetitions of their own: the adaptive step leaves them as they are."""
    return {e["name"] for e in study["experiments"] if "repetitions" in e}


def adaptive(study: dict) -> bool:
    """Does the study add repetitions where its verdicts need them? (A paper study with a range.)"""
    low, high = repetition_bounds(study)
    return bool(study.get("document")) and high > low


def point_id(point: Point) -> str:
    """``workload/experiment/tier/point``: how a job names its point in the study's plan."""
    return f"{point.workload}/{point.experiment}/{point.tier}/{point.name}"


def study_plan(study: dict, points: list[Point], tiers: dict, **settings) -> dict:
    """Everything the jobs of one study read: its tiers and the complete parameters of its points.

    The pipeline writes it once per study (``<study>/plan.json``); a job names
    its point and repetition on its command line and reads the rest here, so
    its command stays one short line that can be pasted to re-run it by hand.
    """
    descriptions = {e["name"]: e.get("description", "") for e in study["experiments"]}
    traced = {e["name"] for e in study["experiments"] if e.get("count_syscalls")}
    # a tier a point names (the tier a case is staged from) is the study's as well
    named = {n["tier"] for p in points for n in p.named_tiers.values() if n["tier"]}
    return {
        "study": study["study"],
        **settings,
        "tiers": {name: tiers[name] for name in sorted({p.tier for p in points} | named)},
        "points": {
            point_id(p): {
                "workload": p.workload,
                "experiment": p.experiment,
                "tier": p.tier,
                "point": p.name,
                "params": p.params,
                "description": descriptions.get(p.experiment, ""),
                **({"count_syscalls": True} if p.experiment in traced else {}),
                **({"named_tiers": p.named_tiers} if p.named_tiers else {}),
            }
            for p in points
        },
    }


def plan_spec(plan: dict, point: str, repetition: int) -> dict:
    """The spec of one job of a plan (see :func:`run_spec`)."""
    entry = plan["points"].get(point)
    if entry is None:
        raise ConfigError(f"no point {point} in the plan of study {plan['study']}")
    found = Point(
        study=plan["study"],
        experiment=entry["experiment"],
        workload=entry["workload"],
        tier=entry["tier"],
        name=entry["point"],
        params=entry["params"],
    )
    spec = run_spec(
        found,
        plan["tiers"][entry["tier"]],
        repetition,
        entry["description"],
        count_syscalls=entry.get("count_syscalls", False),
    )
    for param, named in entry.get("named_tiers", {}).items():
        spec.update(named_tier_spec(param, named, plan["tiers"]))
    return spec


def named_tier_spec(param: str, named: dict, tiers: dict) -> dict:
    """A job's spec entries for a parameter naming a tier: ``<param>_tier``, ``_path``,
    ``_class``, ``_max_bytes``, ``_shared``; or ``<param>_tier`` None and the reason."""
    name = named.get("tier")
    if name is None:
        return {f"{param}_tier": None, f"{param}_missing": named.get("reason", "")}
    tier = tiers[name]
    return {
        f"{param}_tier": name,
        f"{param}_path": tier["path"],
        f"{param}_class": tier["class"],
        f"{param}_max_bytes": tier.get("max_bytes"),
        f"{param}_shared": bool(tier.get("shared") or tier_role(tier["class"]) == NETWORK),
    }


def run_spec(
    point: Point,
    tier_spec: dict,
    repetition: int,
    description: str = "",
    count_syscalls: bool = False,
) -> dict:
    """What a workload runner receives for one job.

    ``count_syscalls`` (the experiment's flag) has the runner count the job's
    system calls with strace (tierbench.syscalls): such a run is slow, so it
    is its own experiment and never the timed one.
    """
    spec = {
        "study": point.study,
        "experiment": point.experiment,
        "workload": point.workload,
        "tier": point.tier,
        "tier_path": tier_spec["path"],
        "tier_class": tier_spec["class"],
        "max_bytes": tier_spec.get("max_bytes"),
        "point": point.name,
        "params": point.params,
        "repetition": repetition,
        "phase": "warmup" if repetition == 0 else "measured",
        "description": description,
    }
    if count_syscalls:
        spec["count_syscalls"] = True
    if tier_spec.get("shared") or tier_role(tier_spec["class"]) == NETWORK:
        # every node of a job sees the same folder (an MPI run over several nodes relies on it)
        spec["tier_shared"] = True
    if tier_spec.get("backing"):
        # mounted for the job by the runner (tierbench.mounts)
        spec.update(
            backing=tier_spec["backing"],
            backing_path=tier_spec["backing_path"],
            mount=tier_spec["mount"],
        )
    spec.update({key: tier_spec[key] for key in SITE_SOFTWARE if key in tier_spec})
    if tier_spec.get("partition"):
        # checked inside the job: a point never measures nodes of another partition
        spec["slurm_partition"] = tier_spec["partition"]
    return spec
