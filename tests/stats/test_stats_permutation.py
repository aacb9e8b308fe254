"""Exact permutation and sign-flip tests against brute-force enumeration and scipy."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from prereg.stats import exact_permutation_test, mcnemar_exact, sign_flip_test

ALTS = ["two-sided", "greater", "less"]


def _brute_permutation(x: list[float], y: list[float], alt: str) -> float:
    """Every ordering of the pooled values (each relabeling counted nx! ny! times)."""
    pooled = list(x) + list(y)
    nx = len(x)
    obs = np.mean(x) - np.mean(y)
    hits = total = 0
    for perm in itertools.permutations(pooled):
        t = np.mean(perm[:nx]) - np.mean(perm[nx:])
        total += 1
        if alt == "greater":
            hits += t >= obs - 1e-9
        elif alt == "less":
            hits += t <= obs + 1e-9
        else:
            hits += abs(t) >= abs(obs) - 1e-9
    return hits / total


@pytest.mark.parametrize("alt", ALTS)
def test_permutation_matches_brute_force(alt: str) -> None:
    x = [1.0, 2.5, 7.0]
    y = [2.0, 5.0, 6.0, 8.0]
    assert exact_permutation_test(x, y, alt).pvalue == pytest.approx(
        _brute_permutation(x, y, alt), rel=1e-12
    )
    x2 = [0.0, 1.0, 1.0]
    y2 = [1.0, 0.0, 0.0, 2.0]  # ties and unequal sizes
    assert exact_permutation_test(x2, y2, alt).pvalue == pytest.approx(
        _brute_permutation(x2, y2, alt), rel=1e-12
    )


@given(
    st.lists(st.integers(-5, 5), min_size=2, max_size=7),
    st.lists(st.integers(-5, 5), min_size=2, max_size=7),
    st.sampled_from(ALTS),
)
@settings(max_examples=40, deadline=None)
def test_permutation_matches_scipy(x: list[int], y: list[int], alt: str) -> None:
    res = exact_permutation_test(x, y, alt)
    ref = sps.permutation_test(
        (x, y),
        lambda a, b, axis: a.mean(axis) - b.mean(axis),
        permutation_type="independent",
        alternative=alt,
        n_resamples=np.inf,
        vectorized=True,
    )
    if alt != "two-sided" or len(x) == len(y):  # equal sizes: symmetric null, same p
        assert res.pvalue == pytest.approx(ref.pvalue, rel=1e-9)
    else:
        # scipy doubles the smaller tail; ours is the Fisher-Pitman |T*| >= |T|, read off
        # scipy's enumerated null distribution
        null = np.asarray(ref.null_distribution)
        expected = np.mean(np.abs(null) >= abs(res.statistic) - 1e-9)
        assert res.pvalue == pytest.approx(expected, rel=1e-9)
    assert res.exact and res.n_resamples == math.comb(len(x) + len(y), len(x))


def _subset_sum_counts(values: list[int], k: int) -> Counter[int]:
    """Number of k-subsets with each sum (exact dynamic programme)."""
    table: list[Counter[int]] = [Counter() for _ in range(k + 1)]
    table[0][0] = 1
    for v in values:
        for size in range(k, 0, -1):
            for s, cnt in table[size - 1].items():
                table[size][s + v] += cnt
    return table[k]


def test_permutation_monte_carlo_close_to_exact() -> None:
    rng = np.random.default_rng(2)
    x = rng.integers(0, 6, 16).tolist()
    y = (rng.integers(0, 6, 16) + 1).tolist()
    res = exact_permutation_test(x, y, "greater", seed=4)
    assert not res.exact and res.n_resamples == 100_000
    counts = _subset_sum_counts(x + y, 16)
    total = sum(counts.values())
    sx = sum(x)
    exact = sum(c for s, c in counts.items() if s >= sx) / total
    assert res.pvalue == pytest.approx(exact, abs=4 * math.sqrt(exact * (1 - exact) / 1e5) + 1e-5)


# --------------------------------------------------------------------------- sign flip


def _brute_sign_flip(d: list[float], alt: str) -> float:
    obs = sum(d)
    hits = total = 0
    for signs in itertools.product([-1, 1], repeat=len(d)):
        s = sum(a * b for a, b in zip(signs, d, strict=True))
        total += 1
        if alt == "greater":
            hits += s >= obs - 1e-9
        elif alt == "less":
            hits += s <= obs + 1e-9
        else:
            hits += abs(s) >= abs(obs) - 1e-9
    return hits / total


@given(
    st.lists(
        st.floats(-10, 10, allow_nan=False).map(lambda v: round(v, 3)), min_size=1, max_size=11
    ),
    st.sampled_from(ALTS),
)
@settings(max_examples=60, deadline=None)
def test_sign_flip_matches_brute_force(d: list[float], alt: str) -> None:
    assert sign_flip_test(d, alt).pvalue == pytest.approx(_brute_sign_flip(d, alt), rel=1e-9)


@pytest.mark.parametrize("alt", ALTS)
def test_sign_flip_matches_scipy_meet_in_the_middle(alt: str) -> None:
    rng = np.random.default_rng(3)
    d = rng.normal(0.4, 1.0, 15)
    res = sign_flip_test(d, alt)
    ref = sps.permutation_test(
        (d,),
        lambda a, axis: a.mean(axis),
        permutation_type="samples",
        alternative=alt,
        n_resamples=np.inf,
        vectorized=True,
    )
    assert res.exact and res.pvalue == pytest.approx(ref.pvalue, rel=1e-9)


@pytest.mark.parametrize("alt", ALTS)
def test_sign_flip_meet_in_the_middle_at_its_largest_size(alt: str) -> None:
    # 40 non-zero integer differences: 2^40 patterns, enumerated as 2 x 2^20 half sums
    rng = np.random.default_rng(9)
    a = rng.integers(1, 9, 40) * rng.choice([-1, 1], 40)
    a[:6] = np.abs(a[:6])
    res = sign_flip_test(a.astype(float), alt)
    assert res.exact and res.method == "sign-flip test, exact enumeration"
    assert res.pvalue == pytest.approx(_lattice_reference(a.tolist(), alt), rel=1e-9)


def test_sign_flip_seed_001_scale() -> None:
    # 12 clusters: 4096 equally likely patterns, so p is a multiple of 1/4096
    d = [-3.1, -5.2, -1.0, -4.4, -2.2, 0.5, -6.0, -3.3, -0.7, -2.8, -4.1, -1.9]
    p = sign_flip_test(d).pvalue
    assert p * 4096 == pytest.approx(round(p * 4096))
    assert p == pytest.approx(_brute_sign_flip(d, "two-sided"))


@pytest.mark.parametrize("b,c,zeros", [(9, 2, 30), (30, 45, 100), (3, 3, 200), (0, 7, 50)])
def test_sign_flip_on_binary_pairs_is_exact_mcnemar(b: int, c: int, zeros: int) -> None:
    d = np.array([1.0] * b + [-1.0] * c + [0.0] * zeros)
    np.random.default_rng(0).shuffle(d)
    res = sign_flip_test(d)
    assert res.exact
    assert res.pvalue == pytest.approx(mcnemar_exact(b, c).pvalue, rel=1e-9)


def _lattice_reference(a: list[int], alt: str) -> float:
    """Exact distribution of sum(e_i a_i), fair signs, by counting with Python integers."""
    dist: Counter[int] = Counter({0: 1})
    for v in a:
        new: Counter[int] = Counter()
        for s, cnt in dist.items():
            new[s + v] += cnt
            new[s - v] += cnt
        dist = new
    obs = sum(a)
    total = 2 ** len(a)
    if alt == "greater":
        return sum(cnt for s, cnt in dist.items() if s >= obs) / total
    if alt == "less":
        return sum(cnt for s, cnt in dist.items() if s <= obs) / total
    return sum(cnt for s, cnt in dist.items() if abs(s) >= abs(obs)) / total


@pytest.mark.parametrize("alt", ALTS)
def test_sign_flip_lattice_for_means_over_runs(alt: str) -> None:
    # differences of means over 3 runs: multiples of 1/3, 70 of them (beyond enumeration)
    rng = np.random.default_rng(5)
    k = rng.integers(-3, 4, 70)
    k[k == 0] = 1
    res = sign_flip_test(k / 3.0, alt)
    assert res.exact and "lattice" in res.method
    assert res.pvalue == pytest.approx(_lattice_reference(k.tolist(), alt), rel=1e-9)


def test_sign_flip_lattice_found_relative_to_the_data() -> None:
    # multiples of 1/101 (no denominator K <= 64 on the absolute scale) are integers
    # relative to the smallest magnitude: exact, not Monte Carlo
    rng = np.random.default_rng(6)
    cents = rng.integers(-150, 250, 60)
    cents[cents == 0] = 7
    res = sign_flip_test(cents / 101.0, "greater", seed=1)
    assert res.exact and "lattice" in res.method
    assert res.pvalue == pytest.approx(_lattice_reference(cents.tolist(), "greater"), rel=1e-9)


def _meet_in_the_middle(d: np.ndarray, alt: str) -> float:
    """Exact sign-flip p by enumeration of both halves' 2^(k/2) sums (independent code)."""
    half = d.size // 2

    def sums(v: np.ndarray) -> np.ndarray:
        signs = 1 - 2 * ((np.arange(2**v.size)[:, None] >> np.arange(v.size)) & 1)
        return signs @ v

    a, b = sums(d[:half]), np.sort(sums(d[half:]))
    obs, tol = d.sum(), 1e-9 * np.abs(d).sum()
    if alt == "greater":
        hits = (b.size - np.searchsorted(b, obs - tol - a)).sum()
    elif alt == "less":
        hits = np.searchsorted(b, obs + tol - a, side="right").sum()
    else:
        hits = (b.size - np.searchsorted(b, abs(obs) - tol - a)).sum()
        hits += np.searchsorted(b, -abs(obs) + tol - a, side="right").sum()
    return float(hits) / 2.0**d.size


