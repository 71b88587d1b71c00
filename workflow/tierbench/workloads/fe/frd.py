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

from . import fe_deck, fe_model

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
    """The C3D8 view of the bar in its deck (``fe_deck``): 4 nodes per section, 4 i + k + 1."""

    bar: fe_model.Bar

    @cached_property
    def sides(self) -> np.ndarray:
        """The square section's side at each section (the deck's geometry)."""
        bar = self.bar
        return np.sqrt(bar.area * (1.0 - bar.taper * bar.nodes / bar.length))

    @property
    def nodes(self) -> int:
        return 4 * (self.bar.elements + 1)

    @cached_property
    def coordinates(self) -> np.ndarray:
        """(nodes, 3): x, y, z of every node."""
        corners = np.array(fe_deck.CORNERS)
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
        return fe_deck.connectivity(self.bar.elements)


class Sections:
    """The bar's state at its sections, from its elements' (matrices made once per bar)."""

    def __init__(self, bar: fe_model.Bar):
        n = bar.elements
        average, force, jump = np.zeros((n, n + 1)), np.zeros((n, n + 1)), np.zeros((n, n + 1))
        for e in range(n):
            average[e, e : e + 2] = 0.5  # a section between two elements: their mean
            force[e, e : e + 2] = (-0.25, 0.25)  # a quarter of each element's force at a corner
        average[0, 0] = average[-1, -1] = 1.0  # an end: its element's value
        for j in range(1, n):
            jump[j - 1, j], jump[j, j] = 1.0, -1.0
        if n > 1:  # the ends take the jump next to them
            jump[:, 0], jump[:, -1] = jump[:, 1], jump[:, -2]
        self.average, self.force, self.jump = average, force * bar.element_areas[:, None], jump

    def state(self, inc: fe_model.Increment) -> np.ndarray:
        """(8, sections): displacement, lateral stretch - 1, Cauchy stress, lateral and
        axial-minus-lateral Lagrange strain, a quarter of the nodal force (the reactions at
        the ends, what equilibrium left over between), equivalent plastic strain, and the
        jump of the stress between the elements at the section (%)."""
        strain, stress = inc.strain, inc.stress
        elements = np.array((strain, inc.plastic_strain, stress, inc.alpha))
        log_stretch, plastic, kirchhoff, alpha = elements @ self.average
        stretch, lateral = np.exp((log_stretch, POISSON * (plastic - log_stretch) - 0.5 * plastic))
        squared = lateral * lateral
        across = 0.5 * (squared - 1.0)
        jumps = np.abs(stress @ self.jump) * (100.0 / max(np.abs(stress).max(), 1e-30))
        return np.array(
            (
                inc.displacement,
                lateral - 1.0,
                kirchhoff / (stretch * squared),
                across,
                0.5 * (stretch * stretch - 1.0) - across,
                (stress / np.exp(strain)) @ self.force,  # element forces: A tau / stretch
                alpha,
                jumps,
            )
        )


class Writer:
    """The .frd text of one mesh: its templates made once, the numbers formatted per call."""

    def __init__(self, mesh: Mesh, material: str):
        self.mesh, self.material = mesh, material
        n = mesh.nodes
        #: where each block's rows (node number, values) lie in the numbers of an increment
        ends = np.cumsum([n * (k + 1) for k in COMPONENTS])
        self.spans = tuple(zip((0, *ends[:-1]), ends, strict=True))
        #: an increment's text: per block its step line (block counter, increment), the
        #: 100CL line, the lines naming its components, a line per node, the end
        self.template = b"".join(
            b"    1PSTEP%14s%%12d%%12d%12d%10s\n%%s" % (b"", 1, b"")
            + (b" -4  %-8s%5d    1\n" % (name.encode(), len(lines))).replace(b"%", b"%%")
            + b"".join(b" -5  %s\n" % line.encode() for line in lines).replace(b"%", b"%%")
            + (b" -1%10d" + b"%12.5E" * k + b"\n") * n
            + b" -3\n"
            for (name, lines), k in zip(BLOCKS, COMPONENTS, strict=True)
        )
        self.sections = Sections(mesh.bar)
        self.terms = self._terms(n, int(ends[-1]))

    def _terms(self, n: int, size: int) -> tuple:
        """Every number of an increment's blocks as a + b state[i] + c state[j]: the node
        numbers (a) and the values, a section's state at the node (``Sections.state``)."""
        sections, corner = np.repeat(np.arange(n // 4), 4), self.mesh.coordinates[:, 1:]
        fibres = self.mesh.fibres
        ones, none = np.ones(n), np.zeros(n)
        per_block = (  # per block, per value: (state row, factor), (state row, factor)
            [(0, ones, None), (1, corner[:, 0], None), (1, corner[:, 1], None)],
            [(2, fibres[:, c], None) for c in range(6)],
            [(4, fibres[:, c], (3, ones if c < 3 else none)) for c in range(6)],
            [(5, fibres[:, c], None) for c in (0, 3, 5)],
            [(6, ones, None)],
            [(7, ones, None)],
        )
        constant, first, second = np.zeros(size), np.zeros(size, int), np.zeros(size, int)
        scale, scale2 = np.zeros(size), np.zeros(size)
        for (a, _), values in zip(self.spans, per_block, strict=True):
            k = len(values) + 1
            constant[a : a + n * k : k] = np.arange(1, n + 1)  # the node numbers
            for j, (row, factor, extra) in enumerate(values, 1):
                at = slice(a + j, a + n * k, k)
                first[at], scale[at] = row * n // 4 + sections, factor
                if extra is not None:
                    second[at], scale2[at] = extra[0] * n // 4 + sections, extra[1]
        return constant, first, scale, second, scale2

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

    def numbers(self, inc: fe_model.Increment) -> np.ndarray:
        """The numbers of an increment's six blocks, in order: per node its number and its
        values, in single precision (as ccx prints them), without negative zeros."""
        state = self.sections.state(inc).ravel()
        constant, first, scale, second, scale2 = self.terms
        table = (constant + state[first] * scale + state[second] * scale2).astype(np.float32)
        return table + np.float32(0.0)  # -0.0 + 0.0 is 0.0: ccx prints 0.00000E+00

    def results(self, kode: int, inc: fe_model.Increment) -> bytes:
        """Output increment number ``kode`` of the file: its six blocks."""
        values = self.numbers(inc).tolist()
        when = time_text(inc.time)
        step = b"  100CL%5d%s%12d%22d%5d%11s1\n" % (100 + kode, when, self.mesh.nodes, 0, kode, b"")
        for k in range(len(BLOCKS) - 1, -1, -1):  # each block's header numbers before its rows
            start = self.spans[k][0]
            values[start:start] = (6 * (kode - 1) + k + 1, inc.number, step)
        return self.template % tuple(values)
