"""Config expansion: axes, scales, tiers, repetitions, and the errors that name the key."""

import copy

import pytest
import yaml
from conftest import REPO
from tierbench import matrix, workloads
from tierbench.errors import ConfigError

CONFIG = yaml.safe_load((REPO / "config/config.yaml").read_text())


def tiers(config=CONFIG, tmp_path="/tmp"):
    return matrix.resolve_tiers(config, REPO / "config/hardware", str(tmp_path))


def test_default_config_validates():
    matrix.validate(CONFIG, "config.schema.yaml", "config.yaml")


def test_axes_expand_to_every_combination():
    study = matrix.study_of(CONFIG)
    points = matrix.expand_study(study, tiers(), "default")
    sequential = [p for p in points if p.experiment == "sequential"]
    # rw x block_size x io_mode = 2 x 4 x 2, on shm and disk (void is not a file tier)
    assert len(sequential) == 2 * 4 * 2 * 2
    assert {p.tier for p in sequential} == {"shm", "disk"}
    names = {p.name for p in sequential}
    assert "block_size=4k+io_mode=direct+rw=write" in names
    one = next(p for p in sequential if p.name == "block_size=10M+io_mode=buffered+rw=read")
    assert one.params["block_size"] == "10M" and one.params["size"] == "256MiB"


def test_scale_overrides_values_and_axes():
    study = matrix.study_of(CONFIG)
    smoke = matrix.expand_study(study, tiers(), "smoke")
    block_sizes = {p.params["block_size"] for p in smoke if p.experiment == "sequential"}
    assert block_sizes == {"64k", "1M"}
    full = matrix.expand_study(study, tiers(), "full")
    worst = next(p for p in full if p.experiment == "worst_case")
    assert worst.params["size"] == "500MiB" and worst.params["runtime"] == 60


def test_single_point_name():
    assert matrix.point_name({}) == "single"
    assert matrix.point_name({"b": "1/2", "a": 3}) == "a=3+b=1_2"


def test_repetitions_warmup_first():
    assert matrix.repetitions({"repetitions": 3, "warmup": True}) == [0, 1, 2, 3]
    assert matrix.repetitions({"repetitions": 2, "warmup": False}) == [1, 2]


def test_relative_tier_paths_resolve_against_workdir(tmp_path):
    resolved = tiers(tmp_path=tmp_path)
    assert resolved["disk"]["path"] == str(tmp_path / "results/scratch")
    assert resolved["shm"]["max_bytes"] == 2 * 1024**3
    assert resolved["void"]["path"] == "/dev/null"


def test_unknown_tier_is_named():
    study = copy.deepcopy(matrix.study_of(CONFIG))
    study["experiments"][0]["tiers"] = ["shm", "nvme0"]
    with pytest.raises(ConfigError, match="nvme0"):
        matrix.expand_study(study, tiers(), "default")


def test_block_larger_than_file_is_named():
    study = copy.deepcopy(matrix.study_of(CONFIG))
    study["experiments"][1]["params"]["size"] = "1M"
    with pytest.raises(ConfigError, match=r"block_size 10M is larger than the file size 1M"):
        matrix.expand_study(study, tiers(), "default")


def test_bad_param_value_names_key():
    study = copy.deepcopy(matrix.study_of(CONFIG))
    study["experiments"][0]["params"]["io_mode"] = "mmap"
    with pytest.raises(ConfigError, match=r"worst_case.*io_mode"):
        matrix.expand_study(study, tiers(), "default")


def test_two_tiers_one_path_rejected():
    config = copy.deepcopy(CONFIG)
    config["tiers"]["again"] = {"path": "/dev/shm", "class": "tmpfs"}
    with pytest.raises(ConfigError, match="again"):
        tiers(config)


def test_hardware_file_replaces_tiers(tmp_path):
    config = copy.deepcopy(CONFIG)
    config["hardware"] = "workstation"
    resolved = tiers(config, tmp_path)
    hardware = yaml.safe_load((REPO / "config/hardware/workstation.yaml").read_text())
    assert set(resolved) == set(hardware["tiers"]) | {"void"}


def test_unknown_hardware_lists_known():
    config = copy.deepcopy(CONFIG)
    config["hardware"] = "no_such_machine"
    with pytest.raises(ConfigError, match="workstation"):
        tiers(config)


def test_run_spec_has_phase():
    point = matrix.expand_study(matrix.study_of(CONFIG), tiers(), "smoke")[0]
    spec = matrix.run_spec(point, tiers()[point.tier], 0)
    assert spec["phase"] == "warmup" and spec["tier_path"] and spec["params"]["rw"] == "randrw"
    assert matrix.run_spec(point, tiers()[point.tier], 2)["phase"] == "measured"


def test_all_inside_a_list_adds_every_file_tier():
    experiment = {"name": "pipe", "tiers": ["void", "all"]}
    assert matrix.experiment_tiers(experiment, tiers()) == ["void", "shm", "disk"]


