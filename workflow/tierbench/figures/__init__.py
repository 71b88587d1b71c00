"""The figures of each family, made from its tables: ``tierbench.figures.<family>.make(...)``.

A family's ``make`` takes every file it reads as a parameter (a frame or a path),
writes ``<name>.png``, ``<name>.svg`` and ``manifest.json`` (captions, read by the
report) into ``out_dir`` and returns the PNGs in manifest order. The notebooks in
``notebooks/`` are papermill shells around these functions.
"""

from __future__ import annotations

#: the families a workload's ``family`` may name
FAMILIES = ("fio", "sequential", "pv", "fe", "cfd", "paper")
