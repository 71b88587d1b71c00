"""What an OpenFOAM job's members measured, put together: each rank's host from the log,
the writes checked against the plan, an ensemble's metrics over its members and how much
they overlapped, and what the record says of a user's case and its preprocessing.
"""

from __future__ import annotations

import re
import shlex
from decimal import Decimal
from statistics import mean

from ...errors import PointFailed
from ...records import metric
from .cfd_launch import (
    error_of_mean,
)
from .openfoam_plan import (
    mesh,
)
from .openfoam_tree import (
    per_rank_layout,
)
from .openfoam_usercase import (
    CasePlan,
)

#: the nodes of a parallel run in the solver's log header: ``Hosts :`` then ``(node ranks)``
HOSTS = re.compile(r"^Hosts\s*:\s*\n\(\s*\n(.*?)\n\)", re.MULTILINE | re.DOTALL)


#: a serial run's one node
HOST = re.compile(r"^Host\s*:\s*\"?([^\s\"]+)", re.MULTILINE)


def rank_hosts(text: str) -> list[str]:
    """The nodes the solver's ranks ran on, as its log header names them."""
    found = HOSTS.search(text)
    if found:
        rows = (line.strip().strip("()").split() for line in found.group(1).splitlines())
        return sorted({row[0] for row in rows if row})
    host = HOST.search(text)
    return [host.group(1)] if host else []


def check_writes(results: list[dict], purge: int | None, strict: bool = True) -> None:
    """The files the run must have made: none without writes, every write time's otherwise.

    ``purge`` None: not known (a case's own purgeWrite, computed as it is read):
    the kept time folders are not checked. ``strict`` (the duct): every write
    time holds the same tree.
    """
    for i, r in enumerate(results):
        tree_ = r["tree"]
        written = tree_["totals"]["files"] + tree_["totals"]["dirs"]
        if not r["writes"] and strict and written:
            raise PointFailed(
                f"member {i} wrote {tree_['totals']['files']:.0f} files in a run without writes"
            )
        kept_expected = min(r["writes"], purge) if purge else r["writes"]
        if purge is not None and len(tree_["kept_times"]) != kept_expected:
            raise PointFailed(
                f"member {i} kept time folders {tree_['kept_times']}, expected {kept_expected}"
            )
        counts = {(t["files"], t["dirs"]) for t in tree_["per_kept_time"].values()}
        if strict and len(counts) > 1:
            raise PointFailed(f"member {i} wrote different trees at different times: {counts}")


def ensemble_metrics(results: list[dict]) -> list[dict]:
    """Ensemble means of the members' times; totals of bytes, files and folders.

    Names and meanings are those of cfd_proxy where they agree. Per write:
    per write time of one run (bytes: of all members together; files and
    folders: of one writer, a rank's processor folder or the collated one).
    """

    def avg(key: str) -> float | None:
        values = [r["steps"][key] for r in results if key in r["steps"]]
        if key.endswith("_se") and values:  # of the members' mean
            return error_of_mean(values)
        return sum(values) / len(values) if values else None

    found = [
        metric(name, avg(name), "s")
        for name in (
            "time_per_step", "time_per_step_median", "cpu_time_per_step",
            "cpu_time_per_step_median", "run_time", "time_per_step_write",
            "time_per_step_nowrite", "write_cost", "write_cost_se",
        )
        if avg(name) is not None
    ]  # fmt: skip
    found.append(
        metric("time_per_step_max_member", max(r["steps"]["time_per_step"] for r in results), "s")
    )
    totals = {k: sum(r["tree"]["totals"][k] for r in results) for k in ("files", "dirs", "bytes")}
    found += [
        metric("bytes_written", totals["bytes"], "B"),
        metric("files_created", totals["files"], "files"),
        metric("dirs_created", totals["dirs"], "dirs"),
    ]
    writes = sum(r["writes"] for r in results)
    if writes:
        writers = len(per_rank_layout(results[0]["tree"]["sample"], False)["writers"])
        per = writes * max(writers, 1)
        found += [
            metric("bytes_per_write", totals["bytes"] * len(results) / writes, "B"),
            metric("files_per_write", totals["files"] / per, "files"),
            metric("dirs_per_write", totals["dirs"] / per, "dirs"),
        ]
    return found


def overlap(results: list[dict]) -> float:
    """Share of the longest member's run during which every member was running."""
    start = max(r["started_s"] for r in results)
    end = min(r["ended_s"] for r in results)
    longest = max(r["ended_s"] - r["started_s"] for r in results)
    return max(0.0, end - start) / longest if longest > 0 else 0.0


def describe(p: dict, plan: CasePlan | None) -> str:
    """The point in one line of the job's log."""
    if plan is None:
        layout = mesh(p)
        return (
            f"{p['cells_per_rank']} cells per rank (duct {layout['nx']} x {layout['ny']} x "
            f"{layout['nz']}), {p['steps']} iterations, write interval {p['write_interval']}, "
            f"{p['file_handler']}, {p['write_format']}, purgeWrite {p['purge_write']}"
        )
    steps = plan.steps if plan.steps is not None else "the case's own"
    cells = f"{plan.cells} cells" if plan.cells is not None else "cells as prepared"
    prepare = "; ".join(shlex.join(argv) for _, argv in plan.prepare) or "nothing"
    return (
        f"case {plan.folder} ({cells}), prepared by {prepare}, {steps} time steps, "
        f"writes {plan.write[0]} "
        f"{plan.write[1] if plan.write[1] is not None else ''}, {plan.write_format}, "
        f"purgeWrite {plan.purge}; controlDict set: {plan.entries or 'nothing'}"
    )


def case_record(plan: CasePlan) -> dict:
    """What the job's record says of the case it ran."""
    return {
        "folder": str(plan.folder.resolve()),
        "application": plan.application,
        "cells": plan.cells,
        "steps": plan.steps,
        "write": [plan.write[0], None if plan.write[1] is None else str(plan.write[1])],
        "controlDict_set": {
            k: v if not isinstance(v, Decimal) else str(v) for k, v in plan.entries.items()
        },
        "size_bytes": plan.size,
        "prepare": [shlex.join(argv) for _, argv in plan.prepare],
    }


def preprocessing_metrics(preprocessing: list[dict]) -> list[dict]:
    """The times of what ran before the solver, each member's mean: the case's copy onto
    the tier, blockMesh or the study's ``prepare`` (its commands together), decomposePar
    (a step that did not run has no metric)."""
    names = {"copy": "case_copy_time", "blockMesh": "blockmesh_time"}
    names.update(prepare="prepare_time", decomposePar="decompose_time")
    return [
        metric(name, mean(t[step] for t in preprocessing), "s")
        for step, name in names.items()
        if step in preprocessing[0]
    ]
