"""calculix with the user's deck: its includes read as ccx reads them, bad input stopped before
any job, a failing ccx a failed point with its last lines, and the example study end to end."""

import gzip
import json
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from conftest import IN_CI, REPO, job_spec
from test_fidelity import fe_rows
from tierbench import answer, fidelity, matrix, needs, preflight
from tierbench.errors import ConfigError
from tierbench.runner import run_job
from tierbench.workloads import registry
from tierbench.workloads.fe import calculix, calculix_deck

EXAMPLE = REPO / "config/studies/examples/calculix_deck.yaml"
TEST_DECKS = Path(calculix_deck.TEST_DECKS)

MESH = """*NODE, NSET=NALL
1, 0, 0, 0
2, 1, 0, 0
3, 1, 1, 0
4, 0, 1, 0
5, 0, 0, 1
6, 1, 0, 1
7, 1, 1, 1
8, 0, 1, 1
*ELEMENT, TYPE=C3D8, ELSET=EALL
1, 1, 2, 3, 4, 5, 6, 7, 8
*NSET, NSET=FIX
1, 4, 5, 8
*NSET, NSET=LOAD
2, 3, 6, 7
"""
MODEL = """*MATERIAL, NAME=STEEL
*ELASTIC
210000, 0.3
*DENSITY
7.85E-9
*SOLID SECTION, ELSET=EALL, MATERIAL=STEEL
*BOUNDARY
FIX, 1, 3
"""
#: a nonlinear static step in 2 increments, then a nonlinear dynamic one, which ccx only
#: runs when the first step asked for the energy (ELSE)
STEPS = """*STEP, NLGEOM
*STATIC
0.5, 1.
*CLOAD
LOAD, 1, 100.
*NODE FILE
U
{energy}*END STEP
*STEP, NLGEOM
*DYNAMIC, DIRECT
1.E-5, 3.E-5
*CLOAD, OP=NEW
*END STEP
"""
ENERGY = "*EL PRINT, ELSET=EALL, TOTALS=ONLY\nELSE\n"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def one_element(folder: Path, include: str = "*INCLUDE, INPUT=mesh/cube.inp", energy=True) -> Path:
    """A one-element deck that includes its mesh: it finishes in two steps, or (without the
    energy output) fails in its second."""
    write(folder / "mesh/cube.inp", MESH)
    steps = STEPS.format(energy=ENERGY if energy else "")
    return write(folder / "cube.inp", f"{include}\n{MODEL}{steps}")


def deck_point(deck, **params) -> dict:
    return matrix.check_point("calculix", {"deck": str(deck), "cores": 1, **params}, "s.e[p]")


@pytest.fixture
def test_decks(ccx) -> Path:
    """CalculiX's own test decks (Debian's calculix-ccx-test), or a skip saying how to
    install them; under CI=true, which installs them, a failure."""
    if not TEST_DECKS.is_dir():
        reason = "calculix-ccx-test is not installed: apt-get install -y calculix-ccx-test"
        if IN_CI:
            pytest.fail(f"CI=true: the test decks must be there, but {reason}")
        pytest.skip(reason)
    return TEST_DECKS


def test_a_deck_is_all_a_first_run_needs(tmp_path):
    params = matrix.check_point("calculix", {"deck": str(one_element(tmp_path))}, "s.e[p]")
    assert params["cores"] == 1 and params["solver_log"] == "file"


@pytest.mark.parametrize("name", ["simplebeam.inp", "beamlin.inp", "beampo1.inp.gz"])
def test_a_deck_calculix_ships_runs_given_only_the_deck(test_decks, tmp_path, name):
    params = matrix.check_point("calculix", {"deck": str(test_decks / name)}, "s.e[p]")
    record = run_job(job_spec("calculix", tmp_path, params), calculix.run)
    found = {m["metric"]: m for m in record["metrics"]}
    assert {m["status"] for m in found.values()} == {"ok"}, record["metrics"]
    assert found["wall_time"]["value"] > 0 and found["increments"]["value"] >= 1
    assert record["extra"]["solver_env"]["OMP_NUM_THREADS"] == "1"


