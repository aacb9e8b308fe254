"""The normal, Student t and beta quantiles and tails the statistics use, from scipy.special.

``scipy.stats`` computes these very functions by calling ``scipy.special`` (``norm.ppf``
is ``ndtri``, ``t.ppf`` is ``stdtrit``, ``t.cdf`` is ``stdtr``, ``beta.ppf`` inverts the
regularised incomplete beta function), but importing ``scipy.stats`` costs about half a
second, and ``analyse`` pays it again in every process it forks
(:mod:`prereg.core.forked`). These are the same values (a test compares them with
``scipy.stats`` bit for bit over a grid), with ``scipy.stats``' handling of the ends of
the range: a probability of 0 or 1 gives the end of the support, one outside [0, 1]
gives NaN. Where ``betaincinv`` finds no finite inverse for valid arguments (extreme
tails with a huge shape parameter), the quantile is ``scipy.stats``' own.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from prereg.stats._scipy import special
from prereg.stats._scipy import stats as sps


def norm_ppf(q: Any) -> Any:
    """The standard normal quantile (``scipy.stats.norm.ppf``)."""
    return special.ndtri(q)


def norm_cdf(x: Any) -> Any:
    """The standard normal distribution function (``scipy.stats.norm.cdf``)."""
    return special.ndtr(x)


def norm_sf(x: Any) -> Any:
    """The standard normal upper tail (``scipy.stats.norm.sf``: ``Phi(-x)``)."""
    return special.ndtr(-np.asarray(x, dtype=np.float64))[()]


def t_ppf(q: Any, df: Any) -> Any:
    """Student's t quantile (``scipy.stats.t.ppf``); ``stdtrit`` is not asked for the
    ends, which are the support's (minus and plus infinity)."""
    q, df = np.broadcast_arrays(np.asarray(q, dtype=np.float64), np.asarray(df, dtype=np.float64))
    inside = special.stdtrit(df, np.where((q > 0) & (q < 1), q, 0.5))
    out = np.where(q == 0, -np.inf, np.where(q == 1, np.inf, inside))
    valid = (q >= 0) & (q <= 1) & (df > 0)  # False for NaN
    return np.where(valid, out, np.nan)[()]


def t_cdf(x: Any, df: Any) -> Any:
    """Student's t distribution function (``scipy.stats.t.cdf``)."""
    return special.stdtr(df, x)


def t_sf(x: Any, df: Any) -> Any:
    """Student's t upper tail (``scipy.stats.t.sf``: ``F(-x)`` by symmetry)."""
    return special.stdtr(df, -np.asarray(x, dtype=np.float64))[()]


def beta_ppf(q: Any, a: Any, b: Any) -> Any:
    """The Beta(a, b) quantile (``scipy.stats.beta.ppf``)."""
    value = np.asarray(special.betaincinv(a, b, q), dtype=np.float64)
    q, a, b = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (q, a, b)))
    lost = ~np.isfinite(value) & (a > 0) & (b > 0) & (q >= 0) & (q <= 1)
    if np.any(lost):  # rare: scipy.stats' own inversion (boost's ibeta_inv)
        return sps.beta.ppf(q, a, b)
    return value[()]
