"""The intra-prompt correlation rho of the published path (4.1, step 2).

The one-way ANOVA estimator from per-prompt counts, and the order in which a stage's cell
falls back from its own estimate to the pooled one and then to the stage default.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

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
    """:func:`prereg.stats.icc_binary` from per-group counts (nan when not estimable)."""
    y = np.asarray(successes, dtype=np.int64).ravel()
    n = np.asarray(trials, dtype=np.int64).ravel()
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
