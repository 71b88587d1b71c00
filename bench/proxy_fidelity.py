"""Item 8: does each proxy pay what its real application pays per write, on /dev/shm?

One row per proxy: the proxy's I/O cost per write over the real
application's, for the same shape on /dev/shm.

- CFD: ``cfd_proxy`` vs ``openfoam`` (simpleFoam, kOmegaSST): the same ranks,
  cells per rank and steps, uncollated, binary, purgeWrite 1, a write every
  ``write_interval`` (2) steps. I/O cost per write, within one run, each
  workload's ``write_cost``: the steps
  alternate, so the machine's drift over seconds falls on both kinds; the
  proxy's steps do the same work but for the write (mean of the steps that
  write - of those that do not), simpleFoam's do not (its linear solvers take
  more or fewer iterations from step to step, which moves a step by more than
  a write costs), so its cost is fitted with those iterations taken out (see
  the openfoam workload). A round runs a job of each through ``python -m
  tierbench.runner --spec`` (params completed from the schemas), the order
  alternating. The cost is not taken between a run with writes and one
  without: two runs' compute differs by more than a write costs on a shared
  machine (such costs ranged from -28 to 9 ms per write from round to round).
- FE: ``fe_proxy`` (``output_model: calculix``) vs ``calculix`` (ccx): the same
  elements and increments, each workload's own ``evaluate`` (as a GA worker
  runs it) on the same parameter sets, drawn from the GA's bounds. Neither can
  turn all output off (ccx always writes .dat, .sta, .cvg and the .frd's mesh),
  so each set is analysed with field output every increment (``frd_every: 1``;
  calculix ``frd_fields: full``) and with none, back to back, the order
  alternating: by the workload's own ``paired_baseline``, as the fe_tmpfs
  study's fidelity points run it. The I/O cost per write = median over the
  sets of (with - without) / the increments the analysis took: each solver
  writes an increment's results, and ccx takes more increments than the proxy
  for the same bar (it cuts back, more so where the material is far from the
  truth).
  For both the difference includes computing and formatting the fields they
  write: what the output request costs the application. The goal is taken on
  CPU time (the evaluating process's, and ccx's from its rusage): on /dev/shm
  the output is all CPU work, and a ccx run's wall time varies by more than
  its output costs on a shared machine; beside it, without a goal, on the
  wall time. Nor is it taken between separate GA jobs: their evaluations
  differ from job to job by more than the output costs.

Both write buffered, without fsync: the writes land in tmpfs pages. A round
runs the four jobs of a proxy (proxy with and without output, application
with and without) in the order ``harness.rotated`` gives; the first round is
a warm-up, not counted. The ratio is taken per round, then its median; a
round where the application's cost is not above zero (noise larger than the
cost) gives no ratio and is counted in the detail. Goal: 0.9-1.1.

The sweep (full mode only; hours on 2 cores): the study
``config/studies/proxy_fidelity.yaml`` at default scale, proxy and application
at shapes one factor at a time around a centre (cells per rank over two
decades, ranks, a write every step, ascii, collated; FE elements and
increments over a decade), on every tier of the default config. Its
``fidelity.json`` gives a row per proxy: the share of its shapes that are
faithful (goal: all), and a row per shape and tier: the I/O cost per write,
proxy / application, with its interval and the shape's verdict.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np
from harness import (
    REPO,
    TIER,
    at_least,
    copy_pipeline,
    failed_row,
    job_spec,
    log,
    rotated,
    row,
    skipped_row,
    snakemake,
)  # fmt: skip
from tierbench import intervals
from tierbench.matrix import complete
from tierbench.rundir import RunFolder
from tierbench.workloads import modules
from tierbench.workloads.fe import fe_optimisation

SIZES = {
    "full": {
        "cfd": {
            "ranks": 2,
            "cells_per_rank": 100_000,
            "steps": 200,
            "warmup_steps": 2,
            "write_interval": 2,
        },
        "fe": {"elements": 10, "increments": 40, "evaluations": 60},
        "rounds": 7,
    },
    "tiny": {
        "cfd": {
            "ranks": 2,
            "cells_per_rank": 2_000,
            "steps": 6,
            "warmup_steps": 2,
            "write_interval": 2,
        },
        "fe": {"elements": 2, "increments": 5, "evaluations": 2},
        "rounds": 1,
    },
}
GOAL_BAND = (0.9, 1.1)
#: command each real application needs, and where it comes from
SOLVERS = {"openfoam": ("simpleFoam", "apt-get install openfoam"),
           "calculix": ("ccx", "apt-get install calculix-ccx")}  # fmt: skip


def cfd_params(workload: str, shape: dict) -> dict:
    params = {
        **shape, "ensemble": 1, "file_handler": "uncollated", "write_format": "binary",
        "purge_write": 1,
    }  # fmt: skip
    return complete(workload, params)


def fe_params(workload: str, shape: dict) -> dict:
    """Field output every increment, each evaluation paired with its baseline without."""
    params = {**shape, "cores": 1, "seed": 1, "frd_every": 1, "paired_baseline": True}
    del params["evaluations"]
    if workload == "calculix":
        params.update(frd_fields="full", solver_log="file")
    else:
        params.update(output_model="calculix", fsync="none")
    return complete(workload, params)


def cfd_costs(found: dict) -> dict:
    """Per write, within the run: the workload's ``write_cost``."""
    return {"within": found["write_cost"]}


