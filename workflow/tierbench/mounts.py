"""Tiers mounted at run time: a folder of a backing tier seen through a mount.

Document 002 reaches one RAM disk three ways: directly, mounted over a folder
with the OS's mount command, and through a bindfs (FUSE) mount of one of its
folders. A tier with ``backing: <tier>`` is such a view. For every job
:class:`MountedFolder` makes a run folder on the backing tier and mounts it on
``mnt/`` inside a run folder under the tier's own path: with ``bindfs`` (tier
class ``fuse``) or with the kernel's ``mount --bind`` (``mount: bind``, root
only). Both run folders carry the marker. When the job ends, also when it
fails, the mount is undone (``fusermount -u`` / ``umount``, a lazy unmount as
the last resort) and checked gone in /proc/self/mountinfo before either folder
is removed, so clean-up never reaches through a live mount.

Where the mount cannot be made (bindfs missing, no /dev/fuse, not root) the
point is skipped with the reason. Mounts left by a killed job are found by
their run folder's marker and undone by :func:`sweep_stale_mounts`.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

from .errors import PointFailed, PointSkipped
from .packages import package_of
from .probe import mount_of, parse_mountinfo
from .rundir import MARKER, PREFIX, RunFolder, is_ours

#: how a backing tier's folder is mounted
BINDFS, BIND = "bindfs", "bind"
METHODS = (BINDFS, BIND)
#: name of the mount point inside the mount run folder
MOUNT_POINT = "mnt"
#: seconds to wait for a mount to appear, and for a busy mount to let go
WAIT_S = 5.0
COMMAND_TIMEOUT_S = 60


def default_method(tier_class: str) -> str:
    """bindfs for a FUSE tier, the kernel's bind mount for any other class."""
    return BINDFS if tier_class == "fuse" else BIND


def unavailable(method: str) -> str | None:
    """Why ``method`` cannot mount on this node, or None when it can."""
    if method == BINDFS:
        if shutil.which("bindfs") is None:
            return (
                f"bindfs is not installed (Debian/Ubuntu: apt-get install {package_of('bindfs')})"
            )
        if not os.path.exists("/dev/fuse"):
            return "/dev/fuse does not exist: this kernel or container has no FUSE"
        if os.geteuid() != 0 and not os.access("/dev/fuse", os.R_OK | os.W_OK):
            return "/dev/fuse is not readable and writable by this user"
        if os.geteuid() != 0 and not (shutil.which("fusermount") or shutil.which("fusermount3")):
            return "fusermount is not installed, so this user could not unmount a FUSE mount"
        return None
    if method == BIND:
        if os.geteuid() != 0:
            return "mount --bind needs root"
        if shutil.which("mount") is None or shutil.which("umount") is None:
            return "mount/umount are not installed"
        return None
    raise ValueError(f"unknown mount method {method!r} (known: {', '.join(METHODS)})")


def mounts() -> list[dict]:
    """Mounts of this process's mount namespace, from /proc/self/mountinfo."""
    try:
        text = Path("/proc/self/mountinfo").read_text()
    except OSError:
        return []
    return parse_mountinfo(text)


def is_mounted(path: str | os.PathLike) -> bool:
    """True while ``path`` is a mount point (of any file system)."""
    target = os.path.realpath(path)
    return any(m["mount_point"] == target for m in mounts())


def mount_command(method: str, source: Path, target: Path) -> list[str]:
    if method == BINDFS:
        # bindfs mounts, then detaches into the background: the mount exists when it returns
        return ["bindfs", str(source), str(target)]
    return ["mount", "--bind", str(source), str(target)]


def _unmount_commands(method: str, lazy: bool) -> list[list[str]]:
    """Commands to try, in order; only those installed here."""
    if method == BINDFS:
        commands = [["fusermount", "-u"], ["fusermount3", "-u"]]
        if lazy:
            commands = [["fusermount", "-uz"], ["fusermount3", "-uz"]]
        if os.geteuid() == 0:
            commands.append(["umount", "-l"] if lazy else ["umount"])
    else:
        commands = [["umount", "-l"] if lazy else ["umount"]]
    return [c for c in commands if shutil.which(c[0])]


def unmount(path: str | os.PathLike, method: str, log: Callable[[str], None] = print) -> None:
    """Undo the mount on ``path``; lazily if it stays busy. Raises when it is still mounted.

    A FUSE mount may be busy for a moment after the last writer closed its file
    (the daemon still answers the release), so a busy mount is retried for a
    few seconds before it is detached lazily (``-z`` / ``-l``): a lazy unmount
    takes the mount out of the tree at once and the kernel lets go of it when
    its last user does.
    """
    path = os.path.realpath(path)
    errors: list[str] = []
    deadline = time.monotonic() + WAIT_S
    for lazy in (False, True):
        while is_mounted(path):
            for command in _unmount_commands(method, lazy):
                done = _run([*command, path])
                if not is_mounted(path):
                    break
                errors.append(f"{' '.join(command)}: {done}")
            if not is_mounted(path) or lazy or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        if not is_mounted(path):
            if lazy:
                log(f"unmounted {path} lazily after: {'; '.join(errors[-2:])}")
            return
    raise PointFailed(
        f"could not unmount {path} ({'; '.join(errors[-3:]) or 'no unmount command found'}); "
        "it is still mounted and its folders are left in place"
    )


