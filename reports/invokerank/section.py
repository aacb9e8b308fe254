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
- eligibility (seed 3.4): the Selection Share's denominators and the Lever's best
  competitor range over each intent's eligible set, the competitors the corpus declares
  for it (``eligible``; every competitor when it declares none) and the focal
  integration; both Levers leave out the runs the native judge found self-served (4.2);
- the display rule: arms of the same evidence class and level whose 90% roll-up
  intervals overlap are "reported as tied" (a display rule, not an equivalence test).

Evidence classes are never pooled: a score is computed within one arm, and an arm whose
runs carry more than one evidence class gets none. The section is descriptive: it is
not registered and never feeds the verdict.

This module assembles the section: each arm's block and the section over the arms. The
parts it assembles are its siblings': :mod:`.counts` (runs to the estimator's inputs),
:mod:`.scores` (score, intervals, pooled funnel, weights), :mod:`.negatives` (false
invokes), :mod:`.choices` and :mod:`.rating` (first choices: Invoke Rating, shares,
competitor Lever), :mod:`.terminal` (terminal classes, resolution split) and
:mod:`.servers` (the funnel per listed integration).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import numpy as np

from prereg import stats
from prereg.experiments.offers import ArmOffer
from prereg.registry.schema import Registration
from prereg.registry.units import arm_config
from prereg.reports.invokerank.analyses import (
    REPLICATES_ONE_RUN,
    choice_factors,
    need_test,
    negatives_by_intent,
    replicate_runs,
    rho_block,
    session_counts,
)
from prereg.reports.invokerank.choices import Choices, first_choices
from prereg.reports.invokerank.counts import (
    Prompts,
    _evidence,
    _positive,
    prompt_counts,
    score_level,
    self_served,
)
from prereg.reports.invokerank.intervals import LEVELS, _iv
from prereg.reports.invokerank.negatives import _negatives
from prereg.reports.invokerank.rating import (
    Eligibility,
    competitor_levers,
    invoke_rating_block,
    shares_block,
)
from prereg.reports.invokerank.scores import (
    PASS_K,
    _intent_scores,
    _pass_k,
    _priors,
    _with_calibrated,
    displayed_scores,
    lever_fit,
    pooled_funnel,
    pooled_loss_shares,
    published_intervals,
    roll_up_weights,
)
from prereg.reports.invokerank.servers import server_funnel
from prereg.reports.invokerank.sessions import missing_sessions
from prereg.reports.invokerank.sessions import withheld as withheld_sessions
from prereg.reports.invokerank.terminal import resolution_block, terminal_rows
from prereg.reports.model import (
    ArmInvokeRank,
    HostFunnel,
    InvokeRankReport,
    JudgeInvokeRank,
    Provenance,
    ReplicateRuns,
    StageEstimate,
)
from prereg.reports.observations import STAGES, Obs, outcome_place
from prereg.reports.pairs import runset
from prereg.stats.invokerank import MIN_PROMPTS, ScoreInterval, bootstrap_score, too_few_prompts

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
    "default). Descriptive: not registered, never the verdict. Scores are 100 x E[Q], "
    "computed exactly as the product of the stage posterior means (the seed's figure; the "
    "Monte Carlo mean of the draws is kept in report.json as q_mc). The seed reports that "
    "the published intervals under-cover (7.5); the calibrated interval is a bootstrap of "
    "the plug-in score over prompts within intents (and sessions), small-sample corrected "
    "(per intent Jeffreys on the bootstrap's effective counts, the roll-up a percentile of "
    "the intents' Jeffreys draws), an interval for the population score widened where "
    "needed to contain the displayed score; it covers near nominal in "
    "bench/invokerank_coverage.py. An interval of an "
    f"intent with fewer than {MIN_PROMPTS} prompts, or over such an intent (roll-up, "
    "rating, shares), is not shown: 'too few prompts (n < m)'."
)
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
    stage: str | None = None  # the registered run stage (arms[].stage): selection, execution
    host: str | None = None  # the arm's host (driver and model), Figure 2's grouping


