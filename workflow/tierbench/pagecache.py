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
bytes, as on a local disk. :func:`assess` says, for one point, which it was:

- ``device``: the data had to reach the device within the measured time
  (O_DIRECT, fsync/fdatasync, or more dirty data than the dirty limit, or a
  read of a file whose pages were dropped first, read once), or the point's
  writes created files on a network file system's server;
- ``may_stay_in_memory``: buffered, and small enough to stay in the page cache;
- ``ram_tier``: the tier is memory itself (shm, tmpfs, pmem), so the question
  does not arise;
- ``unknown``: the workload, the tier or the node's limits do not say;
- ``not_applicable``: the point stores nothing (the void tier, STREAM).
"""

from __future__ import annotations

import os
from pathlib import Path

from .tiers import DEVICE_CLASSES, NETWORK, RAM_CLASSES, role
from .units import format_size, parse_size

DEVICE, IN_MEMORY, RAM_TIER, UNKNOWN, NOT_APPLICABLE = (
    "device",
    "may_stay_in_memory",
    "ram_tier",
    "unknown",
    "not_applicable",
)
FIO_WRITES = ("write", "randwrite", "rw", "randrw")
#: workloads that write no file on a tier
NO_FILES = ("stream",)


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


def _result(state: str, reason: str) -> dict:
    return {"page_cache": state, "page_cache_reason": reason}


def _buffered_write(what: str, size: int, limits: dict | None) -> dict:
    """A buffered write of ``size`` dirty bytes against the node's dirty limit."""
    if limits is None:
        return _result(UNKNOWN, f"{what}: the node's dirty limit was not read")
    limit = int(limits["dirty_limit"])
    numbers = f"{format_size(size)} vs the dirty limit {format_size(limit)}"
    if size > limit:
        return _result(
            DEVICE, f"{what} of {numbers}: past the limit the writer waits for the device"
        )
    return _result(
        IN_MEMORY,
        f"{what} of {numbers}: it may finish in the page cache without waiting for the device",
    )


def _fio(params: dict, limits: dict | None) -> dict:
    mode = str(params.get("io_mode", ""))
    if mode == "direct":
        return _result(DEVICE, "fio direct I/O (O_DIRECT) bypasses the page cache")
    if mode == "fsync":
        return _result(DEVICE, "fio fsync after every write: each write waits for the device")
    if mode != "buffered":
        return _result(UNKNOWN, f"fio io_mode {mode or '(none)'} is not buffered/direct/fsync")
    size = parse_size(params["size"])
    if params.get("rw") in FIO_WRITES:
        # rewrites land on the same pages: the dirty data is at most the file
        return _buffered_write("fio buffered write to a file", size, limits)
    passes = parse_size(params["io_size"]) / size if params.get("io_size") else 1.0
    if passes <= 1:
        return _result(
            DEVICE, "fio buffered read of a file whose pages were dropped first, read once"
        )
    if limits is None:
        return _result(UNKNOWN, "fio buffered read of a file read more than once; RAM not read")
    fits = size <= int(limits["ram"])
    text = f"fio buffered read of a {format_size(size)} file read {passes:g} times"
    if fits:
        return _result(IN_MEMORY, f"{text}: passes after the first may come from the page cache")
    return _result(DEVICE, f"{text}, larger than RAM: every pass reaches the device")


def _dd_bytes(params: dict, limits: dict | None) -> int | None:
    block = parse_size(params["block_size"])
    if "count" in params:
        return parse_size(params["count"]) * block
    if limits is None:
        return None
    # a size above max_file_size is skipped by the workload, so never measured
    return int(float(params["file_fraction"]) * limits[params["relative_to"]])


def _dd(params: dict, limits: dict | None) -> dict:
    flags = {
        part
        for key in ("conv", "oflag")
        for part in str(params.get(key, "") or "").replace(" ", "").split(",")
    }
    if params.get("sync") == "fdatasync" or flags & {"fdatasync", "fsync"}:
        return _result(DEVICE, "dd conv=fdatasync: its time includes flushing to the device")
    if flags & {"direct", "dsync", "sync"}:
        return _result(DEVICE, "dd oflag=direct/dsync: every block waits for the device")
    size = _dd_bytes(params, limits)
    if size is None:
        return _result(UNKNOWN, "dd file size relative to the node's memory, which was not read")
    return _buffered_write("dd buffered write", size, limits)


def _pv(params: dict, limits: dict | None) -> dict:
    return _buffered_write("pv buffered write (no fsync)", parse_size(params["size"]), limits)


def _planned_bytes(workload: str, params: dict) -> int:
    # imported here: the registry imports the workload's module, heavy and importing the runner
    from .workloads import estimate

    return int(estimate(workload, "planned_bytes", params))