def _run(command: list[str]) -> str:
    """Run a mount tool; returns what it said (empty when it succeeded silently)."""
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return str(error)
    text = (done.stderr or done.stdout or "").strip()
    return text if done.returncode else ""


class MountedFolder:
    """Context manager: a run folder of the backing tier, mounted under the tier's path.

    ``path`` is the mount point (write there: it is the backing folder seen
    through the mount), ``record`` describes the live mount for the job's
    record. Entering raises PointSkipped where the mount cannot be made here.
    """

    def __init__(self, spec: dict, label: str, log: Callable[[str], None] = print):
        self.tier = spec["tier"]
        self.method = spec.get("mount") or default_method(spec["tier_class"])
        self.backing_path = Path(spec["backing_path"])
        self.holder_path = Path(spec["tier_path"])
        self.label = label
        self.log = log
        self.path: Path | None = None
        self.record: dict = {}
        self._stack = ExitStack()
        self._backing: RunFolder | None = None
        self._holder: RunFolder | None = None

    def __enter__(self) -> MountedFolder:
        reason = unavailable(self.method)
        if reason:
            raise PointSkipped(f"tier {self.tier} is mounted with {self.method}, but {reason}")
        try:
            self._backing = self._stack.enter_context(
                RunFolder(self.backing_path, f"{self.label}-backing")
            )
            self._holder = self._stack.enter_context(
                RunFolder(self.holder_path, f"{self.label}-mount")
            )
            self.path = self._holder.path / MOUNT_POINT
            self.path.mkdir()
            # registered before mounting: a mount that half-succeeded is undone too
            self._stack.callback(self._unmount)
            self._mount()
        except BaseException:
            if not self._stack.__exit__(*sys.exc_info()):
                raise
        return self

    def __exit__(self, *exc_info) -> bool:
        return self._stack.__exit__(*exc_info)

    def ensure_space(self, needed: int, max_bytes: int | None) -> None:
        """The data lands on the backing tier: its free space and the (combined) cap count."""
        self._backing.ensure_space(needed, max_bytes)

    def _mount(self) -> None:
        command = mount_command(self.method, self._backing.path, self.path)
        self.log("mounting: " + " ".join(command))
        said = _run(command)
        deadline = time.monotonic() + WAIT_S
        while not is_mounted(self.path) and time.monotonic() < deadline:
            time.sleep(0.05)
        if not is_mounted(self.path):
            raise PointSkipped(
                f"tier {self.tier}: {self.method} could not mount {self._backing.path} on "
                f"{self.path}: {said or 'no mount appeared'}"
            )
        live = mount_of(self.path, mounts())
        self.record = {
            "method": self.method,
            "command": " ".join(command),
            "backing_folder": str(self._backing.path),
            "mount_point": str(self.path),
            "fs_type": live.get("fs_type"),
            "source": live.get("source"),
            "mount_options": live.get("mount_options"),
        }
        self.log(f"mounted {self.path} ({live.get('fs_type')}, {live.get('mount_options')})")

    def _unmount(self) -> None:
        try:
            unmount(self.path, self.method, self.log)
        except PointFailed:
            # never remove folders through a live mount
            self._holder.keep = True
            self._backing.keep = True
            raise
        self.log(f"unmounted {self.path}")


def _stale(folder: Path) -> bool:
    """Our run folder, made on this host by a process that no longer exists."""
    try:
        marker = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return False
    if marker.get("host") != socket.gethostname():
        return False
    pid = int(marker.get("pid", -1))
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def sweep_stale_mounts(tier_path: str | os.PathLike) -> list[str]:
    """Undo mounts that killed jobs left under ``<tier_path>/tierbench-*/mnt``.

    Run before the stale run folders are removed, so their removal does not
    reach through a mount into the backing tier. Returns the mount points undone.
    """
    root = Path(os.path.realpath(tier_path))
    undone = []
    for mount in mounts():
        point = Path(mount["mount_point"])
        holder = point.parent
        if point.name != MOUNT_POINT or holder.parent != root:
            continue
        if not holder.name.startswith(PREFIX) or not is_ours(holder) or not _stale(holder):
            continue
        method = BINDFS if mount["fs_type"].startswith("fuse") else BIND
        try:
            unmount(point, method, lambda _message: None)
        except PointFailed:
            continue
        undone.append(str(point))
    return undone
