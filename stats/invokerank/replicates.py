"""Between-run variance from replicate runs of one design (7.3).

The method-of-moments between-run SD over the run rates and a permutation test of each
prompt's trials across runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from prereg.stats._validate import array, at_least
from prereg.stats.invokerank.model import FloatArray

# --- Between-run variance from replicate runs (7.3) -------------------------------------
#
# Each replicate run (a registration of the same design) has N prompts x K repeats. With
# the prompts fixed, run r's rate is pbar_r = mean over its N K trials. If every prompt's
# trials are exchangeable across runs, Var(pbar_r) = W = sum_i p_i (1 - p_i) / (N^2 K);
# W_hat uses v_i, the sample variance (ddof 1) of prompt i's R K trials. Method of moments
# as in reports.pilot (to which it reduces at K = 1): s^2 = sample variance (ddof 1) of the
# run rates, sigma_run^2 = max(0, (s^2 - W_hat) / (1 - 1/N)). The test permutes each
# prompt's R K trials across the runs' slots (exact under exchangeability; Monte Carlo
# p = (1 + #{s^2* >= s^2}) / (1 + B)).

REPLICATE_PERMUTATIONS = 4999


@dataclass(frozen=True)
class ReplicateVariance:
    """Between-run SD of replicate runs and the within-prompt permutation test."""

    runs: int
    prompts: int
    repeats: int
    run_rates: FloatArray
    observed_sd: float
    within_sd: float
    variance_ratio: float
    sigma_run: float
    pvalue: float
    permutations: int


def replicate_variance(
    outcomes: Any, permutations: int = REPLICATE_PERMUTATIONS, seed: int | None = 0
) -> ReplicateVariance:
    """``outcomes[i, r, k]``: 0/1 outcome of prompt i in run r, repeat k (comment above).

    ValueError naming the argument for outcomes that are not 0/1 (NaN: an incomplete
    cube), fewer than two prompts or runs, and ``permutations`` below 1."""
    y = array(outcomes, "outcomes", allow_empty=True, allow_nan=True, allow_inf=True)
    if y.ndim != 3 or y.shape[0] < 2 or y.shape[1] < 2 or y.shape[2] < 1:
        raise ValueError("outcomes must be prompts x runs x repeats, two prompts and runs at least")
    if not np.all((y == 0) | (y == 1)):
        raise ValueError("outcomes must be 0 or 1 (complete: every prompt in every run)")
    permutations = at_least(permutations, "permutations", 1)
    n, r, k = y.shape
    rates = y.mean(axis=(0, 2))
    s2 = float(np.var(rates, ddof=1))
    flat = y.reshape(n, r * k)
    w = float(np.sum(np.var(flat, axis=1, ddof=1)) / (n * n * k))
    excess = (s2 - w) / (1.0 - 1.0 / n)
    rng = np.random.default_rng(seed)
    stats_b = np.empty(int(permutations))
    chunk = max(1, 2_000_000 // (n * r * k))
    for start in range(0, int(permutations), chunk):
        stop = min(int(permutations), start + chunk)
        order = np.argsort(rng.random((stop - start, n, r * k)), axis=-1)
        perm = np.take_along_axis(np.broadcast_to(flat, order.shape), order, axis=-1)
        perm_rates = perm.reshape(stop - start, n, r, k).mean(axis=(1, 3))
        stats_b[start:stop] = np.var(perm_rates, axis=1, ddof=1)
    p = float((1 + np.sum(stats_b >= s2 - 1e-12)) / (1 + int(permutations)))
    return ReplicateVariance(
        runs=r,
        prompts=n,
        repeats=k,
        run_rates=rates,
        observed_sd=math.sqrt(s2),
        within_sd=math.sqrt(w),
        variance_ratio=s2 / w if w > 0 else math.nan,
        sigma_run=math.sqrt(max(0.0, excess)),
        pvalue=p,
        permutations=int(permutations),
    )
