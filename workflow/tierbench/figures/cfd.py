"""CFD figures (document 001).

Time per step vs write interval per tier, the single-run vs ensemble table of
document 001, and the I/O bandwidth derived as the document does: bytes written
per step / (time per step - time per step without I/O). Every workload of the
cfd family in the table is plotted (the proxy, and OpenFOAM beside it once it
runs); with more than one, series are named "<workload>, <tier>". A user's own
case (``openfoam`` with ``case``) is no duct of the document's: it gets the
generic figure of its headline per point and tier.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from .. import plotting, schemas
from ..units import format_size, format_value, multiple
from ..workloads.cfd import foam
from . import generic

#: parameters the figures group by; a table without the column gets the workload's schema default
STRUCTURAL = [
    "ensemble", "file_handler", "write_format", "purge_write", "fsync", "compute_per_cell_step",
]  # fmt: skip
#: parameters that change only the writes: a no-I/O run does not depend on them
IO_ONLY = {"write_interval", "file_handler", "write_format", "purge_write", "fsync"}
LABEL = {"none": "no I/O"}
#: what a caption says each workload of the family is
SOLVER_TEXT = {
    "cfd_proxy": (
        "the cfd_proxy (an OpenFOAM-style MPI solver: Jacobi sweeps and halo exchange for the "
        "compute every step, then every write-interval steps the uncollated output of document "
        "001, processorN/<time>/ with 8 files and 3 folders per rank)"
    ),
    "openfoam": (
        "OpenFOAM's simpleFoam on document 001's duct (kOmegaSST; every write-interval "
        "iterations its fields in a time folder per rank)"
    ),
}
WRITE_KEYS = ["wi", "file_handler", "write_format", "purge_write", "experiment"]


def make(
    summary: plotting.Table,
    out_dir: str,
    reference_csvs=None,
    study: str | None = None,
    workloads: list[str] | None = None,
    document: str | None = None,
) -> list[Path]:
    """cfd_time_per_step, cfd_single_vs_ensemble_ranks*, cfd_bandwidth, cfd_file_handler.

    Also writes cfd_single_vs_ensemble.csv and cfd_bandwidth.csv (the tables behind them).
    ``reference_csvs``: a folder, file or list of the published CSVs; ``document``: the one
    the study re-runs (document 001 for cfd_dcpmm), whose rows are drawn; without them the
    single-vs-ensemble figure shows this run's table only and says so.
    ``workloads``: the cfd family's workloads (default: the registry's).
    """
    plotting.setup()
    summary = plotting.table(summary, study)
    c = context(summary, out_dir, workloads or plotting.family_workloads("cfd"))
    c["document"] = document
    published = plotting.load_reference(reference_csvs, document)
    if len(c["ok"]):
        time_per_step(c)
        single_vs_ensemble(c, published)
        bandwidth_figure(c)
        file_handler(c)
    own = summary[own_cases(summary)]
    if len(own):
        generic.per_workload("openfoam", own, out_dir)
    return plotting.finish(out_dir)


def interval(value) -> str:
    text = str(value)
    return "none" if text == "none" else str(int(float(text)))


def order(intervals) -> list[str]:
    """no I/O first, then from the longest write interval to the shortest."""
    numbers = sorted((int(w) for w in set(intervals) if w != "none"), reverse=True)
    return (["none"] if "none" in set(intervals) else []) + [str(n) for n in numbers]


def ranks_text(ranks: int) -> str:
    return f"{ranks} rank{'s' if ranks > 1 else ''}"


def ensemble_label(e: int) -> str:
    return "single run" if e == 1 else f"ensemble of {e} (average)"


def fmt_bw(value, low=None, high=None) -> str:
    """MB/s or GB/s, with the range in brackets in the same unit when given."""
    if not np.isfinite(value):
        return "n/a"
    text = format_value(value, "MB/s", scaled=True)
    if low is None and high is None:
        return text
    size, _ = multiple(value, "MB/s")
    low = format_value(low / size) if low is not None and np.isfinite(low) else "?"
    high = format_value(high / size) if high is not None and np.isfinite(high) else "inf"
    return f"{text} ({low}-{high})"


def with_defaults(cfd: pd.DataFrame) -> pd.DataFrame:
    """Fill the grouping parameters a summary lacks from each workload's schema defaults."""
    for name in STRUCTURAL:
        if name not in cfd:
            cfd[name] = np.nan
    for workload in cfd["workload"].unique():
        try:
            defaults = schemas.schema_defaults(workload)
        except FileNotFoundError:
            defaults = {}
        for name in STRUCTURAL:
            missing = (cfd["workload"] == workload) & cfd[name].isna()
            if name in defaults and missing.any():
                values = cfd[name].astype(object)
                values[missing] = defaults[name]
                cfd[name] = values.infer_objects()
    return cfd


