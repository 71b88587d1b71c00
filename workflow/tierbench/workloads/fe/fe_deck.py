"""The CalculiX input deck of the tapered bar: one writer for both FE workloads.

``calculix`` hands this deck to ccx; ``fe_proxy`` writes the same bytes into its
evaluation folder and reads them back, as ccx would, so the proxy's input is
the application's at every shape. The model: ``elements`` C3D8 bricks along
x, a square cross-section tapering as ``fe_model``'s bar does (so elements
yield one after the other), symmetry planes on three faces, pulled by a
prescribed displacement to ``max_strain`` and back to zero (``*AMPLITUDE``),
with ``NLGEOM`` and a ``*PLASTIC`` table sampled from the Voce-plus-linear
hardening law up to ``PLASTIC_RANGE`` times the strain, so the table covers
the plastic strain the bar reaches. The step runs in ``increments``
increments of 1/``increments`` each under ccx's automatic incrementation: an
increment that does not converge is cut back, as implicit codes do (with
fixed increments, ``*STATIC, DIRECT``, ccx stops with "solution seems to
diverge" as soon as the first elements of a 10-element bar yield at 40
increments). Field output goes to ``job.frd`` every ``frd_every`` increments
(0: none requested): U and RF (``frd_fields: nodal``), and S, E, PEEQ as well
(``full``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import fe_model

#: the material's name, which ccx also prints in the .frd's header
MATERIAL = "FIT"
#: nodes of a cross-section, numbered 4 i + k + 1 at section i, corner k
SECTION_NODES = 4
#: the corners of a section, in that order: (y, z) in units of the side
CORNERS = ((0.0, 0.0), (1.0, 0.0), (1.0, 1.0), (0.0, 1.0))
#: points of the *PLASTIC table, from zero plastic strain to PLASTIC_RANGE x max_strain
PLASTIC_POINTS = 16
PLASTIC_RANGE = 5.0
#: ccx's automatic incrementation: increments may be cut down to this fraction of
#: 1/increments, and a step may take this many times ``increments`` in all
MIN_INCREMENT_FRACTION = 1e-4
MAX_INCREMENTS_FACTOR = 20
FRD_FIELDS = {"nodal": ("U, RF",), "full": ("U, RF", "S, E, PEEQ")}


@dataclass(frozen=True)
class Model:
    """The analysed bar: mesh, loading and the field output ccx is asked to write."""

    elements: int = 10
    increments: int = 40
    max_strain: float = 0.02
    frd_every: int = 1
    frd_fields: str = "full"
    length: float = fe_model.LENGTH
    area: float = fe_model.AREA
    taper: float = fe_model.TAPER

    @classmethod
    def of(cls, bar: fe_model.Bar, frd_every: int = 1) -> Model:
        """The deck of ``fe_model``'s bar, with full field output every ``frd_every``."""
        return cls(
            bar.elements, bar.increments, bar.max_strain, frd_every,
            length=bar.length, area=bar.area, taper=bar.taper,
        )  # fmt: skip

    @property
    def nodes(self) -> int:
        return SECTION_NODES * (self.elements + 1)

    @property
    def tip(self) -> int:
        """The loaded node whose displacement is printed: the far corner of the last section."""
        return SECTION_NODES * self.elements + 3


def connectivity(elements: int) -> list[tuple[int, ...]]:
    """Every element's number and its nodes: a section's four corners, then the next's."""
    return [(e + 1, *range(4 * e + 1, 4 * e + 9)) for e in range(elements)]


def plastic_table(material: fe_model.Material, model: Model) -> list[tuple[float, float]]:
    """(yield stress, plastic strain) pairs of the hardening law, for *PLASTIC."""
    strains = np.linspace(0.0, PLASTIC_RANGE * model.max_strain, PLASTIC_POINTS)
    return [(float(material.yield_stress(e)), float(e)) for e in strains]


