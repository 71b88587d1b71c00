"""What a job would take on a tier it has not run on: its profile times each tier's costs.

    python -m tierbench.predict [RUN_OR_MACHINE] [--study S] [--db DB] [--out prediction.json]

A job measured on tier A (its whole run's time, the workload's ``run_time``
metric) and traced there (``count_syscalls``: its calls on its run folder by
operation and its writes by size, :mod:`tierbench.syscalls`) is split in two:

- the I/O it did there: per operation, its count times A's cost of one (the
  ``metadata`` workload's ``<phase>_cost``; an fsync costs what an fsync'd
  create costs more than a plain one), and per write size, its bytes over A's
  buffered write bandwidth at the nearest block size (fio, ``rw: write``,
  ``io_mode: buffered``; a write under 4 KiB costs what a 4 KiB one does);
- the rest, its time that does not depend on the tier.

The rest is the job's time minus that I/O while the I/O is under half its time
on A. Above half, that difference is of two near numbers and carries the
costs' error several times over; the rest is then read from the job's CPU time
instead (the workload's ``run_cpu_time``: its user and system time, which a
wait for a slow tier does not add to) minus the CPU time its calls took on A
(the metadata workload's ``<phase>_cpu``, fio's ``cpu_usage`` of a write's
time). That needs the job to have computed on one core at a time (CPU time
not above its time); a parallel job keeps the difference, with a caution.

On tier B of any machine in the results database the job is predicted to take
the rest plus its I/O at B's costs. Each tier's costs are its latest run's
(the default study measures them). The 95% interval is a seeded bootstrap over
the job's repetitions on A and the repetitions of every cost it uses; points
that ran in rounds (``order: rounds``) are resampled run by run, so that a slow
round of a shared machine, which slowed the job and its costs alike, cancels.

Where the job also ran on B, measured / predicted gets its interval and is
placed against 0.75-1.25: wholly inside, the prediction holds; wholly outside,
it fails; across an edge, undecided. The model counts what the benchmarks
price and nothing else: not the bytes a job reads, not data an fsync flushes
beyond a small file's, not ranks or nodes contending for a tier, not a cache
that answers a job's calls and not the benchmark's (or the other way round).
A failed check says which way it missed, and so which of those it points to.
"""

from __future__ import annotations

import argparse
import json
import math
import sqlite3
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from . import intervals
from .records import utc_now
from .resultsdb import DB_HELP, ResultsError, connect, default_db, named_runs, runs
from .syscalls import (
    NOREPLACE_OPS,
    NOREPLACE_REFUSED_OPS,
    OPERATIONS,
    OPS_PREFIX,
    WRITE_CLASSES,
)
from .units import parse_size
from .workloads import registry
from .workloads.metadata import NOREPLACE, refuses

#: what a prediction must come within of the measured time to hold (measured / predicted)
BAND = intervals.Band("within", low=0.75, high=1.25)
HOLDS, FAILS, UNDECIDED = "holds", "fails", "undecided"
#: a write smaller than this costs what a write of this many bytes costs (one call, one page)
SMALLEST_WRITE = 4096
#: the metadata workload's point whose costs price a job's calls: no bytes in its files,
#: one folder before a tree, without fsync (the fsync'd twin prices an fsync)
PREFERRED_LAYOUTS = ("flat", "tree")
#: operations priced by their own metadata phase; fsync is priced as a difference
PHASE_OPERATIONS = tuple(op for op in OPERATIONS if op != "fsync")
FSYNCED_CREATE = "file_create_fsync"
#: above this share of its time in I/O on the tier it was profiled on, a job's time left
#: (its time minus that I/O) carries the tier costs' relative error times share / (1 - share),
#: which is more than the costs' own: the job is better profiled on a faster tier
IO_SHARE_CAUTION = 0.5
#: which way a failed check missed, and what it points to (the tier predicted on, the tier
#: profiled on): either tier's benchmarks may be the ones that were off
MISSED = {
    "slower": (
        "the job took longer on {target} than predicted: its calls cost it more there than "
        "they cost the benchmarks (contention, data a flush waited for, a cold cache), or less "
        "on {source} (a cache there)"
    ),
    "faster": (
        "the job took less on {target} than predicted: its calls cost it less there than they "
        "cost the benchmarks (a cache, I/O overlapping its compute), or more on {source}, "
        "where the prediction kept that as time that does not depend on the tier"
    ),
}


