"""The paired design's figures in closed form: its minimum detectable effect, the prompts
for an MDE, and the fewest discordant pairs the exact McNemar test needs.

Plain floats and the standard library only (no numpy, no scipy): ``prereg plan`` from
options computes these and nothing else, so it starts without the numerical libraries.
:mod:`prereg.stats.planning` re-exports them beside the exact and simulated figures.
"""

from __future__ import annotations

import math
from statistics import NormalDist

from prereg.stats._validate import at_least, positive, probability

__all__ = ["mde_paired", "prompts_for_mde", "min_discordant"]


#: The standard normal (its quantile by Wichura's AS 241, within a few ulps of scipy's
#: ``ndtri``): a plan from options then needs no scipy, whose import costs ``prereg plan``
#: about 0.3 s of its start-up.
_NORMAL = NormalDist()


def _z_sum(alpha: float, power: float, sides: int = 2) -> float:
    alpha = probability(alpha, "alpha")
    power = probability(power, "power")
    if isinstance(sides, bool) or sides not in (1, 2):
        raise ValueError(f"sides must be 1 or 2, got {sides!r}")
    return _NORMAL.inv_cdf(1.0 - alpha / sides) + _NORMAL.inv_cdf(power)


def _ceil(x: float) -> int:
    """Ceiling that ignores floating-point dust just above an integer."""
    return int(math.ceil(x - 1e-9 * max(1.0, abs(x))))


def mde_paired(
    sigma_d: float,
    prompts: int,
    alpha: float = 0.05,
    power: float = 0.8,
    sigma_run: float = 0.0,
    runs_per_arm: int = 1,
) -> float:
    """Minimum detectable paired difference (two-sided test, normal approximation).

        MDE = (z_{1-alpha/2} + z_power) sqrt(sigma_d^2 / prompts + 2 sigma_run^2 / R)

    with sigma_d the SD of per-prompt differences and sigma_run an independent SD of
    each run's rate, R = ``runs_per_arm`` replicate runs per arm. The run term does not
    shrink with prompts: it is a floor on the MDE. Returned as a proportion (0.103 is
    10.3 points). Reference: InvokeRank method, section 7.8; Chow, Shao and Wang (2008),
    Sample Size Calculations in Clinical Research, 3.2.
    """
    sigma_d = positive(sigma_d, "sigma_d")
    sigma_run = positive(sigma_run, "sigma_run", allow_zero=True)
    prompts = at_least(prompts, "prompts", 1)
    runs_per_arm = at_least(runs_per_arm, "runs_per_arm", 1)
    z = _z_sum(alpha, power)
    return z * math.sqrt(sigma_d**2 / prompts + 2.0 * sigma_run**2 / runs_per_arm)


def prompts_for_mde(
    sigma_d: float,
    mde: float,
    alpha: float = 0.05,
    power: float = 0.8,
    sigma_run: float = 0.0,
    runs_per_arm: int = 1,
) -> float:
    """Fewest prompts whose :func:`mde_paired` is at most ``mde`` (the inverse, rounded up).

        prompts = ceil( sigma_d^2 / ((mde / z)^2 - 2 sigma_run^2 / R) ),
        z = z_{1-alpha/2} + z_power.

    Returns ``math.inf`` when the run component alone reaches or exceeds the MDE
    ((mde / z)^2 <= 2 sigma_run^2 / R): no number of prompts is enough, only more runs
    per arm are. Otherwise an int.
    """
    sigma_d = positive(sigma_d, "sigma_d")
    mde = positive(mde, "mde")
    sigma_run = positive(sigma_run, "sigma_run", allow_zero=True)
    runs_per_arm = at_least(runs_per_arm, "runs_per_arm", 1)
    z = _z_sum(alpha, power)
    room = (mde / z) ** 2 - 2.0 * sigma_run**2 / runs_per_arm
    if room <= 0.0:
        return math.inf
    return max(1, _ceil(sigma_d**2 / room))


def min_discordant(alpha: float = 0.05, sides: int = 2) -> int:
    """Fewest discordant pairs, all favouring one arm, that reach significance.

    With m discordant pairs all one way the exact McNemar p-value is
    sides * 2^-m (capped at 1), so the answer is the smallest m with
    sides * 2^-m <= alpha. At alpha = 0.05, two-sided: 6 (p = 0.03125; five give
    0.0625). Fewer discordant pairs can never be significant, whatever the split:
    a registration can pre-commit to "inconclusive" below this count. ``alpha`` must
    lie in (0, 1) (ValueError naming it).
    """
    alpha = probability(alpha, "alpha")
    if isinstance(sides, bool) or sides not in (1, 2):
        raise ValueError(f"sides must be 1 or 2, got {sides!r}")
    m = max(0, math.ceil(math.log2(sides / alpha)) - 1)
    while min(1.0, sides * 0.5**m) > alpha:
        m += 1
    return m
