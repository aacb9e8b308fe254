"""The paired prompt-and-run bootstrap: exact bootstrap moments, ANOVA, and coverage."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import statsmodels.formula.api as smf
from scipy import stats as sps
from scipy.special import expit
from statsmodels.stats.anova import anova_lm

from prereg.stats import paired_bootstrap


def _layout(p: int, r: int) -> tuple[np.ndarray, np.ndarray]:
    return np.repeat(np.arange(p), r), np.tile(np.arange(r), p)


def _clustered(
    rng: np.random.Generator, p: int, r: int, sigma_run: float, tau: float = 2.5, delta: float = 0.5
) -> tuple[np.ndarray, np.ndarray]:
    """Binary outcomes: logit = prompt effect + run effect (+ delta for treatment)."""
    alpha = -0.3 + tau * rng.standard_normal(p)
    uc = sigma_run * rng.standard_normal(r)
    ut = sigma_run * rng.standard_normal(r)
    yc = rng.random((p, r)) < expit(alpha[:, None] + uc[None, :])
    yt = rng.random((p, r)) < expit(alpha[:, None] + delta + ut[None, :])
    return yc.astype(float).ravel(), yt.astype(float).ravel()


def test_estimate_is_prompt_weighted() -> None:
    # prompt 0 has three rows, prompt 1 one row
    control = [0.0, 0.0, 1.0, 0.0]
    treatment = [1.0, 1.0, 1.0, 1.0]
    prompts = ["a", "a", "a", "b"]
    res = paired_bootstrap(control, treatment, prompts, draws=200)
    assert res.estimate == pytest.approx(((1 - 1 / 3) + 1.0) / 2)
    assert res.weighting == "prompt" and res.n == 2 and res.n_obs == 4
    # equal rows per prompt: the plain difference of means
    rng = np.random.default_rng(0)
    yc, yt = rng.random(30), rng.random(30)
    prompts3, _ = _layout(10, 3)
    assert paired_bootstrap(yc, yt, prompts3, draws=10).estimate == pytest.approx(
        yt.mean() - yc.mean()
    )


def test_prompt_only_bootstrap_moments_and_scipy() -> None:
    rng = np.random.default_rng(1)
    p, r = 80, 2
    yc, yt = _clustered(rng, p, r, 0.0)
    prompts, _ = _layout(p, r)
    res = paired_bootstrap(yc, yt, prompts, draws=20_000, seed=3)
    d = (yt - yc).reshape(p, r).mean(axis=1)
    ideal_var = float(np.sum((d - d.mean()) ** 2)) / p**2  # exact bootstrap variance
    assert res.se**2 == pytest.approx(ideal_var, rel=0.05)
    ref = sps.bootstrap(
        (d,),
        np.mean,
        n_resamples=20_000,
        method="percentile",
        random_state=np.random.default_rng(4),
    )
    assert res.low == pytest.approx(ref.confidence_interval.low, abs=0.1 * res.se)
    assert res.high == pytest.approx(ref.confidence_interval.high, abs=0.1 * res.se)


def _pigeonhole_variance(yt: np.ndarray, yc: np.ndarray) -> float:
    """Exact variance of the raw two-level bootstrap mean (one row per cell)."""
    p, rt = yt.shape
    rc = yc.shape[1]
    ev = np.eye(p) + np.ones((p, p)) * (1 - 1 / p)

    def ew(r: int) -> np.ndarray:
        return np.eye(r) + np.ones((r, r)) * (1 - 1 / r)

    ea2 = np.trace(yt @ ew(rt) @ yt.T @ ev) / (p * rt) ** 2
    eb2 = np.trace(yc @ ew(rc) @ yc.T @ ev) / (p * rc) ** 2
    eab = float(yt.sum(axis=1) @ ev @ yc.sum(axis=1)) / (p * p * rt * rc)
    mean = yt.mean() - yc.mean()
    return float(ea2 + eb2 - 2 * eab - mean**2)


def test_raw_two_level_bootstrap_has_the_exact_pigeonhole_variance() -> None:
    rng = np.random.default_rng(2)
    p, rt, rc = 40, 3, 4
    yt = rng.random((p, rt)) + rng.normal(0, 0.3, rt)[None, :]
    yc = rng.random((p, rc)) + rng.normal(0, 0.3, rc)[None, :]
    # long form needs aligned rows: use 12 rows per prompt (lcm of 3 and 4)
    rows = 12
    prompts = np.repeat(np.arange(p), rows)
    run_t = np.tile(np.repeat(np.arange(rt), rows // rt), p)
    run_c = np.tile(np.repeat(np.arange(rc), rows // rc), p)
    treat = yt[prompts, run_t]
    ctrl = yc[prompts, run_c]
    res = paired_bootstrap(
        ctrl, treat, prompts, run_c, run_t, draws=20_000, seed=5, run_resampling="raw"
    )
    assert res.estimate == pytest.approx(yt.mean() - yc.mean())
    assert res.se**2 == pytest.approx(_pigeonhole_variance(yt, yc), rel=0.05)
    assert res.runs_control == rc and res.runs_treatment == rt


def _anova_sigma_run2(y: np.ndarray, prompts: np.ndarray, runs: np.ndarray) -> float:
    """Between-run variance from statsmodels' two-way ANOVA / OLS additive fit."""
    df = pd.DataFrame({"y": y, "p": prompts, "r": runs})
    fit = smf.ols("y ~ C(p) + C(r)", data=df).fit()
    params = fit.params
    r_levels = sorted(df["r"].unique())
    effects = np.array([0.0] + [params[f"C(r)[T.{lvl}]"] for lvl in r_levels[1:]])
    effects -= effects.mean()
    inv_p = float(np.mean(1.0 / df.groupby("r")["p"].nunique().to_numpy()))
    sc2 = float((effects**2).sum()) / (len(r_levels) - 1)
    if len(df) == df["p"].nunique() * len(r_levels):  # complete: check against anova_lm
        table = anova_lm(fit)
        ms_run = table.loc["C(r)", "mean_sq"]
        assert sc2 == pytest.approx(ms_run / df["p"].nunique(), rel=1e-9)
    return max(0.0, sc2 - fit.mse_resid * inv_p)


