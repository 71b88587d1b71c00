"""Item 5: do the studies finish in the time README.md promises?

The default study (``snakemake -c2``, promised under 10 minutes on 2 cores)
and the smoke preset (``--config scale=smoke``, promised under 2 minutes),
each in a scratch copy of the pipeline. The goals are the entry point's
(default study first, smoke second). At ``--tiny`` the default study is
skipped and the smoke run is reduced, so it is no figure of the preset.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from harness import copy_pipeline, log, row, skipped_row, snakemake

SIZES = {
    "full": {"default_study": True, "smoke_rounds": 2, "smoke_config": ["scale=smoke"]},
    "tiny": {
        "default_study": False,
        "smoke_rounds": 1,
        "smoke_config": ["scale=smoke", "repetitions=1", "warmup=False"],
    },
}
DEFAULT_MEASURE = "Default study"
SMOKE_MEASURE = "Smoke preset"


def measure(mode: str, scratch: Path, goal) -> list[dict]:
    size = SIZES[mode]
    default_goal, smoke_goal = goal
    if size["default_study"]:
        default = study_wall(scratch, "default", [], default_goal, 1, "default_study")
    else:
        default = skipped_row(
            5,
            "default_study",
            f"{DEFAULT_MEASURE} wall time (`snakemake -c2`)",
            "s",
            "skipped (--tiny)",
            default_goal,
        )
    config = size["smoke_config"]
    smoke = study_wall(scratch, "smoke", config, smoke_goal, size["smoke_rounds"], "smoke_study")
    if config != ["scale=smoke"]:
        smoke["detail"] += "; --tiny: 1 repetition, no warm-up, so not the preset's figure"
        smoke["met"] = None
    return [default, smoke]


def study_wall(scratch: Path, name: str, config: list[str], goal, rounds: int, key: str) -> dict:
    """Wall time of ``snakemake -c2`` in a fresh copy of the pipeline, ``rounds`` times."""
    measure = DEFAULT_MEASURE if name == "default" else SMOKE_MEASURE
    times = []
    for round_ in range(rounds):
        root = copy_pipeline(scratch, f"{name}{round_}")
        args = ["-c2", "-q"] + (["--config", *config] if config else [])
        seconds, done = snakemake(args, root)
        if done.returncode != 0:
            raise RuntimeError(f"snakemake {' '.join(args)} failed: {done.stderr[-1500:]}")
        times.append(seconds)
        shutil.rmtree(root, ignore_errors=True)
        log(f"5 {measure}: {seconds:.1f} s")
    command = "snakemake -c2" + (f" --config {' '.join(config)}" if config else "")
    return row(
        5,
        key,
        f"{measure} wall time (`{command}`)",
        "s",
        times,
        goal,
        f"in a scratch copy of the pipeline; goal: README.md's promise ({goal.value:.0f} s)",
    )
