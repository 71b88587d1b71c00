"""openfoam with a case of the user's: dictionaries in other styles, bad input, real
tutorials (steady and transient), and the example study end to end."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import sys
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import REPO, job_spec
from tierbench import fidelity, matrix, needs, preflight
from tierbench.answer import answers
from tierbench.errors import ConfigError
from tierbench.runner import run_job
from tierbench.workloads import registry
from tierbench.workloads.cfd import foamcase, openfoam, openfoam_plan, openfoam_usercase

TUTORIALS = Path(openfoam.TUTORIALS)
CAVITY = TUTORIALS / "incompressible/icoFoam/cavity/cavity"
PIMPLE_PITZ = TUTORIALS / "incompressible/pimpleFoam/RAS/pitzDaily"
#: a shipped mesh, gzipped, whose owner has no note (relative to the tutorials)
AIRFOIL = "incompressible/simpleFoam/airFoil2D"
#: a case whose Allrun prepares it with blockMesh then setFields before interFoam
DAM_BREAK = TUTORIALS / "multiphase/interFoam/laminar/damBreak/damBreak"
#: a case whose Allrun.pre (blockMesh, topoSet, createBaffles, restore0Dir) prepares it
ACMI = TUTORIALS / "incompressible/pimpleFoam/RAS/oscillatingInletACMI2D"
EXAMPLE = "config/studies/examples/openfoam_case.yaml"
#: the tutorials as shipped: airFoil2D's compressed mesh, damBreak with its prepare
SHIPPED = "config/studies/examples/openfoam_tutorials.yaml"
HEADER = "FoamFile { version 2.0; format ascii; class dictionary; object %s; }\n"

#: a controlDict as someone else writes one: an #include, macros, #calc, a block comment
#: and a function object that both name writeInterval, an entry over two lines, a regex key
STYLED_CONTROL = (
    HEADER % "controlDict"
    + """
#include "../constant/runParameters"   // purgeWrite comes from here
tEnd    0.4;
dt      0.002;

application icoFoam;   // the solver
startFrom startTime; startTime 0;
stopAt    endTime;
endTime   $tEnd;
deltaT    #calc "$dt*0.5";
/* an old setting
writeInterval 99;
*/
writeControl
    timeStep;
