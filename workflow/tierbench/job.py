"""What a workload gets to measure one repetition of a point: a :class:`Job`.

Below the workloads, so a workload module needs nothing of the runner
(:mod:`tierbench.runner`), which imports the registry to find it.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from .rundir import RunFolder


@dataclass
class Job:
    """What a workload needs to run one repetition of a point."""

    spec: dict
    folder: RunFolder | None
    #: the record's ``extra``; its ``page_cache_note``, when set, is appended to the point's
    #: page-cache reason (a caveat found while running, e.g. STREAM's capped arrays)
    extra: dict = field(default_factory=dict)
    #: where each rank's own system-call table goes, when the ranks are traced one by one
    #: (:func:`tierbench.syscalls.rank_prefix`)
    rank_tables: Path | None = None

    @property
    def params(self) -> dict:
        return self.spec["params"]

    @property
    def tier_path(self) -> str:
        return self.spec["tier_path"]

    @property
    def max_bytes(self) -> int | None:
        return self.spec.get("max_bytes")

    def log(self, message: str) -> None:
        """Progress line on stderr (the rule's log), with a timestamp."""
        print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)
