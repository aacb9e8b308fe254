"""The InvokeRank section: the published score per arm and intent, from the analysed runs.

An arm is one host configuration (or one surface) of the registration, so the section
is the seed's per-host table (Figure 3) with a leaderboard when the arms are hosts.
For each arm, from its ``ok`` runs (and units counted as failures, through
:meth:`Obs.outcome`):

- the score's level: if every positive run measured all five stages, the full
  InvokeRank Q = D x S x I x E x C; if Executed or Completed is missing on any run but
  Surfaced and Selected are measured, the Selection-level InvokeRank IR_DS = D x S,
  always labelled as such (seed 3.2: a full score is never shown where Executed and
  Completed were not measured); otherwise no score, with the reason;
- per intent (the intent cells of the registration's tasks): Q with equal-tailed 90%
  and 95% intervals, each stage's sequential counts, rho (cell, pooled or default),
  design effect, capped prior and posterior (:func:`prereg.stats.invokerank`), loss
  shares from posterior means, Lever against the intent median, and pass^k per prompt;
- the roll-up over intents with the registration's ``intent_weights`` (normalised over the
  scored intents; an unlisted intent weighs 0), or equal weights when none are
  registered (the seed's default until demand data exist);
- Figure 2's pooled funnel: runs reaching each stage over all positive runs, with a
  Jeffreys interval deflated at the pooled rho of that indicator, and loss shares from
  the pooled conditional rates;
- false invokes on negative runs, two definitions kept apart (seed 6.5, 7.1): the
  published False-Invoke Rate (the first external call went to the focal integration,
  terminal class ``focal``) and any external call (terminal class focal, competitor or
  other external); each with a 90% Jeffreys interval deflated at the arm's pooled rho_S
  (the stage default 0.8 when it cannot be estimated);
- the display rule: arms of the same evidence class and level whose 90% roll-up
  intervals overlap are "reported as tied" (a display rule, not an equivalence test).

Evidence classes are never pooled: a score is computed within one arm, and an arm whose
runs carry more than one evidence class gets none. The section is descriptive: it is
not registered and never feeds the verdict.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import numpy as np
from jsonschema import Draft202012Validator
from jsonschema.validators import validator_for

from prereg import stats
from prereg.experiments.offers import ArmOffer
from prereg.experiments.surfaces import Tool
from prereg.registry.schema import Registration
from prereg.registry.units import arm_config
from prereg.reports.model import (
    ArmInvokeRank,
    ChoiceShares,
    CompetitorLever,
    IntentScore,
    Interval,
    InvokeRankReport,
    InvokeRating,
    NegativeRate,
    Provenance,
    RatingRow,
    ResolutionRate,
    ResolutionSplitReport,
    ServerFunnel,
    ServerStage,
    ShareRow,
    StageEstimate,
    StagePrior,
    TerminalRow,
)
from prereg.reports.observations import STAGE_OUTCOMES, STAGES, Obs, outcome_place
from prereg.reports.pairs import runset
from prereg.stats.invokerank import (
    RATING_RESAMPLES,
    SPLIT_CLASSES,
    TERMINAL_CLASSES,
    BootstrapScore,
    InvokeRatingResult,
    ScoreInterval,
    bootstrap_score,
    choice_shares,
    competitor_lever,
    invoke_rating,
    prompt_rate,
    resolution_split,
    terminal_counts,
)

LEVELS: tuple[float, float] = (0.90, 0.95)
PASS_K = 3
#: Gaussian prior SD of the Invoke Rating's intent effects (logit scale; the seed gives none)
RATING_PRIOR_SD = 1.0
EXTERNAL = frozenset({"focal", "competitor", "other_external"})
LABELS = {
    "full": ("InvokeRank", "IR"),
    "selection": ("Selection-level InvokeRank", "IR_DS"),
    "not_computed": ("not computed", "-"),
}
NOTE = (
    "InvokeRank method v1.0 (4.1-4.2), published path: per-intent sequential counts, "
    "ANOVA rho per cell (pooled, then stage defaults), Kish design effect, a shared "
    "beta-binomial prior by marginal ML with capPrior, conjugate posteriors, seeded draws "
    "of Q = product of stages, roll-up with the registered intent weights (equal by "
    "default). Descriptive: not registered, never the verdict. Scores are 100 x E[Q]. The "
    "seed reports that the published intervals under-cover (7.5); the calibrated interval "
    "is a bootstrap of the plug-in score over prompts (per intent Jeffreys on the "
    "bootstrap's effective counts, the roll-up expanded percentile), which covers near "
    "nominal in bench/invokerank_coverage.py."
)
PUBLISHED_METHOD = "published path: equal-tailed interval of the Q draws"
INTERVAL_NOTES: dict[str, str] = {
    "published": "The score's interval is the published path's (no invokerank.interval "
    "registered, or 'published'); the calibrated interval is shown beside it.",
    "calibrated": "The score's interval is the calibrated one (registered: "
    "invokerank.interval: calibrated), which also decides ties; the published path's "
    "interval is shown beside it.",
}
DISPLAY_RULE = (
    "overlapping 90% intervals are displayed as 'intervals overlap, reported as tied' "
    "(a display rule, not an equivalence test)"
)


@dataclass(frozen=True)
class ArmMeta:
    """What the section states about an arm besides its runs."""

    id: str
    surface: str
    control: str | None = None
    configuration_digest: str | None = None
    model: str | None = None
    offer: ArmOffer | None = None  # what the arm lists (tool names and schemas per server)


@dataclass(frozen=True)
class Prompts:
    """An arm's positive runs reduced to per-prompt counts (prompts in first-seen order)."""

    tasks: list[str]
    intents: list[str]
    cell: list[int]
    runs: list[int]
    reached: list[list[int]]
    units: list[tuple[str, str, int]]


