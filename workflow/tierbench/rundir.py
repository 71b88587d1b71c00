"""Run folders: the only place on a tier a benchmark may write.

Every run writes under ``<tier path>/tierbench-<run id>/`` and a marker file
in that folder says who made it. Clean-up removes a folder only when the marker
is there, so a user's files next to it are never touched, also not by a re-run
after a crash (``sweep_stale``).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import uuid
from pathlib import Path

from .errors import PointFailed
from .records import utc_now
from .units import format_size

PREFIX = "tierbench-"
MARKER = ".tierbench-run"


def new_run_id(label: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in label)
    return f"{safe}-{uuid.uuid4().hex[:8]}"


def is_ours(folder: Path) -> bool:
    return folder.name.startswith(PREFIX) and (folder / MARKER).is_file()


def free_bytes(path: str | os.PathLike) -> int:
    stats = os.statvfs(path)
    return stats.f_bavail * stats.f_frsize


def folder_bytes(folder: Path) -> int:
    """Bytes allocated under ``folder`` (what the run really occupies on the tier)."""
    total = 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except FileNotFoundError:
                pass
    return total


class RunFolder:
    """Context manager for ``<tier>/tierbench-<run id>/``; removes it on exit, also on error."""

    def __init__(self, tier_path: str | os.PathLike, label: str, keep: bool = False):
        self.tier_path = Path(tier_path)
        self.path = self.tier_path / (PREFIX + new_run_id(label))
        self.keep = keep

    def __enter__(self) -> RunFolder:
        if not self.tier_path.is_dir():
            # Named with the node: on a cluster a node-local tier may exist on some nodes only.
            why = "" if self.tier_path.exists() else ": it does not exist"
            raise PointFailed(
                f"tier path {self.tier_path} is not a directory on node {socket.gethostname()}{why}"
            )
        self.path.mkdir()
        mark(self.path)
        return self

    def __exit__(self, *exc_info) -> None:
        if not self.keep:
            remove_run_folder(self.path)

    def ensure_space(self, needed: int, max_bytes: int | None) -> None:
        """Stop before writing when the point would exceed the tier's cap or its free space."""
        if max_bytes is not None and needed > max_bytes:
            raise PointFailed(
                f"point would write {format_size(needed)}, more than the tier's max_bytes "
                f"({format_size(max_bytes)})"
            )
        available = free_bytes(self.path)
        if needed > available:
            raise PointFailed(
                f"point needs {format_size(needed)} but {self.tier_path} has "
                f"{format_size(available)} free ({needed:,} > {available:,} bytes)"
            )


def mark(folder: Path) -> None:
    """Say in ``folder`` who made it: clean-up and :func:`sweep_stale` remove only such."""
    marker = {"created_at": utc_now(), "host": socket.gethostname(), "pid": os.getpid()}
    (folder / MARKER).write_text(json.dumps(marker) + "\n")


def remove_run_folder(folder: Path) -> bool:
    """Remove a run folder if, and only if, it carries our marker."""
    folder = Path(folder)
    if not is_ours(folder):
        return False
    shutil.rmtree(folder, ignore_errors=True)
    return not folder.exists()


def stale_folders(tier_path: str | os.PathLike) -> list[Path]:
    """Run folders left by runs on this host that have ended (killed, or a fault).

    Only folders with our marker, made on this host by a process that no
    longer exists: a run still going (or on another node of a shared file
    system) keeps its folder.
    """
    root = Path(tier_path)
    if not root.is_dir():
        return []
    stale = []
    for folder in root.glob(PREFIX + "*"):
        if not is_ours(folder):
            continue
        try:
            marker = json.loads((folder / MARKER).read_text())
        except (OSError, ValueError):
            continue
        if marker.get("host") == socket.gethostname() and not pid_alive(int(marker.get("pid", -1))):
            stale.append(folder)
    return stale


def sweep_stale(tier_path: str | os.PathLike) -> list[Path]:
    """Remove the run folders of ended runs on this host (:func:`stale_folders`)."""
    return [folder for folder in stale_folders(tier_path) if remove_run_folder(folder)]


def pid_alive(pid: int) -> bool:
    """Does a process of this id run on this host?"""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