writeInterval 20 ;
writeFormat ascii;
"(probe|sample).*" { };
functions
{
    probes { type probes; writeControl timeStep; writeInterval 5; fields (p); }
}
"""
)


def styled_case(root: Path) -> Path:
    case = root / "styled"
    (case / "system").mkdir(parents=True)
    (case / "constant").mkdir()
    (case / "system/controlDict").write_text(STYLED_CONTROL)
    (case / "constant/runParameters").write_text("purgeWrite 3;\n")
    return case


def changed_lines(before: str, after: str) -> tuple[set, set]:
    old, new = set(before.splitlines()), set(after.splitlines())
    return old - new, {line.strip() for line in new - old if line.strip()}


# ------------------------------------------------------------------ dictionaries


def test_a_controlDict_in_another_style_is_read_as_openfoam_reads_it(tmp_path):
    control = foamcase.read_control(styled_case(tmp_path))
    assert control.application == "icoFoam"
    assert control.end_time == Decimal("0.4")  # $tEnd, a macro of the same dictionary
    assert control.delta_t is None  # #calc: only OpenFOAM knows it before the run
    # neither the commented-out 99 nor the function object's 5
    assert control.write_control == "timeStep" and control.write_interval == 20


def test_editing_changes_only_the_entries_it_sets(tmp_path):
    case = styled_case(tmp_path)
    before = (case / foamcase.CONTROL).read_text()
    foamcase.edit_control(case, {"endTime": 0.01, "writeInterval": 2, "adjustTimeStep": False})
    after = (case / foamcase.CONTROL).read_text()
    removed, added = changed_lines(before, after)
    assert removed == {"endTime   $tEnd;", "writeInterval 20 ;"}
    assert added == {"endTime 0.01;", "writeInterval 2;", "adjustTimeStep no;"}
    for kept in ('#include "../constant/runParameters"', "writeInterval 99;", "writeInterval 5"):
        assert kept in after
    control = foamcase.read_control(case)
    assert control.end_time == Decimal("0.01") and control.write_interval == 2


def test_a_gzipped_dictionary_is_read_and_unpacked_to_be_edited(tmp_path):
    case = styled_case(tmp_path)
    plain = case / foamcase.CONTROL
    with gzip.open(f"{plain}.gz", "wt") as packed:
        packed.write(plain.read_text())
    plain.unlink()
    assert foamcase.case_problem(case) is None
    assert foamcase.read_control(case).application == "icoFoam"
    foamcase.edit_control(case, {"endTime": 1})
    assert plain.is_file() and not Path(f"{plain}.gz").exists()
    assert foamcase.read_control(case).end_time == 1


def decompose_dict(case: Path, body: str) -> Path:
    (case / "system").mkdir(parents=True, exist_ok=True)
    path = case / foamcase.DECOMPOSE
    path.write_text(HEADER % "decomposeParDict" + body)
    return path


@pytest.mark.parametrize(
    "body, ranks, method, n",
    [
        # a hierarchical n for 8 ranks, cut for 2: (2 1 1); the comment and spacing stay
        ("numberOfSubdomains 8;\nmethod  hierarchical; // 8 nodes\ncoeffs { n (4 2 1); }\n",
         2, "hierarchical", [2, 1, 1]),
        # an n that already fits is the case's own
        ("numberOfSubdomains 4;\nmethod simple;\nsimpleCoeffs\n{\n  n (2 2 1);\n}\n",
         4, "simple", [2, 2, 1]),
        # a graph method keeps its own settings; it has no n
        ("numberOfSubdomains 16;\nmethod scotch;\n", 2, "scotch", None),
    ],
)  # fmt: skip
def test_decomposition_keeps_the_cases_method_for_ranks(tmp_path, body, ranks, method, n):
    path = decompose_dict(tmp_path, body)
    assert foamcase.decompose_for(tmp_path, ranks) == method
    d = foamcase.open_dictionary(path)
    assert d["numberOfSubdomains"] == ranks and d["method"] == method
    coeffs = "coeffs" if "coeffs" in d else f"{method}Coeffs"
    assert (d[coeffs]["n"] if coeffs in d else None) == n
    if "// 8 nodes" in body:
        assert "// 8 nodes" in path.read_text()


def test_decomposition_falls_back_to_simple_or_writes_its_own(tmp_path):
    path = decompose_dict(tmp_path, "numberOfSubdomains 16;\nmethod scotch;\n")
    assert foamcase.decompose_for(tmp_path, 3, "simple") == "simple"
    d = foamcase.open_dictionary(path)
    assert d["method"] == "simple" and d["simpleCoeffs"]["n"] == [3, 1, 1]
    bare = tmp_path / "bare"
    (bare / "system").mkdir(parents=True)
    assert foamcase.decompose_for(bare, 2) == "simple"
    assert foamcase.open_dictionary(bare / foamcase.DECOMPOSE)["simpleCoeffs"]["n"] == [2, 1, 1]


def test_cells_are_counted_from_blocks_with_macros_or_not_at_all(tmp_path):
    (tmp_path / "system").mkdir()
    block = tmp_path / foamcase.BLOCK_MESH
    blocks = "blocks ( hex (0 1 2 3 4 5 6 7) fluid ($nx 10 1) simpleGrading (1 1 1) );\n"
    block.write_text(HEADER % "blockMeshDict" + "nx 20;\n" + blocks)
    assert foamcase.cells(tmp_path) == 200
    block.write_text(HEADER % "blockMeshDict" + 'nx #calc "4*5";\n' + blocks)
    assert foamcase.cells(tmp_path) is None
    block.write_text(HEADER % "blockMeshDict" + "nx #eval{ 4*5 };\n" + blocks)
    assert foamcase.cells(tmp_path) is None  # foamlib cannot parse it; blockMesh can


def owner_file(path: Path, labels: list[int], binary: bool = False, note: str = "") -> Path:
    """An owner file as OpenFOAM writes one: ascii or binary (32-bit labels), a note or not."""
    fmt = "binary" if binary else "ascii"
    header = (
        f'FoamFile {{ version 2.0; format {fmt}; class labelList; arch "LSB;label=32;scalar=64";'
        f'{note} location "constant/polyMesh"; object owner; }}\n// * * * //\n\n'
    ).encode()
    if binary:
        body = f"{len(labels)}\n(".encode() + np.array(labels, dtype="<i4").tobytes() + b")\n"
    else:
        body = f"{len(labels)}\n(\n{chr(10).join(map(str, labels))}\n)\n".encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(header + body))
    else:
        path.write_bytes(header + body)
    return path


@pytest.mark.parametrize("name", ["owner", "owner.gz"])
@pytest.mark.parametrize("binary", [False, True])
@pytest.mark.parametrize("note", ["", ' note "nPoints:8 nCells:2 nFaces:6 nInternalFaces:1";'])
def test_cells_are_counted_from_the_mesh_whatever_its_header_says(tmp_path, name, binary, note):
    """One more than the largest owner label: a note's nCells (2, here wrong) is not trusted."""
    owner = owner_file(tmp_path / foamcase.POLY_MESH / name, [0, 0, 1, 4, 2, 3], binary, note)
    assert foamcase.cells(tmp_path) == 5
    assert foamcase.mesh_cells(owner) == 5


