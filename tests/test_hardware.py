"""Every hardware file validates and resolves into tiers, with no code change."""

from pathlib import Path

import pytest
from conftest import REPO
from tierbench import matrix
from tierbench.errors import ConfigError

FILES = sorted((REPO / "config/hardware").glob("*.yaml"))


def test_there_are_files_for_the_documents():
    names = {path.stem for path in FILES}
    assert {
        "workstation_2018",
        "nextgenio",
        "eagle_sata",
        "eagle_ssd",
        "macbook_2012",
        "laptop_lpddr5",
        "workstation",
    } <= names


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_hardware_file_validates_and_resolves(path: Path, monkeypatch):
    monkeypatch.setenv("USER", "someone")
    monkeypatch.setenv("HOME", "/home/someone")
    hardware = matrix.load_hardware(path.stem, REPO / "config/hardware")
    assert hardware["name"] == path.stem
    config = {"tiers": {}, "hardware": path.stem}
    tiers = matrix.resolve_tiers(config, REPO / "config/hardware", "/work")
    assert set(tiers) == set(hardware["tiers"]) | {"void"}
    assert all(Path(spec["path"]).is_absolute() for spec in tiers.values())


def test_a_bad_hardware_file_names_the_key(tmp_path):
    (tmp_path / "broken.yaml").write_text(
        "name: broken\ncores: many\nmemory: 1GiB\ntiers: {a: {path: /x, class: floppy}}\n"
    )
    with pytest.raises(matrix.ConfigError) as error:
        matrix.load_hardware("broken", tmp_path)
    assert "cores" in str(error.value) and "floppy" in str(error.value)


def test_a_site_openfoam_reaches_every_job_spec_of_the_machine(tmp_path):
    (tmp_path / "site.yaml").write_text(
        "name: site\ncores: 4\nmemory: 8GiB\nopenfoam: {module: openfoam/2312}\n"
        "tiers:\n  scratch: {path: /tmp, class: disk}\n"
    )
    tiers = matrix.resolve_tiers({"tiers": {}, "hardware": "site"}, tmp_path, str(tmp_path))
    point = matrix.Point("s", "e", "openfoam", "scratch", "p", {})
    assert matrix.run_spec(point, tiers["scratch"], 1)["openfoam"] == {"module": "openfoam/2312"}
    (tmp_path / "bad.yaml").write_text(
        "name: bad\ncores: 4\nmemory: 8GiB\nopenfoam: {modul: x}\n"
        "tiers:\n  scratch: {path: /tmp, class: disk}\n"
    )
    with pytest.raises(ConfigError, match="openfoam"):
        matrix.load_hardware("bad", tmp_path)


def test_a_site_environment_is_expanded_for_the_run_and_its_jobs(monkeypatch, tmp_path):
    monkeypatch.setenv("SITE", "/opt/site")
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    hardware = {
        "env": {"SLURM_CONF": "$SITE/slurm.conf", "OMPI_MCA_btl": "self,tcp"},
        "path": ["~/bin", "/opt/site/bin"],
    }
    variables, folders = matrix.site_environment(hardware)
    assert variables == {"SLURM_CONF": "/opt/site/slurm.conf", "OMPI_MCA_btl": "self,tcp"}
    assert folders == [str(Path("~/bin").expanduser()), "/opt/site/bin"]
    assert matrix.site_environment({}) == ({}, [])
    with pytest.raises(ConfigError, match="env.X: \\$NOT_SET_ANYWHERE/a names an unset variable"):
        matrix.site_environment({"env": {"X": "$NOT_SET_ANYWHERE/a"}})
    (tmp_path / "bad.yaml").write_text(
        "name: bad\ncores: 1\nmemory: 1GiB\nenv: {1X: a}\ntiers: {t: {path: /tmp, class: disk}}\n"
    )
    with pytest.raises(ConfigError, match="env"):
        matrix.load_hardware("bad", tmp_path)
