"""What an OpenFOAM run wrote: a case's tree (paths and sizes) before and after it, its time
folders, and how the files and folders of one write lie per rank. Reads folders, writes
nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

from ...errors import PointFailed

#: the writer name of a serial (1-rank) run's time folders, in the case itself
SERIAL = "case"
#: the label of what a user's case writes beside its time folders (``postProcessing/``, ...)
OTHER = "other"


def is_time_name(name: str) -> bool:
    try:
        float(name)
    except ValueError:
        return False
    return True


def tree(root: Path, everything: bool = False) -> dict[str, int]:
    """Every file (size in bytes) and folder (-1) the solver may write in, by writer.

    A parallel run writes in ``processor<N>/`` (uncollated) or
    ``processors<N>/`` (collated); a 1-rank run is serial and writes its time
    folders in the case itself, listed as ``case/<time>/...``. ``everything``
    (a user's case): also the rest of the case, listed as ``other/...``, where
    its function objects write (``postProcessing/``), but not the logs
    (``log.*``) the workload writes itself.
    """
    tops = [(top, top.name) for top in sorted(root.glob("processor*")) if top.is_dir()]
    tops += [
        (top, f"{SERIAL}/{top.name}")
        for top in sorted(root.iterdir())
        if top.is_dir() and is_time_name(top.name)
    ]
    found = {}
    if everything:
        listed = {top for top, _ in tops}
        for top in sorted(root.iterdir()):
            if top in listed or top.name.startswith("log."):
                continue
            if top.is_dir():
                tops.append((top, f"{OTHER}/{top.name}"))
            else:
                found[f"{OTHER}/{top.name}"] = os.stat(top).st_size
    for top, label in tops:
        found[label + "/"] = -1
        for here, dirs, files in os.walk(top):
            rel = os.path.relpath(here, top)
            prefix = label if rel == "." else f"{label}/{Path(rel).as_posix()}"
            for name in dirs:
                found[f"{prefix}/{name}/"] = -1
            for name in files:
                found[f"{prefix}/{name}"] = os.stat(os.path.join(here, name)).st_size
    return found


def time_of(path: str) -> str | None:
    """The time folder a path in a writer's tree belongs to (``processor0/3/U`` -> ``3``);
    None for the rest of a case (``other/...``)."""
    parts = path.rstrip("/").split("/")
    return parts[1] if len(parts) > 1 and parts[0] != OTHER else None


def counts(paths: dict[str, int]) -> dict[str, int]:
    """Files, folders and the files' bytes of a listing made by :func:`tree`."""
    return {
        "files": sum(size >= 0 for size in paths.values()),
        "dirs": sum(size < 0 for size in paths.values()),
        "bytes": sum(size for size in paths.values() if size >= 0),
    }


def write_tree(before: dict[str, int], after: dict[str, int], writes: list[int]) -> dict:
    """What the solver created in the processor trees, per write time kept.

    Returns the totals (over the writes, the purged ones counted as the kept
    ones' mean) and, for the fidelity comparison, the names and sizes of one
    kept write time.
    """
    new = {path: size for path, size in after.items() if path not in before}
    times = sorted({time_of(p) for p in new} - {None}, key=float)
    wrote = [str(w) for w in writes]
    strays = [t for t in times if t not in wrote]
    if strays:
        raise PointFailed(f"simpleFoam wrote time folders {strays} that are not write times")
    per_time = {
        name: counts({p: s for p, s in new.items() if time_of(p) == name}) for name in times
    }
    other = {p: s for p, s in new.items() if time_of(p) is None}
    counted = len(writes) / len(times) if times else 0.0
    extra = counts(other)
    totals = {
        key: sum(t[key] for t in per_time.values()) * counted + extra[key]
        for key in ("files", "dirs", "bytes")
    }
    sample = times[-1] if times else None
    listing = {p: s for p, s in new.items() if sample is not None and time_of(p) == sample}
    return {
        "writes": len(writes),
        "kept_times": times,
        "purged_writes": len(writes) - len(times),
        "per_kept_time": per_time,
        "other_created": other,
        "totals": totals,
        "sample_time": sample,
        "sample": dict(sorted(listing.items())),
    }


def per_rank_layout(sample: dict[str, int], collated: bool) -> dict:
    """Files and folders one writer makes per write, with their sizes (by processor)."""
    writers: dict[str, dict] = {}
    for path, size in sample.items():
        top, _, rest = path.partition("/")
        name = rest.split("/", 1)[1] if "/" in rest.rstrip("/") else ""
        entry = writers.setdefault(top, {"files": {}, "dirs": []})
        if size < 0:
            entry["dirs"].append(name.rstrip("/") or ".")
        else:
            entry["files"][name] = size
    return {"collated": collated, "writers": dict(sorted(writers.items()))}