def test_a_gzipped_deck_is_read_and_copied_unpacked(tmp_path):
    """A deck as Debian ships CalculiX's larger tests (name.inp.gz): ccx reads name.inp."""
    plain = one_element(tmp_path / "case")
    packed = plain.with_name("cube.inp.gz")
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    text = plain.read_bytes()
    plain.unlink()
    found = calculix_deck.inputs(packed)
    assert found.job_name == "cube" and found.deck_bytes == len(text)
    assert found.size() == len(text) + (tmp_path / "case/mesh/cube.inp").stat().st_size
    staged = calculix_deck.stage(found, tmp_path / "copy")
    assert set(staged.files) == {"cube.inp", "mesh/cube.inp"}
    assert (tmp_path / "copy/cube.inp").read_bytes() == text
    with pytest.raises(calculix_deck.DeckError, match=r"does not end in \.inp \(or \.inp\.gz\)"):
        calculix_deck.inputs(write(tmp_path / "deck.txt", "*HEADING\n"))


def test_set_up_installs_the_test_decks_for_a_study_and_for_the_tests():
    deck = f"{calculix_deck.TEST_DECKS}/simplebeam.inp"
    study = [{"workload": "calculix", "params": {"deck": deck}}]
    assert needs.tools_of(study)[deck] == "calculix-ccx-test"
    assert "calculix-ccx-test" not in needs.tools_of([{"workload": "calculix"}]).values()


# ------------------------------------------------------------------ reading *INCLUDE as ccx does


def test_include_lines_read_as_ccx_reads_them(tmp_path):
    """Any case, blanks and tabs anywhere, quotes; comments and the heading's text skipped;
    the file name keeps its case; a nested relative name is opened from the deck's folder."""
    for name in ("Mesh/Nodes.inp", "mesh/elems.inp", "sets.inp", "quoted.inp", "nested.inp"):
        write(tmp_path / name, "** part\n")
    write(tmp_path / "mesh/parts.inp", "*INCLUDE,INPUT=nested.inp\n")  # from the deck's folder
    deck = write(
        tmp_path / "model.inp",
        "*HEADING\na title naming *INCLUDE,INPUT=title.inp\n  *INCLUDE,INPUT=heading.inp\n"
        "** *INCLUDE, INPUT=commented.inp\n"
        "*include, input = Mesh/Nodes.inp\r\n"
        "\t*InClUdE ,\tINPUT=mesh/ elems.inp\n"
        '*INCLUDE,INPUT="quoted.inp"\n'
        "*INCLUDE,INPUT=mesh/parts.inp\n"
        "*INCLUDE, INPUT=sets.inp\n*INCLUDE, INPUT=./sets.inp\n",  # the same file: copied once
    )
    found = calculix_deck.inputs(deck)
    assert [f.relative_to(tmp_path).as_posix() for f in found.files] == [
        "model.inp", "Mesh/Nodes.inp", "mesh/elems.inp", "quoted.inp", "mesh/parts.inp",
        "nested.inp", "sets.inp",
    ]  # fmt: skip
    assert found.in_place == [] and len(found.digest) == 64
    assert found.layout()[deck] == "model.inp" and found.workdir() == "."


def test_ccx_case_keeps_a_file_names_case_up_to_the_next_comma():
    assert calculix_deck.ccx_case(b"*include,input=Sub/M.inp,x") == b"*INCLUDE,INPUT=Sub/M.inp,X"
    assert calculix_deck.include_name(b"*INCLUDE,INPUT=a.inp,X") == b"a.inp,X"  # as ccx opens it


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("*INCLUDE,\nINPUT=mesh/cube.inp", "has no INPUT=<file> on its line"),  # no continuation
        ('*INCLUDE,INPUT="mesh/cube.inp', "has no closing quote"),
        ("*INCLUDE,INPUT=", "names no file"),
        ("*INCLUDE,INPUT=" + "a" * 133, "ccx reads at most 132"),
        ("*INCLUDE,INPUT=mesh/cube.inp,", "names mesh/cube.inp,, which does not exist"),
        ('*INCLUDE,INPUT="my mesh.inp"', "names mymesh.inp, which does not exist"),
    ],
)
def test_an_include_ccx_cannot_read_is_one_line_naming_file_and_line(tmp_path, line, says):
    write(tmp_path / "my mesh.inp", MESH)
    deck = one_element(tmp_path, include=line)
    with pytest.raises(ConfigError) as error:
        deck_point(deck)
    message = str(error.value)
    assert message.startswith(f"s.e[p]: deck {deck}: *INCLUDE on line 1 ")
    assert says in message and "\n" not in message


def test_includes_nested_more_than_ccx_allows(tmp_path):
    deck = write(tmp_path / "loop.inp", "*INCLUDE, INPUT=loop.inp\n")
    with pytest.raises(calculix_deck.DeckError, match="nests includes 10 deep; ccx reads at most"):
        calculix_deck.inputs(deck)


