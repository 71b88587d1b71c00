"""Which system packages a run needs: the tools of the workloads its studies use.

``./tierbench run [snakemake args]`` asks this module before it starts
Snakemake, so a machine gets a 400 MB solver only when a study it runs uses
it. The studies are read from the same places Snakemake reads them: the
default config, every ``--configfile``, and the paper studies when ``paper``
is a target. A parameter that names a path a package installs (a workload's
``packaged_paths``: openfoam's tutorial cases) needs that package too.
``--all`` (the test suite) names every workload's tools and packaged paths, mounts and
tracing; bench/ runs no tool besides those.

    python -m tierbench.needs [--all] [--missing] -- [snakemake args]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from .matrix import PAPER_STUDIES, load_yaml
from .packages import packages_of
from .workloads import registry

CONFIG_DIR = Path(__file__).resolve().parents[2] / "config"
#: tools a study needs for what it does beside its workloads (command -> package)
MOUNTS = packages_of(["bindfs"])  # tiers mounted for each job through FUSE (`tiers: [mounts]`)
TRACING = packages_of(["strace"])  # experiments with `count_syscalls: true`


def study_experiments(snakemake_args: list[str]) -> list[dict]:
    """The experiments a Snakemake command line runs: its study's, and the paper's if a target.

    As in Snakemake, a later --configfile replaces the experiments of an earlier one.
    """
    active = load_yaml(CONFIG_DIR / "config.yaml")["experiments"]
    paper = []
    args = iter(snakemake_args)
    for arg in args:
        path = None
        if arg in ("--configfile", "--configfiles"):
            path = next(args, "")
        elif arg.startswith("--configfile="):
            path = arg.split("=", 1)[1]
        elif arg == "paper":
            paper = [CONFIG_DIR / "studies" / f"{study}.yaml" for study in PAPER_STUDIES]
        if path and Path(path).is_file():
            active = load_yaml(path).get("experiments", active)
    return active + [e for study in paper for e in load_yaml(study)["experiments"]]


def strings(value) -> list[str]:
    """Every string in a parameter value (axes are lists, scales are dicts of them)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    return [s for item in value for s in strings(item)] if isinstance(value, list) else []


def packaged_paths(workload, experiment: dict) -> dict[str, str]:
    """Path -> Debian package: the paths an experiment's parameters name below a folder a
    package installs (its workload's ``packaged_paths``), at any scale."""
    values = strings([experiment.get("params", {}), experiment.get("scale", {})])
    return {
        os.path.normpath(value): package
        for prefix, package in workload.packaged_paths
        for value in values
        if os.path.normpath(value).startswith(prefix.rstrip("/") + "/")
    }


def tools_of(experiments: list[dict]) -> dict[str, str]:
    """Command (or path) -> Debian package: what the experiments' workloads run and read,
    mounts and tracing."""
    known = registry()
    tools = {}
    for experiment in experiments:
        workload = known.get(experiment["workload"])
        tools.update({tool.command: tool.package for tool in workload.tools} if workload else {})
        tools.update(packaged_paths(workload, experiment) if workload else {})
        tiers = experiment.get("tiers", "all")
        if "mounts" in (tiers if isinstance(tiers, list) else [tiers]):
            tools.update(MOUNTS)
        if experiment.get("count_syscalls"):
            tools.update(TRACING)
    return tools


def installed(command: str) -> bool:
    """A command on PATH, or a path (a packaged path) that exists."""
    return os.path.exists(command) if os.path.isabs(command) else bool(shutil.which(command))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="every workload's tools")
    parser.add_argument("--missing", action="store_true", help="only tools not on PATH")
    parser.add_argument("snakemake_args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    rest = [a for a in args.snakemake_args if a != "--"]
    if args.all:
        everything = [{"workload": name} for name in registry()]
        tools = {**tools_of(everything), **MOUNTS, **TRACING}
        tools.update({path: p for w in registry().values() for path, p in w.packaged_paths})
    else:
        tools = tools_of(study_experiments(rest))
    if args.missing:
        tools = {command: p for command, p in tools.items() if not installed(command)}
    print(" ".join(sorted(set(tools.values()))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
