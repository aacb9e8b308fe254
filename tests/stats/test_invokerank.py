"""The InvokeRank published path (method v1.0, 4.1-4.2) against independent references:
scipy's beta-binomial, hand arithmetic, a direct optimiser, and the seed's own figures."""

from __future__ import annotations

import importlib
import math

import numpy as np
import pytest
from scipy import optimize as spo
from scipy import stats as sps

from prereg import stats

# the module (the package attribute ``invokerank`` is the function)
ir = importlib.import_module("prereg.stats.invokerank")


@pytest.mark.parametrize("mu,kappa", [(0.3, 2.0), (0.62, 15.0), (0.9, 400.0)])
def test_marginal_likelihood_is_the_sum_of_scipy_betabinom_logpmf(mu: float, kappa: float) -> None:
    y = np.array([3, 0, 7, 12, 5])
    n = np.array([10, 4, 9, 20, 5])
    expected = sps.betabinom.logpmf(y, n, mu * kappa, (1 - mu) * kappa).sum()
    assert stats.betabinom_loglik(mu, kappa, y, n) == pytest.approx(expected, rel=1e-12)


def test_method_of_moments_by_hand() -> None:
    # p = 0.2, 0.5, 0.75; mean 0.48333; sample variance with ddof 1
    y, n = [2, 5, 9], [10, 10, 12]
    p = [0.2, 0.5, 0.75]
    mu = sum(p) / 3
    s2 = sum((x - mu) ** 2 for x in p) / 2
    h = (1 / 10 + 1 / 10 + 1 / 12) / 3
    rho = (s2 / (mu * (1 - mu)) - h) / (1 - h)
    got_mu, got_kappa = stats.betabinom_moments(y, n)
    assert got_mu == pytest.approx(0.4833333333333333)
    assert got_kappa == pytest.approx(1 / rho - 1)
    # no excess variance: kappa at its upper bound; huge excess: at its lower bound
    assert stats.betabinom_moments([5, 5], [10, 10])[1] == 10_000.0
    assert stats.betabinom_moments([0, 10], [10, 10])[1] == 1.0


def test_marginal_ml_matches_a_direct_maximisation_of_scipy_betabinom() -> None:
    rng = np.random.default_rng(4)
    n = rng.integers(20, 60, size=12)
    y = rng.binomial(n, rng.beta(3.0, 5.0, size=12))

    def negative(theta: np.ndarray) -> float:
        a, b = np.exp(theta)
        return float(-sps.betabinom.logpmf(y, n, a, b).sum())

    ref = spo.minimize(negative, np.log([1.0, 1.0]), method="L-BFGS-B")
    a, b = np.exp(ref.x)
    prior = stats.fit_beta_prior(y, n)
    assert prior.method.startswith("beta-binomial marginal ML")
    assert prior.converged
    assert prior.mu == pytest.approx(a / (a + b), abs=1e-4)
    assert prior.kappa == pytest.approx(a + b, rel=1e-3)


def test_kappa_is_bounded_when_intents_look_alike() -> None:
    prior = stats.fit_beta_prior([30, 30, 30], [60, 60, 60])
    assert prior.kappa == pytest.approx(10_000.0, rel=1e-6)
    assert prior.mu == pytest.approx(0.5, abs=1e-6)


def test_prior_fallbacks() -> None:
    one = stats.fit_beta_prior([3, 0], [7, 0])
    assert one.method.startswith("jeffreys") and (one.alpha, one.beta) == (0.5, 0.5)
    edge = stats.fit_beta_prior([4, 6, 0], [4, 6, 0])  # every cell with trials at 1
    assert edge.method.startswith("method of moments (boundary")
    assert edge.mu == 1.0


def test_moments_when_the_optimiser_does_not_converge(monkeypatch: pytest.MonkeyPatch) -> None:
    class Failed:
        success = False
        x = np.array([0.0, 0.0])

    class Optimiser:
        @staticmethod
        def minimize(*args: object, **kwargs: object) -> Failed:
            return Failed()

    monkeypatch.setattr(
        importlib.import_module("prereg.stats.invokerank.prior"), "optimize", Optimiser
    )
    prior = stats.fit_beta_prior([2, 5, 9], [10, 10, 12])
    assert prior.method.startswith("method of moments") and not prior.converged
    assert (prior.mu, prior.kappa) == pytest.approx(
        stats.betabinom_moments([2, 5, 9], [10, 10, 12])
    )


def test_cap_prior_by_hand() -> None:
    prior = stats.BetaPrior(
        mu=0.4, kappa=50.0, method="test", converged=True, loglik=0.0, cells_with_trials=3
    )
    y, n = np.array([2.0, 10.0, 6.0]), np.array([10.0, 30.0, 20.0])
    alpha, beta, capped = stats.cap_prior(prior, y, n)
    # others' trials: 50, 30, 40: the cap binds for cells 1 (30) and 2 (40) only
    assert capped.tolist() == [False, True, True]
    assert alpha[0] == pytest.approx(0.4 * 50) and beta[0] == pytest.approx(0.6 * 50)
    assert alpha[1] == pytest.approx(8.0) and beta[1] == pytest.approx(22.0)  # 8 of 30
    assert alpha[2] == pytest.approx(12.0) and beta[2] == pytest.approx(28.0)  # 12 of 40


