"""Registered contrasts: factorial weights, the contrast bootstrap, sign flip and Holm.

References are independent of the code: weights derived from their definitions (means
of cells at high and low, differences of differences, a regression on +-1 codes), the
exact bootstrap distribution by enumerating all n^n resamples, scipy.stats.bootstrap,
full enumeration of sign vectors, statsmodels' Holm, and seed 001's worked numbers.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats as sps

from prereg.stats import (
    check_weights,
    contrast_bootstrap,
    contrast_sign_flip,
    factorial_weights,
    holm,
)
from tests.statsmodels_holm import multipletests_holm

# a 2^3 design (seed 001: menu V, workflow W, encoding D) in a scrambled order, plus
# two checkpoint cells outside the factorial (a third encoding level)
LOW_HIGH: dict[str, tuple[object, object]] = {
    "V": (8, 128),
    "W": ("low", "high"),
    "D": ("raw", "linked"),
}
CELLS: list[dict[str, object]] = [
    {"V": 128, "W": "low", "D": "raw"},
    {"V": 8, "W": "low", "D": "compact"},
    {"V": 8, "W": "high", "D": "linked"},
    {"V": 8, "W": "low", "D": "raw"},
    {"V": 128, "W": "high", "D": "linked"},
    {"V": 8, "W": "high", "D": "raw"},
    {"V": 8, "W": "low", "D": "typed"},
    {"V": 128, "W": "low", "D": "linked"},
    {"V": 8, "W": "low", "D": "linked"},
    {"V": 128, "W": "high", "D": "raw"},
]
FACTORS = ("V", "W", "D")


def _as_functional(rule: object, n: int) -> np.ndarray:
    """Weights of a linear rule m -> number, read off the unit vectors."""
    assert callable(rule)
    return np.array([rule(np.eye(n)[i]) for i in range(n)])


def _lookup(m: np.ndarray, **levels: object) -> float:
    hits = [i for i, c in enumerate(CELLS) if all(c[k] == v for k, v in levels.items())]
    assert len(hits) == 1
    return float(m[hits[0]])


def _main_effect(factor: str) -> object:
    """Mean of the design cells at high minus the mean at low (by cell lookup)."""
    lo, hi = LOW_HIGH[factor]
    others = [f for f in FACTORS if f != factor]

    def rule(m: np.ndarray) -> float:
        combos = list(itertools.product(*(LOW_HIGH[f] for f in others)))
        high = [_lookup(m, **{factor: hi}, **dict(zip(others, c, strict=True))) for c in combos]
        low = [_lookup(m, **{factor: lo}, **dict(zip(others, c, strict=True))) for c in combos]
        return sum(high) / len(high) - sum(low) / len(low)

    return rule


def _interaction(a: str, b: str) -> object:
    """(m_11 - m_10) - (m_01 - m_00) for a and b, averaged over the third factor."""
    (c,) = [f for f in FACTORS if f not in (a, b)]

    def rule(m: np.ndarray) -> float:
        total = 0.0
        for level in LOW_HIGH[c]:

            def at(ia: int, ib: int, level: object = level) -> float:
                return _lookup(m, **{a: LOW_HIGH[a][ia], b: LOW_HIGH[b][ib], c: level})

            total += (at(1, 1) - at(1, 0)) - (at(0, 1) - at(0, 0))
        return total / 2

    return rule


@pytest.mark.parametrize("factor", FACTORS)
def test_main_effect_weights_are_high_minus_low_means(factor: str) -> None:
    got = np.array(factorial_weights(CELLS, factor, LOW_HIGH))
    expected = _as_functional(_main_effect(factor), len(CELLS))
    assert got == pytest.approx(expected, abs=1e-15)
    # seed 001: E_a = 1/4 sum s_a(c) m_c over the 8 design cells
    assert sorted(set(np.abs(got[got != 0]))) == [0.25]
    assert got[1] == got[6] == 0.0  # checkpoint cells
    assert got.sum() == pytest.approx(0.0, abs=1e-15)


@pytest.mark.parametrize("pair", [("V", "W"), ("V", "D"), ("W", "D")])
def test_interaction_weights_are_differences_of_differences(pair: tuple[str, str]) -> None:
    got = np.array(factorial_weights(CELLS, pair, LOW_HIGH))
    expected = _as_functional(_interaction(*pair), len(CELLS))
    assert got == pytest.approx(expected, abs=1e-15)
    # seed 001: E_ab = 1/2 sum s_a(c) s_b(c) m_c
    assert sorted(set(np.abs(got[got != 0]))) == [0.5]
    assert factorial_weights(CELLS, pair[::-1], LOW_HIGH) == tuple(got)


def test_two_by_two_interaction_is_the_difference_of_differences() -> None:
    cells = [
        {"profile": "careful", "cap": "high"},  # m11
        {"profile": "careful", "cap": "low"},  # m10
        {"profile": "hasty", "cap": "high"},  # m01
        {"profile": "hasty", "cap": "low"},  # m00
    ]
    lh: dict[str, tuple[object, object]] = {
        "profile": ("hasty", "careful"),
        "cap": ("low", "high"),
    }
    assert factorial_weights(cells, ["profile", "cap"], lh) == (1.0, -1.0, -1.0, 1.0)
    assert factorial_weights(cells, "profile", lh) == (0.5, 0.5, -0.5, -0.5)
    assert factorial_weights(cells, "cap", lh) == (0.5, -0.5, 0.5, -0.5)


def test_weights_match_a_regression_on_plus_minus_one_codes() -> None:
    # m_c = b0 + sum b_f s_f + sum b_fg s_f s_g + b_VWD s_V s_W s_D: a main effect is
    # 2 b_f (high minus low), a two-factor interaction 4 b_fg (difference of differences)
    design = [i for i, c in enumerate(CELLS) if c["D"] in ("raw", "linked")]
    s = {
        f: np.array([1.0 if CELLS[i][f] == LOW_HIGH[f][1] else -1.0 for i in design])
        for f in FACTORS
    }
    cols = [np.ones(8), s["V"], s["W"], s["D"], s["V"] * s["W"], s["V"] * s["D"]]
    cols += [s["W"] * s["D"], s["V"] * s["W"] * s["D"]]
    x = np.column_stack(cols)
    m = np.random.default_rng(0).normal(size=8)
    beta = np.linalg.lstsq(x, m, rcond=None)[0]
    full = np.zeros(len(CELLS))
    full[design] = m
    for j, f in enumerate(FACTORS, start=1):
        w = np.array(factorial_weights(CELLS, f, LOW_HIGH))
        assert w @ full == pytest.approx(2 * beta[j])
    for j, pair in enumerate([("V", "W"), ("V", "D"), ("W", "D")], start=4):
        w = np.array(factorial_weights(CELLS, pair, LOW_HIGH))
        assert w @ full == pytest.approx(4 * beta[j])
    w3 = np.array(factorial_weights(CELLS, FACTORS, LOW_HIGH))
    assert w3 @ full == pytest.approx(8 * beta[7])


def test_factorial_weights_refuse_bad_designs() -> None:
    with pytest.raises(ValueError, match="needs 8 cells, found 7"):
        factorial_weights(CELLS[:-1], "V", LOW_HIGH)  # a missing cell
    with pytest.raises(ValueError, match="same factorial cell"):
        factorial_weights([*CELLS, CELLS[0]], "V", LOW_HIGH)
    with pytest.raises(ValueError, match="not a factor"):
        factorial_weights(CELLS, "X", LOW_HIGH)
    with pytest.raises(ValueError, match="check the level names"):
        factorial_weights(CELLS, "V", {**LOW_HIGH, "W": ("lo", "high")})  # misspelt level
    with pytest.raises(ValueError, match="two distinct"):
        factorial_weights(CELLS, "V", {**LOW_HIGH, "W": ("low", "low")})
    with pytest.raises(ValueError, match="repeats"):
        factorial_weights(CELLS, ["V", "V"], LOW_HIGH)
    with pytest.raises(ValueError, match="no factor"):
        factorial_weights(CELLS, [], LOW_HIGH)


def test_check_weights() -> None:
    assert check_weights([0.5, -0.5]) == (0.5, -0.5)
    assert check_weights([0.25, 0.75], sum_to=1.0) == (0.25, 0.75)
    with pytest.raises(ValueError, match="sum to 0.1, expected 0"):
        check_weights([0.6, -0.5])
    with pytest.raises(ValueError, match="all zero"):
        check_weights([0.0, 0.0])
    with pytest.raises(ValueError, match="nan or infinite"):
        check_weights([math.nan, 0.0])
    with pytest.raises(ValueError, match="3 weights for 2 cells"):
        check_weights([1.0, -0.5, -0.5], n_cells=2)
    with pytest.raises(ValueError, match="non-empty flat"):
        check_weights([])
    with pytest.raises(ValueError, match="non-empty flat"):
        check_weights([[1.0, -1.0]])


# ---- the contrast bootstrap ------------------------------------------------------------


def test_estimate_and_units_weight_every_unit_once() -> None:
    # three tasks in cluster a, one in cluster b; weights (-1, 1) = treatment - control
    values = np.array([[0.0, 1.0], [0.0, 1.0], [1.0, 0.0], [0.0, 0.0]])
    labels = ["a", "a", "a", "b"]
    res = contrast_bootstrap(values, [-1, 1], units=labels, draws=200)
    assert res.n == 2 and res.n_rows == 4
    assert res.unit_contrasts == pytest.approx([1 / 3, 0.0])
    assert res.estimate == pytest.approx((1 / 3 + 0.0) / 2)
    by_row = contrast_bootstrap(values, [-1, 1], draws=200)
    assert by_row.n == 4 and by_row.estimate == pytest.approx(1 / 4)
    # cells of weight zero may be missing; a weighted cell may not
    gappy = np.column_stack([values, np.full(4, np.nan)])
    assert contrast_bootstrap(gappy, [-1, 1, 0], draws=10).estimate == by_row.estimate
    with pytest.raises(ValueError, match="lack a weighted cell"):
        contrast_bootstrap(gappy, [-1, 0, 1], draws=10)


def _exact_bootstrap(d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Support and probabilities of the mean over all n^n equally likely resamples."""
    n = d.size
    means = np.array([d[list(idx)].mean() for idx in itertools.product(range(n), repeat=n)])
    support, counts = np.unique(np.round(means, 12), return_counts=True)
    return support, counts / n**n


