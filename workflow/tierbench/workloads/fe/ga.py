"""A small real-coded genetic algorithm, seedable and evaluation-agnostic.

Genes live in [0, 1] and map linearly onto each parameter's bounds. The first
generation is a Latin hypercube sample; every later generation breeds
``population`` children by tournament selection, blend crossover (BLX-alpha)
and Gaussian mutation, then keeps the ``elite`` best individuals seen so far
next to the best children. Every generation therefore costs exactly
``population`` evaluations (document 000: population 30, 2 generations = 60
FE analyses), and the evaluations of one generation are handed over as one
batch so a caller can run them in parallel.

The algorithm only ever sees fitness values (lower is better; ``inf`` marks
an evaluation that failed), so a run is reproducible from its seed as long as
the evaluations are deterministic, however they are scheduled.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Settings:
    population: int = 30
    generations: int = 2
    elite: int = 2
    tournament: int = 3
    crossover_rate: float = 0.9
    blend: float = 0.3  # BLX-alpha: children may land this far outside their parents
    mutation_rate: float | None = None  # per gene; None = 1 / number of genes
    mutation_scale: float = 0.1  # standard deviation in the 2nd generation, fraction of the bounds
    seed: int = 1

    def check(self) -> None:
        if self.population < 2:
            raise ValueError(f"population must be at least 2 (got {self.population})")
        if self.generations < 1:
            raise ValueError(f"generations must be at least 1 (got {self.generations})")
        if not 0 <= self.elite < self.population:
            raise ValueError(
                f"elite must be between 0 and population - 1 (got {self.elite} "
                f"with population {self.population})"
            )
        if not 1 <= self.tournament <= self.population:
            raise ValueError(
                f"tournament size must be between 1 and population (got {self.tournament})"
            )


@dataclass
class Result:
    best: np.ndarray  # parameters, in physical units
    best_fitness: float
    evaluations: int
    history: list[float] = field(default_factory=list)  # best fitness after each generation


#: evaluate(parameter rows in physical units, generation number) -> fitness per row
Evaluate = Callable[[np.ndarray, int], Sequence[float]]


def latin_hypercube(rng: np.random.Generator, rows: int, genes: int) -> np.ndarray:
    strata = np.stack([rng.permutation(rows) for _ in range(genes)], axis=1)
    return (strata + rng.random((rows, genes))) / rows


def optimise(
    evaluate: Evaluate, low: Sequence[float], high: Sequence[float], settings: Settings
) -> Result:
    settings.check()
    low, high = np.asarray(low, dtype=float), np.asarray(high, dtype=float)
    if low.shape != high.shape or np.any(high <= low):
        raise ValueError("every parameter needs bounds with low < high")
    rng = np.random.default_rng(settings.seed)
    genes = len(low)
    mutation_rate = settings.mutation_rate or 1.0 / genes

    def physical(rows: np.ndarray) -> np.ndarray:
        return low + rows * (high - low)

    def fitness_of(rows: np.ndarray, generation: int) -> np.ndarray:
        values = np.asarray(evaluate(physical(rows), generation), dtype=float)
        if values.shape != (len(rows),):
            raise ValueError(f"evaluate returned {values.shape} values for {len(rows)} rows")
        return np.where(np.isnan(values), np.inf, values)

    population = latin_hypercube(rng, settings.population, genes)
    fitness = fitness_of(population, 0)
    evaluations = len(population)
    history = [float(fitness.min())]
    for generation in range(1, settings.generations):
        # non-uniform mutation: steps shrink as the search goes on (explore, then refine)
        scale = settings.mutation_scale * (1.0 - generation / settings.generations)
        children = breed(rng, population, fitness, settings, mutation_rate, scale)
        child_fitness = fitness_of(children, generation)
        evaluations += len(children)
        population, fitness = survivors(
            population, fitness, children, child_fitness, settings.elite
        )
        history.append(float(fitness.min()))
    best = int(np.argmin(fitness))
    return Result(physical(population[best]), float(fitness[best]), evaluations, history)


def tournament(rng: np.random.Generator, fitness: np.ndarray, size: int) -> int:
    entrants = rng.choice(len(fitness), size=size, replace=False)
    return int(entrants[np.argmin(fitness[entrants])])


def breed(
    rng: np.random.Generator,
    population: np.ndarray,
    fitness: np.ndarray,
    settings: Settings,
    mutation_rate: float,
    mutation_scale: float,
) -> np.ndarray:
    children = []
    while len(children) < settings.population:
        a = population[tournament(rng, fitness, settings.tournament)]
        b = population[tournament(rng, fitness, settings.tournament)]
        if rng.random() < settings.crossover_rate:
            for _ in range(2):
                u = rng.uniform(-settings.blend, 1.0 + settings.blend, size=a.shape)
                children.append(a + u * (b - a))
        else:
            children += [a.copy(), b.copy()]
    children = np.asarray(children[: settings.population])
    mutate = rng.random(children.shape) < mutation_rate
    children = children + mutate * rng.normal(0.0, mutation_scale, children.shape)
    return np.clip(children, 0.0, 1.0)


def survivors(population, fitness, children, child_fitness, elite: int):
    """Elitism: the ``elite`` best parents stay; the best children fill the rest."""
    keep = np.argsort(fitness, kind="stable")[:elite]
    best_children = np.argsort(child_fitness, kind="stable")[: len(population) - elite]
    return (
        np.concatenate([population[keep], children[best_children]]),
        np.concatenate([fitness[keep], child_fitness[best_children]]),
    )
