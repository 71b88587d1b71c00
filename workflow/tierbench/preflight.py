"""Before the first benchmark: can every tier take what the study will write?

Checks each tier a study uses (exists or can be created, is a writable
directory, is the file system its class claims, has the free space the largest
point needs times a safety factor) and that every tool the study's workloads
need is installed. Every problem is listed, one line each, and the run stops
before any job writes to a tier.

Inside a Slurm job the preflight sees one node of many: problems of a
node-local tier (not ``shared``) are warnings there, since every benchmark job
checks its tier again on its own node and records a point it cannot run as
failed, with the reason, while the other points complete.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from . import mounts
from .matrix import SITE_SOFTWARE
from .packages import install_hint
from .probe import probe_tier
from .rundir import free_bytes, sweep_stale
from .tiers import fs_types
from .units import format_size
from .workloads import estimate, get


def planned_bytes(workload: str, params: dict) -> int:
    """Bytes one point of a workload puts on its tier at once (0 if it says nothing)."""
    return int(estimate(workload, "planned_bytes", params))


def check_tier(name: str, tier: dict, sizes: list[int], safety: float) -> tuple[list, list]:
    """Problems (the run stops) and warnings for one tier, given the bytes of its points.

    The tier must hold at least its smallest point times the safety factor;
    points larger than the free space or the tier's cap only get a warning:
    each of them ends as a recorded failure and the others still run.
    """
    problems, warnings = [], []
    path = Path(tier["path"])
    if tier["class"] == "void":
        if not os.path.exists(path):
            problems.append(f"tier {name}: {path} does not exist")
        return problems, warnings
    if not path.exists():
        try:
            path.mkdir(parents=True)
        except OSError as error:
            problems.append(
                f"tier {name}: path {path} does not exist and cannot be created ({error.strerror})"
            )
            return problems, warnings
    if not path.is_dir():
        problems.append(f"tier {name}: path {path} is not a directory")
        return problems, warnings
    try:
        with tempfile.NamedTemporaryFile(dir=path, prefix=".tierbench-preflight-"):
            pass
    except OSError as error:
        problems.append(f"tier {name}: cannot write in {path} ({error.strerror})")
        return problems, warnings
    for stale in sweep_stale(path):
        warnings.append(f"tier {name}: removed {stale}, left by an interrupted run")
    fs_type = probe_tier(path).get("fs_type")
    expected = fs_types(tier["class"])
    if expected and fs_type and fs_type not in expected:
        warnings.append(
            f"tier {name}: class {tier['class']} expects {'/'.join(sorted(expected))} "
            f"but {path} is on {fs_type}"
        )
    if not sizes:
        return problems, warnings
    free = free_bytes(path)
    smallest, largest = min(sizes), max(sizes)
    if smallest * safety > free:
        problems.append(
            f"tier {name}: its smallest point writes {format_size(smallest)} "
            f"(x{safety} safety = {format_size(smallest * safety)}) but {path} has "
            f"{format_size(free)} free"
        )
    elif largest * safety > free:
        too_big = sum(size * safety > free for size in sizes)
        warnings.append(
            f"tier {name}: {too_big} points write more than the {format_size(free)} free "
            f"(x{safety} safety); they will be recorded as failed, the others run"
        )
    cap = tier.get("max_bytes")
    if cap is not None and largest > cap:
        over = sum(size > cap for size in sizes)
        warnings.append(
            f"tier {name}: {over} points write more than max_bytes={format_size(cap)} "
            f"(largest: {format_size(largest)}); they will be recorded as failed, not run"
        )
    return problems, warnings


def check_mounted_tier(name: str, tier: dict, sizes: list[int], safety: float) -> tuple[list, list]:
    """A tier mounted at run time (``backing``): the folder its mount points go in,
    the backing tier that holds the data, and the mount tool.

    A missing mount tool (bindfs, /dev/fuse, root for mount --bind) is a
    warning: the tier's points are recorded as skipped and the rest runs.
    """
    warnings = [
        f"tier {name}: unmounted {point}, left mounted by an interrupted run"
        for point in mounts.sweep_stale_mounts(tier["path"])
    ]
    # the mount points' folder only needs to be a writable directory; the data's
    # file system and free space are the backing tier's
    holder = {"path": tier["path"], "class": "mount points"}
    problems, found = check_tier(name, holder, [], safety)
    warnings += found
    backing = {
        "path": tier["backing_path"],
        "class": tier["backing_class"],
        "max_bytes": tier.get("max_bytes"),
    }
    found_problems, found = check_tier(
        f"{name} (backing tier {tier['backing']})", backing, sizes, safety
    )
    problems += found_problems
    warnings += found
    reason = mounts.unavailable(tier["mount"])
    if reason and sizes:
        warnings.append(
            f"tier {name}: it is mounted with {tier['mount']}, but {reason}; "
            f"its {len(sizes)} points will be recorded as skipped"
        )
    return problems, warnings


def check_tools(workloads: set[str]) -> list[str]:
    """One line per missing tool, with the package that installs it (tierbench.packages)."""
    needed: dict[str, set[str]] = {}
    for name in workloads:
        for tool in get(name).tools:
            needed.setdefault(tool.command, set()).add(name)
    problems = []
    for command, users in sorted(needed.items()):
        if shutil.which(command) is None:
            problems.append(
                f"tool {command} is not installed (needed by {', '.join(sorted(users))}); "
                f"install it with: {install_hint(command)}"
            )
    return problems


def run_preflight(spec: dict) -> dict:
    sizes: dict[str, list[int]] = {}
    for point in spec["points"]:
        size = planned_bytes(point["workload"], point["params"])
        sizes.setdefault(point["tier"], []).append(size)
    problems, warnings = [], []
    on_cluster_node = bool(os.environ.get("SLURM_JOB_ID"))
    for name, tier in spec["tiers"].items():
        check = check_mounted_tier if tier.get("backing_path") else check_tier
        tier_problems, tier_warnings = check(name, tier, sizes.get(name, []), spec["safety_factor"])
        if on_cluster_node and not tier.get("shared"):
            node = os.environ.get("SLURMD_NODENAME", "this node")
            tier_warnings += [
                f"{problem} (on {node}; each benchmark job checks the tier on its own node)"
                for problem in tier_problems
            ]
            tier_problems = []
        problems += tier_problems
        warnings += tier_warnings
    workloads = {point["workload"] for point in spec["points"]}
    # an application the hardware file loads from a module or bashrc is on PATH only in its jobs
    site = {
        key: tier[key] for tier in spec["tiers"].values() for key in SITE_SOFTWARE if key in tier
    }
    for name, how in sorted(site.items()):
        if name in workloads:
            warnings.append(f"{name} comes from {how} (hardware file): each job loads it")
    problems += check_tools(workloads - set(site))
    return {
        "study": spec["study"],
        "ok": not problems,
        "problems": problems,
        "warnings": warnings,
        "largest_point_bytes": {tier: max(found) for tier, found in sizes.items()},
    }


def plan_checks(plan: dict) -> dict:
    """What the preflight checks, from a study's plan: its tiers, points and safety factor."""
    return {
        "study": plan["study"],
        "tiers": plan["tiers"],
        "points": list(plan["points"].values()),
        "safety_factor": plan["safety_factor"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--plan", help="the study's plan.json")
    source.add_argument("--spec", help="instead of --plan: tiers, points and safety_factor as JSON")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    if args.spec:
        spec = json.loads(args.spec)
    else:
        spec = plan_checks(json.loads(Path(args.plan).read_text()))
    result = run_preflight(spec)
    for warning in result["warnings"]:
        print(f"preflight warning: {warning}", file=sys.stderr)
    if not result["ok"]:
        print(f"preflight failed for study {result['study']}:", file=sys.stderr)
        for problem in result["problems"]:
            print(f"  - {problem}", file=sys.stderr)
        return 1
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"preflight ok for study {result['study']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