def per_increment(with_: dict, without: dict, metric: str = "cpu_time") -> float:
    """What field output cost one analysis, per increment it took: (with - without) / its
    increments (each solver writes an increment's results)."""
    return (with_[metric] - without[metric]) / with_["increments"]


def fe_costs(pairs: list[tuple[dict, dict]]) -> dict:
    """Per increment, the median over the sets of :func:`per_increment`, on the CPU time
    (the goal) and the wall time."""
    return {
        key: statistics.median(per_increment(with_, without, metric) for with_, without in pairs)
        for key, metric in (("increment", "cpu_time"), ("wall", "eval_time"))
    }


class Evaluator:
    """A workload's ``evaluate`` as its GA workers run it with ``paired_baseline``: each
    parameter set analysed with field output and without, back to back."""

    def __init__(self, workload: str, shape: dict, root: Path):
        self.module = importlib.import_module(f"tierbench.workloads.{modules()[workload]}")
        self.root = root
        config = self.module.settings(fe_params(workload, shape))
        if workload == "calculix":
            target = self.module.target_curve(config, root)
            args = (config.model, target, config.solver_log)
        else:
            target = self.module.target_curve(config.bar, config.noise, config.ga.seed)
            args = (config.bar, config.output, target)
        self.module.init_worker(*args, paired=True)
        self.state = dict(self.module._WORKER)

    def pair(self, parameters: dict, i: int, prefix: str) -> tuple[dict, dict]:
        """The set ``i`` analysed with field output and without, back to back, the workload's
        own way (which goes first alternates with ``i``): (with, without)."""
        worker = self.module._WORKER
        worker.clear()
        worker.update(self.state)  # as it was made, whatever ran in between
        label = f"{prefix}-e{i:03d}"
        record = self.module.evaluate(
            {"folder": str(self.root / label), "label": label, "parameters": parameters}
        )
        if not record["ok"] or record["baseline"] is None:
            error = record["error"] or "its baseline without field output failed"
            raise RuntimeError(f"{self.module.__name__} evaluation {label}: {error}")
        return record, record["baseline"]


def fe_round(scratch: Path, kind: str, shape: dict, round_: int) -> dict:
    """Both workloads analyse the same parameter sets with field output and without, back to
    back, the order alternating: each workload's costs (seconds per increment)."""
    k = KINDS[kind]
    rng = np.random.default_rng(1000 + round_)
    sets = [
        {name: float(rng.uniform(*bounds)) for name, bounds in fe_optimisation.BOUNDS.items()}
        for _ in range(shape["evaluations"])
    ]
    # on the tier, as the CFD jobs are (the scratch folder is on the root disk)
    with RunFolder(TIER, f"bench-fe-r{round_}") as folder:
        root = folder.path
        evaluators = {w: Evaluator(w, shape, root) for w in (k["proxy"], k["real"])}
        pairs = {w: [] for w in evaluators}
        # one workload's pairs, then the other's (which goes first changes every round):
        # interleaved one by one, a workload's runs right after the other's were slower
        for workload in rotated(list(evaluators), round_):
            for i, parameters in enumerate(sets):
                pairs[workload].append(evaluators[workload].pair(parameters, i, workload))
    cost = {w: fe_costs(found) for w, found in pairs.items()}
    side = {
        w: {
            "bytes_per_evaluation": statistics.median(a["bytes"] for a, _ in found),
            "files_per_evaluation": statistics.median(a["files"] for a, _ in found),
            "increments_median": statistics.median(a["increments"] for a, _ in found),
        }
        for w, found in pairs.items()
    }
    return {"cost": cost, "side": side}


