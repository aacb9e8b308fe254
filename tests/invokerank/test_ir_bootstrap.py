"""The calibrated path (prompt-and-run bootstrap of the plug-in score) against hand
counts and the binomial standard error; its coverage is measured in
bench/invokerank_coverage.py, not here."""

from __future__ import annotations

import importlib
import math

import numpy as np
import pytest
from scipy import stats as sps

ir = importlib.import_module("prereg.stats.invokerank")


def test_plug_in_score_is_the_share_of_runs_reaching_the_last_stage() -> None:
    runs = np.array([2, 2, 2, 3, 3])
    reached = np.array([2, 0, 1, 3, 1])
    cell = np.array([0, 0, 0, 1, 1])
    got = ir.bootstrap_score(runs, reached, cell, resamples=200, weights=[1, 3])
    np.testing.assert_allclose(got.q, [3 / 6, 4 / 6])
    assert got.rollup == pytest.approx(0.25 * 3 / 6 + 0.75 * 4 / 6)
    assert got.sessions == 1 and got.resamples == 200


def test_independent_runs_give_the_binomial_interval() -> None:
    # 400 prompts of one run each, 120 reached: the bootstrap distribution of the share is
    # close to normal with the binomial standard error
    n, y = 400, 120
    reached = np.r_[np.ones(y), np.zeros(n - y)]
    got = ir.bootstrap_score(np.ones(n), reached, np.zeros(n, int), resamples=4000, seed=3)
    p = y / n
    se = math.sqrt(p * (1 - p) / n)
    z = sps.norm.ppf(0.95)
    assert got.q_low[0.9][0] == pytest.approx(p - z * se, abs=0.006)
    assert got.q_high[0.9][0] == pytest.approx(p + z * se, abs=0.006)
    assert got.rollup_low[0.95] < got.rollup_low[0.9] < p < got.rollup_high[0.9]


def test_prompts_are_the_unit_and_sessions_widen_the_interval() -> None:
    rng = np.random.default_rng(0)
    prompts = 60
    rate = rng.beta(0.3, 0.4, prompts)  # strongly heterogeneous prompts
    reached = rng.binomial(4, rate)
    # four repeats as one row per prompt, or as four rows of one run each with the prompt
    # named: the same resampling unit, so the same interval
    one = ir.bootstrap_score(np.full(prompts, 4), reached, np.zeros(prompts, int), seed=5)
    rows = np.repeat(np.arange(prompts), 4)
    split = np.concatenate([[1] * r + [0] * (4 - r) for r in reached])
    four = ir.bootstrap_score(
        np.ones(4 * prompts), split, np.zeros(4 * prompts, int), prompt=rows, seed=5
    )
    assert four.q_low[0.9][0] == pytest.approx(one.q_low[0.9][0], abs=1e-12)
    # naming no prompt treats the 240 runs as independent: too narrow
    naive = ir.bootstrap_score(np.ones(4 * prompts), split, np.zeros(4 * prompts, int), seed=5)
    assert naive.q_high[0.9][0] - naive.q_low[0.9][0] < 0.8 * (
        one.q_high[0.9][0] - one.q_low[0.9][0]
    )
    # three sessions that differ (the small-sample rule's minimum of sessions): the
    # session part widens the interval
    sess = np.repeat(np.arange(3), prompts)
    both = np.r_[reached, np.minimum(4, reached + 2), np.maximum(0, reached - 2)]
    with_s = ir.bootstrap_score(
        np.full(3 * prompts, 4),
        both,
        np.zeros(3 * prompts, int),
        prompt=np.tile(np.arange(prompts), 3),
        session=sess,
        seed=5,
    )
    without = ir.bootstrap_score(
        np.full(3 * prompts, 4),
        both,
        np.zeros(3 * prompts, int),
        prompt=np.tile(np.arange(prompts), 3),
        seed=5,
    )
    assert with_s.sessions == 3 and "sessions" in with_s.method
    assert (with_s.q_high[0.9][0] - with_s.q_low[0.9][0]) > 1.5 * (
        without.q_high[0.9][0] - without.q_low[0.9][0]
    )


def test_expanded_percentile_tail_by_hand() -> None:
    # Hesterberg's expansion at n = 25: Phi(sqrt(25/24) t_24(0.05))
    expected = sps.norm.cdf(math.sqrt(25 / 24) * sps.t.ppf(0.05, 24))
    assert ir._expanded(0.90, 25, upper=False) == pytest.approx(expected)
    assert ir._expanded(0.90, 25, upper=True) == pytest.approx(1 - expected)
    assert expected < 0.05


def test_per_intent_interval_is_jeffreys_on_the_bootstrap_s_effective_counts() -> None:
    # intent 0: 40 prompts of 4 runs, each prompt all reached (12) or none (28): the runs of
    # a prompt are one observation, so the bootstrap's design effect is about 4 and the
    # interval about Jeffreys on 12 of 40 prompts; intent 1: nothing reached, where the
    # bootstrap has no variance and each prompt counts once (Jeffreys on 0 of 10, lower 0)
    runs = np.full(50, 4)
    reached = np.r_[np.full(12, 4), np.zeros(28), np.zeros(10)]
    cell = np.r_[np.zeros(40, int), np.ones(10, int)]
    got = ir.bootstrap_score(runs, reached, cell, resamples=4000, seed=1)
    assert got.effective_runs[0] == pytest.approx(40, rel=0.08)
    assert got.effective_runs[1] == 10
    for lv in (0.90, 0.95):
        tail = (1 - lv) / 2
        assert got.q_low[lv][0] == pytest.approx(sps.beta.ppf(tail, 12.5, 28.5), abs=0.01)
        assert got.q_high[lv][0] == pytest.approx(sps.beta.ppf(1 - tail, 12.5, 28.5), abs=0.01)
        assert got.q_low[lv][1] == 0.0
        assert got.q_high[lv][1] == pytest.approx(sps.beta.ppf(1 - tail, 0.5, 10.5))
    assert "Jeffreys on effective counts" in got.intent_method
    # independent runs: no design effect below 1 is credited (n_eff at most the runs)
    flat = ir.bootstrap_score(np.ones(300), np.r_[np.ones(90), np.zeros(210)], np.zeros(300, int))
    assert 250 < flat.effective_runs[0] <= 300


def test_crossed_sessions_interaction_term_by_hand() -> None:
    # two prompts x two sessions, one run each, only prompt 0 in session 0 reached: q = 1/4,
    # z = y - q n = [[.75, -.25], [-.25, -.25]], double-centred residuals +-.25, so the
    # interaction term is 4 x .0625 / 4^2 = 1/64
    got = ir._interaction(
        np.ones(4),
        np.array([1.0, 0.0, 0.0, 0.0]),
        np.zeros(4, int),
        np.array([0, 0, 1, 1]),
        np.array([0, 1, 0, 1]),
        np.array([0.25]),
    )
    assert got[0] == pytest.approx(1 / 64)
    # the shrinkage leaves the draws' centre and removes twice the term from their variance
    rng = np.random.default_rng(0)
    draws = 0.25 + rng.normal(0, 0.2, (4000, 1))
    boot, roll = ir._uncross(draws, draws[:, 0], np.array([0.25]), np.array([1.0]), got)
    expected = np.var(draws, ddof=1) - 2 / 64
    assert np.var(boot, ddof=1) == pytest.approx(expected, rel=1e-9)
    assert np.var(roll, ddof=1) == pytest.approx(expected, rel=1e-9)
