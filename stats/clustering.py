"""Clustering of repeats: Kish's design effect and the ANOVA intraclass correlation."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from prereg.stats._validate import array, binary, labels, same_length, scalar_or_array

__all__ = ["design_effect", "icc_binary"]


def design_effect(cluster_sizes: Any, rho: Any) -> Any:
    """Kish's design effect for clusters of unequal size.

        DEFF = 1 + (Kbar - 1) rho,   Kbar = sum(m_p^2) / sum(m_p),

    over the cluster (prompt) sizes m_p, with rho in [0, 1] (a negative intraclass
    correlation would make clustering look like a gain; refused). Returns a float (an
    array if ``rho`` is an array). Clusters of size 0 are allowed and contribute
    nothing; NaN, infinite or negative sizes, no sizes, and a rho outside [0, 1] are
    refused (ValueError naming the argument). References: Kish (1965), Survey
    Sampling; Rao and Scott (1992), Biometrics 48:577-585.
    """
    m = array(cluster_sizes, "cluster_sizes", low=0).ravel()
    if m.sum() <= 0:
        raise ValueError("cluster_sizes must be non-negative with a positive total")
    r = array(rho, "rho", low=0.0, high=1.0)
    kbar = float(np.sum(m * m) / np.sum(m))
    return scalar_or_array(1.0 + (kbar - 1.0) * r)


def icc_binary(outcomes: Any, groups: Any) -> float:
    """One-way ANOVA estimator of the intraclass correlation of binary outcomes.

    With k groups (prompts) of sizes n_i, y_i successes and N = sum n_i,

        MSB = (sum y_i^2/n_i - (sum y_i)^2/N) / (k - 1)
        MSW = (sum y_i - sum y_i^2/n_i) / (N - k)
        n0  = (N - sum n_i^2 / N) / (k - 1)
        rho = (MSB - MSW) / (MSB + (n0 - 1) MSW),

    truncated to [0, 1]. Returns nan when it cannot be estimated: fewer than two
    groups, no replication (every group of size one, N = k), or no variation (all
    outcomes equal), so that callers can fall back to a pooled value. ValueError naming
    the argument for no outcomes at all (nothing to estimate from: the caller decides
    what an empty arm means), outcomes that are not 0/1 (NaN among them), a missing
    group label (NaN or None: numpy would merge every NaN label into one group) and
    lengths that differ. References:
    Fleiss, Levin and Paik (2003), Statistical Methods for Rates and Proportions,
    ch. 15; Ridout, Demetrio and Firth (1999), Biometrics 55:137-148.
    """
    y = binary(outcomes, "outcomes").ravel()
    g = labels(np.ravel(groups), "groups")
    same_length(y, "outcomes", g, "groups")
    _, codes = np.unique(g, return_inverse=True)
    ni = np.bincount(codes).astype(np.float64)
    yi = np.bincount(codes, weights=y)
    k = ni.size
    big_n = float(ni.sum())
    if k < 2 or big_n - k <= 0:
        return math.nan
    total = float(yi.sum())
    if total == 0.0 or total == big_n:
        return math.nan
    between = float(np.sum(yi * yi / ni))
    ssb = max(between - total * total / big_n, 0.0)  # clip rounding below zero
    ssw = max(total - between, 0.0)
    msb = ssb / (k - 1)
    msw = ssw / (big_n - k)
    n0 = (big_n - float(np.sum(ni * ni)) / big_n) / (k - 1)
    denom = msb + (n0 - 1.0) * msw
    if denom <= 0.0:
        return math.nan
    rho = (msb - msw) / denom
    return float(min(1.0, max(0.0, rho)))