def own_cases(summary: pd.DataFrame) -> pd.Series:
    """Rows of openfoam runs of a user's case (parameter case): document 001's figures are
    the duct's and the proxy's; a case gets the generic figure of its headline per tier."""
    if "case" not in summary:
        return pd.Series(False, index=summary.index)
    return (summary["workload"] == "openfoam") & summary["case"].notna()


def context(summary: pd.DataFrame, out_dir: str, family: list[str]) -> dict:
    chosen = summary["workload"].isin(family) & ~own_cases(summary)
    cfd = with_defaults(summary[chosen].copy())
    first, last = summary.columns.get_loc("host") + 1, summary.columns.get_loc("metric")
    params = [p for p in summary.columns[first:last] if cfd[p].notna().any()]
    params += [p for p in STRUCTURAL if p not in params]
    cfd["wi"] = cfd["write_interval"].map(interval)
    for name in ("ranks", "ensemble", "steps"):
        cfd[name] = cfd[name].astype(float).astype(int)
    several = cfd["workload"].nunique() > 1
    cfd["series"] = (cfd["workload"] + ", " + cfd["tier"]) if several else cfd["tier"]
    ok = plotting.ok_rows(cfd)
    # a traced run's times mean nothing (strace stops it at every call): not plotted
    traced = generic.traced_experiments(ok)
    ok = ok[~ok["experiment"].isin(traced)]
    c = {
        "cfd": cfd,
        "ok": ok,
        "traced": traced,
        "reps": int(ok["n"].max()) if len(ok) else 0,
        # a solver setting: what a no-I/O run of the same workload and tier shares
        "solver": ["workload", "tier", "series"] + [p for p in params if p not in IO_ONLY],
        "hue": "series" if several else "tier",
        "out_dir": out_dir,
    }
    c["bandwidth"] = with_bandwidth(c) if len(ok) else pd.DataFrame()
    return c


def metric(c: dict, name: str) -> pd.DataFrame:
    return c["ok"][c["ok"]["metric"] == name]


def per_point(c: dict, name: str) -> pd.DataFrame:
    """One row per point: its median, min and max of a metric, keyed by its parameters."""
    columns = list(dict.fromkeys(c["solver"] + WRITE_KEYS + ["median", "min", "max"]))
    return metric(c, name)[columns].reset_index(drop=True)


def baselines(c: dict) -> pd.DataFrame:
    """Time per step without I/O for each solver setting (workload, tier, ranks, ensemble, ...)."""
    base = per_point(c, "time_per_step")
    base = base[base["wi"] == "none"]
    return base.groupby(c["solver"], as_index=False, dropna=False).agg(
        t0=("median", "mean"), t0_min=("min", "min"), t0_max=("max", "max")
    )


