"""Paired binary comparisons: exact McNemar, Tango's score interval, and TOST."""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np

from prereg.stats._scipy import optimize
from prereg.stats._scipy import stats as sps
from prereg.stats._validate import count, positive, probability, vector
from prereg.stats.results import DifferenceInterval, McNemarResult, TOSTResult

__all__ = ["mcnemar_exact", "tango_interval", "tost_paired", "equivalence_margin"]


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
    p = min(1.0, 2.0 * float(sps.binom.cdf(k, m, 0.5)))
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
    z = float(sps.norm.ppf(0.5 + level / 2.0))
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
# TOST
# ---------------------------------------------------------------------------

Method = Literal["auto", "t", "tango"]


def _is_paired_binary(d: np.ndarray[Any, Any]) -> bool:
    return bool(np.all((d == -1.0) | (d == 0.0) | (d == 1.0)))


def _resolve_method(d: np.ndarray[Any, Any], method: str) -> str:
    if method not in ("auto", "t", "tango"):
        raise ValueError(f"method must be 'auto', 't' or 'tango', got {method!r}")
    if method == "auto":
        return "tango" if _is_paired_binary(d) else "t"
    if method == "tango" and not _is_paired_binary(d):
        raise ValueError("method='tango' needs paired binary differences (each -1, 0 or +1)")
    return method


def tost_paired(
    differences: Any, margin: float, alpha: float = 0.05, method: Method = "auto"
) -> TOSTResult:
    """Two one-sided tests (Schuirmann 1987) for equivalence within (-margin, +margin).

    H0: delta <= -margin or delta >= +margin against H1: |delta| < margin, delta the mean
    paired difference. Equivalence is declared when both one-sided tests reject at
    ``alpha`` (p = max of the two one-sided p-values <= alpha), which is the same as the
    (1 - 2 alpha) interval lying inside the margins.

    Method (``method='auto'`` decides from the data type, not from the result):

    * Paired binary outcomes (every difference -1, 0 or +1): Tango's (1998) score
      tests, Z(-margin) >= z_{1-alpha} and Z(+margin) <= -z_{1-alpha}, with b and c the
      numbers of +1 and -1 differences. Tango designed this test for equivalence of
      paired proportions. Its variance is taken under the null boundary, so it stays
      positive when there are no discordant pairs: with n pairs and none discordant,
      equivalence within ``margin`` is shown iff margin >= z^2 / (n + z^2) (a score-test
      analogue of the rule of three). A t-test would instead see a zero standard
      deviation and declare equivalence at any margin, which is wrong.
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
    if used == "tango":
        b = int(np.sum(d == 1.0))
        c = int(np.sum(d == -1.0))
        z = float(sps.norm.ppf(1.0 - alpha))
        low, high = _tango_bounds(b, c, n, z)
        note = ""
        if b + c == 0:
            note = (
                "no discordant pairs: Tango's variance is taken at the null boundary, "
                f"so equivalence holds for margins >= z^2/(n+z^2) = {max(-low, high):.4g}"
            )
        if margin >= 1.0:
            # |delta| <= 1 always; H0 |delta| >= margin only possible at delta = +-1
            zl = zu = math.nan
            pl = 0.0 if est > -1.0 else 1.0
            pu = 0.0 if est < 1.0 else 1.0
            note = (note + "; " if note else "") + "margin >= 1 is vacuous for proportions"
        else:
            zl = _tango_z(b, c, n, -margin)
            zu = _tango_z(b, c, n, margin)
            pl = float(sps.norm.sf(zl))
            pu = float(sps.norm.cdf(zu))
        p = max(pl, pu)
        return TOSTResult(
            estimate=est,
            low=low,
            high=high,
            level=level,
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
            method="TOST, Tango score tests (paired proportions)",
            note=note,
        )
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
    pl = float(sps.t.sf(tl, df))
    pu = float(sps.t.cdf(tu, df))
    tcrit = float(sps.t.ppf(1.0 - alpha, df))
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
    |mean| + t_{1-alpha, n-1} se for the t-based test, and the larger absolute end of
    Tango's (1 - 2 alpha) score interval for paired binary outcomes (z^2 / (n + z^2)
    when nothing is discordant). It is how ToolBottleneckBench reports equivalence
    ("the smallest symmetric margins at which the two one-sided tests reject").
    nan when the t-based test is undefined (zero spread or n < 2).
    """
    d = vector(differences, "differences")
    alpha = probability(alpha, "alpha")
    if alpha >= 0.5:
        raise ValueError("alpha must be below 0.5 for a TOST")
    used = _resolve_method(d, method)
    n = int(d.size)
    if used == "tango":
        b = int(np.sum(d == 1.0))
        c = int(np.sum(d == -1.0))
        z = float(sps.norm.ppf(1.0 - alpha))
        low, high = _tango_bounds(b, c, n, z)
        return max(-low, high)
    if n < 2:
        return math.nan
    sd = float(d.std(ddof=1))
    if sd == 0.0:
        return math.nan
    return abs(float(d.mean())) + float(sps.t.ppf(1.0 - alpha, n - 1)) * sd / math.sqrt(n)