@dataclass
class TierCosts:
    """One tier of one machine: what each operation and each write size costs there."""

    machine: str
    tier: str
    tier_class: str
    #: "op:<phase>" (s per call), "op:file_create_fsync" (s), "bw:<block bytes>" (B/s); the
    #: CPU time of the same: "cpu:<phase>" (s per call), "cpu_usage:<block bytes>" (fraction)
    samples: dict[str, intervals.Sample] = field(default_factory=dict)
    runs: set[str] = field(default_factory=set)
    #: whether the tier refuses a rename without replacing; None where not measured
    refuses_noreplace: bool | None = None

    def block_for(self, size: float) -> int | None:
        """The measured block size nearest ``size`` (on a log scale)."""
        sizes = [int(key[3:]) for key in self.samples if key.startswith("bw:")]
        if not sizes:
            return None
        return min(sizes, key=lambda b: (abs(math.log(b / max(size, 1))), -b))


@dataclass
class Job:
    """A point measured and traced on the same tier of one run."""

    run_id: str
    machine: str
    study: str
    experiment: str
    workload: str
    point: str
    params: str
    tier: str
    metric: str
    time: intervals.Sample
    profile: dict[str, float]
    #: its CPU time in the same repetitions, where its workload reports one
    cpu: intervals.Sample | None = None


# --- reading the database ------------------------------------------------------------------


def _frame(conn: sqlite3.Connection, sql: str, args: tuple = ()) -> pd.DataFrame:
    return pd.read_sql_query(sql, conn, params=args)


def _params(text: str) -> dict:
    try:
        return json.loads(text) if text else {}
    except json.JSONDecodeError:
        return {}


def _sample(rows: pd.DataFrame, scale: float = 1.0) -> intervals.Sample:
    """Its values with their repetitions and start times: points that ran in rounds (a
    study's ``order: rounds``) are then resampled together, run by run."""
    return intervals.sample(
        [float(v) * scale for v in rows["value"]],
        pd.to_numeric(rows["repetition"]).astype(int).tolist(),
        intervals.epoch_seconds(rows["started_at"]),
    )


MEASURED = (
    "SELECT r.machine, r.started, m.run_id, m.experiment, m.workload, m.tier, m.tier_class,"
    " m.point, m.params, m.metric, m.unit, m.value, m.repetition, m.started_at"
    " FROM measurements m JOIN runs r ON r.run_id = m.run_id"
    " WHERE m.phase = 'measured' AND m.status = 'ok' AND m.value IS NOT NULL"
)


def tier_costs(conn: sqlite3.Connection) -> list[TierCosts]:
    """Every tier of every machine that has the metadata workload's costs or fio's buffered
    writes, each cost from the latest run that measured it."""
    rows = _frame(conn, MEASURED + " AND m.workload IN ('metadata', 'fio')")
    found: dict[tuple, TierCosts] = {}
    for (machine, tier), group in rows.groupby(["machine", "tier"], sort=True):
        costs = TierCosts(machine, tier, str(group["tier_class"].iloc[-1]))
        _metadata_costs(costs, group[group["workload"] == "metadata"])
        _write_costs(costs, group[group["workload"] == "fio"])
        if costs.samples:
            found[(machine, tier)] = costs
    return list(found.values())


