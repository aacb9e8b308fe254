"""Resampling paraphrase clusters instead of tasks: paired_bootstrap and contrast_bootstrap.

The resampling unit of ``paired_bootstrap`` is whatever ``prompts`` labels; passing the
cluster of each row must equal a bootstrap over hand-aggregated cluster differences.
The calibration test is the acceptance point of issue 13: with strongly correlated
paraphrases the task-level interval under-covers and the cluster-level one does not
(bench/cluster_coverage.py prints the longer version).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from prereg.stats import contrast_bootstrap, paired_bootstrap

CLUSTERS, PARAPHRASES = 30, 4


def _paired_tasks(
    rng: np.random.Generator, icc: float, delta: float = 0.3, repeats: int = 1
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Control and treatment rows with a cluster effect on the paired difference.

    Task difference = delta + b_cluster + (e_t - e_c), var(b) = icc and
    var(e_t - e_c) = 1 - icc, so ``icc`` is the intraclass correlation of the task
    differences (one repeat). Returns control, treatment, task ids and cluster ids.
    """
    n_tasks = CLUSTERS * PARAPHRASES
    cluster_of_task = np.repeat(np.arange(CLUSTERS), PARAPHRASES)
    base = rng.normal(0.0, 1.0, CLUSTERS)[cluster_of_task] + rng.normal(0.0, 0.7, n_tasks)
    b = rng.normal(0.0, np.sqrt(icc), CLUSTERS)[cluster_of_task]
    task = np.repeat(np.arange(n_tasks), repeats)
    sd = np.sqrt((1.0 - icc) / 2.0)
    control = base[task] + rng.normal(0.0, sd, task.size)
    treatment = base[task] + delta + b[task] + rng.normal(0.0, sd, task.size)
    return control, treatment, task, cluster_of_task[task]


def test_cluster_labels_resample_clusters_each_counted_once() -> None:
    rng = np.random.default_rng(1)
    control, treatment, task, cluster = _paired_tasks(rng, 0.6, repeats=2)
    # the percentile interval (small_clusters="none") shows the resampling structure: it
    # is scipy's percentile bootstrap of the hand-aggregated cluster differences
    res = paired_bootstrap(control, treatment, cluster, draws=20_000, seed=2, small_clusters="none")
    # hand-aggregated: one difference per cluster, every cluster once
    diff = np.array(
        [treatment[cluster == k].mean() - control[cluster == k].mean() for k in range(CLUSTERS)]
    )
    assert res.n == CLUSTERS and res.n_obs == control.size
    assert res.estimate == pytest.approx(diff.mean())
    assert res.se**2 == pytest.approx(np.var(diff) / CLUSTERS, rel=0.05)  # exact bootstrap
    ref = sps.bootstrap((diff,), np.mean, n_resamples=20_000, method="percentile", random_state=rng)
    assert res.low == pytest.approx(ref.confidence_interval.low, abs=0.1 * res.se)
    assert res.high == pytest.approx(ref.confidence_interval.high, abs=0.1 * res.se)
    # the default interval over the same clusters: estimate -+ sqrt(n/(n-1)) t_{n-1} x the
    # draws' SD, i.e. scipy's one-sample t interval of the cluster differences (the draws'
    # variance within 2% at 20,000 draws: its half-width within 1%)
    default = paired_bootstrap(control, treatment, cluster, draws=20_000, seed=2)
    assert default.n == CLUSTERS and np.array_equal(default.distribution, res.distribution)
    t_ci = sps.ttest_1samp(diff, 0.0).confidence_interval(0.95)
    half = (t_ci.high - t_ci.low) / 2
    assert default.low == pytest.approx(t_ci.low, abs=0.02 * half)
    assert default.high == pytest.approx(t_ci.high, abs=0.02 * half)
    # the task-level bootstrap of the same rows is narrower (clusters ignored)
    tasks = paired_bootstrap(control, treatment, task, draws=20_000, seed=2)
    assert tasks.n == CLUSTERS * PARAPHRASES and tasks.estimate == pytest.approx(res.estimate)
    assert tasks.se < 0.8 * res.se


