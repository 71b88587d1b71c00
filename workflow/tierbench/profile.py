"""What each application and proxy of a study writes in one run: its I/O profile, side by side.

A job of the user's (a command, an OpenFOAM case, a CalculiX deck) is shown
beside the real applications and the proxies of the documents in the same
study: the files, folders and bytes one run writes and, from an experiment
with ``count_syscalls: true``, its file-system calls. Whether a document's
lesson can apply to a job depends on that profile: document 001's job
creates many files and folders at every write, document 000's makes many
small writes per evaluation. Medians over the point's repetitions (the
summary's), then over its tiers: what a run writes does not depend on where.
"""

from __future__ import annotations

import pandas as pd

from .syscalls import METRIC_PREFIX

#: workloads that run an application (the user's own or a document's) or stand for one
PROFILED = ("command", "openfoam", "calculix", "cfd_proxy", "fe_proxy")
#: the user's own jobs: a study with one of these gets the profile table
OWN = {"command": None, "openfoam": "case", "calculix": "deck"}
#: what a run wrote: the first metric a workload reports of each
WRITTEN = {
    "files": ("files_created", "files_written"),
    "folders": ("dirs_created",),
    "bytes": ("bytes_written",),
}
#: the file-system calls shown, by tierbench.syscalls' categories
CALLS = ("open", "mkdir", "stat", "write", "fsync", "unlink", "rename")


def runs_own_job(summary: pd.DataFrame) -> bool:
    """Whether the study runs a job of the user's: a command, a case or a deck."""
    for workload, param in OWN.items():
        rows = summary[summary["workload"] == workload]
        if param is None and len(rows):
            return True
        if param is not None and param in rows and rows[param].notna().any():
            return True
    return False


def profiles(summary: pd.DataFrame) -> list[dict]:
    """One row per point of a profiled workload: what one run wrote and the calls it made."""
    if summary.empty or not runs_own_job(summary):
        return []
    ok = summary[(summary["status"] == "ok") & summary["workload"].isin(PROFILED)]
    rows = []
    for (experiment, workload, point), group in ok.groupby(
        ["experiment", "workload", "point"], sort=False
    ):
        medians = group.groupby("metric")["median"].median()
        entry = {"experiment": experiment, "workload": workload, "point": point}
        for label, names in WRITTEN.items():
            entry[label] = next((float(medians[n]) for n in names if n in medians), None)
        entry["calls"] = {
            name: float(medians[f"{METRIC_PREFIX}{name}"])
            for name in CALLS
            if f"{METRIC_PREFIX}{name}" in medians
        }
        entry["tiers"] = sorted(group["tier"].unique())
        if entry["calls"] or any(entry[label] is not None for label in WRITTEN):
            rows.append(entry)
    return rows
