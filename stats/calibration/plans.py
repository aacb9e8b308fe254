"""The registered analysis as the simulation applies it: tests, stopping rule, family.

:func:`~prereg.stats.calibration.driver.calibrate` is handed these plans (built from a
registration by :mod:`prereg.registry.calibration`); every evaluator reads its test's
conventions (sides, aggregate, resampling unit, levels, seed) from them, so they live
apart from the code that simulates or judges.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from prereg.stats._validate import count, probability

BINARY_AGGREGATES = ("majority", "all", "any", "first")
SIDES = ("two-sided", "greater", "less")
FAMILY_METHODS = ("none", "holm", "bh", "e-bh")


@dataclass(frozen=True)
class PlannedTest:
    """A registered test as the simulation applies it (the report's conventions).

    ``units`` codes each task's resampling unit (0..G-1 in order of first appearance);
    None resamples tasks. ``level`` is the registered interval level (None: 1 - alpha
    two-sided, 1 - 2 alpha one-sided). ``seed`` is the analysis seed (the registration's
    design seed, as ``analyse`` uses it).
    """

    label: str
    test: str
    alpha: float = 0.05
    sides: str = "two-sided"
    aggregate: str = "majority"
    margin: float | None = None
    level: float | None = None
    draws: int = 10_000
    units: NDArray[np.intp] | None = field(default=None, compare=False)
    unit_name: str = "task"
    seed: int = 0
    prior: tuple[float, float] = (1.0, 1.0)
    #: the tasks (indices into the population's prompts) the test sees; None: all of them
    subset: NDArray[np.intp] | None = field(default=None, compare=False)
    #: a test of a registered contrast: one weight per arm (cell) it combines; None: a
    #: comparison of two arms
    weights: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        """ValueError naming the field the simulation cannot apply (a level or alpha
        outside (0, 1), unknown sides, a non-positive draw count, a negative seed, non-finite
        or all-zero contrast weights)."""
        probability(self.alpha, "alpha")
        if self.level is not None:
            probability(self.level, "level")
        if self.sides not in SIDES:
            raise ValueError(f"sides must be one of {', '.join(SIDES)}, got {self.sides!r}")
        if count(self.draws, "draws") < 1:
            raise ValueError(f"draws must be a positive integer, got {self.draws!r}")
        count(self.seed, "seed")
        if self.weights is not None and (
            not self.weights
            or not all(math.isfinite(w) for w in self.weights)
            or not any(self.weights)
        ):
            raise ValueError(f"weights must be finite and not all zero, got {self.weights!r}")

    @property
    def interval_level(self) -> float:
        if self.level is not None:
            return self.level
        return 1.0 - self.alpha if self.sides == "two-sided" else 1.0 - 2.0 * self.alpha

    @property
    def decision_level(self) -> float:
        return 1.0 - self.alpha if self.sides == "two-sided" else 1.0 - 2.0 * self.alpha

    @property
    def binary_aggregate(self) -> str:
        return self.aggregate if self.aggregate in BINARY_AGGREGATES else "majority"


@dataclass(frozen=True)
class MonitorPlan:
    """A registered stopping rule: the beta-mixture e-process over the tasks in order."""

    label: str = "stopping"
    threshold: float = 20.0
    min_prompts: int = 40
    prior: tuple[float, float] = (1.0, 1.0)
    aggregate: str = "majority"
    subset: NDArray[np.intp] | None = field(default=None, compare=False)


@dataclass(frozen=True)
class FamilyPlan:
    """The registered multiplicity family as the simulation applies it.

    ``members`` are the family's hypotheses, each tested as the report tests it; None
    for a member not simulated (counted in m, never rejecting; ``note`` says which).
    ``method`` is the registered rule (holm, bh, e-bh or none) at level ``q``.

    ``arms``: None for a family of two-arm comparisons (members are simulated on the
    calibration's pair of arms); for a family of contrasts, the number K of arms every
    member's ``weights`` are given over (one weight per arm of the registration, 0 for an
    arm a contrast does not weigh), so that the members are simulated together on one set
    of K arms, as the report computes every contrast from the same runs.
    """

    label: str
    method: str
    q: float
    family: str
    members: tuple[PlannedTest | None, ...]
    note: str = ""
    arms: int | None = None

    def __post_init__(self) -> None:
        if self.method not in FAMILY_METHODS:
            raise ValueError(
                f"method must be one of {', '.join(FAMILY_METHODS)}, got {self.method!r}"
            )
        probability(self.q, "q")
        if not self.members:
            raise ValueError("members is empty: a family needs at least one member")
        if self.arms is None:
            return
        if count(self.arms, "arms") < 2:
            raise ValueError(f"arms must be at least 2 for a family of contrasts, got {self.arms}")
        for member in self.members:
            if member is not None and (member.weights is None or len(member.weights) != self.arms):
                raise ValueError(
                    f"members: {member.label!r} must give one weight per arm ({self.arms}) "
                    "in a family of contrasts"
                )


def family_levels(method: str, q: float, m: int) -> list[tuple[int, float]]:
    """(k, alpha_k): the family rejects something under the global null iff, for some
    listed k, at least k members reject at alpha_k. Holm rejects something iff the
    smallest p is at most q/m; Benjamini-Hochberg iff p_(k) <= k q / m for some k; e-BH
    iff e_(k) >= m / (k q) for some k (a member rejecting at alpha_k is e >= 1/alpha_k);
    ``none`` iff some p <= q. ValueError for an unknown method, q outside (0, 1) or m < 1."""
    if method not in FAMILY_METHODS:
        raise ValueError(f"method must be one of {', '.join(FAMILY_METHODS)}, got {method!r}")
    q = probability(q, "q")
    if count(m, "m") < 1:
        raise ValueError(f"m must be a positive integer, got {m!r}")
    if method == "none":
        return [(1, q)]
    if method == "holm":
        return [(1, q / m)]
    return [(k, k * q / m) for k in range(1, m + 1)]
