"""Item 6: does the paper give the same verdict for every lesson when it is run again?

Runs the ``paper`` target ``--runs`` times (default 3) at ``--scale`` (default
``default``), each in its own fresh copy of the pipeline (so a fresh results
folder, nothing cached between runs), one after the other on this machine;
every copy is made from one snapshot of the checkout taken at the start.
With ``--cluster`` the runs go through ``snakemake --profile slurm`` to the
cluster on one machine (:mod:`tierbench.minicluster`, as root), with its
hardware file: document 001 judged on a shared file system, as issue 30 asks
(``--studies cfd_dcpmm --cluster``); the cluster is started before the first
run and stopped after the last, also when a run fails.
Per lesson of every study's ``verdict.json`` it reports the verdict of each
run and whether they agree; the first row is the share of lessons whose
verdicts agree in all runs (goal: all of them), the second each run's wall
time (goal: a paper run under 15 minutes), then one row per lesson. At
``--tiny`` it runs one small study (``tmpfs_advent``) twice at ``smoke``: a
check that the item works, not a figure of the paper, with 2 repetitions and no warm-up
set in the study file of its snapshot (a study's own settings win over ``--config``).

    .venv/bin/python bench/verdict_repeatability.py --runs 3 --scale default
    .venv/bin/python bench/verdict_repeatability.py --studies cfd_dcpmm --cluster
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
from collections import Counter
from contextlib import ExitStack, contextmanager
from pathlib import Path

from harness import (
    PIPELINE_FILES,
    REPO,
    at_least,
    at_most,
    copy_pipeline,
    log,
    row,
    set_top_level,
    snakemake,
)

#: what a run on the cluster adds to the snakemake command (as tests/test_slurm.py)
CLUSTER_ARGS = [
    "--profile", "slurm", "--slurm-init-seconds-before-status-checks", "1",
]  # fmt: skip
#: one run of cfd_dcpmm at default scale on the cluster took about an hour
RUN_TIMEOUT = 3 * 3600

#: results/<MACHINE>/<study>/ in each scratch copy: the runs never touch the clone's results
MACHINE = "bench"
#: on the cluster the hardware file names the machine: results/minicluster/<study>/
CLUSTER_MACHINE = "minicluster"
SIZES = {
    "full": {"runs": 3, "scale": "default", "studies": None, "settings": {}},
    # the study's own repetitions (3 to 8, adaptive) and warm-up made half of a run's jobs
    "tiny": {
        "runs": 2,
        "scale": "smoke",
        "studies": ["tmpfs_advent"],
        "settings": {"repetitions": "2", "warmup": "false"},
    },
}
AGREEMENT_MEASURE = "Paper lessons whose verdict is the same in every run (share)"
WALL_MEASURE = "Paper run wall time"


@contextmanager
def machine_env(name: str):
    """TIERBENCH_MACHINE set for the runs, restored after them."""
    before = os.environ.get("TIERBENCH_MACHINE")
    os.environ["TIERBENCH_MACHINE"] = name
    try:
        yield
    finally:
        if before is None:
            del os.environ["TIERBENCH_MACHINE"]
        else:
            os.environ["TIERBENCH_MACHINE"] = before


def machine_of(cluster: bool) -> str:
    """The results folder's machine name of a run."""
    return CLUSTER_MACHINE if cluster else MACHINE


def targets(studies: list[str] | None, machine: str = MACHINE) -> list[str]:
    """The paper target, or only the verdicts of the named studies."""
    if studies is None:
        return ["paper"]
    return [f"results/{machine}/{study}/verdict.json" for study in studies]


def read_verdicts(root: Path, machine: str = MACHINE) -> dict[tuple[str, str], str]:
    """(study, lesson) -> status, from every verdict.json of a run."""
    return verdicts_under(root / "results" / machine)


def verdicts_under(folder: Path) -> dict[tuple[str, str], str]:
    """(study, lesson) -> status, from every <study>/verdict.json in ``folder``."""
    found = {}
    for path in sorted(folder.glob("*/verdict.json")):
        for verdict in json.loads(path.read_text())["verdicts"]:
            found[(path.parent.name, verdict["lesson"])] = verdict["status"]
    if not found:
        raise RuntimeError(f"no verdict.json under {folder}")
    return found


def pipeline_commit() -> str:
    """The checkout's commit, refused when its pipeline files have uncommitted edits: a kept
    run is named by the commit it measured, so that later runs can be matched with it."""
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--", *PIPELINE_FILES],
        cwd=REPO, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    if dirty.strip():
        raise SystemExit(f"uncommitted edits in the pipeline; commit them first:\n{dirty}")
    return git("rev-parse", "HEAD")


