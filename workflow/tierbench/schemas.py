"""The JSON schemas of workflow/schemas/ as data: a workload's parameters and their defaults.

Below the workloads, so a workload reads its own defaults without importing
the study planning (:mod:`tierbench.matrix`), which imports the registry. The
config schema, whose list of workloads is the registry's, is completed there.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

import yaml

from .errors import ConfigError

SCHEMA_DIR = Path(__file__).resolve().parents[1] / "schemas"
#: libyaml's safe loader when PyYAML was built with it: the same documents, 10x faster
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(path: str | os.PathLike) -> dict:
    with open(path) as handle:
        data = yaml.load(handle, Loader=SAFE_LOADER)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return data


@cache
def load(name: str) -> dict:
    """One schema file, relative to workflow/schemas/, as written."""
    return load_yaml(SCHEMA_DIR / name)


def params_schema(workload: str) -> dict:
    """The schema of a workload's parameters (workflow/schemas/params/<workload>.schema.yaml)."""
    return load(f"params/{workload}.schema.yaml")


def schema_defaults(workload: str) -> dict:
    """The defaults a workload's parameter schema declares: the one place they are written."""
    properties = params_schema(workload).get("properties", {})
    return {name: spec["default"] for name, spec in properties.items() if "default" in spec}


def defaults_with(workload: str) -> dict[str, dict]:
    """Defaults that hold once another parameter is given (a schema's ``defaults_with``:
    parameter -> {name: default}): openfoam's ``case`` makes the case's own settings the
    defaults of the settings a study may override."""
    return params_schema(workload).get("defaults_with", {})


def complete(workload: str, params: dict) -> dict:
    """A point's parameters with the schema's defaults filled in where the study says nothing."""
    defaults = schema_defaults(workload)
    for given, overrides in defaults_with(workload).items():
        if params.get(given) is not None:
            defaults.update(overrides)
    return {**defaults, **params}
