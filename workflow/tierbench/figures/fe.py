"""FE optimisation figures (document 000).

Wall time of the genetic algorithm over the non-linear FE model per tier and
core count, and the document's lesson in one figure: the speedup a faster tier
gives the optimisation next to the speedup fio's worst case promises. Every
workload of the fe family in the table is plotted (the proxy, and CalculiX
beside it once it runs), each in its own panel or labelled series. Points of
``calculix`` that ran a user's own ``deck`` are no optimisation: they get the
generic figure of their headline per point and tier.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from .. import plotting
from ..units import format_size
from . import generic


def make(
    summary: plotting.Table,
    out_dir: str,
    reference_csvs=None,
    study: str | None = None,
    workloads: list[str] | None = None,
    document: str | None = None,
) -> list[Path]:
    """fe_wall_time, fe_speedup_vs_fio and fe_time_split from a study's summary.csv.

    ``reference_csvs``: a folder, file or list of the published CSVs; ``document``: the one
    the study re-runs (document 000 for fe_tmpfs), whose rows are drawn; without them the
    speedup figure shows this run only and says so. ``workloads``: the fe family's
    workloads (default: the registry's).
    """
    plotting.setup()
    summary = plotting.table(summary, study)
    own = own_deck(summary)
    c = context(summary[~own], out_dir, workloads or plotting.family_workloads("fe"))
    wall_time(c)
    c["document"] = document
    speedup_vs_fio(c, document_table(plotting.load_reference(reference_csvs, document)))
    time_split(c)
    for workload, rows in summary[own].groupby("workload", sort=True):
        generic.per_workload(workload, rows, out_dir)
    return plotting.finish(out_dir)


def own_deck(summary: pd.DataFrame) -> pd.Series:
    """Rows of points that ran a user's deck (calculix's ``deck``), not the optimisation."""
    if "deck" not in summary.columns:
        return pd.Series(False, index=summary.index)
    return summary["deck"].notna() & (summary["deck"].astype(str) != "")


def column(frame: pd.DataFrame, name: str) -> pd.Series:
    return frame[name] if name in frame else pd.Series(np.nan, index=frame.index)


def cores_label(n: int) -> str:
    return f"{n} core" if n == 1 else f"{n} cores"


def metric_rows(frame: pd.DataFrame, name: str) -> pd.DataFrame:
    return frame[frame["metric"] == name]


def optimisation_experiments(fe_all: pd.DataFrame) -> pd.DataFrame:
    """Per workload, the optimisation: the experiment with one point per tier and core count
    that sweeps the most core counts, then has the most repetitions, then the most points.

    A study may run a workload in other experiments too (fe_tmpfs's fidelity
    experiments: with and without field output, or traced once): their points
    stand on the same tier and core count as the optimisation's, so the
    figures plot one experiment of each workload.
    """
    if fe_all.empty or not {"experiment", "cores"} <= set(fe_all.columns):
        return fe_all
    keep = []
    for _, rows in fe_all.groupby("workload", sort=False):
        per_place = rows.groupby(["experiment", "tier", "cores"], sort=False)["point"].nunique()
        spans = rows.groupby("experiment", sort=False).agg(
            cores=("cores", "nunique"), n=("n", "max"), points=("point", "nunique")
        )
        spans["single"] = per_place.groupby(level="experiment", sort=False).max() == 1
        order = ["single", "cores", "n", "points"]
        keep.append(spans.sort_values(order, ascending=False, kind="stable").index[0])
    return fe_all[fe_all["experiment"].isin(keep)]


def context(summary: pd.DataFrame, out_dir: str, family: list[str]) -> dict:
    fe_all = optimisation_experiments(summary[summary["workload"].isin(family)])
    fe = plotting.ok_rows(fe_all)
    if len(fe):
        fe = fe.assign(cores=pd.to_numeric(fe["cores"]).astype("Int64"))
    fio_all = summary[(summary["workload"] == "fio") & (column(summary, "rw") == "randrw")]
    fio = plotting.ok_rows(fio_all)
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    c = {
        "fe_all": fe_all,
        "fe": fe,
        "fio_all": fio_all,
        "fio": fio,
        "workloads": [w for w in family if w in set(fe["workload"])],
        "hosts": ", ".join(sorted(set(",".join(summary["host"].astype(str)).split(",")))),
        "reps": int(fe["n"].max()) if len(fe) else 0,
        "colors": {"fio": palette[1], "compute": palette[0]},
        "out_dir": out_dir,
    }
    c["kbs"] = fio_write_kbs(fio)
    c["order"] = tier_order(c)
    return c


def fio_write_kbs(fio: pd.DataFrame) -> dict[str, tuple[float, float, float]]:
    """fio worst-case write per tier: median, min, max in KB/s (1000 B/s, as document 000)."""
    rows = metric_rows(fio, "write_bandwidth")
    return {r.tier: (r.median * 1000, r.min * 1000, r.max * 1000) for r in rows.itertuples()}


def tier_order(c: dict) -> list[str]:
    """Tiers from slowest to fastest: by fio's worst case, else by the optimisation's wall time."""
    wall = metric_rows(c["fe"], "wall_time")
    fe_tiers = list(wall.groupby("tier")["median"].mean().sort_values(ascending=False).index)
    kbs = c["kbs"]
    if kbs:
        ranked = sorted(kbs, key=lambda t: kbs[t][0])
        return ranked + [t for t in fe_tiers if t not in ranked]
    return fe_tiers


def several_models(rows: pd.DataFrame) -> bool:
    """More than one point of a workload on a tier at a core count (a sweep of models, as
    proxy_fidelity's): a series or bar then names its point."""
    return bool(rows.groupby(["workload", "tier", "cores"])["point"].nunique().max() > 1)


def several(c: dict) -> bool:
    """More than one workload of the family: series and panels name theirs."""
    return len(c["workloads"]) > 1


def fe_parameters(c: dict) -> str:
    """The caption's account of what each workload ran, from its completed parameters."""
    texts = [workload_parameters(c, w) for w in c["workloads"]]
    return " ".join(t for t in texts if t)


#: what a caption needs of every fe workload, then of fe_proxy's output
GA_COLUMNS = ["population", "generations", "elite", "seed", "elements", "increments"]
OUTPUT_COLUMNS = ["frd_every", "fsync"]
#: the workload that runs the real solver, not a model of its output
REAL_SOLVER = "calculix"


def known(rows: pd.DataFrame, names: list[str]) -> bool:
    first = rows.iloc[0]
    return all(name in rows.columns and pd.notna(first[name]) for name in names)


def workload_parameters(c: dict, workload: str) -> str:
    rows = c["fe"][c["fe"]["workload"] == workload]
    first = rows.iloc[0]
    prefix = f"{workload}: " if several(c) else ""
    real = workload == REAL_SOLVER
    needed = GA_COLUMNS + ([] if real else OUTPUT_COLUMNS)
    if not known(rows, needed):
        return f"{prefix}parameters as in results.csv."
    text = (
        f"{prefix}GA population {int(first['population'])}, {int(first['generations'])} "
        f"generations ({int(first['population']) * int(first['generations'])} FE analyses per "
        f"run), elite {int(first['elite'])}, seed {int(first['seed'])}; "
    )
    if real:
        text += real_solver_text(rows)
    else:
        text += (
            f"FE model: tapered elasto-plastic bar, {int(first['elements'])} elements, "
            f"{int(first['increments'])} increments, Newton-Raphson; " + proxy_output_text(rows)
        )
    per_eval = metric_rows(rows, "bytes_per_evaluation")["median"]
    if len(per_eval):
        text += f" ({format_size(per_eval.median())} written per analysis, deleted after it)"
    return text + "."


def real_solver_text(rows: pd.DataFrame) -> str:
    """The calculix workload: the real solver, ccx, and the field output it was asked for."""
    first = rows.iloc[0]
    every = int(first["frd_every"]) if known(rows, ["frd_every"]) else None
    frd = {None: "", 0: ", no field output (.frd)"}.get(every, f", {field_output(every)}")
    return (
        f"the real solver, CalculiX (ccx, single-threaded), on a tapered elasto-plastic bar of "
        f"{int(first['elements'])} C3D8 elements in {int(first['increments'])} increments "
        f"(cut back when one does not converge){frd}"
    )


def field_output(every: int) -> str:
    return "field output (.frd) every " + ("increment" if every == 1 else f"{every} increments")


def proxy_output_text(rows: pd.DataFrame) -> str:
    """What fe_proxy wrote per analysis."""
    first = rows.iloc[0]
    every = int(first["frd_every"])
    frd = (
        "no field output (.frd mesh only)"
        if every == 0
        else (f"field output (.frd) every {every} increments")
    )
    return (
        "solver output per analysis: CalculiX 2.20's file set (.inp .log .dat .frd .sta "
        f".cvg .12d spooles.out) with the calls and bytes strace measured of ccx, {frd}, "
        f"fsync: {first['fsync']}"
    )


def repetitions_text(c: dict, medians: str) -> str:
    """'Median(s) of n measured repetitions', and that the warm-up is left out when there was one.

    The summary's ``warmup`` column is NaN for points run without a warm-up.
    """
    fe = c["fe"]
    warm = "warmup" in fe.columns and bool(fe["warmup"].notna().any())
    return f"{medians} of {c['reps']} measured repetitions" + (
        " (the warm-up run excluded)" if warm else ""
    )


def wall_time(c: dict) -> None:
    """Wall time of the optimisation vs cores, a line per tier, a panel per workload."""
    wall = metric_rows(c["fe"], "wall_time").sort_values("cores")
    if wall.empty:
        return
    names = [w for w in c["workloads"] if w in set(wall["workload"])]
    fig, axes = plt.subplots(1, len(names), figsize=(7.5 * len(names), 4.8), squeeze=False)
    headlines = []
    for ax, workload in zip(axes[0], names, strict=True):
        headlines.append(wall_panel(ax, wall[wall["workload"] == workload], c["order"]))
        if several(c):
            ax.set_title(workload, fontsize=10)
    plotting.legend_outside(axes[0][-1], *plotting.unique_handles(axes[0]), title="tier")
    if several(c):
        fig.suptitle("; ".join(f"{w}: {h}" for w, h in zip(names, headlines, strict=True)))
    else:
        axes[0][0].set_title(f"GA over the FE model: {headlines[0]}")
    noisy = plotting.noisy_points(wall)
    noisy_text = ""
    if len(noisy):
        items = ", ".join(f"{r.tier} {cores_label(r.cores)}" for r in noisy.itertuples())
        noisy_text = f" Flagged noisy (spread above the threshold): {items}."
    caption = (
        "Wall time of the whole optimisation (worker start to best fit) per tier and core count "
        f"on {c['hosts']}. "
        + fe_parameters(c)
        + f" {repetitions_text(c, 'Median')}; bars: min to max."
        + noisy_text
        + plotting.describe_problems(c["fe_all"])
    )
    plotting.save(
        fig, c["out_dir"], "fe_wall_time", "Optimisation wall time vs cores per tier", caption
    )


def wall_panel(ax, wall: pd.DataFrame, order: list[str]) -> str:
    """One workload's wall time per tier vs cores; returns its headline."""
    for tier in order:
        part = wall[wall["tier"] == tier]
        if part.empty:
            continue
        ax.errorbar(
            part["cores"].astype(int),
            part["median"],
            yerr=plotting.span(part["median"], part["min"], part["max"]),
            marker="o",
            capsize=4,
            linewidth=2,
            label=tier,
        )
    cores = sorted(wall["cores"].astype(int).unique())
    ax.set_xticks(cores, [str(n) for n in cores])
    ax.minorticks_off()
    ax.set_ylim(bottom=0, top=wall["max"].max() * 1.15)
    ax.set_xlabel("cores (worker processes, one FE analysis each at a time)")
    ax.set_ylabel("wall time of the optimisation (s)")
    most = cores[-1]
    at_most = wall[wall["cores"] == most].set_index("tier")["median"]
    return (
        f"{at_most.idxmin()} fastest at {most} cores "
        f"({at_most.min():.2f} s vs {at_most.max():.2f} s on {at_most.idxmax()})"
    )


def document_table(published: pd.DataFrame) -> pd.DataFrame:
    """The document as published: its fio table's write KB/s beside its optimisation's wall
    time (``cores``) at the core count whose rows hold the most of the fio table's tiers, the
    largest where several do (document 000: 30, the only one with all three)."""
    fio = published[
        (published["table"] == "fio_worst_case") & (published["metric"] == "write_bandwidth")
    ]
    wall = published[published["table"] == "optimisation_wall_time"].copy()
    wall["cores"] = pd.to_numeric(wall["cores"], errors="coerce")
    held = {
        cores: len(set(rows["tier"]) & set(fio["tier"])) for cores, rows in wall.groupby("cores")
    }
    if held:
        wall = wall[wall["cores"] == max(held, key=lambda cores: (held[cores], cores))]
    both = (
        fio.set_index("tier")["value"]
        .rename("fio_kbs")
        .to_frame()
        .join(
            wall.set_index("tier")[["value", "cores"]].rename(columns={"value": "wall_s"}),
            how="inner",
        )
    )
    return both.astype(float).sort_values("fio_kbs").reset_index()


def cores_of(document: pd.DataFrame) -> int:
    """The core count of the document's wall times (:func:`document_table`)."""
    return int(document["cores"].iloc[0])


def grouped_bars(ax, tiers: list[str], series: list, title: str) -> None:
    """series: list of (label, color, {tier: (value, low, high)}); one group of bars per tier."""
    width = 0.8 / len(series)
    for i, (label, color, values) in enumerate(series):
        present = [t for t in tiers if t in values]
        xs = [tiers.index(t) - 0.4 + width * (i + 0.5) for t in present]
        ys = [values[t][0] for t in present]
        lows = [values[t][1] for t in present]
        highs = [values[t][2] for t in present]
        ax.bar(xs, ys, width=width * 0.92, color=color, label=label)
        yerr = plotting.span(ys, lows, highs)
        if yerr[0].any() or yerr[1].any():
            ax.errorbar(xs, ys, yerr=yerr, fmt="none", ecolor="0.25", capsize=3, linewidth=1)
        for x, y, high, tier in zip(xs, ys, highs, present, strict=True):
            if tier == tiers[0]:
                continue  # the reference: 1x by definition
            ax.annotate(
                f"{y:,.3g}x" if y < 100 else f"{y:,.0f}x",
                (x, max(y, high) if np.isfinite(high) else y),
                xytext=(0, 3),
                textcoords="offset points",
                ha="center",
                va="bottom",
                fontsize=9,
            )
    ax.set_xticks(range(len(tiers)), [f"{tiers[0]}\n(reference)"] + list(tiers[1:]))
    ax.set_yscale("log")
    ax.axhline(1.0, color="0.4", linewidth=1)
    ax.set_title(title, fontsize=11)
    ax.set_xlabel("tier (slowest first)")


def ratio(ref: tuple, other: tuple, inverse: bool = False) -> tuple[float, float, float]:
    """other / ref (or ref / other) from (median, min, max): the median ratio and its extremes."""
    if inverse:
        ref, other = other, ref
    return other[0] / ref[0], other[1] / ref[2], other[2] / ref[1]


def run_series(c: dict) -> list:
    """This run's speedups over the slowest tier: fio's worst case, then each workload x cores."""
    kbs, order = c["kbs"], c["order"]
    reference = order[0] if order else None
    series = []
    if reference in kbs:
        values = {t: ratio(kbs[reference], kbs[t]) for t in kbs}
        series.append(("fio worst case, write", c["colors"]["fio"], values))
    wall = metric_rows(c["fe"], "wall_time")
    blues = plt.get_cmap("Blues")
    for workload in c["workloads"]:
        rows = wall[wall["workload"] == workload]
        # a sweep (proxy_fidelity) has several models per tier: a series for each
        places = sorted(rows.groupby(["cores", "point"]).groups, key=lambda k: (int(k[0]), k[1]))
        named = several_models(rows)
        for k, (n, point) in enumerate(places):
            at = rows[(rows["cores"] == n) & (rows["point"] == point)].set_index("tier")
            if reference not in at.index:
                continue
            spread = lambda r: (r["median"], r["min"], r["max"])  # noqa: E731
            values = {
                t: ratio(spread(at.loc[reference]), spread(r), True) for t, r in at.iterrows()
            }
            name = workload if several(c) else "optimisation"
            label = f"{name}, {cores_label(int(n))}"
            if named:
                label += f", {point}"
            color = blues(0.35 + 0.5 * (k + 1) / len(places))
            series.append((label, color, values))
    return series


def speedup_vs_fio(c: dict, document: pd.DataFrame) -> None:
    """The lesson: fio's worst-case speedup vs the optimisation's, published and this run."""
    series = run_series(c)
    if not series:
        return
    order, kbs = c["order"], c["kbs"]
    panels = []
    if len(document):
        ref = document.iloc[0]
        doc_series = [
            ("fio worst case, write", c["colors"]["fio"],
             {r.tier: (r.fio_kbs / ref.fio_kbs,) * 3 for r in document.itertuples()}),
            (f"optimisation, {cores_of(document)} cores", plt.get_cmap("Blues")(0.75),
             {r.tier: (ref.wall_s / r.wall_s,) * 3 for r in document.itertuples()}),
        ]  # fmt: skip
        panels.append((list(document["tier"]), doc_series, "document 000 (2018, published)"))
    panels.append((order, series, f"this run ({c['hosts']})"))
    ratios = [3, max(len(order), 2)] if len(panels) == 2 else [1]
    fig, axes = plt.subplots(
        1, len(panels), figsize=(6 + 6 * (len(panels) - 1), 5.2), sharey=True, squeeze=False,
        gridspec_kw={"width_ratios": ratios},
    )  # fmt: skip
    for ax, (tiers, panel_series, title) in zip(axes[0], panels, strict=True):
        grouped_bars(ax, tiers, panel_series, title)
    axes[0][0].set_ylabel("speedup vs the slowest tier (x, log scale)")
    every = [
        v for _, panel_series, _ in panels for _, _, vals in panel_series for v in vals.values()
    ]
    top = max(v[2] for v in every if np.isfinite(v[2]))
    low = min(v[1] for v in every if np.isfinite(v[1]))
    axes[0][0].set_ylim(min(0.5, low * 0.8), top * 4)
    lesson = lesson_text(c, series)
    if lesson:
        fig.suptitle(f"Speedup over the slowest tier. This run, {lesson}", fontsize=12)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    plotting.legend_below(fig, *plotting.unique_handles(axes[0]), ncol=4)
    caption = speedup_caption(c, document, lesson, kbs)
    plotting.save(
        fig,
        c["out_dir"],
        "fe_speedup_vs_fio",
        "Speedup vs the slowest tier: fio worst case vs the optimisation",
        caption,
    )


def lesson_text(c: dict, series: list) -> str:
    order, kbs = c["order"], c["kbs"]
    reference, fastest = order[0], order[-1]
    fe_ratios = [
        (label.split(", ")[-1] if not several(c) else label, values[fastest][0])
        for label, _, values in series
        if not label.startswith("fio") and fastest in values
    ]
    if not fe_ratios or fastest == reference:
        return ""
    fe_text = ", ".join(f"{r:.2f}x ({label})" for label, r in fe_ratios)
    if reference in kbs and fastest in kbs:
        fio_ratio = kbs[fastest][0] / kbs[reference][0]
        return (
            f"{fastest} vs {reference}: fio's worst case {fio_ratio:,.0f}x faster, "
            f"the optimisation {fe_text}"
        )
    return f"{fastest} vs {reference}: the optimisation {fe_text}"


def speedup_caption(c: dict, document: pd.DataFrame, lesson: str, kbs: dict) -> str:
    fio_params = c["fio"].iloc[0] if len(c["fio"]) else None
    if fio_params is not None:
        fio_text = (
            f"random {fio_params['block_size']} read/write with fsync after every write, iodepth "
            f"{int(fio_params['iodepth'])}, file {fio_params['size']}, at most "
            f"{fio_params['runtime']} s; "
        )
    else:
        fio_text = "the worst case; "
    if len(document):
        d = document.set_index("tier")
        doc_text = (
            " Left: document 000's published tables, fio write KB/s ("
            + ", ".join(f"{r.tier} {r.fio_kbs:,.0f}" for r in document.itertuples())
            + f") and wall time at {cores_of(document)} cores ("
            + ", ".join(f"{r.tier} {r.wall_s:,.0f} s" for r in document.itertuples())
            + "), single published numbers without a spread."
        )
        if {"SSD", "tmpfs"} <= set(d.index):
            doc_text += (
                f" Document 000's lesson, tmpfs vs SSD: fio "
                f"{d.fio_kbs['tmpfs'] / d.fio_kbs['SSD']:,.0f}x, the optimisation "
                f"{d.wall_s['SSD'] / d.wall_s['tmpfs']:.2f}x at {cores_of(document)} cores."
            )
    else:
        doc_text = f" {plotting.no_published(c['document'])}, so only this run is shown."
    return (
        "Speedup of each tier over the slowest one (by fio's worst case). fio: write throughput "
        "ratio of "
        + fio_text
        + "optimisation: ratio of wall times at the same core count (bars: the range between "
        "the slowest and fastest repetitions, for fio and the optimisation alike). "
        + fe_parameters(c)
        + f" {repetitions_text(c, 'Medians')}."
        + doc_text
        + (" This run, " + lesson + "." if lesson else "")
        + plotting.describe_problems(pd.concat([c["fe_all"], c["fio_all"]]))
    )


def time_split(c: dict) -> None:
    """Median time of one analysis in file-system calls and in everything else."""
    fe = c["fe"]
    keys_of = ["workload", "tier", "cores", "point"]
    compute = metric_rows(fe, "eval_compute_time_median").set_index(keys_of)
    io = metric_rows(fe, "eval_io_time_median").set_index(keys_of)
    if compute.empty or io.empty:
        return
    cores = sorted(fe["cores"].dropna().astype(int).unique())
    points = sorted(fe["point"].unique())  # a sweep (proxy_fidelity): several models a tier
    keys = [
        (w, t, n, pt)
        for w in c["workloads"]
        for t in c["order"]
        for n in cores
        for pt in points
        if (w, t, n, pt) in compute.index and (w, t, n, pt) in io.index
    ]
    prefix = (lambda w: f"{w}, ") if several(c) else (lambda w: "")
    suffix = (lambda pt: f", {pt}") if several_models(fe) else (lambda pt: "")
    labels = [f"{prefix(w)}{t}, {cores_label(n)}{suffix(pt)}" for w, t, n, pt in keys]
    parts = ("median", "min", "max")
    ms = {
        name: {part: np.array([frame.loc[k, part] * 1000 for k in keys]) for part in parts}
        for name, frame in (("compute", compute), ("io", io))
    }
    comp, io_ms = ms["compute"]["median"], ms["io"]["median"]
    fig, ax = plt.subplots(figsize=(7.5, 0.55 * len(keys) + 1.6))
    y = np.arange(len(keys))
    ax.barh(y, comp, color=c["colors"]["compute"], label="compute (solve, formatting)")
    ax.barh(y, io_ms, left=comp, color=c["colors"]["fio"], label="file-system calls")
    whisker = {"fmt": "none", "ecolor": "0.2", "capsize": 3, "elinewidth": 1}
    ax.errorbar(
        comp, y - 0.12, xerr=plotting.span(comp, ms["compute"]["min"], ms["compute"]["max"]),
        **whisker,
    )  # fmt: skip
    ax.errorbar(
        comp + io_ms, y + 0.12, xerr=plotting.span(io_ms, ms["io"]["min"], ms["io"]["max"]),
        **whisker,
    )  # fmt: skip
    ends = comp + io_ms + (ms["io"]["max"] - io_ms)
    for yi, end, cc, i in zip(y, ends, comp, io_ms, strict=True):
        ax.annotate(
            f"I/O {100 * i / (cc + i):.0f}%",
            (end, yi),
            xytext=(6, 0),
            textcoords="offset points",
            va="center",
            fontsize=9,
        )
    ax.set_yticks(y, labels)
    ax.invert_yaxis()
    ax.set_xlim(right=ends.max() * 1.25)
    ax.set_xlabel("time per FE analysis (ms, medians)")
    plotting.legend_outside(ax, fontsize=9)
    ax.set_title("Time of one analysis: compute vs file-system calls")
    caption = (
        "Median over the analyses of a run of the time one FE analysis spends in file-system "
        "calls (creating, writing, flushing, syncing, closing, reading back the deck, deleting "
        "its folder) and in the rest (the Newton solve and formatting the output), then the "
        f"median of that over {c['reps']} measured repetitions (whiskers: min to max over the "
        "repetitions, at the end of each part). With more workers than free cores analyses slow "
        "each other down. " + fe_parameters(c)
    )
    plotting.save(
        fig,
        c["out_dir"],
        "fe_time_split",
        "Time of one analysis: compute vs file-system calls",
        caption,
    )