def _metadata_costs(costs: TierCosts, rows: pd.DataFrame) -> None:
    if rows.empty:
        return
    params = rows["params"].map(_params)
    rows = rows.assign(
        layout=params.map(lambda p: p.get("layout")),
        fsync=params.map(lambda p: bool(p.get("fsync"))),
        file_size=params.map(lambda p: parse_size(p.get("file_size", 0))),
    )
    plain = rows[~rows["fsync"]]
    if plain.empty:
        return

    def preference(key):
        run_started, layout, size = key
        rank = PREFERRED_LAYOUTS.index(layout) if layout in PREFERRED_LAYOUTS else 9
        return (size, rank, _latest_first(run_started))

    points = plain.groupby(["started", "layout", "file_size"]).size().index
    started, layout, size = min(points, key=preference)
    chosen = rows[
        (rows["started"] == started) & (rows["layout"] == layout) & (rows["file_size"] == size)
    ]
    refused = chosen[chosen["metric"] == f"{NOREPLACE}_refused"]
    if not refused.empty:
        costs.refuses_noreplace = refuses(refused["value"].median())
    for fsynced, part in chosen.groupby("fsync"):
        for op in (*PHASE_OPERATIONS, NOREPLACE) if not fsynced else ("file_create",):
            name = FSYNCED_CREATE if fsynced else op
            for suffix, prefix in (("cost", "op"), ("cpu", "cpu")):
                values = part[part["metric"] == f"{op}_{suffix}"]
                if not values.empty:
                    costs.samples[f"{prefix}:{name}"] = _sample(values, 1e-6)
                    costs.runs.add(str(values["run_id"].iloc[0]))


def _latest_first(started) -> float:
    return -pd.Timestamp(started).timestamp() if started else 0.0


def _write_costs(costs: TierCosts, rows: pd.DataFrame) -> None:
    usage = rows[rows["metric"] == "cpu_usage"]
    rows = rows[rows["metric"] == "write_bandwidth"]
    if rows.empty:
        return
    params = rows["params"].map(_params)
    keep = params.map(
        lambda p: (
            p.get("rw") == "write"
            and p.get("io_mode") == "buffered"
            and int(p.get("numjobs", 1)) == 1
        )
    )
    rows = rows[keep].assign(block=params[keep].map(lambda p: parse_size(p["block_size"])))
    for block, group in rows.groupby("block"):
        latest = group[group["started"] == group["started"].max()]
        latest = latest[latest["point"] == latest["point"].iloc[0]]
        costs.samples[f"bw:{int(block)}"] = _sample(latest, 1e6)  # MB/s -> B/s
        costs.runs.add(str(latest["run_id"].iloc[0]))
        busy = usage[(usage["run_id"] == latest["run_id"].iloc[0])]
        busy = busy[busy["point"] == latest["point"].iloc[0]]
        if not busy.empty:
            costs.samples[f"cpu_usage:{int(block)}"] = _sample(busy, 0.01)  # % -> fraction


def jobs_of_run(conn: sqlite3.Connection, run: dict) -> list[Job]:
    """The run's points that were both timed and traced on one tier: a job to predict."""
    rows = _frame(conn, MEASURED + " AND m.run_id = ?", (run["run_id"],))
    workloads = registry()
    found = []
    for (workload, params), group in rows.groupby(["workload", "params"], sort=True):
        metric = getattr(workloads.get(workload), "run_time", "")
        cpu_metric = getattr(workloads.get(workload), "run_cpu_time", "")
        if not metric:
            continue
        traced_experiments = set(group[group["metric"].str.startswith(OPS_PREFIX)]["experiment"])
        timed = group[(group["metric"] == metric) & ~group["experiment"].isin(traced_experiments)]
        traced = group[group["experiment"].isin(traced_experiments)]
        for (experiment, tier), times in timed.groupby(["experiment", "tier"], sort=True):
            counts = traced[traced["tier"] == tier]
            if counts.empty:
                continue
            profile = counts.groupby("metric")["value"].median().to_dict()
            cpu = group[
                (group["metric"] == cpu_metric)
                & (group["experiment"] == experiment)
                & (group["tier"] == tier)
            ]
            found.append(
                Job(
                    run_id=run["run_id"], machine=run["machine"], study=run["study"],
                    experiment=experiment, workload=workload, point=str(times["point"].iloc[0]),
                    params=params, tier=tier, metric=metric, time=_sample(times), profile=profile,
                    cpu=_sample(cpu) if cpu_metric and len(cpu) == len(times) else None,
                )
            )  # fmt: skip
    return found


