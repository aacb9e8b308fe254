"""contrast_bootstrap's default interval (issue 39): the t interval of the unit contrasts.

The default interval is estimate -+ sqrt(U/(U-1)) t_{U-1,q} SE*, with SE* the bootstrap
standard error of the mean of U resampled units computed exactly (plug-in variance / U),
so it is the one-sample t interval of the unit contrasts and its p the t test's: checked
against ``scipy.stats.ttest_1samp``. Also: the p inverts the interval at every level, the
interval lies in the contrast's support and says when it was cut, coverage at 10
clusters (simulation, stated Monte Carlo error) where the percentile interval falls
short, and ``resampled_contrast`` keeps the seed's percentile method on its drawn path.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from prereg.stats import contrast_bootstrap, resampled_contrast

#: a 2 x 2 interaction over the cells (lo, lo), (lo, hi), (hi, lo), (hi, hi)
INTERACTION = (1.0, -1.0, -1.0, 1.0)


def _unit_means(values: np.ndarray, weights, labels: np.ndarray) -> np.ndarray:
    """Per-unit contrasts by hand: each row's weighted sum, averaged within its unit."""
    per_row = values @ np.asarray(weights)
    return np.array([per_row[labels == u].mean() for u in np.unique(labels)])


@pytest.mark.parametrize("level", [0.8, 0.95, 0.99])
def test_default_interval_and_p_are_scipys_one_sample_t(level: float) -> None:
    rng = np.random.default_rng(7)
    labels = np.repeat(np.arange(12), 3)  # 12 units of 3 rows
    values = rng.random((36, 4))
    res = contrast_bootstrap(values, INTERACTION, units=labels, level=level, seed=1)
    d = _unit_means(values, INTERACTION, labels)
    ref = sps.ttest_1samp(d, 0.0)
    ci = ref.confidence_interval(level)
    assert res.n == 12 and res.estimate == pytest.approx(d.mean(), abs=1e-15)
    assert (res.low, res.high) == pytest.approx((ci.low, ci.high), abs=1e-12)
    assert res.pvalue == pytest.approx(ref.pvalue, rel=1e-10)
    # SE* is the exact bootstrap standard error of a mean of 12 resampled units
    assert res.se == pytest.approx(math.sqrt(np.var(d) / d.size), rel=1e-12)
    assert not res.truncated and res.note == ""
    assert "Student t" in res.method and "11 df" in res.method
    # no seed and no number of draws changes it (only the stored draws differ)
    other = contrast_bootstrap(values, INTERACTION, units=labels, level=level, seed=9, draws=50)
    assert (other.low, other.high, other.pvalue, other.se) == (
        res.low,
        res.high,
        res.pvalue,
        res.se,
    )
    assert other.distribution.size == 50


@pytest.mark.parametrize("alpha", [0.001, 0.01, 0.05, 0.1, 0.3, 0.7])
def test_pvalue_rejects_exactly_when_the_interval_excludes_zero(alpha: float) -> None:
    rng = np.random.default_rng(11)
    for k in range(40):
        values = rng.random((10, 4))
        values[:, 3] += 0.04 * k / 40  # from no interaction to a clear one
        res = contrast_bootstrap(values, INTERACTION, level=1 - alpha)
        assert (res.pvalue <= alpha) == (res.low > 0 or res.high < 0), (k, res.pvalue)


def test_interval_is_cut_to_the_support_of_a_contrast_of_rates() -> None:
    # 3 binary units with contrasts +1, +1 and -1: the t interval (t_{2, .975} = 4.3)
    # reaches past the support [sum of negative weights, sum of positive] = [-1, 1]
    values = np.array([[0, 1.0], [0, 1.0], [1.0, 0]])
    res = contrast_bootstrap(values, [-1, 1])
    ci = sps.ttest_1samp(np.array([1.0, 1.0, -1.0]), 0.0).confidence_interval(0.95)
    assert ci.low < -1 and ci.high > 1
    assert (res.low, res.high) == (-1.0, 1.0) and res.truncated
    assert (
        res.note == "interval truncated to [-1, 1], the range of a contrast of cell means in [0, 1]"
    )
    # an interaction of rates: support [-2, 2]; a main effect over four cells: [-1, 1]
    rates = np.array([[1.0, 0, 0, 1.0], [0, 1.0, 1.0, 0], [1.0, 0, 0, 1.0]])
    res = contrast_bootstrap(rates, INTERACTION)
    assert (res.low, res.high) == (-2.0, 2.0) and res.truncated
    res = contrast_bootstrap(rates, [0.5, 0.5, -0.5, -0.5])
    assert res.low >= -1.0 and res.high <= 1.0
    # the percentile interval lies within the unit contrasts' range, never cut
    old = contrast_bootstrap(values, [-1, 1], small_clusters="none")
    assert -1.0 <= old.low <= old.high <= 1.0 and not old.truncated


