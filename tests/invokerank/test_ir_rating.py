"""The Invoke Rating against independent references: statsmodels' ConditionalLogit on
the same long-format data, a hand-written penalised likelihood maximised by scipy, and
simulated choices with known coefficients."""

from __future__ import annotations

import importlib
import math
from typing import Any

import numpy as np
import pytest
from scipy import optimize as spo
from statsmodels.discrete.conditional_models import ConditionalLogit

ir = importlib.import_module("prereg.stats.invokerank")

J = 3
BETA = np.array([0.6, -0.2, -1.1])
GAMMA = -0.3


def _simulate(
    runs: int, seed: int, intents: int = 1, effects: Any = None, gamma: float = GAMMA
) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    available = rng.random((runs, J)) > 0.15
    position = np.array([rng.permutation(J) for _ in range(runs)], dtype=float)
    intent = rng.integers(0, intents, runs)
    u_jc = np.zeros((J, intents)) if effects is None else np.asarray(effects)
    chosen = np.empty(runs, dtype=np.int64)
    for t in range(runs):
        u = BETA + u_jc[:, intent[t]] + gamma * position[t]
        utility = np.r_[0.0, np.where(available[t], u, -np.inf)]
        p = np.exp(utility - utility.max())
        chosen[t] = rng.choice(J + 1, p=p / p.sum()) - 1
    return {"chosen": chosen, "available": available, "position": position, "intent": intent}


def _long_format(d: dict[str, Any]) -> tuple[Any, Any, Any]:
    """One row per (run, alternative), the outside option with all-zero covariates."""
    rows, y, groups = [], [], []
    for t, c in enumerate(d["chosen"]):
        for a in range(-1, J):
            if a >= 0 and not d["available"][t, a]:
                continue
            x = np.zeros(J + 1)
            if a >= 0:
                x[a], x[J] = 1.0, d["position"][t, a]
            rows.append(x)
            y.append(int(c == a))
            groups.append(t)
    return np.array(y), np.array(rows), np.array(groups)


def test_estimates_and_standard_errors_equal_statsmodels_conditional_logit() -> None:
    d = _simulate(600, seed=3)
    got = ir.invoke_rating(
        d["chosen"], d["available"], position=d["position"], prior_sd=None, resamples=0
    )
    y, x, g = _long_format(d)
    model = ConditionalLogit(y, x, groups=g)
    ref = model.fit(disp=0)
    assert got.converged
    mine = np.r_[got.beta, got.position]
    # statsmodels' own likelihood: the same value at our estimates, at least its optimum,
    # and a zero score there (statsmodels' BFGS stops about 1e-5 short of the optimum)
    assert model.loglike(mine) == pytest.approx(got.loglik, abs=1e-9)
    assert model.loglike(mine) >= ref.llf - 1e-9
    np.testing.assert_allclose(model.score(mine), 0.0, atol=1e-6)
    np.testing.assert_allclose(mine, ref.params, atol=1e-4)
    np.testing.assert_allclose(got.se, ref.bse[:J], rtol=1e-3)
    assert got.position_se == pytest.approx(ref.bse[J], rel=1e-3)
    # the display scale: R = 1000 + 400 beta / ln 10
    np.testing.assert_allclose(got.rating, 1000 + 400 * got.beta / math.log(10), rtol=1e-12)


def test_known_coefficients_are_recovered_from_simulated_choices() -> None:
    d = _simulate(4000, seed=11)
    got = ir.invoke_rating(
        d["chosen"], d["available"], position=d["position"], prior_sd=None, resamples=0
    )
    z = (got.beta - BETA) / got.se
    assert np.all(np.abs(z) < 3.5), z
    assert abs((got.position - GAMMA) / got.position_se) < 3.5


