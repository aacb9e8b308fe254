"""pass^k and loss shares against closed forms."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from prereg.stats import loss_shares, pass_hat_k


@given(st.integers(0, 30), st.integers(0, 30), st.integers(0, 6))
@settings(max_examples=150, deadline=None)
def test_pass_hat_k_matches_binomial_coefficients(c: int, extra: int, k: int) -> None:
    n = c + extra
    value = pass_hat_k(c, n, k)
    if n < k:
        assert math.isnan(value)
    else:
        assert value == pytest.approx(math.comb(c, k) / math.comb(n, k), rel=1e-12, abs=0)


@pytest.mark.parametrize("n,k,p", [(3, 3, 0.7), (5, 2, 0.3), (10, 3, 0.55), (4, 1, 0.9)])
def test_pass_hat_k_is_unbiased_for_p_to_the_k(n: int, k: int, p: float) -> None:
    c = np.arange(n + 1)
    expectation = float(np.sum(sps.binom.pmf(c, n, p) * pass_hat_k(c, n, k)))
    assert expectation == pytest.approx(p**k, rel=1e-12)


def test_pass_hat_k_cases() -> None:
    assert pass_hat_k(2, 3, 2) == pytest.approx(1 / 3)
    assert pass_hat_k(3, 3, 3) == 1.0 and pass_hat_k(2, 3, 3) == 0.0
    assert math.isnan(pass_hat_k(2, 2, 3))  # K = 2 repeats cannot give pass^3
    assert pass_hat_k(1, 5, 0) == 1.0
    out = pass_hat_k(np.array([0, 2, 5]), 5, 2)
    assert np.allclose(out, [0.0, 0.1, 1.0])
    with pytest.raises(ValueError):
        pass_hat_k(4, 3, 2)
    with pytest.raises(ValueError):
        pass_hat_k(1, 3, -1)


def test_loss_shares_decompose_log_loss() -> None:
    r = np.array([0.9, 0.5, 0.8, 0.95, 0.7])
    shares = loss_shares(r)
    assert shares.sum() == pytest.approx(1.0)
    q = np.prod(r)
    assert np.allclose(shares * -math.log(q), -np.log(r))


def test_loss_shares_edge_cases() -> None:
    assert loss_shares([0.5, 1.0, 0.25]).tolist() == pytest.approx([1 / 3, 0.0, 2 / 3])
    assert np.all(np.isnan(loss_shares([1.0, 1.0, 1.0])))  # no loss: undefined
    assert loss_shares([0.0, 0.5, 1.0]).tolist() == [1.0, 0.0, 0.0]  # zero takes it all
    two_zeros = loss_shares([0.0, 0.5, 0.0])
    assert math.isnan(two_zeros[0]) and two_zeros[1] == 0.0 and math.isnan(two_zeros[2])
    with pytest.raises(ValueError):
        loss_shares([0.5, 1.2])
    with pytest.raises(ValueError):
        loss_shares([])


def test_loss_shares_vectorised_over_draws() -> None:
    rng = np.random.default_rng(0)
    draws = rng.uniform(0.2, 1.0, size=(1000, 5))
    shares = loss_shares(draws)
    assert shares.shape == (1000, 5)
    assert np.allclose(shares.sum(axis=1), 1.0)
    assert np.allclose(shares[17], loss_shares(draws[17]))


@given(st.lists(st.floats(0.01, 1.0), min_size=1, max_size=6))
@settings(max_examples=100, deadline=None)
def test_loss_shares_properties(rates: list[float]) -> None:
    shares = loss_shares(rates)
    if all(r == 1.0 for r in rates):
        assert np.all(np.isnan(shares))
    else:
        assert shares.sum() == pytest.approx(1.0)
        assert np.all((shares >= 0) & (shares <= 1))
        # a lower rate never gets a smaller share
        order = np.argsort(rates)
        assert np.all(np.diff(shares[order]) <= 1e-12)
