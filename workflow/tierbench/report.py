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
    descriptions = {p["experiment"]: p.get("description", "") for p in plan["points"].values()}
    traced = {p["experiment"] for p in plan["points"].values() if p.get("count_syscalls")}
    return {
        "run_id": read_json(study_dir / "run.json", {}).get("run_id", ""),
        "answers": [a.as_dict() for a in answers(results, workloads or {}, descriptions, traced)],
        "fidelity": read_json(study_dir / "fidelity.json", {}).get("proxies", []),
        # a job of the user's beside the documents' applications and proxies
        "profiles": profile.profiles(summary),
        # document 001's cost of moving data: only where stage points were measured
        "staging": staging.tables(summary, results, plan),
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
        "started": results["started_at"].min() if len(results) else "",
        "finished": results["started_at"].max() if len(results) else "",
    }


def render(
    results_dir: Path,
    studies: list[str],
    titles: dict[str, str],
    extra=None,
    scale: str = "",
    machine: str = "",
) -> str:
    from .workloads import registry

    env = Environment(
        loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html", "j2"])
    )
    # a tier without a folder (the void, /dev/null) has no free_bytes in its provenance
    env.filters["size"] = lambda v: (
        "–" if is_undefined(v) or v in (None, "") else format_size(float(v))
    )
    env.filters["number"] = number
    env.filters["count"] = lambda v: f"{v:,.0f}" if float(v).is_integer() else number(v)
    contexts = []
    for study in studies:
        context = study_context(results_dir, study, registry())
        context["title"] = titles.get(study, study)
        contexts.append(context)
    return env.get_template("report.html.j2").render(
        studies=contexts,
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
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    html = render(Path(args.results_dir), args.studies, json.loads(args.titles), scale=args.scale)
    Path(args.out).write_text(html)
    print(f"wrote {args.out} ({len(html) // 1024} KiB)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