def measured_times(conn: sqlite3.Connection, job: Job) -> dict[tuple[str, str], intervals.Sample]:
    """(machine, tier) -> the job's measured times there: the latest run of its study on each
    machine that ran the same experiment and parameters."""
    rows = _frame(
        conn,
        MEASURED + " AND r.study = ? AND m.experiment = ? AND m.workload = ? AND m.params = ?"
        " AND m.metric = ?",
        (job.study, job.experiment, job.workload, job.params, job.metric),
    )
    found = {}
    for machine, group in rows.groupby("machine"):
        latest = group[group["started"] == group["started"].max()]
        for tier, times in latest.groupby("tier"):
            found[(machine, tier)] = _sample(times)
    return found


# --- the model -------------------------------------------------------------------------------


def write_classes(profile: dict) -> list[tuple[float, float]]:
    """(bytes as priced, mean size of one write) per write size the job used."""
    found = []
    for bound, label in [*WRITE_CLASSES, (None, WRITE_CLASSES[-1][1])]:
        name = f"upto_{label}" if bound is not None else f"over_{label}"
        writes, written = profile.get(f"writes_{name}", 0), profile.get(f"written_{name}", 0)
        if writes:
            priced = max(written, writes * SMALLEST_WRITE)
            found.append((priced, max(written / writes, SMALLEST_WRITE)))
    return found


def as_made_on(profile: dict, costs: TierCosts) -> tuple[dict, float]:
    """The job's calls as it makes them on a tier, and the renames without replacing (mv's)
    that the tier refuses there, each then a refused call, a lookup of the new name and a
    plain rename: a profile taken where they were accepted gains the lookups, one taken
    where they were refused loses them."""
    asked = profile.get(NOREPLACE_OPS, 0)
    if not asked or costs.refuses_noreplace is None:
        return profile, 0
    fell_back = profile.get(NOREPLACE_REFUSED_OPS, 0)  # where it was profiled
    stats = profile.get(f"{OPS_PREFIX}file_stat", 0)
    lookups = stats + asked - fell_back if costs.refuses_noreplace else max(stats - fell_back, 0)
    made = {**profile, f"{OPS_PREFIX}file_stat": lookups}
    return made, asked if costs.refuses_noreplace else 0


def calls_there(profile: dict, costs: TierCosts) -> str:
    """How the job's calls differ on a tier from its profile, in words ("" when not)."""
    asked = profile.get(NOREPLACE_OPS, 0)
    if as_made_on(profile, costs)[1]:
        return (
            f"it asks for {asked:g} renames without replacing, which this tier refuses: each "
            "priced as the refusal, a lookup of the new name and a rename"
        )
    if costs.refuses_noreplace is False and profile.get(NOREPLACE_REFUSED_OPS, 0):
        return (
            f"it asks for {asked:g} renames without replacing, which this tier makes: no "
            "lookup of the new name after a refusal"
        )
    return ""