def with_bandwidth(c: dict) -> pd.DataFrame:
    """Points with writes, their baseline and the derived bandwidth (MB/s, 1e6 B/s)."""
    times = per_point(c, "time_per_step")
    times = times[times["wi"] != "none"]
    keys = list(dict.fromkeys(c["solver"] + WRITE_KEYS))

    def column(name: str, as_name: str) -> pd.DataFrame:
        return metric(c, name)[keys + ["median"]].rename(columns={"median": as_name})

    frame = times
    for name, as_name in (
        ("bytes_written", "bytes"),
        ("write_phase_bandwidth", "phase_mbs"),
        ("bytes_per_write", "per_write"),
        ("time_per_step_write", "t_write"),
        ("time_per_step_nowrite", "t_rest"),
    ):
        frame = frame.merge(column(name, as_name), on=keys, how="left")
    # the same run: steps with a write against the steps without one (write interval > 1)
    same = frame["t_write"] - frame["t_rest"]
    frame["same_run_bandwidth"] = np.where(same > 0, frame["per_write"] / same / 1e6, np.nan)
    # the write phase timed directly; members write at the same time, so their rates add up
    frame["phase_total_mbs"] = frame["phase_mbs"] * frame["ensemble"]
    frame = frame.merge(baselines(c), on=c["solver"], how="left")
    frame["bytes_per_step"] = frame["bytes"] / frame["steps"]
    extra = frame["median"] - frame["t0"]
    frame["io_time"] = extra
    frame["bandwidth"] = np.where(extra > 0, frame["bytes_per_step"] / extra / 1e6, np.nan)
    low_extra = frame["max"] - frame["t0_min"]
    high_extra = frame["min"] - frame["t0_max"]
    frame["bw_low"] = np.where(low_extra > 0, frame["bytes_per_step"] / low_extra / 1e6, np.nan)
    frame["bw_high"] = np.where(high_extra > 0, frame["bytes_per_step"] / high_extra / 1e6, np.inf)
    return frame


def setting_text(frame: pd.DataFrame) -> str:
    """The parameters a caption states: cells, bytes per rank per write, steps, compute."""
    row = frame.iloc[0]
    cells = (
        {int(n) for n in frame["cells_per_rank"].dropna()} if "cells_per_rank" in frame else set()
    )
    if cells:
        size = f"{', '.join(f'{n:,}' for n in sorted(cells))} cells per rank"
        per_rank = [
            n * foam.approx_bytes_per_cell(f) for n in cells for f in set(frame["write_format"])
        ]
        size += f" (about {', '.join(format_size(b) for b in sorted(per_rank))} per rank per write)"
    elif "bytes_per_rank" in frame:
        size = f"{', '.join(sorted(set(frame['bytes_per_rank'].astype(str))))} per rank per write"
    else:
        size = "output size as in results.csv"
    ranks = ", ".join(str(r) for r in sorted(set(frame["ranks"])))
    purge = int(float(row["purge_write"])) if pd.notna(row["purge_write"]) else "unset"
    return (
        f"{ranks} rank(s) per run, {size}, {int(row['steps'])} steps, "
        f"{compute_text(row['compute_per_cell_step'])}{row['write_format']}, purgeWrite {purge}"
    )


def compute_text(value) -> str:
    """The compute a caption states: seconds per cell and step, or the application's."""
    if pd.isna(value):
        return ""
    if value == "from_application":
        return "compute per step the application's at this shape (timed in each job), "
    return f"compute {float(value):.3g} s per cell and step, "


def widest_sweep(frame: pd.DataFrame) -> pd.DataFrame:
    """The experiment(s) that sweep the most write intervals."""
    spans = frame.groupby("experiment")["wi"].nunique()
    return frame[frame["experiment"].isin(spans[spans == spans.max()].index)].copy()


