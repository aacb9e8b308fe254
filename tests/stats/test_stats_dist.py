"""The quantiles and tails of :mod:`prereg.stats._dist` are scipy.stats', bit for bit."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
import scipy.stats as st

from prereg.stats import _dist

PROBS = [0.0, 1.0, 0.5, 1e-300, 1e-12, 0.0025, 0.025, 0.05, 0.3, 0.95, 0.975, 1 - 1e-16]
PROBS_BAD = [np.nan, -0.1, 1.1]
XS = [-np.inf, -40.0, -3.2, -1e-9, 0.0, 0.7, 1.96, 40.0, np.inf, np.nan]
DFS = [0.5, 1.0, 2.5, 30.0, 1e6, np.inf, 0.0, -1.0, np.nan]
SHAPES = [0.5, 1.0, 3.5, 27.5, 1e4, 0.0, -1.0]


def _same(a: object, b: object) -> bool:
    return bool(np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True)) and np.shape(
        a
    ) == np.shape(b)


@pytest.fixture(autouse=True)
def _quiet() -> object:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def test_normal_matches_scipy_stats() -> None:
    for q in PROBS + PROBS_BAD:
        assert _same(_dist.norm_ppf(q), st.norm.ppf(q)), q
    for x in XS:
        assert _same(_dist.norm_cdf(x), st.norm.cdf(x)), x
        assert _same(_dist.norm_sf(x), st.norm.sf(x)), x


def test_student_t_matches_scipy_stats() -> None:
    for q, df in itertools.product(PROBS + PROBS_BAD, DFS):
        assert _same(_dist.t_ppf(q, df), st.t.ppf(q, df)), (q, df)
    for x, df in itertools.product(XS, DFS):
        assert _same(_dist.t_cdf(x, df), st.t.cdf(x, df)), (x, df)
        assert _same(_dist.t_sf(x, df), st.t.sf(x, df)), (x, df)


def test_beta_quantile_matches_scipy_stats() -> None:
    for q, a, b in itertools.product(PROBS + PROBS_BAD, SHAPES, SHAPES):
        assert _same(_dist.beta_ppf(q, a, b), st.beta.ppf(q, a, b)), (q, a, b)


def test_arrays_match_scipy_stats() -> None:
    """The vectorised calls the intervals make (Jeffreys: x + 1/2, n - x + 1/2)."""
    rng = np.random.default_rng(7)
    n = rng.integers(1, 40_000, 5_000)
    x = np.minimum((rng.random(5_000) * (n + 1)).astype(int), n)
    q = rng.random(5_000)
    df = rng.integers(1, 500, 5_000).astype(float)
    assert _same(
        _dist.beta_ppf(0.025, x + 0.5, n - x + 0.5), st.beta.ppf(0.025, x + 0.5, n - x + 0.5)
    )
    assert _same(_dist.beta_ppf(q, x + 0.5, n - x + 0.5), st.beta.ppf(q, x + 0.5, n - x + 0.5))
    assert _same(_dist.t_ppf(q, df), st.t.ppf(q, df))
    assert _same(_dist.norm_ppf(q), st.norm.ppf(q))
    z = rng.normal(0, 3, 5_000)
    assert _same(_dist.t_sf(z, df), st.t.sf(z, df))
    assert _same(_dist.norm_sf(z), st.norm.sf(z))


def test_mcnemar_tail_is_exact_and_agrees_with_scipy() -> None:
    """The exact McNemar tail against a rational enumeration (exactly, as rounded once)
    and scipy.stats' binomial (to its own accuracy), on both sides of the exact bound."""
    from fractions import Fraction
    from math import comb

    from prereg.stats.paired import EXACT_TAIL_UP_TO, binomial_half_tail

    for m in (1, 2, 7, 40, 333, 2_000):
        for k in {0, 1, m // 3, m // 2}:
            exact = min(Fraction(1), Fraction(2 * sum(comb(m, i) for i in range(k + 1)), 2**m))
            assert binomial_half_tail(k, m) == float(exact), (k, m)
            assert binomial_half_tail(k, m) == pytest.approx(
                min(1.0, 2 * st.binom.cdf(k, m, 0.5)), rel=1e-12
            )
    m = EXACT_TAIL_UP_TO + 1_001  # the incomplete beta function beyond the bound
    for k in (m // 2 - 150, m // 2 - 60, m // 2):
        assert binomial_half_tail(k, m) == pytest.approx(
            min(1.0, 2 * st.binom.cdf(k, m, 0.5)), rel=1e-9
        )