def spec(workload: str, params: dict, label: str) -> dict:
    """A job spec on /dev/shm, as tests/conftest.job_spec and the pipeline make one."""
    return job_spec(
        workload, f"fidelity-{label}", params, tier="shm", point=label, launcher="mpiexec",
        description="",
    )  # fmt: skip


def run_job(scratch: Path, job: dict) -> dict[str, float]:
    """One job through the runner in its own process; its metrics by name, or an error."""
    out = scratch / f"{job['point']}.json"
    env = {**os.environ, "PYTHONPATH": str(REPO / "workflow")}
    command = [sys.executable, "-m", "tierbench.runner", "--spec", json.dumps(job),
               "--out", str(out)]  # fmt: skip
    done = subprocess.run(command, cwd=scratch, env=env, capture_output=True, text=True)
    if done.returncode != 0 or not out.is_file():
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"{job['workload']} job failed: {last}")
    record = json.loads(out.read_text())
    out.unlink()
    bad = [m for m in record["metrics"] if m["status"] != "ok"]
    if bad:
        raise RuntimeError(f"{job['workload']}: {bad[0]['status']}: {bad[0]['reason']}")
    return {m["metric"]: m["value"] for m in record["metrics"]}


def check_solver(real: str) -> None:
    command, install = SOLVERS[real]
    if shutil.which(command) is None:
        raise RuntimeError(f"{command} not on PATH ({real} not installed: {install})")


def job_round(scratch: Path, kind: str, shape: dict, round_: int) -> dict:
    """A writing job of each workload, in rotated order: each workload's costs (seconds)."""
    k = KINDS[kind]
    found = {}
    for workload in rotated([k["proxy"], k["real"]], round_):
        label = f"{workload}-r{round_}"
        found[workload] = run_job(scratch, spec(workload, k["params"](workload, shape), label))
    cost = {w: k["costs"](metrics) for w, metrics in found.items()}
    side = {w: {name: metrics.get(name) for name in k["side"]} for w, metrics in found.items()}
    return {"cost": cost, "side": side}


#: per proxy: the two workloads, how their params and costs are made, which cost has the goal
KINDS = {
    "cfd": {"proxy": "cfd_proxy", "real": "openfoam", "params": cfd_params, "costs": cfd_costs,
            "round": job_round,
            "goal": "within", "per": {"within": "write"},
            "side": ("bytes_per_write", "files_per_write", "dirs_per_write")},
    "fe": {"proxy": "fe_proxy", "real": "calculix", "params": fe_params, "round": fe_round,
           "goal": "increment", "per": {"increment": "increment", "wall": "increment"},
           "side": ("bytes_per_evaluation", "files_per_evaluation", "increments_median")},
}  # fmt: skip


def fidelity(scratch: Path, kind: str, shape: dict, rounds: int) -> dict:
    """A warm-up round, then ``rounds`` counted ones: per estimate, per-round costs and ratios."""
    k = KINDS[kind]
    check_solver(k["real"])
    k["round"](scratch, kind, shape, 0)  # warm-up: first runs of both, not counted
    counted = [k["round"](scratch, kind, shape, r) for r in range(1, rounds + 1)]
    estimates = {}
    for name in counted[0]["cost"][k["proxy"]]:
        proxy = [c["cost"][k["proxy"]][name] for c in counted]
        real = [c["cost"][k["real"]][name] for c in counted]
        ratios = [p / r for p, r in zip(proxy, real, strict=True) if r > 0]
        estimates[name] = {"proxy": proxy, "real": real, "ratios": ratios}
        log(f"8 {kind} {name}: {k['proxy']} " + ", ".join(f"{v * 1e3:.2f}" for v in proxy)
            + f" ms, {k['real']} " + ", ".join(f"{v * 1e3:.2f}" for v in real)
            + f" ms per {k['per'][name]}")  # fmt: skip
    return {"estimates": estimates, "side": counted[-1]["side"]}