def _positive(observations: Sequence[Obs], arm: str) -> list[Obs]:
    return [
        o
        for o in observations
        if o.arm == arm and o.polarity == "positive" and (o.ok or o.counted_failure)
    ]


def _nested_values(values: Sequence[bool | None]) -> bool:
    reached = [v for v in values if v is not None]
    return all(a or not b for a, b in zip(reached, reached[1:], strict=False))


def score_level(runs: Sequence[Obs]) -> tuple[str, tuple[str, ...], str]:
    """(level, stages, reason): the full score, IR_DS, or none (module docstring)."""
    if not runs:
        return "not_computed", (), "no positive run"
    values = [o.outcomes[STAGE_OUTCOMES] for o in runs]  # each run's stages, read once
    distinct = set(values)  # a handful of patterns: each checked once
    unnested = {v for v in distinct if not _nested_values(v)}
    broken = sum(v in unnested for v in values) if unnested else 0
    if broken:
        return (
            "not_computed",
            (),
            f"{broken} positive run(s) reach a stage without its parent: a recording "
            "error (the funnel is nested), so no score",
        )
    measured = {s: all(v[k] is not None for v in distinct) for k, s in enumerate(STAGES)}
    if all(measured.values()):
        return "full", STAGES, "every stage measured on every positive run"
    if measured["surfaced"] and measured["selected"]:
        missing = ", ".join(s for s in STAGES if not measured[s])
        return (
            "selection",
            STAGES[:2],
            f"{missing} not measured on every positive run: scored at Surfaced x "
            "Selected and labelled Selection-level (IR_DS), never the full score",
        )
    missing = ", ".join(s for s in STAGES[:2] if not measured[s])
    return "not_computed", (), f"{missing} not measured on every positive run"


def prompt_counts(runs: Sequence[Obs], stages: Sequence[str]) -> Prompts:
    by_task: dict[str, list[Obs]] = defaultdict(list)
    for o in runs:
        by_task[o.task_id].append(o)
    intents = sorted({group[0].intent for group in by_task.values()})
    tasks = list(by_task)
    places = [outcome_place(s) for s in stages]
    return Prompts(
        tasks=tasks,
        intents=intents,
        cell=[intents.index(by_task[t][0].intent) for t in tasks],
        runs=[len(by_task[t]) for t in tasks],
        reached=[[sum(bool(o.outcomes[k]) for o in by_task[t]) for k in places] for t in tasks],
        units=[o.unit for o in runs],
    )


def _none(value: float) -> float | None:
    return None if not math.isfinite(value) else float(value)


def _iv(low: Any, high: Any, level: float, method: str) -> Interval:
    return Interval(low=_none(float(low)), high=_none(float(high)), level=level, method=method)


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
        posterior=_iv(float(low), float(high), LEVELS[0], f"Beta posterior of {intent}"),
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


