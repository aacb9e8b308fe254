"""The paired tests read through discordant counts or sorted differences, vectorised.

McNemar's exact test, the beta-mixture e-value and the exact sign-flip test, each applied
to every data set of a block as ``analyse`` applies it, with Tango's interval (the one the
report prints beside them) judged for coverage. :data:`EVALUATORS` maps these tests'
registered names to their evaluators (the other tests need state of the simulation and are
dispatched by the driver).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from prereg.stats._dist import norm_ppf
from prereg.stats.calibration.outcome import Outcome
from prereg.stats.calibration.plans import BINARY_AGGREGATES, PlannedTest
from prereg.stats.calibration.reductions import _per_unit, _unique_rows
from prereg.stats.calibration_model import BoolArray, FloatArray, Population, aggregate
from prereg.stats.paired import binomial_half_tails
from prereg.stats.permutation import sign_flip_test
from prereg.stats.sequential import beta_mixture_evalue


def _discordant(ctl: FloatArray, trt: FloatArray) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """(b, c) per data set: tasks where only the control / only the treatment succeeded."""
    b = np.sum((ctl == 1.0) & (trt == 0.0), axis=1)
    c = np.sum((ctl == 0.0) & (trt == 1.0), axis=1)
    return b.astype(np.int64), c.astype(np.int64)


def _tango_z(b: FloatArray, c: FloatArray, n: int, delta0: float) -> FloatArray:
    """Tango's score statistic (``prereg.stats.paired._tango_z``), vectorised over (b, c)."""
    a_ = 2.0 * n
    b_ = -b - c + (2.0 * n - b + c) * delta0
    c_ = -c * delta0 * (1.0 - delta0)
    disc = np.maximum(b_ * b_ - 4.0 * a_ * c_, 0.0)
    q21 = np.minimum(np.maximum((np.sqrt(disc) - b_) / (2.0 * a_), max(0.0, -delta0)), 1.0)
    var = n * (2.0 * q21 + delta0 * (1.0 - delta0))
    num = b - c - n * delta0
    with np.errstate(divide="ignore", invalid="ignore"):
        z: FloatArray = np.where(
            var > 0.0,
            num / np.sqrt(np.where(var > 0.0, var, 1.0)),
            np.where(num == 0.0, 0.0, np.sign(num) * np.inf),
        )
    return z


def _tango_cover(
    b: NDArray[np.int64], c: NDArray[np.int64], n: int, level: float, truth: float
) -> BoolArray:
    """Whether Tango's interval as the report prints it (``tango_interval(c, b, n)``,
    treatment minus control) covers ``truth``: the interval is {delta0 : |Z(delta0)| <= z},
    so it covers the truth when Tango's score test at the truth does not reject."""
    z = float(norm_ppf(0.5 + level / 2.0))
    stat = _tango_z(c.astype(np.float64), b.astype(np.float64), n, truth)
    out: BoolArray = np.abs(stat) <= z
    return out


def _mcnemar_p(b: NDArray[np.int64], c: NDArray[np.int64]) -> FloatArray:
    """:func:`mcnemar_exact`'s p value, vectorised: min(1, 2 P(Bin(b + c, 1/2) <= min(b, c))),
    1 without discordant pairs."""
    m = b + c
    k = np.minimum(b, c)
    out: FloatArray = np.ones(m.shape, dtype=np.float64)
    for size in np.unique(m[m > 0]):
        at = m == size
        out[at] = np.asarray(binomial_half_tails(int(size), int(k[at].max())))[k[at]]
    return out


def _mcnemar(
    plan: PlannedTest, yc: BoolArray, yt: BoolArray, truth: float, pop: Population
) -> Outcome:
    """McNemar's exact test as ``analyse`` runs it: binary aggregate per task (``mean`` read
    as majority), two-sided by :func:`mcnemar_exact`, one-sided by the exact sign-flip test
    of the paired binary differences; Tango's interval. Computed once per distinct (b, c)."""
    agg = plan.binary_aggregate
    ctl, trt = aggregate(yc, agg), aggregate(yt, agg)
    n = ctl.shape[1]
    b, c = _discordant(ctl, trt)
    if plan.sides == "two-sided":
        reject = _mcnemar_p(b, c) <= plan.alpha
    else:
        uniq, inverse = _unique_rows(np.stack([b, c], axis=1))
        pvals = np.empty(uniq.shape[0])
        for k, (bb, cc) in enumerate(uniq):
            diffs = np.concatenate([np.ones(int(cc)), -np.ones(int(bb)), np.zeros(n - bb - cc)])
            pvals[k] = sign_flip_test(diffs, alternative=plan.sides).pvalue
        reject = pvals[inverse] <= plan.alpha
    covered = _tango_cover(b, c, n, plan.interval_level, truth)
    return Outcome(reject, np.sign(c - b), covered)


def _beta_mixture(
    plan: PlannedTest, yc: BoolArray, yt: BoolArray, truth: float, pop: Population
) -> Outcome:
    """The beta-mixture e-value without a stopping rule: rejects when E >= 1 / alpha
    (vectorised :func:`beta_mixture_evalue`); Tango's interval."""
    agg = plan.binary_aggregate
    ctl, trt = aggregate(yc, agg), aggregate(yt, agg)
    b, c = _discordant(ctl, trt)
    e = np.atleast_1d(beta_mixture_evalue(b, c, prior=plan.prior).evalue)
    reject = e >= 1.0 / plan.alpha
    covered = _tango_cover(b, c, ctl.shape[1], plan.interval_level, truth)
    return Outcome(reject, np.sign(c - b), covered)


def _sign_flip(
    plan: PlannedTest, yc: BoolArray, yt: BoolArray, truth: float, pop: Population
) -> Outcome:
    """The exact sign-flip test of the per-unit differences (registered aggregate), by
    :func:`sign_flip_test` once per distinct sorted vector of differences (its p value
    depends on nothing else); Tango's interval for per-task binary differences."""
    ctl = _per_unit(aggregate(yc, plan.aggregate), plan.units)
    trt = _per_unit(aggregate(yt, plan.aggregate), plan.units)
    d = trt - ctl
    keys = np.round(np.sort(d, axis=1) * 3_603_600).astype(np.int64)  # exact on k/R lattices
    uniq, inverse = _unique_rows(keys)
    first = np.zeros(uniq.shape[0], dtype=np.intp)
    first[inverse[::-1]] = np.arange(inverse.size)[::-1]
    pvals = np.array([sign_flip_test(np.sort(d[i]), alternative=plan.sides).pvalue for i in first])
    reject = pvals[inverse] <= plan.alpha
    covered = None
    if plan.aggregate in BINARY_AGGREGATES and plan.units is None:
        b = np.sum(d < 0, axis=1).astype(np.int64)
        c = np.sum(d > 0, axis=1).astype(np.int64)
        covered = _tango_cover(b, c, d.shape[1], plan.interval_level, truth)
    return Outcome(reject, np.sign(d.mean(axis=1)).astype(np.int64), covered)


EVALUATORS: dict[str, Callable[[PlannedTest, BoolArray, BoolArray, float, Population], Outcome]] = {
    "mcnemar_exact": _mcnemar,
    "beta_mixture": _beta_mixture,
    "sign_flip_test": _sign_flip,
}
