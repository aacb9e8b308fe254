"""Paired binary comparisons: exact McNemar, Tango's score interval, and TOST."""

from __future__ import annotations

import functools
import math
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from prereg.stats._dist import norm_cdf, norm_ppf, norm_sf, t_cdf, t_ppf, t_sf
from prereg.stats._scipy import optimize, special
from prereg.stats._validate import count, positive, probability, vector
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


def binomial_half_tail(k: int, m: int) -> float:
    """``min(1, 2 P(X <= k))`` for ``X ~ Bin(m, 1/2)``: the two-sided exact McNemar p-value.

    Up to :data:`EXACT_TAIL_UP_TO` pairs it is ``sum_{i <= k} C(m, i) / 2^(m-1)`` in
    integers, rounded once (Python's integer division is correctly rounded), so it is
    exact to the last bit where a floating-point incomplete beta function loses digits
    (at m = 100,000 the 13th); beyond, ``scipy.special.bdtr``.
    """
    if m > EXACT_TAIL_UP_TO:
        return min(1.0, 2.0 * float(special.bdtr(k, m, 0.5)))
    return binomial_half_tails(m, k)[k]


def binomial_half_tails(m: int, up_to: int | None = None) -> list[float]:
    """:func:`binomial_half_tail` of ``m`` for k = 0 .. ``up_to`` (default m), in one pass
    over the binomial coefficients (exact up to :data:`EXACT_TAIL_UP_TO` pairs)."""
    last = m if up_to is None else min(up_to, m)
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


def _tail_probability(
    bstar: NDArray[np.float64], n: int, delta0: float, psi: NDArray[np.float64]
) -> NDArray[np.float64]:
    """P(B <= b*(C)) for each discordance rate psi on the boundary delta = delta0.

    (B, C, n - B - C) is trinomial with p10 = (psi + delta0) / 2, p01 = (psi - delta0) / 2:
    C ~ Bin(n, p01) and B | C = c ~ Bin(n - c, p10 / (1 - p01)).
    """
    psi = np.asarray(psi, dtype=np.float64)[:, None]
    c = np.arange(n + 1, dtype=np.float64)[None, :]
    p10 = np.clip((psi + delta0) / 2.0, 0.0, 1.0)
    p01 = np.clip((psi - delta0) / 2.0, 0.0, 1.0)
    log_choose = special.gammaln(n + 1.0) - special.gammaln(c + 1.0) - special.gammaln(n - c + 1.0)
    pmf_c = np.exp(log_choose + special.xlogy(c, p01) + special.xlog1py(n - c, -p01))
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(p01 < 1.0, np.clip(p10 / (1.0 - p01), 0.0, 1.0), 0.0)
    kept = np.broadcast_to(bstar[None, :], pmf_c.shape)
    size = np.broadcast_to(n - c, pmf_c.shape)
    cdf = np.where(kept >= size, 1.0, 0.0)
    # the binomial cdf (regularised incomplete beta, P(Bin(m, q) <= k) = I_{1-q}(m - k,
    # k + 1)) only where it is neither 0 nor 1; where C = c has probability below 1e-17
    # the cdf is taken as 1, which can only overstate the tail (by at most n 1e-17)
    negligible = pmf_c < 1e-17
    cdf[negligible] = 1.0
    partial = (kept >= 0.0) & (kept < size) & ~negligible
    if partial.any():
        k = kept[partial]
        qq = np.broadcast_to(q, pmf_c.shape)[partial]
        cdf[partial] = special.betainc(size[partial] - k, k + 1.0, 1.0 - qq)
    out: NDArray[np.float64] = np.minimum((pmf_c * cdf).sum(axis=1), 1.0)
    return out