def test_a_uniform_empty_or_headerless_owner_is_read_or_refused(tmp_path):
    owner = tmp_path / "owner"
    owner.write_text("FoamFile { format ascii; class labelList; object owner; }\n3{7}\n")
    assert foamcase.mesh_cells(owner) == 8
    owner.write_text("FoamFile { format ascii; class labelList; object owner; }\n0()\n")
    assert foamcase.mesh_cells(owner) is None
    owner.write_text("3\n(0 1 2)\n")
    with pytest.raises(foamcase.CaseError, match="has no FoamFile header"):
        foamcase.mesh_cells(owner)


def test_a_shipped_compressed_mesh_without_note_gives_its_cells(tutorials_folder):
    """airFoil2D as Debian ships it: owner.gz, 43,066 faces, no note; checkMesh says 10720."""
    case = tutorials_folder / AIRFOIL
    assert foamcase.existing(case, f"{foamcase.POLY_MESH}/owner").suffix == ".gz"
    assert foamcase.cells(case) == 10720
    plan = openfoam_usercase.case_plan(point(case, steps=5, write_interval=2))
    assert plan.cells == 10720 and plan.application == "simpleFoam"


# ------------------------------------------------------------------ bad input


def point(case, **given) -> dict:
    return matrix.complete("openfoam", {"case": str(case), "ranks": 1, **given})


def check(params: dict) -> None:
    matrix.check_point("openfoam", {k: v for k, v in params.items() if v is not None}, "s.e[p]")


def test_with_a_case_the_settings_a_study_leaves_out_are_the_cases_own():
    p = point("/somewhere", steps=10)
    assert p["steps"] == 10
    assert {p[k] for k in ("write_interval", "file_handler", "write_format", "purge_write")} == {
        "case"
    }
    assert matrix.complete("openfoam", {})["write_interval"] == 1  # the duct's, as before
    with pytest.raises(ValueError, match="'case' keeps a case's own setting, and no case"):
        openfoam_plan.check_params(matrix.complete("openfoam", {"steps": "case"}))