def time_per_step(c: dict) -> None:
    """Time per step vs write interval, a line per tier, a panel per ensemble size."""
    steps = per_point(c, "time_per_step")
    steps = steps[steps["file_handler"] == "uncollated"]
    if steps.empty:  # the experiment(s) that sweep the write interval; file_handler has its own
        return
    steps = widest_sweep(steps)
    wis = order(steps["wi"])
    steps["x"] = steps["wi"].map(wis.index)
    ensembles = sorted(steps["ensemble"].unique())
    many_ranks = steps["ranks"].nunique() > 1
    steps["run"] = steps["ranks"].map(ranks_text)
    fig, axes = plt.subplots(
        1, len(ensembles), figsize=(5.5 * len(ensembles), 4.3), sharey=True, squeeze=False
    )
    series = sorted(steps[c["hue"]].unique())
    # each series a little apart at an x, so that bars of one write interval do not overlap
    steps["x"] += steps[c["hue"]].map(
        {name: 0.04 * (i - (len(series) - 1) / 2) for i, name in enumerate(series)}
    )
    for ax, ensemble in zip(axes[0], ensembles, strict=True):
        part = steps[steps["ensemble"] == ensemble].sort_values("x")
        sns.lineplot(
            data=part,
            x="x",
            y="median",
            hue=c["hue"],
            hue_order=series,
            dashes=False,
            ax=ax,
            # a marker on every point: a tier measured at one write interval has no line
            **({"style": "run", "markers": True} if many_ranks else {"marker": "o"}),
        )
        plotting.errorbars(ax, part, "x", hue=c["hue"], order=series)
        ax.set_xticks(range(len(wis)), [LABEL.get(w, w) for w in wis])
        ax.set_xlim(-0.5, len(wis) - 0.5)  # a write interval's width, however many there are
        ax.set_xlabel("write interval (steps between writes)")
        ax.set_ylabel("time per step (s)")
        ax.set_title(ensemble_label(ensemble))
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    plotting.legend_outside(axes[0][-1], *plotting.unique_handles(axes[0]), fontsize=None)
    top = min(1.05 * steps["max"].max(), 2 * steps["median"].max())
    axes[0][0].set_ylim(bottom=0, top=top)  # shared by the panels
    clipped = " Bars that leave the plot are cut at its top." if steps["max"].max() > top else ""
    cfd = c["cfd"]
    solvers = " and ".join(SOLVER_TEXT.get(w, w) for w in sorted(set(steps["workload"])))
    caption = (
        f"Time per step of {solvers} against the write interval; "
        + ("'no I/O' is the same run without writes. " if "none" in wis else "")
        + (
            "Ensemble members are independent launches started together on the same tier. "
            if max(ensembles) > 1
            else ""
        )
        + f"{setting_text(steps)}. Buffered writes, no fsync, as OpenFOAM. Median of "
        f"{c['reps']} measured repetitions (bars: min to max).{clipped}"
        + (
            f" Left out, counted under strace (their times mean nothing): {', '.join(c['traced'])}."
            if c["traced"]
            else ""
        )
        + plotting.describe_problems(cfd[cfd["file_handler"] == "uncollated"])
    )
    plotting.save(
        fig, c["out_dir"], "cfd_time_per_step", "Time per step vs write interval", caption
    )


def draw_table(ax, cells, rows, columns, title) -> None:
    ax.axis("off")
    table = ax.table(
        cellText=cells, rowLabels=rows, colLabels=columns, loc="center", cellLoc="center"
    )
    table.auto_set_font_size(False)
    table.set_fontsize(9)
    for (r, col), cell in table.get_celld().items():
        cell.set_height(0.9 / (len(rows) + 2) * (2 if r == 0 else 1))
        if r == 0 or col == -1:
            cell.set_text_props(weight="bold")
            cell.set_facecolor("#eeeeee")
    ax.set_title(title, fontsize=11, loc="left")


def table_width(cells: list, rows: list, columns: list) -> float:
    """Inches for a table whose widest cell (9 pt) fits its column."""
    widest = max(len(text) for line in [*cells, *[c.split("\n") for c in columns]] for text in line)
    return len(columns) * max(2.1, 0.075 * widest + 0.3)


def column_label(series: str, ensemble: int) -> str:
    return f"{series}\n{ensemble_label(ensemble).replace(' (average)', ' avg')}"


