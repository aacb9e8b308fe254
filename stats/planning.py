"""Planning: minimum detectable effects, sample sizes, and the sequential monitor."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from prereg.stats._scipy import special
from prereg.stats._validate import at_least, count, probability
from prereg.stats.results import MonitorExact, MonitorSimulation
from prereg.stats.sequential import _log_evalue, _prior, _threshold
from prereg.stats.sizing import _ceil, mde_paired, min_discordant, prompts_for_mde

__all__ = [
    "mde_paired",
    "prompts_for_mde",
    "mcnemar_sample_size",
    "mcnemar_exact_power",
    "mcnemar_exact_sample_size",
    "min_discordant",
    "simulate_sequential_monitor",
]


def mcnemar_sample_size(
    p01: float, p10: float, alpha: float = 0.05, power: float = 0.8, sides: int = 2
) -> float:
    """Number of pairs for McNemar's test to reach ``power`` (Connor 1987).

    With discordant probabilities p10 (first arm only succeeds) and p01 (second arm
    only), psi = p01 + p10 and delta = p10 - p01,

        n = ceil( (z_{1-alpha/sides} sqrt(psi) + z_power sqrt(psi - delta^2))^2 / delta^2 ).

    ``math.inf`` when p01 == p10 (no difference to detect). Reference: Connor (1987),
    Biometrics 43:207-211 (p. 209); e.g. p01 = 0.45, p10 = 0.05 gives 23 pairs at
    alpha = 0.05 two-sided and 80% power.
    """
    p01 = probability(p01, "p01", low_open=False, high_open=False)
    p10 = probability(p10, "p10", low_open=False, high_open=False)
    if p01 + p10 > 1.0 + 1e-12:
        raise ValueError("p01 + p10 cannot exceed 1")
    alpha = probability(alpha, "alpha")
    power = probability(power, "power")
    if isinstance(sides, bool) or sides not in (1, 2):
        raise ValueError(f"sides must be 1 or 2, got {sides!r}")
    psi = p01 + p10
    delta = p10 - p01
    if delta == 0.0:
        return math.inf
    za = float(special.ndtri(1.0 - alpha / sides))
    zb = float(special.ndtri(power))
    n = (za * math.sqrt(psi) + zb * math.sqrt(max(psi - delta**2, 0.0))) ** 2 / delta**2
    return _ceil(n)


def _discordant_inputs(
    p01: float, p10: float, alpha: float, sides: int
) -> tuple[float, float, float, int]:
    p01 = probability(p01, "p01", low_open=False, high_open=False)
    p10 = probability(p10, "p10", low_open=False, high_open=False)
    if p01 + p10 > 1.0 + 1e-12:
        raise ValueError("p01 + p10 cannot exceed 1")
    alpha = probability(alpha, "alpha")
    if isinstance(sides, bool) or sides not in (1, 2):
        raise ValueError(f"sides must be 1 or 2, got {sides!r}")
    return p01, p10, alpha, int(sides)


def _conditional_power(
    m: NDArray[np.float64], share: float, alpha: float, sides: int
) -> NDArray[np.float64]:
    """P(the exact McNemar test rejects | m discordant pairs), each favouring the larger
    arm with probability ``share``: it rejects when the smaller count is at most k_m,
    the largest k with sides * P(Bin(m, 1/2) <= k) <= alpha (one-sided: in the direction
    of the larger discordant probability)."""
    mi = m.astype(np.int64)
    level = alpha / sides * (1.0 + 1e-12)
    # start from the normal approximation, then step to the exact critical value
    k = np.floor(m / 2.0 - float(special.ndtri(1.0 - alpha / sides)) * np.sqrt(m) / 2.0)
    k = np.clip(k, -1, np.maximum(mi - 1, -1)).astype(np.int64)
    for _ in range(64):
        down = (k >= 0) & (special.bdtr(np.maximum(k, 0), mi, 0.5) > level)
        up = (k + 1 < mi) & (special.bdtr(k + 1, mi, 0.5) <= level)
        if not (down.any() or up.any()):
            break
        k = k - down + up
    # the larger count is B ~ Bin(m, share); reject if m - B <= k, i.e. B >= m - k
    kk = np.maximum(k, 0)
    out = special.bdtrc(mi - kk - 1, mi, share)
    if sides == 2:  # and if B <= k (disjoint: k < m / 2)
        out = out + special.bdtr(kk, mi, share)
    power: NDArray[np.float64] = np.where(k >= 0, out, 0.0)
    return power


def _exact_power(
    ns: NDArray[np.int64], p01: float, p10: float, alpha: float, sides: int
) -> NDArray[np.float64]:
    """Exact power of the exact McNemar test at each n (vectorised, see
    :func:`mcnemar_exact_power`); m is summed over n psi +- 9 sd (+ 10), beyond which
    the binomial mass is below 1e-18."""
    psi = p01 + p10
    if psi == 0.0:
        return np.zeros(ns.size)
    share = max(p01, p10) / psi
    nf = ns.astype(np.float64)
    spread = 9.0 * np.sqrt(nf * psi * (1.0 - psi)) + 10.0
    m_lo = int(max(0.0, float((nf * psi - spread).min())))
    m_hi = int(min(float(nf.max()), float((nf * psi + spread).max())))
    m = np.arange(m_lo, m_hi + 1, dtype=np.float64)
    cond = _conditional_power(m, share, alpha, sides)
    out = np.empty(ns.size)
    for start in range(0, ns.size, 256):
        n_block = nf[start : start + 256, None]
        inside = m[None, :] <= n_block
        log_pmf = (
            special.gammaln(n_block + 1.0)
            - special.gammaln(m[None, :] + 1.0)
            - special.gammaln(np.maximum(n_block - m[None, :], 0.0) + 1.0)
            + special.xlogy(m[None, :], psi)
            + special.xlog1py(np.maximum(n_block - m[None, :], 0.0), -psi)
        )
        pmf = np.where(inside, np.exp(log_pmf), 0.0)
        out[start : start + 256] = np.minimum((pmf * cond[None, :]).sum(axis=1), 1.0)
    return out


def mcnemar_exact_power(
    n: int, p01: float, p10: float, alpha: float = 0.05, sides: int = 2
) -> float:
    """Exact power of :func:`prereg.stats.mcnemar_exact` (the registered test) on n pairs.

    The number of discordant pairs is M ~ Bin(n, psi), psi = p01 + p10; given M = m the
    larger discordant count is Bin(m, max(p01, p10) / psi), and the conditional binomial
    test rejects when the smaller count is at most k_m, the largest k with
    sides * P(Bin(m, 1/2) <= k) <= alpha. Power = sum over m of P(M = m) P(reject | m),
    by enumeration (Suissa and Shuster 1991, Biometrics 47:361-372; Fagerland, Lydersen
    and Laake 2013). One-sided: in the direction of the larger discordant probability.
    """
    n = at_least(n, "n", 1)
    p01, p10, alpha, sides = _discordant_inputs(p01, p10, alpha, sides)
    return float(_exact_power(np.array([n]), p01, p10, alpha, sides)[0])


#: above this many candidate n the search bisects instead of scanning every n
_LINEAR_SCAN = 4000


def mcnemar_exact_sample_size(
    p01: float, p10: float, alpha: float = 0.05, power: float = 0.8, sides: int = 2
) -> float:
    """Fewest pairs at which the exact McNemar test reaches ``power`` (exact power).

    Exact power (:func:`mcnemar_exact_power`) is not monotone in n (the discrete test's
    saw-tooth), so n is searched upward: from a start below Connor's asymptotic n where
    the exact power is below the target (half of Connor's n, halved again while it is
    not), every n is tried in turn (vectorised) up to the first that reaches ``power``;
    with more than 4000 candidates (very small differences, where the saw-tooth has
    smoothed out) the crossing is found by bisection. The returned n has exact power
    >= ``power`` and n - 1 has less. Connor's n (:func:`mcnemar_sample_size`) is for
    the asymptotic test and typically reaches only 0.76-0.78 exact power for a target
    of 0.80 (e.g. p01 = 0.45, p10 = 0.05: Connor 23 pairs, exact power 0.777; exact n
    25). ``math.inf`` when p01 == p10. References: Suissa and Shuster (1991); Chernick
    and Liu (2002), Am Stat 56:149-155 (the saw-tooth).
    """
    p01, p10, alpha, sides = _discordant_inputs(p01, p10, alpha, sides)
    target = probability(power, "power")
    connor = mcnemar_sample_size(p01, p10, alpha=alpha, power=target, sides=sides)
    if not math.isfinite(connor):
        return math.inf

    def reaches(n: int) -> bool:
        return bool(_exact_power(np.array([n]), p01, p10, alpha, sides)[0] >= target)

    lo = max(1, int(connor) // 2)
    while lo > 1 and reaches(lo):
        lo //= 2
    if lo == 1 and reaches(1):
        return 1
    hi = max(int(connor), lo + 1)
    while not reaches(hi):
        hi = int(math.ceil(hi * 1.25)) + 1
    if hi - lo <= _LINEAR_SCAN:
        ns = np.arange(lo + 1, hi + 1, dtype=np.int64)
        ok = _exact_power(ns, p01, p10, alpha, sides) >= target
        return int(ns[int(np.argmax(ok))])
    while hi - lo > 1:  # reaches(hi), not reaches(lo)
        mid = (lo + hi) // 2
        if reaches(mid):
            hi = mid
        else:
            lo = mid
    return hi


def _monitor_inputs(
    p01: float, p10: float, max_prompts: int, min_prompts: int, threshold: float
) -> tuple[float, float, float]:
    """Validated (p01, p10, threshold) of a monitor's operating characteristics."""
    p01 = probability(p01, "p01", low_open=False, high_open=False)
    p10 = probability(p10, "p10", low_open=False, high_open=False)
    if p01 + p10 > 1.0 + 1e-12:
        raise ValueError("p01 + p10 cannot exceed 1")
    at_least(max_prompts, "max_prompts", 1)
    count(min_prompts, "min_prompts")
    return p01, p10, _threshold(threshold)


