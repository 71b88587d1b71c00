"""A study on Slurm as a handful of allocations, not one job per repetition.

Sites cap the jobs a user may queue and ask that every job run for tens of
minutes; a study of hundreds of sub-second repetitions, each its own job and
each queued again, is what they refuse. Under the Slurm executor the pipeline
therefore packs its benchmark jobs into allocations (Snakemake job groups,
one ``sbatch`` each): in study order, the jobs that must run back to back kept
together (a point's warm-up and repetitions, a proxy's repetition right after
its application's), each allocation filled up to the site's longest
allocation, and points bound to another partition in allocations of their
own. Inside an allocation Snakemake runs one benchmark at a time, each
starting its own ``srun`` steps for exactly the nodes and ranks it needs.

The packing is pure: it takes the jobs with their estimated seconds, nodes
and ranks, and the site's limits, and returns the allocations in the order
they run. Every job of a round is packed; Snakemake submits of an allocation
only the jobs that have no result yet, so running the same command again runs
only those (and asks for their share of the time limit).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

#: seconds a job takes inside an allocation besides its own estimate: Snakemake starts
#: it, the runner probes the node
STEP_OVERHEAD_S = 10
#: a job's minutes when its workload does not estimate its run time (`runtime_s`)
UNKNOWN_MINUTES = 10
#: the longest allocation where neither the site nor its partition says (a common limit)
DEFAULT_AT_MOST_MINUTES = 24 * 60
#: minutes an allocation takes before its first job: the batch script's Snakemake
#: parses the workflow and builds its part of the graph
START_MINUTES = 2


@dataclass(frozen=True)
class Bench:
    """One benchmark job: a repetition of a point, and what it needs of an allocation."""

    point: str  # workload/experiment/tier/point, the key of the study's plan
    rep: int
    seconds: float  # what it may take inside an allocation (step_seconds)
    nodes: int = 1
    tasks: int = 1
    partition: str = ""


@dataclass
class Allocation:
    """One Slurm job that runs some benchmarks one after another."""

    name: str
    partition: str
    jobs: list[Bench] = field(default_factory=list)

    @property
    def minutes(self) -> int:
        """Its time limit: the start-up and every job's estimate, added up, in whole minutes."""
        return START_MINUTES + math.ceil(sum(job.seconds for job in self.jobs) / 60)

    def shares(self) -> dict[tuple[str, int], int]:
        """Each job's whole minutes of the time limit, which add up to it: Snakemake gives a
        group the sum of its jobs' ``runtime``, and a second run, whose group holds only
        the jobs left, asks for about their part (the start-up rides on the first job)."""
        shares, before, total = {}, 0, 0.0
        for job in self.jobs:
            total += job.seconds
            upto = START_MINUTES + math.ceil(total / 60)
            shares[(job.point, job.rep)] = upto - before
            before = upto
        return shares

    @property
    def nodes(self) -> int:
        return max((job.nodes for job in self.jobs), default=1)

    @property
    def tasks_per_node(self) -> int:
        """Tasks each node must hold: the most any job places on one of its nodes."""
        return max((-(-job.tasks // job.nodes) for job in self.jobs), default=1)

    @property
    def tasks(self) -> int:
        """Every node holds the most tasks a job puts on one: a job of 2 ranks on one
        node and an ensemble of two 1-rank members on a node each make 2 x 2."""
        return self.nodes * self.tasks_per_node

    def summary(self) -> dict:
        """What the plan shows of it: nodes, time limit and the points it runs."""
        points: dict[str, list[int]] = {}
        for job in self.jobs:
            points.setdefault(job.point, []).append(job.rep)
        return {
            "name": self.name,
            "partition": self.partition,
            "nodes": self.nodes,
            "tasks": self.tasks,
            "minutes": self.minutes,
            "jobs": len(self.jobs),
            "points": points,
        }


@dataclass(frozen=True)
class Limits:
    """A site's wishes for allocations (the hardware file's ``allocations``).

    ``at_most`` caps an allocation's time limit (unset: no cap; the pipeline
    passes the partition's own limit, else a day); ``at_least`` is the shortest
    a site likes, which the plan reports where a study has too little work to
    fill one; ``queue`` is how many of a run's jobs may wait in the queue at once.
    """

    at_most_minutes: int | None = None
    at_least_minutes: int = 0
    queue: int | None = None


def step_seconds(estimate_s: float | None) -> float:
    """What a job may take inside an allocation: twice its own estimate and its start."""
    if estimate_s is None:
        return UNKNOWN_MINUTES * 60.0
    return 2 * float(estimate_s) + STEP_OVERHEAD_S


def pack(units: list[list[Bench]], limits: Limits, prefix: str) -> list[Allocation]:
    """Allocations for ``units`` (lists of jobs that must stay together, in run order).

    One partition's units fill an allocation until the next would pass
    ``at_most``; a unit longer than that on its own is cut between its jobs,
    which still run in order in consecutive allocations. A job's dependencies
    only ever point back to an earlier allocation, never forward, so the
    groups form no cycle.
    """
    room = None
    if limits.at_most_minutes is not None:
        room = 60.0 * max(1, limits.at_most_minutes - START_MINUTES)
    open_by_partition: dict[str, Allocation] = {}
    made: list[Allocation] = []

    def start(partition: str) -> Allocation:
        allocation = Allocation(f"{prefix}-{len(made) + 1}", partition)
        made.append(allocation)
        open_by_partition[partition] = allocation
        return allocation

    def used(allocation: Allocation) -> float:
        return sum(job.seconds for job in allocation.jobs)

    for unit in units:
        if not unit:
            continue
        partition = unit[0].partition
        current = open_by_partition.get(partition) or start(partition)
        length = sum(job.seconds for job in unit)
        if room is not None and current.jobs and used(current) + length > room:
            current = start(partition)
        for job in unit:
            if room is not None and current.jobs and used(current) + job.seconds > room:
                current = start(partition)
            current.jobs.append(job)
    return made


def interleave(first: list[Bench], second: list[Bench]) -> list[Bench]:
    """A proxy's jobs right after its application's of the same repetition: the pair runs
    back to back, so the drift of a shared machine between them is paired out."""
    by_rep = {job.rep: job for job in second}
    ordered = []
    for job in first:
        ordered.append(job)
        if job.rep in by_rep:
            ordered.append(by_rep.pop(job.rep))
    return ordered + [job for job in second if job.rep in by_rep]


def rounds(units: list[list[Bench]]) -> list[list[Bench]]:
    """The same jobs in rounds: every point's warm-up, then every point's first measured
    repetition, and so on (a study's ``order: rounds``). A slow minute of a shared machine
    then falls on one repetition of every point, not on all of one point's, and two points'
    runs pair repetition by repetition (:func:`tierbench.intervals.paired`). Each round
    starts one unit further on, so that no point always runs right after the same other.
    A proxy stays right after its application's repetition."""
    units = [unit for unit in units if unit]
    ordered = []
    for k, rep in enumerate(sorted({job.rep for unit in units for job in unit})):
        shift = k % len(units)
        for unit in units[shift:] + units[:shift]:
            jobs = [job for job in unit if job.rep == rep]
            if jobs:
                ordered.append(jobs)
    return ordered


def predecessors(units: list[list[Bench]]) -> dict[tuple[str, int], tuple[str, int]]:
    """Each job's (point, repetition) -> the job that runs right before it on its partition,
    in the order of ``units``: what a job waits for to run in that order. Another partition
    keeps its own line, so that its allocations never wait for each other's (a cycle)."""
    last: dict[str, tuple[str, int]] = {}
    before = {}
    for unit in units:
        for job in unit:
            key = (job.point, job.rep)
            if job.partition in last:
                before[key] = last[job.partition]
            last[job.partition] = key
    return before


def describe(allocation: Allocation) -> str:
    """One line of the dry run's table: name, partition, nodes, ranks, time, jobs, points."""
    a = allocation.summary()
    where = f"partition {a['partition']}" if a["partition"] else "default partition"
    return (
        f"  {a['name']}: {where}, {a['nodes']} node(s), {a['tasks']} task(s), "
        f"{a['minutes']} min, {a['jobs']} jobs of {len(a['points'])} points"
    )


def short_ones(allocations: list[Allocation], limits: Limits) -> list[str]:
    """The allocations below the site's shortest wish, each said in one line."""
    return [
        f"allocation {a.name} asks for {a.minutes} min, below the {limits.at_least_minutes} min "
        "the hardware file asks for: the study has no more work to put in it"
        for a in allocations
        if a.minutes < limits.at_least_minutes
    ]
