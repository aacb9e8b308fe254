"""The Invoke Share and Selection Share (4.2) per contested intent, and their roll-up.

Plug-in ratios of counts, with a percentile bootstrap over prompts within intents that
keeps the shares' compositional dependence.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from prereg.stats._validate import binary, count, integer_labels, same_length
from prereg.stats._validate import counts as _codes
from prereg.stats._validate import levels as _levels
from prereg.stats.invokerank.model import LEVELS, FloatArray, _weights
from prereg.stats.invokerank.resample import _unit_counts

# --- Invoke Share and Selection Share (4.2) ---------------------------------------------
#
# IS_ic = Q_ic / sum_{j in E_c} Q_jc over a contested intent (two or more eligible
# integrations). Every integration is scored on the same runs of the intent, so Q_jc is
# estimated by the share of those runs that reached the scored level through j (first
# choice j for the Selection Share, D x S; completed through j for the Invoke Share) and
# the runs cancel: the share is a ratio of counts. Plug-in, not the per-integration EB
# posterior, because separate posteriors would not keep the shares' compositional
# dependence (within a run first choices exclude each other), which the seed names as the
# flaw of independent draws. The interval is a percentile bootstrap over prompts within
# intents, which keeps that dependence and the repeat clustering.

SHARE_RESAMPLES = 2000


@dataclass(frozen=True)
class ShareResult:
    """Shares per intent and integration, the roll-up, and their percentile intervals."""

    share: FloatArray  # (C, J) nan: not eligible, not contested, or no eligible hit
    low: dict[float, FloatArray]
    high: dict[float, FloatArray]
    hits: NDArray[np.int64]  # (C, J)
    contested: NDArray[np.bool_]  # (C,)
    rollup: FloatArray  # (J,) weighted mean over contested intents where j is eligible
    rollup_low: dict[float, FloatArray]
    rollup_high: dict[float, FloatArray]
    weights: FloatArray  # (C,) as given (normalised over the intents each roll-up uses)
    resamples: int


def _share_table(run_weights: FloatArray, design: FloatArray, eligible: NDArray[np.bool_]) -> Any:
    """Shares (..., C, J) from the runs' weights (..., T) (resamples as leading axes):
    ``design`` is (T, C J), run t's hits placed at its intent's row."""
    cells, alternatives = eligible.shape
    per = (run_weights @ design).reshape(run_weights.shape[:-1] + (cells, alternatives))
    per = np.where(eligible, per, 0.0)
    total = per.sum(axis=-1, keepdims=True)
    contested = eligible.sum(axis=1) >= 2
    with np.errstate(invalid="ignore", divide="ignore"):
        share = per / total
    return np.where(eligible & contested[:, None] & (total > 0), share, np.nan)


def _share_rollup(share: FloatArray, weights: FloatArray) -> Any:
    w = np.where(np.isfinite(share), weights[:, None], 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.nansum(share * w, axis=-2) / w.sum(axis=-2)


def choice_shares(
    hits: Any,
    intent: Any,
    eligible: Any,
    *,
    prompt: Any = None,
    weights: Any = None,
    resamples: int = SHARE_RESAMPLES,
    seed: int | None = 0,
    levels: Sequence[float] = LEVELS,
) -> ShareResult:
    """Invoke (or Selection) Share per contested intent and its roll-up (comment above).

    ``hits[t, j]`` is 1 when run ``t`` reached the scored level through integration
    ``j``; ``intent[t]`` its intent cell; ``eligible[c, j]`` the eligible set of each
    intent; ``prompt[t]`` the bootstrap unit; ``weights`` the intents' roll-up weights.
    ``resamples=0`` gives the shares alone (every interval nan). ValueError naming the
    argument for no runs, hits or eligibility that are not 0/1 (NaN among them), a
    missing, negative or fractional intent or prompt code, lengths that differ, a
    negative ``resamples`` and a level outside (0, 1).
    """
    h = binary(hits, "hits")
    cell = _codes(np.ravel(intent), "intent", allow_empty=True).ravel()
    el = binary(eligible, "eligible").astype(bool)
    if h.ndim != 2 or el.ndim != 2 or el.shape[1] != h.shape[1]:
        raise ValueError("hits is runs x integrations, eligible intents x integrations")
    same_length(h, "hits", cell, "intent")  # one intent per run
    if np.any(cell >= el.shape[0]):
        raise ValueError("hits must be 0/1 and intents index the rows of eligible")
    if np.any(h.sum(axis=1) > 1):
        raise ValueError("a run reaches the scored level through at most one integration")
    units = np.arange(cell.size) if prompt is None else integer_labels(np.ravel(prompt), "prompt")
    same_length(h, "hits", units, "prompt")
    resamples = count(resamples, "resamples")  # 0: no bootstrap, no interval
    levels = _levels(levels)
    w = _weights(weights, el.shape[0])
    design = ((cell[:, None] == np.arange(el.shape[0]))[:, :, None] * h[:, None, :]).reshape(
        cell.size, -1
    )
    share = np.asarray(_share_table(np.ones(cell.size), design, el))
    rollup = np.asarray(_share_rollup(share, w))
    rng = np.random.default_rng(seed)
    drawn, unit_index = _unit_counts(rng, units, cell, int(resamples))
    per_unit = np.zeros((drawn.shape[1], design.shape[1]))
    np.add.at(per_unit, unit_index, design)  # 0/1 hits summed per prompt: exact
    bs = np.asarray(_share_table(drawn, per_unit, el))
    br = np.asarray(_share_rollup(bs, w))

    def bound(draws: FloatArray, q: float, point: FloatArray) -> FloatArray:
        if not draws.size:
            return np.full(point.shape, np.nan)
        with warnings.catch_warnings():  # an intent with no eligible hit in any resample
            warnings.simplefilter("ignore", RuntimeWarning)
            out = np.nanquantile(draws, q, axis=0) if np.any(np.isfinite(draws)) else point
        return np.asarray(np.where(np.isfinite(point), out, np.nan))

    counts = np.stack(
        [np.bincount(cell, weights=h[:, j], minlength=el.shape[0]) for j in range(h.shape[1])],
        axis=1,
    )
    return ShareResult(
        share=share,
        low={lv: bound(bs, (1 - lv) / 2, share) for lv in levels},
        high={lv: bound(bs, (1 + lv) / 2, share) for lv in levels},
        hits=counts.astype(np.int64),
        contested=np.asarray(el.sum(axis=1) >= 2),
        rollup=rollup,
        rollup_low={lv: bound(br, (1 - lv) / 2, rollup) for lv in levels},
        rollup_high={lv: bound(br, (1 + lv) / 2, rollup) for lv in levels},
        weights=w,
        resamples=int(resamples),
    )
