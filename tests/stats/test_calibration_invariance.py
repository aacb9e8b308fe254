"""Permutation and sign-flip p values depend only on the ordering of the statistics.

Issue 14, item 1: p(x) == p(a + b x) for offsets up to 1e12 and units from 1e-12 to 1e12,
wherever a + b x is itself exactly representable (integers shifted by an integer; any
data multiplied by any b; integers shifted by A and multiplied by a power of two), and
the p values agree with exact enumeration in integer arithmetic (independent code).
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prereg.stats import contrast_sign_flip, exact_permutation_test, sign_flip_test

ALTS = ["two-sided", "greater", "less"]
SETTINGS = settings(max_examples=60, deadline=None, database=None)

small_ints = st.lists(st.integers(-6, 6), min_size=2, max_size=6)
offsets = st.integers(-(10**12), 10**12)
units = st.floats(1e-12, 1e12)
powers_of_two = st.integers(-40, 40).map(lambda k: 2.0**k)
# real values whose products with any unit above stay normal floats
reals = st.floats(-3, 3).filter(lambda v: v == 0 or abs(v) > 1e-6)


def _brute_permutation(x: list[int], y: list[int], alt: str) -> Fraction:
    """Exact p over all relabelings, in integer arithmetic (nx ny T = n S - nx total)."""
    pooled = x + y
    n, nx = len(pooled), len(x)
    total = sum(pooled)
    obs = n * sum(x) - nx * total
    hits = count = 0
    for idx in itertools.combinations(range(n), nx):
        d = n * sum(pooled[i] for i in idx) - nx * total
        count += 1
        if alt == "greater":
            hits += d >= obs
        elif alt == "less":
            hits += d <= obs
        else:
            hits += abs(d) >= abs(obs)
    return Fraction(hits, count)


def _brute_sign_flip(d: list[int], alt: str) -> Fraction:
    obs = sum(d)
    hits = 0
    for signs in itertools.product((1, -1), repeat=len(d)):
        s = sum(e * v for e, v in zip(signs, d, strict=True))
        if alt == "greater":
            hits += s >= obs
        elif alt == "less":
            hits += s <= obs
        else:
            hits += abs(s) >= abs(obs)
    return Fraction(hits, 2 ** len(d))


def _p_perm(x: object, y: object, alt: str) -> float:
    return exact_permutation_test(x, y, alt).pvalue


@SETTINGS
@given(small_ints, small_ints, offsets, st.sampled_from(ALTS))
def test_permutation_shift_invariant(x: list[int], y: list[int], a: int, alt: str) -> None:
    p = _p_perm(x, y, alt)
    assert p == float(_brute_permutation(x, y, alt))
    xs = np.array(x, dtype=np.float64) + a  # exact: integers below 2^53
    ys = np.array(y, dtype=np.float64) + a
    assert _p_perm(xs, ys, alt) == p


@SETTINGS
@given(small_ints, small_ints, units, st.sampled_from(ALTS))
def test_permutation_scale_invariant(x: list[int], y: list[int], b: float, alt: str) -> None:
    p = _p_perm(x, y, alt)
    assert _p_perm(np.array(x) * b, np.array(y) * b, alt) == p
    flipped = {"greater": "less", "less": "greater"}.get(alt, alt)
    assert _p_perm(np.array(x) * -b, np.array(y) * -b, flipped) == p


@SETTINGS
@given(small_ints, small_ints, offsets, powers_of_two, st.sampled_from(ALTS))
def test_permutation_affine_invariant(
    x: list[int], y: list[int], a: int, b: float, alt: str
) -> None:
    # b (A + x): exact for |A| <= 1e12 and b a power of two from 2^-40 to 2^40
    xs = (a + np.array(x, dtype=np.float64)) * b
    ys = (a + np.array(y, dtype=np.float64)) * b
    assert _p_perm(xs, ys, alt) == float(_brute_permutation(x, y, alt))


@SETTINGS
@given(
    st.lists(reals, min_size=3, max_size=6),
    st.lists(reals, min_size=3, max_size=6),
    units,
    st.sampled_from(ALTS),
)
def test_permutation_scale_invariant_continuous(
    x: list[float], y: list[float], b: float, alt: str
) -> None:
    p = _p_perm(x, y, alt)
    assert _p_perm(np.array(x) * b, np.array(y) * b, alt) == p


@SETTINGS
@given(st.lists(st.integers(-5, 5), min_size=1, max_size=10), units, st.sampled_from(ALTS))
def test_sign_flip_scale_invariant(d: list[int], b: float, alt: str) -> None:
    p = sign_flip_test(d, alt).pvalue
    nonzero = [v for v in d if v != 0]
    assert p == (float(_brute_sign_flip(nonzero, alt)) if nonzero else 1.0)
    assert sign_flip_test(np.array(d) * b, alt).pvalue == p
    flipped = {"greater": "less", "less": "greater"}.get(alt, alt)
    assert sign_flip_test(np.array(d) * -b, flipped).pvalue == p


@SETTINGS
@given(
    st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9)), min_size=1, max_size=10),
    offsets,
    powers_of_two,
    st.sampled_from(ALTS),
)
def test_sign_flip_of_shifted_pairs(
    pairs: list[tuple[int, int]], a: int, b: float, alt: str
) -> None:
    # paired values shifted by a common offset up to 1e12, in units from 2^-40 to 2^40
    x = np.array([p[0] for p in pairs], dtype=np.float64)
    y = np.array([p[1] for p in pairs], dtype=np.float64)
    p = sign_flip_test(x - y, alt).pvalue
    assert sign_flip_test((a + x) * b - (a + y) * b, alt).pvalue == p


@SETTINGS
@given(st.lists(reals, min_size=2, max_size=12), units, st.sampled_from(ALTS))
def test_sign_flip_scale_invariant_continuous(d: list[float], b: float, alt: str) -> None:
    assert sign_flip_test(np.array(d) * b, alt).pvalue == sign_flip_test(d, alt).pvalue


@pytest.mark.parametrize("b", [1e-12, 3e-11, 0.1, 7.0, 1e12])
@pytest.mark.parametrize("alt", ALTS)
def test_sign_flip_lattice_path_scale_invariant(b: float, alt: str) -> None:
    # 70 differences of means over 3 runs: beyond enumeration, exact on the lattice
    rng = np.random.default_rng(5)
    k = rng.integers(-3, 4, 70)
    k[k == 0] = 1
    p = sign_flip_test(k / 3.0, alt).pvalue
    res = sign_flip_test(k / 3.0 * b, alt)
    assert res.exact and res.pvalue == p


@pytest.mark.parametrize("a", [1e9, 1.7e9, 1e12])
def test_issue_cases_shift(a: float) -> None:
    # integer data shifted like timestamps: the p value must not move
    x = [3, 5, 6, 8, 9, 11]
    y = [1, 2, 2, 4, 5, 5]
    for alt in ALTS:
        p = float(_brute_permutation(x, y, alt))
        assert _p_perm(np.add(x, a), np.add(y, a), alt) == p
        d = np.subtract(x, y)
        assert sign_flip_test((np.add(x, a)) - (np.add(y, a)), alt).pvalue == (
            float(_brute_sign_flip([int(v) for v in d if v != 0], alt))
        )


@pytest.mark.parametrize("b", [1e-10, 1e-11, 1e-12])
def test_issue_cases_small_units(b: float) -> None:
    d = [1, 2, 2, 3, 1, 4, 2, 1]  # p(greater) = 1/256 in any unit
    assert sign_flip_test(np.array(d) * b, "greater").pvalue == 1 / 256
    cells = np.column_stack([np.array(d) * b, np.zeros(len(d))])
    assert contrast_sign_flip(cells, [1.0, -1.0], "greater").pvalue == 1 / 256
    assert _p_perm(np.array([5, 6, 7]) * b, np.array([1, 2, 3]) * b, "greater") == 1 / 20


def test_monte_carlo_paths_invariant() -> None:
    # beyond exact enumeration: the same seeded draws, the same ordering, the same p
    rng = np.random.default_rng(3)
    x = rng.integers(0, 50, 40).astype(float)
    y = rng.integers(5, 55, 40).astype(float)
    p = exact_permutation_test(x, y, draws=4000).pvalue
    assert exact_permutation_test(x + 1e12, y + 1e12, draws=4000).pvalue == p
    assert exact_permutation_test(x * 1e-12, y * 1e-12, draws=4000).pvalue == p
    d = rng.normal(0.3, 1.0, 45)
    q = sign_flip_test(d, draws=4000).pvalue
    assert sign_flip_test(d * 1e-12, draws=4000).pvalue == q
    assert sign_flip_test(d * 1e12, draws=4000).pvalue == q
