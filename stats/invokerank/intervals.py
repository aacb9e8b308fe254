"""Interval rules of the published path (4.1, steps 7 and 10).

Equal-tailed intervals of draws and of a Beta posterior (exactly), and the display rule
"intervals overlap, reported as tied", which is not an equivalence test.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from prereg.stats._dist import beta_ppf
from prereg.stats._validate import array, broadcastable, probability, same_length


def equal_tailed(draws: Any, level: float) -> tuple[Any, Any]:
    """Equal-tailed interval of draws along the last axis.

    ValueError naming the argument for no draws (along the last axis), a NaN or infinite
    draw and a level outside (0, 1)."""
    level = probability(level, "level")
    d = array(draws, "draws")
    if d.ndim == 0 or d.shape[-1] == 0:
        raise ValueError(f"draws is empty along its last axis (shape {d.shape})")
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(d, [tail, 1.0 - tail], axis=-1)
    return low, high


def beta_interval(alpha: Any, beta: Any, level: float) -> tuple[Any, Any]:
    """Equal-tailed interval of Beta(alpha, beta) (a stage posterior), exactly.

    A zero shape parameter is the limiting point mass (alpha = 0: at 0; beta = 0: at 1).
    ValueError naming the argument for a NaN, infinite or negative shape parameter, no
    parameters, shapes that do not broadcast and a level outside (0, 1).
    """
    level = probability(level, "level")
    a = array(alpha, "alpha", low=0.0)
    b = array(beta, "beta", low=0.0)
    broadcastable(alpha=a, beta=b)
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
    diagonal is True. ValueError naming the argument for no intervals, a NaN or
    infinite bound, as many lows as highs not given (numpy would broadcast them into
    intervals nobody printed) and a low above its high.
    """
    lo = array(lows, "lows").ravel()
    hi = array(highs, "highs").ravel()
    same_length(lo, "lows", hi, "highs")
    if np.any(lo > hi):
        i = int(np.argmax(lo > hi))
        raise ValueError(f"lows: {lo[i]:g} is above its high {hi[i]:g} (interval {i})")
    return np.asarray((lo[:, None] <= hi[None, :]) & (lo[None, :] <= hi[:, None]))
