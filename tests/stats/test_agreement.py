"""Cohen's kappa against statsmodels and published examples; judge TPR/FPR by hand."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.inter_rater import cohens_kappa as sm_kappa

from prereg.stats import cohens_kappa, cohens_kappa_table, judge_rates

# SAS PROC FREQ documentation's worked example (reproduced in statsmodels' own tests):
# Kappa 0.4842, ASE 0.1380, 95% limits 0.2137 to 0.7547, ASE under H0 0.1484,
# two-sided p 0.0011.
SAS_TABLE = [[0, 4, 1], [0, 8, 0], [0, 1, 5]]

# Fleiss, Statistical Methods for Rates and Proportions (chapter on interrater agreement):
# 100 patients, two raters, psychological / neurological / organic. p_o = 0.89,
# p_e = 0.80 * 0.80 + 0.10 * 0.05 + 0.10 * 0.15 = 0.66, kappa = 0.23 / 0.34 = 0.676.
FLEISS_TABLE = [[75, 1, 4], [5, 4, 1], [0, 0, 10]]

TABLES = [
    SAS_TABLE,
    FLEISS_TABLE,
    [[20, 5], [10, 15]],
    [[45, 3], [2, 50]],  # a good judge against gold
    [[1, 9], [9, 1]],  # worse than chance
    [[10, 0, 0, 2], [1, 7, 3, 0], [0, 2, 9, 1], [4, 0, 1, 6]],
]


def test_sas_published_example() -> None:
    res = cohens_kappa_table(SAS_TABLE)
    assert res.estimate == pytest.approx(0.4842, abs=5e-5)
    assert res.se == pytest.approx(0.1380, abs=5e-5)
    # SAS's published interval is the Wald one (0.2137 to 0.7547), which prereg no longer
    # prints (it leaves [-1, 1] near kappa = 1): the SE it rests on still matches
    assert -1.0 <= res.low < res.estimate < res.high <= 1.0
    assert res.se0 == pytest.approx(0.1484, abs=5e-5)
    assert res.pvalue == pytest.approx(0.0011, abs=5e-5)


def test_fleiss_published_example() -> None:
    res = cohens_kappa_table(FLEISS_TABLE)
    assert res.observed_agreement == pytest.approx(0.89)
    assert res.expected_agreement == pytest.approx(0.66)
    assert res.estimate == pytest.approx(0.23 / 0.34, rel=1e-12)


@pytest.mark.parametrize("table", TABLES)
@pytest.mark.parametrize("level", [0.90, 0.95])
def test_kappa_and_se_match_statsmodels(table: list[list[int]], level: float) -> None:
    ref = sm_kappa(table)
    res = cohens_kappa_table(table, level=level)
    assert res.estimate == pytest.approx(ref.kappa, rel=1e-12, abs=1e-14)
    assert res.se == pytest.approx(ref.std_kappa, rel=1e-10)
    assert res.se0 == pytest.approx(ref.std_kappa0, rel=1e-10)
    # the interval is BCa over items (tests/stats/test_kappa_interval.py), inside [-1, 1]
    assert -1.0 <= res.low <= res.estimate <= res.high <= 1.0
    if level == 0.95:
        assert res.pvalue == pytest.approx(ref.pvalue_two_sided, rel=1e-8)


def test_labels_give_the_table_statsmodels_sees() -> None:
    rng = np.random.default_rng(3)
    a = rng.choice(["done", "partial", "failed"], size=200)
    b = np.where(rng.random(200) < 0.7, a, rng.choice(["done", "partial", "failed"], size=200))
    res = cohens_kappa(a, b)
    cats = sorted({"done", "partial", "failed"})
    assert res.categories == tuple(cats)
    table = np.array([[np.sum((a == r) & (b == c)) for c in cats] for r in cats])
    assert np.array_equal(res.table, table)
    ref = sm_kappa(table)
    assert res.estimate == pytest.approx(ref.kappa, rel=1e-12)
    assert res.se == pytest.approx(ref.std_kappa, rel=1e-10)
    # a category neither rater used changes nothing
    more = cohens_kappa(a, b, categories=[*cats, "unjudged"])
    assert more.estimate == pytest.approx(res.estimate, rel=1e-12)


def test_binary_kappa_by_hand() -> None:
    gold = [1, 1, 1, 1, 0, 0, 0, 0, 1, 0]
    judge = [1, 1, 1, 0, 0, 0, 0, 1, 1, 0]
    # 8 agreements of 10; both raters say 1 half the time: p_e = 0.5
    res = cohens_kappa(gold, judge)
    assert res.estimate == pytest.approx((0.8 - 0.5) / 0.5)
    assert cohens_kappa(np.array(gold, bool), np.array(judge, bool)).estimate == res.estimate


def test_bootstrap_interval_is_the_item_bootstrap() -> None:
    table = np.array([[45, 3], [2, 50]])
    res = cohens_kappa_table(table, draws=4000, seed=7)
    # independent reference: resample the 100 items themselves
    a = np.repeat([0, 0, 1, 1], table.ravel())
    b = np.repeat([0, 1, 0, 1], table.ravel())
    rng = np.random.default_rng(11)
    idx = rng.integers(0, a.size, size=(4000, a.size))
    ra, rb = a[idx], b[idx]
    po = np.mean(ra == rb, axis=1)
    pa, pb = ra.mean(axis=1), rb.mean(axis=1)
    pe = pa * pb + (1 - pa) * (1 - pb)
    ks = (po - pe) / (1 - pe)
    low, high = np.quantile(ks, [0.025, 0.975])
    assert res.bootstrap_low == pytest.approx(low, abs=0.015)
    assert res.bootstrap_high == pytest.approx(high, abs=0.015)
    assert res.bootstrap_high <= 1.0
    again = cohens_kappa_table(table, draws=4000, seed=7)
    assert again.bootstrap_low == res.bootstrap_low  # seeded


def test_degenerate_and_bad_input() -> None:
    res = cohens_kappa([1, 1, 1], [1, 1, 1])
    assert math.isnan(res.estimate) and "undefined" in res.note
    with pytest.raises(ValueError, match="rater_b"):
        cohens_kappa([0, 1, 1], [0, 1])
    with pytest.raises(ValueError, match="rater_a.*not in categories"):
        cohens_kappa([0, 2], [0, 1], categories=[0, 1])
    with pytest.raises(ValueError, match="rater_a.*None"):
        cohens_kappa(np.array([0, None], dtype=object), [0, 1])
    with pytest.raises(ValueError, match="table"):
        cohens_kappa_table([[1, 2, 3], [4, 5, 6]])
    with pytest.raises(ValueError, match="table"):
        cohens_kappa_table([[1, -2], [4, 5]])
    with pytest.raises(ValueError, match="level"):
        cohens_kappa_table(SAS_TABLE, level=1.5)
    res = cohens_kappa_table(SAS_TABLE)
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.estimate = 0.0  # type: ignore[misc]


def test_judge_rates_against_hand_counts() -> None:
    gold = [1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 1]
    judge = [1, 1, 1, 0, 1, 0, 1, 0, 0, 0, 0, 1]
    # gold positives: 6, judge says 1 on 5 of them; gold negatives: 6, judge 1 on 1
    res = judge_rates(gold, judge, level=0.95)
    assert (res.true_positives, res.false_negatives) == (5, 1)
    assert (res.false_positives, res.true_negatives) == (1, 5)
    assert res.tpr.estimate == pytest.approx(5 / 6) and res.fpr.estimate == pytest.approx(1 / 6)
    # Jeffreys: Beta(x + 1/2, n - x + 1/2) quantiles
    assert res.tpr.low == pytest.approx(sps.beta.ppf(0.025, 5.5, 1.5), rel=1e-10)
    assert res.tpr.high == pytest.approx(sps.beta.ppf(0.975, 5.5, 1.5), rel=1e-10)
    assert res.fpr.low == pytest.approx(sps.beta.ppf(0.025, 1.5, 5.5), rel=1e-10)
    assert res.fpr.high == pytest.approx(sps.beta.ppf(0.975, 1.5, 5.5), rel=1e-10)


def test_judge_rates_boundaries_and_validation() -> None:
    res = judge_rates([1, 1, 1, 0], [1, 1, 1, 0])
    assert res.tpr.high == 1.0 and res.fpr.low == 0.0  # 3/3 and 0/1: one-sided bounds
    only_pos = judge_rates([1, 1], [1, 0])
    assert math.isnan(only_pos.fpr.estimate) and (only_pos.fpr.low, only_pos.fpr.high) == (0, 1)
    with pytest.raises(ValueError, match="judge"):
        judge_rates([1, 0, 1], [1, 0])
    with pytest.raises(ValueError, match="gold"):
        judge_rates([1, 0.5], [1, 0])
    with pytest.raises(ValueError, match="judge"):
        judge_rates([1, 0], ["1", "0"])