def describe(kind: str, name: str, shape: dict, outcome: dict, side: dict) -> str:
    k = KINDS[kind]
    proxy_ms = statistics.median(outcome["proxy"]) * 1e3
    real_ms = statistics.median(outcome["real"]) * 1e3
    side_text = "; ".join(
        f"{w}: " + ", ".join(f"{name} {value:.4g}" for name, value in values.items() if value)
        for w, values in side.items()
    )
    dropped = len(outcome["real"]) - len(outcome["ratios"])
    shape_text = ", ".join(f"{key} {value}" for key, value in shape.items())
    text = (
        f"cost per {k['per'][name]}: {k['proxy']} {proxy_ms:.2f} ms, {k['real']} {real_ms:.2f} ms "
        f"(medians; per round {k['proxy']} "
        + ", ".join(f"{v * 1e3:.2f}" for v in outcome["proxy"])
        + f", {k['real']} "
        + ", ".join(f"{v * 1e3:.2f}" for v in outcome["real"])
        + f" ms); {shape_text}; {side_text}; /dev/shm, buffered, no fsync"
    )
    if dropped:
        text += f"; {dropped} round(s) without a ratio: {k['real']}'s cost not above zero"
    found = interval(outcome)
    if found.known:
        lo, hi = GOAL_BAND
        decided = (
            "inside the band" if lo <= found.low and found.high <= hi
            else "outside the band" if found.high < lo or found.low > hi
            else "straddling the band: undecided at this size"
        )  # fmt: skip
        text += (
            f"; ratio of the median costs {found.estimate:.3f} [{found.low:.3f}, {found.high:.3f}] "
            f"(95%, bootstrap over the rounds, paired by round), {decided}"
        )
    return text


def interval(outcome: dict) -> intervals.Interval:
    """The ratio of the median costs over the rounds, with its interval (paired by round)."""
    rounds = tuple(range(len(outcome["proxy"])))
    return intervals.ratio(
        intervals.sample(outcome["proxy"], rounds), intervals.sample(outcome["real"], rounds)
    )


MEASURES = {
    ("cfd", "within"): "cfd_proxy / openfoam I/O cost per write (steps that write - steps that "
    "do not, within a run), /dev/shm",
    ("fe", "increment"): "fe_proxy / calculix I/O cost per increment (evaluation CPU time "
    "with field output every increment - without, / increments), /dev/shm",
    ("fe", "wall"): "fe_proxy / calculix I/O cost per increment (evaluation wall time with "
    "field output every increment - without, / increments), /dev/shm",
}


def estimate_row(kind: str, name: str, size: dict, outcome: dict, goal) -> dict:
    """A row per estimate; only the kind's goal estimate is held to 0.9-1.1."""
    estimate = outcome["estimates"][name]
    graded = name == KINDS[kind]["goal"]
    key = f"{kind}_fidelity" if graded else f"{kind}_fidelity_{name}"
    detail = describe(kind, name, size[kind], estimate, outcome["side"])
    if graded:
        detail += f"; goal {GOAL_BAND[0]}-{GOAL_BAND[1]}"
    out = row(8, key, MEASURES[(kind, name)], "ratio", estimate["ratios"],
              goal if graded else None, detail, proxy_cost_s=estimate["proxy"],
              real_cost_s=estimate["real"], side=outcome["side"])  # fmt: skip
    if graded:
        median = out["median"]
        out["met"] = median is not None and GOAL_BAND[0] <= median <= GOAL_BAND[1]
    return out


#: the sweep's study, and the machine name of its results folder in the scratch copy
SWEEP_STUDY = "config/studies/proxy_fidelity.yaml"
SWEEP_MACHINE = "bench"
SWEEP_TIMEOUT = 6 * 3600


