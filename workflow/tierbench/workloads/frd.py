"""The .frd results file of CalculiX 2.20, in ASCII, written for fe_proxy's bar.

ccx writes its field output (``*NODE FILE``, ``*EL FILE``) as text: a header,
the mesh with the first output, then per output increment one block per field
(DISP, STRESS, TOSTRAIN, FORC, PE and, with stresses, ERROR), each value printed
with ``%12.5E`` of its single-precision value and each node number with
``%10d`` (ccx's frd.c and frdheader.c). Formatting those numbers is most of what
the output costs ccx (callgrind: 87 % of the instructions its output adds, the
rest its own extrapolation), so the proxy writes the same layout with the same
formats, filled with the results of its own solve at the nodes of the deck's
C3D8 mesh, rather than bytes of the right size: its output then costs what
producing an increment's results costs, and the file is a real results file.

The bar is one-dimensional; its C3D8 view (:class:`Mesh`) puts each section's
state at the section's four corner nodes: the axial displacement, the lateral
contraction (elastic Poisson's ratio 0.3 and plastic incompressibility), the
axial Cauchy stress along the fibre through the node (the tapered faces are
free, so the stress is uniaxial along them: sigma t t with t the fibre's
direction) and the Lagrange strain with the same axes, the nodal forces (the
reactions at both ends, the equilibrium residual of the converged solve in
between), the equivalent plastic strain and, as ccx's ERROR, the relative jump
of the stress between the two elements at a node.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from . import fe_model

#: ccx 2.20 as Debian builds it, in its header
VERSION = b"Version 2.20"
COMPILED = b"Sun Jul 31 18:08:37 CEST 2022"
MONTHS = (
    "january", "february", "march", "april", "may", "june", "july", "august",
    "september", "october", "november", "december",
)  # fmt: skip
POISSON = 0.3
END = b" 9999\n"

#: the fields of an output increment: name, the -5 lines that describe its components
BLOCKS = (
    ("DISP", ("D1          1    2    1    0", "D2          1    2    2    0",
              "D3          1    2    3    0", "ALL         1    2    0    0    1ALL")),
    ("STRESS", ("SXX         1    4    1    1", "SYY         1    4    2    2",
                "SZZ         1    4    3    3", "SXY         1    4    1    2",
                "SYZ         1    4    2    3", "SZX         1    4    3    1")),
    ("TOSTRAIN", ("EXX         1    4    1    1", "EYY         1    4    2    2",
                  "EZZ         1    4    3    3", "EXY         1    4    1    2",
                  "EYZ         1    4    2    3", "EZX         1    4    3    1")),
    ("FORC", ("F1          1    2    1    0", "F2          1    2    2    0",
              "F3          1    2    3    0", "ALL         1    2    0    0    1ALL")),
    ("PE", ("PE          1    1    0    0",)),
    ("ERROR", ("STR(%)      1    1    0    0",)),
)  # fmt: skip
#: values per node of each block (ALL is a line of the header, not a value)
COMPONENTS = tuple(len([c for c in lines if not c.startswith("ALL")]) for _, lines in BLOCKS)
#: the corners of a section, as the decks number them: (y, z) in units of the side
CORNERS = ((0.0, 0.0), (1.0, 0.0), (1.0, 1.0), (0.0, 1.0))
#: a C3D8 element's nodes, as offsets from 4 e (its first section's node before the first)
ELEMENT_NODES = (1, 5, 6, 2, 4, 8, 7, 3)


def header_bytes() -> int:
    """The first write: ``1C`` and the heading line."""
    return 7 + 73


def mesh_bytes(elements: int) -> int:
    """The rest of the header, the nodes and the elements (written with the first output)."""
    return 1082 + 313 * elements


def results_bytes(elements: int) -> int:
    """One output increment: six blocks of two header lines, their -4 and -5 lines, a -3."""
    nodes = 4 * (elements + 1)
    return (
        6 * (71 + 76 + 24 + 4)
        + 34 * sum(map(len, (lines for _, lines in BLOCKS)))
        + 8 * 2
        + (nodes * sum(14 + 12 * k for k in COMPONENTS))
    )


def time_text(value: float) -> bytes:
    """A step time in a header line, as frdheader.c prints it: fixed point from 1 on."""
    if 1.0 <= value < 1e10:
        return b"%12.*f" % (10 - (math.floor(math.log10(value)) + 1), value)
    return b"%12.5E" % value


@dataclass(frozen=True)
class Mesh:
    """The deck's C3D8 view of the bar: 4 nodes per section, numbered 4 i + k + 1."""

    bar: fe_model.Bar

    @cached_property
    def sides(self) -> np.ndarray:
        """The square section's side at each section (the decks' geometry)."""
        bar = self.bar
        return np.sqrt(bar.area * (1.0 - bar.taper * bar.nodes / bar.length))

    @property
    def nodes(self) -> int:
        return 4 * (self.bar.elements + 1)

    @cached_property
    def coordinates(self) -> np.ndarray:
        """(nodes, 3): x, y, z of every node."""
        corners = np.array(CORNERS)
        yz = self.sides[:, None, None] * corners[None, :, :]
        x = np.repeat(self.bar.nodes, 4)
        return np.column_stack([x, yz.reshape(-1, 2)])

    @cached_property
    def fibres(self) -> np.ndarray:
        """(nodes, 6): the products t_i t_j of the fibre direction, in ccx's order
        xx yy zz xy yz zx. A fibre keeps its place in the section as the section
        tapers, so its slope is (y, z) times the side's relative slope."""
        slope = np.gradient(self.sides, self.bar.nodes) / self.sides
        xyz = self.coordinates
        t = np.column_stack([np.ones(self.nodes), xyz[:, 1:] * np.repeat(slope, 4)[:, None]])
        t /= np.linalg.norm(t, axis=1)[:, None]
        return t[:, [0, 1, 2, 0, 1, 2]] * t[:, [0, 1, 2, 1, 2, 0]]

    def connectivity(self) -> list[tuple[int, ...]]:
        """Every element's number and nodes, as the deck lists them."""
        return [(e + 1, *(4 * e + k for k in ELEMENT_NODES)) for e in range(self.bar.elements)]


