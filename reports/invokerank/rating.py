"""The first-choice blocks of an arm: the Invoke Rating of its listed servers, the
Selection Share per contested intent, and the Lever against each intent's best
competitor, from :class:`~prereg.reports.invokerank.choices.Choices`.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from typing import Any

import numpy as np

from prereg import stats
from prereg.reports.invokerank.choices import Choices
from prereg.reports.invokerank.counts import Prompts
from prereg.reports.invokerank.intervals import LEVELS, _iv, _none
from prereg.reports.model import (
    ChoiceShares,
    CompetitorLever,
    InvokeRating,
    Provenance,
    RatingRow,
    ShareRow,
)
from prereg.reports.pairs import runset
from prereg.stats.invokerank import (
    RATING_RESAMPLES,
    InvokeRatingResult,
    choice_shares,
    competitor_lever,
    invoke_rating,
    too_few_prompts,
)

#: Gaussian prior SD of the Invoke Rating's intent effects (logit scale; the seed gives none)
RATING_PRIOR_SD = 1.0

# The eligible set of an intent is every server listed to its runs with role focal or
# competitor (decoys never count), narrowed to the competitors the corpus declares
# eligible for the intent (``eligible`` in corpus.yaml, InvokeRank 3.4) where it declares
# any. Without a declaration this is the owner-approved pool of the seed's 5.1, not a
# neutral eligibility (3.4).
ELIGIBLE_ROLES = frozenset({"focal", "competitor"})
ELIGIBLE_NOTE = (
    "the servers listed to the intent's runs with role focal or competitor (the pool as "
    "registered; decoys excluded); not a neutral eligibility (InvokeRank 3.4)"
)
ELIGIBLE_DECLARED_NOTE = (
    "declared per intent in the corpus (eligible): the focal integration and the "
    "competitors the corpus lists for the intent, among the servers listed to its runs "
    "(decoys never); an intent the corpus does not list: every listed competitor. "
    "A neutral eligibility only if the declaration was built as one (InvokeRank 3.4, F)"
)
#: Eligibility by intent: intent -> the competitors declared eligible (an intent not
#: in it: every competitor listed to its runs).
Eligibility = Mapping[str, Collection[str]]
#: Why a row without a rating has no interval.
NO_RATING = "no rating (see the rating's reason): no interval"
#: Why a share's interval has no width (with enough prompts: chosen first by every
#: prompt's runs or by none, in every resample).
SHARE_ZERO_WIDTH = (
    "zero width: every resample of prompts gives this share (chosen first in all or none "
    "of the contested first choices)"
)


def prompts_per_intent(ch: Choices) -> Any:
    """How many distinct prompts each intent of the choice data has (the units its
    bootstraps resample within intents)."""
    pairs = {(c, p) for c, p in zip(ch.cell, ch.prompt, strict=True)}
    return np.bincount([c for c, _ in pairs], minlength=len(ch.intents))


def _rating_rows(ch: Choices, fit: InvokeRatingResult) -> list[RatingRow]:
    """The rows of the rating; the intervals withheld below the small-sample rule (the
    bootstrap resamples prompts within every intent of the fit)."""
    avail = np.asarray(ch.available)
    _, reason = too_few_prompts(prompts_per_intent(ch))
    rows = []
    for j, key in enumerate(ch.keys):
        beta = float(fit.beta[j])
        rating = _none(float(fit.rating[j]))
        rows.append(
            RatingRow(
                integration=key,
                role=ch.roles[j],
                listed=int(avail[:, j].sum()),
                chosen=int(fit.chosen[j + 1]),
                beta=_none(beta),
                se=_none(float(fit.se[j])),
                rating=rating,
                intervals=[
                    _iv(
                        fit.rating_low[lv][j],
                        fit.rating_high[lv][j],
                        lv,
                        f"prompt bootstrap percentile ({fit.resamples} resamples, within intents)",
                        reason=reason if rating is not None else NO_RATING,
                        estimate=rating,
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


def _eligible(ch: Choices, declared: Eligibility | None = None) -> Any:
    """intents x servers: listed to the intent's runs, role focal or competitor, and (a
    competitor) declared eligible for the intent where the corpus declares a set."""
    avail = np.asarray(ch.available)
    cell = np.asarray(ch.cell)
    roles = np.array([r in ELIGIBLE_ROLES for r in ch.roles])
    listed = np.stack([avail[cell == c].any(axis=0) for c in range(len(ch.intents))])
    out = listed & roles[None, :]
    for c, intent in enumerate(ch.intents):
        if declared is None or intent not in declared:
            continue
        for j, (key, role) in enumerate(zip(ch.keys, ch.roles, strict=True)):
            if role == "competitor" and key not in declared[intent]:
                out[c, j] = False
    return out


def ineligible_choices(ch: Choices, eligible: Any) -> int:
    """First choices that went to a competitor not eligible for the run's intent (in no
    share's numerator or denominator)."""
    chosen = np.asarray(ch.chosen)
    cell = np.asarray(ch.cell)
    picked = chosen >= 0
    roles = np.asarray(ch.roles)
    if not picked.any():
        return 0
    to_comp = roles[chosen[picked]] == "competitor"
    return int((to_comp & ~eligible[cell[picked], chosen[picked]]).sum())


