"""The beta-mixture e-value, the sequential monitor, and their calibration."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate
from scipy import stats as sps

from prereg.stats import (
    beta_mixture_evalue,
    sequential_monitor,
    sequential_monitor_exact,
    simulate_sequential_monitor,
)


def _mixture_by_quadrature(b: int, c: int, a: float, b0: float) -> float:
    def integrand(p: float) -> float:
        return float(sps.beta.pdf(p, a, b0) * (2 * p) ** b * (2 * (1 - p)) ** c)

    val, _ = integrate.quad(integrand, 0.0, 1.0, epsabs=0, epsrel=1e-11, limit=200)
    return val


@pytest.mark.parametrize("b,c", [(0, 0), (1, 0), (5, 1), (10, 0), (7, 9), (30, 12)])
@pytest.mark.parametrize("prior", [(1.0, 1.0), (0.5, 0.5), (2.0, 3.0)])
def test_mixture_evalue_matches_quadrature(b: int, c: int, prior: tuple[float, float]) -> None:
    res = beta_mixture_evalue(b, c, prior=prior)
    assert res.evalue == pytest.approx(_mixture_by_quadrature(b, c, *prior), rel=1e-7)
    assert res.pvalue == pytest.approx(min(1.0, 1.0 / res.evalue))


def test_mixture_evalue_uniform_prior_closed_form() -> None:
    # uniform prior: E = 2^m b! c! / (m + 1)!
    for b, c in [(4, 0), (6, 0), (3, 5), (12, 2)]:
        m = b + c
        expected = 2**m * math.factorial(b) * math.factorial(c) / math.factorial(m + 1)
        assert beta_mixture_evalue(b, c).evalue == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("m", [1, 5, 20, 60])
@pytest.mark.parametrize("prior", [(1.0, 1.0), (0.5, 0.5)])
def test_mixture_evalue_has_expectation_one_under_null(
    m: int,
    prior: tuple[float, float],
) -> None:
    b = np.arange(m + 1)
    e = beta_mixture_evalue(b, m - b, prior=prior).evalue
    assert float(np.sum(sps.binom.pmf(b, m, 0.5) * e)) == pytest.approx(1.0, rel=1e-10)


def test_mixture_evalue_vectorised_and_symmetric() -> None:
    res = beta_mixture_evalue([0, 3, 8], [8, 3, 0])
    assert res.evalue[0] == pytest.approx(res.evalue[2])
    assert res.evalue[1] < 1.0
    with pytest.raises(ValueError):
        beta_mixture_evalue(-1, 2)
    with pytest.raises(ValueError):
        beta_mixture_evalue(1, 2, prior=(0.0, 1.0))


# --------------------------------------------------------------------------- monitor


def test_monitor_stops_at_first_crossing_after_minimum() -> None:
    # every prompt favours the first arm: E crosses 20 at 8 discordant pairs, but the
    # monitor may stop only from prompt 40 on
    first = np.ones(60)
    second = np.zeros(60)
    res = sequential_monitor(first, second, threshold=20, min_prompts=40)
    assert res.stopped and res.stop_at == 40 and res.n == 40 and res.b == 40
    assert res.pvalue == pytest.approx(1.0 / res.max_evalue)
    assert res.max_evalue == pytest.approx(beta_mixture_evalue(40, 0).evalue)
    # with no minimum it stops at the first m with 2^m / (m + 1) >= 20 (m = 8: 256/9)
    res0 = sequential_monitor(first, second, threshold=20, min_prompts=0)
    assert res0.stop_at == next(m for m in range(1, 60) if 2**m / (m + 1) >= 20) == 8


def test_monitor_concordant_pairs_do_not_move_e() -> None:
    first = np.array([1, 1, 0, 1, 0, 1, 1, 0])
    second = np.array([1, 0, 0, 1, 1, 1, 1, 0])
    res = sequential_monitor(first, second, min_prompts=0, threshold=1e9)
    b = np.cumsum((first == 1) & (second == 0))
    c = np.cumsum((first == 0) & (second == 1))
    assert np.allclose(res.evalues, beta_mixture_evalue(b, c).evalue)
    assert not res.stopped and res.stop_at is None and res.n == 8


def test_monitor_anytime_pvalue_is_running_minimum() -> None:
    rng = np.random.default_rng(1)
    first = rng.random(300) < 0.5
    second = rng.random(300) < 0.5
    res = sequential_monitor(first, second, threshold=1e6, min_prompts=40)
    assert res.pvalue == pytest.approx(min(1.0, 1.0 / max(1.0, res.evalues.max())))
    assert res.n == 300


def test_monitor_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        sequential_monitor([1, 0], [1])
    with pytest.raises(ValueError):
        sequential_monitor([1, 2], [1, 0])
    with pytest.raises(ValueError):
        sequential_monitor([1, 0], [1, 0], threshold=0.5)
    res = sequential_monitor([], [])
    assert not res.stopped and res.pvalue == 1.0 and res.n == 0


# --------------------------------------------------------------------------- calibration


def _exact_monitor(
    p01: float,
    p10: float,
    n_max: int,
    thr: float,
    min_prompts: int,
) -> tuple[float, float]:
    res = sequential_monitor_exact(p01, p10, n_max, threshold=thr, min_prompts=min_prompts)
    return res.rejection_rate, res.expected_prompts


@pytest.mark.parametrize(
    ("p01", "p10", "thr", "min_prompts", "prior"),
    [
        (0.2, 0.2, 3.0, 2, (1.0, 1.0)),
        (0.1, 0.5, 4.0, 0, (1.0, 1.0)),
        (0.3, 0.15, 2.5, 3, (2.0, 0.5)),
    ],
)
def test_exact_monitor_equals_brute_force_enumeration(
    p01: float, p10: float, thr: float, min_prompts: int, prior: tuple[float, float]
) -> None:
    """Every sequence of 9 prompts (3^9 of them), each stopped by the monitor itself."""
    n = 9
    probs = {0: 1 - p01 - p10, 1: p10, 2: p01}  # concordant, first arm only, second only
    stop_prob = expected = 0.0
    for seq in itertools.product((0, 1, 2), repeat=n):
        weight = math.prod(probs[x] for x in seq)
        first = [1 if x == 1 else 0 for x in seq]
        second = [1 if x == 2 else 0 for x in seq]
        res = sequential_monitor(first, second, threshold=thr, min_prompts=min_prompts, prior=prior)
        stop_prob += weight * res.stopped
        expected += weight * (res.stop_at if res.stopped else n)
    exact = sequential_monitor_exact(
        p01, p10, n, threshold=thr, min_prompts=min_prompts, prior=prior
    )
    assert exact.rejection_rate == pytest.approx(stop_prob, abs=1e-12)
    assert exact.expected_prompts == pytest.approx(expected, abs=1e-10)


@pytest.mark.parametrize("psi", [0.05, 0.2, 0.6, 1.0])
def test_monitor_type1_error_exact_under_continuous_monitoring(psi: float) -> None:
    stop, _ = _exact_monitor(psi / 2, psi / 2, 300, 20.0, 40)
    assert stop <= 1 / 20
    stop0, _ = _exact_monitor(psi / 2, psi / 2, 300, 20.0, 0)  # no minimum: still valid
    assert stop0 <= 1 / 20


def test_simulated_monitor_matches_exact_dynamic_programme() -> None:
    for p01, p10 in [(0.1, 0.1), (0.05, 0.2)]:
        sim = simulate_sequential_monitor(p01, p10, 200, sims=4000, seed=3)
        stop, expected = _exact_monitor(p01, p10, 200, 20.0, 40)
        assert abs(sim.rejection_rate - stop) <= 4 * max(sim.rejection_se, 1e-3)
        assert abs(sim.expected_prompts - expected) <= 4 * sim.expected_prompts_se + 0.5


def test_simulated_type1_error_at_most_alpha() -> None:
    sim = simulate_sequential_monitor(0.15, 0.15, 400, sims=4000, seed=5)
    assert sim.rejection_rate <= 0.05
    assert sim.median_prompts == 400


def test_simulation_is_seeded() -> None:
    a = simulate_sequential_monitor(0.1, 0.2, 100, sims=500, seed=9)
    b = simulate_sequential_monitor(0.1, 0.2, 100, sims=500, seed=9)
    assert a == b


@given(st.floats(0.0, 0.4), st.floats(0.0, 0.4))
@settings(max_examples=15, deadline=None)
def test_power_grows_with_the_effect(base: float, extra: float) -> None:
    lo = simulate_sequential_monitor(base, base, 150, sims=300, seed=1)
    hi = simulate_sequential_monitor(
        base, min(1.0 - base, base + extra + 0.2), 150, sims=300, seed=1
    )
    assert hi.rejection_rate >= lo.rejection_rate
    assert hi.expected_prompts <= lo.expected_prompts
