"""The intra-prompt correlation rho of the published path (4.1, step 2).

The one-way ANOVA estimator from per-prompt counts, and the order in which a stage's cell
falls back from its own estimate to the pooled one and then to the stage default.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from prereg.stats._validate import counts, same_length
from prereg.stats.clustering import icc_binary

#: The published path's default intra-prompt correlations per stage (4.1, step 2).
RHO_DEFAULTS: dict[str, float] = {
    "surfaced": 0.6,
    "selected": 0.8,
    "invoked": 0.6,
    "executed": 0.6,
    "completed": 0.6,
}


def grouped_icc(successes: Any, trials: Any) -> float:
    """:func:`prereg.stats.icc_binary` from per-group counts (nan when not estimable,
    e.g. no group with trials).

    ValueError naming the argument for NaN, infinite, negative or fractional counts
    (a negative count was read as 0), no groups, lengths that differ and successes above
    their trials."""
    y = counts(successes, "successes", allow_empty=False).ravel()
    n = counts(trials, "trials", allow_empty=False).ravel()
    same_length(y, "successes", n, "trials")
    if np.any(y > n):
        i = int(np.argmax(y > n))
        raise ValueError(f"successes: {y[i]} exceeds its trials ({n[i]}) in group {i}")
    keep = n > 0
    y, n = y[keep], n[keep]
    if y.size == 0:
        return math.nan
    groups = np.repeat(np.arange(y.size), n)
    starts = np.repeat(np.cumsum(n) - n, n)
    outcomes = (np.arange(int(n.sum())) - starts) < np.repeat(y, n)
    return icc_binary(outcomes.astype(np.float64), groups)


def _rho(
    y: NDArray[np.int64], n: NDArray[np.int64], pooled: float, default: float
) -> tuple[float, str]:
    own = grouped_icc(y, n)
    if not math.isnan(own):
        return own, "cell"
    if not math.isnan(pooled):
        return pooled, "pooled"
    return default, "default"