def test_a_folder_without_controlDict_stops_the_study_in_one_line(tmp_path):
    (tmp_path / "constant").mkdir()
    with pytest.raises(ConfigError) as error:
        check({"case": str(tmp_path), "ranks": 1})
    message = str(error.value)
    assert "\n" not in message and message.startswith("s.e[p]: case ")
    assert "has no system/controlDict: give the case's top folder" in message
    with pytest.raises(ConfigError, match="is not a folder"):
        check({"case": str(tmp_path / "missing"), "ranks": 1})


def test_prepare_is_a_command_or_a_list_of_them_and_only_for_a_case(tmp_path):
    case = styled_case(tmp_path)
    assert openfoam_usercase.preparation(None, case) == (("blockMesh", ("blockMesh",)),)
    assert openfoam_usercase.preparation("./Allrun.pre", case) == (
        ("prepare", ("bash", "-c", "./Allrun.pre")),
    )
    listed = openfoam_usercase.preparation(["blockMesh", "topoSet", "topoSet -dict system/b"], case)
    assert [name for name, _ in listed] == ["blockMesh", "topoSet", "topoSet.3"]
    assert listed[2][1] == ("topoSet", "-dict", "system/b")
    study = {"case": str(case), "prepare": ["blockMesh", "setFields"], "steps": [4, 8]}
    points = matrix.expand_params(study, registry()["openfoam"].list_params)
    assert [p["prepare"] for _, p in points] == [["blockMesh", "setFields"]] * 2  # no axis
    with pytest.raises(ConfigError, match="prepare: the generated duct prepares itself"):
        check({"prepare": "blockMesh", "ranks": 1})


def test_a_case_without_mesh_runs_when_its_preparation_makes_one(tmp_path):
    """No mesh and no blockMeshDict: refused without prepare, planned with it (its cells are
    then read from the prepared mesh)."""
    case = styled_case(tmp_path)
    foamcase.edit_control(case, {"deltaT": 0.001})
    with pytest.raises(ValueError, match="no system/blockMeshDict: name what meshes it in prepare"):
        openfoam_plan.check_params(point(case, steps=10))
    params = point(case, steps=10, prepare="snappyHexMesh -overwrite")
    openfoam_plan.check_params(params)
    plan = openfoam_usercase.case_plan(params)
    assert plan.cells is None and openfoam_plan.runtime_s(params) == openfoam_plan.SOLVER_TIMEOUT_S


@pytest.mark.parametrize(
    "edit, message",
    [
        ({"blockMeshDict": None}, "has no mesh (constant/polyMesh) and no system/blockMeshDict"),
        ({"writeControl": "clockTime"}, "writes by writeControl clockTime"),
        ({"adjustTimeStep": True}, "adjusts its time step"),
        ({"application": None}, "names no application"),
    ],
)
def test_a_case_that_cannot_run_or_be_planned_says_why(tmp_path, edit, message):
    case = tmp_path / "cavity"
    shutil.copytree(CAVITY if CAVITY.is_dir() else styled_case(tmp_path), case)
    (case / "system/blockMeshDict").touch()
    if "blockMeshDict" in edit:
        (case / "system/blockMeshDict").unlink()
    entries = {k: v for k, v in edit.items() if k != "blockMeshDict" and v is not None}
    foamcase.edit_control(case, entries)
    if edit.get("application", "") is None:
        text = (case / foamcase.CONTROL).read_text()
        (case / foamcase.CONTROL).write_text(text.replace("application", "// application"))
    with pytest.raises(ValueError, match=re.escape(message)):
        openfoam_plan.check_params(point(case))