def test_a_missing_deck_or_include_stops_the_study_before_any_job(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as error:
        deck_point("decks/none.inp")
    assert str(error.value) == (
        f"s.e[p]: deck {tmp_path}/decks/none.inp does not exist; a relative path is taken "
        f"from {tmp_path}, the folder Snakemake runs in"
    )
    one_element(tmp_path, include="*INCLUDE, INPUT=mesh/gone.inp")
    with pytest.raises(ConfigError) as error:
        deck_point("cube.inp")  # relative to the folder Snakemake runs in
    assert str(error.value) == (
        f"s.e[p]: deck {tmp_path}/cube.inp: *INCLUDE on line 1 names mesh/gone.inp, which does "
        "not exist (ccx opens it from the deck's folder)"
    )
    write(tmp_path / "mesh/parts.inp", "** the sets\n*INCLUDE, INPUT=mesh/sets.inp\n")
    one_element(tmp_path, include="*INCLUDE, INPUT=mesh/parts.inp")
    with pytest.raises(ConfigError, match=r"line 2 of \S+/mesh/parts.inp names mesh/sets.inp"):
        deck_point("cube.inp")
    write(tmp_path / "deck.txt", "*HEADING\n")
    with pytest.raises(
        ConfigError, match=r"does not end in .inp \(or .inp.gz\): ccx reads <jobname>.inp"
    ):
        deck_point("deck.txt")


def test_set_up_installs_ccx_for_the_example_study():
    experiments = needs.study_experiments(["--configfile", str(EXAMPLE)])
    assert needs.tools_of(experiments) == {"ccx": "calculix-ccx"}


def test_output_bytes_belongs_to_a_deck():
    with pytest.raises(ConfigError, match="give it with deck only"):
        matrix.check_point("calculix", {"cores": 1, "output_bytes": "1MiB"}, "s.e[p]")


# ------------------------------------------------------------------ space on the tier


def test_planned_bytes_count_the_copy_and_the_output(tmp_path):
    deck = one_element(tmp_path)
    copy = deck.stat().st_size + (tmp_path / "mesh/cube.inp").stat().st_size
    factor = calculix_deck.OUTPUT_FACTOR
    assert calculix.planned_bytes(deck_point(deck)) == copy * (1 + factor)
    assert calculix.planned_bytes(deck_point(deck, output_bytes="1MiB")) == copy + 1024**2
    assert calculix.planned_bytes({"deck": str(tmp_path / "gone.inp")}) == 0


def test_the_preflight_counts_a_deck_against_free_space_and_max_bytes(tmp_path):
    deck = one_element(tmp_path / "case")
    point = {"workload": "calculix", "tier": "disk", "params": deck_point(deck)}
    big = {**point, "params": deck_point(deck, output_bytes="1000TiB")}
    tier = {"path": str(tmp_path / "tier"), "class": "disk", "max_bytes": 1024**2}
    spec = {"study": "s", "tiers": {"disk": tier}, "safety_factor": 1.2}
    result = preflight.run_preflight({**spec, "points": [point, big]})
    assert result["largest_point_bytes"]["disk"] > 1000 * 1024**4
    assert any("1 points write more than max_bytes=1 MiB" in w for w in result["warnings"])
    alone = preflight.run_preflight({**spec, "points": [big]})
    assert not alone["ok"] and "1000 TiB" in alone["problems"][0]


def test_a_deck_over_max_bytes_fails_before_writing_and_says_how_to_plan(ccx, tmp_path):
    deck = one_element(tmp_path / "case")
    tier = tmp_path / "tier"
    tier.mkdir()
    spec = job_spec("calculix", tier, {"deck": str(deck), "cores": 1}, max_bytes=1000)
    (failed,) = run_job(spec, calculix.run)["metrics"]
    assert failed["status"] == "failed"
    assert "more than the tier's max_bytes (1000 B): the deck and includes" in failed["reason"]
    assert failed["reason"].endswith("; set output_bytes to what this deck writes")
    assert list(tier.iterdir()) == []


# ------------------------------------------------------------------ ccx's own account

# the .sta of a bar whose increments were cut back (ccx 2.20): U marks an attempt that failed
STA = """SUMMARY OF JOB INFORMATION
  STEP      INC     ATT  ITRS     TOT TIME     STEP TIME      INC TIME
     1          1     1     4  0.333333E+00  0.333333E+00  0.333333E+00
     1          2     1U    4  0.333333E+00  0.333333E+00  0.333333E+00
     1          2     2     2  0.416667E+00  0.416667E+00  0.833333E-01
     1          3     1     2  0.500000E+00  0.500000E+00  0.833333E-01
     2          1     1U    5  0.500000E+00  0.500000E+00  0.125000E+00
     2          1     2     2  0.500488E+00  0.500488E+00  0.488281E-03
"""


def test_progress_from_the_sta_and_the_standard_output():
    log = b" STEP            1\n\n increment 1\n STEP            2\n STEP            3\n"
    log += b"\n Job finished\n\nTotal CalculiX Time: 0.259520\n"
    done = calculix_deck.progress(log, STA)
    assert (done.steps, done.increments, done.cutbacks, done.iterations) == (3, 4, 2, 19)
    assert done.last_step == 3 and done.reported_time == pytest.approx(0.25952)


def test_a_run_without_job_finished_failed_even_with_exit_status_0():
    """ccx 2.20 exits with 0 when it cannot open an include."""
    solved = calculix_deck.Solved(0, b" *ERROR in readinput: cannot open file x.inp\n", 0.1, 0, 0)
    reason = calculix_deck.failure(solved, calculix_deck.Progress())
    assert reason == (
        "ccx did not finish the deck (exit status 0 without 'Job finished', before its first "
        "step); its last lines: *ERROR in readinput: cannot open file x.inp"
    )
    finished = calculix_deck.Solved(0, b" *ERROR in e_c3d: nonpositive jacobian\n Job finished\n",
                                    0.1, 0, 0)  # fmt: skip
    assert calculix_deck.failure(finished, calculix_deck.Progress()) is None


# ------------------------------------------------------------------ the real solver


@pytest.mark.parametrize(
    "line",
    ["*include, input = mesh/cube.inp", "\t*INCLUDE ,\tINPUT=mesh/ cube.inp",
     '*INCLUDE,INPUT="mesh/cube.inp"',
     "*HEADING\n  *INCLUDE,INPUT=gone.inp\n*INCLUDE,INPUT=mesh/cube.inp",
     '*INCLUDE,INPUT="my mesh.inp"', "*INCLUDE,INPUT=mesh/cube.inp,",
     "*INCLUDE,\nINPUT=mesh/cube.inp"],
    ids=["lower", "blanks", "quoted", "heading", "quoted_blank", "comma", "continued"],
)  # fmt: skip
def test_ccx_reads_an_include_exactly_where_the_reading_says(ccx, tmp_path, line):
    """ccx itself judges the rules written down in calculix_deck: it finishes the deck where
    the reading finds every include, and nowhere else; and in the copy too."""
    deck = one_element(tmp_path / "case", include=line)
    write(tmp_path / "case/my mesh.inp", MESH)  # ccx removes the blank: it opens mymesh.inp
    try:
        calculix_deck.inputs(deck)
        readable = True
    except calculix_deck.DeckError:
        readable = False
    done = subprocess.run(["ccx", "-i", "cube"], cwd=deck.parent, capture_output=True, check=False)
    assert (done.returncode == 0 and b"Job finished" in done.stdout) == readable, done.stdout
    if readable:
        tier = tmp_path / "tier"
        tier.mkdir()
        spec = job_spec("calculix", tier, {"deck": str(deck), "cores": 1})
        assert run_job(spec, calculix.run)["metrics"][0]["status"] == "ok"


def test_a_deck_runs_in_a_copy_that_keeps_its_includes_layout(ccx, tmp_path, monkeypatch):
    """Includes in a subfolder and above the deck's folder are found in the copy; what ccx
    wrote is counted apart from the copied inputs, and the run folder goes afterwards."""
    write(tmp_path / "shared/materials.inp", MODEL)
    write(tmp_path / "case/mesh/cube.inp", MESH)
    deck = write(
        tmp_path / "case/cube.inp",
        "*INCLUDE, INPUT=mesh/cube.inp\n*INCLUDE, INPUT=../shared/materials.inp\n"
        + STEPS.format(energy=ENERGY),
    )
    found = calculix_deck.inputs(deck)
    assert sorted(found.layout().values()) == [
        "case/cube.inp", "case/mesh/cube.inp", "shared/materials.inp"
    ]  # fmt: skip
    tier = tmp_path / "tier"
    tier.mkdir()
    monkeypatch.chdir(tmp_path)  # a relative deck is taken from the folder Snakemake runs in
    spec = job_spec("calculix", tier, {"deck": "case/cube.inp", "cores": 1})
    record = run_job(spec, calculix.run)
    metrics = {m["metric"]: m for m in record["metrics"]}
    assert metrics["wall_time"]["status"] == "ok", metrics
    assert metrics["steps"]["value"] == 2 and metrics["increments"]["value"] == 2 + 3
    assert metrics["stage_files"]["value"] == 3
    assert metrics["stage_bytes"]["value"] == sum(f.stat().st_size for f in found.files)
    extra = record["extra"]
    assert set(extra["deck_inputs"]) == {"case/cube.inp", "case/mesh/cube.inp",
                                         "shared/materials.inp"}  # fmt: skip
    written = extra["written_files"]
    assert {"case/cube.frd", "case/cube.dat", "case/cube.sta", "case/cube.log"} <= set(written)
    assert not set(written) & set(extra["deck_inputs"])
    assert metrics["files_created"]["value"] == len(written)
    assert metrics["bytes_written"]["value"] == sum(written.values())
    assert metrics["dirs_created"]["value"] == 0
    assert 0 < metrics["cpu_time"]["value"] and metrics["wall_time"]["value"] > 0
    assert extra["solver_env"]["OMP_NUM_THREADS"] == "1"
    assert list(tier.iterdir()) == []


def test_a_deck_that_fails_half_way_is_a_failed_point_ending_with_ccx_last_lines(ccx, tmp_path):
    deck = one_element(tmp_path / "case", energy=False)
    tier = tmp_path / "tier"
    tier.mkdir()
    record = run_job(job_spec("calculix", tier, {"deck": str(deck), "cores": 1}), calculix.run)
    (failed,) = record["metrics"]
    assert failed["status"] == "failed"
    assert failed["reason"].startswith(
        "ccx did not finish the deck (exit status 201, in step 2, 2 increments done); "
        "its last lines: "
    )
    assert failed["reason"].endswith(
        "*ERROR in CalculiX: in nonlinear calculations | "
        "energy output must be selected in the first step"
    )
    assert "cube.frd" in record["extra"]["written_files"]  # step 1's output, then the stop
    assert list(tier.iterdir()) == []


# ------------------------------------------------------------------ the report's other readers


def test_a_deck_point_is_never_compared_with_the_proxy():
    """fe_proxy's points match calculix's by the GA's shape: a deck point shares it (the
    defaults) but runs another model."""
    frame = pd.DataFrame(
        fe_rows("calculix", "ccx", 6, 0.05, {"frd_every": 0}, increments=10)
        + fe_rows("fe_proxy", "proxy", 10, 0.05, {"frd_every": 0}, increments=10)
    )  # fmt: skip
    assert fidelity.fidelity(frame)["proxies"][0]["compared_points"] == 1
    frame.loc[frame["workload"] == "calculix", "deck"] = "plate.inp"
    (entry,) = fidelity.fidelity(frame)["proxies"]
    assert entry["compared_points"] == 0 and entry["verdict"] == fidelity.NOT_COMPARED


# ------------------------------------------------------------------ the example study


def test_the_example_study_runs_its_deck_on_every_tier():
    config = matrix.load_yaml(REPO / "config/config.yaml")
    study = matrix.load_study(EXAMPLE, config)
    tiers = matrix.resolve_tiers(config, REPO / "config/hardware", str(REPO))
    points = matrix.expand_study(study, tiers, "default")
    assert {p.tier for p in points} == {"shm", "disk"}
    (deck,) = {p.params["deck"] for p in points}
    found = calculix_deck.inputs(REPO / deck)
    assert [f.name for f in found.files] == ["plate.inp", "plate_mesh.inp"]
    assert "C3D20R" in found.files[1].read_text()


@pytest.mark.e2e
def test_example_study_end_to_end_ranks_the_tiers(ccx, pipeline):
    pipeline(
        "-c2", "--configfile", "config/studies/examples/calculix_deck.yaml",
        "--config", "repetitions=2", "warmup=False",
    )  # fmt: skip
    study = pipeline.root / "results/testbox/example_calculix_deck"
    results = pd.read_csv(study / "results.csv")
    wall = results[results["metric"] == "wall_time"]
    assert set(wall["tier"]) == {"shm", "disk"} and (wall["status"] == "ok").all()
    assert set(results[results["metric"] == "increments"]["value"]) == {10}
    (ranked,) = answer.answers(results, registry())
    assert ranked.workload == "calculix" and ranked.metric == "wall_time"
    assert {t.tier for t in ranked.tiers} == {"shm", "disk"}
    slowest = next(t for t in ranked.tiers if t.tier == ranked.slowest)
    assert slowest.speedup == pytest.approx(1.0)
    assert all(t.low <= t.speedup <= t.high for t in ranked.tiers)
    report = (pipeline.root / "results/testbox/report.html").read_text()
    assert ranked.sentence.split(":")[0] in report
    manifest = json.loads((study / "figures/fe/manifest.json").read_text())
    assert [entry["name"] for entry in manifest] == ["calculix_per_tier"]