def git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def earlier_runs(folders: list[Path], commit: str) -> list[dict[tuple[str, str], str]]:
    """Verdicts of runs kept by an earlier invocation (``--earlier``), one hour-long run per
    session: each must have measured the same pipeline files as this one."""
    runs = []
    for folder in folders:
        measured = (folder / "commit").read_text().strip()
        changed = git("diff", "--name-only", measured, commit, "--", *PIPELINE_FILES)
        if changed:
            raise SystemExit(
                f"{folder} measured {measured[:10]}, whose pipeline differs from "
                f"{commit[:10]} in: {', '.join(changed.split())}"
            )
        runs.append(verdicts_under(folder))
    return runs


#: what each run keeps (``--keep``): enough to read why two runs differ and to judge it again
KEPT = ("verdict.json", "summary.csv", "results.csv", "repetitions.json", "fidelity.json")


def keep_tables(root: Path, keep: Path, index: int, machine: str = MACHINE) -> None:
    for name in KEPT:
        for path in (root / "results" / machine).glob(f"*/{name}"):
            target = keep / f"run{index}" / path.parent.name / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)


@contextmanager
def cluster_up():
    """The cluster on one machine, up for the runs and down after them (its lock held)."""
    from tierbench import minicluster

    with minicluster.cluster_lock():
        cluster = minicluster.MiniCluster()
        try:
            log(cluster.up())
            yield
        finally:
            cluster.down()


def run_args(scale: str, studies: list[str] | None, cluster: bool) -> list[str]:
    """The snakemake arguments of one run, on this machine or through Slurm to the cluster."""
    if cluster:
        config = ["--config", f"scale={scale}", "hardware=minicluster"]
        return [*CLUSTER_ARGS, *config, "--", *targets(studies, CLUSTER_MACHINE)]
    return ["-c", "all", "--config", f"scale={scale}", "--", *targets(studies)]


def paper_run(
    scratch: Path,
    index: int,
    scale: str,
    studies: list[str] | None,
    keep: Path | None = None,
    cluster: bool = False,
    origin: Path = REPO,
    commit: str = "",
) -> tuple:
    """One run in a fresh copy of the pipeline (of ``origin``): its wall time and its verdicts."""
    root = copy_pipeline(scratch, f"paper{index}", origin)
    if cluster:  # the profile name is looked up in the run's folder
        (root / "slurm").symlink_to((REPO / "slurm").readlink())
    args = run_args(scale, studies, cluster)
    try:
        with machine_env(MACHINE):
            seconds, done = snakemake(args, root, timeout=RUN_TIMEOUT)
        if keep is not None:
            for path in (root / ".snakemake" / "log").glob("*.log"):  # why a run failed, too
                (keep / f"run{index}").mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, keep / f"run{index}" / "snakemake.log")
        if done.returncode != 0:
            tail = (done.stderr or done.stdout)[-1500:]
            raise RuntimeError(f"snakemake {' '.join(args)} failed: {tail}")
        if keep is not None:
            keep_tables(root, keep, index, machine_of(cluster))
            (keep / f"run{index}" / "commit").write_text(commit + "\n")
        return seconds, read_verdicts(root, machine_of(cluster))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def lesson_table(runs: list[dict[tuple[str, str], str]]) -> list[dict]:
    """Per lesson of any run: each run's status ("missing" where a run has none), agreement."""
    lessons = sorted({key for verdicts in runs for key in verdicts})
    table = []
    for study, lesson in lessons:
        statuses = [verdicts.get((study, lesson), "missing") for verdicts in runs]
        table.append(
            {
                "study": study,
                "lesson": lesson,
                "verdicts": statuses,
                "agree": len(set(statuses)) == 1,
            }
        )
    return table


def lesson_rows(table: list[dict]) -> list[dict]:
    """One row per lesson: the share of runs giving its most common verdict, and each verdict."""
    rows = []
    for number, entry in enumerate(table, 1):
        statuses = entry["verdicts"]
        top = Counter(statuses).most_common(1)[0][1]
        rows.append(
            row(
                6,
                f"lesson_{number}",
                f"{entry['study']}: {entry['lesson'][:80]} (runs giving its commonest verdict)",
                "ratio",
                [top / len(statuses)],
                None,
                ", ".join(statuses),
                study=entry["study"],
                lesson=entry["lesson"],
                verdicts=statuses,
            )
        )
    return rows


