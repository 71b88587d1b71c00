"""One module per workload; each exposes ``run(job)`` and optionally ``check_params``.

A workload may also say what one of its points needs (``planned_bytes``,
``threads``, ``tasks``, ``runtime_s``, ``mem_mb``: functions of the point's
parameters); :func:`estimate` asks it, with a default where it says nothing.
"""

from __future__ import annotations

import importlib


def estimate(workload: str, name: str, params: dict, default=None):
    """``<workload>.<name>(params)``, or ``default`` where the module does not define it."""
    module = importlib.import_module(f"tierbench.workloads.{workload}")
    function = getattr(module, name, None)
    return function(params) if function is not None else default
