"""Reference rho computations for the InvokeRank tests (numpy only, nothing of prereg).

- :func:`anova_rho`: the one-way ANOVA intraclass correlation of 0/1 outcomes grouped by
  prompt (Fleiss, Levin and Paik 2003, ch. 15), truncated to [0, 1];
- :func:`prompt_bootstrap`: Figure 8's percentile bootstrap over an intent's prompts,
  written one resample at a time from the groups of outcomes (docs/invokerank.md, "Rho
  per intent with intervals"): 2,000 resamples of the prompts with replacement drawn
  from ``numpy.random.default_rng(seed)`` as one ``integers(0, k, (resamples, k))``
  call, the 5% and 95% quantiles of the defined resampled values, and the three
  documented reasons for no interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: Figure 8's documented rule: prompts with data a rho interval needs, resamples, level,
#: and the largest share of resamples without a rho that still gives an interval.
MIN_PROMPTS = 10
RESAMPLES = 2000
LEVEL = 0.90
MAX_UNDEFINED_SHARE = 0.10


def anova_rho(groups: list[list[int]]) -> float:
    """One-way ANOVA intraclass correlation of 0/1 outcomes grouped by prompt, truncated
    to [0, 1]; nan without two groups, replication or variation (Fleiss et al. ch. 15)."""
    groups = [g for g in groups if g]
    k = len(groups)
    n = np.array([len(g) for g in groups], dtype=float)
    y = np.array([sum(g) for g in groups], dtype=float)
    big_n = n.sum()
    if k < 2 or big_n - k <= 0 or y.sum() in (0.0, big_n):
        return math.nan
    msb = (np.sum(y**2 / n) - y.sum() ** 2 / big_n) / (k - 1)
    msw = (y.sum() - np.sum(y**2 / n)) / (big_n - k)
    n0 = (big_n - np.sum(n**2) / big_n) / (k - 1)
    denom = msb + (n0 - 1) * msw
    if denom <= 0:
        return math.nan
    return float(min(1.0, max(0.0, (msb - msw) / denom)))


@dataclass(frozen=True)
class Bootstrap:
    """A cell's rho with its interval, or the kind of reason it has none."""

    rho: float
    low: float | None
    high: float | None
    withheld: str | None  # "undefined", "too few prompts", "resamples" or "degenerate"
    undefined: int  # resamples without a rho


def prompt_bootstrap(groups: list[list[int]], seed: int) -> Bootstrap:
    """Figure 8's interval of one cell from its prompts' outcomes (groups without any
    outcome are left out), one resample at a time."""
    groups = [g for g in groups if g]
    rho, k = anova_rho(groups), len(groups)
    if math.isnan(rho):
        return Bootstrap(rho, None, None, "undefined", 0)
    if k < MIN_PROMPTS:
        return Bootstrap(rho, None, None, "too few prompts", 0)
    rows = np.random.default_rng(seed).integers(0, k, size=(RESAMPLES, k))
    values = np.array([anova_rho([groups[i] for i in row]) for row in rows])
    undefined = int(np.isnan(values).sum())
    if undefined > MAX_UNDEFINED_SHARE * RESAMPLES:
        return Bootstrap(rho, None, None, "resamples", undefined)
    tail = (1 - LEVEL) / 2
    low, high = (float(v) for v in np.quantile(values[~np.isnan(values)], [tail, 1 - tail]))
    if high - low <= 1e-12:
        return Bootstrap(rho, None, None, "degenerate", undefined)
    return Bootstrap(rho, low, high, None, undefined)
