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
- the roll-up over intents with equal weights (a registration cannot register intent
  weights yet; equal is the seed's default until demand data exist);
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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from prereg import stats
from prereg.registry.schema import Registration
from prereg.registry.units import arm_config
from prereg.reports.model import (
    ArmInvokeRank,
    IntentScore,
    Interval,
    InvokeRankReport,
    NegativeRate,
    Provenance,
    StageEstimate,
    StagePrior,
)
from prereg.reports.observations import STAGES, Obs
from prereg.reports.pairs import runset

LEVELS: tuple[float, float] = (0.90, 0.95)
PASS_K = 3
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
    "of Q = product of stages, equal-weight roll-up. Descriptive: not registered, never "
    "the verdict. Scores are 100 x E[Q]. The seed reports that these intervals "
    "under-cover (7.5); a calibrated interval is not yet offered."
)
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


def _nested(o: Obs) -> bool:
    values = [o.outcome(s) for s in STAGES]
    reached = [v for v in values if v is not None]
    return all(a or not b for a, b in zip(reached, reached[1:], strict=False))


def score_level(runs: Sequence[Obs]) -> tuple[str, tuple[str, ...], str]:
    """(level, stages, reason): the full score, IR_DS, or none (module docstring)."""
    if not runs:
        return "not_computed", (), "no positive run"
    broken = sum(not _nested(o) for o in runs)
    if broken:
        return (
            "not_computed",
            (),
            f"{broken} positive run(s) reach a stage without its parent: a recording "
            "error (the funnel is nested), so no score",
        )
    measured = {s: all(o.outcome(s) is not None for o in runs) for s in STAGES}
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
    return Prompts(
        tasks=tasks,
        intents=intents,
        cell=[intents.index(by_task[t][0].intent) for t in tasks],
        runs=[len(by_task[t]) for t in tasks],
        reached=[[sum(bool(o.outcome(s)) for o in by_task[t]) for s in stages] for t in tasks],
        units=[o.unit for o in runs],
    )


def _none(value: float) -> float | None:
    return None if not math.isfinite(value) else float(value)


def _iv(low: Any, high: Any, level: float, method: str) -> Interval:
    return Interval(low=_none(float(low)), high=_none(float(high)), level=level, method=method)


def _stage_estimate(fit: stats.FunnelStage, c: int, intent: str) -> StageEstimate:
    a, b = fit.posterior_alpha[c], fit.posterior_beta[c]
    low, high = stats.beta_interval(a, b, LEVELS[0])
    n, y, deff = int(fit.trials[c]), int(fit.successes[c]), float(fit.deff[c])
    displayed = None
    if n:
        ji = stats.jeffreys_interval(y, n, level=LEVELS[0], deff=deff)
        displayed = _iv(ji.low, ji.high, LEVELS[0], ji.method)
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
                    _iv(result.q_low[lv][c], result.q_high[lv][c], lv, "equal-tailed, Q draws")
                    for lv in LEVELS
                ],
                stages=[_stage_estimate(f, c, intent) for f in result.fits],
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


def arm_invokerank(
    observations: Sequence[Obs], meta: ArmMeta, seed: int | None, draws: int = 4000
) -> ArmInvokeRank:
    """The InvokeRank block of one arm (module docstring)."""
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
    }
    if level == "not_computed":
        return ArmInvokeRank(**base, level=level, reason=reason, stages=[], q=None)
    prompts = prompt_counts(runs, stages)
    result = stats.invokerank(
        prompts.runs, prompts.reached, prompts.cell, stages=stages, draws=draws, seed=seed
    )
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
        intervals=[
            _iv(result.rollup_low[lv], result.rollup_high[lv], lv, "equal-tailed, roll-up draws")
            for lv in LEVELS
        ],
        weights="equal over intents (no intent weights registered)",
        positive_runs=len(runs),
        prompts=len(prompts.tasks),
        intents=_intent_scores(result, prompts, meta.id),
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
            },
            registration_field=None,
            runs=runset(prompts.units, f"arm {meta.id}; positive tasks; status ok"),
        ),
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


def invokerank_section(
    observations: Sequence[Obs], metas: Sequence[ArmMeta], seed: int | None
) -> InvokeRankReport | None:
    """The InvokeRank section over the given arms (None when no run was analysed)."""
    if not observations:
        return None
    arms = mark_ties([arm_invokerank(observations, meta, seed) for meta in metas])
    return InvokeRankReport(
        note=NOTE,
        display_rule=DISPLAY_RULE,
        levels=list(LEVELS),
        draws=4000,
        seed=seed,
        pass_k=PASS_K,
        arms=arms,
    )


def invokerank_report(reg: Registration, observations: Sequence[Obs]) -> InvokeRankReport | None:
    """The section for a registration's analysed runs (``build_report`` calls this)."""
    return invokerank_section(observations, arm_metas(reg), reg.design.seed)
