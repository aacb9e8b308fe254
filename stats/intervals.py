"""Binomial proportion intervals."""

from __future__ import annotations

from typing import Any

import numpy as np

from prereg.stats._dist import beta_ppf
from prereg.stats._validate import array, broadcastable, probability, scalar_or_array
from prereg.stats.results import ProportionInterval

__all__ = ["jeffreys_interval"]


def jeffreys_interval(
    successes: Any, trials: Any, level: float = 0.90, deff: Any = 1.0
) -> ProportionInterval:
    """Equal-tailed Jeffreys interval on counts deflated by a design effect.

    With effective counts x = successes / deff and m = trials / deff, the interval is
    the (1 - level)/2 and (1 + level)/2 quantiles of Beta(x + 1/2, m - x + 1/2), with
    the Brown-Cai-DasGupta boundary rule: the lower bound is 0 when successes = 0 and
    the upper bound is 1 when successes = trials. The estimate is successes / trials
    (nan for zero trials, where the interval is [0, 1]). Inputs broadcast; array inputs
    give array fields. ValueError naming the argument for NaN, infinity, empty or
    negative counts, shapes that do not broadcast, deff <= 0 or a level outside (0, 1).
    References: Jeffreys (1946); Brown, Cai and DasGupta (2001),
    Stat Sci 16:101-133; Kish (1965) for the deflation by the design effect.
    """
    level = probability(level, "level")
    x = array(successes, "successes", low=0)
    n = array(trials, "trials", low=0)
    de = array(deff, "deff")
    broadcastable(successes=x, trials=n, deff=de)
    if np.any(x > n):
        raise ValueError("successes cannot exceed trials")
    if np.any(de <= 0):
        raise ValueError(f"deff must be positive, got {float(de[de <= 0].ravel()[0]):g}")
    x, n, de = np.broadcast_arrays(x, n, de)
    xe = x / de
    ne = n / de
    a = xe + 0.5
    b = ne - xe + 0.5
    tail = (1.0 - level) / 2.0
    low = np.where(x <= 0, 0.0, beta_ppf(tail, a, b))
    high = np.where(x >= n, 1.0, beta_ppf(1.0 - tail, a, b))
    with np.errstate(invalid="ignore", divide="ignore"):
        est = np.where(n > 0, x / np.where(n > 0, n, 1.0), np.nan)
    return ProportionInterval(
        estimate=scalar_or_array(est),
        low=scalar_or_array(low),
        high=scalar_or_array(high),
        level=level,
        successes=scalar_or_array(x),
        trials=scalar_or_array(n),
        deff=scalar_or_array(de),
        effective_successes=scalar_or_array(xe),
        effective_trials=scalar_or_array(ne),
        method="Jeffreys equal-tailed (boundary-corrected), counts deflated by deff",
        n=int(np.sum(n)),
    )
