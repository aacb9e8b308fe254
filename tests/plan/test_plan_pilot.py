"""Pilot estimators of `reports/planning/pilot.py` on constructed outcome matrices and records."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest

from prereg.core.errors import IntegrityError
from prereg.reports.planning.pilot import (
    PilotData,
    RepeatICC,
    between_run,
    discordance,
    estimate_pilot,
    paired_sigma_d,
    pilot_data,
    repeat_icc,
)
from prereg.stats import icc_binary

DIGEST = "sha256:" + "a" * 64


def binary(rng: np.random.Generator, p: Any) -> np.ndarray:
    return (rng.random(np.shape(p)) < p).astype(float)


# ---- sigma_d ---------------------------------------------------------------------------------


def test_sigma_d_is_sd_of_per_prompt_mean_differences() -> None:
    c = np.array([[1, 1, 0], [0, 0, 0], [1, 1, 1], [0, 1, 0], [1, 0, 1]], float)
    t = np.array([[1, 1, 1], [1, 0, 0], [1, 1, 1], [1, 1, 0], [0, 0, 1]], float)
    est = paired_sigma_d(c, t)
    d = t.mean(axis=1) - c.mean(axis=1)
    assert est.sigma_d == pytest.approx(np.std(d, ddof=1))
    assert est.mean_difference == pytest.approx(d.mean())
    assert est.prompts == 5 and est.repeats == pytest.approx(3)
    omega2 = np.mean(np.var(t - c, axis=1, ddof=1))
    assert est.omega2 == pytest.approx(omega2)
    assert est.tau2 == pytest.approx(max(0.0, est.sigma_d**2 - omega2 / 3))
    assert est.at(3) == pytest.approx(est.sigma_d)  # the pilot's own K: as observed
    assert est.at(1) == pytest.approx(math.sqrt(est.sigma_d**2 + omega2 * (1 - 1 / 3)))


def test_sigma_d_drops_prompts_missing_an_arm_and_handles_one_repeat() -> None:
    c = np.array([[1], [0], [np.nan], [1]])
    t = np.array([[1], [1], [1], [0]])
    est = paired_sigma_d(c, t)
    assert est.prompts == 3
    assert est.sigma_d == pytest.approx(np.std([0, 1, -1], ddof=1))
    assert math.isnan(est.omega2) and est.at(5) == est.sigma_d  # not separable
    assert math.isnan(paired_sigma_d([[1]], [[0]]).sigma_d)


def test_sigma_d_rescales_to_other_repeats() -> None:
    # a large pilot with 4 repeats predicts the spread of single-repeat differences
    rng = np.random.default_rng(1)
    n = 4000
    pc = rng.uniform(0.1, 0.9, n)
    pt = np.clip(pc + rng.normal(0.05, 0.15, n), 0, 1)
    c = binary(rng, np.repeat(pc[:, None], 4, axis=1))
    t = binary(rng, np.repeat(pt[:, None], 4, axis=1))
    est = paired_sigma_d(c, t)
    single = np.std(t[:, 0] - c[:, 0], ddof=1)
    assert est.at(1) == pytest.approx(single, rel=0.03)
    assert est.at(1) > est.sigma_d > est.at(16)


# ---- ICC -------------------------------------------------------------------------------------


def test_icc_pooled_is_icc_binary_over_arm_and_prompt_groups() -> None:
    rng = np.random.default_rng(2)
    p = rng.uniform(0, 1, 30)
    mats = {
        "a": binary(rng, np.repeat(p[:, None], 3, 1)),
        "b": binary(rng, np.repeat(p[:, None], 3, 1)),
    }
    est = repeat_icc(mats)
    y = np.concatenate([mats["a"].ravel(), mats["b"].ravel()])
    g = np.concatenate([np.repeat(np.arange(30), 3), 30 + np.repeat(np.arange(30), 3)])
    assert est.rho == pytest.approx(icc_binary(y, g))
    assert est.by_arm["a"] == pytest.approx(
        icc_binary(mats["a"].ravel(), np.repeat(np.arange(30), 3))
    )
    assert est.repeats == 3
    assert est.design_effect == pytest.approx(1 + 2 * est.rho)
    assert est.effective_runs == pytest.approx(3 / (1 + 2 * est.rho))


def test_icc_extremes() -> None:
    # repeats identical within a prompt: K repeats are worth one run
    same = np.repeat(np.array([[1], [0], [1], [0], [1]], float), 4, axis=1)
    est = repeat_icc({"a": same})
    assert est.rho == 1.0 and est.effective_runs == pytest.approx(1.0)
    # independent repeats: worth about K runs
    rng = np.random.default_rng(3)
    est = repeat_icc({"a": binary(rng, np.full((2000, 2), 0.5))})
    assert est.rho < 0.05 and est.effective(2) > 1.9
    # one repeat: not estimable
    assert math.isnan(repeat_icc({"a": np.array([[1.0], [0.0]])}).rho)


def test_effective_runs_matches_invokerank_7_4() -> None:
    # "at the pooled rho_S a prompt run twice carries the information of about 1.1
    # independent runs" (rho_S 0.81 and 0.87)
    for rho in (0.81, 0.87):
        icc = RepeatICC(
            rho=rho, by_arm={}, repeats=2, design_effect=1 + rho, effective_runs=2 / (1 + rho)
        )
        assert round(icc.effective(2), 1) == 1.1
        assert icc.effective(1) == pytest.approx(1.0)


# ---- between-run variance --------------------------------------------------------------------


def test_between_run_moments_by_hand() -> None:
    m = np.array([[1, 1, 0, 1], [0, 1, 0, 0], [1, 1, 1, 0]], float)  # 3 prompts x 4 runs
    br = between_run({"a": m}, permutations=99, seed=0)
    arm = br.by_arm[0]
    rates = m.mean(axis=0)
    s2 = np.var(rates, ddof=1)
    w = np.sum(np.var(m, axis=1, ddof=1)) / 9
    assert arm.run_rates == pytest.approx(list(rates))
    assert arm.observed_sd == pytest.approx(math.sqrt(s2))
    assert arm.within_sd == pytest.approx(math.sqrt(w))
    assert arm.variance_ratio == pytest.approx(s2 / w)
    assert arm.sigma_run == pytest.approx(math.sqrt(max(0.0, (s2 - w) / (1 - 1 / 3))))
    assert br.sigma_run == pytest.approx(arm.sigma_run)


def test_permutation_pvalue_matches_exact_enumeration() -> None:
    # 3 prompts x 3 runs: all 6^3 within-prompt permutations enumerated
    m = np.array([[1, 1, 0], [1, 1, 0], [1, 0, 0]], float)
    observed = np.var(m.mean(axis=0), ddof=1)
    perms = list(itertools.permutations(range(3)))
    stats = [
        np.var(np.stack([m[i, list(p)] for i, p in enumerate(combo)]).mean(axis=0), ddof=1)
        for combo in itertools.product(perms, repeat=3)
    ]
    exact = np.mean(np.array(stats) >= observed - 1e-12)
    br = between_run({"a": m}, permutations=20000, seed=4)
    assert br.by_arm[0].pvalue == pytest.approx(exact, abs=0.01)


def simulate_runs(
    rng: np.random.Generator, prompts: int, runs: int, sigma_run: float
) -> np.ndarray:
    p = rng.uniform(0.2, 0.8, prompts)
    u = rng.normal(0.0, sigma_run, runs)
    return binary(rng, np.clip(p[:, None] + u[None, :], 0, 1))


def test_moment_estimator_unbiased_and_test_calibrated_under_null() -> None:
    rng = np.random.default_rng(5)
    excess, pvalues = [], []
    for _ in range(200):
        m = simulate_runs(rng, 40, 5, 0.0)
        arm = between_run({"a": m}, permutations=99, seed=int(rng.integers(1 << 31))).by_arm[0]
        excess.append(arm.observed_sd**2 - arm.within_sd**2)
        pvalues.append(arm.pvalue)
    within = arm.within_sd**2
    assert abs(np.mean(excess)) < 0.15 * within  # E[s^2 - W] = 0 under exchangeability
    assert np.mean(np.array(pvalues) <= 0.05) <= 0.09  # level 0.05, MC error allowed


def test_excess_variance_is_detected_and_estimated() -> None:
    rng = np.random.default_rng(6)
    mats = {"a": simulate_runs(rng, 300, 12, 0.05), "b": simulate_runs(rng, 300, 12, 0.05)}
    br = between_run(mats, permutations=999, seed=0)
    assert br.pvalue < 0.01
    assert br.sigma_run == pytest.approx(0.05, abs=0.02)
    assert br.variance_ratio > 2
    assert {a.arm for a in br.by_arm} == {"a", "b"}


def test_between_run_needs_two_runs() -> None:
    br = between_run({"a": np.array([[1.0], [0.0], [1.0]])}, permutations=9)
    assert math.isnan(br.sigma_run) and math.isnan(br.pvalue) and br.by_arm == []


def test_between_run_uses_prompts_common_to_all_runs() -> None:
    m = np.array([[1, 0], [np.nan, 1], [0, 0], [1, 1]], float)
    arm = between_run({"a": m}, permutations=9).by_arm[0]
    assert arm.prompts == 3 and arm.runs == 2


# ---- discordance and records -----------------------------------------------------------------


def test_discordance_of_repeat_matched_pairs() -> None:
    c = np.array([[1, 0], [0, 0], [1, np.nan]])
    t = np.array([[0, 1], [1, 0], [1, 1]])
    d = discordance(c, t)
    assert (d.pairs, d.b01, d.b10) == (5, 2, 1)
    assert d.p01 == pytest.approx(0.4) and d.p10 == pytest.approx(0.2)


def record(arm: str, task: str, repeat: int, success: bool | None, **kw: Any) -> dict[str, Any]:
    rec = {
        "registration_id": "pilot",
        "registration_digest": DIGEST,
        "arm": arm,
        "task_id": task,
        "repeat": repeat,
        "status": "ok",
        "success": success,
        "polarity": "positive",
    }
    rec.update(kw)
    return rec


def test_pilot_data_layout_exclusions_and_digest_refusal() -> None:
    recs = [
        record("base", "t1", 0, True),
        record("base", "t1", 1, False),
        record("sem", "t1", 0, True),
        record("sem", "t2", 1, True),
        record("base", "t2", 0, None, status="infra_error", error="timeout"),
        record("other", "t1", 0, True),
    ]
    data = pilot_data(recs, ["base", "sem"], digest=DIGEST)
    assert data.prompts == ["t1", "t2"] and data.repeats == [0, 1]
    assert data.excluded == 1 and data.records == 6
    np.testing.assert_array_equal(data.matrices["base"], [[1, 0], [np.nan, np.nan]])
    np.testing.assert_array_equal(data.matrices["sem"], [[1, np.nan], [np.nan, 1]])
    bad = recs + [record("sem", "t3", 0, True, registration_digest="sha256:" + "b" * 64)]
    with pytest.raises(IntegrityError, match="digest"):
        pilot_data(bad, ["base", "sem"], digest=DIGEST)


def test_estimate_pilot_combines_the_estimators() -> None:
    rng = np.random.default_rng(7)
    p = rng.uniform(0.2, 0.8, 50)
    c = binary(rng, np.repeat(p[:, None], 3, 1))
    t = binary(rng, np.repeat(np.clip(p + 0.1, 0, 1)[:, None], 3, 1))
    data = PilotData(
        prompts=[f"t{i}" for i in range(50)],
        repeats=[0, 1, 2],
        matrices={"base": c, "sem": t},
        records=300,
    )
    est = estimate_pilot(data, "base", "sem", permutations=99, seed=0)
    assert est.prompts == 50 and est.repeats == 3
    assert est.sigma_d.sigma_d == pytest.approx(paired_sigma_d(c, t).sigma_d)
    assert est.rates["sem"] == pytest.approx(t.mean())
    js = est.to_json()
    assert set(js) >= {"sigma_d", "icc", "between_run", "discordance", "rates"}
    with pytest.raises(ValueError, match="no outcomes"):
        estimate_pilot(data, "base", "missing")
