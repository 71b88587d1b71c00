"""Lessons as data: a new paper is a study file and a reference CSV, no code; and the
declared lessons give every synthetic study the verdicts recorded for it."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
import test_verdicts as synthetic
from conftest import FIXTURES, MACHINE, REPO
from tierbench import fidelity, matrix, plotting, reference, verdicts
from tierbench.figures import paper as paper_figure
from tierbench.verdicts import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED

# --- a made-up document, added as a paper is: its study file and its reference CSV --------

MADE_UP_STUDY = """\
study: made_up
title: "A made-up document: dd to RAM and to a disk (document 999)"
document: "999"
repetitions: 2
experiments:
  - name: dd_zero
    workload: dd
    description: "dd of a small file to every tier"
    tiers: all
    params: {block_size: 1M, count: 4, sync: buffered}
published_figure: {table: dd, metric: throughput, bars: [tier], title: "dd, published"}
lessons:
  - lesson: dd writes at least twice as fast to RAM as to a disk
    tiers:
      among: {workload: dd, metric: write_bandwidth}
      ram: {role: ram}
      disk: {role: device}
    missing: needs dd on a RAM tier and a device tier
    premise: {kind: device_reached_to_refute}
    claims:
      - label: dd, RAM / disk
        ratio: [{tier: ram}, {tier: disk}]
        # "at least twice as fast", as the document puts it
        band: {greater: 2}
        published: [{table: dd, tier: tmpfs}, {table: dd, tier: SSD}]
        text: "dd {ram}/{disk} = {ours} (published tmpfs/SSD {published}x)"