def io_terms(profile: dict, costs: TierCosts) -> tuple[list[tuple], str]:
    """What the job's I/O costs on a tier, as terms over its cost samples; or why it cannot be
    priced there. Terms: ("op", calls, key), ("fsync", calls, key, key), ("bytes", B, key)."""
    terms, missing = [], []
    profile, refused = as_made_on(profile, costs)
    if refused and f"op:{NOREPLACE}" in costs.samples:
        terms.append(("op", refused, f"op:{NOREPLACE}"))
    for op in PHASE_OPERATIONS:
        calls = profile.get(f"{OPS_PREFIX}{op}", 0)
        if calls:
            key = f"op:{op}"
            terms.append(("op", calls, key)) if key in costs.samples else missing.append(op)
    fsyncs = profile.get(f"{OPS_PREFIX}fsync", 0)
    if fsyncs:
        keys = (f"op:{FSYNCED_CREATE}", "op:file_create")
        if all(k in costs.samples for k in keys):
            terms.append(("fsync", fsyncs, *keys))
        else:
            missing.append("fsync")
    for priced, size in write_classes(profile):
        block = costs.block_for(size)
        if block is None:
            missing.append("buffered writes")
            break
        terms.append(("bytes", priced, f"bw:{block}"))
    if missing:
        return [], (
            f"{costs.machine}/{costs.tier} has no cost measured for {', '.join(missing)} (the "
            "default study measures them: metadata with and without fsync, fio sequential)"
        )
    return terms, ""


def io_seconds(terms: list[tuple], medians) -> np.ndarray:
    """The terms' seconds, for each row of ``medians`` (key -> column of resampled medians)."""
    total = 0.0
    for term in terms:
        if term[0] == "op":
            total = total + term[1] * medians(term[2])
        elif term[0] == "fsync":
            total = total + term[1] * np.maximum(medians(term[2]) - medians(term[3]), 0.0)
        elif term[0] == "busy":  # bytes' time at a bandwidth times the CPU's share of it
            total = total + term[1] / medians(term[2]) * medians(term[3])
        else:
            total = total + term[1] / medians(term[2])
    return np.asarray(total, dtype=float)


def cpu_terms(terms: list[tuple], costs: TierCosts) -> list[tuple] | None:
    """The CPU time of the same I/O as terms over the tier's CPU costs; None when the tier
    has no CPU cost for one of them (results from before they were measured)."""
    found = []
    for term in terms:
        if term[0] == "bytes":
            found.append(("busy", term[1], term[2], "cpu_usage:" + term[2][3:]))
        else:
            found.append((term[0], term[1], *("cpu:" + key[3:] for key in term[2:])))
    keys = {key for term in found for key in term[2:] if not key.startswith("bw:")}
    return found if keys <= set(costs.samples) else None


def io_at_medians(terms: list[tuple], costs: TierCosts) -> float:
    """The terms' seconds at the medians of the tier's costs (the estimate, no resampling)."""
    return float(io_seconds(terms, lambda key: np.array([costs.samples[key].median]))[0])


@dataclass
class Model:
    """One job from its tier A to a tier B: the samples and the function of their medians."""

    samples: list[intervals.Sample]
    index: dict[str, int]
    source: list[tuple]
    target: list[tuple]
    #: the CPU time of the job's I/O on A, when its rest is read from its CPU time
    source_cpu: list[tuple] | None = None

    @classmethod
    def of(
        cls, job: Job, source: TierCosts, target: TierCosts, from_cpu: bool = False
    ) -> tuple[Model | None, str]:
        source_terms, why = io_terms(job.profile, source)
        if why:
            return None, why
        target_terms, why = io_terms(job.profile, target)
        if why:
            return None, why
        source_cpu = cpu_terms(source_terms, source) if from_cpu else None
        samples, index = [job.time], {"time": 0}
        if source_cpu is not None:
            index["cpu"] = len(samples)
            samples.append(job.cpu)
        sides = [("a", source, source_terms), ("b", target, target_terms)]
        sides += [("a", source, source_cpu)] if source_cpu is not None else []
        for side, costs, terms in sides:
            for key in sorted({k for t in terms for k in t[2:]}):
                if f"{side}:{key}" not in index:
                    index[f"{side}:{key}"] = len(samples)
                    samples.append(costs.samples[key])
        return cls(samples, index, source_terms, target_terms, source_cpu), ""

    def column(self, medians: np.ndarray, side: str):
        return lambda key: medians[:, self.index[f"{side}:{key}"]]

    def rest(self, medians: np.ndarray) -> np.ndarray:
        """The job's time that does not depend on the tier: its time minus its I/O on A, or
        its CPU time minus its I/O's CPU time on A."""
        if self.source_cpu is not None:
            cpu = medians[:, self.index["cpu"]]
            return cpu - io_seconds(self.source_cpu, self.column(medians, "a"))
        time = medians[:, self.index["time"]]
        return time - io_seconds(self.source, self.column(medians, "a"))

    def predicted(self, medians: np.ndarray) -> np.ndarray:
        return self.rest(medians) + io_seconds(self.target, self.column(medians, "b"))


