"""The TOST interval inside the range of the mean difference (issue 39, items 4 and 5).

The paired t interval can leave [-1, 1] on differences of proportions (-1.53 on 3
tasks); ``support`` truncates it without touching the test. The exact and Tango
intervals of paired binary outcomes never leave [-1, 1] (checked on every outcome of
small designs). References: ``scipy.stats.t`` and statsmodels' ``ttost_paired``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.weightstats import ttost_paired

from prereg.stats import equivalence_margin, tost_paired

PROPORTIONS = (-1.0, 1.0)


def _t_interval(d: np.ndarray, alpha: float) -> tuple[float, float]:
    lo, hi = sps.t.interval(1 - 2 * alpha, d.size - 1, loc=d.mean(), scale=sps.sem(d))
    return float(lo), float(hi)


def test_three_tasks_past_minus_one_are_cut_at_minus_one() -> None:
    # per-task differences of success rates over a few runs, each in [-1, 1]
    d = np.array([-1.0, -2 / 3, 1 / 3])
    lo, hi = _t_interval(d, 0.05)
    assert lo < -1.0 < hi < 1.0  # the untruncated interval leaves the range
    plain = tost_paired(d, 0.2)
    cut = tost_paired(d, 0.2, support=PROPORTIONS)
    assert (plain.low, plain.high) == pytest.approx((lo, hi), rel=1e-10)
    assert (cut.low, cut.high) == (-1.0, pytest.approx(hi, rel=1e-10))
    assert "interval truncated to [-1, 1], the range of a difference of proportions" in cut.note
    assert plain.note == ""
    # the test itself is untouched: statsmodels' p value, the same decision and margin
    p, _, _ = ttost_paired(d, np.zeros(d.size), -0.2, 0.2)
    assert cut.pvalue == pytest.approx(p, rel=1e-10) == plain.pvalue
    assert cut.equivalent == plain.equivalent
    assert cut.min_margin == plain.min_margin == pytest.approx(max(-lo, hi), rel=1e-10)
    # no margin inside [-1, 1] gives equivalence here, and the note says so
    assert plain.min_margin > 1.0 and "no margin inside it" in cut.note


def test_only_the_end_that_leaves_is_cut_and_none_is_noted_when_nothing_is() -> None:
    d = np.array([1.0, 2 / 3, -1 / 3])  # the mirror image: past +1
    lo, hi = _t_interval(d, 0.05)
    cut = tost_paired(d, 0.2, support=PROPORTIONS)
    assert hi > 1.0 and (cut.low, cut.high) == (pytest.approx(lo, rel=1e-10), 1.0)
    inside = np.array([0.1, -0.2, 0.05, 0.0, 0.15, -0.1])
    assert tost_paired(inside, 0.2, support=PROPORTIONS) == tost_paired(inside, 0.2)


def test_any_support_and_an_undefined_t_test() -> None:
    d = np.array([0.2, 0.9, 0.95])
    lo, hi = _t_interval(d, 0.05)
    cut = tost_paired(d, 0.5, support=(0.0, 1.0))
    assert lo < 0.0 and hi > 1.0
    assert (cut.low, cut.high) == (0.0, 1.0)
    assert "interval truncated to [0, 1]" in cut.note
    # zero spread: no interval to cut, the explanation kept
    flat = tost_paired(np.full(4, 0.5), 0.2, support=PROPORTIONS)
    assert math.isnan(flat.low) and "zero standard deviation" in flat.note
    assert "truncated" not in flat.note


def test_truncation_keeps_the_decision_readable_off_the_interval() -> None:
    # for a margin inside the support the truncated interval lies inside (-m, m)
    # exactly when the test rejects (and the untruncated interval does)
    rng = np.random.default_rng(39)
    margins = np.round(np.arange(0.05, 1.0001, 0.05), 2)
    cut_any = False
    for _ in range(150):
        n = int(rng.integers(2, 7))
        d = np.clip(rng.normal(rng.uniform(-0.8, 0.8), rng.uniform(0.05, 0.9), n), -1, 1)
        for m in margins:
            res = tost_paired(d, float(m), support=PROPORTIONS)
            if math.isnan(res.pvalue):
                continue
            cut_any |= res.low == -1.0 or res.high == 1.0
            inside = -m < res.low and res.high < m
            assert inside == res.equivalent == (res.pvalue <= 0.05), (d, m)
    assert cut_any  # not vacuous


@pytest.mark.parametrize("method", ["exact", "tango"])
@pytest.mark.parametrize("alpha", [0.05, 0.025])
def test_binary_intervals_never_leave_minus_one_to_one(method: Any, alpha: float) -> None:
    # every outcome (b, c) of every design up to 9 pairs, and a few larger ones
    designs = [(n, b, c) for n in range(1, 10) for b in range(n + 1) for c in range(n + 1 - b)]
    designs += [(40, 40, 0), (40, 0, 40), (40, 39, 1), (40, 0, 0), (60, 30, 29)]
    for n, b, c in designs:
        d = np.array([1.0] * b + [-1.0] * c + [0.0] * (n - b - c))
        res = tost_paired(d, 0.2, alpha, method=method)
        assert -1.0 <= res.low <= res.estimate <= res.high <= 1.0, (n, b, c, res.low, res.high)
        assert res.min_margin <= 1.0
        assert tost_paired(d, 0.2, alpha, method=method, support=PROPORTIONS) == res


def test_equivalence_margin_is_the_tests_threshold_not_truncated() -> None:
    d = np.array([-1.0, -2 / 3, 1 / 3])
    m = equivalence_margin(d)
    assert m > 1.0
    assert m == tost_paired(d, 0.2, support=PROPORTIONS).min_margin