def _hand_icc(y: list[int], n: list[int]) -> float:
    """One-way ANOVA ICC written out from the sums of squares (Fleiss 2003, ch. 15)."""
    k, big_n = len(n), sum(n)
    grand = sum(y) / big_n
    ssb = sum(ni * (yi / ni - grand) ** 2 for yi, ni in zip(y, n, strict=True))
    ssw = sum(
        yi * (1 - yi / ni) ** 2 + (ni - yi) * (yi / ni) ** 2 for yi, ni in zip(y, n, strict=True)
    )
    msb, msw = ssb / (k - 1), ssw / (big_n - k)
    n0 = (big_n - sum(ni * ni for ni in n) / big_n) / (k - 1)
    return min(1.0, max(0.0, (msb - msw) / (msb + (n0 - 1) * msw)))


@pytest.mark.parametrize(
    "y,n",
    [([2, 1, 0, 3, 1], [3, 2, 2, 3, 4]), ([1, 1, 0, 2], [2, 2, 2, 2]), ([0, 3, 1], [3, 3, 1])],
)
def test_grouped_icc_against_a_hand_anova(y: list[int], n: list[int]) -> None:
    assert stats.grouped_icc(y, n) == pytest.approx(_hand_icc(y, n), rel=1e-12)


def test_rho_falls_back_to_pooled_then_to_the_stage_default() -> None:
    # cell 0: two prompts with variation (own rho); cell 1: one prompt (pooled rho)
    runs = [2, 2, 2]
    reached = [[2, 1], [0, 0], [1, 1]]
    res = stats.invokerank(runs, reached, [0, 0, 1], stages=("surfaced", "selected"), draws=200)
    d = res.fits[0]
    assert d.rho_source == ("cell", "pooled")
    assert d.rho[1] == pytest.approx(stats.grouped_icc([2, 0, 1], [2, 2, 2]))
    # selected | surfaced: cell 0 has one prompt with surfaced runs, cell 1 one prompt
    # of one run: neither can estimate rho, so both take the pooled estimate
    s = res.fits[1]
    assert s.rho_source == ("pooled", "pooled")
    assert s.pooled_rho == pytest.approx(_hand_icc([1, 1], [2, 1]))
    sizes = np.array([2, 2])
    assert d.deff[0] == pytest.approx(1 + (np.sum(sizes**2) / sizes.sum() - 1) * d.rho[0])


def test_stage_defaults_when_nothing_is_estimable() -> None:
    res = stats.invokerank([1, 1], [[1, 1], [0, 0]], [0, 1], stages=("surfaced", "selected"))
    assert res.fits[0].rho_source == ("default", "default")
    assert res.fits[0].rho.tolist() == [0.6, 0.6]
    assert res.fits[1].rho.tolist() == [0.8, 0.8]


def test_child_posterior_is_the_prior_when_the_parent_never_fired() -> None:
    runs = [3, 3, 3, 3]
    reached = [[0, 0], [0, 0], [2, 1], [3, 2]]
    res = stats.invokerank(runs, reached, [0, 0, 1, 1], stages=("surfaced", "selected"))
    sel = res.fits[1]
    assert sel.trials[0] == 0
    assert sel.posterior_alpha[0] == pytest.approx(sel.prior_alpha[0])
    assert sel.posterior_beta[0] == pytest.approx(sel.prior_beta[0])
    assert sel.prior.method.startswith("jeffreys")  # only one cell had trials


def test_conjugate_update_on_deflated_counts() -> None:
    rng = np.random.default_rng(2)
    runs = np.full(30, 3)
    cell = np.repeat(np.arange(3), 10)
    d = rng.binomial(runs, np.repeat([0.3, 0.6, 0.8], 10))
    s = rng.binomial(d, 0.5)
    res = stats.invokerank(runs, np.stack([d, s], 1), cell, stages=("surfaced", "selected"))
    for f in res.fits:
        assert np.allclose(f.posterior_alpha, f.effective_successes + f.prior_alpha)
        assert np.allclose(
            f.posterior_beta, f.effective_trials - f.effective_successes + f.prior_beta
        )
        assert np.allclose(f.effective_trials * f.deff, f.trials)