def arm_invokerank(
    observations: Sequence[Obs],
    meta: ArmMeta,
    seed: int | None,
    draws: int = 4000,
    intent_weights: Mapping[str, float] | None = None,
    native: Mapping[str, bool] | None = None,
    interval: ScoreInterval = "published",
    branded: Collection[str] = frozenset(),
    need_types: Mapping[str, str] | None = None,
    eligible: Eligibility | None = None,
    sessions: int = 1,
    per_session: int = 1,
) -> ArmInvokeRank:
    """The InvokeRank block of one arm (module docstring); ``sessions``/``per_session``: the
    registered replicate sessions and the repeats of each (``design.sessions``; a run's
    session is its repeat // ``per_session``): with two or more, the calibrated interval
    resamples them (its session part) and Figure 7 is drawn; ``eligible``: intent -> the
    competitors the corpus declares eligible for it (an intent not in it: every listed
    competitor), for the Selection Share and the competitor Lever; ``native``: record id -> the
    native judge's verdict (:mod:`prereg.reports.judged.section`); ``interval``: the registered
    interval method, which gives the score's intervals (the other is kept beside them);
    ``branded``: the task ids whose prompt names the focal integration; ``need_types``:
    intent -> need type, for the intent-level test of seed 6.2 (:mod:`.analyses`)."""
    runs = _positive(observations, meta.id)
    level, stages, reason = score_level(runs)
    if meta.stage == "selection" and level == "full":
        # a selection run replays every call: Executed and Completed are refusals by design,
        # not measurements, so the run is scored at Surfaced x Selected (seed 3.2, 5.5)
        level, stages = "selection", STAGES[:2]
        reason = (
            "a selection run (arms[].stage: selection) replays every call, so Executed and "
            "Completed are not measured: scored at Surfaced x Selected and labelled "
            "Selection-level (IR_DS); the execution run measures them"
        )
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
        "stage": meta.stage,
        "host": meta.host,
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
            choice_blocks(
                observations,
                meta.id,
                seed,
                runs,
                native,
                branded,
                choices=choices,
                eligible=eligible,
            )
        )
        base["server_funnel"] = server_funnel(runs, meta.offer, meta.id)
        base["choice_factors"] = choice_factors(base["terminal"])
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
    shown = displayed_scores(result)  # E[Q_c] exactly
    q = float(np.asarray(result.weights) @ shown)  # E[roll-up], exactly
    session_gap = missing_sessions(runs, sessions, per_session)
    if sessions > 1:  # one row per (prompt, session): the interval's session part
        n_rows, y_rows, p_rows, s_rows = session_counts(
            runs, prompts.tasks, stages[-1], per_session
        )
        boot = bootstrap_score(
            n_rows,
            y_rows,
            [prompts.cell[p] for p in p_rows],
            prompt=p_rows,
            session=s_rows,
            weights=weights,
            seed=seed,
            levels=LEVELS,
            centre=shown,
            rollup_centre=q,
        )
        if session_gap is not None:  # a registered session not run: no session part
            boot = withheld_sessions(boot, session_gap)
    else:
        boot = bootstrap_score(
            prompts.runs,
            [r[-1] for r in prompts.reached],
            prompts.cell,
            weights=weights,
            seed=seed,
            levels=LEVELS,
            centre=shown,
            rollup_centre=q,
        )
    per_intent, roll_reason = too_few_prompts(
        np.bincount(prompts.cell, minlength=len(prompts.intents)), result.weights
    )
    published = published_intervals(result.rollup_low, result.rollup_high, q, roll_reason)
    calibrated = [
        _iv(
            boot.rollup_low[lv],
            boot.rollup_high[lv],
            lv,
            boot.method,
            reason=boot.rollup_reason,
            estimate=q,
        )
        for lv in LEVELS
    ]
    base.update(published=published, calibrated=calibrated)
    # the Lever leaves out the runs the native judge found self-served (4.2)
    lever_of = lever_fit(
        result, prompts, runs, stages, self_served(runs, native), draws=draws, seed=seed
    )
    if choices is not None and "competitor" in choices.roles and lever_of.result is not None:
        assert lever_of.prompts is not None
        base["lever_competitor"] = competitor_levers(
            lever_of.result, lever_of.prompts, choices, eligible, lever_of.excluded
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
    intent_scores = [
        _with_calibrated(i, boot, c, interval)
        for c, i in enumerate(_intent_scores(result, prompts, meta.id, per_intent, lever_of))
    ]
    return ArmInvokeRank(
        **base,
        level=level,
        reason=reason,
        stages=list(stages),
        q=q,
        q_mc=result.rollup,
        plug_in=boot.rollup,
        intervals=calibrated if interval == "calibrated" else published,
        weights=weights_text,
        positive_runs=len(runs),
        prompts=len(prompts.tasks),
        intents=intent_scores,
        priors=_priors(result, prompts.intents),
        funnel=_stage_funnel(runs, meta.stage, stages, prompts),
        loss_shares_pooled=pooled_loss_shares(prompts, stages),
        false_invoke=focal,
        any_external=external,
        false_invoke_by_intent=negatives_by_intent(observations, meta.id, rho_s),
        need_test=need_test(intent_scores, need_types),
        rho=rho_block(prompts, stages, seed),
        replicate_runs=_replicates(runs, sessions, per_session, seed, session_gap),
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
                "sessions": sessions,
            },
            registration_field="invokerank.interval",
            runs=runset(prompts.units, f"arm {meta.id}; positive tasks; status ok"),
        ),
    )


