"""The bar's CalculiX deck: one writer, the mesh, the material and the step as ccx reads them."""

import numpy as np
import pytest
from tierbench.workloads.fe import calculix, fe_deck, fe_model, fe_output, fe_proxy

TRUTH = fe_model.Material()


def test_deck_has_the_mesh_the_increments_and_the_parameters():
    model = fe_deck.Model(elements=3, increments=7)
    material = fe_model.Material(E=187_654.0, sigma_y=321.5, Q=77.25)
    lines = fe_deck.deck(model, material, "g01-e002").splitlines()
    elements = lines[lines.index("*ELEMENT, TYPE=C3D8, ELSET=EALL") + 1 :][:3]
    assert [len(line.split(",")) for line in elements] == [9, 9, 9]
    assert lines[lines.index("*ELEMENT, TYPE=C3D8, ELSET=EALL") + 4].startswith("*")
    nodes = lines[
        lines.index("*NODE, NSET=NALL") + 1 : lines.index("*ELEMENT, TYPE=C3D8, ELSET=EALL")
    ]
    assert len(nodes) == 16 == model.nodes
    assert lines[lines.index("*ELASTIC") + 1] == "187654, 0.3"
    table = lines[
        lines.index("*PLASTIC") + 1 : lines.index("*SOLID SECTION, ELSET=EALL, MATERIAL=FIT")
    ]
    assert len(table) == fe_deck.PLASTIC_POINTS and table[0] == "321.5, 0"
    stress, strain = (float(v) for v in table[-1].split(","))
    assert stress == pytest.approx(float(material.yield_stress(strain)), rel=1e-9)
    static = lines[lines.index("*STATIC") + 1].split(",")
    assert float(static[0]) == pytest.approx(1 / 7) and float(static[3]) == pytest.approx(1 / 7)
    assert "*STEP, NLGEOM, INC=140" in lines and "g01-e002" in lines[1]
    assert lines[lines.index("*BOUNDARY, AMPLITUDE=PULL") + 1] == "LOAD, 1, 1, 2"  # 0.02 x 100 mm
    assert "*NODE FILE, FREQUENCY=1" in lines and "*EL FILE, FREQUENCY=1" in lines


def test_deck_output_requests_follow_the_parameters():
    nodal = fe_deck.deck(fe_deck.Model(frd_every=4, frd_fields="nodal"), TRUTH)
    assert "*NODE FILE, FREQUENCY=4\nU, RF\n" in nodal and "*EL FILE" not in nodal
    none = fe_deck.deck(fe_deck.Model(frd_every=0), TRUTH)
    assert "*NODE FILE" not in none and "*EL FILE" not in none
    assert "*NODE PRINT, NSET=LOAD, TOTALS=ONLY\nRF\n" in none  # the curve is always printed


def test_mesh_is_the_tapered_bar():
    model = fe_deck.Model(elements=4)
    lines = fe_deck.deck(model, TRUTH).splitlines()
    first = lines.index("*NODE, NSET=NALL") + 1
    coords = np.array([[float(v) for v in line.split(",")[1:]] for line in lines[first:][:20]])
    side = coords[2::4, 1]  # the (s, s) corner of every station
    assert side**2 == pytest.approx(model.area * (1 - model.taper * coords[2::4, 0] / 100.0))
    assert coords[-1, 0] == pytest.approx(model.length)


@pytest.mark.parametrize("frd_every", [1, 0, 3])
def test_the_proxy_writes_the_deck_ccx_is_given_at_the_same_shape(tmp_path, monkeypatch, frd_every):
    """For the same point and individual, fe_proxy's job.inp is, byte for byte, the deck the
    calculix workload hands ccx: the proxy's input is the application's."""
    shape = {"cores": 1, "elements": 3, "increments": 7, "max_strain": 0.03}
    shape["frd_every"] = frd_every
    task = {"label": "g02-e007", "parameters": {"E": 187_654.321, "sigma_y": 321.5, "Q": 77.25}}

    proxy = fe_proxy.settings(shape)
    fe_proxy.init_worker(proxy.bar, proxy.output, np.zeros(proxy.bar.increments + 1))
    monkeypatch.setattr(fe_output.Disk, "remove", lambda self: None)
    assert fe_proxy.evaluate({**task, "folder": str(tmp_path / "proxy")})["ok"]
    written = (tmp_path / "proxy" / "job.inp").read_bytes()

    handed = []

    def run_ccx(folder, text, solver_log):
        handed.append(text)
        return calculix.Run()  # no ccx needed: the deck is what is compared

    monkeypatch.setattr(calculix, "run_ccx", run_ccx)
    real = calculix.settings(shape)
    calculix.init_worker(real.model, np.zeros(real.model.increments), real.solver_log)
    calculix.evaluate({**task, "folder": str(tmp_path / "ccx")})
    assert [text.encode() for text in handed] == [written]
    assert f"*NODE FILE, FREQUENCY={frd_every}" in handed[0] or not frd_every