def test_corrected_bootstrap_matches_anova_components() -> None:
    rng = np.random.default_rng(6)
    p, r = 50, 5
    yc, yt = _clustered(rng, p, r, 0.6)
    prompts, runs = _layout(p, r)
    res = paired_bootstrap(yc, yt, prompts, runs, runs, draws=20_000, seed=7)
    s2c = _anova_sigma_run2(yc, prompts, runs)
    s2t = _anova_sigma_run2(yt, prompts, runs)
    assert res.sigma_run_control == pytest.approx(math.sqrt(s2c), rel=1e-8, abs=1e-12)
    assert res.sigma_run_treatment == pytest.approx(math.sqrt(s2t), rel=1e-8, abs=1e-12)
    d = (yt - yc).reshape(p, r).mean(axis=1)
    # the default small-runs calibration multiplies each arm's run part by t_{R-1} / z
    k = sps.t.ppf(0.975, r - 1) / sps.norm.ppf(0.975)
    expected = float(np.sum((d - d.mean()) ** 2)) / p**2 + k**2 * (s2c / r + s2t / r)
    assert res.se**2 == pytest.approx(expected, rel=0.05)
    plain = paired_bootstrap(yc, yt, prompts, runs, runs, draws=20_000, seed=7, small_runs="none")
    expected = float(np.sum((d - d.mean()) ** 2)) / p**2 + s2c / r + s2t / r
    assert plain.se**2 == pytest.approx(expected, rel=0.05)