def our_table(c: dict, part: pd.DataFrame, ranks: int) -> tuple[list, list, list, list]:
    """This run's cells (median and range), row labels, column labels and CSV rows."""
    series = sorted(part["series"].unique())
    ensembles = sorted(part["ensemble"].unique())
    wis = [w for w in order(part["wi"]) if w != "none"]
    wis += ["none"] if "none" in set(part["wi"]) else []
    pairs = [(s, e) for s in series for e in ensembles]
    cells, csv_rows = [], []
    for w in wis:
        line = []
        for s, e in pairs:
            hit = part[(part["series"] == s) & (part["ensemble"] == e) & (part["wi"] == w)]
            if hit.empty:
                line.append("-")
                value = np.nan
            else:
                value, low, high = (float(hit[k].iloc[0]) for k in ("median", "min", "max"))
                line.append(f"{value:.4g} ({low:.2g}-{high:.2g})")
            tier = hit["tier"].iloc[0] if len(hit) else s
            row = {"ranks": ranks, "tier": tier, "ensemble": e, "write_interval": w}
            if c["hue"] == "series":
                row["workload"] = hit["workload"].iloc[0] if len(hit) else s.split(", ")[0]
            csv_rows.append({**row, "time_per_step_s": value})
        cells.append(line)
    bandwidth = c["bandwidth"]
    bw = bandwidth[(bandwidth["ranks"] == ranks) & (bandwidth["file_handler"] == "uncollated")]
    for w in [w for w in wis if w != "none"]:
        line = []
        for s, e in pairs:
            hit = bw[(bw["series"] == s) & (bw["ensemble"] == e) & (bw["wi"] == w)]
            line.append(bandwidth_cell(hit.iloc[0]) if len(hit) else "-")
        cells.append(line)
    volume = metric(c, "bytes_per_write")
    volume = volume[(volume["ranks"] == ranks) & (volume["file_handler"] == "uncollated")]
    volume_line = []
    for s, e in pairs:
        hit = volume[(volume["series"] == s) & (volume["ensemble"] == e)]
        volume_line.append(format_size(hit["median"].max()) if len(hit) else "-")
    cells.append(volume_line)
    rows = [f"write interval {w}" if w != "none" else "no I/O" for w in wis]
    rows += [f"I/O bandwidth, interval {w}" for w in wis if w != "none"]
    rows += ["data per write (all ranks)"]
    return cells, rows, [column_label(s, e) for s, e in pairs], csv_rows


def bandwidth_cell(row) -> str:
    """The derived bandwidth and its range (open-ended when the fastest write was not slower)."""
    return fmt_bw(row["bandwidth"], row["bw_low"], row["bw_high"])


def published_table(published: pd.DataFrame) -> tuple[list, list, list]:
    """Document 001's table: time per step and derived bandwidth, single run vs ensemble."""
    ref = published[published["table"] == "time_per_step_single_vs_ensemble"]
    ref_bw = published[published["table"] == "derived_bandwidth"]
    tiers = list(dict.fromkeys(ref["tier"]))
    ensembles = sorted(set(ref["ensemble"].astype(int)))
    pairs = [(t, e) for t in tiers for e in ensembles]

    def cell(frame: pd.DataFrame, tier: str, ensemble: int, w: int, unit: str = "") -> str:
        hit = frame[
            (frame["tier"] == tier)
            & (frame["ensemble"].astype(int) == ensemble)
            & (frame["write_interval"].astype(int) == w)
        ]
        return f"{hit['value'].iloc[0]:g}{unit}" if len(hit) else "-"

    wis = sorted(set(ref["write_interval"].astype(int)), reverse=True)
    bw_wis = sorted(set(ref_bw["write_interval"].astype(int)), reverse=True)
    cells = [[cell(ref, t, e, w) for t, e in pairs] for w in wis]
    cells += [[cell(ref_bw, t, e, w, " GB/s") for t, e in pairs] for w in bw_wis]
    cells.append([f"{7.5 * e:g} GB" for t, e in pairs])
    rows = [f"write interval {w}" for w in wis]
    rows += [f"I/O bandwidth, interval {w}" for w in bw_wis]
    rows.append("data per write (all ranks)")
    return cells, rows, [column_label(t, e) for t, e in pairs]


