"""Paired binary comparisons: exact McNemar, Tango's score interval, and TOST."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from prereg.stats._dist import norm_cdf, norm_ppf, norm_sf, t_cdf, t_ppf, t_sf
from prereg.stats._scipy import optimize, special
from prereg.stats._validate import count, positive, probability, refuse_text, vector
from prereg.stats.results import DifferenceInterval, McNemarResult, TOSTResult

__all__ = [
    "mcnemar_exact",
    "tango_interval",
    "tost_paired",
    "equivalence_margin",
    "exact_equivalence_region",
    "upper_region",
]


#: Up to this many discordant pairs the McNemar p-value is an exact sum of integers
#: (about 30 ms at the bound); beyond it, the binomial distribution function.
EXACT_TAIL_UP_TO = 20_000


def _finite(value: Any, name: str) -> float:
    """A finite float, or ValueError naming ``name`` (text, NaN and infinity refused)."""
    refuse_text(value, name)
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a finite number, got {value!r}") from None
    if not math.isfinite(v):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return v


def _positive_count(value: Any, name: str) -> int:
    """A positive integer, or ValueError naming ``name``."""
    v = count(value, name)
    if v == 0:
        raise ValueError(f"{name} must be positive, got 0")
    return v


def binomial_half_tail(k: int, m: int) -> float:
    """``min(1, 2 P(X <= k))`` for ``X ~ Bin(m, 1/2)``: the two-sided exact McNemar p-value.

    Up to :data:`EXACT_TAIL_UP_TO` pairs it is ``sum_{i <= k} C(m, i) / 2^(m-1)`` in
    integers, rounded once (Python's integer division is correctly rounded), so it is
    exact to the last bit where a floating-point incomplete beta function loses digits
    (at m = 100,000 the 13th); beyond, ``scipy.special.bdtr``. ValueError unless k and m
    are counts with k <= m.
    """
    k = count(k, "k")
    m = count(m, "m")
    if k > m:
        raise ValueError(f"k = {k} exceeds m = {m}")
    if m > EXACT_TAIL_UP_TO:
        return min(1.0, 2.0 * float(special.bdtr(k, m, 0.5)))
    return binomial_half_tails(m, k)[k]


def binomial_half_tails(m: int, up_to: int | None = None) -> list[float]:
    """:func:`binomial_half_tail` of ``m`` for k = 0 .. ``up_to`` (default m), in one pass
    over the binomial coefficients (exact up to :data:`EXACT_TAIL_UP_TO` pairs); ``up_to``
    past m stops at m. ValueError unless m and ``up_to`` are counts."""
    m = count(m, "m")
    last = m if up_to is None else min(count(up_to, "up_to"), m)
    if m > EXACT_TAIL_UP_TO:
        ks = np.arange(last + 1)
        return [min(1.0, float(v)) for v in 2.0 * special.bdtr(ks, m, 0.5)]
    whole = 2 ** (m - 1) if m else 1
    term = total = 1
    out = [min(1.0, total / whole)]
    for i in range(last):
        term = term * (m - i) // (i + 1)
        total += term
        out.append(min(1.0, total / whole))
    return out


def mcnemar_exact(b: int, c: int) -> McNemarResult:
    """Two-sided exact McNemar test on the discordant counts.

    ``b`` counts pairs where only the first arm succeeded, ``c`` pairs where only the
    second did. Conditional on the ``m = b + c`` discordant pairs, ``b ~ Bin(m, 1/2)``
    under the null hypothesis of equal marginal success rates, and

        p = min(1, 2 * P(X <= min(b, c))),   X ~ Bin(m, 1/2).

    Doubling is exact here because the null distribution is symmetric (it coincides
    with the "sum of outcomes no more likely than the observed one" rule). ``p = 1``
    when ``b + c == 0``. References: McNemar (1947); Mosteller (1952); Fagerland,
    Lydersen and Laake (2013), BMC Med Res Methodol 13:91.
    """
    b = count(b, "b")
    c = count(c, "c")
    m = b + c
    if m == 0:
        return McNemarResult(
            statistic=0.0,
            pvalue=1.0,
            estimate=math.nan,
            b=0,
            c=0,
            n=0,
            method="McNemar exact (conditional binomial), two-sided",
        )
    k = min(b, c)
    p = binomial_half_tail(k, m)
    return McNemarResult(
        statistic=float(k),
        pvalue=p,
        estimate=b / m,
        b=b,
        c=c,
        n=m,
        method="McNemar exact (conditional binomial), two-sided",
    )


# ---------------------------------------------------------------------------
# Tango's score statistic for a difference of paired proportions
# ---------------------------------------------------------------------------


def _tango_z(b: int, c: int, n: int, delta0: float) -> float:
    """Tango's (1998) score statistic for H0: delta = delta0.

    delta = q12 - q21 with q12 = P(first only), q21 = P(second only). The constrained
    maximum-likelihood estimate of q21 under delta0 is the larger root of
    A x^2 + B x + C = 0 with A = 2n, B = -b - c + (2n - b + c) delta0,
    C = -c delta0 (1 - delta0), and

        Z = (b - c - n delta0) / sqrt(n (2 q21 + delta0 (1 - delta0))).
    """
    a_ = 2.0 * n
    b_ = -b - c + (2.0 * n - b + c) * delta0
    c_ = -c * delta0 * (1.0 - delta0)
    disc = max(b_ * b_ - 4.0 * a_ * c_, 0.0)
    q21 = (math.sqrt(disc) - b_) / (2.0 * a_)
    # q21 >= max(0, -delta0) and q12 = q21 + delta0 >= 0; guard against rounding
    q21 = min(max(q21, max(0.0, -delta0)), 1.0)
    var = n * (2.0 * q21 + delta0 * (1.0 - delta0))
    num = b - c - n * delta0
    if var <= 0.0:
        if num == 0:
            return 0.0
        return math.copysign(math.inf, num)
    return num / math.sqrt(var)


def _tango_bounds(b: int, c: int, n: int, z: float) -> tuple[float, float]:
    """Solve Z(delta) = +z (lower) and Z(delta) = -z (upper); Z decreases in delta."""
    est = (b - c) / n
    eps = 1e-13
    if est <= -1.0:
        low = -1.0
    else:
        lo_end = -1.0 + eps
        if _tango_z(b, c, n, lo_end) - z <= 0.0:
            low = -1.0
        else:
            low = optimize.brentq(
                lambda d: _tango_z(b, c, n, d) - z,
                lo_end,
                est,
                xtol=1e-14,
                rtol=4 * np.finfo(float).eps,
                maxiter=500,
            )
    if est >= 1.0:
        high = 1.0
    else:
        hi_end = 1.0 - eps
        if _tango_z(b, c, n, hi_end) + z >= 0.0:
            high = 1.0
        else:
            high = optimize.brentq(
                lambda d: _tango_z(b, c, n, d) + z,
                est,
                hi_end,
                xtol=1e-14,
                rtol=4 * np.finfo(float).eps,
                maxiter=500,
            )
    return float(low), float(high)


def tango_interval(b: int, c: int, n: int, level: float = 0.95) -> DifferenceInterval:
    """Tango's asymptotic score interval for a difference of paired proportions.

    ``b`` pairs succeed on the first arm only, ``c`` on the second only, ``n`` pairs in
    all; the estimate is (b - c) / n. The interval is {delta0 : |Z(delta0)| <= z} with
    Z Tango's score statistic (see ``_tango_z``), z = z_{(1+level)/2}. Unlike the Wald
    interval it is not degenerate at b = c = 0: there it is +-z^2 / (n + z^2).
    References: Tango (1998), Stat Med 17:891-908; Fagerland, Lydersen and Laake (2014),
    Stat Methods Med Res 23:3 (recommended interval for the paired difference).
    """
    b = count(b, "b")
    c = count(c, "c")
    n = count(n, "n")
    level = probability(level, "level")
    if n == 0:
        raise ValueError("n must be positive")
    if b + c > n:
        raise ValueError(f"b + c = {b + c} exceeds n = {n}")
    z = float(norm_ppf(0.5 + level / 2.0))
    low, high = _tango_bounds(b, c, n, z)
    return DifferenceInterval(
        estimate=(b - c) / n,
        low=low,
        high=high,
        level=level,
        b=b,
        c=c,
        n=n,
        method="Tango score interval (paired proportions)",
    )


# ---------------------------------------------------------------------------
# exact unconditional test of H0: delta >= delta0 for paired binary outcomes
# ---------------------------------------------------------------------------

#: points of the nuisance grid (discordance rate psi) before local refinement
_PSI_GRID = 201
#: rates spaced 1/n just above |delta0|, where the tail's peaks are narrow at large n
_PSI_FINE = 40
#: local maxima of the grid refined by a bounded scalar search
_PSI_REFINE = 3
#: points of each local refinement round
_PSI_LOCAL = 25


def _tango_z_grid(n: int, delta0: float) -> NDArray[np.float64]:
    """Tango's Z(b, c; delta0) for every outcome b + c <= n (as ``_tango_z``), vectorised.

    Returned as Tango's statistic made monotone, Z'(b, c) = max of Z(b', c') over
    b' <= b, c' >= c (Tango's Z is already increasing in b and decreasing in c, so this
    changes nothing but guarantees it): every tail {Z' <= z} is then, for each c, a
    prefix b <= b*(c) with b*(c) nondecreasing in c (Barnard's convexity), so the
    null probability of a tail is largest on the boundary delta = delta0. Outcomes with
    b + c > n are +inf.
    """
    b = np.arange(n + 1, dtype=np.float64)[:, None]
    c = np.arange(n + 1, dtype=np.float64)[None, :]
    valid = (b + c) <= n
    a_ = 2.0 * n
    b_ = -b - c + (2.0 * n - b + c) * delta0
    c_ = -c * delta0 * (1.0 - delta0)
    disc = np.maximum(b_ * b_ - 4.0 * a_ * c_, 0.0)
    q21 = np.clip((np.sqrt(disc) - b_) / (2.0 * a_), max(0.0, -delta0), 1.0)
    var = n * (2.0 * q21 + delta0 * (1.0 - delta0))
    num = b - c - n * delta0
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(
            var > 0.0,
            num / np.sqrt(np.where(var > 0.0, var, 1.0)),
            np.where(num == 0.0, 0.0, np.sign(num) * np.inf),
        )
    z = np.where(valid, z, -np.inf)
    z = np.maximum.accumulate(z, axis=0)
    z = np.maximum.accumulate(z[:, ::-1], axis=1)[:, ::-1]
    return np.where(valid, z, np.inf)


#: Hoeffding: P(C = c) <= exp(-2 (c - n p)^2 / n) for C ~ Bin(n, p), below 1e-17 once
#: |c - n p| > 4.43 sqrt(n) (2 x 4.43^2 = 39.25 > ln 1e17 = 39.14)
_HOEFFDING = 4.43


@functools.lru_cache(maxsize=16)
def _log_choose(n: int) -> NDArray[np.float64]:
    """log C(n, c) for c = 0 .. n (shared: never modify it)."""
    c = np.arange(n + 1, dtype=np.float64)
    out: NDArray[np.float64] = (
        special.gammaln(n + 1.0) - special.gammaln(c + 1.0) - special.gammaln(n - c + 1.0)
    )
    out.setflags(write=False)
    return out


#: stands for log 0 in products with counts: finite, so 0 x log 0 = 0 (as
#: ``scipy.special.xlogy``) and k x log 0 (k >= 1) still underflows exp to 0
_LOG_ZERO = -1e300


def _logs(p: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """log p and log(1 - p) as columns, :data:`_LOG_ZERO` standing for log 0."""
    with np.errstate(divide="ignore"):
        log_p = np.maximum(np.log(p), _LOG_ZERO)[:, None]
        log_1p = np.maximum(np.log1p(-p), _LOG_ZERO)[:, None]
    return log_p, log_1p


def _windows(values: NDArray[Any], first: NDArray[np.int64], width: int) -> NDArray[Any]:
    """values[first[i] + w] for w < width in row i (every first[i] + width <= size)."""
    stride = values.strides[0]
    view = np.lib.stride_tricks.as_strided(
        values, shape=(values.shape[0] - width + 1, width), strides=(stride, stride)
    )
    out: NDArray[Any] = view[first]
    return out


class _Chain:
    """The conditional distribution functions F(c) = P(Bin(n - c, q) <= k(c)) of one
    tail, column after column, without an incomplete beta function per column.

    With k(c) = b*(c) clipped to [-1, n - c], a column is empty (k = -1, F = 0), full
    (k = n - c, F = 1) or partial. Between neighbouring columns, removing a trial and
    raising the bound,

        F(c + 1) = F(c) + q P(Bin(n - c - 1, q) = k(c))
                        + sum_{j = k(c) + 1}^{k(c + 1)} P(Bin(n - c - 1, q) = j),

    (P(Bin(m + 1) <= k) = P(Bin(m) <= k) - q P(Bin(m) = k)) when column c is not full and
    k(c + 1) >= k(c): a column so reached is *chained* and costs a few binomial
    probabilities, all added (no cancellation); every other partial column (the first
    of a window, or after a fall of k) takes the regularised incomplete beta function,
    P(Bin(m, q) <= k) = I_{1-q}(m - k, k + 1). The tails of this module are empty, then
    partial with k nondecreasing, then full, so only the first column of each window
    does. What does not depend on q is built once per tail.
    """

    def __init__(self, bstar: NDArray[np.float64], n: int) -> None:
        room = n - np.arange(n + 1, dtype=np.float64)
        k = np.clip(np.asarray(bstar, dtype=np.float64), -1.0, room)
        self.n, self.k, self.room = n, k, room
        self.full = k >= room
        self.empty = k < 0.0
        partial = ~self.full & ~self.empty
        chained = np.zeros(n + 1, dtype=bool)
        chained[1:] = partial[1:] & ~self.full[:-1] & (k[1:] >= k[:-1])
        self.chained = chained
        # empty columns, then partial ones all chained but the first, then full ones
        self.simple = bool(
            np.all(np.diff(self.empty.astype(np.int8)) <= 0)
            and np.all(np.diff(self.full.astype(np.int8)) >= 0)
            and np.sum(partial & ~chained) <= 1
        )
        # the binomial probabilities each chained column d adds: j = base .. k(d) at size
        # n - d, the first times q when column d - 1 was partial (base = k(d - 1))
        source = np.concatenate(([0.0], k[:-1]))
        base = np.where(source >= 0.0, source, 0.0)
        count = np.where(chained, k - base + 1.0, 0.0).astype(np.int64)
        self.offsets = np.concatenate(([0], np.cumsum(count)))  # column d: [o[d], o[d + 1])
        total = int(self.offsets[-1])
        target = np.repeat(np.arange(n + 1), count)
        position = np.arange(total) - self.offsets[target]
        j = base[target] + position
        m = n - target.astype(np.float64)
        # per term: log C(m, j) and the powers of q and 1 - q, padded for the windows
        self.terms = np.zeros((2 * total + 1, 3))
        self.terms[:total, 0] = (
            special.gammaln(m + 1.0) - special.gammaln(j + 1.0) - special.gammaln(m - j + 1.0)
        )
        self.terms[:total, 1] = j + ((position == 0) & (source[target] >= 0.0))
        self.terms[:total, 2] = m - j

    def cdf(self, q: NDArray[np.float64], first: NDArray[np.int64], width: int) -> NDArray[Any]:
        """F at the columns first[i] .. first[i] + width - 1 for q[i] (row i)."""
        rows = first.size
        full = _windows(self.full, first, width)
        empty = _windows(self.empty, first, width)
        # the terms of the columns after each window's first, padded to a rectangle
        start = self.offsets[first + 1]
        length = self.offsets[first + width] - start
        longest = int(length.max(initial=0))
        cum = np.zeros((rows, longest + 1))
        if longest > 0:
            log_q, log_1q = _logs(q)
            stride = self.terms.strides
            view = np.lib.stride_tricks.as_strided(
                self.terms,
                shape=(self.terms.shape[0] - longest + 1, 3, longest),
                strides=(stride[0], stride[1], stride[0]),
            )[start]
            terms = np.exp(view[:, 0] + view[:, 1] * log_q + view[:, 2] * log_1q)
            terms[np.arange(longest)[None, :] >= length[:, None]] = 0.0
            np.cumsum(terms, axis=1, out=cum[:, 1:])
        # the sum of the terms up to and including each column's own
        upto = np.take_along_axis(cum, _windows(self.offsets[1:], first, width) - start[:, None], 1)
        # the first column of each window, when partial, directly
        head = np.zeros(rows)
        partial = ~full[:, 0] & ~empty[:, 0]
        if partial.any():
            kd, md = self.k[first[partial]], self.room[first[partial]]
            head[partial] = special.betainc(md - kd, kd + 1.0, 1.0 - q[partial])
        if self.simple:  # F(d) = F(first) + upto(d) on the partial columns
            out = np.where(full, 1.0, np.where(empty, 0.0, np.minimum(head[:, None] + upto, 1.0)))
            return out
        # generally: F(d) = F(r) + upto(d) - upto(r), r the last restart at or before d
        out = np.where(full, 1.0, 0.0)
        out[:, 0] = np.where(partial, head, out[:, 0])
        restart = ~_windows(self.chained, first, width)
        restart[:, 0] = True
        direct = restart & ~full & ~empty
        direct[:, 0] = False
        if direct.any():
            row, col = np.nonzero(direct)
            kd, md = self.k[first[row] + col], self.room[first[row] + col]
            out[row, col] = special.betainc(md - kd, kd + 1.0, 1.0 - q[row])
        anchor = np.where(restart, out - upto, 0.0)
        last = np.maximum.accumulate(np.where(restart, np.arange(width)[None, :], 0), axis=1)
        chained = np.take_along_axis(anchor, last, axis=1) + upto
        out = np.where(restart, out, np.minimum(chained, 1.0))
        return out


def _tail_probability(
    bstar: NDArray[np.float64],
    n: int,
    delta0: float,
    psi: NDArray[np.float64],
    chain: _Chain | None = None,
) -> NDArray[np.float64]:
    """P(B <= b*(C)) for each discordance rate psi on the boundary delta = delta0.

    (B, C, n - B - C) is trinomial with p10 = (psi + delta0) / 2, p01 = (psi - delta0) / 2:
    C ~ Bin(n, p01) and B | C = c ~ Bin(n - c, p10 / (1 - p01)), so the tail probability
    is sum_c P(C = c) P(B <= b*(c) | C = c), the conditional distribution functions by
    :class:`_Chain` (``chain``, built from ``bstar`` when not given).

    Where P(C = c) < 1e-17 the conditional probability is taken as 1, which can only
    overstate the tail (by at most (n + 1) 1e-17): the columns further than 4.43 sqrt(n)
    from n p01 (Hoeffding's bound) all at once, as 1 - (the probability of the others),
    and the rest cell by cell. Work per rate: about 9 sqrt(n) columns, not n + 1.
    """
    psi = np.asarray(psi, dtype=np.float64)
    chain = chain or _Chain(bstar, n)
    p10 = np.clip((psi + delta0) / 2.0, 0.0, 1.0)
    p01 = np.clip((psi - delta0) / 2.0, 0.0, 1.0)
    # a window of columns per rate holding every P(C = c) >= 1e-17
    half = math.ceil(_HOEFFDING * math.sqrt(n)) + 1
    width = min(n + 1, 2 * half + 1)
    first = np.clip(np.floor(n * p01).astype(np.int64) - half, 0, n + 1 - width)
    c = _windows(np.arange(n + 1, dtype=np.float64), first, width)
    log_p01, log_1p01 = _logs(p01)
    pmf = np.exp(_windows(_log_choose(n), first, width) + c * log_p01 + (n - c) * log_1p01)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(p01 < 1.0, np.clip(p10 / (1.0 - p01), 0.0, 1.0), 0.0)
    cdf = chain.cdf(q, first, width)
    cdf[pmf < 1e-17] = 1.0
    outside = np.maximum(1.0 - pmf.sum(axis=1), 0.0) if width < n + 1 else 0.0
    out: NDArray[np.float64] = np.minimum((pmf * cdf).sum(axis=1) + outside, 1.0)
    return out


def _sup_over_nuisance(
    bstar: NDArray[np.float64], n: int, delta0: float, chain: _Chain | None = None
) -> float:
    """sup over psi in [|delta0|, 1] of the tail probability on the boundary.

    A grid of 201 rates including both ends, plus 40 rates spaced 1/n above the lowest
    rate |delta0| (near it the tail probability has peaks narrower than the coarse grid's
    spacing once n is large: at n = 1,000 the coarse grid alone missed peaks up to 0.0524
    against alpha 0.05, so the reported interval ends were slightly too narrow; issue 39);
    then, around each of the three largest local maxima, two rounds of 24 equally spaced
    rates between the neighbours of the best point so far. ``chain``: the tail's
    :class:`_Chain` (built from ``bstar`` when not given).
    """
    lo = abs(delta0)
    chain = chain or _Chain(bstar, n)
    fine = lo + np.arange(1, _PSI_FINE + 1) / n
    grid = np.union1d(np.linspace(lo, 1.0, _PSI_GRID), fine[fine < 1.0])
    values = _tail_probability(bstar, n, delta0, grid, chain)
    best = float(values.max())
    # local maxima, the two ends included (a peak between |delta0| and the next rate
    # shows as a maximum at the end)
    padded = np.concatenate(([-np.inf], values, [-np.inf]))
    inner = np.flatnonzero(
        (padded[1:-1] >= padded[:-2]) & (padded[1:-1] >= padded[2:]) & (values > 0.0)
    )
    peaks = inner[np.argsort(values[inner])[::-1][:_PSI_REFINE]]
    if peaks.size == 0 or grid.size < 2:
        return min(best, 1.0)
    centre = grid[peaks]
    # the neighbours' spacing at each peak (the grid is not evenly spaced)
    gaps = np.diff(grid)
    step = np.maximum(
        gaps[np.clip(peaks - 1, 0, gaps.size - 1)], gaps[np.clip(peaks, 0, gaps.size - 1)]
    )
    for _ in range(2):
        offsets = np.linspace(-1.0, 1.0, _PSI_LOCAL)[None, :] * step[:, None]
        points = np.clip(centre[:, None] + offsets, lo, 1.0)
        local = _tail_probability(bstar, n, delta0, points.ravel(), chain)
        local = local.reshape(points.shape)
        best = max(best, float(local.max()))
        centre = points[np.arange(points.shape[0]), local.argmax(axis=1)]
        step = offsets[:, 1] - offsets[:, 0]
    return min(best, 1.0)


def _envelope(t: NDArray[np.float64], valid: NDArray[np.bool_]) -> NDArray[np.float64]:
    """max of t(b', c') over b' <= b, c' >= c (the monotone envelope; +inf off the
    triangle b + c <= n): every tail {t <= level} is then Barnard-convex."""
    t = np.where(valid, t, -np.inf)
    t = np.maximum.accumulate(t, axis=0)
    t = np.maximum.accumulate(t[:, ::-1], axis=1)[:, ::-1]
    return np.where(valid, t, np.inf)


@functools.lru_cache(maxsize=64)
def _order_grid(n: int, alpha: float) -> NDArray[np.float64]:
    """The ordering of the exact one-sided test of H0: delta >= delta0: Tango's
    asymptotic upper confidence bound U(b, c) at z_{1 - alpha/2} of every outcome
    (b + c <= n), made monotone by :func:`_envelope`; smaller is more extreme.

    The ordering does not depend on delta0, so the rejection regions {U <= u*(delta0)}
    are nested in delta0 and the p value is monotone in the margin (Buehler 1957; Lloyd
    and Kabaila 2003, Biometrika 90:1-14, order outcomes by an approximate bound). The
    bound's level is a method choice made on exact power (bench/stats_calibration.py,
    6d): over n 20-100, margins 0.1-0.3 and discordance 0.05-0.5 at alpha 0.05, the
    bound at z_{0.975} gives mean power 0.506 at no difference, as Tango's Z at the
    margin did (which was not nested), against 0.498 at z_{0.95} (worst cell 6 points
    below the at-margin ordering, 14 at z_{0.95}). Each bound is :func:`_tango_upper`.
    The array is shared: never modify it. It is (n + 1)^2 and costs 44 evaluations of
    Tango's Z per outcome, so the p value of one outcome does not use it
    (:func:`_observed_tail`); :func:`upper_region` (every outcome's decision) does.
    """
    z = float(norm_ppf(1.0 - alpha / 2.0))
    grid_b = np.arange(n + 1, dtype=np.float64)[:, None] * np.ones((1, n + 1))
    grid_c = np.arange(n + 1, dtype=np.float64)[None, :] * np.ones((n + 1, 1))
    valid = (grid_b + grid_c) <= n
    bound = np.zeros_like(grid_b)
    bound[valid] = _tango_upper(grid_b[valid], grid_c[valid], n, z)  # b + c <= n only
    out = _envelope(bound, valid)
    out.setflags(write=False)
    return out


def _tango_z_vec(
    b: NDArray[np.float64], c: NDArray[np.float64], n: int, delta0: NDArray[np.float64]
) -> NDArray[np.float64]:
    """``_tango_z`` elementwise over arrays of outcomes and null values."""
    a_ = 2.0 * n
    b_ = -b - c + (2.0 * n - b + c) * delta0
    c_ = -c * delta0 * (1.0 - delta0)
    disc = np.maximum(b_ * b_ - 4.0 * a_ * c_, 0.0)
    q21 = np.clip((np.sqrt(disc) - b_) / (2.0 * a_), np.maximum(0.0, -delta0), 1.0)
    var = n * (2.0 * q21 + delta0 * (1.0 - delta0))
    num = b - c - n * delta0
    with np.errstate(divide="ignore", invalid="ignore"):
        out: NDArray[np.float64] = np.where(
            var > 0.0,
            num / np.sqrt(np.where(var > 0.0, var, 1.0)),
            np.where(num == 0.0, 0.0, np.sign(num) * np.inf),
        )
    return out


def _tail_counts(t: NDArray[np.float64], level: float) -> NDArray[np.float64]:
    """b*(c) of the tail {t <= level} (near-ties within 1e-9 count as extreme)."""
    kept = t <= level + 1e-9 * max(1.0, abs(level))
    out: NDArray[np.float64] = kept.sum(axis=0).astype(np.float64) - 1.0
    return out


def _tango_upper(
    b: NDArray[np.float64], c: NDArray[np.float64], n: int, z: float
) -> NDArray[np.float64]:
    """Tango's asymptotic upper confidence bound of each outcome (b, c): the root of
    Z(b, c; delta) = -z (Z decreasing in delta), by a vectorised bisection of
    [(b - c) / n, 1 - 1e-13] in 44 halvings (to 2^-43: far finer than the 1e-9 ties of
    :func:`_tail_counts`); 1 where Z never falls below -z."""
    lo = (b - c) / n  # Z(est) >= 0 > -z
    hi = np.full_like(lo, 1.0 - 1e-13)
    at_top = _tango_z_vec(b, c, n, hi) + z >= 0.0  # never below -z: the bound is 1
    for _ in range(44):
        mid = 0.5 * (lo + hi)
        above = _tango_z_vec(b, c, n, mid) + z >= 0.0
        lo = np.where(above, mid, lo)
        hi = np.where(above, hi, mid)
    out: NDArray[np.float64] = np.where(at_top, 1.0, hi)
    return out


@functools.lru_cache(maxsize=64)
def _observed_tail(b: int, c: int, n: int, alpha: float) -> NDArray[np.float64]:
    """b*(c) of the tail {U <= U(b, c)} of :func:`_order_grid`'s ordering (near-ties
    within 1e-9 count as extreme), as :func:`_tail_counts` finds it on the grid, but
    without the grid: O(n log n) evaluations of Tango's Z instead of 44 (n + 1)^2 / 2.

    U(b', c') <= L exactly when Z(b', c'; L) < -z (Z decreases in delta; up to the 2^-43
    of the bisection that computes U), so with L = U(b, c) + 1e-9 max(1, |U(b, c)|) each
    column c' is searched by bisection over b' for its last outcome inside the tail. That
    takes the column's tail to be a prefix (Tango's Z increases in b: the monotone
    envelope of :func:`_order_grid` changes no bound, checked for every n up to 120 and
    n = 200, 300 and 1000 at alpha 0.01, 0.025, 0.05 and 0.1, and the tails equal the
    grid's, in tests/stats/test_paired_exact_fast.py); the envelope in c is then a
    running minimum from the right, so the tail is Barnard-convex (b*(c) nondecreasing)
    whatever the columns hold, and the test keeps its level. The array is shared: never
    modify it.
    """
    z = float(norm_ppf(1.0 - alpha / 2.0))
    u0 = float(_tango_upper(np.array([float(b)]), np.array([float(c)]), n, z)[0])
    level = u0 + 1e-9 * max(1.0, abs(u0))
    cs = np.arange(n + 1, dtype=np.float64)
    room = n - cs  # the largest b of each column
    if level >= 1.0:  # every outcome's bound is at most 1
        out = room
    else:
        lo = np.full(n + 1, -1.0)  # the last b known inside the tail (-1: none)
        hi = room + 1.0  # the first b known outside (n - c + 1: none)
        while True:
            active = hi - lo > 1.0
            if not active.any():
                break
            mid = np.floor(0.5 * (lo + hi))
            with np.errstate(invalid="ignore"):
                inside = _tango_z_vec(mid, cs, n, np.full_like(cs, level)) + z < 0.0
            lo = np.where(active & inside, mid, lo)
            hi = np.where(active & ~inside, mid, hi)
        # the envelope: b*(c) = min over c' >= c of the last b inside column c' (a
        # column wholly inside constrains nothing), and never past the triangle
        last = np.where(lo < room, lo, np.inf)
        out = np.minimum(room, np.minimum.accumulate(last[::-1])[::-1])
    out.setflags(write=False)
    return out


def _exact_upper_p(b: int, c: int, n: int, delta0: float, alpha: float = 0.05) -> float:
    """Exact unconditional p value of H0: delta >= delta0 against delta < delta0.

    p = sup over the nuisance psi of P(U(B, C) <= U(b, c)) on the boundary delta =
    delta0, U the ordering of :func:`_order_grid` (Tango's asymptotic upper bound at
    ``alpha``, which does not depend on delta0; its tail by :func:`_observed_tail`).
    Valid for the whole composite null delta >= delta0 because the tails are
    Barnard-convex (Sidik 2003); nonincreasing in delta0 because the tail is the same set
    at every delta0 and the null shrinks.
    """
    if delta0 >= 1.0:
        return 0.0 if b - c < n else 1.0
    if delta0 <= -1.0:
        return 1.0
    bstar = _observed_tail(b, c, n, alpha)
    return _sup_over_nuisance(bstar, n, delta0, _observed_chain(b, c, n, alpha))


@functools.lru_cache(maxsize=16)
def _observed_chain(b: int, c: int, n: int, alpha: float) -> _Chain:
    """:class:`_Chain` of :func:`_observed_tail` (shared: never modify it)."""
    return _Chain(_observed_tail(b, c, n, alpha), n)


#: the exact bounds are found to this width (the test rejects at the bound returned
#: and not 1e-6 below it)
_BOUND_TOL = 1e-6


#: (rejects at delta0, Phi^-1(p) - Phi^-1(alpha)) of one exact one-sided test
_Test = Callable[[float], tuple[bool, float]]


@functools.lru_cache(maxsize=256)
def _exact_upper_bound(b: int, c: int, n: int, alpha: float) -> float:
    """Smallest delta0 at which the exact test of delta >= delta0 rejects at ``alpha``,
    to 1e-6 (the test rejects at the value returned and not 1e-6 below it); 1 when it
    never rejects. The p value is monotone in delta0 (:func:`_exact_upper_p`), so the
    test rejects at every delta0 at or above the bound and at none below it.

    The search works on g = Phi^-1(p) - Phi^-1(alpha), nearly linear in delta0. It starts
    at Tango's asymptotic bound x0 (where Tango's z test has p = alpha) and, from the
    exact p there, predicts the bound by shifting that asymptotic curve to pass through
    it: x1 = x0 + (x0 - the asymptotic bound at z = -Phi^-1(p(x0))). From there it steps
    (doubling) to a point where the test rejects and one where it does not
    (:func:`_bracket`), then narrows the two to 1e-6 (:func:`_narrow`): about 4 to 7
    exact p values in all, where bisection from a 0.01 bracket took 17 and more.
    """
    est = (b - c) / n
    floor, ceiling = max(est, -1.0 + 1e-12), 1.0 - 1e-12
    z_alpha = _z(alpha)
    memo: dict[float, tuple[bool, float]] = {}

    def test(d0: float) -> tuple[bool, float]:
        if d0 not in memo:
            p = _exact_upper_p(b, c, n, d0, alpha)
            memo[d0] = (p <= alpha, float(norm_ppf(p)) + z_alpha)
        return memo[d0]

    def asymptotic(z: float) -> float:
        return float(_tango_upper(np.array([float(b)]), np.array([float(c)]), n, z)[0])

    if floor >= ceiling:  # b = n: the test never rejects below 1
        return 1.0 if not test(ceiling)[0] else floor
    guess = asymptotic(z_alpha)
    points = [min(max(guess, floor), ceiling)]
    z0 = z_alpha - test(points[0])[1]  # the asymptotic z whose bound has x0's exact p
    if math.isfinite(z0) and z0 > 0.1:
        x1 = min(max(points[0] + guess - asymptotic(z0), floor), ceiling)
        if x1 != points[0]:
            test(x1)
            points.append(x1)
    # first steps: twice the prediction's move, or a tenth of the distance from the
    # estimate (at most 0.01)
    width = (
        2.0 * abs(points[1] - points[0])
        if len(points) > 1
        else min(0.01, max(0.1 * (guess - est), 1e-4))
    )
    found = _bracket(test, points, floor, ceiling, max(width, 4.0 * _BOUND_TOL))
    if found is None or found[0] == found[1]:
        return 1.0 if found is None else found[1]
    return _narrow(test, *found)


def _bracket(
    test: _Test, points: list[float], floor: float, ceiling: float, width: float
) -> tuple[float, float] | None:
    """(lo, hi): the test does not reject at lo and rejects at hi, from the points
    already tested, stepping out from them (doubling) where one side is missing. None:
    it does not reject at ``ceiling``; (floor, floor): it rejects at ``floor``."""
    rejecting = [x for x in points if test(x)[0]]
    holding = [x for x in points if not test(x)[0]]
    if rejecting:
        hi = min(rejecting)
    else:  # walk up until it rejects
        lo = max(holding)
        while True:
            if lo + width >= ceiling:
                if not test(ceiling)[0]:
                    return None
                hi = ceiling
                break
            if test(lo + width)[0]:
                hi = lo + width
                break
            lo, width = lo + width, 2 * width
    if holding and max(holding) < hi:
        return max(holding), hi
    while True:  # walk down until it stops rejecting
        if hi - width <= floor:
            return (floor, floor) if test(floor)[0] else (floor, hi)
        if not test(hi - width)[0]:
            return hi - width, hi
        hi, width = hi - width, 2 * width


def _narrow(test: _Test, lo: float, hi: float) -> float:
    """The rejecting end of a bracket narrowed to :data:`_BOUND_TOL`: the Illinois
    variant of regula falsi on g (a step keeps a rejecting and a non-rejecting end, as
    bisection does; after three steps that did not halve the bracket, bisection)."""
    g_lo, g_hi = test(lo)[1], test(hi)[1]
    kept = 0  # > 0: hi kept so many steps in a row; < 0: lo
    reference, stalled = hi - lo, 0
    while hi - lo > _BOUND_TOL:
        if stalled < 3 and math.isfinite(g_lo) and math.isfinite(g_hi) and g_lo > g_hi:
            x = hi - g_hi * (hi - lo) / (g_hi - g_lo)  # the secant through both ends
            x = min(max(x, lo + 0.5 * _BOUND_TOL), hi - 0.5 * _BOUND_TOL)
        else:
            x = 0.5 * (lo + hi)
        rejects, g = test(x)
        if rejects:
            hi, g_hi = x, g
            kept = min(kept, 0) - 1
            if kept <= -2:
                g_lo *= 0.5  # Illinois: lo kept twice in a row, halve its weight
        else:
            lo, g_lo = x, g
            kept = max(kept, 0) + 1
            if kept >= 2:
                g_hi *= 0.5
        if hi - lo <= 0.5 * reference:
            reference, stalled = hi - lo, 0
        else:
            stalled += 1
    return hi


@functools.lru_cache(maxsize=32)
def _z(alpha: float) -> float:
    """z_{1 - alpha}."""
    return float(norm_ppf(1.0 - alpha))


def upper_region(n: int, delta0: float, alpha: float = 0.05) -> NDArray[np.bool_]:
    """Outcomes (b, c) at which the exact one-sided test of H0: delta >= delta0 rejects
    at ``alpha`` (U <= u*, u* the largest level whose supremum tail probability is at
    most ``alpha``, found by bisection over the levels). Nested: the region at a larger
    delta0 contains the region at a smaller one. ValueError unless n is a positive count,
    delta0 in [-1, 1] and alpha in (0, 1)."""
    n = _positive_count(n, "n")
    delta0 = _finite(delta0, "delta0")
    if not -1.0 <= delta0 <= 1.0:
        raise ValueError(f"delta0 must be in [-1, 1], got {delta0!r}")
    alpha = probability(alpha, "alpha")
    t = _order_grid(n, alpha)
    levels = np.unique(t[np.isfinite(t)])
    lo, hi = -1, levels.size  # size(levels[lo]) <= alpha < size(levels[hi])
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _sup_over_nuisance(_tail_counts(t, float(levels[mid])), n, delta0) <= alpha:
            lo = mid
        else:
            hi = mid
    if lo < 0:
        return np.zeros((n + 1, n + 1), dtype=bool)
    level = float(levels[lo])
    out: NDArray[np.bool_] = t <= level + 1e-9 * max(1.0, abs(level))
    return out


def exact_equivalence_region(n: int, margin: float, alpha: float = 0.05) -> NDArray[np.bool_]:
    """Outcomes (b, c) at which :func:`tost_paired` (exact, binary) declares equivalence.

    A boolean (n + 1) x (n + 1) matrix indexed by b (first arm only succeeded) and c
    (second only): the exact upper test of H0: delta >= margin rejects (``upper_region``)
    and so does the lower test, its mirror image (b and c exchanged). For checking the
    type I error by enumeration over the trinomial (b, c, n - b - c).
    """
    n = _positive_count(n, "n")
    margin = positive(margin, "margin")
    alpha = probability(alpha, "alpha")
    if margin >= 1.0:
        raise ValueError(f"margin must be below 1 for paired proportions, got {margin!r}")
    upper = upper_region(n, margin, alpha)
    region: NDArray[np.bool_] = upper & upper.T
    return region


# ---------------------------------------------------------------------------
# TOST
# ---------------------------------------------------------------------------

Method = Literal["auto", "t", "tango", "exact"]


def _is_paired_binary(d: np.ndarray[Any, Any]) -> bool:
    return bool(np.all((d == -1.0) | (d == 0.0) | (d == 1.0)))


def _resolve_method(d: np.ndarray[Any, Any], method: str) -> str:
    if method not in ("auto", "t", "tango", "exact"):
        raise ValueError(f"method must be 'auto', 't', 'tango' or 'exact', got {method!r}")
    if method == "auto":
        return "exact" if _is_paired_binary(d) else "t"
    if method in ("tango", "exact") and not _is_paired_binary(d):
        raise ValueError(f"method={method!r} needs paired binary differences (each -1, 0 or +1)")
    return method


def _tost_binary(d: NDArray[np.float64], margin: float, alpha: float, used: str) -> TOSTResult:
    """The binary branch of :func:`tost_paired`: exact unconditional or Tango's z."""
    n = int(d.size)
    b = int(np.sum(d == 1.0))
    c = int(np.sum(d == -1.0))
    est = float(d.mean())
    if used == "exact":
        high = _exact_upper_bound(b, c, n, alpha)
        low = -_exact_upper_bound(c, b, n, alpha)
        method = "TOST, exact unconditional, ordered by Tango's bound (paired proportions)"
    else:
        low, high = _tango_bounds(b, c, n, float(norm_ppf(1.0 - alpha)))
        method = "TOST, Tango score tests (paired proportions)"
    note = ""
    if b + c == 0:
        note = f"no discordant pairs: equivalence holds only for margins >= {max(-low, high):.4g}"
    if margin >= 1.0:
        # |delta| <= 1 always; H0 |delta| >= margin only possible at delta = +-1
        zl = zu = math.nan
        pl = 0.0 if est > -1.0 else 1.0
        pu = 0.0 if est < 1.0 else 1.0
        note = (note + "; " if note else "") + "margin >= 1 is vacuous for proportions"
    else:
        zl = _tango_z(b, c, n, -margin)
        zu = _tango_z(b, c, n, margin)
        if used == "exact":
            pl = _exact_upper_p(c, b, n, margin, alpha)  # the lower test: the mirror image
            pu = _exact_upper_p(b, c, n, margin, alpha)
        else:
            pl = float(norm_sf(zl))
            pu = float(norm_cdf(zu))
    p = max(pl, pu)
    return TOSTResult(
        estimate=est,
        low=low,
        high=high,
        level=1.0 - 2.0 * alpha,
        margin=margin,
        alpha=alpha,
        statistic_lower=zl,
        statistic_upper=zu,
        pvalue_lower=pl,
        pvalue_upper=pu,
        pvalue=p,
        equivalent=bool(p <= alpha),
        min_margin=max(-low, high),
        n=n,
        b=b,
        c=c,
        method=method,
        note=note,
    )


def tost_paired(
    differences: Any,
    margin: float,
    alpha: float = 0.05,
    method: Method = "auto",
    *,
    support: tuple[float, float] | None = None,
) -> TOSTResult:
    """Two one-sided tests (Schuirmann 1987) for equivalence within (-margin, +margin).

    H0: delta <= -margin or delta >= +margin against H1: |delta| < margin, delta the mean
    paired difference. Equivalence is declared when both one-sided tests reject at
    ``alpha`` (p = max of the two one-sided p-values <= alpha), which is the same as the
    (1 - 2 alpha) interval lying inside the margins.

    Method (``method='auto'`` decides from the data type, not from the result):

    * Paired binary outcomes (every difference -1, 0 or +1), ``'exact'``: an exact
      unconditional test (Sidik 2003, Stat Med 22:265-278; Chan, Tang, Tang and Tang 2003,
      Stat Med 22:1215-1231). With b and c the numbers of +1 and -1 differences, each
      one-sided test orders the outcomes by Tango's (1998) asymptotic upper confidence bound
      at z_{1 - alpha/2} (a fixed ordering, the same at every margin: Buehler 1957; Lloyd
      and Kabaila 2003; its level chosen on exact power) and takes p = sup over the
      discordance rate psi = p10 + p01 (the nuisance parameter) of P(bound at least as
      extreme as observed), the probability computed exactly over the trinomial (B, C, n - B
      - C) on the null boundary delta = +-margin, psi in [margin, 1]. The supremum is taken
      over a grid of 201 rates including both ends, refined by a bounded scalar search
      around the three highest local maxima. The tails are Barnard-convex (the ordering
      increases in b and decreases in c; enforced by a monotone envelope), so the boundary
      supremum bounds the rejection probability at every point of the null, and the type I
      error is at most alpha wherever the supremum is found (checked by enumeration in the
      tests over n = 10..60, margins 0.05, 0.1, 0.2 and a fine discordance grid). Because
      the ordering does not move with the margin, the rejection regions are nested:
      equivalence at a margin implies equivalence at every larger margin, and ``min_margin``
      is exactly where the decision changes (to 1e-6). Ordering by Tango's statistic *at the
      margin* (the earlier choice) was not: at n = 8, b = 2, c = 4 it rejected at 0.293 and
      not at 0.30 (now the bound is 0.312 and every larger margin rejects). Tango's
      asymptotic z test exceeded alpha at parts of the boundary (0.072 with no discordant
      pair on 25 prompts at a margin of 0.1, since 0.9^25 > 0.05). ``low``/``high`` invert
      the two exact one-sided tests (to 1e-6), ``min_margin`` is the larger of -low and
      high. Cost: each p value sums about 9 sqrt(n) conditional binomial distribution
      functions per discordance rate (351 rates), the tail taking O(n log n) to find; the
      interval takes 4 to 8 p values per end (bench/tost_speed.py: on 1,000 pairs about
      0.1 s, 0.3 s as the first call of a process, which imports scipy.special).
    * ``'tango'`` (only when asked): Tango's score z tests, Z(-margin) >= z_{1-alpha} and
      Z(+margin) <= -z_{1-alpha}, with Tango's asymptotic interval; it can exceed alpha.
    * Otherwise (e.g. per-prompt differences of means over several runs, costs): the
      paired t-based TOST, t_L = (mean + margin) / se, t_U = (mean - margin) / se,
      se = sd / sqrt(n), n - 1 degrees of freedom (as statsmodels ``ttost_paired``).
      With a zero sample standard deviation (or n < 2) the t-based test is undefined;
      the result then carries nan p-values, ``equivalent=False`` and a ``note`` saying
      why, instead of dividing by zero. Its interval, est +- t_{1-alpha, n-1} se, can
      leave the range the mean difference can take (e.g. [-1, 1] for a mean of
      differences of proportions: -1.53 on 3 tasks); ``support`` truncates it.

    ``support`` (low, high): the range the mean difference can take, e.g. ``(-1.0, 1.0)``
    for differences of proportions. Every difference must lie in it (a difference outside
    is ValueError: the mean of n copies of it would be outside too). The reported
    interval is intersected with it, and ``note`` says so when that cut anything
    ("interval truncated to [-1, 1], the range of a difference of proportions"). The
    exact and Tango intervals never leave [-1, 1]; the paired t interval can. Nothing
    else changes: the p values, ``equivalent`` and ``min_margin`` (the smallest margin
    at which the test rejects, a property of the test) are the test's own. The
    decision can still be read off the truncated interval, exactly where the margin
    means something: truncation only removes values outside the support, so if
    -margin >= low, "the truncated interval's lower end > -margin" is the same as "the
    untruncated one's is" (a cut end sits at low <= -margin, outside (-margin, margin)
    either way), and likewise at +margin <= high; on a side where the margin lies past
    the support (margin > 1 for proportions), that one-sided null hypothesis is
    impossible, the truncated end always lies inside the margin, and only there may the
    interval look "inside" while the test, which does not know the support, does not
    reject. ``None`` (the default): no truncation, whatever the differences are.
    """
    d = vector(differences, "differences")
    margin = positive(margin, "margin")
    alpha = probability(alpha, "alpha", high_open=True)
    if alpha >= 0.5:
        raise ValueError(f"alpha must be below 0.5 for a TOST, got {alpha!r}")
    bounds = _support(support, d)
    used = _resolve_method(d, method)
    if used in ("exact", "tango"):
        return _truncate(_tost_binary(d, margin, alpha, used), bounds)
    return _truncate(_tost_t(d, margin, alpha), bounds)


def _support(support: Any, d: NDArray[np.float64]) -> tuple[float, float] | None:
    """``support`` checked: None, or finite (low, high) with low < high holding every
    difference; ValueError naming ``support`` otherwise."""
    if support is None:
        return None
    refuse_text(support, "support")
    try:
        low, high = support
    except (TypeError, ValueError):
        raise ValueError(f"support must be a pair (low, high), got {support!r}") from None
    low, high = _finite(low, "support"), _finite(high, "support")
    if not low < high:
        raise ValueError(f"support must have low < high, got {support!r}")
    if float(d.min()) < low or float(d.max()) > high:
        raise ValueError(
            f"differences must lie in support [{low:g}, {high:g}], got values from "
            f"{float(d.min()):g} to {float(d.max()):g}"
        )
    return low, high


def _truncate(result: TOSTResult, bounds: tuple[float, float] | None) -> TOSTResult:
    """``result`` with its interval intersected with ``bounds`` (a note when it cut)."""
    if bounds is None or math.isnan(result.low) or math.isnan(result.high):
        return result
    low, high = max(result.low, bounds[0]), min(result.high, bounds[1])
    if low == result.low and high == result.high:
        return result
    what = (
        "the range of a difference of proportions"
        if bounds == (-1.0, 1.0)
        else "the range of the mean difference (support)"
    )
    note = f"interval truncated to [{bounds[0]:g}, {bounds[1]:g}], {what}"
    if result.min_margin >= max(-bounds[0], bounds[1]):
        note += (
            f"; no margin inside it gives equivalence (the test rejects from "
            f"{result.min_margin:.4g})"
        )
    return dataclasses.replace(
        result, low=low, high=high, note=f"{result.note}; {note}" if result.note else note
    )


def _tost_t(d: NDArray[np.float64], margin: float, alpha: float) -> TOSTResult:
    """The paired t branch of :func:`tost_paired`."""
    n = int(d.size)
    est = float(d.mean())
    level = 1.0 - 2.0 * alpha
    sd = float(d.std(ddof=1)) if n >= 2 else math.nan
    if n < 2 or sd == 0.0:
        why = (
            "fewer than two differences"
            if n < 2
            else "all differences are equal (zero standard deviation)"
        )
        note = (
            f"t-based TOST undefined: {why}; no estimate of sampling error, so "
            "equivalence is not declared (for paired binary outcomes use "
            "method='tango')"
        )
        return TOSTResult(
            estimate=est,
            low=math.nan,
            high=math.nan,
            level=level,
            margin=margin,
            alpha=alpha,
            statistic_lower=math.nan,
            statistic_upper=math.nan,
            pvalue_lower=math.nan,
            pvalue_upper=math.nan,
            pvalue=math.nan,
            equivalent=False,
            min_margin=math.nan,
            n=n,
            b=None,
            c=None,
            method="TOST, paired t",
            note=note,
        )
    se = sd / math.sqrt(n)
    df = n - 1
    tl = (est + margin) / se
    tu = (est - margin) / se
    pl = float(t_sf(tl, df))
    pu = float(t_cdf(tu, df))
    tcrit = float(t_ppf(1.0 - alpha, df))
    low, high = est - tcrit * se, est + tcrit * se
    p = max(pl, pu)
    return TOSTResult(
        estimate=est,
        low=low,
        high=high,
        level=level,
        margin=margin,
        alpha=alpha,
        statistic_lower=tl,
        statistic_upper=tu,
        pvalue_lower=pl,
        pvalue_upper=pu,
        pvalue=p,
        equivalent=bool(p <= alpha),
        min_margin=abs(est) + tcrit * se,
        n=n,
        b=None,
        c=None,
        method="TOST, paired t",
        note="",
    )


def equivalence_margin(differences: Any, alpha: float = 0.05, method: Method = "auto") -> float:
    """The smallest symmetric margin at which :func:`tost_paired` rejects at ``alpha``.

    This is max(-low, high) of the (1 - 2 alpha) interval the TOST inverts:
    |mean| + t_{1-alpha, n-1} se for the t-based test; for paired binary outcomes the
    larger absolute end of the interval inverting the two exact unconditional one-sided
    tests (``'exact'``, the default for binary data), or of Tango's (1 - 2 alpha) score
    interval (``'tango'``; z^2 / (n + z^2) when nothing is discordant). It is how
    ToolBottleneckBench reports equivalence ("the smallest symmetric margins at which the
    two one-sided tests reject"). nan when the t-based test is undefined (zero spread
    or n < 2). It takes no ``support``: it is the test's threshold, a margin, not an end
    of an interval for the difference, and truncating it would name a margin at which
    the test does not reject; a value past the support (above 1 for proportions, only
    from the t-based test) says that no margin inside it gives equivalence.
    """
    d = vector(differences, "differences")
    alpha = probability(alpha, "alpha")
    if alpha >= 0.5:
        raise ValueError(f"alpha must be below 0.5 for a TOST, got {alpha!r}")
    used = _resolve_method(d, method)
    n = int(d.size)
    if used in ("exact", "tango"):
        b = int(np.sum(d == 1.0))
        c = int(np.sum(d == -1.0))
        if used == "exact":
            high = _exact_upper_bound(b, c, n, alpha)
            return max(_exact_upper_bound(c, b, n, alpha), high)
        z = float(norm_ppf(1.0 - alpha))
        low, high = _tango_bounds(b, c, n, z)
        return max(-low, high)
    if n < 2:
        return math.nan
    sd = float(d.std(ddof=1))
    if sd == 0.0:
        return math.nan
    return abs(float(d.mean())) + float(t_ppf(1.0 - alpha, n - 1)) * sd / math.sqrt(n)