def _cfd(workload: str):
    """cfd_proxy and openfoam: buffered output unless fsync'd, its peak against the limit."""

    def rule(params: dict, limits: dict | None) -> dict:
        if params.get("fsync") in (True, "true", "True", 1):
            return _result(DEVICE, f"{workload} fsyncs every file it writes")
        if str(params.get("write_interval")) == "none":
            return _result(NOT_APPLICABLE, f"{workload} no-I/O baseline: writes nothing")
        # purged time folders are deleted before writeback: the peak on the tier is what counts
        what = f"{workload} buffered output (no fsync), peak on the tier"
        return _buffered_write(what, _planned_bytes(workload, params), limits)

    return rule


def _fe(workload: str):
    """fe_proxy and calculix: each evaluation's folder, written buffered, deleted after it;
    calculix's run of a user's deck, written buffered too."""

    def rule(params: dict, limits: dict | None) -> dict:
        if str(params.get("fsync", "none")) != "none":
            return _result(DEVICE, f"{workload} fsyncs its output (fsync: {params['fsync']})")
        whose = "its deck's run" if params.get("deck") else "the evaluations at once"
        what = f"{workload} buffered output (no fsync) of {whose}"
        return _buffered_write(what, _planned_bytes(workload, params), limits)

    return rule


def _stage(params: dict, limits: dict | None) -> dict:
    """stage: cp's buffered copy of the case (no fsync), its bytes against the limit. What the
    copy reads was just written, so it is warm too (the record's ``source_page_cache``)."""
    what = "stage: cp's buffered copy (no fsync) of the case"
    return _buffered_write(what, _planned_bytes("stage", params), limits)


def _declared(workload: str):
    """The workload's declaration, None for a name the registry does not know."""
    # imported here: the registry imports the workload's module, heavy and importing the runner
    from .workloads import get

    try:
        return get(workload)
    except KeyError:
        return None


def reaches_server(workload: str, tier_class: str) -> bool:
    """Whether every write of ``workload`` on a ``tier_class`` tier waits for a file server.

    True on a network file system for a workload whose writes create files or
    folders (its declaration's ``creates_files``): a create is a round trip to
    the server, and the page cache holds data, not metadata.
    """
    if role(tier_class) != NETWORK:
        return False
    declared = _declared(workload)
    return declared is not None and declared.creates_files


def _metadata(workload: str, params: dict, tier_class: str) -> dict:
    """A file-creating point on a network tier: the server was reached, with its counts."""
    count = _declared(workload).created_per_write
    what = "files and folders"
    if count is not None:
        files, folders = count(params)
        what = f"{files} files and {folders} folders"
    return _result(
        DEVICE,
        f"{workload} on a {tier_class} tier: each write creates {what}, each a round trip to "
        "the file system's server; the page cache holds data, not metadata",
    )


RULES = {
    "fio": _fio,
    "dd": _dd,
    "pv": _pv,
    "cfd_proxy": _cfd("cfd_proxy"),
    "openfoam": _cfd("openfoam"),
    "fe_proxy": _fe("fe_proxy"),
    "calculix": _fe("calculix"),
    "stage": _stage,
}


def assess(workload: str, params: dict, tier_class: str, limits: dict | None) -> dict:
    """Where one point's measured I/O went: ``{"page_cache": ..., "page_cache_reason": ...}``.

    ``limits`` is :func:`memory_limits` of the node that ran the point (None
    when unknown); a pure function of its arguments otherwise. Buffered output
    that creates files on a network tier is ``device`` whatever its size
    (:func:`reaches_server`).
    """
    if tier_class == "void" or workload in NO_FILES:
        return _result(NOT_APPLICABLE, "the point stores no file on a tier")
    if tier_class in RAM_CLASSES:
        return _result(RAM_TIER, f"a {tier_class} tier is memory: there is no device to reach")
    if tier_class not in DEVICE_CLASSES:
        return _result(UNKNOWN, f"a {tier_class} tier: what backs it decides")
    rule = RULES.get(workload)
    if rule is None:
        return _result(UNKNOWN, f"{workload}: no page-cache rule for this workload")
    found = rule(params, limits)
    # buffered output (or a node whose dirty limit is unknown) cannot hide its creates
    buffered = found["page_cache"] in (IN_MEMORY, UNKNOWN)
    if buffered and reaches_server(workload, tier_class):
        return _metadata(workload, params, tier_class)
    return found


def for_spec(spec: dict, limits: dict | None = None) -> dict:
    """:func:`assess` for a runner spec, reading this node's limits when not given."""
    if limits is None and spec["tier_class"] in DEVICE_CLASSES:
        try:
            limits = memory_limits()
        except (OSError, KeyError, ValueError, IndexError):
            limits = None
    try:
        return assess(spec["workload"], spec["params"], spec["tier_class"], limits)
    except (KeyError, ValueError, TypeError) as error:
        # an annotation of the record: it must never cost the measurement itself
        return _result(UNKNOWN, f"{spec['workload']}: cannot size its I/O ({error!r})")