def sweep_rows(scratch: Path, goal) -> list[dict]:
    """The sweep study's fidelity per proxy: shapes faithful, and each shape's I/O cost."""
    root = copy_pipeline(scratch, "sweep")
    target = f"results/{SWEEP_MACHINE}/proxy_fidelity/fidelity.json"
    args = ["-c", "all", "--configfile", SWEEP_STUDY, "--", target]
    env_before = os.environ.get("TIERBENCH_MACHINE")
    os.environ["TIERBENCH_MACHINE"] = SWEEP_MACHINE
    try:
        seconds, done = snakemake(args, root, timeout=SWEEP_TIMEOUT)
    finally:
        if env_before is None:
            del os.environ["TIERBENCH_MACHINE"]
        else:
            os.environ["TIERBENCH_MACHINE"] = env_before
    if done.returncode != 0:
        raise RuntimeError(f"the sweep study failed: {(done.stderr or done.stdout)[-400:]}")
    log(f"8 sweep: {seconds:.0f} s")
    return shape_rows(json.loads((root / target).read_text()), goal)


def shape_rows(found: dict, goal) -> list[dict]:
    """Rows of a sweep's fidelity.json: per proxy the share of faithful shapes, then per shape
    and tier the I/O cost ratio with its interval and the shape's verdict."""
    rows = []
    for entry in found["proxies"]:
        proxy, real, shapes = entry["proxy"], entry["real"], entry.get("shapes", [])
        faithful = [s for s in shapes if s["verdict"] == "faithful"]
        listing = "; ".join(f"{s['shape']}: {s['verdict']}" for s in shapes)
        rows.append(
            row(8, f"{proxy}_sweep_faithful", f"{proxy}: share of the sweep's shapes where it is "
                f"faithful to {real} (every tier)", "ratio",
                [len(faithful) / len(shapes)] if shapes else [], at_least(1.0),
                f"{len(faithful)} of {len(shapes)} shapes; {listing}")
        )  # fmt: skip
        verdict_of = {json.dumps(s["params"], sort_keys=True): s["verdict"] for s in shapes}
        costs = [r for r in entry["rows"] if r["section"] == "I/O cost" and r["ratio"]]
        for number, line in enumerate(costs, 1):
            shape = verdict_of.get(json.dumps(line["params"], sort_keys=True), "?")
            where = ", ".join(f"{k}={line['params'][k]}" for k in entry.get("varying", []))
            out = row(
                8, f"{proxy}_sweep_cost_{number}",
                f"{proxy} / {real} {line['quantity']}, {where or 'the one shape'}, {line['tier']}",
                "ratio", [line["ratio"]], goal,
                f"95% interval {line['text']['interval']}, {line['decision']}; the shape is "
                f"{shape}",
            )  # fmt: skip
            out["met"] = line["decision"] == "agrees"
            rows.append(out)
    return rows


def measure(mode: str, scratch: Path, goal) -> list[dict]:
    """Rows per proxy; a proxy whose jobs fail is a failed row, the other still measured."""
    size = SIZES[mode]
    rows = []
    for kind in ("cfd", "fe"):
        try:
            outcome = fidelity(scratch, kind, size[kind], size["rounds"])
        except Exception as error:  # reported in the table; the other proxy goes on
            log(f"8 {kind} failed: {error}")
            measure_ = MEASURES[(kind, KINDS[kind]["goal"])]
            rows.append(failed_row(8, f"{kind}_fidelity", measure_, "ratio", error, goal))
            continue
        names = sorted(outcome["estimates"], key=lambda n: n != KINDS[kind]["goal"])
        rows += [estimate_row(kind, name, size, outcome, goal) for name in names]
    measure_ = f"the sweep ({SWEEP_STUDY}): each proxy's fidelity per shape"
    if mode == "tiny":
        return rows + [skipped_row(8, "sweep", measure_, "ratio", "skipped (--tiny)", goal)]
    try:
        rows += sweep_rows(scratch, goal)
    except Exception as error:  # reported in the table
        log(f"8 sweep failed: {error}")
        rows.append(failed_row(8, "sweep", measure_, "ratio", error, goal))
    return rows
