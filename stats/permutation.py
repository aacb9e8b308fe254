"""Exact randomisation tests: two-sample permutation and paired sign-flip."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from prereg.stats._scipy import stats as sps
from prereg.stats._validate import alternative as check_alternative
from prereg.stats._validate import at_least, count, vector
from prereg.stats.results import PermutationResult

__all__ = ["exact_permutation_test", "sign_flip_test"]

#: exact enumeration of relabelings up to this many (above: Monte Carlo)
MAX_EXACT_RELABELINGS = 1_000_000
#: exact sign-flip enumeration (meet in the middle) up to this many non-zero differences
MAX_EXACT_SIGN_FLIPS = 40
#: lattice convolution budget (multiply-adds) for integer-valued differences
_LATTICE_BUDGET = 50_000_000
DEFAULT_DRAWS = 100_000


#: largest integer (relative to the smallest non-zero magnitude) a lattice may use
_LATTICE_MAX_INT = 2.0**40
#: relative tie tolerance for sums of values that lie on no lattice
_RELATIVE_TIE = 1e-10


def _integers(values: NDArray[np.float64]) -> NDArray[np.int64] | None:
    """``values = q a`` with integers ``a`` (up to 2^40 in size), or None.

    The lattice is found relative to the data's own scale: the values are divided by the
    smallest non-zero magnitude and the ratios multiplied by the smallest K <= 64 that
    makes them all integers (to within 16 ulp of the ratio, 1e-9 absolute). Shifting
    data that were centred first, or rescaling them, leaves the integers unchanged, so
    everything computed from them is too.
    """
    nonzero = np.abs(values[values != 0.0])
    if nonzero.size == 0:
        return np.zeros(values.size, dtype=np.int64)
    with np.errstate(over="ignore"):
        ratios = values / nonzero.min()
    if not np.all(np.isfinite(ratios)):
        return None
    for k in range(1, 65):
        scaled = ratios * k
        if float(np.abs(scaled).max()) > _LATTICE_MAX_INT:
            return None
        rounded = np.round(scaled)
        slack = 1e-9 + 16.0 * np.finfo(np.float64).eps * np.abs(scaled)
        if np.all(np.abs(scaled - rounded) <= slack):
            ints: NDArray[np.int64] = rounded.astype(np.int64)
            return ints
    return None


def _exact_values(values: NDArray[np.float64], headroom: int) -> tuple[NDArray[Any], float]:
    """The values the statistic is computed on, and the tie tolerance for their sums.

    On a lattice (see :func:`_integers`): the integers, and tolerance 0 (sums of up to
    ``headroom`` times their total magnitude stay exact in int64). Otherwise the values
    divided by their largest magnitude, and a tolerance of 1e-10 times the sum of their
    magnitudes: relative to the data's own spread, never to an offset, and far above the
    rounding error of a sum in another order (about n 1e-16 of the same scale).
    """
    ints = _integers(values)
    if ints is not None and headroom * float(np.abs(ints).sum()) < 2.0**62:
        return ints, 0.0
    top = float(np.abs(values).max()) if values.size else 0.0
    scaled = values / top if top > 0 else values
    return scaled, _RELATIVE_TIE * float(np.abs(scaled).sum())


def _count_tail(stats: NDArray[Any], obs: Any, alt: str, tol: float) -> int:
    if alt == "greater":
        return int(np.count_nonzero(stats >= obs - tol))
    if alt == "less":
        return int(np.count_nonzero(stats <= obs + tol))
    return int(np.count_nonzero(np.abs(stats) >= abs(obs) - tol))


def exact_permutation_test(
    x: Any,
    y: Any,
    alternative: str = "two-sided",
    *,
    max_exact: int = MAX_EXACT_RELABELINGS,
    draws: int = DEFAULT_DRAWS,
    seed: int | None = 0,
) -> PermutationResult:
    """Two-sample permutation test of mean(x) - mean(y), exact over all relabelings.

    The pooled values are split in every one of the C(n_x + n_y, n_x) ways into groups
    of the observed sizes; the p-value is the share of relabelings whose statistic is
    at least as extreme as the observed one: T* >= T ('greater'), T* <= T ('less'),
    or |T*| >= |T| ('two-sided'; the Fisher-Pitman convention, which differs from
    doubling the smaller tail when group sizes differ). Above ``max_exact``
    relabelings (default 10^6) the test uses ``draws`` random relabelings (seeded) and
    p = (1 + #extreme) / (1 + draws), which keeps it valid (Phipson and Smyth 2010).
    ValueError naming the argument for NaN, infinite or no values, ``draws`` below 1
    and a negative ``max_exact``.

    Ties, and invariance. T is a monotone function of the first group's sum S
    (n_x n_y T = n S - n_x total), so relabelings are compared on D = n S - n_x total
    computed from the pooled values centred at their lower median (a datum, so the
    centring is exact for data on a lattice). When the centred values lie on a lattice
    (integers, or integers times one unit, found relative to the smallest non-zero
    centred magnitude) D is computed in exact integer arithmetic and ties are exact;
    otherwise ties are judged with a tolerance of 1e-10 of the centred values' own
    spread. Either way the p value depends only on the ordering of the statistics: it is
    the same for x and a + b x (b > 0; b < 0 swaps 'greater' and 'less'), whatever the
    offset a or the unit b, wherever a + b x is itself exactly representable.
    References: Fisher (1935); Pitman (1937); Good (2005), Permutation, Parametric and
    Bootstrap Tests of Hypotheses; Phipson and Smyth (2010), Stat Appl Genet Mol Biol 9.
    """
    xa = vector(x, "x")
    ya = vector(y, "y")
    alt = check_alternative(alternative)
    max_exact = count(max_exact, "max_exact")
    draws = at_least(draws, "draws", 1)
    nx, ny = xa.size, ya.size
    n = nx + ny
    obs = float(xa.mean() - ya.mean())
    raw = np.concatenate([xa, ya])
    centred = raw - np.sort(raw)[(n - 1) // 2]
    pooled, tol_sum = _exact_values(centred, headroom=2 * n)
    total = pooled.sum()
    obs_d = n * pooled[:nx].sum() - nx * total
    tol = n * tol_sum
    n_relabel = math.comb(n, nx)
    if n_relabel <= max_exact:
        # enumerate subsets of the smaller group; D depends on that group's sum only
        k, small_is_x = (nx, True) if nx <= ny else (ny, False)
        combos = itertools.combinations(range(n), k)
        hits = 0
        chunk = max(1, 200_000 // k)
        while True:
            flat = np.fromiter(
                itertools.chain.from_iterable(itertools.islice(combos, chunk)), dtype=np.intp
            )
            if flat.size == 0:
                break
            sums = pooled[flat.reshape(-1, k)].sum(axis=1)
            sx = sums if small_is_x else total - sums
            hits += _count_tail(n * sx - nx * total, obs_d, alt, tol)
        return PermutationResult(
            statistic=obs,
            pvalue=min(1.0, hits / n_relabel),
            estimate=obs,
            alternative=alt,
            n=n,
            n_resamples=n_relabel,
            exact=True,
            method="two-sample permutation test, exact enumeration",
        )
    rng = np.random.default_rng(seed)
    hits = 0
    chunk = max(1, 2_000_000 // n)
    done = 0
    while done < draws:
        size = min(chunk, draws - done)
        perm = rng.permuted(np.broadcast_to(pooled, (size, n)), axis=1)
        sx = perm[:, :nx].sum(axis=1)
        hits += _count_tail(n * sx - nx * total, obs_d, alt, tol)
        done += size
    return PermutationResult(
        statistic=obs,
        pvalue=min(1.0, (1 + hits) / (1 + draws)),
        estimate=obs,
        alternative=alt,
        n=n,
        n_resamples=int(draws),
        exact=False,
        method=f"two-sample permutation test, Monte Carlo ({draws} draws)",
    )


# ---------------------------------------------------------------------------
# sign flips
# ---------------------------------------------------------------------------


def _subset_sums(values: NDArray[np.float64]) -> NDArray[np.float64]:
    """All 2^k sums of +-values (k small), as a flat array."""
    sums = np.zeros(1)
    for v in values:
        sums = np.concatenate([sums + v, sums - v])
    return sums


def _count_pairs(
    sa: NDArray[np.float64], sb_sorted: NDArray[np.float64], obs: float, alt: str, tol: float
) -> int:
    """Number of (i, j) with sa[i] + sb[j] in the tail defined by ``obs``."""
    nb = sb_sorted.size
    if alt == "greater":
        return int((nb - np.searchsorted(sb_sorted, obs - tol - sa, side="left")).sum())
    if alt == "less":
        return int(np.searchsorted(sb_sorted, obs + tol - sa, side="right").sum())
    a = abs(obs) - tol
    if a <= 0:
        return int(sa.size * nb)
    upper = (nb - np.searchsorted(sb_sorted, a - sa, side="left")).sum()
    lower = np.searchsorted(sb_sorted, -a - sa, side="right").sum()
    return int(upper + lower)


def _lattice_cheap(a: NDArray[np.int64]) -> bool:
    """Whether the convolution over the integers ``a`` fits the multiply-add budget."""
    uniq, mult = np.unique(np.abs(a), return_counts=True)
    cost, length = 0, 1
    for v, r in zip(uniq, mult, strict=True):
        piece = int(v) * int(r) + 1
        cost += length * piece
        length += piece - 1
        if cost > _LATTICE_BUDGET:
            return False
    return True


def _lattice_distribution(a: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Support and probabilities of sum_i e_i a_i with independent fair signs e_i."""

    dist = np.ones(1)
    uniq, mult = np.unique(a, return_counts=True)
    for v, r in zip(uniq, mult, strict=True):
        # the number of + signs among r copies of v is Binomial(r, 1/2)
        piece = np.zeros(int(v) * int(r) + 1)
        piece[:: int(v)] = sps.binom.pmf(np.arange(r + 1), int(r), 0.5)
        dist = np.convolve(dist, piece)
    total = int(a.sum())
    # index u = sum of a_i with a + sign; the statistic is 2u - total
    support = 2 * np.arange(dist.size, dtype=np.int64) - total
    return support, dist


def sign_flip_test(
    differences: Any,
    alternative: str = "two-sided",
    *,
    draws: int = DEFAULT_DRAWS,
    seed: int | None = 0,
) -> PermutationResult:
    """Paired sign-flip (randomisation) test of mean(differences), exact over 2^n flips.

    Under H0 each paired difference is symmetric about zero, so every one of the 2^n
    sign patterns is equally likely; p is the share of patterns whose mean is at least
    as extreme as the observed one (two-sided: |T*| >= |T|, which equals doubling the
    smaller tail here because the null distribution is symmetric). Zero differences
    do not change under a flip and are carried along.

    Ties, and invariance. The non-zero differences are first expressed relative to their
    own scale: if they lie on a lattice (integers times one unit, found relative to the
    smallest non-zero magnitude, denominators up to 64: binary paired outcomes,
    differences of means over K runs, costs in cents) every sum is computed in exact
    integer arithmetic and ties are exact; otherwise the differences are divided by their
    largest magnitude and ties are judged within 1e-10 of the sum of magnitudes. The p
    value therefore depends only on the ordering of the statistics and is the same for d
    and b d for any unit b > 0 (b < 0 swaps 'greater' and 'less'), and for paired values
    shifted together ((a + x) - (a + y)) wherever that is exact.

    How the exact distribution is computed (all are exact, a documented size decides
    which):

    * up to 40 non-zero differences: complete enumeration, meet in the middle (the
      2^k sums of each half, then a sorted merge), at most 2 x 2^20 sums;
    * more, but on a lattice: the exact distribution by convolution of binomials on the
      lattice, within a budget of 5 x 10^7 multiply-adds;
    * otherwise Monte Carlo: ``draws`` (default 10^5) random sign vectors, seeded,
      p = (1 + #extreme) / (1 + draws) (Phipson and Smyth 2010); its Monte Carlo
      standard error is at most 0.0016.

    ValueError naming the argument for NaN, infinite or no differences and ``draws``
    below 1.

    References: Fisher (1935); Pratt and Gibbons (1981); Good (2005).
    """
    d = vector(differences, "differences")
    alt = check_alternative(alternative)
    draws = at_least(draws, "draws", 1)
    n = d.size
    obs = float(d.mean())
    nz_raw = d[d != 0.0]
    k = nz_raw.size
    total_patterns = 2**n
    if k == 0:
        return PermutationResult(
            statistic=obs,
            pvalue=1.0,
            estimate=obs,
            alternative=alt,
            n=n,
            n_resamples=total_patterns,
            exact=True,
            method="sign-flip test, exact (all differences zero)",
        )
    values, tol = _exact_values(nz_raw, headroom=1)
    signed: NDArray[np.int64] | None = values if values.dtype == np.int64 else None
    nz = values.astype(np.float64)  # integers below 2^53: their sums stay exact
    obs_sum = float(nz.sum())
    if signed is not None:
        tol = 0.5  # integer sums: anything closer than 1 is the same integer
    if k <= MAX_EXACT_SIGN_FLIPS:
        half = k // 2
        sa = _subset_sums(nz[:half])
        sb = np.sort(_subset_sums(nz[half:]))
        hits = _count_pairs(sa, sb, obs_sum, alt, tol)
        p = hits / float(2**k)
        return PermutationResult(
            statistic=obs,
            pvalue=min(1.0, p),
            estimate=obs,
            alternative=alt,
            n=n,
            n_resamples=total_patterns,
            exact=True,
            method="sign-flip test, exact enumeration",
        )
    if signed is not None and _lattice_cheap(signed):
        s_obs = int(signed.sum())
        support, prob = _lattice_distribution(np.abs(signed))
        if alt == "greater":
            p = float(prob[support >= s_obs].sum())
        elif alt == "less":
            p = float(prob[support <= s_obs].sum())
        else:
            p = float(prob[np.abs(support) >= abs(s_obs)].sum())
        return PermutationResult(
            statistic=obs,
            pvalue=min(1.0, p),
            estimate=obs,
            alternative=alt,
            n=n,
            n_resamples=total_patterns,
            exact=True,
            method="sign-flip test, exact (lattice convolution)",
        )
    rng = np.random.default_rng(seed)
    hits = 0
    done = 0
    chunk = max(1, 2_000_000 // k)
    while done < draws:
        size = min(chunk, draws - done)
        signs = rng.integers(0, 2, size=(size, k), dtype=np.int8) * 2 - 1
        sums = signs @ nz
        hits += _count_tail(sums, obs_sum, alt, tol)
        done += size
    return PermutationResult(
        statistic=obs,
        pvalue=min(1.0, (1 + hits) / (1 + draws)),
        estimate=obs,
        alternative=alt,
        n=n,
        n_resamples=int(draws),
        exact=False,
        method=f"sign-flip test, Monte Carlo ({draws} draws)",
    )
