"""Benjamini-Hochberg, Holm and e-BH against statsmodels and their definitions."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from statsmodels.stats.multitest import multipletests

from prereg.stats import benjamini_hochberg, e_bh, holm
from tests.statsmodels_holm import multipletests_holm

pvalue_lists = st.lists(st.floats(0.0, 1.0, allow_nan=False), min_size=1, max_size=40)
# p-values on a coarse grid produce ties and values exactly on the BH / Holm boundaries
grid_lists = st.lists(st.integers(0, 40).map(lambda k: k / 400), min_size=1, max_size=30)


@given(st.one_of(pvalue_lists, grid_lists), st.sampled_from([0.01, 0.05, 0.1, 0.2]))
@settings(max_examples=150, deadline=None)
def test_bh_matches_statsmodels(p: list[float], q: float) -> None:
    res = benjamini_hochberg(p, q)
    reject, adjusted, _, _ = multipletests(p, alpha=q, method="fdr_bh")
    assert np.array_equal(res.reject, reject)
    assert np.allclose(res.adjusted, adjusted, rtol=1e-12, atol=1e-300)
    assert res.n_rejected == int(reject.sum()) and res.n == len(p)


@given(st.one_of(pvalue_lists, grid_lists), st.sampled_from([0.01, 0.05, 0.1]))
@settings(max_examples=150, deadline=None)
def test_holm_matches_statsmodels(p: list[float], alpha: float) -> None:
    res = holm(p, alpha)
    reject, adjusted, _, _ = multipletests_holm(p, alpha)
    assert np.array_equal(res.reject, reject)
    assert np.allclose(res.adjusted, adjusted, rtol=1e-12, atol=1e-300)


def test_bh_and_holm_worked_example() -> None:
    p = [0.01, 0.04, 0.03, 0.5]
    bh = benjamini_hochberg(p, 0.1)
    assert bh.reject.tolist() == [True, True, True, False]
    # Holm: 0.01 <= 0.05/4, then 0.03 > 0.05/3 stops
    assert holm(p, 0.05).reject.tolist() == [True, False, False, False]
    assert holm(p, 0.05).adjusted.tolist() == pytest.approx([0.04, 0.09, 0.09, 0.5])


def test_seed_001_holm_over_eight_contrasts() -> None:
    # a bootstrap p floor of 1e-4 over eight contrasts becomes 8e-4 after Holm
    p = [1e-4] + [0.5] * 7
    assert holm(p, 0.05).adjusted[0] == pytest.approx(8e-4)


def test_empty_and_invalid_inputs() -> None:
    for fn in (benjamini_hochberg, holm, e_bh):
        res = fn([], 0.1)
        assert res.n == 0 and res.reject.size == 0 and res.n_rejected == 0
    for bad in ([0.1, math.nan], [-0.1], [1.2]):
        with pytest.raises(ValueError):
            benjamini_hochberg(bad, 0.1)
        with pytest.raises(ValueError):
            holm(bad, 0.1)
    with pytest.raises(ValueError):
        e_bh([1.0, -2.0], 0.1)
    with pytest.raises(ValueError):
        e_bh([1.0, math.nan], 0.1)
    with pytest.raises(ValueError):
        benjamini_hochberg([0.1], 0.0)


# --------------------------------------------------------------------------- e-BH


def _ebh_by_definition(e: list[float], q: float) -> set[int]:
    """Largest k such that at least k e-values are >= m / (k q); reject those."""
    m = len(e)
    best: set[int] = set()
    for k in range(1, m + 1):
        chosen = {i for i, v in enumerate(e) if v >= m / (k * q)}
        if len(chosen) >= k and len(chosen) > len(best):
            best = chosen
    return best


evalue_lists = st.lists(
    st.one_of(
        st.floats(0.0, 1e4, allow_nan=False),
        st.just(math.inf),
        st.just(0.0),
        st.integers(1, 60).map(float),
    ),
    min_size=1,
    max_size=25,
)


@given(evalue_lists, st.sampled_from([0.05, 0.1, 0.2]))
@settings(max_examples=150, deadline=None)
def test_ebh_matches_definition(e: list[float], q: float) -> None:
    res = e_bh(e, q)
    assert set(np.nonzero(res.reject)[0].tolist()) == _ebh_by_definition(e, q)


@given(
    pvalue_lists.filter(lambda p: min(p) > 0),
    st.sampled_from([0.05, 0.1, 0.2]),
    st.lists(st.floats(0.01, 1.0), min_size=40, max_size=40),
)
@settings(max_examples=150, deadline=None)
def test_ebh_on_calibrated_evalues_never_rejects_more_than_bh(
    p: list[float], q: float, shrink: list[float]
) -> None:
    # e = 1/p exactly, and e <= 1/p (any calibrated e-value): e-BH rejects a subset of BH
    # (BH run at q (1 + 1e-12) so that rounding in 1/(1/p) cannot decide a boundary tie)
    bh = benjamini_hochberg(p, min(1.0, q * (1 + 1e-12)))
    inv = [1.0 / x for x in p]
    for e in (inv, [v * s for v, s in zip(inv, shrink, strict=False)]):
        res = e_bh(e, q)
        assert res.n_rejected <= bh.n_rejected
        assert not np.any(res.reject & ~bh.reject)


def test_ebh_edge_cases() -> None:
    res = e_bh([math.inf, 0.0, 1.0], 0.1)
    assert res.reject.tolist() == [True, False, False]
    assert res.threshold == pytest.approx(3 / (1 * 0.1))
    # ties at the k*-th value are all rejected
    res = e_bh([15.0, 15.0, 1.0], 0.1)  # m / (2 q) = 15
    assert res.reject.tolist() == [True, True, False]
    assert e_bh([5.0, 5.0], 0.1).n_rejected == 0 and e_bh([5.0], 0.1).threshold == math.inf
    # adjusted values: smallest q at which each is rejected
    res = e_bh([40.0, 10.0, 2.0], 0.2)
    for i in range(3):
        assert e_bh([40.0, 10.0, 2.0], min(1.0, res.adjusted[i] * (1 + 1e-12))).reject[i]


@given(evalue_lists, st.sampled_from([0.05, 0.1]), st.floats(1.0, 10.0))
@settings(max_examples=80, deadline=None)
def test_ebh_is_monotone_in_evalues_and_level(
    e: list[float],
    q: float,
    factor: float,
) -> None:
    base = e_bh(e, q)
    assert np.all(e_bh([v * factor for v in e], q).reject >= base.reject)
    assert np.all(e_bh(e, min(1.0, 2 * q)).reject >= base.reject)


def test_ebh_controls_fdr_by_simulation() -> None:
    # independent beta-mixture-like e-values: nulls have E[e] = 1
    rng = np.random.default_rng(7)
    m, m1, reps, q = 40, 10, 600, 0.1
    fdp = []
    for _ in range(reps):
        x = rng.normal(size=m)
        x[:m1] += 3.0
        e = np.exp(2.0 * x - 2.0)  # likelihood ratio N(2,1) vs N(0,1): E_null = 1
        rej = e_bh(e, q).reject
        false = int(rej[m1:].sum())
        fdp.append(false / max(1, int(rej.sum())))
    assert float(np.mean(fdp)) <= q
