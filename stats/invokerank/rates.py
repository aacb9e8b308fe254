"""Single rates displayed as the published path displays them (4.1, step 8).

A Jeffreys interval on counts deflated by Kish's design effect: the False-Invoke Rate
(4.2) and rates outside the funnel (the Agent Resolution Split's, a server's stages).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from prereg.stats._validate import (
    binary,
    counts,
    integer_labels,
    probability,
    same_length,
)
from prereg.stats.clustering import design_effect
from prereg.stats.intervals import jeffreys_interval
from prereg.stats.invokerank.model import FloatArray
from prereg.stats.invokerank.rho import RHO_DEFAULTS, grouped_icc
from prereg.stats.results import ProportionInterval


def false_invoke_rate(calls: Any, runs: Any, rho: float, level: float = 0.90) -> ProportionInterval:
    """Calls on negative runs with a Jeffreys interval deflated at the pooled rho_S.

    ``calls[p]`` and ``runs[p]`` are per negative prompt; the design effect is Kish's
    over the prompts' run counts at ``rho`` (4.2, False-Invoke Rate). Use it for focal
    calls (the published False-Invoke Rate) and, separately, for any external call.
    ValueError naming the argument for NaN, infinite, negative or fractional counts, no
    prompts or no runs, lengths that differ, calls above their runs, ``rho`` outside
    [0, 1] and a level outside (0, 1).
    """
    level = probability(level, "level")
    x = counts(calls, "calls", allow_empty=False).ravel()
    n = counts(runs, "runs", allow_empty=False).ravel()
    same_length(x, "calls", n, "runs")
    if np.any(x > n):
        i = int(np.argmax(x > n))
        raise ValueError(f"calls: {x[i]} exceeds its runs ({n[i]}) on prompt {i}")
    if n.sum() <= 0:
        raise ValueError("runs: no negative runs")
    deff = float(design_effect(n, rho))
    return jeffreys_interval(float(x.sum()), float(n.sum()), level=level, deff=deff)


def prompt_rate(hit: Any, prompt: Any, level: float = 0.90) -> ProportionInterval:
    """The share of runs with ``hit`` (0/1 per run), with a Jeffreys interval on counts
    deflated at the indicator's own one-way ANOVA rho over ``prompt`` (the stage default
    0.6 when it cannot be estimated): how the published path displays a single rate
    (4.1, step 8), for rates outside the funnel (the split's, a server's stages).
    ValueError naming the argument for no runs, a hit that is not 0/1 (NaN among them),
    a missing or fractional prompt code, lengths that differ and a level outside
    (0, 1)."""
    level = probability(level, "level")
    h = binary(hit, "hit").ravel()
    p = integer_labels(np.ravel(prompt), "prompt")
    same_length(h, "hit", p, "prompt")  # one prompt per run
    return _prompt_rate(h, p, level)


def _prompt_rate(hit: FloatArray, prompt: NDArray[np.int64], level: float) -> ProportionInterval:
    ids, index = np.unique(prompt, return_inverse=True)
    y = np.bincount(index, weights=hit, minlength=ids.size)
    n = np.bincount(index, minlength=ids.size)
    rho = grouped_icc(y.astype(np.int64), n)
    if math.isnan(rho):
        rho = RHO_DEFAULTS["surfaced"]
    deff = float(design_effect(n, rho))
    return jeffreys_interval(float(y.sum()), float(n.sum()), level=level, deff=deff)
