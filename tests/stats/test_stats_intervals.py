"""Jeffreys intervals, Kish's design effect and the ANOVA ICC."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps
from statsmodels.stats.proportion import proportion_confint

from prereg.stats import design_effect, icc_binary, jeffreys_interval

# --------------------------------------------------------------------------- Jeffreys


@pytest.mark.parametrize("x,n", [(1, 10), (3, 10), (9, 10), (17, 58), (40, 195), (1, 2)])
@pytest.mark.parametrize("level", [0.90, 0.95])
def test_jeffreys_matches_statsmodels_inside(x: int, n: int, level: float) -> None:
    res = jeffreys_interval(x, n, level=level)
    low, high = proportion_confint(x, n, alpha=1 - level, method="jeffreys")
    assert res.low == pytest.approx(low, rel=1e-10)
    assert res.high == pytest.approx(high, rel=1e-10)
    assert res.estimate == x / n and res.level == level


def test_jeffreys_boundaries() -> None:
    low0, high0 = proportion_confint(0, 12, alpha=0.1, method="jeffreys")
    res = jeffreys_interval(0, 12)
    assert res.low == 0.0 and res.high == pytest.approx(high0, rel=1e-10)
    low1, _ = proportion_confint(12, 12, alpha=0.1, method="jeffreys")
    res = jeffreys_interval(12, 12)
    assert res.high == 1.0 and res.low == pytest.approx(low1, rel=1e-10)
    res = jeffreys_interval(0, 0)
    assert (res.low, res.high) == (0.0, 1.0) and math.isnan(res.estimate)


def test_jeffreys_design_effect_deflates_counts() -> None:
    deff = 1.8
    res = jeffreys_interval(30, 90, level=0.90, deff=deff)
    a, b = 30 / deff + 0.5, 60 / deff + 0.5
    assert res.low == pytest.approx(sps.beta.ppf(0.05, a, b), rel=1e-12)
    assert res.high == pytest.approx(sps.beta.ppf(0.95, a, b), rel=1e-12)
    assert res.effective_trials == pytest.approx(50.0)
    plain = jeffreys_interval(30, 90)
    assert res.high - res.low > plain.high - plain.low
    # deflating by an integer factor gives the interval of the smaller sample
    assert jeffreys_interval(20, 60, deff=2.0).low == pytest.approx(
        jeffreys_interval(10, 30).low, rel=1e-12
    )


def test_jeffreys_vectorised() -> None:
    x = np.array([0, 4, 10])
    res = jeffreys_interval(x, 10, level=0.95, deff=[1.0, 1.5, 2.0])
    for i in range(3):
        one = jeffreys_interval(int(x[i]), 10, level=0.95, deff=[1.0, 1.5, 2.0][i])
        assert res.low[i] == pytest.approx(one.low) and res.high[i] == pytest.approx(one.high)


def test_jeffreys_rejects_bad_input() -> None:
    for args in [(5, 4), (-1, 4), (1, 4, 0.9, 0.0)]:
        with pytest.raises(ValueError):
            jeffreys_interval(*args)
    with pytest.raises(ValueError):
        jeffreys_interval(1, 4, level=1.0)


@given(st.integers(0, 200), st.integers(0, 200), st.floats(1.0, 5.0))
@settings(max_examples=80, deadline=None)
def test_jeffreys_contains_estimate_and_lies_in_unit_interval(
    x: int, extra: int, deff: float
) -> None:
    n = x + extra
    res = jeffreys_interval(x, n, deff=deff)
    assert 0.0 <= res.low <= res.high <= 1.0
    if n:
        assert res.low <= x / n <= res.high


# --------------------------------------------------------------------------- design effect


def test_design_effect_closed_forms() -> None:
    # equal clusters of size m: 1 + (m - 1) rho
    assert design_effect([3] * 50, 0.4) == pytest.approx(1 + 2 * 0.4)
    assert design_effect([1] * 10, 0.9) == pytest.approx(1.0)
    assert design_effect([2, 2, 3], 0.0) == 1.0
    # unequal: Kbar = sum m^2 / sum m
    m = np.array([1, 2, 5])
    assert design_effect(m, 1.0) == pytest.approx((m**2).sum() / m.sum())
    assert np.allclose(design_effect(m, np.array([0.0, 0.5])), [1.0, 1 + 0.5 * (30 / 8 - 1)])


def test_design_effect_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        design_effect([], 0.3)
    with pytest.raises(ValueError):
        design_effect([0, 0], 0.3)
    with pytest.raises(ValueError):
        design_effect([2, -1], 0.3)


# --------------------------------------------------------------------------- ICC


def _icc_from_f_oneway(y: np.ndarray, g: np.ndarray) -> float:
    groups = [y[g == k] for k in np.unique(g)]
    f = sps.f_oneway(*groups).statistic
    if not np.isfinite(f):  # no within-group variation: the limit F -> inf gives 1
        return 1.0
    sizes = np.array([len(x) for x in groups], dtype=float)
    n, k = sizes.sum(), len(sizes)
    n0 = (n - (sizes**2).sum() / n) / (k - 1)
    return float(np.clip((f - 1) / (f + n0 - 1), 0.0, 1.0))


def test_icc_hand_example() -> None:
    # k = 4, n_i = 2: MSB = 0.4583, MSW = 0.125, n0 = 2 -> rho = 0.3333 / 0.5833
    y = [1, 1, 0, 0, 1, 1, 0, 1]
    g = [1, 1, 2, 2, 3, 3, 4, 4]
    assert icc_binary(y, g) == pytest.approx((11 / 24 - 1 / 8) / (11 / 24 + 1 / 8))


def test_icc_matches_one_way_anova_unequal_groups() -> None:
    rng = np.random.default_rng(1)
    for _ in range(20):
        k = int(rng.integers(3, 30))
        sizes = rng.integers(1, 6, size=k)
        p = rng.beta(0.5, 0.5, size=k)
        g = np.repeat(np.arange(k), sizes)
        y = (rng.random(g.size) < p[g]).astype(float)
        if y.min() == y.max() or g.size == k:
            continue
        assert icc_binary(y, g) == pytest.approx(_icc_from_f_oneway(y, g), abs=1e-10)


def test_icc_truncation_and_undefined_cases() -> None:
    # perfectly clustered -> 1; anti-clustered (every group split) -> truncated to 0
    assert icc_binary([1, 1, 0, 0, 1, 1], ["a", "a", "b", "b", "c", "c"]) == 1.0
    assert icc_binary([1, 0, 1, 0, 1, 0], [1, 1, 2, 2, 3, 3]) == 0.0
    assert math.isnan(icc_binary([1, 0, 1], [1, 1, 1]))  # one group
    assert math.isnan(icc_binary([1, 0, 1], [1, 2, 3]))  # no replication
    assert math.isnan(icc_binary([1, 1, 1, 1], [1, 1, 2, 2]))  # no variation
    with pytest.raises(ValueError, match="outcomes"):  # nothing to estimate from (issue 39)
        icc_binary([], [])
    with pytest.raises(ValueError):
        icc_binary([0.5, 1], [1, 1])
    with pytest.raises(ValueError):
        icc_binary([1, 0], [1])


def test_icc_recovers_beta_binomial_correlation() -> None:
    # p ~ Beta(a, b) per prompt gives rho = 1 / (a + b + 1)
    rng = np.random.default_rng(2)
    a, b, k, m = 1.0, 1.0, 6000, 3  # sampling SD of the estimate about 0.009
    p = rng.beta(a, b, size=k)
    g = np.repeat(np.arange(k), m)
    y = (rng.random(g.size) < p[g]).astype(float)
    assert icc_binary(y, g) == pytest.approx(1 / (a + b + 1), abs=0.04)