def test_a_case_larger_than_max_bytes_is_caught_by_the_preflight(tmp_path):
    case = styled_case(tmp_path)
    foamcase.edit_control(case, {"deltaT": 0.001})
    blocks = "blocks ( hex (0 1 2 3 4 5 6 7) (10 10 1) simpleGrading (1 1 1) );"
    (case / "system/blockMeshDict").write_text(HEADER % "blockMeshDict" + blocks)
    big = case / "constant/boundaryData.bin"
    big.write_bytes(b"\0" * 3_000_000)
    params = point(case, steps=10, write_interval=5, ensemble=2)
    planned = openfoam_plan.planned_bytes(params)
    assert planned >= 2 * 3_000_000  # every member's copy of the case
    tier = tmp_path / "tier"
    spec = {
        "points": [{"workload": "openfoam", "tier": "small", "params": params}],
        "tiers": {"small": {"path": str(tier), "class": "disk", "max_bytes": 5_000_000}},
        "safety_factor": 1.0,
        "study": "s",
    }
    report = preflight.run_preflight(spec)
    assert any("write more than max_bytes=" in w for w in report["warnings"]), report
    record = run_job(job_spec("openfoam", tier, params, max_bytes=5_000_000), openfoam.run)
    (failed,) = record["metrics"]
    assert failed["status"] == "failed" and "more than the tier's max_bytes" in failed["reason"]


def test_a_case_is_never_compared_with_the_proxy_of_the_duct():
    (pair,) = [pair for pair in fidelity.pairs() if pair.real == "openfoam"]
    assert "case" in pair.own_input


def test_set_up_installs_the_tutorials_for_a_study_that_names_one():
    study = matrix.load_yaml(REPO / EXAMPLE)
    assert needs.tools_of(study["experiments"])[
        str(TUTORIALS / "incompressible/simpleFoam/pitzDaily")
    ] == ("openfoam-examples")
    duct = [{"workload": "openfoam", "params": {"ranks": 2}}]
    assert "openfoam-examples" not in needs.tools_of(duct).values()


# ------------------------------------------------------------------ real tutorials


@pytest.fixture(scope="module")
def tutorials():
    """The solvers and Debian's tutorial cases, or a skip outside CI (a failure in CI)."""
    missing = [tool for tool in ("icoFoam", "pimpleFoam", "mpiexec") if not shutil.which(tool)]
    missing += [] if CAVITY.is_dir() else ["openfoam-examples"]
    if missing:
        how = "apt-get install -y --no-install-recommends openfoam openfoam-examples openmpi-bin"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{', '.join(missing)} missing; in CI they must be installed: {how}")
        pytest.skip(f"{', '.join(missing)} not installed ({how})")


@pytest.fixture(scope="module")
def tutorials_folder() -> Path:
    """Debian's tutorial cases (only their files: no solver runs), or a skip with the reason
    outside CI (a failure in CI, whose set-up installs them)."""
    if not TUTORIALS.is_dir():
        how = "apt-get install -y --no-install-recommends openfoam-examples"
        if os.environ.get("CI") == "true":
            pytest.fail(f"openfoam-examples missing; in CI it must be installed: {how}")
        pytest.skip(f"openfoam-examples not installed ({how})")
    return TUTORIALS


def new_tier(root: Path) -> Path:
    tier = root / "tier"
    tier.mkdir()
    return tier


def values(record: dict) -> dict:
    for m in record["metrics"]:
        assert m["status"] == "ok", m["reason"]
    return {m["metric"]: m["value"] for m in record["metrics"]}


def test_a_transient_case_in_another_style_runs_with_its_own_settings(tutorials, tmp_path):
    """icoFoam's cavity with its controlDict rewritten in another style: 100 time steps of
    0.005 s as the case says, writing every 20th, its time names 0.005, 0.01, ..."""
    case = tmp_path / "cavity"
    shutil.copytree(CAVITY, case)
    (case / "constant/runParameters").write_text("writeCompression off;\n")
    text = (case / foamcase.CONTROL).read_text()
    text = text.replace(
        "endTime         0.5;", '#include "../constant/runParameters"\ntEnd 0.5;\nendTime $tEnd;'
    )
    text = text.replace("writeInterval   20;", "writeInterval\n    20;  // every 0.1 s")
    (case / foamcase.CONTROL).write_text(text)
    record = run_job(job_spec("openfoam", new_tier(tmp_path), point(case)), openfoam.run)
    found = values(record)
    (member,) = record["extra"]["members"]
    assert member["time_steps"] == 100 and member["writes"] == 5
    assert member["tree"]["kept_times"] == ["0.1", "0.2", "0.3", "0.4", "0.5"]
    assert found["files_per_write"] == 6 and found["dirs_per_write"] == 3  # U p phi uniform/*
    assert found["time_per_step"] > 0 and found["case_copy_time"] > 0
    assert record["extra"]["case"]["controlDict_set"] == {}
    assert "-parallel" not in record["extra"]["commands"][0]


