"""metadata: what each file-system operation costs on a tier, mdtest's phases.

A job's time on a tier is not only bytes moved: every file it creates, stats,
opens, renames and removes, and every folder it makes, is a call the tier
answers at its own cost. This workload measures those costs, one phase per
operation, as mdtest does: ``items`` folders are made (``dir_create``),
stat'ed and removed, then ``items`` files are created with ``file_size`` bytes
written (``fsync`` before close when asked), stat'ed, opened and read back,
renamed in their folder, renamed back with ``RENAME_NOREPLACE`` (what mv
asks; a tier that refuses it answers EINVAL, and
``file_rename_noreplace_refused`` says so, in % of its calls) and removed.
``layout: flat`` puts them all in one folder; ``tree`` first makes
``branching`` folders per level, ``depth`` levels deep (``tree_create``,
removed at the end: ``tree_remove``), and spreads the items over its leaves.
The cycle repeats until ``min_time`` seconds have passed, so a fast tier's
phases last long enough to be timed.

Each phase gives its rate (``<phase>_rate``, ops/s), its cost per operation
(``<phase>_cost``, us), the phase's time over its operations, and the CPU time
one operation took (``<phase>_cpu``, us: the loop's own, user and system). On
a local tier the two are close; on a network or FUSE tier most of a call is
spent waiting, and ``tierbench.predict`` needs to know how much was not.

What is measured is the call through the VFS, nothing below it unless it
waits: the loop runs right after the files were made, so the dentry and inode
caches answer every stat, open and lookup (these are the costs of a job that
touches its own fresh files, not of a cold tree). Without ``fsync`` a local
disk's creates end in the page cache and its journal, not on the device;
``fsync: true`` makes each create wait for the device, and the difference of
the two points' ``file_create_cost`` is the cost of an fsync after a small
write. On a network file system a create, rename or removal is a round trip
to its server; a stat may be answered by the client's attribute cache.

The loop is C (``csrc/metadata.c``, built with gcc at run time into a scratch
folder, never into the repository): a Python loop of the same calls ran a
stat, the cheapest of them, at 0.6-0.7 of C's rate, its own cost per call
beside a 1.5 us stat on tmpfs (docs/instruments.md, item 10). It runs in the
job's run folder, checks every call and its count, and leaves nothing
behind: its folder must be empty when it ends. ``bench/metadata_vs_c.py``
checks its rates against a plain C loop.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from .. import pagecache
from ..errors import PointFailed, PointNotApplicable, PointSkipped
from ..job import Job
from ..packages import install_hint
from ..records import metric
from ..units import format_size, parse_size
from . import Tool, Workload
from .dd import syncfs

SOURCE = Path(__file__).resolve().parent / "csrc" / "metadata.c"
CFLAGS = ["-O2"]
#: the phases of one cycle, in the order they run (mdtest's: folders, then files)
CYCLE = (
    "dir_create",
    "dir_stat",
    "dir_remove",
    "file_create",
    "file_stat",
    "file_read",
    "file_rename",
    "file_rename_noreplace",
    "file_remove",
)
#: renameat2 with RENAME_NOREPLACE, which coreutils' mv makes: a tier may refuse it (EINVAL)
NOREPLACE = "file_rename_noreplace"
#: above this share of its calls refused (%), a tier refuses the rename without replacing
REFUSED_OVER = 50.0
#: mdtest's phases, which bench item 10 checks against a plain C loop
MDTEST_PHASES = tuple(name for name in CYCLE if name != NOREPLACE)
TREE_PHASES = ("tree_create", "tree_remove")
#: the folder the loop works in, inside the job's run folder
ROOT_NAME = "metadata"
#: leaves a tree may have: each is a folder made and removed once per run
MAX_LEAVES = 100_000


def leaves(params: dict) -> int:
    """Folders at the bottom of the tree (1 for a flat layout: the one folder)."""
    if params["layout"] != "tree":
        return 1
    return int(params["branching"]) ** int(params["depth"])


def tree_folders(params: dict) -> int:
    """Folders of the tree: branching + branching^2 + ... + branching^depth (0 when flat)."""
    if params["layout"] != "tree":
        return 0
    return sum(int(params["branching"]) ** level for level in range(1, int(params["depth"]) + 1))


def check_params(params: dict) -> None:
    if leaves(params) > MAX_LEAVES:
        raise ValueError(
            f"a tree of branching {params['branching']} and depth {params['depth']} has "
            f"{leaves(params)} leaves; at most {MAX_LEAVES}"
        )


def planned_bytes(params: dict) -> int:
    """The files' bytes at once, with a 4 KiB block each for every file and folder."""
    items = int(params["items"])
    return items * (parse_size(params["file_size"]) + 2 * 4096) + tree_folders(params) * 4096


def runtime_s(params: dict) -> float:
    """At a pessimistic 200 operations a second (an fsync'd network tier), plus min_time."""
    ops = int(params["items"]) * len(CYCLE) + 2 * tree_folders(params)
    return 10 + float(params["min_time"]) + ops / 200


def command(binary: Path, root: Path, params: dict) -> list[str]:
    return [
        str(binary),
        str(root),
        params["layout"],
        str(int(params["items"])),
        str(int(params["branching"])),
        str(int(params["depth"])),
        str(parse_size(params["file_size"])),
        "1" if params["fsync"] else "0",
        str(float(params["min_time"])),
    ]


def parse_phases(text: str) -> dict[str, tuple[int, float, float]]:
    """The loop's lines ``<phase> <ops> <seconds> <cpu seconds>``, by phase."""
    found = {}
    for line in text.splitlines():
        parts = line.split()
        if parts[:1] == ["refused"]:
            continue
        if len(parts) != 4:
            raise PointFailed(f"the metadata loop printed an unexpected line: {line!r}")
        name, ops, seconds, cpu = parts
        found[name] = (int(ops), float(seconds), float(cpu))
    return found


