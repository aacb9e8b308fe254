"""The Invoke Rating's batched bootstrap refit on collapsed choice situations.

Runs with the same intent, listed alternatives, covariates and first choice are one row of
the batched refit, weighted by how often the resample holds them. The references are
independent of that collapse: statsmodels' ConditionalLogit on each resample written out
run by run (one long-format group per run), and the point-fit path (``fit_choice_logit``,
scipy's trust-region Newton) on the resample's runs expanded, which is what a resample
refitted alone gets.
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
from statsmodels.discrete.conditional_models import ConditionalLogit

ir = importlib.import_module("prereg.stats.invokerank")

J = 3
BETA = np.array([0.5, -0.3, -1.0])
GAMMA = -0.25


def _prompts(prompts: int, repeats: int, seed: int, intents: int) -> dict[str, Any]:
    """Each prompt lists the same alternatives in the same order on every repeat (as a
    task does); only the first choice varies between its repeats."""
    rng = np.random.default_rng(seed)
    listed = rng.random((prompts, J)) > 0.2
    order = np.array([rng.permutation(J) for _ in range(prompts)], dtype=float)
    cell = rng.integers(0, intents, prompts)
    prompt = np.repeat(np.arange(prompts), repeats)
    available, position, intent = listed[prompt], order[prompt], cell[prompt]
    chosen = np.empty(prompt.size, np.int64)
    for t in range(prompt.size):
        utility = np.r_[0.0, np.where(available[t], BETA + GAMMA * position[t], -np.inf)]
        p = np.exp(utility - utility.max())
        chosen[t] = rng.choice(J + 1, p=p / p.sum()) - 1
    return {
        "chosen": chosen,
        "available": available,
        "position": position,
        "intent": intent,
        "prompt": prompt,
    }


def _setup(d: dict[str, Any], prior_sd: float | None) -> tuple[Any, Any, Any]:
    data = ir._choice_runs(
        d["chosen"], d["available"], d["intent"], d["prompt"], d["position"], None
    )
    terms = ir._terms(data, prior_sd)
    fit = ir.fit_choice_logit(ir._design(data, terms, prior_sd))
    return data, ir._Batch.build(data, terms, prior_sd), fit.params


def _long_format(d: dict[str, Any], rows: Any, keep: Any) -> tuple[Any, Any, Any]:
    """The resample's runs written out: one group per run, the outside option at zero,
    an alternative never chosen in the resample left out of the choice sets."""
    y, x, groups = [], [], []
    for g, t in enumerate(rows):
        for a in range(-1, J):
            if a >= 0 and not (d["available"][t, a] and keep[a]):
                continue
            row = np.zeros(J + 1)
            if a >= 0:
                row[a], row[J] = 1.0, d["position"][t, a]
            x.append(row)
            y.append(int(d["chosen"][t] == a))
            groups.append(g)
    return np.array(y), np.array(x)[:, np.r_[np.flatnonzero(keep), J]], np.array(groups)


def _situation(d: dict[str, Any], t: int) -> tuple[Any, ...]:
    """What the likelihood sees of run t: listed alternatives, their positions, choice."""
    listed = d["available"][t]
    return (tuple(listed), tuple(np.where(listed, d["position"][t], 0.0)), int(d["chosen"][t]))


def test_runs_of_one_choice_situation_collapse_into_one_weighted_row() -> None:
    d = _prompts(prompts=10, repeats=12, seed=1, intents=1)
    _, batch, _ = _setup(d, None)
    situations = [_situation(d, t) for t in range(d["chosen"].size)]
    assert batch.local.shape[0] == len(set(situations)) < d["chosen"].size
    weights = np.random.default_rng(3).integers(0, 3, (4, d["chosen"].size)).astype(float)
    rows = batch.collapse(weights)
    for s in range(rows.shape[1]):  # each row's weight: its runs' multiplicities summed
        members = np.flatnonzero(batch.members[:, s].toarray().ravel())
        assert len({situations[t] for t in members}) == 1
        np.testing.assert_array_equal(rows[:, s], weights[:, members].sum(axis=1))


def test_collapsed_refits_equal_statsmodels_on_each_expanded_resample() -> None:
    d = _prompts(prompts=16, repeats=10, seed=7, intents=1)
    _, batch, start = _setup(d, None)
    weights = ir._run_weights(np.random.default_rng(11), d["prompt"], d["intent"], 3)
    theta, active, alone = batch.refit(weights, start)
    beta, _ = batch.betas(weights, start)
    assert not alone.any() and active[:, 0].all()
    for b in range(weights.shape[0]):
        rows = np.repeat(np.arange(d["chosen"].size), weights[b].astype(int))
        keep = np.isfinite(beta[b])
        y, x, g = _long_format(d, rows, keep)
        model = ConditionalLogit(y, x, groups=g)
        ref = model.fit(disp=0)
        polished = model.fit(start_params=ref.params, method="newton", disp=0)
        mine = np.r_[beta[b, keep], theta[b, -1]]  # the kept alternatives' betas, gamma
        assert model.loglike(mine) >= ref.llf - 1e-9
        np.testing.assert_allclose(model.score(mine), 0.0, atol=1e-6)
        np.testing.assert_allclose(mine, polished.params, atol=1e-6)


def test_collapsed_penalised_refits_equal_the_uncollapsed_fit() -> None:
    d = _prompts(prompts=24, repeats=6, seed=5, intents=3)
    data, batch, start = _setup(d, 0.8)
    assert batch.local.shape[0] < d["chosen"].size
    weights = ir._run_weights(np.random.default_rng(2), d["prompt"], d["intent"], 4)
    theta, active, alone = batch.refit(weights, start)
    assert not alone.any()
    for b in range(weights.shape[0]):
        rows = np.repeat(np.arange(d["chosen"].size), weights[b].astype(int))
        sample = data.take(rows)
        terms = ir._terms(sample, 0.8)
        np.testing.assert_array_equal(terms.kept + 1, np.flatnonzero(active[b, 1:]) + 1)
        expanded = ir.fit_choice_logit(ir._design(sample, terms, 0.8))
        assert expanded.converged
        free = ir._Batch._free(batch, active[b : b + 1])[0]
        np.testing.assert_allclose(theta[b, free], expanded.params, atol=1e-7)
        np.testing.assert_allclose(theta[b, ~free], 0.0)
        assert ir.choice_loglik(ir._design(sample, terms, 0.8), theta[b, free]) >= (
            expanded.loglik - 1e-9
        )