def _replicates(
    runs: Sequence[Obs], sessions: int, per_session: int, seed: int | None, gap: str | None
) -> ReplicateRuns | None:
    """Figure 7 of an arm (None without replicate sessions); ``gap``: why not, when a
    registered session has no runs (:mod:`.sessions`)."""
    if sessions < 2:
        return None
    block = replicate_runs(runs, sessions, per_session, seed)
    return block if gap is None else block.model_copy(update={"reason": gap, "rows": []})


def _stage_funnel(
    runs: Sequence[Obs], stage: str | None, stages: Sequence[str], prompts: Prompts
) -> list[StageEstimate]:
    """Figure 2 of an arm: the score's stages; for an arm with a registered run stage, every
    stage measured on every positive run, in funnel order up to the first that is not (a
    selection run up to Invoked: its Executed is the replay's refusal, not a measurement),
    so the execution run shows Invoked and Executed beside the selection run's stages."""
    if stage is None:
        return pooled_funnel(prompts, stages)
    upto = STAGES[:3] if stage == "selection" else STAGES
    measured: list[str] = []
    for name in upto:
        place = outcome_place(name)
        if not all(o.outcomes[place] is not None for o in runs):
            break
        measured.append(name)
    if list(measured) == list(stages):
        return pooled_funnel(prompts, stages)
    return pooled_funnel(prompt_counts(runs, measured), measured)


def mark_ties(arms: list[ArmInvokeRank]) -> list[ArmInvokeRank]:
    """Fill ``tied_with``: same evidence class and level, overlapping 90% roll-ups (the
    score's intervals, which contain the displayed score). An arm without a 90% roll-up
    interval (withheld by the small-sample rule) is tied with none, and ``ties_note``
    says why."""
    scored = [
        a
        for a in arms
        if a.q is not None
        and a.intervals
        and a.intervals[0].low is not None
        and a.intervals[0].high is not None
    ]
    lows = [float(a.intervals[0].low or 0.0) for a in scored]
    highs = [float(a.intervals[0].high or 0.0) for a in scored]
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
    out = []
    for a in arms:
        note = None
        if a.q is not None and a.arm not in ties:
            note = "not decided: no 90% interval"
        out.append(a.model_copy(update={"tied_with": ties.get(a.arm, []), "ties_note": note}))
    return out