def _at_nodes(values: np.ndarray) -> np.ndarray:
    """Element values averaged at the sections (the ends take their element's)."""
    nodal = np.empty(values.size + 1)
    nodal[0], nodal[-1] = values[0], values[-1]
    nodal[1:-1] = 0.5 * (values[:-1] + values[1:])
    return nodal


def section_state(bar: fe_model.Bar, inc: fe_model.Increment) -> np.ndarray:
    """(sections, 8): displacement, lateral stretch - 1, Cauchy stress, lateral and
    axial-minus-lateral Lagrange strain, a quarter of the nodal force, equivalent
    plastic strain and the stress jump (%) at every section of the bar."""
    forces = bar.element_areas * inc.stress / np.exp(inc.strain)  # what each element carries
    stretch = np.exp(_at_nodes(inc.strain))
    plastic = _at_nodes(inc.plastic_strain)
    lateral = np.exp(-POISSON * (np.log(stretch) - plastic) - 0.5 * plastic)
    state = np.empty((stretch.size, 8))
    state[:, 0] = inc.displacement
    state[:, 1] = lateral - 1.0
    state[:, 2] = _at_nodes(inc.stress) / (stretch * lateral * lateral)
    state[:, 3] = 0.5 * (lateral * lateral - 1.0)
    state[:, 4] = 0.5 * (stretch * stretch - 1.0) - state[:, 3]
    state[0, 5], state[-1, 5] = -0.25 * forces[0], 0.25 * forces[-1]  # the reactions
    state[1:-1, 5] = 0.25 * (forces[:-1] - forces[1:])  # what equilibrium left over
    state[:, 6] = _at_nodes(inc.alpha)
    state[:, 7] = 0.0
    if forces.size > 1:
        jumps = 100.0 * np.abs(np.diff(inc.stress)) / max(float(np.max(np.abs(inc.stress))), 1e-30)
        state[1:-1, 7] = jumps
        state[0, 7], state[-1, 7] = jumps[0], jumps[-1]
    return state