def test_sign_flip_monte_carlo_close_to_exact() -> None:
    # 42 continuous differences: no lattice, beyond complete enumeration -> Monte Carlo
    rng = np.random.default_rng(6)
    d = rng.normal(0.35, 1.0, 42)
    res = sign_flip_test(d, "greater", seed=1)
    assert not res.exact and res.n_resamples == 100_000
    exact = _meet_in_the_middle(d, "greater")
    assert res.pvalue == pytest.approx(exact, abs=4 * math.sqrt(exact * (1 - exact) / 1e5) + 1e-5)


def test_sign_flip_all_zero_and_bad_input() -> None:
    res = sign_flip_test([0.0, 0.0, 0.0])
    assert res.pvalue == 1.0 and res.exact
    with pytest.raises(ValueError):
        sign_flip_test([1.0, math.nan])
    with pytest.raises(ValueError):
        sign_flip_test([1.0, 2.0], "bigger")
    with pytest.raises(ValueError):
        exact_permutation_test([], [1.0])


def test_sign_flip_type1_error_by_simulation() -> None:
    rng = np.random.default_rng(8)
    sims = 400
    rej = sum(sign_flip_test(rng.standard_t(3, 15)).pvalue <= 0.05 for _ in range(sims))
    assert rej / sims <= 0.05 + 2.5 * math.sqrt(0.05 * 0.95 / sims)
