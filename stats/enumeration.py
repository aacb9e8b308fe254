"""Exact resampling distributions where they are cheap, and the Monte Carlo error otherwise.

A cluster bootstrap over c units draws c units with replacement; two draws that pick the
same units the same number of times give the same statistic, so the bootstrap
distribution of a mean is a distribution over the C(2c - 1, c) *multisets* of size c,
each with its multinomial probability c! / (k_1! ... k_c! c^c) (k_u: how often unit u
is drawn). With few units that is a short list (35 at c = 4, 92,378 at c = 10, 352,716
at c = 11), and the ideal bootstrap p value and percentile interval can be computed
exactly instead of estimated from random draws, so they do not depend on a seed. From
c = 12 (1,352,078 multisets) the draws are random, and every p carries its Monte Carlo
standard error sqrt(p (1 - p) / draws).

- :func:`bootstrap_multisets`: the multisets of c units and their probabilities.
- :func:`resampled_contrast`: the percentile cluster bootstrap of a contrast (the
  interval and centred p of :func:`prereg.stats.contrast_bootstrap` with
  ``small_clusters="none"``, the seed's method), exact by enumeration up to
  :data:`MAX_ENUMERATED` multisets, else ``draws`` random draws, with ``exact`` and
  ``mc_se`` saying which.
- :func:`draws_for_mc_se`: how many draws keep the MC standard error of a (Holm-
  adjusted) p below a target at the decision threshold.
- :func:`mc_standard_error` and :func:`holm_mc_se`: the MC error of a p and of the Holm
  adjusted p values built from several.

(The sign-flip test, :func:`prereg.stats.sign_flip_test`, already enumerates its 2^c
sign patterns exactly up to 40 non-zero units.)
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from numpy.typing import NDArray

from prereg.stats._validate import count, draw_count, positive, probability, rng_seed, vector
from prereg.stats.contrasts import _unit_contrasts, contrast_bootstrap

__all__ = [
    "MAX_ENUMERATED",
    "MC_SE_TARGET",
    "ResampledContrast",
    "bootstrap_multiset_count",
    "bootstrap_multisets",
    "draws_for_mc_se",
    "holm_mc_se",
    "mc_standard_error",
    "resampled_contrast",
]

#: Enumerate the bootstrap distribution when it has at most this many multisets (c <= 11).
MAX_ENUMERATED = 1_000_000
#: The Monte Carlo standard error a drawn p may have at the decision threshold.
MC_SE_TARGET = 0.002


def bootstrap_multiset_count(units: int) -> int:
    """C(2c - 1, c): the distinct bootstrap resamples (multisets) of ``units`` units."""
    c = count(units, "units")
    if c < 1:
        raise ValueError(f"units must be at least 1, got {units!r}")
    return math.comb(2 * c - 1, c)


@lru_cache(maxsize=16)
def _multisets(units: int) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    bars = np.array(
        list(itertools.combinations(range(2 * units - 1), units - 1)), dtype=np.int64
    ).reshape(-1, units - 1)
    # stars and bars: the c - 1 bar positions among 2c - 1 slots split c stars into c parts
    edges = np.hstack(
        [
            np.full((bars.shape[0], 1), -1, dtype=np.int64),
            bars,
            np.full((bars.shape[0], 1), 2 * units - 1, dtype=np.int64),
        ]
    )
    counts = np.diff(edges, axis=1) - 1
    log_fact = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, units + 1)))])
    log_p = log_fact[units] - log_fact[counts].sum(axis=1) - units * math.log(units)
    prob = np.exp(log_p)
    prob /= prob.sum()  # exact up to rounding; the sum is 1 by the multinomial theorem
    counts.setflags(write=False)
    prob.setflags(write=False)
    return counts, prob


def bootstrap_multisets(units: int) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Every bootstrap resample of ``units`` units as a multiset: (counts, probabilities).

    ``counts`` is a (C(2c - 1, c), c) matrix, row m giving how often each unit is drawn
    (each row sums to c); ``probabilities`` the multinomial probability of each row under
    c draws with replacement, c! / (prod_u k_u!) / c^c (they sum to 1). Read-only arrays,
    cached. ValueError above :data:`MAX_ENUMERATED` multisets.
    """
    size = bootstrap_multiset_count(units)
    if size > MAX_ENUMERATED:
        raise ValueError(
            f"units: {units} units have {size:,} bootstrap multisets, more than {MAX_ENUMERATED:,}"
        )
    return _multisets(count(units, "units"))