def _sup_over_nuisance(bstar: NDArray[np.float64], n: int, delta0: float) -> float:
    """sup over psi in [|delta0|, 1] of the tail probability on the boundary.

    A grid of 201 rates including both ends; then, around each of the three largest
    local maxima, two rounds of 24 equally spaced rates between the neighbours of the
    best point so far (the spacing falls to 1/200 x 1/12 x 1/12 of the range).
    """
    lo = abs(delta0)
    grid = np.linspace(lo, 1.0, _PSI_GRID)
    values = _tail_probability(bstar, n, delta0, grid)
    best = float(values.max())
    inner = np.flatnonzero(
        (values[1:-1] >= values[:-2]) & (values[1:-1] >= values[2:]) & (values[1:-1] > 0.0)
    )
    peaks = inner[np.argsort(values[1:-1][inner])[::-1][:_PSI_REFINE]] + 1
    if peaks.size == 0:
        return min(best, 1.0)
    centre = grid[peaks]
    step = grid[1] - grid[0]
    for _ in range(2):
        offsets = np.linspace(-step, step, _PSI_LOCAL)
        points = np.clip(centre[:, None] + offsets[None, :], lo, 1.0)
        local = _tail_probability(bstar, n, delta0, points.ravel()).reshape(points.shape)
        best = max(best, float(local.max()))
        centre = points[np.arange(points.shape[0]), local.argmax(axis=1)]
        step = offsets[1] - offsets[0]
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
    below the at-margin ordering, 14 at z_{0.95}). Each bound solves Z(b, c; delta) = -z
    (Z decreasing in delta) by a vectorised bisection to 2^-43 of [-1, 1]. The array is
    shared: never modify it.
    """
    z = float(norm_ppf(1.0 - alpha / 2.0))
    grid_b = np.arange(n + 1, dtype=np.float64)[:, None] * np.ones((1, n + 1))
    grid_c = np.arange(n + 1, dtype=np.float64)[None, :] * np.ones((n + 1, 1))
    valid = (grid_b + grid_c) <= n
    b, c = grid_b[valid], grid_c[valid]  # the outcomes b + c <= n only
    lo = (b - c) / n  # Z(est) >= 0 > -z
    hi = np.full_like(lo, 1.0 - 1e-13)
    at_top = _tango_z_vec(b, c, n, hi) + z >= 0.0  # never below -z: the bound is 1
    for _ in range(44):  # to 2^-43: far finer than the 1e-9 ties
        mid = 0.5 * (lo + hi)
        above = _tango_z_vec(b, c, n, mid) + z >= 0.0
        lo = np.where(above, mid, lo)
        hi = np.where(above, hi, mid)
    bound = np.zeros_like(grid_b)
    bound[valid] = np.where(at_top, 1.0, hi)
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


def _exact_upper_p(b: int, c: int, n: int, delta0: float, alpha: float = 0.05) -> float:
    """Exact unconditional p value of H0: delta >= delta0 against delta < delta0.

    p = sup over the nuisance psi of P(U(B, C) <= U(b, c)) on the boundary delta =
    delta0, U the ordering of :func:`_order_grid` (Tango's asymptotic upper bound at
    ``alpha``, which does not depend on delta0). Valid for the whole composite null
    delta >= delta0 because the tails are Barnard-convex (Sidik 2003); nonincreasing in
    delta0 because the tail is the same set at every delta0 and the null shrinks.
    """
    if delta0 >= 1.0:
        return 0.0 if b - c < n else 1.0
    if delta0 <= -1.0:
        return 1.0
    t = _order_grid(n, alpha)
    return _sup_over_nuisance(_tail_counts(t, float(t[b, c])), n, delta0)


def _exact_upper_bound(b: int, c: int, n: int, alpha: float) -> float:
    """Smallest delta0 at which the exact test of delta >= delta0 rejects at ``alpha``
    (bisection to 1e-6, from a bracket around Tango's asymptotic bound; 1 when it never
    rejects). The p value is monotone in delta0 (:func:`_exact_upper_p`), so the test
    rejects at every delta0 at or above the bound and at none below it."""
    est = (b - c) / n
    rejects = lambda d0: _exact_upper_p(b, c, n, d0, alpha) <= alpha  # noqa: E731
    floor, ceiling = max(est, -1.0 + 1e-12), 1.0 - 1e-12
    if not rejects(ceiling):
        return 1.0
    if rejects(floor):
        return floor
    _, guess = _tango_bounds(b, c, n, float(norm_ppf(1.0 - alpha)))
    lo, hi, width = floor, ceiling, 0.01
    start = min(max(guess, floor), ceiling)
    if rejects(start):  # walk down until it stops rejecting
        hi = start
        while hi - width > floor and rejects(hi - width):
            hi, width = hi - width, 2 * width
        lo = max(floor, hi - width)
    else:  # walk up until it rejects
        lo = start
        while lo + width < ceiling and not rejects(lo + width):
            lo, width = lo + width, 2 * width
        hi = min(ceiling, lo + width)
    while hi - lo > 1e-6:
        mid = 0.5 * (lo + hi)
        if rejects(mid):
            hi = mid
        else:
            lo = mid
    return hi


def upper_region(n: int, delta0: float, alpha: float = 0.05) -> NDArray[np.bool_]:
    """Outcomes (b, c) at which the exact one-sided test of H0: delta >= delta0 rejects
    at ``alpha`` (U <= u*, u* the largest level whose supremum tail probability is at
    most ``alpha``, found by bisection over the levels). Nested: the region at a larger
    delta0 contains the region at a smaller one."""
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
    n = count(n, "n")
    margin = positive(margin, "margin")
    alpha = probability(alpha, "alpha")
    if n == 0 or margin >= 1.0:
        raise ValueError("n must be positive and margin below 1")
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
    differences: Any, margin: float, alpha: float = 0.05, method: Method = "auto"
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
      the two exact one-sided tests (bisection to 1e-6), ``min_margin`` is the larger of
      -low and high. Cost: O(n^2) per p value; the interval takes about 50 of them.
    * ``'tango'`` (only when asked): Tango's score z tests, Z(-margin) >= z_{1-alpha} and
      Z(+margin) <= -z_{1-alpha}, with Tango's asymptotic interval; it can exceed alpha.
    * Otherwise (e.g. per-prompt differences of means over several runs, costs): the
      paired t-based TOST, t_L = (mean + margin) / se, t_U = (mean - margin) / se,
      se = sd / sqrt(n), n - 1 degrees of freedom (as statsmodels ``ttost_paired``).
      With a zero sample standard deviation (or n < 2) the t-based test is undefined;
      the result then carries nan p-values, ``equivalent=False`` and a ``note`` saying
      why, instead of dividing by zero.
    """
    d = vector(differences, "differences")
    margin = positive(margin, "margin")
    alpha = probability(alpha, "alpha", high_open=True)
    if alpha >= 0.5:
        raise ValueError("alpha must be below 0.5 for a TOST")
    used = _resolve_method(d, method)
    n = int(d.size)
    est = float(d.mean())
    level = 1.0 - 2.0 * alpha
    if used in ("exact", "tango"):
        return _tost_binary(d, margin, alpha, used)
    # t-based
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
    or n < 2).
    """
    d = vector(differences, "differences")
    alpha = probability(alpha, "alpha")
    if alpha >= 0.5:
        raise ValueError("alpha must be below 0.5 for a TOST")
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