def test_draws_are_seeded_and_q_is_the_product_of_posterior_means() -> None:
    rng = np.random.default_rng(9)
    runs = np.full(40, 3)
    cell = np.repeat(np.arange(4), 10)
    d = rng.binomial(runs, 0.7)
    s = rng.binomial(d, 0.6)
    i = rng.binomial(s, 0.9)
    reached = np.stack([d, s, i], 1)
    stages = ("surfaced", "selected", "invoked")
    a = stats.invokerank(runs, reached, cell, stages=stages, seed=5)
    b = stats.invokerank(runs, reached, cell, stages=stages, seed=5)
    c = stats.invokerank(runs, reached, cell, stages=stages, seed=6)
    assert np.array_equal(a.q_draws, b.q_draws) and a.rollup == b.rollup
    assert not np.array_equal(a.q_draws, c.q_draws)
    assert a.q_draws.shape == (4, 4000)
    # E[Q] = product of the posterior means under independent stage posteriors
    exact = np.prod(
        [f.posterior_alpha / (f.posterior_alpha + f.posterior_beta) for f in a.fits], axis=0
    )
    se = a.q_draws.std(axis=1) / math.sqrt(4000)
    assert np.all(np.abs(a.q - exact) < 4 * se)
    assert np.allclose(a.q_exact, exact)
    # roll-up: equal weights, index by index
    assert a.rollup_draws == pytest.approx(a.q_draws.mean(axis=0))
    lo, hi = np.quantile(a.rollup_draws, [0.05, 0.95])
    assert (a.rollup_low[0.9], a.rollup_high[0.9]) == pytest.approx((lo, hi))


def test_weighted_rollup_and_nested_counts_are_checked() -> None:
    res = stats.invokerank([2, 2], [[2], [1]], [0, 1], stages=("surfaced",), weights=[3, 1])
    assert res.weights.tolist() == [0.75, 0.25]
    assert res.rollup_draws == pytest.approx(0.75 * res.q_draws[0] + 0.25 * res.q_draws[1])
    with pytest.raises(ValueError, match="nested"):
        stats.invokerank([2], [[1, 2]], [0], stages=("surfaced", "selected"))


def test_ties_are_overlapping_intervals() -> None:
    overlap = stats.intervals_overlap([0.1, 0.3, 0.5], [0.35, 0.45, 0.6])
    assert overlap.tolist() == [[True, True, False], [True, True, False], [False, False, True]]


def test_lever_against_the_intent_median_by_hand() -> None:
    r = np.array([[0.9, 0.5], [0.6, 0.8], [0.3, 0.6]])
    lever = stats.funnel_lever(r)
    # medians: 0.6 and 0.6; Q per cell 0.45, 0.48, 0.18
    assert lever[0].tolist() == pytest.approx([0.0, 0.45 * (0.6 / 0.5 - 1)])
    assert lever[1].tolist() == pytest.approx([0.0, 0.0])
    assert lever[2].tolist() == pytest.approx([0.18 * (0.6 / 0.3 - 1), 0.0])


# --- the seed's published figures, from counts ---------------------------------------


def test_figure_2_jeffreys_intervals() -> None:
    """Figure 2: 265 of 390 surfaced (195 prompts x 2) at the pooled rho .94: 62.4 to 73.2;
    on the ChatGPT API 260 of 390 at rho .91: 61.1 to 71.9; execution runs once per prompt:
    29 of 57 completed (v1) 40.1 to 61.6, 57 of 57 executed 96.7 to 100.0."""
    cases = [
        (265, 195, 2, 0.94, (62.4, 73.2)),
        (260, 195, 2, 0.91, (61.1, 71.9)),
        (29, 57, 1, 0.0, (40.1, 61.6)),
        (57, 57, 1, 0.0, (96.7, 100.0)),
        (54, 54, 1, 0.0, (96.5, 100.0)),
    ]
    for y, prompts, k, rho, (low, high) in cases:
        deff = stats.design_effect(np.full(prompts, k), rho)
        iv = stats.jeffreys_interval(y, prompts * k, level=0.90, deff=deff)
        assert (round(100 * iv.low, 1), round(100 * iv.high, 1)) == (low, high)


def test_loss_shares_from_pooled_rates() -> None:
    """6.1: 44.0% / 56.0% on the Claude API, 42.1% / 57.9% on the ChatGPT API."""
    claude = stats.loss_shares([265 / 390, 162 / 265])
    chatgpt = stats.loss_shares([260 / 390, 149 / 260])
    assert np.round(100 * claude, 1).tolist() == [44.0, 56.0]
    assert np.round(100 * chatgpt, 1).tolist() == [42.1, 57.9]


def test_false_invoke_upper_bound() -> None:
    """6.5: 5 of 132 negative runs (66 prompts x 2), 3.8%, upper 90% bound 9.0% at rho_S .87."""
    calls = np.zeros(66)
    calls[:5] = 1
    iv = stats.false_invoke_rate(calls, np.full(66, 2), 0.87, level=0.90)
    assert round(100 * iv.estimate, 1) == 3.8
    assert round(100 * iv.high, 1) == 9.0
    assert iv.deff == pytest.approx(1.87)