def predict_one(
    job: Job, source: TierCosts, target: TierCosts, measured, entry: dict | None = None
) -> dict:
    """One row: the job on ``target``, predicted from its run on ``source``; beside what it
    measured there (``measured``: a Sample, or None). ``entry``: the job's
    :func:`job_entry`, which says how its rest is read and why it has none."""
    entry = entry or {}
    no_rest = entry.get("reason", "") if entry.get("rest") is not None else ""
    row = {
        "experiment": job.experiment,
        "workload": job.workload,
        "point": job.point,
        "profiled_on": {"machine": job.machine, "tier": job.tier},
        "machine": target.machine,
        "tier": target.tier,
        "tier_class": target.tier_class,
        "predicted": None,
        "low": None,
        "high": None,
        "io": None,
        "measured": measured.median if measured is not None else None,
        "measured_n": measured.n if measured is not None else 0,
        "ratio": None,
        "ratio_low": None,
        "ratio_high": None,
        "check": None,
        "reason": "",
        "calls_there": calls_there(job.profile, target),
        "cost_runs": sorted(target.runs),
    }
    model, why = Model.of(job, source, target, entry.get("rest_from") == "cpu")
    if model is None or no_rest:
        row["reason"] = why or no_rest
        return row
    predicted = intervals.of_medians(model.samples, model.predicted)
    row.update(
        predicted=predicted.estimate,
        low=predicted.low,
        high=predicted.high,
        io=io_at_medians(model.target, target),
    )
    if not predicted.known:
        row["reason"] = predicted.reason
    if measured is not None:
        row.update(_check(model, measured, f"{job.machine}/{job.tier}", target))
    return row


def _check(model: Model, measured: intervals.Sample, source: str, target: TierCosts) -> dict:
    """Measured / predicted with its interval, placed against the band."""
    samples = [*model.samples, measured]
    last = len(samples) - 1
    ratio = intervals.of_medians(samples, lambda m: m[:, last] / model.predicted(m))
    place = BAND.place(ratio)
    check = {intervals.INSIDE: HOLDS, intervals.OUTSIDE: FAILS}.get(place, UNDECIDED)
    found = {
        "ratio": ratio.estimate,
        "ratio_low": ratio.low,
        "ratio_high": ratio.high,
        "check": check,
    }
    if check == FAILS:
        missed = MISSED["slower" if ratio.estimate > 1 else "faster"]
        found["reason"] = missed.format(target=f"{target.machine}/{target.tier}", source=source)
    elif not ratio.known:
        found["reason"] = ratio.reason
    return found