"""
MADE_UP_REFERENCE = (
    ",".join(reference.COLUMNS)
    + "\n999,made_up,dd,tmpfs,tmpfs,1M,,,,,4M,,throughput,3.0,GB/s,a made-up tmpfs"
    + "\n999,made_up,dd,SSD,ssd,1M,,,,,4M,,throughput,500,MB/s,a made-up SSD\n"
)


def made_up_tables(shm: float, disk: float):
    """(results, summary) of the made-up study: dd on shm and on the disk, which reached it."""
    rows = [
        ("dd", "dd_zero", tier, "write_bandwidth", value, {"block_size": "1M", "sync": "buffered"})
        for tier, value in (("shm", shm), ("disk", disk))
    ]
    return synthetic.study(rows, page_cache={"disk": "device"})


def test_a_paper_is_added_by_its_study_file_and_reference_csv_alone(pipeline, tmp_path):
    """Only the two files docs/development.md names: the pipeline finds the new study,
    plans its runs, verdict, figures and place on the paper page, and hands its lessons and
    its document to the jobs; the verdict reproduces the lesson from one table and refutes
    it from another."""
    (pipeline.root / "config/studies/made_up.yaml").write_text(MADE_UP_STUDY)
    (pipeline.root / "config/reference/999_made_up.csv").write_text(MADE_UP_REFERENCE)
    assert "made_up" in matrix.paper_studies(pipeline.root / "config/studies")
    planned = pipeline("-n", "-p", "paper", "--config", "scale=smoke").stdout
    out = f"results/{MACHINE}/made_up"
    for path in ("verdict.json", "raw/dd/dd_zero/", "figures/paper", "figures/sequential"):
        assert f"{out}/{path}" in planned, path
    # the paper page takes it beside the others; its figures draw document 999's rows
    (studies,) = re.findall(r"tierbench\.report .*--studies ([\w ]+?) --titles", planned)
    assert "made_up" in studies.split()
    figures = [line for line in planned.splitlines() if f"{out}/figures/sequential" in line]
    assert any("-r document 999" in line for line in figures)
    lessons = f"{out}/lessons.json"
    pipeline("-c1", lessons, "--config", "scale=smoke")
    assert json.loads((pipeline.root / lessons).read_text())["document"] == "999"
    found = {}
    for name, (shm, disk) in {"reproduces": (3000, 500), "does not": (600, 500)}.items():
        results, summary = made_up_tables(shm, disk)
        results.to_csv(tmp_path / "results.csv", index=False)
        summary.to_csv(tmp_path / "summary.csv", index=False)
        out = tmp_path / f"{name}.json"
        argv = ["--lessons", str(pipeline.root / lessons), "--out", str(out)]
        argv += ["--summary", str(tmp_path / "summary.csv")]
        argv += ["--results", str(tmp_path / "results.csv")]
        argv += ["--reference", str(pipeline.root / "config/reference")]
        assert verdicts.main(argv) == 0
        found[name] = json.loads(out.read_text())
    for data in found.values():
        assert data["document"] == "999" and len(data["verdicts"]) == 1
    verdict = found["reproduces"]
    (yes,), (no,) = verdict["verdicts"], found["does not"]["verdicts"]
    assert yes["status"] == REPRODUCED and "dd shm/disk = 6.00x [" in yes["text"]
    assert no["status"] == NOT_REPRODUCED and "dd shm/disk = 1.20x [" in no["text"]
    assert yes["band"] == no["band"] == "above 2x"
    assert yes["comparisons"][0]["published"] == pytest.approx(6.0)
    # its figure: the published table beside this run's ratio
    figures = tmp_path / "figures"
    paper_figure.make(verdict, str(figures), reference_csvs=pipeline.root / "config/reference")
    (entry,) = json.loads((figures / plotting.MANIFEST).read_text())
    assert "published dd (throughput)" in entry["caption"]
    assert "No published rows" not in entry["caption"]


def test_a_lesson_on_a_disk_the_page_cache_absorbed_is_inconclusive(tmp_path):
    """The made-up lesson's premise: no difference from a disk the page cache held says
    nothing of the disk."""
    study = tmp_path / "made_up.yaml"
    study.write_text(MADE_UP_STUDY)
    (tmp_path / "999_made_up.csv").write_text(MADE_UP_REFERENCE)
    results, summary = made_up_tables(600, 500)
    summary.loc[summary["tier"] == "disk", "page_cache"] = "may_stay_in_memory"
    (verdict,) = verdicts.judge(
        verdicts.load_paper(study), summary, reference.load(tmp_path), results
    )
    assert verdict.status == INCONCLUSIVE and "never reached" in verdict.text


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"band": {"above": 2}}, "band"),
        ({"ratio": [{"tier": "ram"}]}, "ratio"),
        ({"published": [{"table": "dd"}]}, "published"),
    ],
)
def test_a_misspelt_lesson_is_refused_naming_where(tmp_path, change, message):
    import yaml

    data = yaml.safe_load(MADE_UP_STUDY)
    data["lessons"][0]["claims"][0].update(change)
    study = tmp_path / "made_up.yaml"
    study.write_text(yaml.safe_dump(data))
    with pytest.raises(SystemExit, match=f"lessons/0/claims/0/{message}"):
        verdicts.load_paper(study)
    with pytest.raises(Exception, match="lessons"):
        matrix.load_study(study, matrix.load_yaml(matrix.STUDIES_DIR.parent / "config.yaml"))


# --- the recorded verdicts of synthetic studies ------------------------------------------

#: every key of each verdict as first recorded: status, band, and each ratio, published and
#: ours with its interval (tests/fixtures/lesson_verdicts.json)
RECORDED = json.loads((FIXTURES / "lesson_verdicts.json").read_text())
IN_MEMORY = {"disk": "may_stay_in_memory"}
ON_DEVICE = {"disk": "device"}
S = synthetic


def _cliff_with_synced_limit():
    """A cliff sweep whose fdatasync points read a larger dirty limit than the buffered."""
    rows = []
    for tier, small, drop in (("disk", 2000, 0.1), ("shm", 2000, 0.95)):
        blocks = {"block_size": "1M", "sync": "buffered"}
        rows.append(("dd", "dd_blocks", tier, "write_bandwidth", small, blocks))
        for sync, limit in (("buffered", 4e9), ("fdatasync", 2e10)):
            for fraction, value, size in ((0.1, small, 8e8), (2, small * drop, 8e9)):
                params = {"file_fraction": fraction, "sync": sync, "block_size": "1M"}
                rows.append(("dd", "cliff", tier, "write_bandwidth", value, params))
                rows.append(("dd", "cliff", tier, "bytes", size, params))
                rows.append(("dd", "cliff", tier, "dirty_limit_bytes", limit, params))
    return S.study(rows)


def _cfd_with_openfoam():
    return S.study(S.cfd_with_openfoam_rows())


def _fe_with_calculix():
    return S.study(S.fe_with_calculix_rows())


def _network(fast, network, slower, recorded):
    tiers = {network: (0.10 * slower, 0.05, 0.30), fast: (0.10, 0.05, 0.11)}
    return S.cfd_on(tiers, page_cache={network: recorded})


def _without(frames, tier):
    results, summary = frames
    return results, summary[summary["tier"] != tier]


#: name -> (document, synthetic study): each lesson each way, through each premise and hook
CASES = {
    **{name: (document, build) for name, (document, build, _) in S.CASES.items()},
    "000 text": ("000", lambda: S.fe(600, 3, 10.0, 10.5)),
    "000 less10": ("000", lambda: S.fe(30, 10, 10.0, 10.5)),
    "000 premise wide nr": ("000", lambda: S.fe(100, 10, 10.0, 40, "wide")),
    "000 real": ("000", _fe_with_calculix),
    "001 a": ("001", lambda: S.cfd(0.20, 0.10, 0.065, 0.05, 0.60, 0.11)),
    "001 im": ("001", lambda: S.cfd(0.10, 0.10, 0.05, 0.05, 0.20, 0.11, page_cache=IN_MEMORY)),
    "001 dev": ("001", lambda: S.cfd(0.10, 0.10, 0.05, 0.05, 0.20, 0.11, page_cache=ON_DEVICE)),
    "001 im2": ("001", lambda: S.cfd(0.10, 0.10, 0.05, 0.05, 0.11, 0.20, page_cache=IN_MEMORY)),
    "001 im wide": (
        "001",
        lambda: S.cfd(0.11, 0.10, 0.0525, 0.05, 0.121, 0.10, "wide", page_cache=IN_MEMORY),
    ),
    "001 three": (
        "001",
        lambda: S.cfd_on(
            {
                "disk": (0.10, 0.05, 0.11),
                "glusterfs": (0.16, 0.05, 0.30),
                "shm": (0.10, 0.05, 0.11),
            },
            page_cache={"disk": "may_stay_in_memory", "glusterfs": "may_stay_in_memory"},
        ),  # fmt: skip
    ),
    "001 disk only": (
        "001",
        lambda: S.cfd_on(
            {"disk": (0.16, 0.05, 0.30), "shm": (0.10, 0.05, 0.11)}, page_cache=IN_MEMORY
        ),
    ),
    "001 real": ("001", _cfd_with_openfoam),
    **{
        f"001 net {fast} {network} {slower} {recorded}": (
            "001",
            lambda fast=fast, network=network, slower=slower, recorded=recorded: _network(
                fast, network, slower, recorded
            ),
        )
        for fast in ("shm", "tmpfs")
        for network in ("glusterfs", "lustre")
        for slower in (1.6, 1.0)
        for recorded in ("device", "may_stay_in_memory")
    },
    "002 single": ("002", lambda: S.pv(150, 300, 1500, "single")),
    "002 im": ("002", lambda: S.pv(150, 300, 310, page_cache=IN_MEMORY)),
    "002 dev": ("002", lambda: S.pv(150, 300, 310, page_cache=ON_DEVICE)),
    "002 im repro": ("002", lambda: S.pv(150, 300, 1400, page_cache=IN_MEMORY)),
    "002 im wide": ("002", lambda: S.pv(150, 300, 330, spread="wide", page_cache=IN_MEMORY)),
    "002 no fuse": ("002", lambda: _without(S.pv(150, 300, 1400), "fuse")),
    "003 im": ("003", lambda: S.dd_stream(1500, 2000, 50000, page_cache=IN_MEMORY)),
    "003 im2": ("003", lambda: S.dd_stream(2200, 2000, 50000, "wide", page_cache=IN_MEMORY)),
    "003 im3": ("003", lambda: S.dd_stream(60000, 2000, 50000, page_cache=IN_MEMORY)),
    "003 absorbed both": (
        "003",
        lambda: S.dd_stream(
            1500,
            2000,
            50000,
            page_cache={"disk": "may_stay_in_memory", "shm": "may_stay_in_memory"},
        ),
    ),
    "003 sync1": ("003", lambda: S.dd_synced(5000, 2000, 5000, 500)),
    "003 sync2": ("003", lambda: S.dd_synced(5000, 4800, 5000, 500)),
    "003 sync3": ("003", lambda: S.dd_synced(5000, 2000, 5000, 4900)),
    "003 sync wide": ("003", lambda: S.dd_synced(5000, 2000, 5000, 4900, spread="wide")),
    "004 disk4000": ("004", lambda: S.eagle(4000, 2000, 0.1, 0.95)),
    "004 disk800": ("004", lambda: S.eagle(800, 2000, 0.1, 0.95)),
    "004 below limit": ("004", lambda: S.eagle(2000, 2500, 0.9, 0.95, largest=1e9, limit=4e9)),
    "004 fits device": ("004", lambda: S.eagle(2000, 2000, 0.1, 0.95, page_cache=ON_DEVICE)),
    "004 absorbed": ("004", lambda: S.eagle(2000, 2000, 0.1, 0.95, page_cache=IN_MEMORY)),
    "004 absorbed wide": (
        "004",
        lambda: S.eagle(1600, 2000, 0.5, 1.0, spread="wide", page_cache=IN_MEMORY),
    ),
    "004 synced limit": ("004", _cliff_with_synced_limit),
}


def recorded_form(found: list[verdicts.Verdict]) -> list:
    """[status, band, [[label, published, ours, low, high], ...]] per verdict."""
    return [
        [v.status, v.band, [[c.label, c.published, c.ours, c.low, c.high] for c in v.comparisons]]
        for v in found
    ]


def test_every_case_is_recorded():
    assert set(CASES) == set(RECORDED)


@pytest.mark.parametrize("case", sorted(CASES))
def test_synthetic_studies_keep_their_recorded_verdicts(case):
    document, frames = CASES[case]
    results, summary = frames()
    proxies = fidelity.fidelity(results) if case.endswith("real") else None
    found = verdicts.judge(synthetic.PAPERS[document], summary, results=results, proxies=proxies)
    assert recorded_form(found) == RECORDED[case]


def test_empty_summaries_of_every_paper_are_inconclusive():
    empty = pd.DataFrame(columns=["experiment", "workload", "tier", "tier_class", "metric",
                                  "status", "median"])  # fmt: skip
    for document in synthetic.PAPERS.values():
        found = verdicts.judge(document, empty)
        assert found and {v.status for v in found} == {INCONCLUSIVE}


def test_a_study_takes_its_document_and_lessons_from_its_own_file_only(tmp_path):
    """Run with a paper study's config, another study file keeps its own document, lessons
    and figure, and a study without a document stays no paper study."""
    studies = REPO / "config" / "studies"
    running = {**matrix.load_yaml(REPO / "config/config.yaml")}
    running |= matrix.load_yaml(studies / "cfd_dcpmm.yaml")
    made_up = tmp_path / "made_up.yaml"
    made_up.write_text(MADE_UP_STUDY.replace("published_figure", "# published_figure"))
    study = matrix.load_study(made_up, running)
    assert study["document"] == "999" and "published_figure" not in study
    assert [lesson["lesson"] for lesson in study["lessons"]] == [
        "dd writes at least twice as fast to RAM as to a disk"
    ]
    plain = matrix.load_study(studies / "proxy_fidelity.yaml", running)
    assert not set(plain) & set(matrix.DOCUMENT_KEYS)