def test_draws_follow_the_exact_bootstrap_distribution() -> None:
    # 4 units x 3 cells; the per-unit contrast with weights (1, -0.5, -0.5) by hand
    values = np.array([[0.9, 0.2, 0.4], [0.3, 0.5, 0.3], [0.7, 0.1, 0.6], [1.0, 0.0, 0.2]])
    d = values[:, 0] - 0.5 * values[:, 1] - 0.5 * values[:, 2]
    support, prob = _exact_bootstrap(d)
    draws = 40_000
    # the percentile interval and centred p (small_clusters="none") read the draws
    res = contrast_bootstrap(values, [1, -0.5, -0.5], draws=draws, seed=3, small_clusters="none")
    assert res.estimate == pytest.approx(d.mean())
    # the empirical CDF of the draws at every atom, within 4.5 Monte Carlo SEs
    cdf = np.cumsum(prob)
    emp = np.array([np.mean(res.distribution <= x + 1e-12) for x in support])
    mc_se = np.sqrt(cdf * (1 - cdf) / draws) + 1e-12
    assert np.all(np.abs(emp - cdf) <= 4.5 * mc_se + 1e-9)
    # exact bootstrap variance: plug-in variance / n
    assert res.se**2 == pytest.approx(np.var(d) / d.size, rel=0.03)
    # centred p: P*(|mean* - est| >= |est|), plus one in numerator and denominator
    p_exact = float(prob[np.abs(support - d.mean()) >= abs(d.mean()) - 1e-12].sum())
    p_mc = (p_exact * draws + 1) / (draws + 1)
    assert res.pvalue == pytest.approx(p_mc, abs=4.5 * math.sqrt(p_exact * (1 - p_exact) / draws))
    # the percentile ends are the exact distribution's 2.5% and 97.5% quantiles (atoms;
    # no atom's CDF lies within Monte Carlo error of either level, so no interpolation)
    margin = 4.5 * math.sqrt(0.025 * 0.975 / draws)
    assert np.all(np.abs(cdf - 0.025) > margin) and np.all(np.abs(cdf - 0.975) > margin)
    assert res.low == pytest.approx(support[np.searchsorted(cdf, 0.025)], abs=1e-9)
    assert res.high == pytest.approx(support[np.searchsorted(cdf, 0.975)], abs=1e-9)