def test_tier_paths_expand_variables(tmp_path, monkeypatch):
    monkeypatch.setenv("SCRATCH", str(tmp_path))
    config = copy.deepcopy(CONFIG)
    config["tiers"] = {"scratch": {"path": "$SCRATCH/tb", "class": "lustre"}}
    assert tiers(config)["scratch"]["path"] == str(tmp_path / "tb")
    config["tiers"] = {"scratch": {"path": "$NO_SUCH_VARIABLE_XYZ/tb", "class": "lustre"}}
    with pytest.raises(ConfigError, match="NO_SUCH_VARIABLE_XYZ"):
        tiers(config)


def test_tier_path_that_is_a_file_is_named(tmp_path):
    afile = tmp_path / "notes.txt"
    afile.write_text("x")
    config = copy.deepcopy(CONFIG)
    config["tiers"] = {"oops": {"path": str(afile), "class": "disk"}}
    with pytest.raises(ConfigError, match=r"tiers.oops.path: .* is a file"):
        tiers(config)


def test_empty_tier_list_and_zero_sizes_are_rejected():
    config = copy.deepcopy(CONFIG)
    config["experiments"][0]["tiers"] = []
    with pytest.raises(ConfigError, match="experiments.0.tiers"):
        matrix.validate(config, "config.schema.yaml", "config")
    study = copy.deepcopy(matrix.study_of(CONFIG))
    study["experiments"][0]["params"]["size"] = 0
    with pytest.raises(ConfigError, match="size"):
        matrix.expand_study(study, tiers(), "default")
    config = copy.deepcopy(CONFIG)
    config["tiers"]["shm"]["max_bytes"] = "-1G"
    with pytest.raises(ConfigError, match="tiers.shm.max_bytes"):
        matrix.validate(config, "config.schema.yaml", "config")


def test_an_experiment_may_run_its_own_number_of_repetitions():
    study = {
        "repetitions": {"min": 3, "max": 8},
        "warmup": False,
        "experiments": [{"name": "timed"}, {"name": "traced", "repetitions": 1}],
    }
    assert matrix.repetitions(study, "timed") == [1, 2, 3]
    assert matrix.repetitions(study, "traced") == [1]
    assert matrix.fixed_repetitions(study) == {"traced"}


def test_a_study_file_with_a_document_joins_the_paper_in_document_order(tmp_path):
    """No list of papers in code: a new document's study file is part of `paper`."""
    # the repository's: every study file with a document, in the documents' order
    documents = {}
    for path in (REPO / "config/studies").glob("*.yaml"):
        documents[path.stem] = matrix.load_yaml(path).get("document")
    assert matrix.PAPER_STUDIES == matrix.paper_studies()
    assert set(matrix.PAPER_STUDIES) == {study for study, document in documents.items() if document}
    in_order = [documents[study] for study in matrix.PAPER_STUDIES]
    assert in_order == sorted(in_order)
    for name, document in (("zz_late", "009"), ("aa_early", "000b"), ("mine", None)):
        text = f"study: {name}\nexperiments: []\n"
        text += f'document: "{document}"\n' if document else ""
        (tmp_path / f"{name}.yaml").write_text(text)
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "x.yaml").write_text('study: x\ndocument: "001"\n')
    assert matrix.paper_studies(tmp_path) == ("aa_early", "zz_late")


def points_of(study_name: str, scale: str = "default") -> list[matrix.Point]:
    study = matrix.load_study(REPO / f"config/studies/{study_name}.yaml", CONFIG)
    tiers = matrix.resolve_tiers(CONFIG, REPO / "config/hardware", "/tmp")
    return matrix.expand_study(study, tiers, scale)


def test_each_proxy_point_of_the_sweep_runs_after_the_application_of_its_shape():
    points = points_of("proxy_fidelity")
    partners = matrix.fidelity_partners(points)
    proxies = [p for p in points if p.workload in ("cfd_proxy", "fe_proxy")]
    assert {p.key for p in proxies} == set(partners)
    for proxy in proxies:
        real = partners[proxy.key]
        pair = workloads.get(proxy.workload).stands_for
        assert real.workload == pair.real
        assert (real.study, real.tier, real.name) == (proxy.study, proxy.tier, proxy.name)
        shape = [matrix.complete(w.workload, w.params) for w in (proxy, real)]
        assert all(str(shape[0].get(k)) == str(shape[1].get(k)) for k in pair.shape), proxy.key


def test_a_proxy_point_with_two_applications_of_its_shape_has_no_partner():
    points = points_of("proxy_fidelity")
    (centre,) = [p for p in points if p.experiment == "cfd_centre_openfoam"
                 and p.tier == "shm" and p.name == "write_interval=10"]  # fmt: skip
    twin = matrix.Point(centre.study, "twin", centre.workload, centre.tier, centre.name,
                        dict(centre.params))  # fmt: skip
    partners = matrix.fidelity_partners([*points, twin])
    lonely = [k for k in matrix.fidelity_partners(points) if k not in partners]
    assert [(k[2], k[3], k[4]) for k in lonely] == [
        ("cfd_centre_proxy", "shm", "write_interval=10")
    ]
    # other tiers and shapes keep theirs; workloads without a pair have none
    assert all(p.workload != "fio" for p in partners.values())
