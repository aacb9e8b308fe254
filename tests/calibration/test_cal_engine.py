"""The vectorised evaluators decide as the registered functions of prereg.stats do.

The calibration reduces each test to the statistic its function reads, or vectorises the
function over data sets; these tests apply the function itself to simulated data sets (or
to every outcome of a small grid) and require the same decision, interval or p value.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from prereg.stats import (
    beta_mixture_evalue,
    contrast_bootstrap,
    contrast_sign_flip,
    exact_permutation_test,
    mcnemar_exact,
    paired_bootstrap,
    sequential_monitor,
    sign_flip_test,
    tango_interval,
    tost_paired,
)
from prereg.stats.calibration import (
    MonitorPlan,
    PlannedTest,
    _contrast,
    _hypergeometric_p,
    _mcnemar_p,
    _monitor,
    _permutation,
    _Regions,
    _sign_flip,
    _tango_cover,
    _tost,
    bootstrap_intervals,
    contrast_intervals,
    contrast_pvalues,
)
from prereg.stats.calibration.contrast import _unit_contrasts
from prereg.stats.calibration_model import aggregate, population, simulate, simulate_arms
from prereg.stats.paired import _exact_upper_p

UNITS = np.array([0, 0, 1, 2, 2, 2, 3, 4, 4, 5, 6, 6], dtype=np.intp)


def _data(
    prompts: int, runs: int, sims: int, seed: int, sigma_run: float = 0.0, effect: float = 0.1
):
    pop = population(prompts, runs, 0.4, sigma_run=sigma_run)
    data = simulate(pop, [effect], sims, np.random.default_rng(seed))
    return pop, data.control, data.treatment[effect]


@pytest.mark.parametrize(
    ("runs", "units", "sigma_run"),
    [(1, None, 0.0), (3, None, 0.05), (3, UNITS, 0.05), (2, UNITS, 0.0)],
)
def test_bootstrap_intervals_are_the_functions(runs: int, units, sigma_run: float) -> None:
    """The vectorised intervals are ``paired_bootstrap``'s default ones (bootstrap-SE x
    Student t per part, bounded by the outcomes' range), data set by data set."""
    _, yc, yt = _data(12, runs, 25, seed=runs, sigma_run=sigma_run)
    levels = [0.95, 0.8]
    estimate, intervals = bootstrap_intervals(yc, yt, units, 400, 9, levels)
    codes = units if units is not None else np.arange(12)
    labels = np.repeat(codes, runs)
    run_ids = np.tile(np.arange(runs), 12)
    truncated = 0
    for k in range(yc.shape[0]):
        for (low, high), level in zip(intervals, levels, strict=True):
            res = paired_bootstrap(
                yc[k].astype(float).ravel(),
                yt[k].astype(float).ravel(),
                labels,
                run_ids,
                run_ids,
                draws=400,
                level=level,
                seed=9,
            )
            # a between-run variance at rounding noise (1e-18) gives run effects of 1e-9
            assert low[k] == pytest.approx(res.low, abs=1e-7)
            assert high[k] == pytest.approx(res.high, abs=1e-7)
            assert estimate[k] == pytest.approx(res.estimate, abs=1e-12)
            truncated += res.truncated
    # with 2 runs per arm (t_1 on the run part) the bound to [-1, 1] is exercised too
    assert truncated > 0 if runs == 2 else truncated == 0


@pytest.mark.parametrize("n", [1, 9, 26])
def test_mcnemar_p_and_tango_coverage_are_the_functions(n: int) -> None:
    pairs = [(b, c) for b in range(n + 1) for c in range(n + 1 - b)]
    b = np.array([p[0] for p in pairs])
    c = np.array([p[1] for p in pairs])
    pvals = _mcnemar_p(b, c)
    for truth in (-0.4, 0.0, 0.1234, 0.5):
        covered = _tango_cover(b, c, n, 0.9, truth)
        for k, (bb, cc) in enumerate(pairs):
            assert pvals[k] == mcnemar_exact(bb, cc).pvalue
            ci = tango_interval(cc, bb, n, level=0.9)
            assert covered[k] == (ci.low <= truth <= ci.high), (bb, cc, truth)


def test_exact_tost_decision_and_coverage_are_the_functions() -> None:
    """Equivalence is declared where ``tost_paired`` declares it; the interval covers a
    value where neither exact one-sided test rejects at it (the confidence set the printed
    interval inverts; docs/statistics.md on where the two differ)."""
    n, margin = 8, 0.3
    regions = _Regions()
    for b in range(n + 1):
        for c in range(n + 1 - b):
            p = max(_exact_upper_p(b, c, n, margin), _exact_upper_p(c, b, n, margin))
            assert regions.equivalence(n, margin, 0.05)[b, c] == (p <= 0.05)
            if (b + 2 * c) % 5 == 0:  # and the function itself, on a sample of outcomes
                d = np.array([1.0] * b + [-1.0] * c + [0.0] * (n - b - c))
                assert tost_paired(d, margin).equivalent == (p <= 0.05)
            for truth in (0.0, margin, -0.17):
                covered = (not regions.upper(n, truth, 0.05)[b, c]) and (
                    not regions.upper(n, -truth, 0.05)[c, b]
                )
                accepted = _exact_upper_p(b, c, n, truth) > 0.05 and (
                    _exact_upper_p(c, b, n, -truth) > 0.05
                )
                assert covered == accepted, (b, c, truth)