def summary_rows(table, walls, scale, studies, goals, reduced, cluster=False) -> list[dict]:
    agreement_goal, wall_goal = goals
    agree = sum(entry["agree"] for entry in table)
    runs = len(table[0]["verdicts"]) if table else len(walls)
    what = "paper" if studies is None else ", ".join(studies)
    if cluster:
        what += " on the two-node cluster (hardware=minicluster, --profile slurm)"
    differing = [f"{e['study']}: {', '.join(e['verdicts'])}" for e in table if not e["agree"]]
    detail = f"{agree} of {len(table)} lessons agree in {runs} runs of {what} at scale={scale}"
    if differing:
        detail += "; differing: " + "; ".join(differing)
    agreement = row(
        6, "verdict_agreement", AGREEMENT_MEASURE, "ratio", [agree / len(table)],
        agreement_goal, detail, lessons=table, agree=agree, total=len(table),
    )  # fmt: skip
    command = " ".join(run_args(scale, studies, cluster))
    wall = row(
        6, "paper_wall_time", f"{WALL_MEASURE} (`snakemake {command}`)", "s", walls, wall_goal,
        "each run: " + ", ".join(f"{w:.0f} s" for w in walls)
        + "; one run after the other, each in a fresh copy of the pipeline",
    )  # fmt: skip
    if reduced or runs < 2:
        for out in (agreement, wall):
            out["met"] = None
            out["detail"] += (
                "; --tiny: a reduced run, not the paper's figure"
                if reduced
                else "; one run, kept to compare with later ones (--earlier)"
            )
    return [agreement, wall]


def set_in_studies(root: Path, studies: list[str], settings: dict[str, str]) -> None:
    """Top-level settings of the named study files of a copy of the pipeline replaced."""
    for study in studies:
        path = root / "config" / "studies" / f"{study}.yaml"
        for key, value in settings.items():
            if not set_top_level(path, key, lambda _old, value=value: value):
                raise RuntimeError(f"{path}: no top-level {key}: to set")


def repeatability(
    scratch: Path,
    runs: int,
    scale: str,
    studies,
    goals,
    reduced=False,
    keep=None,
    cluster=False,
    earlier=(),
    commit="",
    settings=None,
):
    """``commit`` names the kept runs (:func:`pipeline_commit`); ``settings`` replace those
    of the study files in every run (:func:`set_in_studies`)."""
    walls, verdicts = [], list(earlier)
    # every run copies one snapshot taken now: a run takes up to hours, and edits made in the
    # checkout meanwhile must not reach the later runs of what is measured as one pipeline
    snapshot = copy_pipeline(scratch, "snapshot")
    if settings:
        set_in_studies(snapshot, studies, settings)
    with ExitStack() as stack:
        if cluster:
            stack.enter_context(cluster_up())
        for index in range(runs):
            seconds, found = paper_run(
                scratch, index, scale, studies, keep, cluster, snapshot, commit
            )
            walls.append(seconds)
            verdicts.append(found)
            counts = ", ".join(
                f"{n} {status}" for status, n in sorted(Counter(found.values()).items())
            )
            log(f"6 run {index + 1} of {runs}: {seconds:.0f} s, {len(found)} lessons: {counts}")
    table = lesson_table(verdicts)
    return summary_rows(table, walls, scale, studies, goals, reduced, cluster) + lesson_rows(table)


def measure(mode: str, scratch: Path, goal) -> list[dict]:
    size = SIZES[mode]
    return repeatability(
        scratch,
        size["runs"],
        size["scale"],
        size["studies"],
        goal,
        reduced=mode == "tiny",
        settings=size["settings"],
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scale", default="default", choices=["smoke", "default", "full"])
    parser.add_argument("--studies", help="comma-separated studies instead of the whole paper")
    parser.add_argument("--scratch", default="/tmp", help="where the copies of the pipeline go")
    parser.add_argument("--keep", type=Path, help="keep each run's verdicts and summaries here")
    parser.add_argument(
        "--cluster", action="store_true", help="run through Slurm on the cluster on one machine"
    )
    parser.add_argument(
        "--earlier",
        type=Path,
        action="append",
        default=[],
        help="a run folder kept by an earlier --keep, compared with these runs (same pipeline)",
    )
    args = parser.parse_args()
    if args.runs + len(args.earlier) < 2 and args.keep is None:
        raise SystemExit("--runs: at least 2 runs to compare, counting --earlier ones, or --keep")
    # runs kept or joined are named by their commit: uncommitted edits are refused
    commit = pipeline_commit() if args.earlier or args.keep is not None else ""
    earlier = earlier_runs(args.earlier, commit)
    studies = args.studies.split(",") if args.studies else None
    goals = (at_least(1.0), at_most(900.0, "s"))
    scratch = Path(args.scratch) / f"tierbench-repeat-{os.getpid()}"
    scratch.mkdir(parents=True)
    # a SIGTERM (kill, a batch system's time limit) unwinds like Ctrl-C: the cluster it
    # started is stopped and the copies removed; a run started with & ignores Ctrl-C
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    try:
        rows = repeatability(
            scratch,
            args.runs,
            args.scale,
            studies,
            goals,
            keep=args.keep,
            cluster=args.cluster,
            earlier=earlier,
            commit=commit,
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
