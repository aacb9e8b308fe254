"""McNemar's exact test, Tango's interval and TOST against independent references."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.weightstats import ttost_paired

from prereg.stats import (
    equivalence_margin,
    mcnemar_exact,
    min_discordant,
    tango_interval,
    tost_paired,
)

# --------------------------------------------------------------------------- McNemar


@pytest.mark.parametrize(
    "b,c",
    [
        (0, 0),
        (0, 1),
        (1, 5),
        (0, 6),
        (6, 0),
        (5, 0),
        (3, 3),
        (13, 14),
        (40, 20),
        (2, 17),
        (100, 130),
    ],
)
def test_mcnemar_matches_statsmodels_and_scipy(b: int, c: int) -> None:
    res = mcnemar_exact(b, c)
    ref = mcnemar([[10, b], [c, 10]], exact=True)
    assert res.pvalue == pytest.approx(ref.pvalue, rel=1e-12, abs=1e-15)
    if b + c:
        assert res.pvalue == pytest.approx(sps.binomtest(b, b + c, 0.5).pvalue, rel=1e-12)
        assert res.estimate == b / (b + c)
    assert res.n == b + c


def _mcnemar_by_enumeration(b: int, c: int) -> float:
    """Sum the probabilities of all splits no more likely than the observed one."""
    m = b + c
    probs = [math.comb(m, k) / 2**m for k in range(m + 1)]
    p_obs = probs[b]
    return min(1.0, sum(p for p in probs if p <= p_obs * (1 + 1e-12)))


@given(st.integers(0, 60), st.integers(0, 60))
@settings(max_examples=60, deadline=None)
def test_mcnemar_matches_enumeration(b: int, c: int) -> None:
    assert mcnemar_exact(b, c).pvalue == pytest.approx(_mcnemar_by_enumeration(b, c), rel=1e-9)


def test_mcnemar_no_discordant_pairs() -> None:
    res = mcnemar_exact(0, 0)
    assert res.pvalue == 1.0 and math.isnan(res.estimate) and res.n == 0


def test_mcnemar_rejects_bad_counts() -> None:
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 3)
    with pytest.raises(ValueError):
        mcnemar_exact(1.5, 3)


def test_seed_002_table_is_inconclusive() -> None:
    # one discordant pair (13/24 vs 14/24) and zero (28/34 vs 28/34): never significant
    assert mcnemar_exact(0, 1).pvalue == 1.0
    assert mcnemar_exact(0, 0).pvalue == 1.0
    k = min_discordant(0.05)
    assert k == 6
    assert mcnemar_exact(0, k).pvalue <= 0.05 < mcnemar_exact(0, k - 1).pvalue


def _exact_type1(n_pairs: int, psi: float, alpha: float) -> float:
    """P(reject) under H0 for n pairs with discordance probability psi (exact)."""
    total = 0.0
    for m in range(n_pairs + 1):
        pm = sps.binom.pmf(m, n_pairs, psi)
        if pm < 1e-300:
            continue
        ks = np.arange(m + 1)
        reject = np.array([mcnemar_exact(int(k), int(m - k)).pvalue <= alpha for k in ks])
        total += pm * float(sps.binom.pmf(ks, m, 0.5)[reject].sum())
    return total


@pytest.mark.parametrize("n_pairs,psi", [(24, 0.3), (60, 0.1), (60, 0.5), (120, 0.2)])
def test_mcnemar_type1_error_at_most_alpha(n_pairs: int, psi: float) -> None:
    for alpha in (0.05, 0.10):
        assert _exact_type1(n_pairs, psi, alpha) <= alpha


def test_mcnemar_type1_by_simulation() -> None:
    rng = np.random.default_rng(11)
    sims, n_pairs = 4000, 80
    u = rng.random((sims, n_pairs))
    b = (u < 0.1).sum(axis=1)
    c = ((u >= 0.1) & (u < 0.2)).sum(axis=1)
    rejections = np.mean(
        [mcnemar_exact(int(x), int(y)).pvalue <= 0.05 for x, y in zip(b, c, strict=True)]
    )
    assert rejections <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / sims)


# --------------------------------------------------------------------------- Tango


def test_tango_interval_matches_published_example() -> None:
    # Cavo et al. (2012) via Fagerland, Lydersen and Laake (2017), table 8.x:
    # n12 = 6, n21 = 16, N = 161, estimate -0.0621, 95% CI -0.1240 to -0.0054
    res = tango_interval(6, 16, 161, level=0.95)
    assert res.estimate == pytest.approx(-0.0621, abs=5e-5)
    assert res.low == pytest.approx(-0.1240, abs=5e-5)
    assert res.high == pytest.approx(-0.0054, abs=5e-5)


def test_tango_interval_no_discordant_pairs_closed_form() -> None:
    for n in (5, 24, 200):
        z = sps.norm.ppf(0.975)
        res = tango_interval(0, 0, n, level=0.95)
        assert res.high == pytest.approx(z * z / (n + z * z), rel=1e-9)
        assert res.low == pytest.approx(-z * z / (n + z * z), rel=1e-9)


def _tango_z_reference(b: int, c: int, n: int, d0: float) -> float:
    """Score statistic by maximising the constrained likelihood numerically."""
    from scipy import optimize

    lo, hi = max(0.0, -d0), (1.0 - d0) / 2.0

    def negll(q21: float) -> float:
        q12 = q21 + d0
        rest = 1.0 - q12 - q21
        val = 0.0
        for k, q in ((b, q12), (c, q21), (n - b - c, rest)):
            if k:
                val -= k * math.log(max(q, 1e-300))
        return val

    q21 = optimize.minimize_scalar(
        negll, bounds=(lo, hi), method="bounded", options={"xatol": 1e-13}
    ).x
    var = n * (2 * q21 + d0 - d0 * d0)
    return (b - c - n * d0) / math.sqrt(var)


@pytest.mark.parametrize("b,c,n", [(6, 16, 161), (3, 0, 24), (10, 4, 50), (0, 2, 30)])
def test_tango_interval_ends_solve_the_score_equation(b: int, c: int, n: int) -> None:
    z = sps.norm.ppf(0.95)
    res = tango_interval(b, c, n, level=0.90)
    assert _tango_z_reference(b, c, n, res.low) == pytest.approx(z, abs=1e-5)
    assert _tango_z_reference(b, c, n, res.high) == pytest.approx(-z, abs=1e-5)


@given(st.integers(0, 30), st.integers(0, 30), st.integers(0, 30))
@settings(max_examples=60, deadline=None)
def test_tango_interval_symmetric_and_contains_estimate(b: int, c: int, extra: int) -> None:
    n = b + c + extra
    if n == 0:
        return
    r1 = tango_interval(b, c, n)
    r2 = tango_interval(c, b, n)
    assert r1.low == pytest.approx(-r2.high, abs=1e-9)
    assert -1.0 <= r1.low <= r1.estimate <= r1.high <= 1.0


# --------------------------------------------------------------------------- TOST


def test_tost_t_matches_statsmodels() -> None:
    rng = np.random.default_rng(3)
    for n, mu, margin in [(20, 0.01, 0.05), (50, -0.02, 0.1), (12, 0.0, 0.3)]:
        d = rng.normal(mu, 0.1, n)
        res = tost_paired(d, margin, alpha=0.05)
        p, lower, upper = ttost_paired(d, np.zeros(n), -margin, margin)
        assert res.method == "TOST, paired t"
        assert res.pvalue == pytest.approx(p, rel=1e-10)
        assert res.statistic_lower == pytest.approx(lower[0], rel=1e-10)
        assert res.statistic_upper == pytest.approx(upper[0], rel=1e-10)
        assert res.equivalent == (p <= 0.05)


def test_tost_t_equivalent_to_interval_inclusion() -> None:
    rng = np.random.default_rng(4)
    d = rng.normal(0.02, 0.2, 40)
    res = tost_paired(d, 0.1, alpha=0.05)
    ci = sps.t.interval(0.90, 39, loc=d.mean(), scale=sps.sem(d))
    assert (res.low, res.high) == pytest.approx(ci, rel=1e-10)
    assert res.equivalent == (-0.1 < ci[0] and ci[1] < 0.1)


def test_tost_binary_uses_tango_and_handles_no_discordant_pairs() -> None:
    n = 24
    d = np.zeros(n)
    z = sps.norm.ppf(0.95)
    floor = z * z / (n + z * z)
    res = tost_paired(d, 0.1, method="tango")
    assert "Tango" in res.method and res.b == 0 and res.c == 0
    assert np.isfinite(res.pvalue) and not res.equivalent and "no discordant" in res.note
    # closed form at b = c = 0: Z(margin) = -sqrt(n margin / (1 - margin))
    assert res.pvalue == pytest.approx(sps.norm.cdf(-math.sqrt(n * 0.1 / 0.9)), rel=1e-10)
    assert tost_paired(d, floor * 1.001, method="tango").equivalent
    assert not tost_paired(d, floor * 0.999, method="tango").equivalent
    assert equivalence_margin(d, method="tango") == pytest.approx(floor, rel=1e-9)


def test_tost_t_degenerate_is_explained_not_divided_by_zero() -> None:
    res = tost_paired(np.full(10, 0.25), 0.5)
    assert math.isnan(res.pvalue) and not res.equivalent and "zero standard deviation" in res.note
    res = tost_paired(np.zeros(10), 0.5, method="t")
    assert math.isnan(res.pvalue) and "tango" in res.note
    assert math.isnan(equivalence_margin(np.full(5, 0.3)))


def test_tost_tango_p_matches_score_statistic() -> None:
    d = np.array([1] * 9 + [-1] * 5 + [0] * 46, dtype=float)
    res = tost_paired(d, 0.15, alpha=0.05, method="tango")
    pl = sps.norm.sf(_tango_z_reference(9, 5, 60, -0.15))
    pu = sps.norm.cdf(_tango_z_reference(9, 5, 60, 0.15))
    assert res.pvalue == pytest.approx(max(pl, pu), rel=1e-6)


@pytest.mark.parametrize("kind", ["t", "tango"])
def test_equivalence_margin_is_the_rejection_boundary(kind: str) -> None:
    rng = np.random.default_rng(5)
    if kind == "t":
        d = rng.normal(0.03, 0.2, 30)
    else:
        d = rng.choice([-1.0, 0.0, 1.0], size=80, p=[0.1, 0.75, 0.15])
    method = "t" if kind == "t" else "tango"  # the exact test: test_calibration_tost.py
    for alpha in (0.05, 0.10):
        m = equivalence_margin(d, alpha, method=method)
        assert tost_paired(d, m * (1 + 1e-7), alpha, method=method).equivalent
        assert not tost_paired(d, m * (1 - 1e-7), alpha, method=method).equivalent
        assert tost_paired(d, m, alpha, method=method).pvalue == pytest.approx(alpha, rel=1e-6)
        assert m == pytest.approx(tost_paired(d, 0.5, alpha, method=method).min_margin, rel=1e-12)


def test_tost_tango_type1_error_near_alpha_at_the_margin() -> None:
    # on the null boundary delta = margin the score TOST should reject about alpha
    rng = np.random.default_rng(6)
    n, margin, sims = 200, 0.1, 3000
    q12, q21 = 0.2, 0.1  # delta = 0.1
    u = rng.random((sims, n))
    rej = 0
    for row in u:
        d = np.where(row < q12, 1.0, np.where(row < q12 + q21, -1.0, 0.0))
        rej += tost_paired(d, margin, method="tango").equivalent
    assert rej / sims <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / sims)


def test_tost_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError):
        tost_paired([0.1, 0.2], 0.0)
    with pytest.raises(ValueError):
        tost_paired([0.1, 0.2], 0.1, alpha=0.6)
    with pytest.raises(ValueError):
        tost_paired([0.5, 0.2], 0.1, method="tango")
    with pytest.raises(ValueError):
        tost_paired([], 0.1)