def test_interval_of_other_outcomes_is_cut_to_the_range_the_observed_means_allow() -> None:
    # scores on 0-10, observed from 2 to 9: the contrast -1, +1 can reach +-(9 - 2) = 7
    values = np.array([[2.0, 9.0], [3.0, 9.0], [9.0, 2.0]])
    res = contrast_bootstrap(values, [-1, 1])
    assert (res.low, res.high) == (-7.0, 7.0) and res.truncated
    assert "[-7, 7], the range of the contrast the observed cell means allow" in res.note
    # weights 0.5 / -0.5 halve that range
    res = contrast_bootstrap(values, [-0.5, 0.5])
    assert (res.low, res.high) == (-3.5, 3.5)


def test_units_with_one_contrast_give_a_labelled_point_interval() -> None:
    values = np.tile([0.25, 0.75], (6, 1))
    res = contrast_bootstrap(values, [-1, 1])
    assert res.low == res.high == res.estimate == 0.5 and res.pvalue == 0.0
    assert "zero width: every unit has the same contrast" in res.note
    null = contrast_bootstrap(np.full((6, 2), 0.4), [-1, 1])
    assert null.estimate == 0.0 and null.pvalue == 1.0 and null.low == null.high == 0.0


def _clustered_interaction(
    rng: np.random.Generator, clusters: int, p0: float, icc: float, effect: float
) -> tuple[np.ndarray, np.ndarray, float]:
    """4 binary tasks a cluster in each cell of a 2 x 2; three cells take the cluster's
    rate (Beta, mean p0, ICC icc), the (hi, hi) cell closes a Beta(mean effect) share of
    the gap to 1: the true interaction is effect (1 - p0)."""
    scale = 1.0 / icc - 1.0
    pc = rng.beta(p0 * scale, (1 - p0) * scale, clusters)
    u = rng.beta(effect * 4.0, (1 - effect) * 4.0, clusters) if effect else np.zeros(clusters)
    labels = np.repeat(np.arange(clusters), 4)
    rates = np.column_stack([pc[labels]] * 3 + [(pc + (1 - pc) * u)[labels]])
    return (rng.random(rates.shape) < rates).astype(float), labels, effect * (1 - p0)


def test_coverage_at_ten_clusters_where_the_percentile_falls_short() -> None:
    # 2000 data sets over 9 designs (base rate 0.2/0.5/0.8, ICC 0.1/0.3, effect 0/0.3):
    # Monte Carlo SE 0.005 at 0.95. The percentile interval is a plug-in interval over 10
    # units: near P(|t_9| < 1.96 sqrt(9/10)) = 0.904 for near-normal unit contrasts.
    designs = [(p0, icc, e) for p0 in (0.2, 0.5, 0.8) for icc in (0.1, 0.3) for e in (0.0, 0.3)]
    rng = np.random.default_rng(2039)
    reps = 2000
    new = old = 0
    for k in range(reps):
        values, labels, truth = _clustered_interaction(rng, 10, *designs[k % len(designs)])
        res = contrast_bootstrap(values, INTERACTION, units=labels, draws=400, seed=k)
        new += res.low <= truth <= res.high
        prev = contrast_bootstrap(
            values, INTERACTION, units=labels, draws=400, seed=k, small_clusters="none"
        )
        old += prev.low <= truth <= prev.high
    mc_se = math.sqrt(0.95 * 0.05 / reps)
    plug_in = 2 * float(sps.t.cdf(1.959964 * math.sqrt(9 / 10), 9)) - 1
    assert abs(new / reps - 0.95) <= 0.02, new / reps  # the 2 points
    assert old / reps <= plug_in + 5 * mc_se < 0.95 - 2 * mc_se, old / reps


def test_resampled_contrast_keeps_the_seeds_percentile_method() -> None:
    rng = np.random.default_rng(5)
    values = rng.random((14, 4))
    labels = np.repeat(np.arange(7), 2)
    # drawn (max_enumerated below the 1,716 multisets of 7 units): the percentile
    # interval and centred p of contrast_bootstrap(small_clusters="none"), same draws
    drawn = resampled_contrast(values, INTERACTION, units=labels, draws=3000, max_enumerated=10)
    old = contrast_bootstrap(values, INTERACTION, units=labels, draws=3000, small_clusters="none")
    assert not drawn.exact and drawn.resamples == 3000
    assert (drawn.low, drawn.high, drawn.pvalue, drawn.se) == (
        old.low,
        old.high,
        old.pvalue,
        old.se,
    )
    assert "percentile" in drawn.method
    # enumerated: the exact percentile bootstrap, which the draws estimate
    exact = resampled_contrast(values, INTERACTION, units=labels)
    assert exact.exact and exact.mc_se == 0.0
    assert exact.pvalue == pytest.approx(drawn.pvalue, abs=4 * drawn.mc_se + 1 / 3001)
    # neither is the default t interval
    default = contrast_bootstrap(values, INTERACTION, units=labels)
    assert (default.low, default.high) != (drawn.low, drawn.high)