def host_funnels(arms: Sequence[ArmInvokeRank]) -> list[HostFunnel]:
    """Figure 2 per host (seed 5.5): the arms with a registered run stage grouped by host
    (driver and model), selection arms beside execution arms; empty without stages."""
    hosts: dict[str, HostFunnel] = {}
    for a in arms:
        if a.stage is None:
            continue
        host = hosts.setdefault(a.host or "host", HostFunnel(host=a.host or "host"))
        (host.selection if a.stage == "selection" else host.execution).append(a.arm)
    return list(hosts.values())


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
                stage=arm.stage,
                host=config.driver + (f" {config.model}" if config.model else ""),
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
    need_types: Mapping[str, str] | None = None,
    eligible: Eligibility | None = None,
    sessions: int = 1,
    per_session: int = 1,
) -> InvokeRankReport | None:
    """The InvokeRank section over the given arms (None when no run was analysed);
    ``sessions``/``per_session``: the replicate sessions (:func:`arm_invokerank`);
    ``eligible``: intent -> the competitors the corpus declares eligible for it;
    ``interval``: the registered interval method of the score; ``branded``: the task ids
    whose prompt names the focal integration (the Invoke Rating's branded term);
    ``need_types``: intent -> need type (the intent-level test of seed 6.2)."""
    parts = SectionParts.of(
        observations,
        metas,
        seed,
        intent_weights=intent_weights,
        native=native,
        interval=interval,
        branded=branded,
        need_types=need_types,
        eligible=eligible,
        sessions=sessions,
        per_session=per_session,
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
    #: the judge-related parts (issue 41, item 3): which judge fills Completed, and each
    #: completion judge's own blocks, computed after the arms' in ``arms`` (one entry per
    #: judge: its key, rubric version, trust, withheld reason and how many blocks it has)
    completed_by: str | None = None
    judges: tuple[tuple[str, str, str, str | None, int], ...] = ()
    #: the registered replicate sessions (``design.sessions``): one says why Figure 7 is
    #: not drawn (:data:`REPLICATES_ONE_RUN`); more, each arm carries its own Figure 7
    sessions: int = 1

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
        sessions = int(options.get("sessions", 1))
        if not observations:
            return cls([], seed, interval, True, sessions=sessions)
        # a completion judge's own InvokeRank: the same blocks over the observations with
        # Completed from its verdicts (reports.judged.section.JudgedObservations)
        judges = []
        for key, (version, trust, withheld, runs) in getattr(observations, "by_judge", {}).items():
            mine = _by_arm(runs)
            metas_of = [m for m in metas if m.id in mine]
            blocks += [partial(arm_invokerank, mine[m.id], m, seed, **options) for m in metas_of]
            judges.append((key, version, trust, withheld, len(metas_of)))
        completed_by = getattr(observations, "completed_by", None)
        return cls(blocks, seed, interval, False, completed_by, tuple(judges), sessions)

    def assembled(self, arms: list[ArmInvokeRank]) -> InvokeRankReport | None:
        if self.empty:
            return None
        judged = arms[len(arms) - sum(j[-1] for j in self.judges) :]
        arms = arms[: len(arms) - len(judged)]
        by_judge = []
        for key, version, trust, withheld, count in self.judges:
            mine, judged = judged[:count], judged[count:]
            by_judge.append(
                JudgeInvokeRank(
                    judge=key,
                    rubric_version=version,
                    trust=trust,
                    withheld=withheld,
                    arms=mark_ties(mine),
                )
            )
        return InvokeRankReport(
            note=NOTE + " " + INTERVAL_NOTES[self.interval],
            display_rule=DISPLAY_RULE,
            interval_method=self.interval,
            levels=list(LEVELS),
            draws=4000,
            seed=self.seed,
            pass_k=PASS_K,
            arms=mark_ties(arms),
            replicates=REPLICATES_ONE_RUN if self.sessions == 1 else None,
            completed_by=self.completed_by,
            by_judge=by_judge,
            hosts=host_funnels(arms),
        )


def invokerank_report(
    reg: Registration,
    observations: Sequence[Obs],
    native: Mapping[str, bool] | None = None,
    branded: Collection[str] = frozenset(),
    offers: Mapping[str, ArmOffer] | None = None,
    need_types: Mapping[str, str] | None = None,
    eligible: Eligibility | None = None,
) -> InvokeRankReport | None:
    """The section for a registration's analysed runs; ``eligible``: the experiment's
    declared eligible competitors per intent (``Experiment.eligible``); ``native``: the
    native judge's verdicts by record id, for the Agent Resolution Split; ``branded``: the
    ids of the corpus tasks recorded ``branded: true``; ``offers``: each arm's offer as run, for the
    per-server funnel; ``need_types``: intent -> need type (seed 6.2's test)."""
    parts = invokerank_parts(reg, observations, native, branded, offers, need_types, eligible)
    return parts.assembled([block() for block in parts.arms])


def invokerank_parts(
    reg: Registration,
    observations: Sequence[Obs],
    native: Mapping[str, bool] | None = None,
    branded: Collection[str] = frozenset(),
    offers: Mapping[str, ArmOffer] | None = None,
    need_types: Mapping[str, str] | None = None,
    eligible: Eligibility | None = None,
) -> SectionParts:
    """:func:`invokerank_report` in pieces (``build_report`` spreads the arms' blocks
    over processes). ``need_types`` default to the registered ``invokerank.need_types``
    (absent: the test says why it is not run)."""
    if need_types is None and reg.invokerank is not None:
        need_types = reg.invokerank.need_types
    metas = [replace(m, offer=(offers or {}).get(m.id)) for m in arm_metas(reg)]
    return SectionParts.of(
        observations,
        metas,
        reg.design.seed,
        intent_weights=reg.intent_weights,
        native=native,
        interval=reg.invokerank.interval if reg.invokerank is not None else "published",
        branded=branded,
        need_types=need_types,
        eligible=eligible or None,
        sessions=reg.design.sessions,
        per_session=reg.design.per_session,
    )


def choice_blocks(
    observations: Sequence[Obs],
    arm: str,
    seed: int | None,
    positive: Sequence[Obs],
    native: Mapping[str, bool] | None = None,
    branded: Collection[str] = frozenset(),
    choices: Choices | None = None,
    eligible: Eligibility | None = None,
) -> dict[str, Any]:
    """The first-choice, terminal and split blocks of one arm (fields of ArmInvokeRank);
    ``choices``: ``first_choices(positive, branded)`` when the caller has it already;
    ``eligible``: the declared eligible competitors per intent (the shares' denominators)."""
    ch = choices if choices is not None else first_choices(positive, branded)
    return {
        "rating": None if ch is None else invoke_rating_block(ch, arm, seed),
        "shares": None if ch is None else shares_block(ch, arm, seed, eligible),
        "terminal": terminal_rows(observations, arm),
        "resolution": resolution_block(observations, arm, native),
    }