class Writer:
    """The .frd text of one mesh: its templates made once, the numbers formatted per call."""

    def __init__(self, mesh: Mesh, material: str):
        self.mesh, self.material = mesh, material
        n = mesh.nodes
        #: the node lines of each block, and where its rows (id, values) lie in the table
        self.lines = tuple((b" -1%10d" + b"%12.5E" * k + b"\n") * n for k in COMPONENTS)
        ends = np.cumsum([n * (k + 1) for k in COMPONENTS])
        self.spans = tuple(zip((0, *ends[:-1]), ends, strict=True))
        self.block_heads = tuple(
            b" -4  %-8s%5d    1\n" % (name.encode(), len(lines))
            + b"".join(b" -5  %s\n" % line.encode() for line in lines)
            for name, lines in BLOCKS
        )
        self.table = np.empty(int(ends[-1]), dtype=np.float32)
        self.views = [self.table[a:b].reshape(n, -1) for a, b in self.spans]
        for view in self.views:
            view[:, 0] = np.arange(1, n + 1)
        fibres = mesh.fibres
        #: per node, the factors that turn a section's state into each block's values
        self.yz = mesh.coordinates[:, 1:]
        self.fibres, self.force_axes = fibres, fibres[:, [0, 3, 5]]
        self.identity = np.array([1.0, 1.0, 1.0, 0.0, 0.0, 0.0])

    @staticmethod
    def head(heading: bytes) -> bytes:
        """The first write: the file's tag and the deck's heading (its line after *HEADING)."""
        return b"    1C\n    1U%-66.66s\n" % heading

    def mesh_block(self, when: time.struct_time | None = None) -> bytes:
        """The rest of the header (date and time of ``when``), the nodes, the elements."""
        when = when or time.localtime()
        date = f"{when.tm_mday:02d}.{MONTHS[when.tm_mon - 1]}.{when.tm_year}".encode()
        clock = b"%02d:%02d:%02d" % (when.tm_hour, when.tm_min, when.tm_sec)
        mesh, blank = self.mesh, b" " * 62
        lines = [
            b"    1UUSER" + blank + b"\n",
            b"    1UDATE              %-20s%28s\n" % (date, b""),
            b"    1UTIME              %8s%40s\n" % (clock, b""),
            b"    1UHOST" + blank + b"\n",
            b"    1UPGM               CalculiX%40s\n" % b"",
            b"    1UVERSION           %s%29s\n" % (VERSION, b""),
            b"    1UCOMPILETIME       %s%20s\n" % (COMPILED, b""),
            b"    1UDIR" + blank + b" \n",
            b"    1UDBN" + blank + b" \n",
            b"    1UMAT%5d%-58.58s\n" % (1, self.material.upper().encode()),
            b"    2C%18s%12d%38d\n" % (b"", mesh.nodes, 1),
        ]
        ids = np.arange(1, mesh.nodes + 1)[:, None]
        nodes = np.hstack([ids, mesh.coordinates.astype(np.float32)]).ravel().tolist()
        lines.append((b" -1%10d%12.5E%12.5E%12.5E\n" * mesh.nodes) % tuple(nodes))
        elements = mesh.bar.elements
        lines.append(b" -3\n    3C%18s%12d%38d\n" % (b"", elements, 1))
        element = b" -1%10d    1    0    1\n -2" + b"%10d" * 8 + b"\n"
        numbers = [n for element in mesh.connectivity() for n in element]
        lines.append((element * elements) % tuple(numbers))
        lines.append(b" -3\n")
        return b"".join(lines)

    def results(self, kode: int, inc: fe_model.Increment) -> bytes:
        """Output increment number ``kode`` of the file: its six blocks."""
        state = np.repeat(section_state(self.mesh.bar, inc), 4, axis=0)  # every corner node
        disp, stress, strain, force, plastic, error = self.views
        disp[:, 1] = state[:, 0]
        disp[:, 2:] = self.yz * state[:, 1:2]
        stress[:, 1:] = state[:, 2:3] * self.fibres
        strain[:, 1:] = state[:, 4:5] * self.fibres + state[:, 3:4] * self.identity
        force[:, 1:] = state[:, 5:6] * self.force_axes
        plastic[:, 1] = state[:, 6]
        error[:, 1] = state[:, 7]
        self.table += np.float32(0.0)  # no negative zeros: ccx prints 0.00000E+00
        values = self.table.tolist()
        n, when = self.mesh.nodes, time_text(inc.time)
        step = b"  100CL%5d%s%12d%22d%5d%11s1\n" % (100 + kode, when, n, 0, kode, b"")
        counter, parts = 6 * (kode - 1), []
        for k, (lines, head, (a, b)) in enumerate(
            zip(self.lines, self.block_heads, self.spans, strict=True)
        ):
            pstep = b"    1PSTEP%14s%12d%12d%12d%10s\n" % (b"", counter + k + 1, inc.number, 1, b"")
            parts += (pstep, step, head, lines % tuple(values[a:b]), b" -3\n")
        return b"".join(parts)