def test_an_adjusted_time_step_writes_where_openfoams_time_says(tutorials, tmp_path):
    """pimpleFoam (adjustTimeStep yes, writeControl adjustable) on 2 ranks: its own time
    steps, the writes worked out from the log's times, every one found on disk."""
    case = tmp_path / "pitz"
    shutil.copytree(PIMPLE_PITZ, case)
    foamcase.edit_control(
        case, {"endTime": 0.002, "writeInterval": 0.001, "startFrom": "startTime"}
    )
    params = point(case, ranks=2, purge_write=0)
    record = run_job(job_spec("openfoam", new_tier(tmp_path), params), openfoam.run)
    found = values(record)
    (member,) = record["extra"]["members"]
    assert member["steps"]["measured_steps"] == member["time_steps"] - 2  # warmup_steps 2
    assert member["writes"] == 2 and member["tree"]["kept_times"] == ["0.001", "0.002"]
    assert found["time_per_step_write"] > 0 and found["time_per_step_nowrite"] > 0
    assert record["extra"]["decomposition"] == {"method": "simple"}


def test_a_solver_that_fails_half_way_is_a_failed_point_with_its_last_lines(tutorials, tmp_path):
    """The cavity at 40 times its time step diverges and stops on a floating point
    exception after some 25 steps."""
    case = tmp_path / "cavity"
    shutil.copytree(CAVITY, case)
    params = point(case, steps=50, write_interval="none")
    foamcase.edit_control(case, {"deltaT": 0.2})
    record = run_job(job_spec("openfoam", new_tier(tmp_path), params), openfoam.run)
    (failed,) = record["metrics"]
    assert failed["status"] == "failed"
    reason = failed["reason"]
    assert reason.startswith("member 0: icoFoam: the solver stopped on a floating point")
    assert "\n" not in reason and "#0" not in reason
    assert reason.split("its last lines: ")[1].count(" | ") == 2
    # the solver's progress, not its stack: a Courant line, or the time step when the solver's
    # stdout and its stack on stderr arrive interleaved ("#0  ...printStack(...)Courant ...")
    assert "Courant Number" in reason or "Time = " in reason


def test_a_shipped_compressed_mesh_runs_as_it_is(tutorials, tmp_path):
    """airFoil2D with its gzipped mesh, on 2 ranks (decomposePar reads it as shipped)."""
    params = point(TUTORIALS / AIRFOIL, ranks=2, steps=6, write_interval=3)
    record = run_job(job_spec("openfoam", new_tier(tmp_path), params), openfoam.run)
    found = values(record)
    assert record["extra"]["case"]["cells"] == record["extra"]["case"]["cells_prepared"] == 10720
    assert record["extra"]["case"]["prepare"] == []  # meshed already: nothing to run
    assert found["files_per_write"] > 0 and "decompose_time" in found
    assert "blockmesh_time" not in found and "prepare_time" not in found


def test_cells_only_blockMesh_can_count_are_read_from_the_mesh_it_made(tutorials, tmp_path):
    """The cavity's blocks sized by a macro of an #included file: unknown when planned, read
    from the mesh once blockMesh made it (30 x 20)."""
    case = tmp_path / "cavity"
    shutil.copytree(CAVITY, case)
    (case / "system/meshSize").write_text("nx 30;\n")
    block = case / foamcase.BLOCK_MESH
    text = block.read_text().replace("(20 20 1)", "($nx 20 1)")
    block.write_text(text.replace("\nscale", '\n#include "meshSize"\nscale', 1))
    params = point(case, steps=10, write_interval=5)
    assert openfoam_usercase.case_plan(params).cells is None
    record = run_job(job_spec("openfoam", new_tier(tmp_path), params), openfoam.run)
    assert "blockmesh_time" in values(record)
    assert record["extra"]["case"]["cells_prepared"] == 600