def test_contrast_bootstrap_units_agree_with_paired_bootstrap_clusters() -> None:
    rng = np.random.default_rng(3)
    control, treatment, task, cluster = _paired_tasks(rng, 0.5)
    values = np.column_stack([control, treatment])
    by_cluster = contrast_bootstrap(values, [-1, 1], units=cluster, draws=5000, seed=4)
    paired = paired_bootstrap(control, treatment, cluster, draws=5000, seed=4)
    assert by_cluster.n == paired.n == CLUSTERS
    assert by_cluster.estimate == pytest.approx(paired.estimate)
    # the same seed gives the same cluster resamples in both functions
    assert by_cluster.distribution == pytest.approx(paired.distribution)
    # so their percentile intervals are the same
    old = {"draws": 5000, "seed": 4, "small_clusters": "none"}
    old_contrast = contrast_bootstrap(values, [-1, 1], units=cluster, **old)  # type: ignore[arg-type]
    old_paired = paired_bootstrap(control, treatment, cluster, **old)  # type: ignore[arg-type]
    assert (old_contrast.low, old_contrast.high) == pytest.approx((old_paired.low, old_paired.high))
    # the default intervals are the same t interval: the contrast's with the bootstrap
    # variance computed exactly (scipy's t interval of the cluster contrasts), the paired
    # one's with the variance of its 5,000 draws (within 4%: half-width within 2%)
    d = by_cluster.unit_contrasts
    t_ci = sps.ttest_1samp(d, 0.0).confidence_interval(0.95)
    half = (t_ci.high - t_ci.low) / 2
    assert (by_cluster.low, by_cluster.high) == pytest.approx((t_ci.low, t_ci.high), abs=1e-12)
    assert (paired.low, paired.high) == pytest.approx((t_ci.low, t_ci.high), abs=0.04 * half)


def _coverage(icc: float, reps: int, draws: int) -> tuple[float, float, float]:
    """Coverage of the task bootstrap, the cluster bootstrap (default interval) and the
    cluster bootstrap's percentile interval (``small_clusters="none"``, read from the same
    draws: without run labels the draws do not depend on the interval)."""
    rng = np.random.default_rng(2024)
    delta = 0.3
    hits_task = hits_cluster = hits_percentile = 0
    for rep in range(reps):
        control, treatment, task, cluster = _paired_tasks(rng, icc, delta)
        t = paired_bootstrap(control, treatment, task, draws=draws, seed=rep)
        c = paired_bootstrap(control, treatment, cluster, draws=draws, seed=rep)
        hits_task += t.low <= delta <= t.high
        hits_cluster += c.low <= delta <= c.high
        low, high = np.quantile(c.distribution, [0.025, 0.975])
        hits_percentile += low <= delta <= high
    return hits_task / reps, hits_cluster / reps, hits_percentile / reps


@pytest.mark.slow
def test_correlated_paraphrases_task_bootstrap_under_covers_cluster_bootstrap_does_not() -> None:
    # 30 clusters x 4 paraphrases, ICC 0.6 of the paired difference: the task bootstrap
    # ignores a design effect of 1 + 3 x 0.6 = 2.8, so its 95% interval covers about
    # P(|t| < t_{119} / sqrt(2.8)) = 0.76. Resampling the 30 clusters is valid: the
    # cluster differences are normal here, so the default interval (scipy's t interval of
    # them, up to the draws' variance) covers 0.95 exactly; the percentile interval keeps
    # the small-sample shortfall of a plug-in interval with K = 30 units,
    # P(|t_29| < 1.96 sqrt(29/30)) = 0.936. 2000 replications: Monte Carlo SE 0.005.
    reps = 2000
    task, cluster, percentile = _coverage(icc=0.6, reps=reps, draws=1000)
    k = CLUSTERS
    small_sample = 2 * float(sps.t.cdf(1.959964 * np.sqrt((k - 1) / k), k - 1)) - 1
    mc_se = np.sqrt(0.95 * 0.05 / reps)
    assert task < 0.88
    assert abs(cluster - 0.95) <= 4 * mc_se
    assert abs(percentile - small_sample) <= 4 * mc_se
