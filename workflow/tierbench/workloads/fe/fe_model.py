"""A small implicit non-linear finite element model: a tapered elasto-plastic bar.

The bar (length ``L``, cross-section tapering linearly from ``area`` at the
fixed end to ``area * (1 - taper)`` at the loaded end) is meshed with
``elements`` two-node bar elements and pulled at its free end by a prescribed
displacement, in ``increments`` equal load increments, up to a nominal strain
``max_strain``. The force needed at the loaded end is the force-displacement
curve a test machine would record.

Kinematics are finite-strain: the logarithmic (Hencky) strain
``eps = ln(lambda)`` with the stretch ``lambda = 1 + du/dx``; the Kirchhoff
stress ``tau = E (eps - eps_p)`` and the element force ``N = A tau / lambda``
(first Piola-Kirchhoff stress times the reference area). Plasticity is rate
independent with isotropic Voce plus linear hardening,
``sigma_y(alpha) = sigma_y + H alpha + Q (1 - exp(-b alpha))``, integrated with
the implicit return mapping (backward Euler) and its consistent tangent
``E Hp / (E + Hp)``, so global Newton-Raphson converges quadratically. An
increment that does not converge is cut back into halves, as implicit codes do.

Because the cross-section varies, elements yield one after the other: the
interior nodal displacements are real unknowns, and the small-strain limit is
the linear-elastic closed form ``F = u / sum(L_e / (E A_e))``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import NamedTuple

import numpy as np

#: Units: mm, N, MPa.
LENGTH = 100.0
AREA = 10.0
TAPER = 0.2
#: local (return mapping) Newton: relative tolerance on the yield function
LOCAL_TOL = 1e-12
LOCAL_MAX_ITER = 50
#: regula-falsi steps before the line search takes what it has
LINE_SEARCH_STEPS = 8
#: the line search stops when |du . R| has dropped below this fraction of its start value
LINE_SEARCH_RATIO = 0.5


class ConvergenceError(RuntimeError):
    """Newton-Raphson did not converge, even after the allowed cutbacks."""


@dataclass(frozen=True)
class Material:
    """Elasto-plastic material with linear plus Voce (saturating) isotropic hardening."""

    E: float = 200_000.0  # Young's modulus, MPa
    sigma_y: float = 250.0  # initial yield stress, MPa
    H: float = 2_000.0  # linear hardening modulus, MPa
    Q: float = 150.0  # Voce saturation stress, MPa
    b: float = 20.0  # Voce rate (dimensionless)

    def yield_stress(self, alpha: np.ndarray) -> np.ndarray:
        return self.sigma_y + self.H * alpha + self.Q * (1.0 - np.exp(-self.b * alpha))

    def hardening_slope(self, alpha: np.ndarray) -> np.ndarray:
        return self.H + self.Q * self.b * np.exp(-self.b * alpha)

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Bar:
    """Geometry, mesh and loading of the bar."""

    elements: int = 10
    increments: int = 40
    max_strain: float = 0.02
    unload: bool = True
    tolerance: float = 1e-8
    max_iterations: int = 12
    max_cutbacks: int = 6
    length: float = LENGTH
    area: float = AREA
    taper: float = TAPER

    @cached_property
    def nodes(self) -> np.ndarray:
        return np.linspace(0.0, self.length, self.elements + 1)

    @cached_property
    def element_lengths(self) -> np.ndarray:
        return np.diff(self.nodes)

    @cached_property
    def element_areas(self) -> np.ndarray:
        """Reference area of each element, taken at its midpoint."""
        x = 0.5 * (self.nodes[:-1] + self.nodes[1:])
        return self.area * (1.0 - self.taper * x / self.length)

    def tip_displacement(self, time_fraction: float) -> float:
        """Prescribed end displacement at step time ``t`` in [0, 1].

        Monotonic loading up to ``max_strain``, or, with ``unload``, loading in
        the first half and unloading back to zero displacement in the second
        (which puts the bar into reversed, compressive yielding): the elastic
        unloading slope pins down E and the reversed yield the hardening.
        """
        peak = self.max_strain * self.length
        if not self.unload:
            return peak * time_fraction
        return peak * (1.0 - abs(1.0 - 2.0 * time_fraction))


@dataclass
class State:
    """Committed history variables of every element (one integration point each)."""

    plastic_strain: np.ndarray
    alpha: np.ndarray

    @classmethod
    def virgin(cls, elements: int) -> State:
        return cls(np.zeros(elements), np.zeros(elements))


class Increment(NamedTuple):
    """What one converged increment reports (an implicit code's status line).

    A named tuple: the solve makes one per increment for its output, and a
    tuple is the cheapest object to make and read.
    """

    number: int
    attempts: int
    iterations: int
    time: float
    time_increment: float
    tip_displacement: float
    force: float
    residuals: list[float]
    displacement: np.ndarray
    stress: np.ndarray
    strain: np.ndarray
    plastic_strain: np.ndarray
    alpha: np.ndarray


@dataclass
class Solution:
    displacement: np.ndarray = field(default_factory=lambda: np.zeros(0))
    force: np.ndarray = field(default_factory=lambda: np.zeros(0))
    iterations: list[int] = field(default_factory=list)
    cutbacks: int = 0
    compute_time: float = 0.0


def return_mapping(material: Material, strain: np.ndarray, state: State):
    """Kirchhoff stress, algorithmic tangent d(tau)/d(eps) and the trial-updated state."""
    E = material.E
    trial = E * (strain - state.plastic_strain)
    f_trial = np.abs(trial) - material.yield_stress(state.alpha)
    tau = trial.copy()
    tangent = np.full_like(strain, E)
    plastic_strain, alpha = state.plastic_strain.copy(), state.alpha.copy()
    yielding = f_trial > LOCAL_TOL * material.sigma_y
    if np.any(yielding):
        t_abs = np.abs(trial[yielding])
        a_n = state.alpha[yielding]
        gamma = np.zeros_like(t_abs)
        for _ in range(LOCAL_MAX_ITER):
            a = a_n + gamma
            g = t_abs - E * gamma - material.yield_stress(a)
            if np.all(np.abs(g) <= LOCAL_TOL * material.sigma_y):
                break
            gamma = np.maximum(gamma + g / (E + material.hardening_slope(a)), 0.0)
        else:
            raise ConvergenceError("return mapping did not converge")
        sign = np.sign(trial[yielding])
        slope = material.hardening_slope(a_n + gamma)
        tau[yielding] = sign * (t_abs - E * gamma)
        tangent[yielding] = E * slope / (E + slope)
        plastic_strain[yielding] += sign * gamma
        alpha[yielding] = a_n + gamma
    return tau, tangent, State(plastic_strain, alpha)


def element_response(bar: Bar, material: Material, u: np.ndarray, state: State):
    """Element forces, stiffnesses, stresses and trial states for nodal displacements ``u``."""
    lengths, areas = bar.element_lengths, bar.element_areas
    stretch = 1.0 + np.diff(u) / lengths
    if np.any(stretch <= 0.0):
        raise ConvergenceError("an element was compressed to zero length")
    strain = np.log(stretch)
    tau, tangent, trial_state = return_mapping(material, strain, state)
    force = areas * tau / stretch  # N = A0 * P, P = tau / lambda
    stiffness = areas / lengths * (tangent - tau) / stretch**2  # dN/du of the element
    return force, stiffness, tau, strain, trial_state


def solve_tridiagonal(diag: list[float], off: list[float], rhs: list[float]) -> list[float]:
    """Thomas algorithm for a symmetric tridiagonal system (``off`` couples i and i+1)."""
    n = len(diag)
    c, d = [0.0] * n, [0.0] * n
    pivot = diag[0]
    if abs(pivot) < 1e-300:
        raise ConvergenceError("singular tangent stiffness")
    c[0], d[0] = (off[0] / pivot if n > 1 else 0.0), rhs[0] / pivot
    for i in range(1, n):
        pivot = diag[i] - off[i - 1] * c[i - 1]
        if abs(pivot) < 1e-300:
            raise ConvergenceError("singular tangent stiffness")
        c[i] = off[i] / pivot if i < n - 1 else 0.0
        d[i] = (rhs[i] - off[i - 1] * d[i - 1]) / pivot
    x = [0.0] * n
    x[-1] = d[-1]
    for i in range(n - 2, -1, -1):
        x[i] = d[i] - c[i] * x[i + 1]
    return x


def _balance(bar: Bar, material: Material, u: np.ndarray, state: State):
    """Element response at ``u`` and the relative out-of-balance force of the free nodes."""
    response = element_response(bar, material, u, state)
    force = response[0]
    # nodal internal forces: element e pulls node e by -N_e and node e+1 by +N_e
    residual = force[:-1] - force[1:]  # free nodes 1..n-1
    scale = max(float(np.max(np.abs(force))), 1e-12)
    norm = float(np.max(np.abs(residual))) / scale if residual.size else 0.0
    return response, residual, norm


def newton(bar: Bar, material: Material, u: np.ndarray, state: State):
    """Equilibrium of the free (interior) nodes for the prescribed end displacements.

    Returns the converged displacements, the element response and the residual
    norm of every iteration. The residual is the largest out-of-balance nodal
    force relative to the force carried by the bar (the force residual test of
    implicit codes). Where elements switch from elastic to plastic the tangent
    has a kink and a full Newton step can overshoot, so each step goes through
    a line search on the energy norm ``du . R(u + s du)`` (as in Abaqus'
    *CONTROLS, ANALYSIS=DISCONTINUOUS line search): the step length ``s`` is
    reduced by regula falsi until the out-of-balance work along the step has
    dropped to a fraction of its initial value.
    """
    u = u.copy()
    response, residual, norm = _balance(bar, material, u, state)
    residuals = [norm]
    for _ in range(bar.max_iterations):
        if norm <= bar.tolerance:
            break
        stiffness = response[1]
        diag = (stiffness[:-1] + stiffness[1:]).tolist()
        off = (-stiffness[1:-1]).tolist() + [0.0]
        du = np.asarray(solve_tridiagonal(diag, off, (-residual).tolist()))
        u, response, residual, norm = _line_search(bar, material, u, du, residual, state)
        residuals.append(norm)
    if norm > bar.tolerance:
        raise ConvergenceError(
            f"Newton-Raphson did not converge in {bar.max_iterations} iterations "
            f"(relative residual {norm:.2e} > {bar.tolerance:.0e})"
        )
    force, _stiffness, tau, strain, trial = response
    return u, (force, tau, strain, trial), residuals


def _line_search(bar, material, u, du, residual, state):
    """The Newton update ``u + s du`` with ``s`` from a regula-falsi energy line search."""

    def at(step):
        moved = u.copy()
        moved[1:-1] += step * du
        response, res, norm = _balance(bar, material, moved, state)
        return moved, response, res, norm, float(du @ res)

    g0 = float(du @ residual)  # < 0: du is a descent direction of the energy
    low, g_low = 0.0, g0
    high = 1.0
    found = at(high)
    if g0 >= 0.0 or abs(found[4]) <= LINE_SEARCH_RATIO * abs(g0) or found[4] < 0.0:
        return found[:4]
    g_high = found[4]
    for _ in range(LINE_SEARCH_STEPS):
        step = high - g_high * (high - low) / (g_high - g_low)
        step = min(max(step, low + 0.01 * (high - low)), high - 0.01 * (high - low))
        found = at(step)
        if abs(found[4]) <= LINE_SEARCH_RATIO * abs(g0):
            break
        if found[4] > 0.0:
            high, g_high = step, found[4]
        else:
            low, g_low = step, found[4]
    return found[:4]


def solve(
    bar: Bar,
    material: Material,
    on_increment: Callable[[Increment], None] | None = None,
) -> Solution:
    """Run the analysis; ``on_increment`` sees every converged increment (solver output).

    ``compute_time`` in the solution excludes the time spent in ``on_increment``.
    """
    start = time.perf_counter()
    callback_time = 0.0
    u = np.zeros(bar.elements + 1)
    # first guess of an increment: the shape of the last converged one, scaled to
    # the new end displacement; at the start and after a load reversal (elastic
    # unloading) the linear-elastic shape, in which every element carries the same force
    compliance = np.concatenate([[0.0], np.cumsum(bar.element_lengths / bar.element_areas)])
    elastic_shape = compliance / compliance[-1]
    shape, last_step = elastic_shape, 0.0
    state = State.virgin(bar.elements)
    solution = Solution()
    forces, tips = [0.0], [0.0]
    step = 1.0 / bar.increments
    t = 0.0
    for number in range(1, bar.increments + 1):
        target_t = number * step
        attempts, cutbacks, iterations, residuals = 0, 0, 0, []
        while t < target_t - 1e-12:
            dt = min(step / 2**cutbacks, target_t - t)
            attempts += 1
            tip_step = bar.tip_displacement(t + dt) - bar.tip_displacement(t)
            if tip_step * last_step < 0.0:
                shape = elastic_shape
            guess = u + tip_step * shape
            try:
                u_new, (force, tau, strain, trial), history = newton(bar, material, guess, state)
            except ConvergenceError:
                cutbacks += 1
                solution.cutbacks += 1
                if cutbacks > bar.max_cutbacks:
                    raise ConvergenceError(
                        f"increment {number}: no convergence after {bar.max_cutbacks} cutbacks"
                    ) from None
                continue
            if tip_step != 0.0:
                shape, last_step = (u_new - u) / tip_step, tip_step
            u, state, t = u_new, trial, t + dt
            iterations += len(history) - 1
            residuals += history
        forces.append(float(force[-1]))
        tips.append(bar.tip_displacement(t))
        solution.iterations.append(iterations)
        if on_increment is not None:
            before = time.perf_counter()
            # in field order: made with keywords, it costs more than writing it out
            on_increment(
                Increment(
                    number, attempts, iterations, t, step, tips[-1], forces[-1], residuals,
                    u, tau, strain, state.plastic_strain, state.alpha,
                )
            )  # fmt: skip
            callback_time += time.perf_counter() - before
    solution.displacement = np.asarray(tips)
    solution.force = np.asarray(forces)
    solution.compute_time = time.perf_counter() - start - callback_time
    return solution


def force_curve(bar: Bar, material: Material) -> np.ndarray:
    """Force at the loaded end after every increment (starting with 0 at rest)."""
    return solve(bar, material).force


def elastic_force(bar: Bar, E: float, tip: float) -> float:
    """Linear-elastic, small-strain closed form: springs in series, F = u / sum(L_e / (E A_e))."""
    return tip / float(np.sum(bar.element_lengths / (E * bar.element_areas)))


def misfit(force: np.ndarray, target: np.ndarray) -> float:
    """Root-mean-square force error relative to the largest target force, in percent."""
    scale = max(float(np.max(np.abs(target))), 1e-12)
    return 100.0 * math.sqrt(float(np.mean((force - target) ** 2))) / scale
