"""The Invoke Rating (4.2): R = 1000 + 400 beta / ln 10 per alternative.

A conditional logit over first choice with the outside option "no tool", and its
percentile interval from a bootstrap over prompts within intents. The seed's silences
and the readings chosen are in the comment block below.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from prereg.stats._validate import count, positive
from prereg.stats._validate import levels as _levels
from prereg.stats.invokerank.batch import _Batch
from prereg.stats.invokerank.choices import (
    ChoiceRuns,
    RatingTerms,
    _choice_runs,
    _design,
    _terms,
)
from prereg.stats.invokerank.logit import LogitFit, fit_choice_logit
from prereg.stats.invokerank.model import LEVELS, FloatArray
from prereg.stats.invokerank.resample import _run_weights

# --- Invoke Rating: conditional logit over first choice (4.2) ---------------------------
#
# Readings where the seed is silent (stated here and in docs/invokerank.md):
#
# - Choice set: every alternative available to the run (the integrations it listed) plus
#   the outside option "no tool" at utility 0. A run whose first call went to nothing
#   listed is the caller's to drop (it cannot be placed in the choice set).
# - Position term gamma: linear in the listing position (0 = listed first), one
#   coefficient shared by every alternative. Branded term lambda: an indicator that the
#   prompt names the alternative. Either term is dropped (and reported null) when it does
#   not vary within choice sets, where it is not identified.
# - Partial pooling: intent effects u_jc are deviations from the integration's beta_j
#   with a Gaussian prior N(0, prior_sd^2), i.e. a ridge penalty sum u^2 / (2 prior_sd^2)
#   on them only (beta, gamma and lambda are unpenalised). prior_sd is fixed, 1 on the
#   logit scale by default: the seed gives no value and no rule for estimating it.
# - Fit: the penalised log-likelihood is maximised by a trust-region Newton method
#   (scipy's trust-exact, exact gradient and Hessian), the seed's "penalised batch
#   Newton-Raphson" through a maintained optimiser. Unpenalised, the estimates and their
#   standard errors (inverse observed information) are statsmodels' ConditionalLogit's.
# - Boundaries: an alternative never chosen has beta = -inf (its rating is unbounded
#   below) and is fitted out of the choice sets (its limiting likelihood); when the
#   outside option is never chosen the ratings are not identified (nan). In a bootstrap
#   resample the same rules apply, so a percentile bound may be -inf (shown as null).
#   A resample whose fit is not identified (no run chose no tool, or the optimiser finds
#   no finite maximum) is left out; when more than 10% are, no interval is given.
# - Interval: percentile intervals of R from a bootstrap over prompts (200 resamples by
#   default), resampling prompts within intents so that every intent stays represented.

RATING_ORIGIN = 1000.0
RATING_SCALE = 400.0 / math.log(10.0)
RATING_RESAMPLES = 200
#: More unidentified resamples than this share and the rating's interval is not shown.
UNIDENTIFIED_SHARE = 0.10


def rating_from_beta(beta: Any) -> Any:
    """R = 1000 + 400 beta / ln 10: 1000 is "as likely to be chosen as no tool at all"."""
    return RATING_ORIGIN + RATING_SCALE * np.asarray(beta, dtype=np.float64)


def _betas(runs: ChoiceRuns, prior_sd: float | None, start: Any = None) -> FloatArray:
    """beta per alternative for one (re)sample: -inf never chosen, nan not identified."""
    j = runs.available.shape[1]
    out = np.full(j, -np.inf)
    if not np.any(runs.chosen == -1):
        return np.full(j, np.nan)
    terms = _terms(runs, prior_sd)
    if terms.kept.size == 0:
        return out
    fit = fit_choice_logit(_design(runs, terms, prior_sd), start)
    out[terms.kept] = fit.params[: terms.kept.size] if fit.converged else np.nan
    return out


@dataclass(frozen=True)
class InvokeRatingResult:
    """Invoke Rating per alternative (4.2): beta, R = 1000 + 400 beta / ln 10, intervals."""

    beta: FloatArray  # (J,) -inf: never chosen; nan: not identified
    se: FloatArray  # (J,) inverse observed information (penalised)
    rating: FloatArray  # (J,)
    rating_low: dict[float, FloatArray]  # prompt-bootstrap percentile bounds per level
    rating_high: dict[float, FloatArray]
    position: float | None  # gamma per listing position (None: not identified)
    position_se: float | None
    branded: float | None  # lambda (None: not identified)
    branded_se: float | None
    intent_effects: FloatArray | None  # (J, C) u_jc, partially pooled (None: none fitted)
    chosen: NDArray[np.int64]  # (J + 1,) runs choosing no tool, then each alternative
    runs: int
    prompts: int
    prior_sd: float | None
    resamples: int
    unidentified_resamples: int
    converged: bool
    loglik: float
    method: str


def invoke_rating(
    chosen: Any,
    available: Any,
    *,
    intent: Any = None,
    prompt: Any = None,
    position: Any = None,
    branded: Any = None,
    prior_sd: float | None = 1.0,
    resamples: int = RATING_RESAMPLES,
    seed: int | None = 0,
    levels: Sequence[float] = LEVELS,
) -> InvokeRatingResult:
    """The Invoke Rating: a conditional logit over first choice with an outside option.

    ``chosen[t]`` is the alternative run ``t`` called first (-1: no external call),
    ``available[t, j]`` whether alternative ``j`` was listed to the run, ``intent[t]``
    its intent cell (for partially pooled intent effects; ``prior_sd=None`` fits none),
    ``prompt[t]`` its prompt (the bootstrap unit; default: every run its own),
    ``position[t, j]`` the listing position (0 = first) and ``branded[t, j]`` whether
    the prompt names the alternative. Readings of the seed: the comment block above.
    ``resamples=0`` fits the ratings alone (every interval nan). ValueError naming the
    argument for no runs, a choice that is NaN, fractional or not an index, an
    availability that is not 0/1, a missing or fractional intent or prompt code,
    lengths that differ, a ``prior_sd`` that is not finite and positive, a negative
    ``resamples`` and a level outside (0, 1).
    """
    data = _choice_runs(chosen, available, intent, prompt, position, branded)
    if prior_sd is not None:
        positive(prior_sd, "prior_sd (or None: no intent effects)")
    resamples = count(resamples, "resamples")  # 0: no bootstrap, no interval
    levels = _levels(levels)
    j = data.available.shape[1]
    counts = np.bincount(data.chosen + 1, minlength=j + 1).astype(np.int64)
    terms = _terms(data, prior_sd)
    beta, se = np.full(j, -np.inf), np.full(j, np.nan)
    fit: LogitFit | None = None
    if counts[0] == 0:
        beta[:] = np.nan
    elif terms.kept.size:
        fit = fit_choice_logit(_design(data, terms, prior_sd))
        k = terms.kept.size
        if fit.converged:
            beta[terms.kept] = fit.params[:k]
            variance = np.diag(fit.cov)[:k]
            se[terms.kept] = np.sqrt(np.where(variance > 0, variance, np.nan))
        else:  # a flat or separated likelihood: not identified
            beta[:], fit = np.nan, None
    boot, unidentified = _rating_bootstrap(data, prior_sd, resamples, seed, fit, terms)
    if unidentified > UNIDENTIFIED_SHARE * resamples:
        boot = boot[:0]  # a percentile over the few identified resamples would mislead
    rating = rating_from_beta(beta)
    with np.errstate(invalid="ignore"):  # a bound at -inf (never chosen in a resample)
        lows = {lv: np.quantile(boot, (1 - lv) / 2, axis=0) for lv in levels} if boot.size else {}
        highs = {lv: np.quantile(boot, (1 + lv) / 2, axis=0) for lv in levels} if boot.size else {}
    nan_j = np.full(j, np.nan)
    return InvokeRatingResult(
        beta=beta,
        se=se,
        rating=rating,
        rating_low={lv: lows.get(lv, nan_j) for lv in levels},
        rating_high={lv: highs.get(lv, nan_j) for lv in levels},
        **_nuisance(fit if fit is not None and fit.converged else None, terms, j),
        chosen=counts,
        runs=int(data.chosen.size),
        prompts=int(np.unique(data.prompt).size),
        prior_sd=prior_sd,
        resamples=int(resamples),
        unidentified_resamples=unidentified,
        converged=fit is not None and fit.converged,
        loglik=math.nan if fit is None else fit.loglik,
        method=(
            "conditional logit over first choice with the outside option 'no tool' at "
            "utility 0, linear position term, branded-prompt term, intent effects with a "
            f"N(0, {prior_sd}^2) prior (trust-region Newton); percentile interval from "
            f"{int(resamples)} resamples of prompts within intents"
        ),
    )


def _nuisance(fit: LogitFit | None, terms: RatingTerms, alternatives: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "position": None,
        "position_se": None,
        "branded": None,
        "branded_se": None,
        "intent_effects": None,
    }
    if fit is None:
        return out
    k = terms.kept.size
    col = k + k * terms.cells
    if terms.cells:
        effects = np.full((alternatives, terms.cells), np.nan)
        effects[terms.kept] = fit.params[k:col].reshape(k, terms.cells)
        out["intent_effects"] = effects
    for name, present in (("position", terms.position), ("branded", terms.branded)):
        if present:
            out[name] = float(fit.params[col])
            out[f"{name}_se"] = float(math.sqrt(max(fit.cov[col, col], 0.0)))
            col += 1
    return out


def _rating_bootstrap(
    data: ChoiceRuns,
    prior_sd: float | None,
    resamples: int,
    seed: int | None,
    fit: LogitFit | None,
    terms: RatingTerms,
) -> tuple[FloatArray, int]:
    """R over resamples of prompts within intents (rows: resamples with an identified fit).

    A resample is the original runs with multiplicity weights, so every resample is
    refitted at once by :class:`_Batch` (weighted Newton from the point estimate on the
    design built once); a resample whose terms differ otherwise from the point fit's, or
    whose Newton iterations do not converge, is refitted alone as before.
    """
    j = data.available.shape[1]
    if resamples <= 0 or fit is None:
        return np.empty((0, j)), 0
    rng = np.random.default_rng(seed)
    weights = _run_weights(rng, data.prompt, data.intent, int(resamples))
    batch = _Batch.build(data, terms, prior_sd)
    beta, alone = batch.betas(weights, fit.params)
    for b in np.flatnonzero(alone):
        index = np.repeat(np.arange(data.chosen.size), weights[b].astype(np.int64))
        beta[b] = _betas(data.take(index), prior_sd)
    identified = ~np.any(np.isnan(beta), axis=1)
    return rating_from_beta(beta[identified]), int(np.sum(~identified))
