"""Interval rules of the published path (4.1, steps 7 and 10).

Equal-tailed intervals of draws and of a Beta posterior (exactly), and the display rule
"intervals overlap, reported as tied", which is not an equivalence test.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from prereg.stats._dist import beta_ppf


def equal_tailed(draws: Any, level: float) -> tuple[Any, Any]:
    """Equal-tailed interval of draws along the last axis."""
    d = np.asarray(draws, dtype=np.float64)
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(d, [tail, 1.0 - tail], axis=-1)
    return low, high


def beta_interval(alpha: Any, beta: Any, level: float) -> tuple[Any, Any]:
    """Equal-tailed interval of Beta(alpha, beta) (a stage posterior), exactly.

    A zero shape parameter is the limiting point mass (alpha = 0: at 0; beta = 0: at 1).
    """
    a = np.asarray(alpha, dtype=np.float64)
    b = np.asarray(beta, dtype=np.float64)
    tail = (1.0 - level) / 2.0
    safe_a, safe_b = np.where(a > 0, a, 1.0), np.where(b > 0, b, 1.0)
    out = []
    for q in (tail, 1.0 - tail):
        v = np.where(a <= 0, 0.0, np.where(b <= 0, 1.0, beta_ppf(q, safe_a, safe_b)))
        out.append(v if v.ndim else float(v))
    return out[0], out[1]


def intervals_overlap(lows: Any, highs: Any) -> NDArray[np.bool_]:
    """Pairwise overlap of intervals: the display rule "intervals overlap, reported as tied".

    A display rule, not an equivalence test (4.1, step 10). Closed intervals; the
    diagonal is True.
    """
    lo = np.asarray(lows, dtype=np.float64).ravel()
    hi = np.asarray(highs, dtype=np.float64).ravel()
    return np.asarray((lo[:, None] <= hi[None, :]) & (lo[None, :] <= hi[:, None]))
