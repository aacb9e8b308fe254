"""The exact binary TOST is monotone in the margin (issue 14: n = 8, b = 2, c = 4).

Equivalence declared at a margin must be declared at every larger margin, and
``min_margin`` must be where the decision changes. Checked by exact enumeration of every
outcome (b, c) over a grid of margins: the decision regions are nested, each one-sided
p value is nonincreasing in the margin, and each decision agrees with ``min_margin``.
"""

from __future__ import annotations

import numpy as np
import pytest

from prereg.stats import tost_paired
from prereg.stats.paired import _exact_upper_p, exact_equivalence_region, upper_region

ALPHA = 0.05
MARGINS = np.round(np.arange(0.02, 0.96, 0.02), 2)


def _differences(b: int, c: int, n: int) -> np.ndarray:
    return np.array([1.0] * b + [-1.0] * c + [0.0] * (n - b - c))


def test_the_issue_case_rejects_at_every_margin_above_its_bound() -> None:
    # the at-margin ordering rejected at 0.293 and not at 0.30 here
    n, b, c = 8, 2, 4
    d = _differences(b, c, n)
    res = tost_paired(d, 0.9, ALPHA)
    high = res.high  # the upper one-sided test's bound
    for m in np.linspace(high + 2e-6, 0.95, 120):  # a fine grid; 0.30 checked below
        assert _exact_upper_p(b, c, n, float(m), ALPHA) <= ALPHA, m
    assert _exact_upper_p(b, c, n, max(0.30, high + 2e-6), ALPHA) <= ALPHA
    assert _exact_upper_p(b, c, n, high - 2e-6, ALPHA) > ALPHA
    assert res.equivalent and res.min_margin == pytest.approx(max(-res.low, res.high))


@pytest.mark.parametrize(("n", "step"), [(8, 0.005), (12, 0.005), (20, 0.02), (30, 0.02)])
def test_regions_are_nested_in_the_margin(n: int, step: float) -> None:
    # at step 0.005 the at-margin ordering had outcomes accepted at a margin and refused
    # at a larger one for n 8 and 12 (bench/stats_calibration.py, 6d)
    previous_eq = np.zeros((n + 1, n + 1), dtype=bool)
    previous_up = np.zeros((n + 1, n + 1), dtype=bool)
    for m in np.round(np.arange(0.02, 0.951, step), 3):
        eq = exact_equivalence_region(n, float(m), ALPHA)
        up = upper_region(n, float(m), ALPHA)
        # rejection at a smaller margin implies rejection here
        assert not (previous_eq & ~eq).any(), (n, m, np.argwhere(previous_eq & ~eq)[:3])
        assert not (previous_up & ~up).any(), (n, m)
        previous_eq, previous_up = eq, up
    assert previous_eq.any()  # not vacuous: equivalence is reached on the grid


def test_p_values_nonincreasing_in_the_margin() -> None:
    n = 9
    for b in range(n + 1):
        for c in range(n + 1 - b):
            p = np.array([_exact_upper_p(b, c, n, float(m), ALPHA) for m in MARGINS[::2]])
            assert (np.diff(p) <= 1e-9).all(), (b, c, p)


def test_decisions_agree_with_min_margin_for_every_outcome() -> None:
    n = 8
    regions = [exact_equivalence_region(n, float(m), ALPHA) for m in MARGINS]
    for b in range(n + 1):
        for c in range(n + 1 - b):
            mm = tost_paired(_differences(b, c, n), 0.5, ALPHA).min_margin
            for m, region in zip(MARGINS, regions, strict=True):
                inside = region[b, c]
                if abs(m - mm) > 1e-5:  # the bound is found to 1e-6
                    assert inside == (m > mm), (b, c, m, mm)
