"""Multiplicity: Benjamini-Hochberg, Holm, and e-BH, and the table of registrable methods."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from prereg.stats._validate import array, probability
from prereg.stats.results import MultipleTestResult

__all__ = [
    "MULTIPLICITY_METHODS",
    "MultiplicityMethod",
    "MultiplicityRule",
    "benjamini_hochberg",
    "e_bh",
    "holm",
]


def _pvalues(pvalues: Any) -> np.ndarray[Any, np.dtype[np.float64]]:
    """The p-values in [0, 1] (an empty family allowed: it rejects nothing), or
    ValueError naming ``pvalues``."""
    return array(pvalues, "pvalues", allow_empty=True, low=0.0, high=1.0).ravel()


def benjamini_hochberg(pvalues: Any, q: float = 0.10) -> MultipleTestResult:
    """Benjamini-Hochberg step-up procedure at false discovery rate ``q``.

    With p_(1) <= ... <= p_(m), reject the k* smallest where
    k* = max{k : p_(k) <= k q / m}. Adjusted p-values are
    min_{j >= i} min(1, m p_(j) / j). Controls the FDR at q under independence or
    positive regression dependence (PRDS). ``q`` must lie in (0, 1) and the p-values in
    [0, 1] (ValueError naming the argument); an empty family rejects nothing (a
    per-intent family without intents, ``reports.registered.family``). Reference:
    Benjamini and Hochberg (1995), JRSS B 57:289-300.
    """
    q = probability(q, "q")
    p = _pvalues(pvalues)
    m = p.size
    if m == 0:
        return MultipleTestResult(
            reject=np.zeros(0, bool),
            adjusted=np.zeros(0),
            level=q,
            n=0,
            n_rejected=0,
            threshold=0.0,
            method="Benjamini-Hochberg",
        )
    order = np.argsort(p, kind="mergesort")
    ps = p[order]
    rank = np.arange(1, m + 1)
    below = ps <= rank / m * q
    k = int(np.nonzero(below)[0].max()) + 1 if below.any() else 0
    reject_sorted = rank <= k
    adj_sorted = np.minimum.accumulate((ps * m / rank)[::-1])[::-1]
    adj_sorted = np.minimum(adj_sorted, 1.0)
    reject = np.empty(m, bool)
    reject[order] = reject_sorted
    adjusted = np.empty(m)
    adjusted[order] = adj_sorted
    return MultipleTestResult(
        reject=reject,
        adjusted=adjusted,
        level=q,
        n=m,
        n_rejected=k,
        threshold=k * q / m,
        method="Benjamini-Hochberg",
    )


def holm(pvalues: Any, alpha: float = 0.05) -> MultipleTestResult:
    """Holm's step-down procedure controlling the familywise error rate at ``alpha``.

    Reject p_(1), ..., p_(k) while p_(j) <= alpha / (m - j + 1); stop at the first
    failure. Adjusted p-values are max_{j <= i} min(1, (m - j + 1) p_(j)). Valid under
    any dependence. ``alpha`` must lie in (0, 1) and the p-values in [0, 1] (ValueError
    naming the argument); an empty family rejects nothing. Reference: Holm (1979), Scand
    J Stat 6:65-70.
    """
    alpha = probability(alpha, "alpha")
    p = _pvalues(pvalues)
    m = p.size
    if m == 0:
        return MultipleTestResult(
            reject=np.zeros(0, bool),
            adjusted=np.zeros(0),
            level=alpha,
            n=0,
            n_rejected=0,
            threshold=0.0,
            method="Holm",
        )
    order = np.argsort(p, kind="mergesort")
    ps = p[order]
    factors = np.arange(m, 0, -1)
    fails = ps > alpha / factors
    k = int(np.argmax(fails)) if fails.any() else m
    reject_sorted = np.arange(m) < k
    adj_sorted = np.minimum(np.maximum.accumulate(ps * factors), 1.0)
    reject = np.empty(m, bool)
    reject[order] = reject_sorted
    adjusted = np.empty(m)
    adjusted[order] = adj_sorted
    threshold = alpha / (m - k + 1) if k > 0 else 0.0
    return MultipleTestResult(
        reject=reject,
        adjusted=adjusted,
        level=alpha,
        n=m,
        n_rejected=k,
        threshold=threshold,
        method="Holm",
    )


def e_bh(evalues: Any, q: float = 0.10) -> MultipleTestResult:
    """e-BH procedure of Wang and Ramdas (2022) at false discovery rate ``q``.

    With e_[1] >= ... >= e_[m] the e-values in decreasing order, reject the k* largest,
    k* = max{k : e_[k] >= m / (k q)} (none if the set is empty). This controls the FDR
    at q under arbitrary dependence between the e-values, and applies unchanged to
    e-values read off e-processes at stopping times. It is BH applied to 1/e, so
    ``adjusted`` holds the BH-adjusted values of min(1, 1/e).

    Edge cases: e-values must be >= 0 (nan is an error), ``q`` in (0, 1); e = inf is
    always rejected
    (it satisfies every bound); e = 0 and any e-value below m / (m q) are never
    rejected; hypotheses tied with the k*-th e-value are all rejected (the rule already
    includes ties). An empty input rejects nothing. ``threshold`` is m / (k* q), inf when
    nothing is rejected. Reference: Wang and Ramdas (2022), JRSS B 84:822-852.
    """
    q = probability(q, "q")
    e = array(evalues, "evalues", allow_empty=True, allow_inf=True, low=0.0).ravel()
    m = e.size
    if m == 0:
        return MultipleTestResult(
            reject=np.zeros(0, bool),
            adjusted=np.zeros(0),
            level=q,
            n=0,
            n_rejected=0,
            threshold=math.inf,
            method="e-BH",
        )
    order = np.argsort(-e, kind="mergesort")
    es = e[order]
    rank = np.arange(1, m + 1)
    ok = es >= m / (rank * q)
    k = int(np.nonzero(ok)[0].max()) + 1 if ok.any() else 0
    reject_sorted = rank <= k
    with np.errstate(divide="ignore", over="ignore"):
        inv = np.minimum(1.0 / es, 1.0)
    adj_sorted = np.minimum(np.minimum.accumulate((inv * m / rank)[::-1])[::-1], 1.0)
    reject = np.empty(m, bool)
    reject[order] = reject_sorted
    adjusted = np.empty(m)
    adjusted[order] = adj_sorted
    threshold = m / (k * q) if k > 0 else math.inf
    return MultipleTestResult(
        reject=reject,
        adjusted=adjusted,
        level=q,
        n=m,
        n_rejected=k,
        threshold=threshold,
        method="e-BH",
    )


# ---- the registrable methods: one table, read by the schema and the report ----------------


MultiplicityMethod = Literal["bh", "e-bh", "holm", "none"]


def _unadjusted(values: Any, level: float) -> None:
    """``none``: no adjustment; the report rejects a member when p <= q."""
    return None


@dataclass(frozen=True)
class MultiplicityRule:
    """How a registered ``multiplicity.method`` is applied to a family of hypotheses."""

    #: ``(values, level) -> result``; None means unadjusted
    apply: Callable[[Any, float], MultipleTestResult | None]
    #: what each member contributes: a p-value or an e-value
    takes: Literal["p", "e"]
    #: provenance: the function applied
    function: str


#: Every method a registration may name (``multiplicity.method``), in schema order.
MULTIPLICITY_METHODS: Mapping[MultiplicityMethod, MultiplicityRule] = {
    "bh": MultiplicityRule(
        lambda v, q: benjamini_hochberg(v, q=q), "p", "prereg.stats.benjamini_hochberg"
    ),
    "e-bh": MultiplicityRule(lambda v, q: e_bh(v, q=q), "e", "prereg.stats.e_bh"),
    "holm": MultiplicityRule(lambda v, q: holm(v, alpha=q), "p", "prereg.stats.holm"),
    "none": MultiplicityRule(_unadjusted, "p", "unadjusted (method none): reject when p <= q"),
}