def _mesh(model: Model) -> list[str]:
    """Nodes and C3D8 elements of the bar along x; a square section of area A(x) per station."""
    lines = ["*NODE, NSET=NALL"]
    for i in range(model.elements + 1):
        x = model.length * i / model.elements
        s = math.sqrt(model.area * (1.0 - model.taper * x / model.length))
        base = SECTION_NODES * i
        for k, (y, z) in enumerate(CORNERS):
            lines.append(f"{base + k + 1}, {x:.9g}, {y * s:.9g}, {z * s:.9g}")
    lines.append("*ELEMENT, TYPE=C3D8, ELSET=EALL")
    lines += [", ".join(map(str, element)) for element in connectivity(model.elements)]
    return lines


def _node_set(name: str, nodes) -> list[str]:
    nodes = list(nodes)
    rows = [", ".join(str(n) for n in nodes[i : i + 16]) for i in range(0, len(nodes), 16)]
    return [f"*NSET, NSET={name}", *rows]


def _node_sets(model: Model) -> list[str]:
    """The symmetry planes x = 0, y = 0 and z = 0, the loaded face and the printed node."""
    stations = range(model.elements + 1)
    last = SECTION_NODES * model.elements
    return [
        *_node_set("X0", range(1, 5)),
        *_node_set("Y0", [4 * i + k for i in stations for k in (1, 4)]),
        *_node_set("Z0", [4 * i + k for i in stations for k in (1, 2)]),
        *_node_set("LOAD", range(last + 1, last + 5)),
        *_node_set("TIP", [model.tip]),
    ]


def _step(model: Model) -> list[str]:
    """The section, the loading and the step with its print and field output requests."""
    step = 1.0 / model.increments
    peak = model.max_strain * model.length
    lines = [
        f"*SOLID SECTION, ELSET=EALL, MATERIAL={MATERIAL}",
        "*AMPLITUDE, NAME=PULL",
        "0., 0., 0.5, 1., 1., 0.",
        f"*STEP, NLGEOM, INC={MAX_INCREMENTS_FACTOR * model.increments}",
        "*STATIC",
        f"{step:.12g}, 1., {step * MIN_INCREMENT_FRACTION:.12g}, {step:.12g}",
        "*BOUNDARY",
        "X0, 1, 1, 0.",
        "Y0, 2, 2, 0.",
        "Z0, 3, 3, 0.",
        "*BOUNDARY, AMPLITUDE=PULL",
        f"LOAD, 1, 1, {peak:.12g}",
        "*NODE PRINT, NSET=LOAD, TOTALS=ONLY",
        "RF",
        "*NODE PRINT, NSET=TIP",
        "U",
    ]
    if model.frd_every:
        fields = FRD_FIELDS[model.frd_fields]
        lines += [f"*NODE FILE, FREQUENCY={model.frd_every}", fields[0]]
        if len(fields) > 1:
            lines += [f"*EL FILE, FREQUENCY={model.frd_every}", fields[1]]
    lines.append("*END STEP")
    return lines


def _text(lines: list[str]) -> bytes:
    return "".join(line + "\n" for line in lines).encode()


class Deck:
    """A model's deck: what every analysis shares made once, the heading and the material
    per analysis (a worker analyses one model many times)."""

    def __init__(self, model: Model):
        self.model = model
        self.mesh = _text([*_mesh(model), *_node_sets(model)])
        self.step = _text(_step(model))

    def parts(self, material: fe_model.Material, label: str = "") -> tuple[bytes, ...]:
        """The deck of one analysis with ``material``'s parameters, in the order it is written."""
        heading = (
            f"*HEADING\ntierbench calculix {label}: tapered elasto-plastic bar, "
            f"{self.model.elements} C3D8 elements\n"
        )
        table = plastic_table(material, self.model)
        stated = [
            f"*MATERIAL, NAME={MATERIAL}",
            "*ELASTIC",
            f"{material.E:.10g}, 0.3",
            "*PLASTIC",
            *(f"{stress:.10g}, {strain:.10g}" for stress, strain in table),
        ]
        return heading.encode(), self.mesh, _text(stated), self.step

    def text(self, material: fe_model.Material, label: str = "") -> str:
        return b"".join(self.parts(material, label)).decode()


def deck(model: Model, material: fe_model.Material, label: str = "") -> str:
    """The deck of one analysis of ``model`` with ``material``'s parameters."""
    return Deck(model).text(material, label)
