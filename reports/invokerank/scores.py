"""The published score and its intervals per arm and intent: each intent's stages,
priors and posteriors, Lever and pass^k, the calibrated intervals beside the published
ones, Figure 2's pooled funnel and loss shares, and the roll-up's intent weights.

These turn :class:`~prereg.reports.invokerank.counts.Prompts` and the estimator's result
(:func:`prereg.stats.invokerank`) into the report model's score blocks.

The score printed is E[Q] exactly (the product of the stage posterior means, the seed's
figure), never the Monte Carlo mean of the draws (kept as ``q_mc``). Every interval of a
score contains it, and the small-sample rule (:mod:`prereg.stats.invokerank.minimum`)
withholds one, with its reason, below the minimum of prompts per intent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from prereg import stats
from prereg.reports.invokerank.counts import Prompts, Unit, prompt_counts
from prereg.reports.invokerank.intervals import LEVELS, _iv, _none
from prereg.reports.model import IntentScore, Provenance, StageEstimate, StagePrior
from prereg.reports.observations import Obs
from prereg.stats.invokerank import BootstrapScore, ScoreInterval

PASS_K = 3
PUBLISHED_METHOD = "published path: equal-tailed interval of the Q draws"
#: Why a stage's posterior interval has no width.
POINT_MASS = "zero width: boundary stage, its posterior a point mass (no epsilon floor)"
#: Why the published interval of Q has no width.
Q_POINT_MASS = "zero width: a boundary stage's point-mass posterior makes every draw of Q equal"


@dataclass(frozen=True)
class _StageBounds:
    """A stage's posterior and displayed Jeffreys intervals for every intent cell, from one
    vectorised call each (elementwise the same quantiles as one call per cell)."""

    low: Any
    high: Any
    shown: stats.ProportionInterval

    @classmethod
    def of(cls, fit: stats.FunnelStage) -> _StageBounds:
        low, high = stats.beta_interval(fit.posterior_alpha, fit.posterior_beta, LEVELS[0])
        shown = stats.jeffreys_interval(
            np.asarray(fit.successes, np.float64),
            np.asarray(fit.trials, np.float64),
            level=LEVELS[0],
            deff=np.asarray(fit.deff, np.float64),
        )
        return cls(np.atleast_1d(low), np.atleast_1d(high), shown)


def _stage_estimate(
    fit: stats.FunnelStage, c: int, intent: str, bounds: _StageBounds | None = None
) -> StageEstimate:
    b = bounds or _StageBounds.of(fit)
    low, high = b.low[c], b.high[c]
    n, y, deff = int(fit.trials[c]), int(fit.successes[c]), float(fit.deff[c])
    displayed = None
    if n:
        lo, hi = np.atleast_1d(b.shown.low)[c], np.atleast_1d(b.shown.high)[c]
        displayed = _iv(lo, hi, LEVELS[0], b.shown.method)
    return StageEstimate(
        stage=fit.stage,
        successes=y,
        trials=n,
        rho=float(fit.rho[c]),
        rho_source=fit.rho_source[c],
        design_effect=deff,
        effective_successes=float(fit.effective_successes[c]),
        effective_trials=float(fit.effective_trials[c]),
        prior_alpha=float(fit.prior_alpha[c]),
        prior_beta=float(fit.prior_beta[c]),
        capped=bool(fit.capped[c]),
        posterior_mean=float(fit.posterior_mean[c]),
        posterior=_iv(
            float(low),
            float(high),
            LEVELS[0],
            f"Beta posterior of {intent}",
            zero_width=POINT_MASS,
        ),
        displayed=displayed,
    )


def _shares(names: Sequence[str], values: Any) -> dict[str, float | None]:
    return {s: _none(float(v)) for s, v in zip(names, np.ravel(values), strict=True)}


def _pass_k(prompts: Prompts, mask: Sequence[bool]) -> tuple[float | None, int]:
    c = np.array([r[-1] for r, keep in zip(prompts.reached, mask, strict=True) if keep])
    n = np.array([m for m, keep in zip(prompts.runs, mask, strict=True) if keep])
    if c.size == 0:
        return None, 0
    values = np.atleast_1d(stats.pass_hat_k(c, n, PASS_K))
    ok = values[np.isfinite(values)]
    return (float(ok.mean()) if ok.size else None), int(ok.size)


def displayed_scores(result: stats.InvokeRankResult) -> Any:
    """The score per intent: E[Q] exactly, the product of the stage posterior means
    (``q_exact``); the Monte Carlo mean only where that is not a number (a stage whose
    posterior has no mass, which the published path's prior rules do not produce)."""
    exact = np.asarray(result.q_exact, dtype=np.float64)
    return np.where(np.isfinite(exact), exact, np.asarray(result.q, dtype=np.float64))


def published_intervals(
    low: Mapping[float, Any], high: Mapping[float, Any], q: float, reason: str | None
) -> list[Any]:
    """The published path's intervals of a score at every level: withheld with ``reason``
    (the small-sample rule), labelled where they have no width, made to contain ``q``
    (an equal-tailed interval can miss the mean of a very skewed posterior)."""
    return [
        _iv(
            low[lv],
            high[lv],
            lv,
            PUBLISHED_METHOD,
            reason=reason,
            zero_width=Q_POINT_MASS,
            estimate=q,
        )
        for lv in LEVELS
    ]


@dataclass(frozen=True)
class LeverFit:
    """The focal fit the Lever reads (seed 4.2: "Runs judged as correct native
    self-service are excluded from the Lever"): the score's own fit when no positive run
    was found self-served, else the published path refitted on the other positive runs.

    ``result`` and ``prompts`` are None when every positive run was self-served (no
    Lever); ``excluded`` the left-out runs' units, ``by_intent`` how many per intent."""

    result: stats.InvokeRankResult | None
    prompts: Prompts | None
    excluded: frozenset[Unit] = frozenset()
    by_intent: Mapping[str, int] | None = None

    def lever(self) -> dict[str, Any]:
        """intent -> its Lever per stage against the intent median (of the fit's intents)."""
        if self.result is None or self.prompts is None:
            return {}
        lever = stats.funnel_lever(self.result.posterior_means)
        return {i: lever[c] for c, i in enumerate(self.prompts.intents)}

    def excluded_in(self, intent: str) -> int:
        return int((self.by_intent or {}).get(intent, 0))


def lever_fit(
    result: stats.InvokeRankResult,
    prompts: Prompts,
    runs: Sequence[Obs],
    stages: Sequence[str],
    served: frozenset[Unit],
    *,
    draws: int,
    seed: int | None,
) -> LeverFit:
    """The Lever's fit: ``result`` itself when ``served`` (the self-served runs' units,
    :func:`~prereg.reports.invokerank.counts.self_served`) leaves out none of ``runs``,
    else the published path on the runs it does not name."""
    gone = [o for o in runs if o.unit in served]
    if not gone:
        return LeverFit(result, prompts)
    by_intent: dict[str, int] = {}
    for o in gone:
        by_intent[o.intent] = by_intent.get(o.intent, 0) + 1
    kept = [o for o in runs if o.unit not in served]
    if not kept:
        return LeverFit(None, None, frozenset(o.unit for o in gone), by_intent)
    mine = prompt_counts(kept, stages)
    fit = stats.invokerank(
        mine.runs, mine.reached, mine.cell, stages=stages, draws=draws, seed=seed
    )
    return LeverFit(fit, mine, frozenset(o.unit for o in gone), by_intent)


def _excluded(lever_of: LeverFit, intent: str) -> dict[str, Any]:
    """The provenance of a Lever that left runs out (nothing when it left none, so a
    report without native verdicts reads as before)."""
    n = lever_of.excluded_in(intent)
    if not lever_of.excluded:
        return {}
    return {
        "lever_excludes_self_served": n,
        "lever_fit": "the published path refitted without the arm's "
        f"{len(lever_of.excluded)} positive run(s) the native judge found self-served (4.2)",
    }


def _intent_scores(
    result: stats.InvokeRankResult,
    prompts: Prompts,
    arm: str,
    reasons: Sequence[str | None] | None = None,
    lever_of: LeverFit | None = None,
) -> list[IntentScore]:
    """Per intent: the score (E[Q] exactly, the seed's figure; the Monte Carlo mean of the
    draws kept as ``q_mc``), its published intervals (withheld where ``reasons`` says),
    stages, loss shares, Lever (from ``lever_of``, the runs the native judge found
    self-served left out; the score's own fit when not given) and pass^k."""
    lever_of = lever_of or LeverFit(result, prompts)
    levers = lever_of.lever()
    nan = np.full(len(result.stages), np.nan)
    bounds = [_StageBounds.of(f) for f in result.fits]
    shown = displayed_scores(result)
    out = []
    for c, intent in enumerate(prompts.intents):
        mask = [cell == c for cell in prompts.cell]
        pk, pk_n = _pass_k(prompts, mask)
        q = float(shown[c])
        reason = reasons[c] if reasons is not None else None
        out.append(
            IntentScore(
                intent=intent,
                prompts=int(sum(mask)),
                runs=int(sum(m for m, keep in zip(prompts.runs, mask, strict=True) if keep)),
                weight=float(result.weights[c]),
                q=q,
                q_mc=_none(float(result.q[c])),
                intervals=published_intervals(
                    {lv: result.q_low[lv][c] for lv in LEVELS},
                    {lv: result.q_high[lv][c] for lv in LEVELS},
                    q,
                    reason,
                ),
                stages=[
                    _stage_estimate(f, c, intent, b)
                    for f, b in zip(result.fits, bounds, strict=True)
                ],
                loss_shares=_shares(result.stages, result.loss_shares[c]),
                lever=_shares(result.stages, levers.get(intent, nan)),
                pass_k=pk,
                pass_k_prompts=pk_n,
                provenance=Provenance(
                    function="prereg.stats.invokerank (cell of this intent); "
                    "prereg.stats.loss_shares; prereg.stats.funnel_lever; "
                    "prereg.stats.pass_hat_k",
                    parameters={
                        "cell": c,
                        "k": PASS_K,
                        "lever_reference": "intent median",
                        **_excluded(lever_of, intent),
                    },
                    registration_field=None,
                ),
            )
        )
    return out


def _priors(result: stats.InvokeRankResult, intents: Sequence[str]) -> list[StagePrior]:
    return [
        StagePrior(
            stage=f.stage,
            method=f.prior.method,
            mu=f.prior.mu,
            kappa=f.prior.kappa,
            converged=f.prior.converged,
            cells_with_trials=f.prior.cells_with_trials,
            capped_cells=[i for i, cap in zip(intents, f.capped, strict=True) if cap],
            pooled_rho=_none(f.pooled_rho),
        )
        for f in result.fits
    ]


def pooled_funnel(prompts: Prompts, stages: Sequence[str]) -> list[StageEstimate]:
    """Figure 2: runs reaching each stage over all positive runs, Jeffreys deflated at the
    pooled rho of that indicator (all prompts one group each; the stage default when it
    cannot be estimated)."""
    runs = np.asarray(prompts.runs)
    reached = np.asarray(prompts.reached)
    out = []
    for k, stage in enumerate(stages):
        rho = stats.grouped_icc(reached[:, k], runs)
        source = "pooled"
        if math.isnan(rho):
            rho, source = stats.RHO_DEFAULTS[stage], "default"
        deff = float(stats.design_effect(runs, rho))
        y, n = int(reached[:, k].sum()), int(runs.sum())
        ji = stats.jeffreys_interval(y, n, level=LEVELS[0], deff=deff)
        iv = _iv(ji.low, ji.high, LEVELS[0], ji.method)
        out.append(
            StageEstimate(
                stage=stage,
                successes=y,
                trials=n,
                rho=rho,
                rho_source=source,
                design_effect=deff,
                effective_successes=y / deff,
                effective_trials=n / deff,
                prior_alpha=0.5,
                prior_beta=0.5,
                capped=False,
                posterior_mean=(y / deff + 0.5) / (n / deff + 1.0),
                posterior=iv,
                displayed=iv,
            )
        )
    return out


def pooled_loss_shares(prompts: Prompts, stages: Sequence[str]) -> dict[str, float | None]:
    """Log-loss shares from the pooled conditional rates (the seed's 6.1 figures)."""
    chain = [sum(prompts.runs)] + [
        int(sum(r[k] for r in prompts.reached)) for k in range(len(stages))
    ]
    if any(parent == 0 for parent in chain[:-1]):
        return {s: None for s in stages}
    rates = [chain[k + 1] / chain[k] for k in range(len(stages))]
    return _shares(stages, stats.loss_shares(rates))


def roll_up_weights(
    intents: Sequence[str], registered: Mapping[str, float] | None
) -> tuple[list[float], str]:
    """The roll-up weights of the scored intents and how they were chosen.

    Registered ``intent_weights`` (normalised over the scored intents; an intent the
    registration does not list weighs 0); equal when none are registered, or when no
    scored intent has a registered weight (said so).
    """
    if registered is None:
        return [1.0] * len(intents), "equal over intents (no intent weights registered)"
    weights = [float(registered.get(i, 0.0)) for i in intents]
    unlisted = [i for i in intents if i not in registered]
    if sum(weights) <= 0:
        return [1.0] * len(intents), (
            "equal over intents: no scored intent has a registered weight "
            f"(unlisted: {', '.join(unlisted)})"
        )
    text = "registered intent_weights, normalised over the scored intents"
    if unlisted:
        text += f"; not listed, so weight 0: {', '.join(unlisted)}"
    return weights, text


def _with_calibrated(
    score: IntentScore, boot: BootstrapScore, c: int, interval: ScoreInterval
) -> IntentScore:
    """An intent's score with the calibrated intervals beside the published ones, and the
    registered method's as its intervals (both contain the score, ``score.q``)."""
    reason = boot.q_reason[c] if boot.q_reason else None
    calibrated = [
        _iv(
            boot.q_low[lv][c],
            boot.q_high[lv][c],
            lv,
            boot.intent_method,
            reason=reason,
            estimate=score.q,
        )
        for lv in LEVELS
    ]
    return score.model_copy(
        update={
            "calibrated": calibrated,
            "published": score.intervals,
            "intervals": calibrated if interval == "calibrated" else score.intervals,
            "plug_in": _none(float(boot.q[c])),
        }
    )
