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
    res = paired_bootstrap(control, treatment, cluster, draws=20_000, seed=2)
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
    assert (by_cluster.low, by_cluster.high) == pytest.approx((paired.low, paired.high))


def _coverage(icc: float, reps: int, draws: int) -> tuple[float, float]:
    rng = np.random.default_rng(2024)
    delta = 0.3
    hits_task = hits_cluster = 0
    for rep in range(reps):
        control, treatment, task, cluster = _paired_tasks(rng, icc, delta)
        t = paired_bootstrap(control, treatment, task, draws=draws, seed=rep)
        c = paired_bootstrap(control, treatment, cluster, draws=draws, seed=rep)
        hits_task += t.low <= delta <= t.high
        hits_cluster += c.low <= delta <= c.high
    return hits_task / reps, hits_cluster / reps


@pytest.mark.slow
def test_correlated_paraphrases_task_bootstrap_under_covers_cluster_bootstrap_does_not() -> None:
    # 30 clusters x 4 paraphrases, ICC 0.6 of the paired difference: the task bootstrap
    # ignores a design effect of 1 + 3 x 0.6 = 2.8, so its 95% interval covers about
    # P(|Z| < 1.96 / sqrt(2.8)) = 0.76. Resampling the 30 clusters is valid; what is
    # left is the small-sample shortfall of any plug-in interval with K = 30 units,
    # P(|t_29| < 1.96 sqrt(29/30)) = 0.936. 2000 replications: Monte Carlo SE 0.005.
    reps = 2000
    task, cluster = _coverage(icc=0.6, reps=reps, draws=1000)
    k = CLUSTERS
    small_sample = 2 * float(sps.t.cdf(1.959964 * np.sqrt((k - 1) / k), k - 1)) - 1
    mc_se = np.sqrt(0.95 * 0.05 / reps)
    assert task < 0.88
    assert cluster >= 0.91
    assert abs(cluster - small_sample) <= 4 * mc_se
