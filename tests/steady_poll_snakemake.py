"""`python -m snakemake`, with the Slurm executor asking squeue every few seconds.

The Slurm plugin waits 10 s longer after every status check that finds no job
ended (1, 11, 21, 31 ... s with --slurm-init-seconds-before-status-checks 1, up
to 180 s): a real cluster's controller is spared, but on the minicluster an
allocation of two minutes was seen to have ended a minute before the run went
on, and tests/test_slurm.py waited for that in every allocation. Here the wait
between checks stays at most STEADY_S; what is submitted, how a job's state is
read and what is done with it are the plugin's own. Only tests use this.
"""

from __future__ import annotations

import asyncio

from snakemake_executor_plugin_slurm import Executor

#: the longest wait between two status checks of the run's Slurm jobs
STEADY_S = 2


async def _steady_sleep(self: Executor) -> None:
    await asyncio.sleep(min(self.next_seconds_between_status_checks, STEADY_S))


Executor.sleep = _steady_sleep  # RemoteExecutor's one wait between two checks

if __name__ == "__main__":
    from snakemake.cli import main

    main()