def check_counts(phases: dict[str, tuple], params: dict) -> int:
    """Every phase ran, the same whole number of cycles of ``items``; returns the cycles."""
    expected = set(CYCLE) | (set(TREE_PHASES) if params["layout"] == "tree" else set())
    if set(phases) != expected:
        raise PointFailed(
            f"the metadata loop reported phases {sorted(phases)}, expected {sorted(expected)}"
        )
    items = int(params["items"])
    cycles = phases["file_create"][0] // items
    for name in CYCLE:
        if cycles < 1 or phases[name][0] != cycles * items:
            raise PointFailed(
                f"{name}: {phases[name][0]} operations, expected {cycles} cycles x {items}"
            )
    for name in TREE_PHASES if params["layout"] == "tree" else ():
        if phases[name][0] != tree_folders(params):
            raise PointFailed(f"{name}: {phases[name][0]} folders, expected {tree_folders(params)}")
    return cycles


def refused_calls(text: str) -> dict[str, int]:
    """The loop's lines ``refused <phase> <calls>``: calls the tier refused, by phase."""
    return {p[1]: int(p[2]) for p in map(str.split, text.splitlines()) if p[:1] == ["refused"]}


def refuses(share: float) -> bool:
    """Whether a tier refuses the rename without replacing, from the share of the phase's
    calls it refused (``<NOREPLACE>_refused``, %)."""
    return bool(share > REFUSED_OVER)


def refused_metrics(phases: dict[str, tuple], refused: dict[str, int]) -> list[dict]:
    """Of the RENAME_NOREPLACE phase's calls, the share the tier refused (%)."""
    calls = phases[NOREPLACE][0]
    return [metric(f"{NOREPLACE}_refused", 100 * refused.get(NOREPLACE, 0) / calls, "%")]


def phase_metrics(phases: dict[str, tuple[int, float, float]]) -> list[dict]:
    """Per phase its rate (ops/s), cost per operation (us) and the CPU time of one (us)."""
    found = []
    for name, (ops, seconds, cpu) in phases.items():
        if seconds <= 0:
            raise PointFailed(f"{name}: {ops} operations in {seconds} s, too short to time")
        found.append(metric(f"{name}_rate", ops / seconds, "ops/s"))
        found.append(metric(f"{name}_cost", seconds / ops * 1e6, "us"))
        found.append(metric(f"{name}_cpu", cpu / ops * 1e6, "us"))
    return found


def compile_loop(scratch: Path, job: Job) -> Path:
    binary = scratch / "metadata"
    build = ["gcc", *CFLAGS, str(SOURCE), "-o", str(binary)]
    done = subprocess.run(build, capture_output=True, text=True)
    if done.returncode != 0:
        raise PointFailed(f"gcc could not build the metadata loop: {done.stderr.strip()[-400:]}")
    job.extra["compile_command"] = " ".join(build)
    return binary


def leftovers(root: Path) -> list[str]:
    """What the loop left in its folder (nothing, when it did its work)."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def run(job: Job) -> list[dict]:
    if job.folder is None:
        raise PointNotApplicable("metadata makes files and folders; the void tier has no folder")
    if shutil.which("gcc") is None:
        raise PointSkipped(f"gcc is not installed (install it with: {install_hint('gcc')})")
    params = job.params
    job.folder.ensure_space(planned_bytes(params), job.max_bytes)
    root = job.folder.path / ROOT_NAME
    root.mkdir()
    with tempfile.TemporaryDirectory(prefix="tierbench-metadata-") as scratch:
        binary = compile_loop(Path(scratch), job)
        argv = command(binary, root, params)
        job.extra["command"] = " ".join(argv[1:])
        syncfs(job.folder.path)
        job.log(
            f"metadata: {params['items']} files and folders, {params['layout']}, "
            f"{format_size(parse_size(params['file_size']))} a file, fsync {params['fsync']}, "
            f"in {root}"
        )
        done = subprocess.run(argv, capture_output=True, text=True)
    left = leftovers(root)
    if done.returncode != 0:
        said = done.stderr.strip().splitlines()
        raise PointFailed(
            f"the metadata loop exited with {done.returncode}: {said[-1] if said else '(nothing)'}"
        )
    if left:
        raise PointFailed(f"the metadata loop left {len(left)} entries behind, e.g. {left[0]}")
    root.rmdir()
    job.log(done.stdout.strip())
    phases = parse_phases(done.stdout)
    cycles = check_counts(phases, params)
    refused = refused_metrics(phases, refused_calls(done.stdout))
    return [*phase_metrics(phases), *refused, metric("cycles", cycles, "cycles")]


def page_cache(params: dict, limits: dict | None) -> dict:
    """fsync'd creates wait for the device; without, a few KiB of metadata stay in memory."""
    if params.get("fsync"):
        return pagecache.result(pagecache.DEVICE, "metadata fsync: every create waits for it")
    what = "metadata without fsync (files, folders and the journal)"
    return pagecache.buffered_write(what, planned_bytes(params), limits)


WORKLOAD = Workload(
    name="metadata",
    summary="metadata: each file-system operation's rate and cost (mdtest's phases)",
    headline=("file_create_rate", "file_stat_rate", "dir_create_rate", "file_remove_rate"),
    run=run,
    family="metadata",
    env="metadata",
    tools=(Tool("gcc"),),
    check_params=check_params,
    planned_bytes=planned_bytes,
    runtime_s=runtime_s,
    page_cache=page_cache,
    creates_files=True,
)
