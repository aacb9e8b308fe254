"""Within-intent rho and its prompt-bootstrap interval (seed 7.4, Figure 8).

- :func:`nested_icc`: the intra-prompt correlation with intent means removed (prompts
  nested in intents): the one-way ANOVA estimator of :func:`prereg.stats.icc_binary`
  with the between-prompt sum of squares taken about each intent's mean (degrees of
  freedom k - C) and Kish's n0 computed within intents,

      MSB_w = (sum_i y_i^2/n_i - sum_c Y_c^2/N_c) / (k - C)
      MSW   = (sum_i y_i - sum_i y_i^2/n_i) / (N - k)
      n0_w  = (N - sum_c sum_{i in c} n_i^2 / N_c) / (k - C)
      rho_w = (MSB_w - MSW) / (MSB_w + (n0_w - 1) MSW), truncated to [0, 1];

  the classical nested-ANOVA estimator of the prompt-within-intent component (Searle,
  Casella and McCulloch 1992, ch. 3; the seed's "removing intent means"). nan where it
  cannot be estimated (no replication, no variation, no prompt-level degrees of freedom).
- :func:`rho_bootstrap`: the cell's ANOVA rho (:func:`grouped_icc`) over percentile
  resamples of its prompts, vectorised: every resample at once from the per-prompt counts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from prereg.stats._validate import at_least, counts, probability, same_length

#: Resamples of the rho bootstrap (Figure 8's 90% intervals).
RHO_RESAMPLES = 2000
#: Fewest prompts with data for a percentile bootstrap interval of rho: the project's
#: minimum for a percentile bootstrap over clusters (docs/statistics.md, 10 units).
MIN_RHO_PROMPTS = 10
#: The largest share of resamples with an undefined rho that still gives an interval.
MAX_UNDEFINED = 0.10


def _icc_rows(y: NDArray[np.float64], n: NDArray[np.float64]) -> NDArray[np.float64]:
    """The one-way ANOVA rho of each row's groups (counts ``y`` of ``n``; every n > 0)."""
    k = y.shape[-1]
    big_n = n.sum(axis=-1)
    total = y.sum(axis=-1)
    between = (y * y / n).sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ssb = np.maximum(between - total * total / big_n, 0.0)
        ssw = np.maximum(total - between, 0.0)
        msb = ssb / (k - 1)
        msw = ssw / (big_n - k)
        n0 = (big_n - (n * n).sum(axis=-1) / big_n) / (k - 1)
        denom = msb + (n0 - 1.0) * msw
        rho = np.clip((msb - msw) / denom, 0.0, 1.0)
    bad = (big_n - k <= 0) | (total == 0) | (total == big_n) | (denom <= 0) | (k < 2)
    return np.where(bad, np.nan, rho)


def nested_icc(successes: Any, trials: Any, intent: Any) -> float:
    """Rho with intent means removed (module docstring); ``intent``: each group's intent
    code. Groups without trials are left out. ValueError naming the argument for bad
    counts, lengths that differ and successes above their trials."""
    y = counts(successes, "successes", allow_empty=False).ravel().astype(np.float64)
    n = counts(trials, "trials", allow_empty=False).ravel().astype(np.float64)
    same_length(y, "successes", n, "trials")
    c = np.asarray(intent).ravel()
    same_length(y, "successes", c, "intent")
    if np.any(y > n):
        raise ValueError("successes: a group's successes exceed its trials")
    keep = n > 0
    y, n, c = y[keep], n[keep], c[keep]
    _, codes = np.unique(c, return_inverse=True)
    k, n_cells = y.size, int(codes.max()) + 1 if y.size else 0
    big_n, total = float(n.sum()), float(y.sum())
    if k - n_cells <= 0 or big_n - k <= 0 or total == 0 or total == big_n:
        return math.nan
    yc = np.bincount(codes, weights=y, minlength=n_cells)
    nc = np.bincount(codes, weights=n, minlength=n_cells)
    n2c = np.bincount(codes, weights=n * n, minlength=n_cells)
    within_prompts = float(np.sum(y * y / n))
    ssb = max(within_prompts - float(np.sum(yc * yc / nc)), 0.0)
    ssw = max(total - within_prompts, 0.0)
    msb = ssb / (k - n_cells)
    msw = ssw / (big_n - k)
    n0 = (big_n - float(np.sum(n2c / nc))) / (k - n_cells)
    denom = msb + (n0 - 1.0) * msw
    if denom <= 0:
        return math.nan
    return float(min(1.0, max(0.0, (msb - msw) / denom)))


@dataclass(frozen=True)
class RhoInterval:
    """A cell's rho, its prompts with data and its percentile bootstrap interval (null
    bounds and ``reason`` where none is given)."""

    rho: float  # nan: undefined
    groups: int
    low: float
    high: float
    level: float
    resamples: int
    undefined: int  # resamples whose rho is undefined
    reason: str | None
    method: str


def rho_bootstrap(
    successes: Any,
    trials: Any,
    level: float = 0.90,
    resamples: int = RHO_RESAMPLES,
    seed: int | None = 0,
    min_prompts: int = MIN_RHO_PROMPTS,
) -> RhoInterval:
    """The cell's ANOVA rho with a percentile interval over ``resamples`` resamples of its
    prompts (groups with trials; seeded). No interval (nan bounds, ``reason``) below
    ``min_prompts`` prompts, when rho itself is undefined, when more than
    :data:`MAX_UNDEFINED` of the resamples have no rho, or when every defined resample
    gives the same rho (a degenerate interval)."""
    level = probability(level, "level")
    resamples = at_least(resamples, "resamples", 1)
    y = counts(successes, "successes", allow_empty=True).ravel().astype(np.float64)
    n = counts(trials, "trials", allow_empty=True).ravel().astype(np.float64)
    same_length(y, "successes", n, "trials")
    if np.any(y > n):
        raise ValueError("successes: a group's successes exceed its trials")
    keep = n > 0
    y, n = y[keep], n[keep]
    k = int(y.size)
    method = f"percentile bootstrap over prompts ({resamples} resamples)"
    rho = float(_icc_rows(y[None, :], n[None, :])[0]) if k else math.nan

    def out(
        reason: str, low: float = math.nan, high: float = math.nan, bad: int = 0
    ) -> RhoInterval:
        return RhoInterval(rho, k, low, high, level, resamples, bad, reason, method)

    if math.isnan(rho):
        return out("rho undefined (no replication or no variation among the prompts)")
    if k < min_prompts:
        return out(f"too few prompts ({k} < {min_prompts}) for a bootstrap interval of rho")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, k, size=(int(resamples), k))
    draws = _icc_rows(y[idx], n[idx])
    undefined = int(np.isnan(draws).sum())
    if undefined > MAX_UNDEFINED * resamples:
        return out(
            f"too few resamples with a defined rho ({undefined} of {resamples} undefined)",
            bad=undefined,
        )
    ok = draws[~np.isnan(draws)]
    tail = (1.0 - level) / 2.0
    low, high = (float(v) for v in np.quantile(ok, [tail, 1.0 - tail]))
    if high - low <= 1e-12:
        return out(
            f"degenerate: every resample gives rho = {low:.2f}, so resampling prompts shows "
            "no spread (no interval)",
            bad=undefined,
        )
    return RhoInterval(rho, k, low, high, level, resamples, undefined, None, method)