def mc_standard_error(pvalue: float, draws: int) -> float:
    """The Monte Carlo standard error of a p estimated from ``draws`` random draws,
    sqrt(p (1 - p) / draws). ValueError for a p outside [0, 1] (or nan) and for a draw
    count that is not a positive integer (an exact p has no Monte Carlo error: it is 0
    without asking this function, as :func:`resampled_contrast` sets it)."""
    p = probability(pvalue, "pvalue", low_open=False, high_open=False)
    b = draw_count(draws)
    return math.sqrt(p * (1.0 - p) / b)


def draws_for_mc_se(alpha: float = 0.05, tests: int = 1, target: float = MC_SE_TARGET) -> int:
    """Random draws that keep the MC standard error of a Holm-adjusted p below ``target``
    at the decision threshold ``alpha``, over a set of ``tests`` p values.

    A Holm-adjusted p of about alpha is k times a raw p of about alpha / k (k <= tests),
    with MC error k sqrt((alpha / k)(1 - alpha / k) / B); it is largest at k = tests, so
    B >= tests alpha (1 - alpha / tests) / target^2: 11,875 for one test at .05 (the
    usual 12,000), 99,375 for eight. Rounded up to a thousand.
    """
    alpha = probability(alpha, "alpha")
    k = count(tests, "tests")
    if k < 1:
        raise ValueError(f"tests must be a positive integer, got {tests!r}")
    target = positive(target, "target")
    need = k * alpha * (1.0 - alpha / k) / target**2
    return int(math.ceil(need / 1000.0) * 1000)


def holm_mc_se(pvalues: Sequence[float], mc_ses: Sequence[float]) -> list[float]:
    """The MC standard error of each Holm-adjusted p (first order): the adjusted p of a
    hypothesis is min(1, max over j <= its rank of (m - j + 1) p_(j)); its error is the
    multiplier times the MC error of the p that sets that maximum (0 when every p is
    exact). ValueError for empty or mismatched inputs, a p outside [0, 1], a negative or
    nan standard error."""
    ps = vector(pvalues, "pvalues")
    ses = vector(mc_ses, "mc_ses")
    m = int(ps.size)
    if ses.size != m:
        raise ValueError(
            f"mc_ses must hold one MC standard error per p value ({m}), got {ses.size}"
        )
    if bool(np.any((ps < 0.0) | (ps > 1.0))):
        raise ValueError("pvalues must lie in [0, 1]")
    if bool(np.any(ses < 0.0)):
        raise ValueError("mc_ses must be non-negative")
    pvalues, mc_ses = ps.tolist(), ses.tolist()
    order = sorted(range(m), key=lambda i: pvalues[i])
    out = [0.0] * m
    best, best_se = -1.0, 0.0
    for rank, i in enumerate(order):
        value = (m - rank) * pvalues[i]
        if value > best:
            best, best_se = value, (m - rank) * mc_ses[i]
        out[i] = best_se
    return out


@dataclass(frozen=True)
class ResampledContrast:
    """A percentile cluster bootstrap of a contrast, exact or drawn.

    As :class:`prereg.stats.results.ContrastResult` under ``small_clusters="none"``
    (estimate, percentile interval at ``level``, ``se`` the SD of the bootstrap
    distribution, ``pvalue`` the centred two-sided p, ``n`` units), with ``exact``
    (enumerated: ``resamples`` multisets, no seed, ``mc_se`` 0) or drawn (``resamples``
    random draws with ``seed``, ``mc_se`` = sqrt(p (1 - p) / draws)).
    """

    estimate: float
    low: float
    high: float
    level: float
    se: float
    pvalue: float
    n: int
    exact: bool
    resamples: int
    mc_se: float
    seed: int | None
    method: str


