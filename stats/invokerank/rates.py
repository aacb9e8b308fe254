"""Single rates displayed as the published path displays them (4.1, step 8).

A Jeffreys interval on counts deflated by Kish's design effect: the False-Invoke Rate
(4.2) and rates outside the funnel (the Agent Resolution Split's, a server's stages).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

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
    """
    x = np.asarray(calls, dtype=np.float64).ravel()
    n = np.asarray(runs, dtype=np.float64).ravel()
    if n.sum() <= 0:
        raise ValueError("no negative runs")
    deff = float(design_effect(n, rho))
    return jeffreys_interval(float(x.sum()), float(n.sum()), level=level, deff=deff)


def prompt_rate(hit: Any, prompt: Any, level: float = 0.90) -> ProportionInterval:
    """The share of runs with ``hit`` (0/1 per run), with a Jeffreys interval on counts
    deflated at the indicator's own one-way ANOVA rho over ``prompt`` (the stage default
    0.6 when it cannot be estimated): how the published path displays a single rate
    (4.1, step 8), for rates outside the funnel (the split's, a server's stages)."""
    h = np.asarray(hit, dtype=np.float64).ravel()
    p = np.asarray(prompt, dtype=np.int64).ravel()
    if h.size != p.size or h.size == 0 or not np.all((h == 0) | (h == 1)):
        raise ValueError("one 0/1 hit and one prompt per run, and at least one run")
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