def test_prepare_runs_the_cases_utilities_before_the_solver(tutorials, tmp_path):
    """damBreak as its Allrun prepares it: blockMesh then setFields, each logged; their time
    is prepare_time, apart from the solver's steps."""
    params = point(DAM_BREAK, steps=10, write_interval=5, prepare=["blockMesh", "setFields"])
    record = run_job(job_spec("openfoam", new_tier(tmp_path), params), openfoam.run)
    found = values(record)
    (times,) = record["extra"]["preprocessing_s"]
    assert list(times["prepare_steps"]) == ["blockMesh", "setFields"]
    assert found["prepare_time"] == pytest.approx(sum(times["prepare_steps"].values()))
    assert record["extra"]["case"]["cells_prepared"] == 2268
    assert record["extra"]["members"][0]["time_steps"] == 10 and found["time_per_step"] > 0


def test_a_tutorials_own_allrun_pre_prepares_it_and_the_case_is_then_decomposed(
    tutorials, tmp_path
):
    """oscillatingInletACMI2D's Allrun.pre as shipped (blockMesh, topoSet, createBaffles,
    restore0Dir from the RunFunctions Debian lacks: tierbench's stand-in), then decomposePar
    for 2 ranks."""
    params = point(ACMI, ranks=2, steps=4, write_interval=2, prepare="./Allrun.pre")
    record = run_job(job_spec("openfoam", new_tier(tmp_path), params), openfoam.run)
    found = values(record)
    assert found["prepare_time"] > 0 and "decompose_time" in found
    assert record["extra"]["case"]["prepare"] == ["bash -c ./Allrun.pre"]
    assert record["extra"]["case"]["cells_prepared"] == 10880


def test_the_run_functions_stand_in_only_where_the_installation_has_none(tmp_path):
    project = tmp_path / "openfoam"
    (project / "etc").mkdir(parents=True)
    env = openfoam.run_functions_env({"WM_PROJECT_DIR": str(project)}, tmp_path / "view")
    view = Path(env["WM_PROJECT_DIR"])
    assert view == tmp_path / "view" and (view / "etc").resolve() == project / "etc"
    assert (view / openfoam_plan.RUN_FUNCTIONS).read_text() == openfoam_plan.STAND_IN.read_text()
    (project / openfoam_plan.RUN_FUNCTIONS).parent.mkdir(parents=True)
    (project / openfoam_plan.RUN_FUNCTIONS).write_text("# the installation's own\n")
    assert openfoam.run_functions_env({"WM_PROJECT_DIR": str(project)}, tmp_path / "v2") == {
        "WM_PROJECT_DIR": str(project)
    }


def test_a_failing_step_of_a_script_stops_it_with_that_steps_error(tutorials, tmp_path):
    """runApplication of the stand-in stops the script where a step fails (OpenFOAM's goes
    on): the point fails with that step's error, not the next one's."""
    case = tmp_path / "damBreak"
    shutil.copytree(DAM_BREAK, case)
    script = case / "Allrun.pre"
    script.write_text(
        '#!/bin/sh\ncd "${0%/*}" || exit\n. ${WM_PROJECT_DIR:?}/bin/tools/RunFunctions\n'
        "runApplication blockMesh\nrunApplication setFields -dict system/none\n"
        "runApplication topoSet\n"
    )
    script.chmod(0o755)
    params = point(case, steps=10, prepare="./Allrun.pre")
    record = run_job(job_spec("openfoam", new_tier(tmp_path), params), openfoam.run)
    (failed,) = record["metrics"]
    assert failed["reason"].startswith("prepare exited with 1: FOAM FATAL ERROR: cannot find")
    assert "system/none" in failed["reason"] and "topoSet" not in failed["reason"]


