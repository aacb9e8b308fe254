"""The simulation against exact references: size, coverage and power by enumeration.

Without a run component the per-task aggregates of a simulated data set are independent
across tasks, so the discordant counts (b, c) are trinomial with rates computed here by
quadrature from the population, and every figure the calibration simulates has an exact
value: a sum over (b, c) of its probability times the decision. The simulated figure must
match it within Monte Carlo error (the seeds are fixed, so these tests are deterministic).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from prereg.stats import mcnemar_exact_power, tango_interval
from prereg.stats.calibration import PlannedTest, calibrate
from prereg.stats.calibration_model import population
from tests.calibration.helpers import discordance, mcnemar_rejects, trinomial

SIMS = 4000


def _row(result, label: str, quantity: str, scenario: str):
    return next(
        r
        for r in result.rows
        if r.label == label and r.quantity == quantity and r.scenario == scenario
    )


def _exact_mcnemar(n: int, p10: float, p01: float, alpha: float) -> float:
    """P(reject) of the two-sided exact McNemar test: a sum over the discordant count m ~
    Bin(n, p10 + p01) of the conditional rejection probability, b | m ~ Bin(m, p10 / psi)."""
    psi = p10 + p01
    total = 0.0
    for m in range(n + 1):
        pm = sps.binom.pmf(m, n, psi)
        if pm < 1e-15:
            continue
        ks = np.arange(m + 1)
        reject = np.array([mcnemar_rejects(int(k), int(m - k), alpha) for k in ks])
        total += pm * float(np.sum(sps.binom.pmf(ks, m, p10 / psi) * reject))
    return total


@pytest.mark.parametrize(
    ("n", "runs", "sigma_d", "aggregate"),
    [(58, 1, 0.6, "majority"), (24, 3, 0.45, "majority"), (40, 2, 0.5, "any")],
)
def test_mcnemar_size_matches_enumeration(
    n: int, runs: int, sigma_d: float, aggregate: str
) -> None:
    pop = population(n, runs, sigma_d)
    plan = PlannedTest("primary", "mcnemar_exact", aggregate=aggregate)
    result = calibrate(pop, [plan], effect=0.1, sims=SIMS, seed=3)
    row = _row(result, "primary", "type I error", "null")
    p10, p01 = discordance(pop, aggregate, 0.0)
    assert p10 == pytest.approx(p01)
    exact = _exact_mcnemar(n, p10, p01, 0.05)
    se = math.sqrt(exact * (1 - exact) / SIMS)
    assert abs(row.estimate - exact) <= 3.5 * se + 1e-12, (row.estimate, exact, se)
    assert 0.01 < exact < 0.05  # a size worth checking: not vanishing, within alpha


def test_mcnemar_power_matches_enumeration_and_the_stats_figure() -> None:
    n, runs = 40, 1
    pop = population(n, runs, 0.5)
    plan = PlannedTest("primary", "mcnemar_exact")
    result = calibrate(pop, [plan], effect=0.2, sims=SIMS, seed=5)
    row = _row(result, "primary", "power", "planned effect")
    delta = result.effects["planned effect"]
    p10, p01 = discordance(pop, "majority", delta)
    assert p01 - p10 == pytest.approx(0.2, abs=1e-9)  # runs = 1: the mean moves by delta
    exact = _exact_mcnemar(n, p10, p01, 0.05)
    # the calibration counts rejections in the planned direction; the other way is negligible
    assert exact == pytest.approx(mcnemar_exact_power(n, p01, p10), abs=2e-3)
    se = math.sqrt(exact * (1 - exact) / SIMS)
    assert abs(row.estimate - exact) <= 3.5 * se, (row.estimate, exact, se)
    assert 0.3 < exact < 0.95


@pytest.mark.parametrize("scenario", ["null", "planned effect"])
def test_tango_coverage_matches_enumeration(scenario: str) -> None:
    n = 30
    pop = population(n, 3, 0.4)
    plan = PlannedTest("primary", "mcnemar_exact")
    result = calibrate(pop, [plan], effect=0.15, sims=SIMS, seed=7)
    row = _row(result, "primary", "coverage", scenario)
    delta = result.effects[scenario]
    p10, p01 = discordance(pop, "majority", delta)
    truth = p01 - p10  # treatment minus control of the majority aggregate
    assert row.truth == pytest.approx(truth, abs=1e-9)
    prob = trinomial(n, p10, p01)
    exact = 0.0
    for b in range(n + 1):
        for c in range(n + 1 - b):
            if prob[b, c] < 1e-14:
                continue
            ci = tango_interval(c, b, n, level=0.95)
            exact += prob[b, c] * (ci.low <= truth <= ci.high)
    se = math.sqrt(exact * (1 - exact) / SIMS)
    assert abs(row.estimate - exact) <= 3.5 * se, (row.estimate, exact, se)


def _exact_t_interval(b: int, c: int, n: int, level: float) -> tuple[float, float]:
    """The default paired bootstrap interval with infinitely many resamples: the mean of n
    resampled differences has variance (plug-in variance) / n, so estimate -+ sqrt(n/(n-1))
    t_{n-1} SE* is scipy's one-sample t interval of the n differences (b at -1, c at +1,
    the rest 0), intersected with [-1, 1]. Without spread (every difference equal) it is
    the point estimate."""
    d = np.array([-1.0] * b + [1.0] * c + [0.0] * (n - b - c))
    if np.ptp(d) == 0.0:
        return float(d[0]), float(d[0])
    ci = sps.ttest_1samp(d, 0.0).confidence_interval(level)
    return max(float(ci.low), -1.0), min(float(ci.high), 1.0)


def test_bootstrap_coverage_matches_the_exact_bootstrap() -> None:
    """One run per arm, the unit the task: the default interval's coverage at an effect
    against the exact bootstrap (infinitely many resamples: scipy's t interval) summed
    over (b, c). 4,000 resamples estimate the bootstrap variance within about 2% (its
    half-width within 1%), which moves coverage only where the truth lies within that of
    an end; hence a little slack beside the Monte Carlo error."""
    n = 12
    pop = population(n, 1, 0.55)
    plan = PlannedTest("primary", "paired_bootstrap", draws=10_000, seed=1)
    result = calibrate(pop, [plan], effect=0.21, sims=SIMS, seed=11, draws=4000)
    row = _row(result, "primary", "coverage", "planned effect")
    delta = result.effects["planned effect"]
    p10, p01 = discordance(pop, "first", delta)
    truth = p01 - p10
    assert row.truth == pytest.approx(truth, abs=1e-9)
    prob = trinomial(n, p10, p01)
    exact = 0.0
    for b in range(n + 1):
        for c in range(n + 1 - b):
            if prob[b, c] < 1e-14:
                continue
            low, high = _exact_t_interval(b, c, n, 0.95)
            exact += prob[b, c] * (low <= truth <= high)
    se = math.sqrt(exact * (1 - exact) / SIMS)
    assert abs(row.estimate - exact) <= 3.5 * se + 0.01, (row.estimate, exact, se)
