"""The fast exact binary TOST computes what the definition says (issue 39, item 9).

Its pieces against independent references: the tail {U <= U(b, c)} found column by
column against the monotone envelope of every outcome's Tango bound (own scipy root
finding); the tail probability against a direct sum over the trinomial; the interval's
ends against the p value (the test rejects at an end and not 1e-6 inside it). No timing.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize
from scipy import stats as sps
from scipy.special import gammaln, xlogy

from prereg.stats import tost_paired
from prereg.stats.paired import _exact_upper_p, _observed_tail, _tail_probability


def _tango_z(b: float, c: float, n: int, d0: float) -> float:
    """Tango (1998) score statistic, closed-form constrained MLE (own code)."""
    bb = -b - c + (2 * n - b + c) * d0
    cc = -c * d0 * (1 - d0)
    q21 = max((math.sqrt(max(bb * bb - 8 * n * cc, 0.0)) - bb) / (4 * n), max(0.0, -d0))
    var = n * (2 * q21 + d0 * (1 - d0))
    num = b - c - n * d0
    return 0.0 if num == 0 else (num / math.sqrt(var) if var > 0 else math.copysign(math.inf, num))


def _upper_bound(b: int, c: int, n: int, z: float) -> float:
    top = 1 - 1e-13
    if _tango_z(b, c, n, top) + z >= 0:
        return 1.0
    return float(optimize.brentq(lambda d: _tango_z(b, c, n, d) + z, (b - c) / n, top, xtol=1e-15))


@pytest.mark.parametrize("n", [1, 2, 5, 13, 24])
@pytest.mark.parametrize("alpha", [0.05, 0.025])
def test_tail_is_the_enveloped_ordering(n: int, alpha: float) -> None:
    # every outcome's bound, their monotone envelope (max over b' <= b, c' >= c), and
    # for each observed outcome b*(c) of {envelope <= its bound (+ 1e-9 ties)}
    z = sps.norm.ppf(1 - alpha / 2)
    u = np.full((n + 1, n + 1), -np.inf)
    for b in range(n + 1):
        for c in range(n + 1 - b):
            u[b, c] = _upper_bound(b, c, n, z)
    env = np.maximum.accumulate(u, axis=0)
    env = np.maximum.accumulate(env[:, ::-1], axis=1)[:, ::-1]
    valid = np.add.outer(np.arange(n + 1), np.arange(n + 1)) <= n
    for b in range(n + 1):
        for c in range(n + 1 - b):
            level = u[b, c] + 1e-9 * max(1.0, abs(u[b, c]))
            want = ((env <= level) & valid).sum(axis=0) - 1.0
            np.testing.assert_array_equal(_observed_tail(b, c, n, alpha), want, err_msg=f"{b, c}")


def _trinomial_tail(bstar: np.ndarray, n: int, delta0: float, psi: float) -> float:
    """P(B <= b*(C)) summed cell by cell over (B, C, n - B - C)."""
    p10, p01 = (psi + delta0) / 2, (psi - delta0) / 2
    p00 = max(1 - p10 - p01, 0.0)
    total = 0.0
    for c in range(n + 1):
        bs = np.arange(0, int(min(bstar[c], n - c)) + 1)
        if bs.size == 0:
            continue
        rest = n - c - bs
        logs = (
            gammaln(n + 1)
            - gammaln(bs + 1)
            - gammaln(c + 1)
            - gammaln(rest + 1)
            + xlogy(bs, p10)
            + xlogy(c, p01)
            + xlogy(rest, p00)
        )
        total += float(np.exp(logs).sum())
    return total


@pytest.mark.parametrize("n", [1, 7, 30, 150])
def test_tail_probability_is_the_trinomial_sum(n: int) -> None:
    rng = np.random.default_rng(n)
    tails = [_observed_tail(int(b), 0, n, 0.05) for b in rng.integers(0, n + 1, 2)]
    tails += [_observed_tail(0, n, n, 0.05), _observed_tail(n // 3, n // 4, n, 0.05)]
    # and tails of no particular shape (columns falling, full before partial)
    tails += [rng.integers(-2, n + 2, n + 1).astype(float) for _ in range(2)]
    for bstar in tails:
        for delta0 in (-0.6, -0.05, 0.0, 0.13, 0.7):
            psi = np.concatenate([[abs(delta0)], rng.uniform(abs(delta0), 1.0, 4), [1.0]])
            got = _tail_probability(np.asarray(bstar), n, delta0, psi)
            want = np.array([_trinomial_tail(bstar, n, delta0, s) for s in psi])
            # the code may overstate a tail by cells below 1e-17, never understate it
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-13)


def test_tail_probability_at_a_thousand_pairs() -> None:
    n, delta0 = 1000, 0.0181
    bstar = _observed_tail(30, 25, n, 0.05)
    for psi in (0.0181, 0.0195, 0.05, 0.3, 1.0):
        got = float(_tail_probability(bstar, n, delta0, np.array([psi]))[0])
        assert got == pytest.approx(_trinomial_tail(bstar, n, delta0, psi), rel=1e-9, abs=1e-13)


@pytest.mark.parametrize(
    ("b", "c", "n"), [(30, 25, 1000), (25, 32, 1000), (2, 4, 8), (0, 0, 25), (12, 1, 35)]
)
def test_interval_ends_are_where_the_one_sided_tests_start_rejecting(
    b: int, c: int, n: int
) -> None:
    d = np.array([1.0] * b + [-1.0] * c + [0.0] * (n - b - c))
    res = tost_paired(d, 0.1, 0.05)
    for x, y, end in ((b, c, res.high), (c, b, -res.low)):
        if end >= 1.0:
            continue
        assert _exact_upper_p(x, y, n, end, 0.05) <= 0.05
        assert _exact_upper_p(x, y, n, end - 1e-6, 0.05) > 0.05


def test_the_supremum_finds_the_narrow_peak_next_to_the_null_boundary() -> None:
    """At 1,000 pairs the tail probability has a peak narrower than the coarse nuisance
    grid's spacing, 0.4/n above the lowest rate |delta0|: missing it made the interval's
    upper end too narrow, the test's true p there 0.0503 against alpha 0.05 (b 58, c 7).
    The true p at the reported end, on a fine grid of rates near the boundary summed
    over the trinomial with scipy, is at most alpha."""
    n, b, c, alpha = 1000, 58, 7, 0.05
    d = np.array([1.0] * b + [-1.0] * c + [0.0] * (n - b - c))
    high = tost_paired(d, margin=0.2, alpha=alpha).high
    bstar = _observed_tail(b, c, n, alpha)
    cols = np.arange(n + 1)
    worst = 0.0
    for psi in np.linspace(high, high + 0.01, 401):
        p10, p01 = (psi + high) / 2, (psi - high) / 2
        tail = sps.binom.pmf(cols, n, p01) * sps.binom.cdf(bstar, n - cols, p10 / (1 - p01))
        worst = max(worst, float(tail.sum()))
    assert worst <= alpha + 1e-9