def test_corrected_bootstrap_with_missing_cells_uses_least_squares_effects() -> None:
    rng = np.random.default_rng(8)
    p, r = 40, 4
    yc, yt = _clustered(rng, p, r, 0.6)
    prompts, runs = _layout(p, r)
    keep = np.ones(p * r, dtype=bool)
    keep[[1, 6, 23, 50, 77, 102]] = False  # a few failed (prompt, run) cells
    res = paired_bootstrap(
        yc[keep], yt[keep], prompts[keep], runs[keep], runs[keep], draws=2000, seed=1
    )
    s2 = _anova_sigma_run2(yc[keep], prompts[keep], runs[keep])
    assert res.sigma_run_control == pytest.approx(math.sqrt(s2), rel=1e-7, abs=1e-10)
    raw = paired_bootstrap(
        yc[keep],
        yt[keep],
        prompts[keep],
        runs[keep],
        runs[keep],
        draws=2000,
        seed=1,
        run_resampling="raw",
    )
    assert np.all(np.isfinite(raw.distribution)) and raw.low < raw.estimate < raw.high


def test_seeded_and_reproducible() -> None:
    rng = np.random.default_rng(9)
    yc, yt = _clustered(rng, 30, 3, 0.3)
    prompts, runs = _layout(30, 3)
    a = paired_bootstrap(yc, yt, prompts, runs, runs, draws=500, seed=11)
    b = paired_bootstrap(yc, yt, prompts, runs, runs, draws=500, seed=11)
    c = paired_bootstrap(yc, yt, prompts, runs, runs, draws=500, seed=12)
    assert np.array_equal(a.distribution, b.distribution) and (a.low, a.high) == (b.low, b.high)
    assert not np.array_equal(a.distribution, c.distribution)


def test_pvalue_inverts_the_percentile_interval() -> None:
    rng = np.random.default_rng(10)
    yc, yt = _clustered(rng, 60, 2, 0.0, delta=1.0)
    prompts, _ = _layout(60, 2)
    res = paired_bootstrap(yc, yt, prompts, draws=4000, seed=1, level=0.95)
    assert (res.pvalue <= 0.05) == (res.low > 0 or res.high < 0)
    null = paired_bootstrap(yc, yc, prompts, draws=100)
    assert null.pvalue == 1.0 and null.low == null.high == 0.0


def test_bad_input() -> None:
    with pytest.raises(ValueError):
        paired_bootstrap([1, 0], [1], [0, 1])
    with pytest.raises(ValueError):
        paired_bootstrap([1, 0], [1, 0], [0])
    with pytest.raises(ValueError):
        paired_bootstrap([1, math.nan], [1, 0], [0, 1])
    with pytest.raises(ValueError):
        paired_bootstrap([1, 0], [1, 0], [0, 1], level=1.5)
    with pytest.raises(ValueError):
        paired_bootstrap([1, 0], [1, 0], [0, 1], run_resampling="both")  # type: ignore[arg-type]


def test_coverage_with_a_between_run_component() -> None:
    # clustered binary data, 60 prompts x 6 runs per arm, run SD 0.5 on the logit scale;
    # the estimand averages over prompts and runs (computed by a large simulation)
    p, r, sigma_run, reps = 60, 6, 0.5, 250
    big = np.random.default_rng(99)
    a = -0.3 + 2.5 * big.standard_normal(1_000_000)
    truth = float(
        np.mean(
            expit(a + 0.5 + sigma_run * big.standard_normal(a.size))
            - expit(a + sigma_run * big.standard_normal(a.size))
        )
    )
    rng = np.random.default_rng(2024)
    prompts, runs = _layout(p, r)
    two_level = prompt_only = 0
    for k in range(reps):
        yc, yt = _clustered(rng, p, r, sigma_run)
        res = paired_bootstrap(yc, yt, prompts, runs, runs, draws=800, seed=k)
        two_level += res.low <= truth <= res.high
        res = paired_bootstrap(yc, yt, prompts, draws=800, seed=k)
        prompt_only += res.low <= truth <= res.high
    cov2, cov1 = two_level / reps, prompt_only / reps
    assert 0.89 <= cov2 <= 0.99  # nominal 0.95; sampling SD about 0.014
    assert cov1 <= 0.86 and cov1 <= cov2 - 0.07  # the prompt-only bootstrap under-covers
