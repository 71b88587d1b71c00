"""Could a point's I/O have stayed in the page cache instead of reaching the device?

A buffered write returns once the data is in the page cache; the kernel writes
it to the device later. The writer only waits for the device when the dirty
data passes the kernel's dirty limit (vm.dirty_bytes or dirty_ratio of the
dirtyable memory). So a buffered write of less than that limit on a disk may
measure RAM, not the disk: a "disk as fast as /dev/shm" result then says
nothing about the disk. The page cache holds data, though, not a network file
system's metadata: each file or folder created on NFS, Lustre, GPFS, BeeGFS or
GlusterFS is a round trip to its server before the call returns. So a workload
whose every write creates files (OpenFOAM's uncollated output, an FE
evaluation's folder) reaches a network tier's server whatever the page cache
holds, while a data-only buffered write there (dd, pv, fio) is judged by its
bytes, as on a local disk. What a workload's own writes are (buffered or
fsync'd, how many bytes) only it knows: its declaration's ``page_cache`` rule
says, built from :func:`result` and :func:`buffered_write`. :func:`assess`
says, for one point, which it was:

- ``device``: the data had to reach the device within the measured time
  (O_DIRECT, fsync/fdatasync, or more dirty data than the dirty limit, or a
  read of a file whose pages were dropped first, read once), or the point's
  writes created files on a network file system's server;
- ``may_stay_in_memory``: buffered, and small enough to stay in the page cache;
- ``ram_tier``: the tier is memory itself (shm, tmpfs, pmem), so the question
  does not arise;
- ``unknown``: the workload, the tier or the node's limits do not say (a
  workload that declares no rule);
- ``not_applicable``: the point stores nothing (the void tier, STREAM).

This module sits below the workloads, which use it; it is given a workload's
declaration (:class:`tierbench.workloads.Workload`), never looks one up.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from .tiers import DEVICE_CLASSES, NETWORK, RAM_CLASSES, role
from .units import format_size

if TYPE_CHECKING:
    from .workloads import Workload

DEVICE, IN_MEMORY, RAM_TIER, UNKNOWN, NOT_APPLICABLE = (
    "device",
    "may_stay_in_memory",
    "ram_tier",
    "unknown",
    "not_applicable",
)


def _proc_int(path: Path) -> int:
    return int(path.read_text().split()[0])


def memory_limits(proc: str | os.PathLike = "/proc") -> dict[str, int]:
    """RAM and the dirty-page thresholds of the kernel, in bytes.

    The thresholds are ``dirty_bytes`` / ``dirty_background_bytes`` when set,
    else their ``*_ratio`` percent of the dirtyable memory (free pages plus
    file pages, as the kernel's global_dirtyable_memory counts it; reserves
    are ignored, so this is a slight overestimate). As in the kernel, a
    background threshold not below the limit is halved.
    """
    proc = Path(proc)
    info = {}
    for line in (proc / "meminfo").read_text().splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if parts:
            info[name] = int(parts[0]) * (1024 if parts[1:] == ["kB"] else 1)
    dirtyable = info["MemFree"] + info.get("Active(file)", 0) + info.get("Inactive(file)", 0)
    vm = proc / "sys" / "vm"

    def threshold(name: str) -> int:
        absolute = _proc_int(vm / f"{name}_bytes")
        return absolute if absolute > 0 else _proc_int(vm / f"{name}_ratio") * dirtyable // 100

    limit = threshold("dirty")
    background = threshold("dirty_background")
    if background >= limit:
        background = limit // 2
    return {
        "ram": info["MemTotal"],
        "dirtyable": dirtyable,
        "dirty_limit": limit,
        "dirty_background": background,
    }


def result(state: str, reason: str) -> dict:
    """What a page-cache rule returns: the state and its reason, one line."""
    return {"page_cache": state, "page_cache_reason": reason}


def buffered_write(what: str, size: int, limits: dict | None) -> dict:
    """A buffered write of ``size`` dirty bytes against the node's dirty limit."""
    if limits is None:
        return result(UNKNOWN, f"{what}: the node's dirty limit was not read")
    limit = int(limits["dirty_limit"])
    numbers = f"{format_size(size)} vs the dirty limit {format_size(limit)}"
    if size > limit:
        return result(
            DEVICE, f"{what} of {numbers}: past the limit the writer waits for the device"
        )
    return result(
        IN_MEMORY,
        f"{what} of {numbers}: it may finish in the page cache without waiting for the device",
    )


def reaches_server(workload: Workload | None, tier_class: str) -> bool:
    """Whether every write of ``workload`` (its declaration; None for a workload the registry
    does not know) on a ``tier_class`` tier waits for a file server.

    True on a network file system for a workload whose writes create files or
    folders (its declaration's ``creates_files``): a create is a round trip to
    the server, and the page cache holds data, not metadata.
    """
    return role(tier_class) == NETWORK and workload is not None and workload.creates_files


def _metadata(workload: Workload, params: dict, tier_class: str) -> dict:
    """A file-creating point on a network tier: the server was reached, with its counts."""
    what = "files and folders"
    if workload.created_per_write is not None:
        files, folders = workload.created_per_write(params)
        what = f"{files} files and {folders} folders"
    return result(
        DEVICE,
        f"{workload.name} on a {tier_class} tier: each write creates {what}, each a round trip "
        "to the file system's server; the page cache holds data, not metadata",
    )


def assess(workload: Workload, params: dict, tier_class: str, limits: dict | None) -> dict:
    """Where one point's measured I/O went: ``{"page_cache": ..., "page_cache_reason": ...}``.

    ``workload`` is the point's declaration (:class:`tierbench.workloads.Workload`);
    ``limits`` is :func:`memory_limits` of the node that ran the point (None
    when unknown); a pure function of its arguments otherwise. Buffered output
    that creates files on a network tier is ``device`` whatever its size
    (:func:`reaches_server`).
    """
    if tier_class == "void" or not workload.writes_to_tier:
        return result(NOT_APPLICABLE, "the point stores no file on a tier")
    if tier_class in RAM_CLASSES:
        return result(RAM_TIER, f"a {tier_class} tier is memory: there is no device to reach")
    if tier_class not in DEVICE_CLASSES:
        return result(UNKNOWN, f"a {tier_class} tier: what backs it decides")
    if workload.page_cache is None:
        return result(UNKNOWN, f"{workload.name}: its declaration has no page-cache rule")
    found = workload.page_cache(params, limits)
    # buffered output (or a node whose dirty limit is unknown) cannot hide its creates
    buffered = found["page_cache"] in (IN_MEMORY, UNKNOWN)
    if buffered and reaches_server(workload, tier_class):
        return _metadata(workload, params, tier_class)
    return found


def for_spec(spec: dict, workload: Workload, limits: dict | None = None) -> dict:
    """:func:`assess` for a runner spec and its workload's declaration, reading this node's
    limits when not given."""
    if limits is None and spec["tier_class"] in DEVICE_CLASSES:
        try:
            limits = memory_limits()
        except (OSError, KeyError, ValueError, IndexError):
            limits = None
    try:
        return assess(workload, spec["params"], spec["tier_class"], limits)
    except (KeyError, ValueError, TypeError) as error:
        # an annotation of the record: it must never cost the measurement itself
        return result(UNKNOWN, f"{spec['workload']}: cannot size its I/O ({error!r})")
