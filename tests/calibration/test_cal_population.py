"""The simulated population carries the planning figures it was given."""

from __future__ import annotations

import math

import numpy as np
import pytest

from prereg.stats.calibration_model import aggregate, population, simulate, simulate_arms


@pytest.mark.parametrize(
    ("runs", "sigma_d", "base_rate"), [(1, 0.28, 0.5), (3, 0.35, 0.5), (3, 0.2, 0.3), (5, 0.5, 0.6)]
)
def test_sigma_d_is_the_planned_spread(runs: int, sigma_d: float, base_rate: float) -> None:
    pop = population(200, runs, sigma_d, base_rate=base_rate)
    data = simulate(pop, [0.0], 400, np.random.default_rng(1))
    diff = data.treatment[0.0].mean(axis=2) - data.control.mean(axis=2)
    assert float(np.mean(diff.std(axis=1, ddof=1))) == pytest.approx(sigma_d, rel=0.03)
    assert float(data.control.mean()) == pytest.approx(base_rate, abs=0.01)


def test_sigma_run_is_the_sd_of_a_runs_mean_rate() -> None:
    pop = population(50, 4, 0.3, sigma_run=0.05)
    rng = np.random.default_rng(2)
    theta = rng.beta(*pop.beta_params, 200_000)
    shifts = pop.run_shift_sd * rng.standard_normal(4000)
    means = np.array([np.clip(theta[:20_000] + u, 0, 1).mean() for u in shifts])
    assert float(means.std()) == pytest.approx(0.05, rel=0.04)
    assert pop.run_shift_sd > 0.05  # clipping at 0 and 1 needs a wider shift


def test_planned_effect_is_the_difference_of_mean_outcomes() -> None:
    pop = population(100, 3, 0.3, sigma_run=0.04)
    delta = pop.latent_effect("mean", 0.12)
    data = simulate(pop, [delta], 2000, np.random.default_rng(3))
    diff = data.treatment[delta].mean(axis=(1, 2)) - data.control.mean(axis=(1, 2))
    se = float(diff.std(ddof=1)) / math.sqrt(diff.size)
    assert abs(float(diff.mean()) - 0.12) < 4 * se
    maj = pop.truth("majority", delta)
    got = aggregate(data.treatment[delta], "majority").mean(1) - aggregate(
        data.control, "majority"
    ).mean(1)
    assert abs(float(got.mean()) - maj) < 4 * float(got.std(ddof=1)) / math.sqrt(got.size) + 2e-3


def test_the_null_is_exchangeable() -> None:
    pop = population(30, 3, 0.4, sigma_run=0.03)
    assert pop.truth("majority", 0.0) == 0.0 and pop.truth("mean", 0.0) == 0.0
    data = simulate(pop, [0.0], 3000, np.random.default_rng(4))
    ctl, trt = aggregate(data.control, "majority"), aggregate(data.treatment[0.0], "majority")
    b = ((ctl == 1) & (trt == 0)).sum()
    c = ((ctl == 0) & (trt == 1)).sum()
    assert abs(b - c) < 4 * math.sqrt(b + c)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"sigma_d": 0.8}, "sigma_d"),
        ({"sigma_d": 0.3, "icc": 0.05}, "icc"),
        ({"sigma_d": 0.3, "sigma_run": 0.6}, "sigma_run"),
        ({"sigma_d": 0.3, "base_rate": 1.0}, "base_rate"),
        ({"sigma_d": "0.3"}, "sigma_d"),
    ],
)
def test_impossible_figures_are_refused_by_name(kwargs: dict, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        population(20, 3, **kwargs)


def test_effects_beyond_the_population_are_refused() -> None:
    pop = population(20, 1, 0.3, base_rate=0.8)
    with pytest.raises(ValueError, match="beyond"):
        pop.latent_effect("mean", 0.25)
    assert pop.latent_effect("mean", -0.25) == pytest.approx(-0.25)


def test_the_arms_of_a_contrast_are_exchangeable_with_the_planned_spread() -> None:
    pop = population(200, 2, 0.35)
    arms = simulate_arms(pop, [(0.0, 0.0, 0.0)], 300, np.random.default_rng(5))[0]
    means = arms.mean(axis=-1)  # arms x data sets x prompts
    for i, j in ((0, 1), (0, 2), (1, 2)):
        spread = float(np.mean((means[j] - means[i]).std(axis=1, ddof=1)))
        assert spread == pytest.approx(0.35, rel=0.03)
    assert np.allclose(means.mean(axis=(1, 2)), 0.5, atol=0.01)