def job_entry(job: Job, source: TierCosts | None) -> dict:
    """The job as measured and profiled, with its time that does not depend on the tier."""
    entry = {
        "experiment": job.experiment,
        "workload": job.workload,
        "point": job.point,
        "machine": job.machine,
        "study": job.study,
        "run_id": job.run_id,
        "tier": job.tier,
        "metric": job.metric,
        "time": job.time.median,
        "time_n": job.time.n,
        "calls": {op: job.profile.get(f"{OPS_PREFIX}{op}", 0) for op in OPERATIONS},
        "bytes_written": sum(v for k, v in job.profile.items() if k.startswith("written_")),
        "rest": None,
        "rest_low": None,
        "rest_high": None,
        "io_share": None,
        "rest_from": "time",
        "caution": "",
        "reason": "",
    }
    if source is None:
        entry["reason"] = (
            f"{job.machine}/{job.tier} has no tier costs in the database: the default study "
            f"run on {job.machine} measures them"
        )
        return entry
    model, why = Model.of(job, source, source)
    if model is None:
        entry["reason"] = why
        return entry
    io = io_at_medians(model.source, source)
    entry["io_share"] = io / job.time.median if job.time.median else None
    mostly_io = entry["io_share"] is not None and entry["io_share"] > IO_SHARE_CAUTION
    if mostly_io:
        from_cpu, why_not = rest_from_cpu(job, source, model)
        if from_cpu:
            model = Model.of(job, source, source, from_cpu=True)[0]
            entry["rest_from"] = "cpu"
        else:
            entry["caution"] = (
                f"{100 * entry['io_share']:.0f} % of its time on {job.tier} is I/O at that "
                f"tier's costs, and {why_not}: the time left is a difference of two near "
                "numbers, and its predictions for faster tiers carry those costs' error "
                "several times over; profile it on a faster tier"
            )
    rest = intervals.of_medians(model.samples, model.rest)
    entry.update(rest=rest.estimate, rest_low=rest.low, rest_high=rest.high)
    if rest.estimate is None or rest.estimate <= 0:
        if entry["rest_from"] == "cpu":
            io_cpu = io_at_medians(model.source_cpu, source)
            said = f"its calls' CPU time on {job.tier} at the benchmarks' costs ({io_cpu:.3g} s)"
            whole = f"its CPU time there ({job.cpu.median:.3g} s)"
        else:
            said = f"its I/O on {job.tier} at the benchmarks' costs ({io:.3g} s)"
            whole = f"its whole time there ({job.time.median:.3g} s)"
        entry["reason"] = (
            f"{said} is not less than {whole}: its calls overlapped, or cost it less than "
            "they cost the benchmarks"
        )
    return entry


def rest_from_cpu(job: Job, source: TierCosts, model: Model) -> tuple[bool, str]:
    """Can the job's rest be read from its CPU time? If not, why not."""
    if job.cpu is None:
        return False, "no CPU time of its whole run was recorded"
    if job.cpu.median > job.time.median:
        return False, (
            f"its CPU time ({job.cpu.median:.3g} s) is above its time: it computed on several "
            "cores at once, so its CPU time does not stand for its time"
        )
    if cpu_terms(model.source, source) is None:
        return False, f"{source.machine}/{source.tier} has no CPU cost of its calls measured"
    return True, ""


def predictions(
    conn: sqlite3.Connection, runs: list[dict], machines: set[str] | None = None
) -> dict:
    """prediction.json's content for some runs: each job, and one row per tier it was not
    profiled on of every machine in the database (of ``machines`` only, when given)."""
    costs = {(c.machine, c.tier): c for c in tier_costs(conn)}
    targets = {k: c for k, c in costs.items() if machines is None or k[0] in machines}
    jobs, rows = [], []
    for run in runs:
        for job in jobs_of_run(conn, run):
            source = costs.get((job.machine, job.tier))
            entry = job_entry(job, source)
            jobs.append(entry)
            if source is None:
                continue
            measured = measured_times(conn, job)
            for key, target in targets.items():
                if key != (job.machine, job.tier):
                    rows.append(predict_one(job, source, target, measured.get(key), entry))
    return {
        "generated_at": utc_now(),
        "band": [BAND.low, BAND.high],
        "machines": sorted({m for m, _ in targets}),
        "jobs": jobs,
        "rows": rows,
    }


