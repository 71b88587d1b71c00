"""Each figure family's make() on small synthetic tables: the files, the manifest, the overlays.

The tables are made the way the pipeline makes them: tidy rows per repetition,
summarised by tierbench.aggregate, so the columns are the real ones.
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib
import pandas as pd
import pytest
from tierbench import aggregate, verdicts
from tierbench.figures import cfd, fe, fio, paper, pv, sequential
from tierbench.records import LEADING_COLUMNS, TRAILING_COLUMNS
from tierbench.schemas import load_yaml

REFERENCE = Path(__file__).resolve().parents[1] / "config" / "reference"


def document_of(study: str) -> str:
    """The document a study re-runs, as the figures rule hands it on: its file's."""
    return str(load_yaml(REFERENCE.parent / "studies" / f"{study}.yaml")["document"])


@pytest.fixture(autouse=True)
def small_pngs(monkeypatch):
    """Low-resolution PNGs: the test checks what is drawn and written, not how sharp it is."""
    monkeypatch.setitem(matplotlib.rcParams, "savefig.dpi", 30)


REPS = (1.0, 1.1, 0.9)


class Study:
    """Tidy rows of a synthetic study: one warm-up and three measured repetitions per point."""

    def __init__(self, name: str = "t", warmup: bool = True):
        self.name = name
        self.warmup = warmup
        self.rows: list[dict] = []

    def point(self, workload, experiment, tier, tier_class, point, params, metrics):
        """metrics: {name: (unit, median value)}; repetitions spread 0.9-1.1 around it."""
        base = {
            "study": self.name,
            "experiment": experiment,
            "workload": workload,
            "tier": tier,
            "tier_class": tier_class,
            "host": "node1",
            "point": point,
            **params,
        }
        warmup = [("warmup", 1.3)] if self.warmup else []
        for repetition, (phase, factor) in enumerate(
            warmup + [("measured", f) for f in REPS], start=0 if self.warmup else 1
        ):
            for name, (unit, value) in metrics.items():
                self.rows.append(
                    {
                        **base,
                        "repetition": repetition,
                        "phase": phase,
                        "metric": name,
                        "value": value * factor,
                        "unit": unit,
                        "status": "ok",
                        "reason": "",
                        "started_at": "",
                        "duration_s": 1.0,
                        "slurm_job_id": "",
                    }
                )
        return self

    def skipped(self, workload, experiment, tier, tier_class, point, params, reason):
        self.rows.append(
            {
                "study": self.name,
                "experiment": experiment,
                "workload": workload,
                "tier": tier,
                "tier_class": tier_class,
                "host": "node1",
                "point": point,
                **params,
                "repetition": 1,
                "phase": "measured",
                "metric": "status",
                "value": float("nan"),
                "unit": "",
                "status": "skipped",
                "reason": reason,
                "started_at": "",
                "duration_s": 0.0,
                "slurm_job_id": "",
            }
        )
        return self

    def tables(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        frame = pd.DataFrame(self.rows)
        params = sorted(set(frame.columns) - set(LEADING_COLUMNS) - set(TRAILING_COLUMNS))
        results = frame[LEADING_COLUMNS + params + TRAILING_COLUMNS]
        return results, aggregate.summarise(results, 0.25)


def manifest(out_dir: Path) -> dict[str, dict]:
    return {e["name"]: e for e in json.loads((out_dir / "manifest.json").read_text())}


def assert_figures(out_dir: Path, returned: list[Path], names: set[str]) -> dict[str, dict]:
    """Exactly ``names`` in the manifest, each with its PNG and SVG, and make() returned them."""
    entries = manifest(out_dir)
    assert set(entries) == names
    for name, entry in entries.items():
        assert (out_dir / f"{name}.png").stat().st_size > 0
        assert (out_dir / f"{name}.svg").stat().st_size > 0
        assert entry["title"] and entry["caption"]
    assert [p.name for p in returned] == [entries[n]["png"] for n in entries]
    return entries


def fio_points(study: Study) -> Study:
    worst = {
        "rw": "randrw",
        "block_size": "4k",
        "io_mode": "fsync",
        "size": "8MiB",
        "runtime": 2,
        "iodepth": 1,
    }
    for tier, tier_class, kbs in (("disk", "disk", 0.2), ("shm", "shm", 50.0)):
        study.point(
            "fio",
            "worst_case",
            tier,
            tier_class,
            "p",
            worst,
            {"read_bandwidth": ("MB/s", kbs), "write_bandwidth": ("MB/s", kbs)},
        )
    return study


def test_fio(tmp_path):
    study = fio_points(Study())
    for tier, tier_class in (("disk", "disk"), ("shm", "shm")):
        for rw in ("write", "read"):
            for mode in ("buffered", "direct"):
                for bs, mbs in (("4k", 100.0), ("1M", 900.0)):
                    params = {
                        "rw": rw,
                        "block_size": bs,
                        "io_mode": mode,
                        "size": "8MiB",
                        "runtime": 2,
                        "iodepth": 1,
                    }
                    study.point(
                        "fio",
                        "sequential",
                        tier,
                        tier_class,
                        f"{rw}_{mode}_{bs}",
                        params,
                        {f"{rw}_bandwidth": ("MB/s", mbs)},
                    )
    _, summary = study.tables()
    out = tmp_path / "fio"
    entries = assert_figures(
        out, fio.make(summary, str(out), study="t"), {"fio_sequential", "fio_worst_case"}
    )
    assert "fsync after every write, iodepth 1" in entries["fio_worst_case"]["caption"]
    assert "bars: min to max" in entries["fio_worst_case"]["caption"]


def test_a_study_filter_and_an_empty_family_still_give_a_manifest(tmp_path):
    _, summary = fio_points(Study("other")).tables()
    out = tmp_path / "fio"
    assert fio.make(summary, str(out), study="t") == []
    assert manifest(out) == {}


def test_a_missing_table_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such table: .*nowhere.csv"):
        fio.make(tmp_path / "nowhere.csv", str(tmp_path / "fio"))


def sequential_study(with_stream: bool) -> Study:
    study = Study()
    if with_stream:
        metrics = {
            f"{k}_bandwidth": ("MB/s", v)
            for k, v in (("copy", 9000.0), ("scale", 8800.0), ("add", 9500.0), ("triad", 9600.0))
        }
        metrics |= {"array_bytes": ("B", 2**27), "llc_total_bytes": ("B", 2**25)}
        study.point("stream", "memory", "shm", "shm", "t1", {"threads": 1, "ntimes": 3}, metrics)
    for tier, tier_class, mbs in (("disk", "disk", 700.0), ("shm", "shm", 2500.0)):
        for sync in ("buffered", "fdatasync"):
            study.point(
                "dd",
                "dd_tiers",
                tier,
                tier_class,
                sync,
                {"block_size": "1M", "count": 4, "sync": sync},
                {"write_bandwidth": ("MB/s", mbs), "bytes": ("B", 4 * 2**20)},
            )
            for fraction, drop in ((0.01, 1.0), (0.05, 1.0), (0.5, 0.2 if tier == "disk" else 1)):
                params = {
                    "block_size": "1M",
                    "sync": sync,
                    "file_fraction": fraction,
                    "relative_to": "dirty_limit",
                    "max_file_size": "64MiB",
                }
                study.point(
                    "dd",
                    "cliff",
                    tier,
                    tier_class,
                    f"{sync}_{fraction}",
                    params,
                    {
                        "write_bandwidth": ("MB/s", mbs * drop),
                        "bytes": ("B", fraction * 2**30),
                        "dirty_background_bytes": ("B", 2**29),
                        "dirty_limit_bytes": ("B", 2**30),
                        "ram_bytes": ("B", 2**33),
                    },
                )
        params = {
            "block_size": "1M",
            "sync": "buffered",
            "file_fraction": 2.0,
            "relative_to": "dirty_limit",
            "max_file_size": "64MiB",
        }
        study.skipped(
            "dd",
            "cliff",
            tier,
            tier_class,
            "buffered_2",
            params,
            "the file (2 GiB) is above the sweep cap 64 MiB",
        )
    return study


def test_sequential(tmp_path):
    _, summary = sequential_study(with_stream=True).tables()
    out = tmp_path / "sequential"
    entries = assert_figures(
        out,
        sequential.make(summary, str(out)),
        {"stream_kernels", "dd_tiers_dd_tiers", "cliff_cliff"},
    )
    assert "Dashed line: STREAM copy" in entries["dd_tiers_dd_tiers"]["caption"]
    assert "Not run (recorded as skipped): file_fraction 2" in entries["cliff_cliff"]["caption"]
    stream_caption = entries["stream_kernels"]["caption"]
    assert "(32 MiB of last-level cache, arrays at least 4x that)" in stream_caption


def test_stream_caption_says_when_the_arrays_were_capped():
    """STREAM's arrays below 4x the cache (a run capped in time or memory) are not 4x."""
    assert sequential.array_rule(pd.Series([2.0**27]), pd.Series([2.0**25])) == (
        "arrays at least 4x that"
    )
    capped = sequential.array_rule(pd.Series([0.6 * 2**29]), pd.Series([2.0**29]))
    assert capped.startswith("arrays capped at 0.6x that, below STREAM's 4x")


def test_sequential_without_stream_draws_no_ceiling_and_says_so(tmp_path):
    _, summary = sequential_study(with_stream=False).tables()
    out = tmp_path / "sequential"
    entries = assert_figures(
        out, sequential.make(summary, str(out)), {"dd_tiers_dd_tiers", "cliff_cliff"}
    )
    assert "No STREAM measurement" in entries["dd_tiers_dd_tiers"]["caption"]


def pv_study() -> Study:
    study = Study()
    sinks = (
        ("void", "void", 9000.0),
        ("disk", "disk", 1500.0),
        ("shm", "shm", 3000.0),
        ("shm_fuse", "fuse", 900.0),
    )
    for tier, tier_class, mbs in sinks:
        study.point(
            "pv",
            "sinks",
            tier,
            tier_class,
            "p",
            {"size": "16MiB"},
            {"throughput": ("MB/s", mbs), "wall_throughput": ("MB/s", mbs * 0.9)},
        )
    return study


def test_pv_with_and_without_the_published_rows(tmp_path):
    results, summary = pv_study().tables()
    out = tmp_path / "with"
    document = document_of("ramdisk_macos")
    entries = assert_figures(
        out,
        pv.make(results, summary, str(out), reference_csvs=REFERENCE, document=document),
        {"pv_sinks", "pv_vs_document"},
    )
    assert "Cross-check" in entries["pv_sinks"]["caption"]
    out = tmp_path / "without"
    made = pv.make(results, summary, str(out), document=document)
    entries = assert_figures(out, made, {"pv_sinks"})
    assert "No published rows of document 002" in entries["pv_sinks"]["caption"]
    # a study that re-runs no document draws none, whatever the reference CSVs hold
    out = tmp_path / "no_document"
    made = pv.make(results, summary, str(out), reference_csvs=REFERENCE)
    entries = assert_figures(out, made, {"pv_sinks"})
    assert "The study re-runs no document" in entries["pv_sinks"]["caption"]


GA = {"population": 4, "generations": 2, "elite": 1, "seed": 1, "elements": 3, "increments": 10}
#: fe_proxy's parameters, and the calculix workload's
PROXY = {**GA, "output_model": "calculix", "frd_every": 2, "fsync": "none"}
CALCULIX = {**GA, "frd_every": 1}


def fe_study(workloads=("fe_proxy",), proxy=PROXY, warmup=True) -> Study:
    study = fio_points(Study(warmup=warmup))
    for workload in workloads:
        params = {"fe_proxy": proxy, "calculix": CALCULIX}.get(workload, {})
        for tier, tier_class, slow in (("disk", "disk", 2.0), ("shm", "shm", 1.0)):
            for cores in (1, 2):
                study.point(
                    workload,
                    "optimisation",
                    tier,
                    tier_class,
                    f"c{cores}",
                    {**params, "cores": cores},
                    {
                        "wall_time": ("s", 10.0 * slow / cores),
                        "eval_compute_time_median": ("s", 0.05),
                        "eval_io_time_median": ("s", 0.02 * slow),
                        "bytes_per_evaluation": ("B", 2**21),
                    },
                )
    return study


def fe_captions(tmp_path, study: Study, workloads=None) -> dict[str, str]:
    """The fe figures' captions without document 000's published rows."""
    _, summary = study.tables()
    out = tmp_path / "fe"
    names = {"fe_wall_time", "fe_speedup_vs_fio", "fe_time_split"}
    made = fe.make(summary, str(out), workloads=workloads, document="000")
    entries = assert_figures(out, made, names)
    return {name: entry["caption"] for name, entry in entries.items()}


def test_fe(tmp_path):
    _, summary = fe_study().tables()
    names = {"fe_wall_time", "fe_speedup_vs_fio", "fe_time_split"}
    out = tmp_path / "with"
    made = fe.make(summary, str(out), reference_csvs=REFERENCE, document=document_of("fe_tmpfs"))
    entries = assert_figures(out, made, names)
    speedup = entries["fe_speedup_vs_fio"]["caption"]
    assert "Left: document 000's published tables" in speedup
    # the core count whose published wall times hold every tier of the fio table
    assert "wall time at 30 cores (HDD 1,676 s, SSD 209 s, tmpfs 191 s)" in speedup
    assert "shm vs disk: fio's worst case 250x faster, the optimisation 2.00x (1 core)" in speedup
    assert "fe_proxy:" not in speedup  # one workload: captions as before, unprefixed
    assert "CalculiX 2.20's file set" in speedup and "every 2 increments" in speedup
    assert "the real solver" not in speedup


def test_fe_plots_every_workload_of_its_family_and_goes_without_published_rows(tmp_path):
    study = fe_study(("calculix", "fe_proxy"), proxy=PROXY)
    captions = fe_captions(tmp_path, study, workloads=["calculix", "fe_proxy"])
    caption = captions["fe_speedup_vs_fio"]
    assert "(calculix, 1 core)" in caption and "(fe_proxy, 1 core)" in caption
    assert "No published rows of document 000" in caption
    # calculix runs the solver itself; fe_proxy writes CalculiX's files, here every 2nd increment
    real, proxy = caption.split("calculix: ")[1].split("fe_proxy: ")
    assert "the real solver, CalculiX (ccx" in real and "3 C3D8 elements" in real
    assert "field output (.frd) every increment" in real
    assert "CalculiX 2.20's file set" in proxy and "field output (.frd) every 2 increments" in proxy


def test_fe_caption_without_the_model_parameters_says_where_they_are(tmp_path):
    study = fe_study(("calculix", "fe_proxy"), proxy={**GA, "output_model": "calculix"})
    caption = fe_captions(tmp_path, study, ["calculix", "fe_proxy"])["fe_wall_time"]
    assert "fe_proxy: parameters as in results.csv" in caption  # frd_every and fsync missing
    assert "calculix: GA population 4" in caption


def test_fe_plots_the_optimisation_beside_other_experiments_of_a_workload(tmp_path):
    """fe_tmpfs also runs fe_proxy in fidelity experiments at 1 core: only the sweep is plotted."""
    study = fe_study(proxy=PROXY)
    for frd_every in (1, 0):
        for tier, tier_class in (("disk", "disk"), ("shm", "shm")):
            study.point(
                "fe_proxy",
                "fidelity_proxy",
                tier,
                tier_class,
                f"frd_every={frd_every}",
                {**PROXY, "population": 10, "frd_every": frd_every, "cores": 1},
                {"wall_time": ("s", 3.0), "bytes_per_evaluation": ("B", 2**20)},
            )
    captions = fe_captions(tmp_path, study)
    assert "GA population 4, 2 generations" in captions["fe_wall_time"]
    assert "population 10" not in " ".join(captions.values())
    assert "the optimisation 2.00x (1 core), 2.00x (2 cores)" in captions["fe_speedup_vs_fio"]


def test_fe_plots_a_sweep_of_models_a_series_per_model(tmp_path):
    """proxy_fidelity runs several models on each tier at one core count: each is its own
    series and bar, named by its point, instead of one series that cannot be drawn."""
    study = fio_points(Study())
    for tier, tier_class, slow in (("disk", "disk", 2.0), ("shm", "shm", 1.0)):
        for elements, cost in ((10, 1.0), (100, 3.0)):
            study.point(
                "fe_proxy", "sweep", tier, tier_class, f"elements={elements}",
                {**PROXY, "cores": 1, "elements": elements},
                {"wall_time": ("s", 10.0 * cost * slow), "eval_compute_time_median": ("s", cost),
                 "eval_io_time_median": ("s", 0.02 * slow), "bytes_per_evaluation": ("B", 2**21)},
            )  # fmt: skip
    captions = fe_captions(tmp_path, study)
    speedup = captions["fe_speedup_vs_fio"]
    assert "2.00x (elements=10), 2.00x (elements=100)" in speedup, speedup


@pytest.mark.parametrize("warmup", [True, False])
def test_fe_captions_name_the_warmup_only_when_there_was_one(tmp_path, warmup):
    captions = fe_captions(tmp_path, fe_study(warmup=warmup))
    for name in ("fe_wall_time", "fe_speedup_vs_fio"):
        assert "measured repetitions" in captions[name]
        assert ("warm-up" in captions[name]) == warmup, name


def cfd_study(workloads=("cfd_proxy",)) -> Study:
    study = Study()
    base = {
        "ranks": 1,
        "steps": 20,
        "cells_per_rank": 20000,
        "compute_per_cell_step": 1.8e-6,
        "purge_write": 1,
        "write_format": "binary",
        "warmup_steps": 3,
    }
    for workload in workloads:
        for tier, tier_class, cost in (("disk", "disk", 0.004), ("shm", "shm", 0.001)):
            for ensemble in (1, 2):
                for wi in ("1", "none"):
                    params = {
                        **base,
                        "ensemble": ensemble,
                        "write_interval": wi,
                        "file_handler": "uncollated",
                    }
                    metrics = {
                        "time_per_step": ("s", 0.001 + (cost * ensemble if wi == "1" else 0))
                    }
                    if wi == "1":
                        metrics |= {
                            "bytes_written": ("B", 20 * 1.6e6 * ensemble),
                            "bytes_per_write": ("B", 1.6e6 * ensemble),
                            "write_phase_bandwidth": ("MB/s", 1.6 / cost),
                            "files_created": ("files", 160),
                        }
                    study.point(
                        workload,
                        "single_vs_ensemble",
                        tier,
                        tier_class,
                        f"e{ensemble}_{wi}",
                        params,
                        metrics,
                    )
            params = {**base, "ensemble": 1, "write_interval": "1", "file_handler": "collated"}
            study.point(
                workload,
                "file_handler",
                tier,
                tier_class,
                "collated",
                params,
                {"time_per_step": ("s", 0.001 + 1.5 * cost), "files_created": ("files", 160)},
            )
    return study


CFD_FIGURES = {
    "cfd_time_per_step",
    "cfd_single_vs_ensemble_ranks1",
    "cfd_bandwidth",
    "cfd_file_handler",
}


def test_cfd(tmp_path):
    _, summary = cfd_study().tables()
    out = tmp_path / "with"
    made = cfd.make(summary, str(out), reference_csvs=REFERENCE, document=document_of("cfd_dcpmm"))
    entries = assert_figures(out, made, CFD_FIGURES)
    assert "The lower table is the published one" in str(entries)
    assert (out / "cfd_bandwidth.csv").is_file() and (out / "cfd_single_vs_ensemble.csv").is_file()
    table = pd.read_csv(out / "cfd_single_vs_ensemble.csv")
    assert set(table["tier"]) == {"disk", "shm"} and "workload" not in table


def test_cfd_plots_every_workload_of_its_family_and_goes_without_published_rows(tmp_path):
    _, summary = cfd_study(("cfd_proxy", "openfoam")).tables()
    out = tmp_path / "cfd"
    made = cfd.make(summary, str(out), workloads=["cfd_proxy", "openfoam"], document="001")
    entries = assert_figures(out, made, CFD_FIGURES)
    assert "No published rows of document 001" in str(entries)
    bandwidth = pd.read_csv(out / "cfd_bandwidth.csv")
    assert set(bandwidth["series"]) == {
        f"{w}, {t}" for w in ("cfd_proxy", "openfoam") for t in ("disk", "shm")
    }
    assert set(pd.read_csv(out / "cfd_single_vs_ensemble.csv")["workload"]) == {
        "cfd_proxy",
        "openfoam",
    }


def test_cfd_time_per_step_of_simplefoam_at_one_write_interval_shows_its_points(
    tmp_path, monkeypatch
):
    """A study timing simpleFoam at one write interval (the prediction study): each tier is
    one point, which a line alone does not draw, and the caption is simpleFoam's."""
    study = Study()
    params = {"ranks": 1, "steps": 30, "cells_per_rank": 10000, "ensemble": 1,
              "write_interval": "1", "file_handler": "uncollated", "write_format": "binary",
              "purge_write": 0, "warmup_steps": 2}  # fmt: skip
    for tier, seconds in (("local", 0.04), ("shared", 0.25)):
        study.point("openfoam", "simplefoam", tier, "tmpfs", "single", params,
                    {"time_per_step": ("s", seconds)})  # fmt: skip
        # the same under strace: its times mean nothing, and are not drawn
        traced = {"time_per_step": ("s", 10 * seconds), "syscalls_open": ("calls", 9)}
        study.point("openfoam", "simplefoam_traced", tier, "tmpfs", "single", params, traced)
    drawn = {}
    save = cfd.plotting.save
    monkeypatch.setattr(
        cfd.plotting, "save", lambda fig, *args: drawn.update({args[1]: fig}) or save(fig, *args)
    )
    _, summary = study.tables()
    cfd.make(summary, str(tmp_path), workloads=["cfd_proxy", "openfoam"])
    caption = manifest(tmp_path)["cfd_time_per_step"]["caption"]
    assert caption.startswith("Time per step of OpenFOAM's simpleFoam"), caption
    assert "cfd_proxy" not in caption and "no I/O" not in caption and "Ensemble" not in caption
    (ax,) = drawn["cfd_time_per_step"].axes
    lines = ax.get_lines()  # seaborn adds empty ones for its legend
    points = [line for line in lines if line.get_marker() == "o" and len(line.get_xdata())]
    assert [len(line.get_xdata()) for line in points] == [1, 1]  # one per tier
    assert sorted(y for line in points for y in line.get_ydata()) == pytest.approx([0.04, 0.25])
    assert caption.endswith("Left out, counted under strace (their times mean nothing): "
                            "simplefoam_traced.")  # fmt: skip


#: document 001's headline table, as its study file declares it and its verdict carries it
PUBLISHED_FIGURE = verdicts.load_paper(REFERENCE.parent / "studies" / "cfd_dcpmm.yaml")[
    "published_figure"
]


def verdict(with_interval: bool) -> dict:
    ours = {"ours": 2.6, "low": 2.2, "high": 3.1} if with_interval else {"ours": 2.6}
    return {
        "document": "001",
        "published_figure": PUBLISHED_FIGURE,
        "verdicts": [
            {
                "lesson": "a",
                "status": "reproduced",
                "text": "",
                "comparisons": [{"label": "slow / fast", "published": 1.6, "unit": "x", **ours}],
            },
            {
                "lesson": "b",
                "status": "within_noise",
                "text": "",
                "comparisons": [{"label": "x100", "published": 1.0, "ours": 1.02, "unit": "x"}],
            },
            {"lesson": "c", "status": "inconclusive", "text": "", "comparisons": []},
        ],
    }


def test_paper(tmp_path):
    path = tmp_path / "verdict.json"
    path.write_text(json.dumps(verdict(with_interval=True)))
    out = tmp_path / "paper"
    entries = assert_figures(
        out, paper.make(path, str(out), reference_csvs=REFERENCE), {"paper_comparison"}
    )
    caption = entries["paper_comparison"]["caption"]
    assert "Verdicts: reproduced, within noise, inconclusive." in caption
    assert "No published rows" not in caption


def test_paper_without_the_published_rows_says_so(tmp_path):
    out = tmp_path / "paper"
    # and a comparison without low/high: its point only
    entries = assert_figures(out, paper.make(verdict(False), str(out)), {"paper_comparison"})
    assert "No published rows of document 001 were given" in entries["paper_comparison"]["caption"]


def test_paper_status_colours_are_distinct():
    assert len(set(paper.STATUS_COLOR.values())) == len(paper.STATUS_COLOR) == 4
    assert "within_noise" in paper.STATUS_COLOR


def test_a_missing_reference_path_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such reference CSV or folder: .*gone"):
        paper.make(verdict(False), str(tmp_path / "paper"), reference_csvs=[tmp_path / "gone"])


def test_fe_plots_the_optimisation_not_the_fidelity_experiments_of_a_workload():
    """calculix on 2 cores only beside its fidelity experiments on 1 core (with and without
    field output: two points per tier) and their traced run (one repetition): the
    optimisation is the experiment with one point per tier and core count."""
    rows = []
    for experiment, points, n in (
        ("real_optimisation", [("cores=2", 2)], 3),
        ("fidelity_calculix", [("frd_every=1", 1), ("frd_every=0", 1)], 3),
        ("fidelity_calculix_traced", [("x", 1)], 1),
    ):
        for tier in ("shm", "disk"):
            for point, cores in points:
                rows.append(
                    {"workload": "calculix", "experiment": experiment, "tier": tier,
                     "point": point, "cores": cores, "n": n}
                )  # fmt: skip
    chosen = fe.optimisation_experiments(pd.DataFrame(rows))
    assert set(chosen["experiment"]) == {"real_optimisation"}