def _quantiles(
    values: NDArray[np.float64], prob: NDArray[np.float64], qs: Sequence[float]
) -> list[float]:
    """For each q, the smallest value whose cumulative probability reaches q (inverse
    CDF; 1e-12 of slack for the rounding of the cumulative sum)."""
    order = np.argsort(values)
    ordered = values[order]
    cdf = np.cumsum(prob[order])
    out = []
    for q in qs:
        at = int(np.searchsorted(cdf, q - 1e-12, side="left"))
        out.append(float(ordered[min(at, ordered.size - 1)]))
    return out


@lru_cache(maxsize=16)
def _float_counts(units: int) -> NDArray[np.float64]:
    counts = _multisets(units)[0].astype(np.float64)
    counts.setflags(write=False)
    return counts


def _exact(d: NDArray[np.float64], level: float) -> ResampledContrast:
    prob = _multisets(d.size)[1]
    means = (_float_counts(d.size) @ d) / d.size
    estimate = float(d.mean())
    bound = abs(estimate) - 1e-12 * max(1.0, abs(estimate))
    pvalue = float(prob[np.abs(means - estimate) >= bound].sum())
    tail = (1.0 - level) / 2.0
    low, high = _quantiles(means, prob, (tail, 1.0 - tail))
    centre = float(prob @ means)
    se = math.sqrt(max(0.0, float(prob @ (means - centre) ** 2)))
    return ResampledContrast(
        estimate=estimate,
        low=low,
        high=high,
        level=level,
        se=se,
        pvalue=min(1.0, pvalue),
        n=int(d.size),
        exact=True,
        resamples=int(prob.size),
        mc_se=0.0,
        seed=None,
        method=(
            f"cluster bootstrap of a contrast over {d.size} units, exact: every one of the "
            f"{prob.size:,} multisets with its multinomial probability; percentile "
            "interval (inverse CDF), centred two-sided p"
        ),
    )


def resampled_contrast(
    values: Any,
    weights: Any,
    *,
    units: Any = None,
    draws: int = 10_000,
    level: float = 0.95,
    seed: int | None = 0,
    max_enumerated: int = MAX_ENUMERATED,
) -> ResampledContrast:
    """The percentile cluster bootstrap of a contrast, the seed's method (arguments as
    :func:`prereg.stats.contrast_bootstrap`), exact when the units have at most
    ``max_enumerated`` bootstrap multisets, else from ``draws`` seeded random draws.

    This keeps the seed's percentile interval and centred p (the ToolBottleneckBench
    study section reproduces the seed's figures with it), not the bootstrap-SE t
    interval that :func:`prereg.stats.contrast_bootstrap` prints by default; the drawn
    path is ``contrast_bootstrap(..., small_clusters="none")``, of which the exact path
    is the limit as the draws grow.

    Exact: p = P*(|d* - est| >= |est|) over the enumerated bootstrap distribution (the
    quantity the drawn p = (1 + #{|d* - est| >= |est|}) / (draws + 1) estimates; it may be
    0, the draws' floor 1 / (draws + 1) being an artefact of drawing); the interval is
    its (1 -+ level) / 2 quantiles by inverse CDF. The result does not depend on ``seed``.
    Needs at least two units; ValueError naming the argument for bad input (as
    :func:`prereg.stats.contrast_bootstrap`; ``max_enumerated`` a positive integer).
    """
    draws, seed = draw_count(draws), rng_seed(seed)
    limit = draw_count(max_enumerated, "max_enumerated")
    d, _, _ = _unit_contrasts(values, weights, units)
    if d.size < 2:
        raise ValueError(f"a bootstrap needs at least two resampling units, got {d.size}")
    level = probability(level, "level")
    if bootstrap_multiset_count(d.size) <= min(limit, MAX_ENUMERATED):
        return _exact(d, level)
    res = contrast_bootstrap(
        values,
        weights,
        units=units,
        draws=draws,
        level=level,
        seed=seed,
        small_clusters="none",
    )
    return ResampledContrast(
        estimate=res.estimate,
        low=res.low,
        high=res.high,
        level=res.level,
        se=res.se,
        pvalue=res.pvalue,
        n=res.n,
        exact=False,
        resamples=res.draws,
        mc_se=mc_standard_error(res.pvalue, res.draws),
        seed=res.seed,
        method=f"{res.method}; {res.draws:,} random draws (seed {res.seed})",
    )