def single_vs_ensemble(c: dict, published: pd.DataFrame) -> None:
    """Document 001's table re-run, per rank count with more than one ensemble size."""
    uncollated = per_point(c, "time_per_step")
    uncollated = uncollated[uncollated["file_handler"] == "uncollated"]
    has_reference = (published["table"] == "time_per_step_single_vs_ensemble").any()
    table_rows = []
    for ranks in sorted(uncollated["ranks"].unique()):
        part = uncollated[uncollated["ranks"] == ranks]
        if part["ensemble"].nunique() < 2:
            continue
        cells, rows, columns, csv_rows = our_table(c, part, ranks)
        table_rows += csv_rows
        panels = [
            (cells, rows, columns, f"this machine: time per step (s), {ranks_text(ranks)} per run")
        ]
        if has_reference:
            panels.append(
                (*published_table(published),
                 "document 001 (published): 192 ranks per run (4 nodes), 7.5 GB per step per run")
            )  # fmt: skip
        heights = [len(p[1]) + 3 for p in panels]
        width = max(8, max(table_width(*p[:3]) for p in panels) + 2.5)
        fig, axes = plt.subplots(
            len(panels),
            1,
            figsize=(width, 0.36 * sum(heights)),
            squeeze=False,
            gridspec_kw={"height_ratios": heights},
        )
        for ax, panel in zip(axes[:, 0], panels, strict=True):
            draw_table(ax, *panel)
        cfd = c["cfd"]
        reference_text = (
            " The lower table is the published one, on 192 ranks with ~40 MB per rank per write "
            "(fsdax = DCPMM in App Direct mode, Lustre = the shared file system)."
            if has_reference
            else f" {plotting.no_published(c['document'])}, so only this run's table is shown."
        )
        caption = (
            "Document 001's table re-run: time per step (s, median of "
            f"{c['reps']} repetitions, in brackets min-max) of a single run and the average over "
            "the members of an ensemble of concurrent runs, per tier and write interval, and the "
            "I/O bandwidth derived as the document does: bytes written per step by all ranks of "
            "all members / (time per step - time per step without I/O of the same tier and "
            "ensemble), in brackets its extremes (slowest vs fastest pairing of the repetitions). "
            "'n/a': the run with writes was not slower than the one without, the I/O cost is "
            f"within the noise. {setting_text(part)}."
            + reference_text
            + plotting.describe_problems(
                cfd[(cfd["ranks"] == ranks) & (cfd["file_handler"] == "uncollated")]
            )
        )
        plotting.save(
            fig,
            c["out_dir"],
            f"cfd_single_vs_ensemble_ranks{ranks}",
            f"Single run vs ensemble, {ranks_text(ranks)} per run",
            caption,
        )
    if table_rows:
        Path(c["out_dir"]).mkdir(parents=True, exist_ok=True)
        frame = pd.DataFrame(table_rows)
        frame.to_csv(Path(c["out_dir"]) / "cfd_single_vs_ensemble.csv", index=False)