def simulate_sequential_monitor(
    p01: float,
    p10: float,
    max_prompts: int,
    threshold: float = 20.0,
    min_prompts: int = 40,
    prior: tuple[float, float] = (1.0, 1.0),
    sims: int = 10_000,
    seed: int | None = 0,
) -> MonitorSimulation:
    """Simulate the beta-mixture sequential monitor's operating characteristics.

    Each prompt is independently discordant in favour of the first arm with
    probability p10, of the second with p01, and concordant otherwise. The monitor of
    :func:`prereg.stats.sequential_monitor` is applied after every prompt, up to
    ``max_prompts``; the share of simulated streams that stop is the type I error
    (p01 == p10) or the power, with its binomial standard error, and the mean of
    min(stopping prompt, max_prompts) is the expected number of prompts used.
    Vectorised over simulations in blocks, seeded with ``default_rng(seed)``.
    """
    p01, p10, thr = _monitor_inputs(p01, p10, max_prompts, min_prompts, threshold)
    sims = at_least(sims, "sims", 1)
    a, b0 = _prior(prior)
    n_max, sims = int(max_prompts), int(sims)
    # log E(b, c) = (b + c) ln 2 + lgamma(a + b) + lgamma(b0 + c) - lgamma(a + b0 + b + c)
    #               - betaln(a, b0), from three one-dimensional tables
    grid = np.arange(n_max + 1, dtype=np.float64)
    la = special.gammaln(a + grid)
    lb = special.gammaln(b0 + grid)
    lab = special.gammaln(a + b0 + grid) - grid * math.log(2.0)
    const = float(special.betaln(a, b0))
    log_thr = math.log(thr) - 1e-12
    first_valid = max(min_prompts, 1) - 1  # index of the first prompt allowed to stop
    rng = np.random.default_rng(seed)
    stops = np.empty(sims)
    rejected = np.empty(sims, dtype=bool)
    block = max(1, 4_000_000 // n_max)
    done = 0
    while done < sims:
        size = min(block, sims - done)
        u = rng.random((size, n_max))
        if first_valid >= n_max:  # the monitor may never stop within max_prompts
            stops[done : done + size] = n_max
            rejected[done : done + size] = False
            done += size
            continue
        bpath = np.cumsum(u < p10, axis=1)
        cpath = np.cumsum((u >= p10) & (u < p10 + p01), axis=1)
        loge = la[bpath] + lb[cpath] - lab[bpath + cpath] - const
        hit = loge[:, first_valid:] >= log_thr
        any_hit = hit.any(axis=1)
        when = np.where(any_hit, np.argmax(hit, axis=1) + first_valid + 1, n_max)
        stops[done : done + size] = when
        rejected[done : done + size] = any_hit
        done += size
    rate = float(rejected.mean())
    return MonitorSimulation(
        rejection_rate=rate,
        rejection_se=math.sqrt(rate * (1.0 - rate) / sims),
        expected_prompts=float(stops.mean()),
        expected_prompts_se=float(stops.std(ddof=1) / math.sqrt(sims)) if sims > 1 else 0.0,
        median_prompts=float(np.median(stops)),
        p01=p01,
        p10=p10,
        max_prompts=n_max,
        threshold=thr,
        min_prompts=int(min_prompts),
        prior=(a, b0),
        sims=sims,
        seed=seed,
        method=(
            "simulated beta-mixture monitor: stop when E >= threshold after "
            "min_prompts prompts, capped at max_prompts"
        ),
    )


def sequential_monitor_exact(
    p01: float,
    p10: float,
    max_prompts: int,
    threshold: float = 20.0,
    min_prompts: int = 40,
    prior: tuple[float, float] = (1.0, 1.0),
) -> MonitorExact:
    """Exact stopping probability and expected prompts of the beta-mixture monitor.

    The monitor's state after t prompts is the pair of discordant counts (b, c);
    each prompt moves it to (b + 1, c) with probability p10, to (b, c + 1) with
    p01, and leaves it with 1 - p01 - p10. A dynamic programme over the
    probability of each unstopped state, absorbing the states where the e-value
    reaches ``threshold`` once at least ``min_prompts`` prompts are in, gives
    P(stop by ``max_prompts``) and E[min(stop, max_prompts)] = sum over t of
    P(still running before prompt t). O(max_prompts^3) time, O(max_prompts^2)
    memory: exact where :func:`simulate_sequential_monitor` has Monte Carlo error.
    """
    p01, p10, thr = _monitor_inputs(p01, p10, max_prompts, min_prompts, threshold)
    a, b0 = _prior(prior)
    n_max = int(max_prompts)
    grid = np.arange(n_max + 1, dtype=np.float64)
    crossed = _log_evalue(grid[:, None], grid[None, :], a, b0) >= math.log(thr) - 1e-12
    prob = np.zeros((n_max + 1, n_max + 1))
    prob[0, 0] = 1.0
    stopped = expected = 0.0
    stay = 1.0 - p01 - p10
    for t in range(1, n_max + 1):
        expected += float(prob.sum())  # P(still running before prompt t)
        new = prob * stay
        new[1:, :] += prob[:-1, :] * p10
        new[:, 1:] += prob[:, :-1] * p01
        if t >= min_prompts:
            stopped += float(new[crossed].sum())
            new[crossed] = 0.0
        prob = new
    return MonitorExact(
        rejection_rate=min(1.0, stopped),
        expected_prompts=expected,
        p01=p01,
        p10=p10,
        max_prompts=n_max,
        threshold=thr,
        min_prompts=int(min_prompts),
    )
