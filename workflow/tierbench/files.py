"""The file calls the Python twins of the C helpers share (``csrc/files.h`` in C).

Plain system calls, no buffered file objects: what a workload writes reaches
the OS in the calls it makes, one ``writev`` per file where the parts allow.
"""

from __future__ import annotations

import errno
import os

#: a new output file: write only, created or emptied, not inherited by launched programs
CREATE = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0)
#: a file written at its end and kept open
APPEND = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
try:
    IOV_MAX = os.sysconf("SC_IOV_MAX")
except (AttributeError, ValueError, OSError):
    IOV_MAX = 16


def write_all(fd: int, parts, done: int = 0) -> int:
    """``writev`` the parts until every byte is down; ``done`` of them already are.

    Short writes happen (a signal, more than 2 GiB, more parts than IOV_MAX, a
    nearly full tier); empty parts are skipped. Returns the bytes of all parts.
    """
    views = [view for view in (memoryview(part).cast("B") for part in parts) if view.nbytes]
    total = 0
    while True:
        total += done
        while views and done >= views[0].nbytes:
            done -= views.pop(0).nbytes
        if done:
            views[0] = views[0][done:]
        if not views:
            return total
        done = os.writev(fd, views[:IOV_MAX])
        if done <= 0:
            raise OSError(errno.EIO, "writev wrote nothing")