def bandwidth_figure(c: dict) -> None:
    """Derived I/O bandwidth per tier and write interval, with the two same-run estimates."""
    bandwidth = c["bandwidth"]
    if bandwidth.empty:
        return
    Path(c["out_dir"]).mkdir(parents=True, exist_ok=True)
    bandwidth.to_csv(Path(c["out_dir"]) / "cfd_bandwidth.csv", index=False)
    bw = widest_sweep(bandwidth[bandwidth["file_handler"] == "uncollated"])
    bw = bw[np.isfinite(bw["bandwidth"]) | np.isfinite(bw["same_run_bandwidth"])]
    if bw.empty:
        return
    ensembles = sorted(bw["ensemble"].unique())
    fig, axes = plt.subplots(
        1, len(ensembles), figsize=(5.5 * len(ensembles), 4.3), sharey=True, squeeze=False
    )
    wis = [w for w in order(bandwidth["wi"]) if w != "none"]
    series = sorted(bw["series"].unique())
    colors = dict(zip(series, sns.color_palette("colorblind", max(len(series), 3)), strict=False))
    for ax, ensemble in zip(axes[0], ensembles, strict=True):
        bandwidth_panel(ax, bw[bw["ensemble"] == ensemble], wis, series, colors)
        ax.set_title(ensemble_label(ensemble))
    plotting.legend_outside(axes[0][-1], *plotting.unique_handles(axes[0]))
    missing = bandwidth[
        (bandwidth["file_handler"] == "uncollated")
        & ~np.isfinite(bandwidth["bandwidth"])
        & bandwidth["experiment"].isin(bw["experiment"])
    ]
    note = ""
    if len(missing):
        note = (
            " No bar (I/O cost within the noise, or no no-I/O baseline): "
            + "; ".join(
                f"{r.series} interval {r.wi} ensemble {r.ensemble}" for r in missing.itertuples()
            )
            + "."
        )
    caption = (
        "I/O bandwidth derived as document 001 does: bytes written per step by all ranks of all "
        "ensemble members / (time per step - time per step without I/O), from the medians of "
        f"{c['reps']} repetitions; bars span the extremes (slowest vs fastest pairing of the "
        "repetitions, open-ended when the fastest run with writes was not slower than the "
        f"slowest without). {setting_text(bw)}. An ensemble writes its members' bytes at the same "
        "time, as in the document (5 x 7.5 GB per step). Two estimates that do not depend on a "
        "separate run: dots, the same run's steps with a write against its steps without one "
        "(bytes per write / extra time of a write step; needs a write interval above 1); "
        "crosses, the write phase timed on its own (summed over the members). On a busy machine "
        "the compute time of separate runs varies more than a write costs, and only these stay "
        "close to the tier's rate." + note
    )
    plotting.save(
        fig,
        c["out_dir"],
        "cfd_bandwidth",
        "Derived I/O bandwidth per tier and write interval",
        caption,
    )


ESTIMATES = (
    ("same_run_bandwidth", {"marker": "o", "s": 28, "color": "black"},
     "same run: write steps vs the others"),
    ("phase_total_mbs", {"marker": "x", "s": 36, "color": "0.35"}, "write phase timed directly"),
)  # fmt: skip


def bandwidth_panel(ax, part: pd.DataFrame, wis: list, series: list, colors: dict) -> None:
    many_ranks = part["ranks"].nunique() > 1
    slots = [(s, r) for s in series for r in sorted(part["ranks"].unique())]
    slots = [(s, r) for s, r in slots if ((part["series"] == s) & (part["ranks"] == r)).any()]
    width = 0.8 / max(1, len(slots))
    labelled = set()
    for slot, (s, ranks) in enumerate(slots):
        rows = part[(part["series"] == s) & (part["ranks"] == ranks)]
        x = np.array([wis.index(w) for w in rows["wi"]]) + (slot - (len(slots) - 1) / 2) * width
        label = f"{s}, {ranks_text(ranks)}" if many_ranks else s
        ax.bar(x, rows["bandwidth"], width=width * 0.95, label=label, color=colors[s])
        high = np.where(np.isfinite(rows["bw_high"]), rows["bw_high"], rows["bandwidth"])
        low = np.where(np.isfinite(rows["bw_low"]), rows["bw_low"], rows["bandwidth"])
        plotting.whiskers(ax, x, rows["bandwidth"], low, high, ecolor="0.3")
        labels = [fmt_bw(v) if np.isfinite(v) else "" for v in rows["bandwidth"]]
        marks = [rows[column].to_numpy(dtype=float) for column, _, _ in ESTIMATES]
        tops = np.fmax.reduce([rows["bandwidth"].to_numpy(dtype=float), high, *marks])
        plotting.label_above(ax, x, tops, labels)
        for column, style, name in ESTIMATES:
            if np.isfinite(rows[column]).any():
                ax.scatter(
                    x, rows[column], zorder=3, **style, label=None if name in labelled else name
                )
                labelled.add(name)
    ax.set_xticks(range(len(wis)), wis)
    ax.set_xlabel("write interval (steps between writes)")
    ax.set_ylabel("derived I/O bandwidth (MB/s, log scale)")
    ax.set_yscale("log")
    ax.set_ylim(top=ax.get_ylim()[1] * 1.25)  # room for the labels above the whiskers