# --- which runs ------------------------------------------------------------------------------


def select_runs(conn: sqlite3.Connection, selector: str | None, study: str | None) -> list[dict]:
    """A run id (or a unique prefix), or a machine's latest run of each study; none: every
    machine's. Only studies named by ``study`` when given."""
    if selector:
        named, is_machine = named_runs(conn, selector)
        if not is_machine:
            return named
    else:
        named = runs(conn)
    latest = {(r["machine"], r["study"]): r for r in named}  # oldest first: the last wins
    return [r for (_, s), r in latest.items() if study is None or s == study]


# --- the command line ------------------------------------------------------------------------


def _seconds(value) -> str:
    return "–" if value is None else f"{value:.3g} s"


def lines(found: dict) -> list[str]:
    """The predictions as text, a job at a time."""
    out = []
    if not found["jobs"]:
        return [
            "no job to predict: a job needs a run of a command, case or deck both timed and "
            "traced (an experiment with count_syscalls: true) on one tier"
        ]
    for job in found["jobs"]:
        out.append(
            f"{job['machine']} {job['study']} {job['experiment']} [{job['point']}], profiled on "
            f"{job['tier']}: {_seconds(job['time'])}, of which {_seconds(job['rest'])} does not "
            "depend on the tier"
            + (" (from its CPU time)" if job["rest_from"] == "cpu" else "")
            + (f" ({job['reason']})" if job["reason"] else "")
        )
        if job["caution"]:
            out.append(f"  caution: {job['caution']}")
        for row in found["rows"]:
            if (row["experiment"], row["point"], row["profiled_on"]) != (
                job["experiment"],
                job["point"],
                {"machine": job["machine"], "tier": job["tier"]},
            ):
                continue
            where = f"  {row['machine']}/{row['tier']}:"
            if row["predicted"] is None:
                out.append(f"{where} not predicted: {row['reason']}")
                continue
            text = f"{where} predicted {_seconds(row['predicted'])}"
            if row["low"] is not None:
                text += f" [{row['low']:.3g}, {row['high']:.3g}]"
            if row["measured"] is not None:
                text += f", measured {_seconds(row['measured'])}"
                if row["ratio"] is not None:
                    text += f", measured/predicted {row['ratio']:.2f}"
                    if row["ratio_low"] is not None:
                        text += f" [{row['ratio_low']:.2f}, {row['ratio_high']:.2f}]"
                text += f": {row['check']}"
                if row["check"] == FAILS:
                    text += f" ({row['reason']})"
            out.append(text)
            if row.get("calls_there"):
                out.append(f"    ({row['calls_there']})")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "selector", nargs="?", help="a machine (its latest runs) or a run id; default: every run"
    )
    parser.add_argument("--study", help="only this study's runs")
    parser.add_argument("--run-json", help="the run a study's run.json names (the pipeline's)")
    parser.add_argument("--db", default=default_db(), help=DB_HELP)
    parser.add_argument("--out", help="write prediction.json here")
    args = parser.parse_args(argv)
    if not Path(args.db).exists():
        print(
            f"tierbench predict: no results database at {args.db} (a finished study run "
            "creates it; another machine's results come in with ./tierbench import)",
            file=sys.stderr,
        )
        return 1
    conn = connect(args.db)
    try:
        selector = args.selector
        if args.run_json:
            selector = json.loads(Path(args.run_json).read_text())["run_id"]
        found = predictions(conn, select_runs(conn, selector, args.study))
    except ResultsError as error:
        print(f"tierbench predict: {error}", file=sys.stderr)
        return 1
    finally:
        conn.close()
    if args.out:
        Path(args.out).write_text(json.dumps(found, indent=1) + "\n")
        print(f"wrote {args.out}: {len(found['rows'])} predictions", file=sys.stderr)
    else:
        print("\n".join(lines(found)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