def test_percentile_interval_matches_scipy_bootstrap() -> None:
    rng = np.random.default_rng(11)
    u, c = 36, 8
    values = rng.normal(size=(u, c)) + rng.normal(size=(u, 1))
    w = np.array([-1, -1, -1, -1, 1, 1, 1, 1]) / 4
    d = values @ w
    res = contrast_bootstrap(values, w, draws=20_000, seed=5, small_clusters="none")
    ref = sps.bootstrap(
        (d,),
        np.mean,
        n_resamples=20_000,
        method="percentile",
        random_state=np.random.default_rng(6),
    )
    assert res.low == pytest.approx(ref.confidence_interval.low, abs=0.12 * res.se)
    assert res.high == pytest.approx(ref.confidence_interval.high, abs=0.12 * res.se)
    assert res.se == pytest.approx(ref.standard_error, rel=0.03)
    assert res.low < res.estimate < res.high


def test_pvalue_floor_seeding_and_inputs() -> None:
    rng = np.random.default_rng(2)
    values = rng.normal(size=(20, 2))
    values[:, 1] += 5.0  # a huge effect: no centred draw reaches zero
    res = contrast_bootstrap(values, [-1, 1], draws=999, seed=1, small_clusters="none")
    assert res.pvalue == pytest.approx(1 / 1000)  # the centred p's floor
    again = contrast_bootstrap(values, [-1, 1], draws=999, seed=1)
    other = contrast_bootstrap(values, [-1, 1], draws=999, seed=2)
    assert np.array_equal(res.distribution, again.distribution)  # same draws in both modes
    assert not np.array_equal(res.distribution, other.distribution)
    # the default interval and p are computed without the draws: no seed changes them
    assert (again.low, again.high, again.pvalue) == (other.low, other.high, other.pvalue)
    for mode in ("t", "none"):
        null = contrast_bootstrap(np.ones((5, 2)), [-1, 1], draws=50, small_clusters=mode)  # type: ignore[arg-type]
        assert null.estimate == 0.0 and null.pvalue == 1.0 and null.low == null.high == 0.0
    before = values.copy()
    contrast_bootstrap(values, [-1, 1], draws=10)
    assert np.array_equal(values, before)
    with pytest.raises(ValueError, match="at least two"):
        contrast_bootstrap(values[:1], [-1, 1])
    with pytest.raises(ValueError, match="matrix"):
        contrast_bootstrap(values[:, 0], [-1, 1])
    with pytest.raises(ValueError, match="2 weights for 3 cells"):
        contrast_bootstrap(np.ones((4, 3)), [-1, 1])
    with pytest.raises(ValueError, match="sum to"):
        contrast_bootstrap(values, [1, 1])
    with pytest.raises(ValueError, match="one label per row"):
        contrast_bootstrap(values, [-1, 1], units=[0, 1])