def file_handler(c: dict) -> None:
    """Uncollated vs collated output per tier, beside the same run without I/O."""
    times = per_point(c, "time_per_step")
    collated = times[times["file_handler"] == "collated"]
    if collated.empty:
        return
    keys = c["solver"] + ["wi"]
    pair = times[times.set_index(keys).index.isin(collated.set_index(keys).index)].copy()
    pair = pair.drop_duplicates(subset=keys + ["file_handler"])
    base = baselines(c)
    pair["setting"] = (
        pair["series"] + "\ninterval " + pair["wi"] + ", " + pair["ranks"].map(ranks_text)
    )
    settings = list(dict.fromkeys(pair["setting"]))
    handlers = [h for h in ("uncollated", "collated") if h in set(pair["file_handler"])]
    fig, ax = plt.subplots(figsize=(max(6, 1.8 * len(settings) + 2), 4.3))
    width = 0.8 / len(handlers)
    colors = sns.color_palette("colorblind", max(len(handlers), 3))
    for i, handler in enumerate(handlers):
        part = pair[pair["file_handler"] == handler].set_index("setting").reindex(settings)
        x = np.arange(len(settings)) + (i - (len(handlers) - 1) / 2) * width
        ax.bar(x, part["median"], width * 0.95, label=handler, color=colors[i])
        plotting.whiskers(ax, x, part["median"], part["min"], part["max"])
        labels = [f"{v:.3g} s" if np.isfinite(v) else "" for v in part["median"]]
        plotting.label_above(ax, x, np.fmax(part["max"], part["median"]), labels)
    for i, setting in enumerate(settings):
        row = pair[pair["setting"] == setting].iloc[0]
        hit = base.merge(row[c["solver"]].to_frame().T.astype(base[c["solver"]].dtypes.to_dict()))
        if len(hit):
            ax.hlines(
                hit["t0"].iloc[0], i - 0.4, i + 0.4, colors="0.2", linestyles="--",
                label="no I/O" if i == 0 else None,
            )  # fmt: skip
    ax.set_xticks(np.arange(len(settings)), settings)
    ax.set_xlabel("")
    ax.set_ylabel("time per step (s)")
    ax.set_ylim(top=ax.get_ylim()[1] * 1.08)  # room for the labels above the whiskers
    plotting.legend_outside(ax, title="file handler")
    files = metric(c, "files_created")
    files = files[files.set_index(keys).index.isin(collated.set_index(keys).index)]
    counts = "; ".join(
        f"{r.file_handler}: {int(r.median):,} files"
        for r in files.drop_duplicates(subset=["file_handler"]).itertuples()
    )
    cfd = c["cfd"]
    caption = (
        "Time per step with uncollated output (processorN/<time>/: 8 files and 3 folders per "
        "rank per write) and collated output (processorsN/<time>/<field>: one file per field "
        "holding a block per rank, gathered and written by the master; 8 files and 3 folders per "
        f"write), per tier; dashed: the same run without I/O. Files created per run: {counts}. "
        f"{setting_text(pair)}. Median of {c['reps']} repetitions (bars: min to max)."
        + plotting.describe_problems(cfd[cfd["file_handler"] == "collated"])
    )
    plotting.save(fig, c["out_dir"], "cfd_file_handler", "Uncollated vs collated output", caption)