def _intent_scores(result: stats.InvokeRankResult, prompts: Prompts, arm: str) -> list[IntentScore]:
    lever = stats.funnel_lever(result.posterior_means)
    bounds = [_StageBounds.of(f) for f in result.fits]
    out = []
    for c, intent in enumerate(prompts.intents):
        mask = [cell == c for cell in prompts.cell]
        pk, pk_n = _pass_k(prompts, mask)
        out.append(
            IntentScore(
                intent=intent,
                prompts=int(sum(mask)),
                runs=int(sum(m for m, keep in zip(prompts.runs, mask, strict=True) if keep)),
                weight=float(result.weights[c]),
                q=float(result.q[c]),
                intervals=[
                    _iv(result.q_low[lv][c], result.q_high[lv][c], lv, PUBLISHED_METHOD)
                    for lv in LEVELS
                ],
                stages=[
                    _stage_estimate(f, c, intent, b)
                    for f, b in zip(result.fits, bounds, strict=True)
                ],
                loss_shares=_shares(result.stages, result.loss_shares[c]),
                lever=_shares(result.stages, lever[c]),
                pass_k=pk,
                pass_k_prompts=pk_n,
                provenance=Provenance(
                    function="prereg.stats.invokerank (cell of this intent); "
                    "prereg.stats.loss_shares; prereg.stats.funnel_lever; "
                    "prereg.stats.pass_hat_k",
                    parameters={"cell": c, "k": PASS_K, "lever_reference": "intent median"},
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


def negative_rate(
    observations: Sequence[Obs], arm: str, classes: frozenset[str], definition: str, rho_s: float
) -> NegativeRate | None:
    """Calls on the arm's negative runs (terminal class in ``classes``), Jeffreys at rho_S."""
    runs = [
        o
        for o in observations
        if o.arm == arm and o.polarity == "negative" and o.ok and o.terminal_class is not None
    ]
    if not runs:
        return None
    calls: dict[str, int] = defaultdict(int)
    sizes: dict[str, int] = defaultdict(int)
    for o in runs:
        sizes[o.task_id] += 1
        calls[o.task_id] += o.terminal_class in classes
    rho, source = rho_s, "pooled rho_S of the arm's positive runs"
    if math.isnan(rho):
        rho, source = stats.RHO_DEFAULTS["selected"], "stage default rho_S (not estimable)"
    tasks = list(sizes)
    ji = stats.false_invoke_rate(
        [calls[t] for t in tasks], [sizes[t] for t in tasks], rho, level=LEVELS[0]
    )
    return NegativeRate(
        definition=definition,
        calls=int(ji.successes),
        runs=int(ji.trials),
        prompts=len(tasks),
        rate=float(ji.estimate),
        interval=_iv(ji.low, ji.high, LEVELS[0], ji.method),
        rho=rho,
        rho_source=source,
        design_effect=float(ji.deff),
        provenance=Provenance(
            function="prereg.stats.false_invoke_rate",
            parameters={"rho": rho, "level": LEVELS[0], "terminal_classes": sorted(classes)},
            registration_field=None,
            runs=runset([o.unit for o in runs], f"arm {arm}; negative tasks; status ok"),
        ),
    )


def _negatives(
    observations: Sequence[Obs], arm: str, rho_s: float
) -> tuple[NegativeRate | None, NegativeRate | None]:
    focal = negative_rate(
        observations,
        arm,
        frozenset({"focal"}),
        "False-Invoke Rate: the first external call went to the focal integration",
        rho_s,
    )
    external = negative_rate(
        observations, arm, EXTERNAL, "any external call (focal, competitor or other)", rho_s
    )
    return focal, external


def _evidence(runs: Sequence[Obs]) -> tuple[str | None, bool]:
    classes = {o.evidence_class for o in runs}
    return (next(iter(classes)) if len(classes) == 1 else None), len(classes) > 1


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


def arm_invokerank(
    observations: Sequence[Obs],
    meta: ArmMeta,
    seed: int | None,
    draws: int = 4000,
    intent_weights: Mapping[str, float] | None = None,
    native: Mapping[str, bool] | None = None,
    interval: ScoreInterval = "published",
    branded: Collection[str] = frozenset(),
) -> ArmInvokeRank:
    """The InvokeRank block of one arm (module docstring); ``native``: record id -> the
    native judge's verdict (:mod:`prereg.reports.judged.section`); ``interval``: the registered
    interval method, which gives the score's intervals (the other is kept beside them);
    ``branded``: the task ids whose prompt names the focal integration."""
    runs = _positive(observations, meta.id)
    level, stages, reason = score_level(runs)
    evidence, mixed = _evidence(
        [o for o in observations if o.arm == meta.id and (o.ok or o.counted_failure)]
    )
    if mixed:
        level, stages = "not_computed", ()
        reason = "the arm's runs carry more than one evidence class; classes are never pooled"
    label, symbol = LABELS[level]
    base: dict[str, Any] = {
        "arm": meta.id,
        "surface": meta.surface,
        "control": meta.control,
        "evidence_class": evidence,
        "configuration_digest": meta.configuration_digest,
        "model": meta.model,
        "label": label,
        "symbol": symbol,
        "interval_method": interval,
    }
    choices = first_choices(runs, branded)
    if not mixed:
        base.update(
            choice_blocks(observations, meta.id, seed, runs, native, branded, choices=choices)
        )
        base["server_funnel"] = server_funnel(runs, meta.offer, meta.id)
    if level == "not_computed":
        return ArmInvokeRank(**base, level=level, reason=reason, stages=[], q=None)
    prompts = prompt_counts(runs, stages)
    weights, weights_text = roll_up_weights(prompts.intents, intent_weights)
    result = stats.invokerank(
        prompts.runs,
        prompts.reached,
        prompts.cell,
        stages=stages,
        weights=weights,
        draws=draws,
        seed=seed,
    )
    boot = bootstrap_score(
        prompts.runs,
        [r[-1] for r in prompts.reached],
        prompts.cell,
        weights=weights,
        seed=seed,
        levels=LEVELS,
    )
    published = [
        _iv(result.rollup_low[lv], result.rollup_high[lv], lv, PUBLISHED_METHOD) for lv in LEVELS
    ]
    calibrated = [_iv(boot.rollup_low[lv], boot.rollup_high[lv], lv, boot.method) for lv in LEVELS]
    base.update(published=published, calibrated=calibrated)
    if choices is not None and "competitor" in choices.roles:
        base["lever_competitor"] = competitor_levers(result, prompts, choices)
    rho_s = result.fits[1].pooled_rho
    boundary = [f.stage for f in result.fits if "(boundary" in f.prior.method]
    if boundary:
        reason += (
            f"; {', '.join(boundary)} on a boundary (every intent at 0 or every intent at 1): "
            "the published path's posterior there is a point mass (no epsilon floor), which "
            "adds no width to Q; the funnel's Jeffreys intervals show that stage's uncertainty"
        )
    focal, external = _negatives(observations, meta.id, rho_s)
    pk, _ = _pass_k(prompts, [True] * len(prompts.tasks))
    return ArmInvokeRank(
        **base,
        level=level,
        reason=reason,
        stages=list(stages),
        q=result.rollup,
        intervals=calibrated if interval == "calibrated" else published,
        weights=weights_text,
        positive_runs=len(runs),
        prompts=len(prompts.tasks),
        intents=[
            _with_calibrated(i, boot, c, interval)
            for c, i in enumerate(_intent_scores(result, prompts, meta.id))
        ],
        priors=_priors(result, prompts.intents),
        funnel=pooled_funnel(prompts, stages),
        loss_shares_pooled=pooled_loss_shares(prompts, stages),
        false_invoke=focal,
        any_external=external,
        pass_k=pk,
        provenance=Provenance(
            function="prereg.stats.invokerank",
            parameters={
                "stages": list(stages),
                "weights": [float(w) for w in result.weights],
                "draws": draws,
                "seed": seed,
                "levels": list(LEVELS),
                "cap": True,
                "rho_defaults": dict(stats.RHO_DEFAULTS),
                "kappa_bounds": [1.0, 10_000.0],
                "interval": interval,
            },
            registration_field="invokerank.interval",
            runs=runset(prompts.units, f"arm {meta.id}; positive tasks; status ok"),
        ),
    )


def _with_calibrated(
    score: IntentScore, boot: BootstrapScore, c: int, interval: ScoreInterval
) -> IntentScore:
    """An intent's score with the calibrated intervals beside the published ones, and the
    registered method's as its intervals."""
    calibrated = [
        _iv(boot.q_low[lv][c], boot.q_high[lv][c], lv, boot.intent_method) for lv in LEVELS
    ]
    return score.model_copy(
        update={
            "calibrated": calibrated,
            "published": score.intervals,
            "intervals": calibrated if interval == "calibrated" else score.intervals,
        }
    )


def mark_ties(arms: list[ArmInvokeRank]) -> list[ArmInvokeRank]:
    """Fill ``tied_with``: same evidence class and level, overlapping 90% roll-ups."""
    scored = [a for a in arms if a.q is not None and a.intervals]
    lows = [a.intervals[0].low if a.intervals[0].low is not None else math.nan for a in scored]
    highs = [a.intervals[0].high if a.intervals[0].high is not None else math.nan for a in scored]
    overlap = stats.intervals_overlap(lows, highs) if scored else np.zeros((0, 0), bool)
    ties: dict[str, list[str]] = {}
    for i, a in enumerate(scored):
        ties[a.arm] = [
            b.arm
            for j, b in enumerate(scored)
            if i != j
            and overlap[i, j]
            and (a.evidence_class, a.level) == (b.evidence_class, b.level)
        ]
    return [a.model_copy(update={"tied_with": ties.get(a.arm, [])}) for a in arms]


def arm_metas(reg: Registration) -> list[ArmMeta]:
    out = []
    for arm in reg.arms:
        config = arm_config(reg, arm.id)
        out.append(
            ArmMeta(
                id=arm.id,
                surface=arm.surface,
                control=arm.control,
                configuration_digest=config.digest(),
                model=config.as_json().get("model"),
            )
        )
    return out


def _by_arm(observations: Sequence[Obs]) -> dict[str, list[Obs]]:
    """The observations of each arm, in their order (every block of an arm reads only its
    own arm's runs, so each gets its own instead of filtering all of them)."""
    out: dict[str, list[Obs]] = defaultdict(list)
    for o in observations:
        out[o.arm].append(o)
    return out


def invokerank_section(
    observations: Sequence[Obs],
    metas: Sequence[ArmMeta],
    seed: int | None,
    intent_weights: Mapping[str, float] | None = None,
    native: Mapping[str, bool] | None = None,
    interval: ScoreInterval = "published",
    branded: Collection[str] = frozenset(),
) -> InvokeRankReport | None:
    """The InvokeRank section over the given arms (None when no run was analysed);
    ``interval``: the registered interval method of the score; ``branded``: the task ids
    whose prompt names the focal integration (the Invoke Rating's branded term)."""
    parts = SectionParts.of(
        observations,
        metas,
        seed,
        intent_weights=intent_weights,
        native=native,
        interval=interval,
        branded=branded,
    )
    return parts.assembled([block() for block in parts.arms])


@dataclass(frozen=True)
class SectionParts:
    """The section as independent pieces of work: each arm's block (a pure function of
    that arm's runs, so ``build_report`` may compute blocks in other processes), and
    :meth:`assembled`, the section from the blocks in arm order."""

    arms: list[Callable[[], ArmInvokeRank]]
    seed: int | None
    interval: ScoreInterval
    empty: bool  # no run analysed: no section

    @classmethod
    def of(
        cls, observations: Sequence[Obs], metas: Sequence[ArmMeta], seed: int | None, **options: Any
    ) -> SectionParts:
        """The parts over ``metas``' arms; ``options``: :func:`arm_invokerank`'s keywords, as
        :func:`invokerank_section` takes them."""
        by_arm = _by_arm(observations)
        blocks: list[Callable[[], ArmInvokeRank]] = [
            partial(arm_invokerank, by_arm.get(meta.id, []), meta, seed, **options)
            for meta in metas
        ]
        interval = options.get("interval", "published")
        return cls(blocks if observations else [], seed, interval, not observations)

    def assembled(self, arms: list[ArmInvokeRank]) -> InvokeRankReport | None:
        if self.empty:
            return None
        return InvokeRankReport(
            note=NOTE + " " + INTERVAL_NOTES[self.interval],
            display_rule=DISPLAY_RULE,
            interval_method=self.interval,
            levels=list(LEVELS),
            draws=4000,
            seed=self.seed,
            pass_k=PASS_K,
            arms=mark_ties(arms),
        )


def invokerank_report(
    reg: Registration,
    observations: Sequence[Obs],
    native: Mapping[str, bool] | None = None,
    branded: Collection[str] = frozenset(),
    offers: Mapping[str, ArmOffer] | None = None,
) -> InvokeRankReport | None:
    """The section for a registration's analysed runs; ``native``: the native judge's
    verdicts by record id, for the Agent Resolution Split; ``branded``: the ids of the
    corpus tasks recorded ``branded: true``; ``offers``: each arm's offer as run, for the
    per-server funnel."""
    parts = invokerank_parts(reg, observations, native, branded, offers)
    return parts.assembled([block() for block in parts.arms])


def invokerank_parts(
    reg: Registration,
    observations: Sequence[Obs],
    native: Mapping[str, bool] | None = None,
    branded: Collection[str] = frozenset(),
    offers: Mapping[str, ArmOffer] | None = None,
) -> SectionParts:
    """:func:`invokerank_report` in pieces (``build_report`` spreads the arms' blocks
    over processes)."""
    metas = [replace(m, offer=(offers or {}).get(m.id)) for m in arm_metas(reg)]
    return SectionParts.of(
        observations,
        metas,
        reg.design.seed,
        intent_weights=reg.intent_weights,
        native=native,
        interval=reg.invokerank.interval if reg.invokerank is not None else "published",
        branded=branded,
    )


# --- First choices: Invoke Rating, shares, Lever against the best competitor -----------
#
# A run's choice set is the servers its offer listed, in listing order (position 0 is
# listed first), with the outside option "no tool"; its first choice is the offer's
# ``first_server`` (no external call: the outside option). A run whose first call went
# to nothing listed cannot be placed and is dropped (counted). A task may record that its
# prompt names the focal integration (``branded: true`` in the corpus): the branded-prompt
# term is then 1 for the focal servers listed to that task's runs and 0 elsewhere; it is
# fitted when some run's task is branded and reported null otherwise (not identified).
# The eligible set of an intent is every server listed to its runs with role focal or
# competitor (decoys never count): the registration has no eligibility field, so this
# is the owner-approved pool of the seed's 5.1, not a neutral eligibility (3.4).

NO_TOOL = frozenset({"answered_without_search", "searched_then_declined", "unresolved"})
ELIGIBLE_ROLES = frozenset({"focal", "competitor"})
ELIGIBLE_NOTE = (
    "the servers listed to the intent's runs with role focal or competitor (the pool as "
    "registered; decoys excluded); not a neutral eligibility (InvokeRank 3.4)"
)


@dataclass(frozen=True)
class Choices:
    """An arm's positive runs as first choices over their listed servers."""

    keys: list[str]
    roles: list[str]
    chosen: list[int]  # -1: no tool
    available: list[list[bool]]
    position: list[list[float]]
    intents: list[str]
    cell: list[int]
    prompt: list[int]
    units: list[tuple[str, str, int]]
    dropped: int
    branded: list[list[float]] | None = None  # None: no run's task is branded


def first_choices(runs: Sequence[Obs], branded: Collection[str] = frozenset()) -> Choices | None:
    """The runs that recorded an offer and a terminal class, as choice sets (or None);
    ``branded``: the task ids whose prompt names the focal integration."""
    usable = [o for o in runs if o.ok and o.offer is not None and o.terminal_class is not None]
    keys: dict[str, str] = {}
    for o in usable:
        for server in (o.offer or {}).get("servers") or []:
            keys.setdefault(str(server["key"]), str(server["role"]))
    placed, dropped = [], 0
    for o in usable:
        first = o.first_server
        if (first is None and o.terminal_class not in NO_TOOL) or (
            first is not None and first not in keys
        ):
            dropped += 1
            continue
        placed.append(o)
    if not placed or not keys:
        return None
    order = list(keys)
    column = {k: j for j, k in enumerate(order)}
    intents = sorted({o.intent for o in placed})
    cells = {intent: c for c, intent in enumerate(intents)}
    tasks = {task: i for i, task in enumerate(dict.fromkeys(o.task_id for o in placed))}
    by_listing: dict[tuple[str, ...], tuple[list[bool], list[float]]] = {}
    sets = [_choice_set(o, order, by_listing) for o in placed]
    return Choices(
        keys=order,
        roles=[keys[k] for k in order],
        chosen=[-1 if o.first_server is None else column[o.first_server] for o in placed],
        available=[a for a, _ in sets],
        position=[p for _, p in sets],
        intents=intents,
        cell=[cells[o.intent] for o in placed],
        prompt=[tasks[o.task_id] for o in placed],
        units=[o.unit for o in placed],
        dropped=dropped,
        branded=_branded(placed, [keys[k] for k in order], branded),
    )


def _choice_set(
    o: Obs,
    order: Sequence[str],
    seen: dict[tuple[str, ...], tuple[list[bool], list[float]]] | None = None,
) -> tuple[list[bool], list[float]]:
    """Which of ``order``'s servers run ``o`` listed, and at which position (0: first);
    ``seen``: the answers so far by listing (the runs of an arm mostly list the same
    servers in the same order), each run getting its own copy of the lists."""
    listed = tuple(str(s["key"]) for s in (o.offer or {}).get("servers") or [])
    if seen is not None and listed in seen:
        available, position = seen[listed]
        return list(available), list(position)
    at = {k: i for i, k in reversed(list(enumerate(listed)))}  # first listing wins
    answer = [k in at for k in order], [float(at[k]) if k in at else 0.0 for k in order]
    if seen is not None:
        seen[listed] = (list(answer[0]), list(answer[1]))
    return answer


def _branded(
    placed: Sequence[Obs], roles: Sequence[str], branded: Collection[str]
) -> list[list[float]] | None:
    """1 for the focal servers of runs whose task is branded (None: no such run)."""
    if not any(o.task_id in branded for o in placed):
        return None
    return [[float(o.task_id in branded and r == "focal") for r in roles] for o in placed]


def _rating_rows(ch: Choices, fit: InvokeRatingResult) -> list[RatingRow]:
    avail = np.asarray(ch.available)
    rows = []
    for j, key in enumerate(ch.keys):
        beta = float(fit.beta[j])
        rows.append(
            RatingRow(
                integration=key,
                role=ch.roles[j],
                listed=int(avail[:, j].sum()),
                chosen=int(fit.chosen[j + 1]),
                beta=_none(beta),
                se=_none(float(fit.se[j])),
                rating=_none(float(fit.rating[j])),
                intervals=[
                    _iv(
                        fit.rating_low[lv][j],
                        fit.rating_high[lv][j],
                        lv,
                        f"prompt bootstrap percentile ({fit.resamples} resamples, within intents)",
                    )
                    for lv in LEVELS
                ],
            )
        )
    return rows


def invoke_rating_block(ch: Choices, arm: str, seed: int | None) -> InvokeRating:
    """The Invoke Rating of an arm's listed servers (:func:`prereg.stats.invoke_rating`)."""
    fit = invoke_rating(
        ch.chosen,
        ch.available,
        intent=ch.cell,
        prompt=ch.prompt,
        position=ch.position,
        branded=ch.branded,
        prior_sd=RATING_PRIOR_SD,
        resamples=RATING_RESAMPLES,
        seed=seed,
        levels=LEVELS,
    )
    never = [k for k, c in zip(ch.keys, fit.chosen[1:], strict=True) if c == 0]
    reason = "fitted"
    if fit.chosen[0] == 0:
        reason = "no run chose no tool: the ratings are not identified against the outside option"
    elif not fit.converged:
        reason = (
            "the likelihood has no finite maximum (choices separated by position or intent): "
            "not identified"
        )
    elif never:
        reason = f"never chosen first (rating unbounded below, shown null): {', '.join(never)}"
    if fit.converged and fit.resamples and np.all(np.isnan(fit.rating_low[LEVELS[0]])):
        reason += (
            f"; {fit.unidentified_resamples} of {fit.resamples} bootstrap resamples not "
            "identified: no interval"
        )
    return InvokeRating(
        method=fit.method,
        reason=reason,
        runs=fit.runs,
        prompts=fit.prompts,
        no_tool=int(fit.chosen[0]),
        dropped=ch.dropped,
        position=fit.position,
        position_se=fit.position_se,
        branded=fit.branded,
        branded_se=fit.branded_se,
        prior_sd=fit.prior_sd,
        resamples=fit.resamples,
        unidentified_resamples=fit.unidentified_resamples,
        rows=_rating_rows(ch, fit),
        provenance=Provenance(
            function="prereg.stats.invokerank.invoke_rating",
            parameters={
                "prior_sd": RATING_PRIOR_SD,
                "resamples": RATING_RESAMPLES,
                "seed": seed,
                "levels": list(LEVELS),
                "position": "listing position in the run's offer (0 = first)",
                "branded": "1 for the focal servers of runs whose task is branded"
                if ch.branded is not None
                else "no run's task is branded: term not fitted",
            },
            registration_field=None,
            runs=runset(ch.units, f"arm {arm}; positive tasks; status ok; offer recorded"),
        ),
    )


def _eligible(ch: Choices) -> Any:
    avail = np.asarray(ch.available)
    cell = np.asarray(ch.cell)
    roles = np.array([r in ELIGIBLE_ROLES for r in ch.roles])
    listed = np.stack([avail[cell == c].any(axis=0) for c in range(len(ch.intents))])
    return listed & roles[None, :]


def shares_block(ch: Choices, arm: str, seed: int | None) -> ChoiceShares:
    """Selection Share per contested intent and its roll-up (the Invoke Share needs every
    eligible integration's Executed and Completed, which replayed competitors never have)."""
    eligible = _eligible(ch)
    chosen = np.asarray(ch.chosen)
    hits = np.zeros((chosen.size, len(ch.keys)))
    picked = chosen >= 0
    hits[np.flatnonzero(picked), chosen[picked]] = 1.0
    hits = hits * eligible[np.asarray(ch.cell)]
    got = choice_shares(hits, ch.cell, eligible, prompt=ch.prompt, seed=seed, levels=LEVELS)
    method = f"prompt bootstrap percentile ({got.resamples} resamples, within intents)"
    rows = []
    for c, intent in enumerate(ch.intents):
        if not got.contested[c]:
            continue
        for j in np.flatnonzero(eligible[c]):
            rows.append(
                ShareRow(
                    intent=intent,
                    integration=ch.keys[j],
                    hits=int(got.hits[c, j]),
                    share=_none(float(got.share[c, j])),
                    intervals=[
                        _iv(got.low[lv][c, j], got.high[lv][c, j], lv, method) for lv in LEVELS
                    ],
                )
            )
    for j in np.flatnonzero(eligible[got.contested].any(axis=0)) if got.contested.any() else []:
        rows.append(
            ShareRow(
                intent="roll-up",
                integration=ch.keys[j],
                hits=int(got.hits[got.contested, j].sum()),
                share=_none(float(got.rollup[j])),
                intervals=[
                    _iv(got.rollup_low[lv][j], got.rollup_high[lv][j], lv, method) for lv in LEVELS
                ],
            )
        )
    return ChoiceShares(
        label="Selection Share",
        reason="competitors are replayed, so no eligible competitor has Executed or "
        "Completed: every intent is computed at Surfaced x Selected (first choice) and "
        "labelled Selection Share (4.2)",
        eligible=ELIGIBLE_NOTE,
        contested_intents=[i for i, c in zip(ch.intents, got.contested, strict=True) if c],
        rows=rows,
        provenance=Provenance(
            function="prereg.stats.invokerank.choice_shares",
            parameters={"resamples": got.resamples, "seed": seed, "weights": "equal"},
            registration_field=None,
            runs=runset(ch.units, f"arm {arm}; positive tasks; status ok; offer recorded"),
        ),
    )


def competitor_levers(
    result: stats.InvokeRankResult, prompts: Prompts, ch: Choices
) -> list[CompetitorLever]:
    """Lever at Surfaced x Selected against each intent's best competitor: the focal
    posterior r_D r_S against the competitor's first-choice share (its only observed
    stage), scaled to the focal Q: Q (r_best / r_focal - 1)^+ (4.2)."""
    comp = [j for j, role in enumerate(ch.roles) if role == "competitor"]
    cell = np.asarray(ch.cell)
    chosen = np.asarray(ch.chosen)
    out = []
    for c, intent in enumerate(prompts.intents):
        focal = float(result.posterior_means[c, 0] * result.posterior_means[c, 1])
        mine = cell == ch.intents.index(intent) if intent in ch.intents else np.zeros(0, bool)
        rates = [float(np.mean(chosen[mine] == j)) if mine.any() else math.nan for j in comp]
        lever, best = competitor_lever(
            [[focal]], np.asarray(rates, dtype=float).reshape(len(comp), 1, 1)
        )
        b = int(best[0])
        scale = float(result.q_exact[c]) / focal if focal > 0 else math.nan
        out.append(
            CompetitorLever(
                intent=intent,
                best_competitor=None if b < 0 else ch.keys[comp[b]],
                focal_rate=focal,
                competitor_rate=None if b < 0 else rates[b],
                lever=None if b < 0 else _none(float(lever[0, 0]) * scale),
            )
        )
    return out


# --- Terminal classes (Figure 4) and the Agent Resolution Split -------------------------

SPLIT_NOTE_DEGENERATE = (
    "{n} positive run(s) ended with no external call and carry no native-judge verdict "
    "({why}): they are kept in the denominator as 'unjudged', and the "
    "Host Self-Serve Rate and No-tool Decline Rate are unknown. The published split, "
    "which drops unjudged runs from its denominator, is not shown (the seed's degenerate "
    "split, 6.3)."
)


def terminal_rows(observations: Sequence[Obs], arm: str) -> list[TerminalRow]:
    """Recorded terminal classes per intent: positive runs, then negative runs apart."""
    out = []
    for polarity in ("positive", "negative"):
        runs = [
            o
            for o in observations
            if o.arm == arm and o.polarity == polarity and o.ok and o.terminal_class is not None
        ]
        if not runs:
            continue
        intents = sorted({o.intent for o in runs})
        counts = terminal_counts(
            [str(o.terminal_class) for o in runs],
            [intents.index(o.intent) for o in runs],
            len(intents),
        )
        names = TERMINAL_CLASSES
        for label, row in [("all intents", counts.sum(axis=0)), *zip(intents, counts, strict=True)]:
            out.append(
                TerminalRow(
                    intent=label,
                    polarity=polarity,
                    runs=int(row.sum()),
                    counts={n: int(v) for n, v in zip(names, row, strict=True)},
                )
            )
    return out


def _rate(value: stats.ProportionInterval | None) -> ResolutionRate | None:
    if value is None:
        return None
    return ResolutionRate(
        rate=float(value.estimate),
        successes=int(value.successes),
        runs=int(value.trials),
        interval=_iv(value.low, value.high, LEVELS[0], value.method),
    )


def resolution_block(
    observations: Sequence[Obs], arm: str, native: Mapping[str, bool] | None = None
) -> ResolutionSplitReport | None:
    """The Agent Resolution Split of the arm's positive runs; ``native``: record id -> the
    native judge's parsed verdict (a run without one is unjudged)."""
    runs = [
        o
        for o in observations
        if o.arm == arm and o.polarity == "positive" and o.ok and o.terminal_class is not None
    ]
    if not runs:
        return None
    intents = sorted({o.intent for o in runs})
    tasks = list(dict.fromkeys(o.task_id for o in runs))
    split = resolution_split(
        [str(o.terminal_class) for o in runs],
        [(native or {}).get(o.record_id) for o in runs],
        [intents.index(o.intent) for o in runs],
        [tasks.index(o.task_id) for o in runs],
        len(intents),
        level=LEVELS[0],
    )
    names = SPLIT_CLASSES
    note = (
        SPLIT_NOTE_DEGENERATE.format(
            n=split.unjudged,
            why="no native judge has run" if not native else "not judged yet, or unparseable",
        )
        if split.degenerate
        else "every no-tool run is judged"
    )
    return ResolutionSplitReport(
        runs=len(runs),
        counts={n: int(v) for n, v in zip(names, split.counts.sum(axis=0), strict=True)},
        shares={n: float(v) for n, v in zip(names, split.shares, strict=True)},
        weighted_shares={n: float(v) for n, v in zip(names, split.weighted_shares, strict=True)},
        unjudged=split.unjudged,
        degenerate=split.degenerate,
        note=note,
        host_self_serve=_rate(split.host_self_serve),
        no_tool_decline=_rate(split.no_tool_decline),
        provenance=Provenance(
            function="prereg.stats.invokerank.resolution_split",
            parameters={"level": LEVELS[0], "weights": "equal over intents"},
            registration_field=None,
            runs=runset([o.unit for o in runs], f"arm {arm}; positive tasks; status ok"),
        ),
    )


def choice_blocks(
    observations: Sequence[Obs],
    arm: str,
    seed: int | None,
    positive: Sequence[Obs],
    native: Mapping[str, bool] | None = None,
    branded: Collection[str] = frozenset(),
    choices: Choices | None = None,
) -> dict[str, Any]:
    """The first-choice, terminal and split blocks of one arm (fields of ArmInvokeRank);
    ``choices``: ``first_choices(positive, branded)`` when the caller has it already."""
    ch = choices if choices is not None else first_choices(positive, branded)
    return {
        "rating": None if ch is None else invoke_rating_block(ch, arm, seed),
        "shares": None if ch is None else shares_block(ch, arm, seed),
        "terminal": terminal_rows(observations, arm),
        "resolution": resolution_block(observations, arm, native),
    }


# --- The funnel per listed integration (issue 17, item 5) -------------------------------
#
# Over an arm's positive runs that listed the integration: surfaced = one of its tools
# entered the host's candidate set before the first call (every listed tool when the run
# recorded no search; not measured where the run's own Surfaced is not), selected = the
# first call went to it, invoked = and that call's arguments validate against the called
# tool's input schema (the focal funnel's definitions, runners/scoring.py, applied to each
# server); executed and completed = selected and the run's Executed / Completed, for the
# focal role only: competitors and decoys are replayed, so they are never executed.
# Each stage is a share of the listing runs with a Jeffreys interval deflated at its own
# rho over prompts (stats.prompt_rate), not a sequential rate.

SERVER_NOTE = {
    "focal": "stages as the focal funnel records them, per copy",
    "competitor": "replayed: never executed, so executed and completed are not measured",
    "decoy": "replayed: never executed, so executed and completed are not measured",
}


def _valid(tool: Tool, arguments: Any) -> bool:
    """Whether ``arguments`` (untrusted data) validate against the tool's input schema."""
    schema = dict(tool.input_schema)
    return bool(validator_for(schema, default=Draft202012Validator)(schema).is_valid(arguments))


class _Validity:
    """:func:`_valid`, remembered per tool and arguments: repeats of a task mostly send
    the same first call, and building a validator per run dominated the funnel's cost.
    Arguments are keyed by their type and ``repr``, which for parsed JSON (dicts, lists,
    strings, numbers, booleans, null) writes every value back exactly and keeps the
    types apart (1, 1.0 and True differ; a key order that differs only misses); any
    other object is checked every time."""

    def __init__(self) -> None:
        self.seen: dict[tuple[int, str], bool] = {}

    def __call__(self, tool: Tool, arguments: Any) -> bool:
        if not _plain_json(arguments):
            return _valid(tool, arguments)
        key = (id(tool), repr(arguments))
        if key not in self.seen:
            self.seen[key] = _valid(tool, arguments)
        return self.seen[key]


_JSON_LEAVES = (str, int, float, bool, type(None))


def _plain_json(value: Any) -> bool:
    """Whether ``value`` is made of what a JSON parser makes (so its repr is faithful)."""
    if type(value) is dict:
        return all(type(k) is str and _plain_json(v) for k, v in value.items())
    if type(value) is list:
        return all(_plain_json(v) for v in value)
    return type(value) in _JSON_LEAVES


def _server_hits(
    o: Obs, key: str, role: str, tools: Mapping[str, Tool], valid: Callable[[Tool, Any], bool]
) -> list[Any]:
    """[surfaced, selected, invoked, executed, completed] of server ``key`` in run ``o``
    (None: not measured); ``tools``: the run's listed tools by name, for this server;
    ``valid``: :func:`_valid` or a remembering one."""
    outcomes = o.outcomes
    surfaced: bool | None = None
    if outcomes[_SURFACED] is not None:
        surfaced = o.surfaced_tools is None or not o.surfaced_tools.isdisjoint(tools)
    selected = o.first_server == key
    call = o.first_call
    invoked = bool(
        selected and call is not None and call[0] in tools and valid(tools[call[0]], call[1])
    )
    later: list[bool | None] = [None, None]
    if role == "focal":
        later = [None if (v := outcomes[k]) is None else bool(selected and v) for k in _LATER]
    return [surfaced, selected, invoked, *later]


_SURFACED = outcome_place("surfaced")
_LATER = (outcome_place("executed"), outcome_place("completed"))


def _listed_name(o: Obs, key: str) -> str | None:
    """The name server ``key`` was listed under in run ``o`` (None: not listed)."""
    return _listed_names(o).get(key)


def _listed_names(o: Obs) -> dict[Any, str]:
    """Every server key run ``o`` listed -> the name it was listed under (the first
    listing of a key wins): :func:`_listed_name` of each key from one pass."""
    names: dict[Any, str] = {}
    for server in (o.offer or {}).get("servers") or []:
        names.setdefault(server["key"], str(server.get("name")))
    return names


def _listed_tools(offer: ArmOffer) -> dict[tuple[str, str], dict[str, Tool]]:
    """(server key, name as listed) -> its tools by name: a clone_swap copy's tool names
    follow the label it carried in the unit, which the run's offer names."""
    return {
        (s.key, s.surface.name): {t.name: t for t in s.surface.tools} for s in offer.every_server()
    }


def server_funnel(runs: Sequence[Obs], offer: ArmOffer | None, arm: str) -> list[ServerFunnel]:
    """The funnel of every integration the arm's positive runs listed (comment above)."""
    if offer is None:
        return []
    tools = _listed_tools(offer)
    usable = [o for o in runs if o.ok and o.offer is not None]
    listed: dict[str, str] = {}
    for o in usable:
        for server in (o.offer or {}).get("servers") or []:
            listed.setdefault(str(server["key"]), str(server["role"]))
    rows = []
    valid = _Validity()
    every = [_listed_names(o) for o in usable]  # once per run, not once per run and server
    for key, role in listed.items():
        names = [run.get(key) for run in every]
        mine = [o for o, name in zip(usable, names, strict=True) if name is not None]
        tasks = {task: i for i, task in enumerate(dict.fromkeys(o.task_id for o in mine))}
        prompt = [tasks[o.task_id] for o in mine]
        hits = [
            _server_hits(o, key, role, tools.get((key, str(name)), {}), valid)
            for o, name in zip(usable, names, strict=True)
            if name is not None
        ]
        stages = []
        for k, stage in enumerate(STAGES):
            measured = [i for i, h in enumerate(hits) if h[k] is not None]
            if not measured:
                stages.append(ServerStage(stage=stage, reached=None, rate=None, interval=None))
                continue
            ji = prompt_rate(
                [float(hits[i][k]) for i in measured], [prompt[i] for i in measured], LEVELS[0]
            )
            stages.append(
                ServerStage(
                    stage=stage,
                    reached=int(ji.successes),
                    rate=float(ji.estimate),
                    interval=_iv(ji.low, ji.high, LEVELS[0], ji.method),
                )
            )
        rows.append(
            ServerFunnel(
                integration=key,
                role=role,
                listed=len(mine),
                stages=stages,
                note=SERVER_NOTE.get(role, ""),
                provenance=Provenance(
                    function=(
                        "prereg.reports.invokerank.section.server_funnel; prereg.stats.prompt_rate"
                    ),
                    parameters={"level": LEVELS[0], "stages": list(STAGES)},
                    registration_field=None,
                    runs=runset(
                        [o.unit for o in mine],
                        f"arm {arm}; positive tasks; status ok; listed {key}",
                    ),
                ),
            )
        )
    return rows