def test_a_preparation_that_fails_is_a_failed_point_with_its_last_lines(tutorials, tmp_path):
    params = point(DAM_BREAK, steps=10, prepare=["blockMesh", "setFields -dict system/none"])
    record = run_job(job_spec("openfoam", new_tier(tmp_path), params), openfoam.run)
    (failed,) = record["metrics"]
    assert failed["status"] == "failed" and "\n" not in failed["reason"]
    assert failed["reason"].startswith("setFields exited with 1: FOAM FATAL ERROR: cannot find")
    assert failed["reason"].endswith(
        "its last lines: Create time | Create mesh for time = 0 | Reading setFieldsDict"
    )


# ------------------------------------------------------------------ the example study


@pytest.mark.e2e
def test_example_study_ranks_the_tiers_for_a_tutorial_case(tutorials, pipeline):
    # two repetitions without a warm-up: the least an interval is drawn from
    config = ("scale=smoke", "repetitions=2", "warmup=False")
    pipeline("-c2", "--configfile", EXAMPLE, "--config", *config)
    study = pipeline.root / "results/testbox/example_openfoam_case"
    summary = pd.read_csv(study / "summary.csv")
    steps = summary[summary["metric"] == "time_per_step"]
    assert set(steps["tier"]) == {"shm", "disk"} and set(steps["status"]) == {"ok"}
    assert (steps["case"].str.endswith("simpleFoam/pitzDaily")).all()
    results = pd.read_csv(study / "results.csv")
    (answer,) = answers(results, registry())
    assert answer.experiment == "pitzdaily" and answer.metric == "time_per_step"
    assert {t.tier for t in answer.tiers} == {"shm", "disk"}
    assert all(t.low <= t.speedup <= t.high for t in answer.tiers)
    written = summary[summary["metric"] == "files_created"]
    assert (written["median"] > 0).all()
    report = (pipeline.root / "results/testbox/report.html").read_text()
    assert 'class="answers"' in report and "pitzDaily tutorial" in report
    # the case is no document-001 duct: it gets the figure of its headline per tier
    manifest = json.loads((study / "figures/cfd/manifest.json").read_text())
    assert [entry["name"] for entry in manifest] == ["openfoam_per_tier"]


@pytest.mark.e2e
def test_tutorials_as_shipped_rank_the_tiers_for_each(tutorials, pipeline):
    """airFoil2D with its gzipped mesh (nothing unpacked by hand) and damBreak prepared by
    blockMesh and setFields: every point ok on shm and disk, the tiers ranked for each."""
    config = ("scale=smoke", "repetitions=2", "warmup=False")
    pipeline("-c2", "--configfile", SHIPPED, "--config", *config)
    study = pipeline.root / "results/testbox/example_openfoam_tutorials"
    summary = pd.read_csv(study / "summary.csv")
    assert set(summary["status"]) == {"ok"}
    steps = summary[summary["metric"] == "time_per_step"]
    assert sorted(zip(steps["experiment"], steps["tier"], strict=True)) == [
        ("airfoil2d", "disk"), ("airfoil2d", "shm"), ("dambreak", "disk"), ("dambreak", "shm")
    ]  # fmt: skip
    prepared = summary[summary["metric"] == "prepare_time"]
    assert set(prepared["experiment"]) == {"dambreak"} and (prepared["median"] > 0).all()
    results = pd.read_csv(study / "results.csv")
    ranked = {a.experiment: a for a in answers(results, registry())}
    assert set(ranked) == {"airfoil2d", "dambreak"}
    for answer in ranked.values():
        assert answer.metric == "time_per_step"
        assert {t.tier for t in answer.tiers} == {"shm", "disk"}
        assert all(t.low <= t.speedup <= t.high for t in answer.tiers)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
