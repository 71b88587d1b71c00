"""One module per workload; each exposes ``run(job)`` and optionally ``check_params``."""