def _penalised_negloglik(theta: Any, d: dict[str, Any], cells: int, sd: float) -> float:
    """Written independently: a loop over runs, parameters (beta, u_jc, gamma)."""
    beta, u, gamma = theta[:J], theta[J : J + J * cells].reshape(J, cells), theta[-1]
    total = 0.0
    for t, c in enumerate(d["chosen"]):
        utilities = [0.0]
        for j in range(J):
            if d["available"][t, j]:
                utilities.append(beta[j] + u[j, d["intent"][t]] + gamma * d["position"][t, j])
        chosen_u = 0.0 if c < 0 else beta[c] + u[c, d["intent"][t]] + gamma * d["position"][t, c]
        total += chosen_u - math.log(sum(math.exp(v) for v in utilities))
    return -(total - float(np.sum(u**2)) / (2 * sd**2))


def test_partially_pooled_intent_effects_maximise_the_penalised_likelihood() -> None:
    effects = [[0.8, -0.8], [0.0, 0.0], [-0.5, 0.5]]
    d = _simulate(300, seed=5, intents=2, effects=effects)
    got = ir.invoke_rating(
        d["chosen"],
        d["available"],
        intent=d["intent"],
        position=d["position"],
        prior_sd=0.7,
        resamples=0,
    )
    ref = spo.minimize(
        _penalised_negloglik,
        np.zeros(J + 2 * J + 1),
        args=(d, 2, 0.7),
        method="BFGS",
        options={"gtol": 1e-8},
    )
    np.testing.assert_allclose(got.beta, ref.x[:J], atol=1e-4)
    np.testing.assert_allclose(got.intent_effects, ref.x[J : 3 * J].reshape(J, 2), atol=1e-4)
    assert got.position == pytest.approx(ref.x[-1], abs=1e-4)
    # shrinkage: a tighter prior pulls the intent effects toward the integration's beta
    tight = ir.invoke_rating(
        d["chosen"],
        d["available"],
        intent=d["intent"],
        position=d["position"],
        prior_sd=0.05,
        resamples=0,
    )
    assert np.abs(tight.intent_effects).max() < 0.5 * np.abs(got.intent_effects).max()


def test_prompt_bootstrap_interval_brackets_the_rating_and_is_seeded() -> None:
    d = _simulate(400, seed=7)
    prompt = np.arange(400) // 2
    kwargs = {"position": d["position"], "prompt": prompt, "prior_sd": None, "resamples": 60}
    a = ir.invoke_rating(d["chosen"], d["available"], seed=4, **kwargs)
    b = ir.invoke_rating(d["chosen"], d["available"], seed=4, **kwargs)
    for lv in (0.90, 0.95):
        assert np.all(a.rating_low[lv] < a.rating) and np.all(a.rating < a.rating_high[lv])
        np.testing.assert_array_equal(a.rating_low[lv], b.rating_low[lv])
    assert np.all(
        a.rating_high[0.95] - a.rating_low[0.95] >= a.rating_high[0.9] - a.rating_low[0.9]
    )
    assert a.prompts == 200 and a.resamples == 60


def test_boundaries_never_chosen_and_no_outside_option() -> None:
    available = np.ones((6, 2), bool)
    chosen = np.array([-1, 0, 0, -1, 0, -1])  # alternative 1 never chosen
    got = ir.invoke_rating(chosen, available, prior_sd=None, resamples=20)
    assert got.beta[1] == -np.inf and got.rating[1] == -np.inf
    assert got.beta[0] == pytest.approx(0.0, abs=1e-8)  # 3 of 6: as likely as no tool
    assert got.rating[0] == pytest.approx(1000.0, abs=1e-5)
    assert got.position is None and got.branded is None  # constant or absent: not fitted
    never = ir.invoke_rating(np.array([0, 1, 0]), np.ones((3, 2), bool), resamples=0)
    assert np.all(np.isnan(never.beta))  # no run chose no tool: not identified
    with pytest.raises(ValueError, match="not available"):
        ir.invoke_rating(np.array([1]), np.array([[True, False]]))


def _batch(d: dict[str, Any], prior_sd: float | None) -> tuple[Any, Any]:
    data = ir._choice_runs(
        d["chosen"],
        d["available"],
        d["intent"],
        np.arange(d["chosen"].size) // 2,
        d["position"],
        None,
    )
    terms = ir._terms(data, prior_sd)
    fit = ir.fit_choice_logit(ir._design(data, terms, prior_sd))
    return ir._Batch.build(data, terms, prior_sd), fit.params


