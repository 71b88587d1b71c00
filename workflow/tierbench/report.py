"""results/<machine>/report.html: one self-contained page per run of the pipeline.

The first screen answers the question: per experiment, the tiers ranked by
what each buys a job, with its uncertainty (:mod:`tierbench.answer`); then the
verdicts on the documents' lessons; then the details. Figures are embedded as
PNG (base64), tables are HTML (copyable, sortable), and every study shows the
host and tiers its numbers came from, so the page can be mailed around
without the results folder.
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import sys
from pathlib import Path

import pandas as pd
from jinja2 import Environment, FileSystemLoader, is_undefined, select_autoescape

from . import __version__, profile, staging
from .answer import answers
from .records import utc_now
from .units import format_size
from .verdicts import NOT_REPRODUCED, REPRODUCED

TEMPLATES = Path(__file__).resolve().parents[1] / "templates"


def number(value, digits: int = 3) -> str:
    """Readable number: 3 significant digits, thousands separators, no exponent."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    value = float(value)
    if value == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(value)))
    decimals = max(0, digits - 1 - magnitude)
    return f"{value:,.{decimals}f}"


def load_figures(study_dir: Path) -> list[dict]:
    figures = []
    for manifest in sorted((study_dir / "figures").glob("*/manifest.json")):
        for entry in json.loads(manifest.read_text()):
            png = manifest.parent / entry["png"]
            figures.append(
                {
                    **entry,
                    "family": manifest.parent.name,
                    "data": base64.b64encode(png.read_bytes()).decode("ascii"),
                }
            )
    return figures


def medians_table(summary: pd.DataFrame) -> list[dict]:
    ok = summary[summary["status"] == "ok"]
    cache = ok["page_cache"] if "page_cache" in ok.columns else pd.Series("", index=ok.index)
    rows = []
    cache = cache.astype(object).where(cache.notna(), "").astype(str)
    for row, page_cache in zip(ok.itertuples(), cache, strict=True):
        rows.append(
            {
                "experiment": row.experiment,
                "tier": row.tier,
                "tier_class": row.tier_class,
                "point": row.point,
                "metric": row.metric,
                "unit": row.unit,
                "median": number(row.median),
                "median_value": row.median,
                "page_cache": page_cache.replace("_", " "),
                "range": f"{number(row.min)} – {number(row.max)}",
                "ci": f"{number(row.ci_low)} – {number(row.ci_high)}",
                "n": int(row.n),
                "noisy": bool(row.noisy),
                "spread": f"{100 * row.rel_spread:.0f}%",
                "warmup": number(row.warmup),
            }
        )
    return rows