def shares_block(
    ch: Choices, arm: str, seed: int | None, eligible_sets: Eligibility | None = None
) -> ChoiceShares:
    """Selection Share per contested intent and its roll-up (the Invoke Share needs every
    eligible integration's Executed and Completed, which replayed competitors never have);
    ``eligible_sets``: the corpus's declared eligible competitors per intent."""
    eligible = _eligible(ch, eligible_sets)
    chosen = np.asarray(ch.chosen)
    hits = np.zeros((chosen.size, len(ch.keys)))
    picked = chosen >= 0
    hits[np.flatnonzero(picked), chosen[picked]] = 1.0
    hits = hits * eligible[np.asarray(ch.cell)]
    got = choice_shares(hits, ch.cell, eligible, prompt=ch.prompt, seed=seed, levels=LEVELS)
    method = f"prompt bootstrap percentile ({got.resamples} resamples, within intents)"
    # the small-sample rule: an intent's rows need its prompts, the roll-up every
    # contested intent's
    per_intent, roll_reason = too_few_prompts(prompts_per_intent(ch), got.contested)
    rows = []
    for c, intent in enumerate(ch.intents):
        if not got.contested[c]:
            continue
        for j in np.flatnonzero(eligible[c]):
            share = _none(float(got.share[c, j]))
            rows.append(
                ShareRow(
                    intent=intent,
                    integration=ch.keys[j],
                    hits=int(got.hits[c, j]),
                    share=share,
                    intervals=[
                        _iv(
                            got.low[lv][c, j],
                            got.high[lv][c, j],
                            lv,
                            method,
                            reason=per_intent[c],
                            zero_width=SHARE_ZERO_WIDTH,
                            estimate=share,
                        )
                        for lv in LEVELS
                    ],
                )
            )
    for j in np.flatnonzero(eligible[got.contested].any(axis=0)) if got.contested.any() else []:
        share = _none(float(got.rollup[j]))
        rows.append(
            ShareRow(
                intent="roll-up",
                integration=ch.keys[j],
                hits=int(got.hits[got.contested, j].sum()),
                share=share,
                intervals=[
                    _iv(
                        got.rollup_low[lv][j],
                        got.rollup_high[lv][j],
                        lv,
                        method,
                        reason=roll_reason,
                        zero_width=SHARE_ZERO_WIDTH,
                        estimate=share,
                    )
                    for lv in LEVELS
                ],
            )
        )
    return ChoiceShares(
        label="Selection Share",
        reason="competitors are replayed, so no eligible competitor has Executed or "
        "Completed: every intent is computed at Surfaced x Selected (first choice) and "
        "labelled Selection Share (4.2)",
        eligible=_eligible_note(ch, eligible, eligible_sets),
        contested_intents=[i for i, c in zip(ch.intents, got.contested, strict=True) if c],
        rows=rows,
        provenance=Provenance(
            function="prereg.stats.invokerank.choice_shares",
            parameters={"resamples": got.resamples, "seed": seed, "weights": "equal"},
            registration_field=None,
            runs=runset(ch.units, f"arm {arm}; positive tasks; status ok; offer recorded"),
        ),
    )


def _eligible_note(ch: Choices, eligible: Any, declared: Eligibility | None) -> str:
    if not declared:
        return ELIGIBLE_NOTE
    note = f"{ELIGIBLE_DECLARED_NOTE}; declared for: {', '.join(sorted(declared))}"
    off = ineligible_choices(ch, eligible)
    if off:
        note += (
            f"; {off} first choice(s) went to a competitor not eligible for the run's "
            "intent: in no share's numerator or denominator"
        )
    return note


def competitor_levers(
    result: stats.InvokeRankResult,
    prompts: Prompts,
    ch: Choices,
    eligible_sets: Eligibility | None = None,
    excluded: Collection[tuple[str, str, int]] = frozenset(),
) -> list[CompetitorLever]:
    """Lever at Surfaced x Selected against each intent's best eligible competitor: the
    focal posterior r_D r_S against the competitor's first-choice share (its only observed
    stage), scaled to the focal Q: Q (r_best / r_focal - 1)^+ (4.2).

    ``result`` and ``prompts`` are the focal fit the Lever reads (the runs the native
    judge found self-served already left out, 4.2); ``excluded``: those runs' units, left
    out of the competitors' first-choice shares too; ``eligible_sets``: the corpus's
    declared eligible competitors per intent (a competitor not eligible for an intent is
    never its best competitor)."""
    comp = [j for j, role in enumerate(ch.roles) if role == "competitor"]
    cell = np.asarray(ch.cell)
    chosen = np.asarray(ch.chosen)
    kept = np.array([u not in excluded for u in ch.units], dtype=bool)
    out = []
    for c, intent in enumerate(prompts.intents):
        focal = float(result.posterior_means[c, 0] * result.posterior_means[c, 1])
        mine = cell == ch.intents.index(intent) if intent in ch.intents else np.zeros(0, bool)
        if mine.size:
            mine = mine & kept
        allowed = None if eligible_sets is None else eligible_sets.get(intent)
        rates = [
            float(np.mean(chosen[mine] == j))
            if mine.any() and (allowed is None or ch.keys[j] in allowed)
            else math.nan
            for j in comp
        ]
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
