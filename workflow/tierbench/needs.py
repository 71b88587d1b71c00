"""Which system packages a run needs: the tools of the workloads its studies use.

``./tierbench run [snakemake args]`` asks this module before it starts
Snakemake, so a machine gets a 400 MB solver only when a study it runs uses
it. The studies are read from the same places Snakemake reads them: the
default config, every ``--configfile``, and the paper studies when ``paper``
is a target. ``--all`` (the test suite) names every workload's tools, and the bench's.

    python -m tierbench.needs [--all] [--missing] -- [snakemake args]
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from .matrix import PAPER_STUDIES, load_yaml
from .workloads import registry

CONFIG_DIR = Path(__file__).resolve().parents[2] / "config"
#: tools a study needs for what it does beside its workloads
MOUNTS = {"bindfs": "bindfs"}  # tiers mounted for each job through FUSE (`tiers: [mounts]`)
TRACING = {"strace": "strace"}  # experiments with `count_syscalls: true`
#: what bench/ builds its references with, beside the workloads' tools (`--all`: the tests run it)
BENCH = {"gfortran": "gfortran"}  # item 3: ccx's lines, written as its Fortran writes them


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


def tools_of(experiments: list[dict]) -> dict[str, str]:
    """Command -> Debian package: what the experiments' workloads run, mounts and tracing."""
    known = registry()
    tools = {}
    for experiment in experiments:
        workload = known.get(experiment["workload"])
        tools.update({tool.command: tool.package for tool in workload.tools} if workload else {})
        tiers = experiment.get("tiers", "all")
        if "mounts" in (tiers if isinstance(tiers, list) else [tiers]):
            tools.update(MOUNTS)
        if experiment.get("count_syscalls"):
            tools.update(TRACING)
    return tools


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="every workload's tools")
    parser.add_argument("--missing", action="store_true", help="only tools not on PATH")
    parser.add_argument("snakemake_args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    rest = [a for a in args.snakemake_args if a != "--"]
    if args.all:
        everything = [{"workload": name} for name in registry()]
        tools = {**tools_of(everything), **MOUNTS, **TRACING, **BENCH}
    else:
        tools = tools_of(study_experiments(rest))
    if args.missing:
        tools = {command: p for command, p in tools.items() if shutil.which(command) is None}
    print(" ".join(sorted(set(tools.values()))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