def id_ranges(ids: list[str]) -> str:
    """Slurm job ids as runs of consecutive numbers: 12–15, 17."""
    numbers = sorted({int(i) for i in ids if str(i).isdigit()})
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(f"{r[0]}–{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs)


def node_rows(study_dir: Path, results: pd.DataFrame) -> list[dict]:
    """Where the benchmark jobs ran: per tier and node, the probe made inside the jobs."""
    path = study_dir / "provenance" / "nodes.json"
    if path.exists():
        rows = json.loads(path.read_text())
    else:  # results from before nodes.json: host and job ids only
        ids = results.get("slurm_job_id", pd.Series(dtype=str)).astype(object).fillna("")
        ids = ids.astype(str)
        frame = results.assign(slurm_job_id=ids.str.replace(r"\.0$", "", regex=True))
        rows = [
            {"tier": tier, "host": host, "slurm_job_ids": sorted(set(group["slurm_job_id"]) - {""})}
            for (tier, host), group in frame.groupby(["tier", "host"], sort=True)
        ]
    for row in rows:
        row["jobs"] = id_ranges(row.get("slurm_job_ids", []))
        row["job_count"] = len(row.get("slurm_job_ids", []))
    return rows


def cache_points(summary: pd.DataFrame) -> list[dict]:
    """Device-tier points whose numbers could have come from the page cache alone."""
    if "page_cache" not in summary.columns:
        return []
    flagged = summary[summary["page_cache"].astype(str) == "may_stay_in_memory"]
    return flagged.drop_duplicates(["experiment", "tier", "point"])[
        ["experiment", "tier", "point"]
    ].to_dict("records")


#: one benchmark record per repetition of a point; results.csv has a row per metric
RECORD_KEY = ["experiment", "tier", "point", "repetition"]


def duration_text(seconds: float) -> str:
    """A duration as people read it: 42 s, 3 min 05 s, 1 h 02 min."""
    whole = int(round(seconds))
    if whole < 60:
        return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def study_time(results: pd.DataFrame) -> dict | None:
    """How long a study's benchmarks took, from its records: the span from the first
    record's start to the last one's end, and how much of it they were measuring (the
    sum of the records' ``duration_s``: warm-ups included, the workflow's own steps not).

    None without a record whose start can be read.
    """
    if results.empty or not {"started_at", "duration_s"} <= set(results.columns):
        return None
    records = results.drop_duplicates(RECORD_KEY)
    start = pd.to_datetime(records["started_at"], errors="coerce", utc=True, format="ISO8601")
    seconds = pd.to_numeric(records["duration_s"], errors="coerce").fillna(0)
    known = start.notna()
    if not known.any():
        return None
    first = start[known].min()
    end = (start[known] + pd.to_timedelta(seconds[known], unit="s")).max()
    span = max((end - first).total_seconds(), 0.0)
    measuring = float(seconds.sum())
    return {
        "records": len(records),
        "first": first,
        "end": end,
        "span_s": span,
        "measuring_s": measuring,
        "share": measuring / span if span else None,
    }


def time_line(time: dict | None) -> str:
    """One study's time, in words: the span, and how much of it was measuring."""
    if time is None:
        return "no record says when it ran"
    share = f" ({time['share']:.0%})" if time["share"] is not None else ""
    return (
        f"{duration_text(time['span_s'])} from the first benchmark's start to the last one's "
        f"end, {duration_text(time['measuring_s'])} of it measuring{share}, "
        f"{time['records']} runs"
    )


def total_time(times: list[dict | None]) -> dict | None:
    """Every study together: the span over all of them (studies run side by side overlap,
    so their spans do not add up) and the sum of what they measured."""
    known = [t for t in times if t is not None]
    if not known:
        return None
    first, end = min(t["first"] for t in known), max(t["end"] for t in known)
    span = (end - first).total_seconds()
    measuring = sum(t["measuring_s"] for t in known)
    return {
        "records": sum(t["records"] for t in known),
        "first": first,
        "end": end,
        "span_s": span,
        "measuring_s": measuring,
        "share": measuring / span if span else None,
    }


def read_json(path: Path, default):
    return json.loads(path.read_text()) if path.exists() else default


def study_context(results_dir: Path, study: str, workloads: dict | None = None) -> dict:
    study_dir = results_dir / study
    summary = pd.read_csv(study_dir / "summary.csv")
    results = pd.read_csv(study_dir / "results.csv")
    provenance = json.loads((study_dir / "provenance" / "tiers.json").read_text())
    nodes = node_rows(study_dir, results)
    problems = summary[summary["status"] != "ok"]
    verdicts = read_json(study_dir / "verdict.json", {"verdicts": []})["verdicts"]
    preflight = read_json(study_dir / "preflight.json", {})
    plan = read_json(study_dir / "plan.json", {"points": {}})
    # the document the study re-runs and how it is judged (the study file's, tierbench.verdicts)
    paper = read_json(study_dir / "lessons.json", {})
    descriptions = {p["experiment"]: p.get("description", "") for p in plan["points"].values()}
    traced = {p["experiment"] for p in plan["points"].values() if p.get("count_syscalls")}
    return {
        "run_id": read_json(study_dir / "run.json", {}).get("run_id", ""),
        "answers": [a.as_dict() for a in answers(results, workloads or {}, descriptions, traced)],
        "fidelity": read_json(study_dir / "fidelity.json", {}).get("proxies", []),
        # a job of the user's beside the documents' applications and proxies
        "profiles": profile.profiles(summary),
        # the same job on tiers it did not run on (tierbench.predict)
        "predictions": read_json(study_dir / "prediction.json", {"jobs": [], "rows": []}),
        # the cost of moving data, beside the document's: only where stage points were measured
        "staging": staging.tables(summary, results, plan, paper=paper),
        "document": paper.get("document"),
        "more_repetitions": read_json(study_dir / "repetitions.json", {"lessons": []}),
        "cache_points": cache_points(summary),
        "verdicts": verdicts,
        "warnings": preflight.get("warnings", []),
        "id": study,
        "figures": load_figures(study_dir),
        "medians": medians_table(summary),
        "problems": problems[["experiment", "tier", "point", "status", "reason"]].to_dict(
            "records"
        ),
        "noisy": int(summary["noisy"].fillna(False).astype(bool).sum()),
        "provenance": provenance,
        "nodes": nodes,
        "allocations": read_json(study_dir / "provenance" / "allocations.json", {}),
        "runs": int(
            results[["point", "tier", "experiment", "repetition"]].drop_duplicates().shape[0]
        ),
        "time": study_time(results),
        "started": results["started_at"].min() if len(results) else "",
        "finished": results["started_at"].max() if len(results) else "",
    }


def lesson_count(contexts: list[dict]) -> dict:
    """How many of the pages' lessons each verdict got: a paper page's first line."""
    statuses = [v["status"] for c in contexts for v in c["verdicts"]]
    counts = {status: statuses.count(status) for status in dict.fromkeys(statuses)}
    decided = counts.get(REPRODUCED, 0) + counts.get(NOT_REPRODUCED, 0)
    return {"total": len(statuses), "decided": decided, "counts": counts}


def render(
    results_dir: Path,
    studies: list[str],
    titles: dict[str, str],
    extra=None,
    scale: str = "",
    machine: str = "",
    elsewhere: dict[str, str] | None = None,
    undecided: dict[str, str] | None = None,
) -> str:
    """The report of some studies of one machine's results; a study in ``elsewhere``
    (study -> machine) from that machine's results beside them, and a study in
    ``undecided`` with the line that says why its lessons stay undecided here."""
    from .workloads import registry

    env = Environment(
        loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html", "j2"])
    )
    # a tier without a folder (the void, /dev/null) has no free_bytes in its provenance
    env.filters["size"] = lambda v: (
        "–" if is_undefined(v) or v in (None, "") else format_size(float(v))
    )
    env.filters["number"] = number
    env.filters["duration"] = duration_text
    env.filters["count"] = lambda v: f"{v:,.0f}" if float(v).is_integer() else number(v)
    contexts = []
    elsewhere, undecided = elsewhere or {}, undecided or {}
    for study in studies:
        ran_on = elsewhere.get(study)
        folder = results_dir.parent / ran_on if ran_on else results_dir
        context = study_context(folder, study, registry())
        context["title"] = titles.get(study, study)
        context["ran_on"] = ran_on or ""
        context["undecided"] = undecided.get(study, "")
        context["time_line"] = time_line(context["time"])
        contexts.append(context)
    total = total_time([c["time"] for c in contexts])
    return env.get_template("report.html.j2").render(
        studies=contexts,
        lessons=lesson_count(contexts),
        total_time=time_line(total) if total else "",
        total_time_s=total,
        generated_at=utc_now(),
        version=__version__,
        extra=extra or {},
        scale=scale,
        machine=machine or results_dir.name,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results-dir", default="results")
    parser.add_argument("--studies", nargs="+", required=True)
    parser.add_argument("--titles", default="{}", help="study -> title, as JSON")
    parser.add_argument("--scale", default="", help="the scale preset the run used")
    parser.add_argument(
        "--elsewhere", default="{}", help="study -> machine whose results hold it, as JSON"
    )
    parser.add_argument(
        "--undecided", default="{}", help="study -> why its lessons stay undecided, as JSON"
    )
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    html = render(
        Path(args.results_dir),
        args.studies,
        json.loads(args.titles),
        scale=args.scale,
        elsewhere=json.loads(args.elsewhere),
        undecided=json.loads(args.undecided),
    )
    Path(args.out).write_text(html)
    print(f"wrote {args.out} ({len(html) // 1024} KiB)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