# ---- sign flip and Holm ----------------------------------------------------------------


@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
def test_sign_flip_equals_full_enumeration(alternative: str) -> None:
    rng = np.random.default_rng(4)
    u = 10
    values = rng.normal(size=(u, 4)) + np.array([0.0, 0.3, 0.1, 0.5])
    w = np.array([0.5, -0.5, 0.5, -0.5]) * -1
    d = values @ w
    obs = d.sum()
    sums = np.array([np.dot(s, d) for s in itertools.product((1, -1), repeat=u)])
    tol = 1e-9
    if alternative == "greater":
        expected = np.mean(sums >= obs - tol)
    elif alternative == "less":
        expected = np.mean(sums <= obs + tol)
    else:
        expected = np.mean(np.abs(sums) >= abs(obs) - tol)
    res = contrast_sign_flip(values, w, alternative)
    assert res.exact and res.n == u and res.n_resamples == 2**u
    assert res.pvalue == pytest.approx(expected, abs=1e-12)
    assert res.estimate == pytest.approx(d.mean())


def test_seed_001_sign_flip_over_12_intents_and_holm() -> None:
    # 12 intents whose compact-minus-raw contrasts are +-2^i: every sign pattern has its
    # own sum, and with the intents 0, 1 and 4 negative exactly 20 patterns reach the
    # observed sum on each side, so the exact two-sided p is 40 / 4096 = .0098
    d = 2.0 ** np.arange(12)
    d[[0, 1, 4]] *= -1
    raw = np.full(12, 0.5)
    values = np.column_stack([raw, raw + d / 8192])  # cells: raw, compact
    res = contrast_sign_flip(values, [-1, 1])
    assert res.pvalue == pytest.approx(40 / 4096, abs=1e-15)
    assert round(res.pvalue, 4) == 0.0098
    # Holm over eight contrasts, this one at rank 2 (one smaller p): 7 x p
    family = np.array([1e-4, res.pvalue, 0.03, 0.2, 0.45, 0.6, 0.81, 0.95])
    adjusted = holm(family).adjusted
    assert adjusted[1] == pytest.approx(7 * 40 / 4096)
    assert f"{adjusted[1]:.3f}".lstrip("0") == ".068"  # as seed 001 prints it
    # the acceptance figure with the rounded raw p: 7 x .0098 = 0.0686
    family[1] = 0.0098
    ours = holm(family)
    assert ours.adjusted[1] == pytest.approx(0.0686, abs=1e-12)
    reject, ref, _, _ = multipletests_holm(family, 0.05)
    assert ours.adjusted == pytest.approx(ref, abs=1e-12)
    assert np.array_equal(ours.reject, reject)
