"""Preflight: every problem with tiers and tools is listed before any benchmark runs."""

import os

import pytest
from tierbench import preflight

POINT = {"workload": "fio", "params": {"size": "1MiB"}}


def spec(tiers, points=None, safety=1.2):
    points = points or [{**POINT, "tier": name} for name in tiers]
    return {"study": "t", "tiers": tiers, "points": points, "safety_factor": safety}


def test_ok_tier_and_missing_folder_is_created(tmp_path):
    target = tmp_path / "scratch" / "deeper"
    result = preflight.run_preflight(spec({"disk": {"path": str(target), "class": "disk"}}))
    assert result["ok"], result["problems"]
    assert target.is_dir()
    assert result["largest_point_bytes"]["disk"] == 1024 * 1024


def test_path_that_is_a_file(tmp_path):
    afile = tmp_path / "a-file"
    afile.write_text("x")
    result = preflight.run_preflight(spec({"disk": {"path": str(afile), "class": "disk"}}))
    assert not result["ok"]
    assert any("tier disk" in p and "not a directory" in p for p in result["problems"])


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_read_only_folder(tmp_path):
    tmp_path.chmod(0o500)
    try:
        result = preflight.run_preflight(spec({"ro": {"path": str(tmp_path), "class": "disk"}}))
    finally:
        tmp_path.chmod(0o700)
    assert any("cannot write" in p for p in result["problems"])


def test_too_little_space_names_tier_and_sizes(tmp_path):
    huge = {"workload": "fio", "tier": "disk", "params": {"size": "1000TiB"}}
    result = preflight.run_preflight(
        spec({"disk": {"path": str(tmp_path), "class": "disk"}}, points=[huge])
    )
    assert not result["ok"]
    (problem,) = result["problems"]
    assert "tier disk" in problem and "1000 TiB" in problem and "free" in problem


def test_some_points_too_big_is_a_warning_and_the_rest_run(tmp_path):
    points = [
        {"workload": "fio", "tier": "disk", "params": {"size": "1MiB"}},
        {"workload": "fio", "tier": "disk", "params": {"size": "1000TiB"}},
    ]
    result = preflight.run_preflight(
        spec({"disk": {"path": str(tmp_path), "class": "disk"}}, points=points)
    )
    assert result["ok"]
    assert any(
        "1 points write more than" in w and "recorded as failed" in w for w in result["warnings"]
    )


def test_class_mismatch_is_a_warning(tmp_path):
    result = preflight.run_preflight(spec({"fast": {"path": str(tmp_path), "class": "tmpfs"}}))
    if result["ok"] and "tmpfs" not in str(result["warnings"]):
        pytest.skip("tmp_path is itself on tmpfs here")
    assert any("class tmpfs expects tmpfs" in w for w in result["warnings"])


def test_cap_smaller_than_a_point_is_a_warning(tmp_path):
    tiers = {"disk": {"path": str(tmp_path), "class": "disk", "max_bytes": 1024}}
    result = preflight.run_preflight(spec(tiers))
    assert result["ok"] and any("max_bytes" in w for w in result["warnings"])


def test_missing_tool_gives_the_install_command(monkeypatch, tmp_path):
    monkeypatch.setattr(preflight.shutil, "which", lambda tool: None)
    result = preflight.run_preflight(spec({"disk": {"path": str(tmp_path), "class": "disk"}}))
    assert any(
        "fio is not installed" in p and "apt-get install -y fio" in p for p in result["problems"]
    )


def test_main_exits_nonzero_with_one_line_per_problem(tmp_path, capsys):
    afile = tmp_path / "f"
    afile.write_text("")
    import json

    code = preflight.main(
        [
            "--spec",
            json.dumps(
                spec(
                    {
                        "a": {"path": str(afile), "class": "disk"},
                        "b": {"path": "/proc/nope/x", "class": "disk"},
                    }
                )
            ),
            "--out",
            str(tmp_path / "out.json"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 1 and "tier a" in err and "tier b" in err
    assert not (tmp_path / "out.json").exists()


def test_an_application_the_hardware_file_loads_is_not_looked_for_on_path(tmp_path, monkeypatch):
    monkeypatch.setattr(preflight.shutil, "which", lambda tool: None)
    tier = {"path": str(tmp_path), "class": "disk", "openfoam": {"module": "openfoam/2312"}}
    plan = {
        "study": "s",
        "tiers": {"disk": tier},
        "points": [{"workload": "openfoam", "tier": "disk", "params": {}}],
        "safety_factor": 1.2,
    }
    monkeypatch.setattr(preflight, "planned_bytes", lambda workload, params: 0)
    result = preflight.run_preflight(plan)
    assert not [p for p in result["problems"] if "simpleFoam" in p]
    assert any("openfoam comes from {'module': 'openfoam/2312'}" in w for w in result["warnings"])
    del tier["openfoam"]
    result = preflight.run_preflight(plan)
    assert any("simpleFoam is not installed" in p and "openfoam" in p for p in result["problems"])