def test_every_bootstrap_refit_equals_statsmodels_on_its_resample() -> None:
    # the batched refit weights the original runs by their multiplicity; statsmodels fits
    # each resample's runs written out, an alternative never chosen in the resample left
    # out of its choice sets (its beta is -inf, fitted out)
    d = _simulate(160, seed=21)
    batch, start = _batch(d, None)
    weights = ir._run_weights(np.random.default_rng(5), np.arange(160) // 2, d["intent"], 2)
    dropped = np.where(d["chosen"] == 2, 0.0, 1.0)  # alternative 2 never chosen
    weights = np.vstack([weights, dropped])
    theta, active, alone = batch.refit(weights, start)
    beta, _ = batch.betas(weights, start)
    assert not alone.any() and not active[-1, 3] and beta[-1, 2] == -np.inf
    for b in range(weights.shape[0]):
        rows = np.repeat(np.arange(160), weights[b].astype(int))
        keep = np.isfinite(beta[b])
        sample = {k: v[rows] for k, v in d.items()}
        sample["available"] = sample["available"] & keep[None, :]
        y, x, g = _long_format(sample)
        model = ConditionalLogit(y, x[:, np.r_[np.flatnonzero(keep), J]], groups=g)
        ref = model.fit(disp=0)  # BFGS: about 1e-4 short of the optimum; polished by Newton
        polished = model.fit(start_params=ref.params, method="newton", disp=0)
        mine = np.r_[beta[b, keep], theta[b, -1]]  # betas of the kept, then gamma
        assert model.loglike(mine) >= ref.llf - 1e-9
        np.testing.assert_allclose(model.score(mine), 0.0, atol=1e-6)
        np.testing.assert_allclose(mine, polished.params, atol=1e-6)


def test_penalised_bootstrap_refits_maximise_the_penalised_likelihood() -> None:
    effects = [[0.8, -0.8], [0.0, 0.0], [-0.5, 0.5]]
    d = _simulate(120, seed=8, intents=2, effects=effects)
    batch, start = _batch(d, 0.7)
    weights = ir._run_weights(np.random.default_rng(2), np.arange(120) // 2, d["intent"], 1)
    theta, _, alone = batch.refit(weights, start)
    assert not alone.any()
    for b in range(1):
        rows = np.repeat(np.arange(120), weights[b].astype(int))
        sample = {k: v[rows] for k, v in d.items()}
        ref = spo.minimize(
            _penalised_negloglik,
            np.zeros(J + 2 * J + 1),
            args=(sample, 2, 0.7),
            method="BFGS",
            options={"gtol": 1e-8},
        )
        np.testing.assert_allclose(theta[b], ref.x, atol=1e-4)
        assert _penalised_negloglik(theta[b], sample, 2, 0.7) <= ref.fun + 1e-9


def test_resamples_without_a_fit_follow_the_point_fit_s_rules() -> None:
    d = _simulate(120, seed=4)
    batch, start = _batch(d, None)
    no_tool = np.where(d["chosen"] == -1, 0.0, 1.0)  # no run chooses no tool
    only_no_tool = np.where(np.arange(120) == np.argmax(d["chosen"] == -1), 3.0, 0.0)
    beta, alone = batch.betas(np.vstack([no_tool, only_no_tool]), start)
    assert not alone.any()
    assert np.all(np.isnan(beta[0]))  # not identified against the outside option
    assert np.all(beta[1] == -np.inf)  # nothing chosen: every rating unbounded below
    data = ir._choice_runs(d["chosen"], d["available"], None, None, d["position"], None)
    for b in (0, 1):  # the same as fitting the resample's runs alone
        rows = np.repeat(np.arange(120), np.vstack([no_tool, only_no_tool])[b].astype(int))
        np.testing.assert_array_equal(ir._betas(data.take(rows), None), beta[b])
