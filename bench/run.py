"""How good are the instruments? Each one measured side by side with a reference, in one run.

    .venv/bin/python bench/run.py [--tiny] [--json out.json] [--only 1,4]

Prints a markdown table and writes JSON (``--json``, default
``results/bench/bench-<mode>-<time>.json``): per row the median over the
rounds, its min-max, the goal and whether it is met. Ratios are taken per
round (instrument and reference run back to back), then their median.
``--tiny`` runs everything at toy sizes (a check that the bench works, not a
measurement) and skips the default study.

ITEMS below is the table of docs/instruments.md; each item is a module of
this folder with a ``measure(mode, scratch, goal)`` function (see harness.py).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import cfd_creates_vs_c
import cfd_vs_fio
import metadata_vs_c
import minicluster_timing
import pipeline_overhead
import proxy_fidelity
import resultsdb_timing
import stream_cap
import study_wall_times
import verdict_repeatability
from harness import Item, at_least, at_most, default_json_path, run_items, write_json

ITEMS = [
    Item(
        1,
        instrument="cfd_proxy write phase on /dev/shm, 40 MB and 10 MB per rank per write",
        reference="fio sequential writes of the same bytes with the same block size",
        goal=at_least(0.9),
        module=cfd_vs_fio,
    ),
    Item(
        2,
        instrument="cfd_proxy creating files and folders (1-cell fields)",
        reference="bench/creates.c: the same mkdirs and files at the same depth",
        goal=at_least(0.8),
        module=cfd_creates_vs_c,
    ),
    Item(
        4,
        instrument="snakemake -n of 1,000+ jobs; a no-op job through Snakemake",
        reference="the same no-op command run directly",
        goal=at_most(5.0, "s"),
        module=pipeline_overhead,
    ),
    Item(
        5,
        instrument="default study and smoke preset, snakemake -c2",
        reference="what README.md promises",
        goal=(at_most(600.0, "s"), at_most(120.0, "s")),
        module=study_wall_times,
    ),
    Item(
        6,
        instrument="paper verdicts, `paper` run 3 times at default scale, each in a fresh copy",
        reference="the other runs' verdicts of each lesson; a paper run under 15 minutes",
        goal=(at_least(1.0), at_most(900.0, "s")),
        module=verdict_repeatability,
    ),
    Item(
        7,
        instrument="resultsdb append of a study; compare of two paper runs (400 points each)",
        reference="the goal: seconds, not minutes",
        goal=(at_most(5.0, "s"), at_most(10.0, "s")),
        module=resultsdb_timing,
    ),
    Item(
        8,
        instrument="cfd_proxy and fe_proxy I/O cost per write on /dev/shm",
        reference="openfoam and calculix, same shape, interleaved rounds",
        goal=at_least(0.9),
        module=proxy_fidelity,
    ),
    Item(
        9,
        instrument="`cluster up`, `cluster down` and the smoke study on the one-machine "
        "cluster, 2 nodes",
        reference="the goal: seconds, so a test may bring one up and down; minutes for a study",
        goal=(at_most(10.0, "s"), at_most(5.0, "s"), at_most(600.0, "s")),
        module=minicluster_timing,
    ),
    Item(
        10,
        instrument="metadata workload: each phase's rate on /dev/shm and on the disk folder",
        reference="bench/metadata_loop.c: the same calls on as many files and folders, at the "
        "same depth",
        goal=at_least(0.9),
        module=metadata_vs_c,
    ),
    Item(
        11,
        instrument="STREAM with its arrays capped to a few seconds a run (a 480 MiB cache "
        "reported)",
        reference="STREAM's rule, 4x the reported cache an array, on the same machine",
        goal=(at_least(0.95), at_most(5.0, "s")),
        module=stream_cap,
    ),
]
#: items taken out of the bench, by number: a number is never given again, so one in a past
#: result, commit or issue names one item only (their findings: docs/design.md)
RETIRED = {3: "the FE proxy's output against a C/Fortran replay"}
#: what the items run besides Python
TOOLS = ("fio", "mpiexec", "gcc")


def chosen(only: str | None) -> set[int]:
    """The item numbers ``--only`` names (all items without it); a retired or unknown
    number stops the bench with the numbers there are."""
    numbers = {item.number for item in ITEMS}
    if not only:
        return numbers
    asked = {int(x) for x in only.split(",")}
    choose = f"choose from {', '.join(map(str, sorted(numbers)))}"
    retired = [f"item {n} ({RETIRED[n]}) is retired" for n in sorted(asked & set(RETIRED))]
    if retired:
        raise SystemExit(f"--only: {'; '.join(retired)}, see docs/design.md; {choose}")
    if asked - numbers:
        unknown = ", ".join(map(str, sorted(asked - numbers)))
        raise SystemExit(f"--only: no item {unknown}; {choose}")
    return asked


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="toy sizes, no default study")
    parser.add_argument("--json", help="where to write the JSON (default results/bench/)")
    parser.add_argument(
        "--only", help="comma-separated item numbers to run, for working on one instrument"
    )
    args = parser.parse_args(argv)
    mode = "tiny" if args.tiny else "full"
    only = chosen(args.only)
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        raise SystemExit(f"bench needs {', '.join(missing)} on PATH")
    given = argv if argv is not None else sys.argv[1:]
    command = " ".join([".venv/bin/python", "bench/run.py", *given])
    result = run_items(ITEMS, mode, only, command)
    out = Path(args.json) if args.json else default_json_path(mode)
    write_json(result, out)
    print(result["table"])
    print(f"\nJSON: {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
