"""The two-sample permutation test of per-unit means, as the simulation computes it.

A departure from the report's computation: the test is computed exactly
(hypergeometric) for binary per-unit values, which is what the registered function
computes by enumeration, or estimates by Monte Carlo above 10^6 relabelings; for other
values by 999 random relabelings per data set, p = (1 + #) / 1000, which keeps the level
(Phipson and Smyth 2010) and loses a little power.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from prereg.stats._scipy import stats as sps
from prereg.stats.calibration.outcome import Outcome
from prereg.stats.calibration.plans import PlannedTest
from prereg.stats.calibration.reductions import _per_unit
from prereg.stats.calibration_model import BoolArray, FloatArray, Population, aggregate

#: random relabelings per data set for the permutation test on non-binary values
PERMUTATIONS = 999


def _hypergeometric_p(
    s: NDArray[np.int64], total: NDArray[np.int64], g: int, sides: str
) -> FloatArray:
    """Exact permutation p value of mean(x) - mean(y) for binary values, groups of g each:
    X ~ Hypergeometric(2g, total, g) successes fall in the first group."""
    k = np.arange(g + 1)[None, :]
    pmf = sps.hypergeom.pmf(k, 2 * g, total[:, None], g)
    stat = 2 * k - total[:, None]
    obs = (2 * s - total)[:, None]
    if sides == "greater":
        tail = stat >= obs
    elif sides == "less":
        tail = stat <= obs
    else:
        tail = np.abs(stat) >= np.abs(obs)
    out: FloatArray = np.minimum(1.0, np.sum(pmf * tail, axis=1))
    return out


def _permutation(
    plan: PlannedTest,
    yc: BoolArray,
    yt: BoolArray,
    truth: float,
    pop: Population,
    relabel: Callable[[int], NDArray[np.intp]],
) -> Outcome:
    """The two-sample permutation test of per-unit means (treatment vs control, unpaired,
    as registered): exact (hypergeometric) for binary values; otherwise 999 random
    relabelings, the same for every data set (the registered function, seeded with the
    registration's seed, also relabels every data set of a size alike), p = (1 + #) / 1000.
    Ties within 1e-10 of the pooled values' total magnitude count as extreme."""
    ctl = _per_unit(aggregate(yc, plan.aggregate), plan.units)
    trt = _per_unit(aggregate(yt, plan.aggregate), plan.units)
    g = ctl.shape[1]
    direction = np.sign(trt.mean(axis=1) - ctl.mean(axis=1)).astype(np.int64)
    binary = np.all((ctl == 0.0) | (ctl == 1.0), axis=1) & np.all(
        (trt == 0.0) | (trt == 1.0), axis=1
    )
    pvals = np.ones(ctl.shape[0])
    if binary.any():
        s = trt[binary].sum(axis=1).astype(np.int64)
        total = s + ctl[binary].sum(axis=1).astype(np.int64)
        pvals[binary] = _hypergeometric_p(s, total, g, plan.sides)
    rest = np.flatnonzero(~binary)
    if rest.size:
        first = relabel(g)  # PERMUTATIONS x g indices into the pooled values
        pooled = np.concatenate([trt[rest], ctl[rest]], axis=1)
        half = 0.5 * pooled.sum(axis=1)
        obs = trt[rest].sum(axis=1) - half
        tol = 1e-10 * np.maximum(np.abs(pooled).sum(axis=1), 1e-300)
        for lo in range(0, rest.size, 64):
            sl = slice(lo, lo + 64)
            stat = pooled[sl][:, first].sum(axis=2) - half[sl, None]
            o, t = obs[sl, None], tol[sl, None]
            if plan.sides == "greater":
                extreme = stat >= o - t
            elif plan.sides == "less":
                extreme = stat <= o + t
            else:
                extreme = np.abs(stat) >= np.abs(o) - t
            pvals[rest[sl]] = (1.0 + extreme.sum(axis=1)) / (1.0 + PERMUTATIONS)
    return Outcome(pvals <= plan.alpha, direction, None)