def test_t_tost_and_sign_flip_are_the_functions() -> None:
    pop, yc, yt = _data(12, 3, 30, seed=4)
    for units in (None, UNITS):
        plan = PlannedTest("s", "tost_paired", margin=0.2, aggregate="mean", units=units)
        out = _tost(plan, yc, yt, 0.05, pop)
        flip = PlannedTest("s", "sign_flip_test", aggregate="mean", units=units, sides="greater")
        flips = _sign_flip(flip, yc, yt, 0.05, pop)
        codes = units if units is not None else np.arange(12)
        for k in range(yc.shape[0]):
            ctl = np.bincount(codes, aggregate(yc[k : k + 1], "mean")[0]) / np.bincount(codes)
            trt = np.bincount(codes, aggregate(yt[k : k + 1], "mean")[0]) / np.bincount(codes)
            d = trt - ctl
            res = tost_paired(d, 0.2)
            assert out.reject[k] == res.equivalent
            if math.isfinite(res.low):
                assert out.covered[k] == (res.low <= 0.05 <= res.high)
            p = sign_flip_test(d, alternative="greater").pvalue
            assert flips.reject[k] == (p <= 0.05)


def test_permutation_test_is_the_function() -> None:
    # binary per-task values: exact (hypergeometric) as the function's enumeration
    rng = np.random.default_rng(2)
    for _ in range(40):
        x = (rng.random(6) < 0.6).astype(float)
        y = (rng.random(6) < 0.3).astype(float)
        for sides in ("two-sided", "greater", "less"):
            ref = exact_permutation_test(x, y, alternative=sides).pvalue
            got = _hypergeometric_p(
                np.array([int(x.sum())]), np.array([int(x.sum() + y.sum())]), 6, sides
            )[0]
            assert got == pytest.approx(ref, abs=1e-12)
    # non-binary values: 999 relabelings, p = (1 + #) / 1000, close to the exact p
    pop, yc, yt = _data(6, 3, 20, seed=6)
    plan = PlannedTest("s", "exact_permutation_test", aggregate="mean", alpha=0.2)
    relabel = np.random.default_rng(0).random((999, 12)).argpartition(5, axis=1)[:, :6]
    out = _permutation(plan, yc, yt, 0.0, pop, lambda g: relabel)
    for k in range(yc.shape[0]):
        ref = exact_permutation_test(
            aggregate(yt[k : k + 1], "mean")[0], aggregate(yc[k : k + 1], "mean")[0]
        ).pvalue
        if abs(ref - 0.2) > 0.05:  # away from the cut, Monte Carlo noise cannot flip it
            assert out.reject[k] == (ref <= 0.2)


def test_monitor_and_beta_mixture_are_the_functions() -> None:
    _, yc, yt = _data(60, 1, 40, seed=8, effect=0.3)
    monitor = MonitorPlan(threshold=8.0, min_prompts=10, prior=(1.0, 2.0), aggregate="first")
    crossed, direction, used = _monitor(monitor, yc, yt)
    for k in range(yc.shape[0]):
        res = sequential_monitor(
            yc[k, :, 0], yt[k, :, 0], threshold=8.0, min_prompts=10, prior=(1.0, 2.0)
        )
        assert crossed[k] == res.stopped
        assert used[k] == res.n
        if res.stopped:
            assert direction[k] == np.sign(res.c - res.b)
    b = np.arange(12)
    c = np.arange(12)[::-1]
    assert np.allclose(
        beta_mixture_evalue(b, c).evalue,
        [beta_mixture_evalue(int(x), int(y)).evalue for x, y in zip(b, c, strict=True)],
    )


@pytest.mark.parametrize(
    ("test", "units", "sides"),
    [
        ("paired_bootstrap", None, "two-sided"),
        ("paired_bootstrap", UNITS, "greater"),
        ("sign_flip_test", UNITS, "two-sided"),
    ],
)
def test_contrast_tests_are_the_functions(test: str, units, sides: str) -> None:
    """Decision, printed interval and the p a family adjusts, data set by data set, against
    ``contrast_bootstrap`` (its default interval, computed with its exact bootstrap
    variance) and ``contrast_sign_flip`` themselves."""
    pop = population(12, 2, 0.4)
    weights = (0.5, -0.5, -0.5, 0.5)
    arms = simulate_arms(pop, [(0.05, -0.05, -0.05, 0.05)], 20, np.random.default_rng(12))[0]
    plan = PlannedTest(
        "c", test, weights=weights, units=units, draws=300, seed=4, level=0.9, sides=sides
    )
    out = _contrast(plan, arms, 0.1)
    pvals = contrast_pvalues(plan, _unit_contrasts(plan, arms))
    for k in range(arms.shape[1]):
        values = arms[:, k].mean(axis=-1).T  # tasks x cells: every repeat averaged
        decision = 0.95 if sides == "two-sided" else 0.9
        boot = contrast_bootstrap(values, weights, units=units, draws=300, level=decision, seed=4)
        shown = contrast_bootstrap(values, weights, units=units, draws=300, level=0.9, seed=4)
        if test == "sign_flip_test":
            p = contrast_sign_flip(values, weights, sides, units=units, seed=4).pvalue
            rejects = p <= 0.05
        else:
            p = boot.pvalue
            rejects = boot.low > 0 if sides == "greater" else boot.low > 0 or boot.high < 0
        assert out.reject[k] == rejects
        assert out.covered[k] == (shown.low <= 0.1 <= shown.high)
        assert pvals[k] == pytest.approx(p, rel=1e-9, abs=1e-15)
        low, high = contrast_intervals(_unit_contrasts(plan, arms)[k : k + 1], 0.9, weights)
        assert (low[0], high[0]) == pytest.approx((shown.low, shown.high), abs=1e-12)
