"""The equivalence test (TOST) as ``tost_paired`` decides it, per simulated data set.

The exact binary TOST decides by the rejection region of
:func:`prereg.stats.paired.exact_equivalence_region` (cached per size, margin and level),
and its interval covers a value when neither exact one-sided test rejects at it (the
interval inverts those tests); other differences by the paired t.
"""

from __future__ import annotations

import math

import numpy as np

from prereg.stats._dist import t_cdf, t_ppf, t_sf
from prereg.stats.calibration.outcome import Outcome
from prereg.stats.calibration.plans import PlannedTest
from prereg.stats.calibration.reductions import _per_unit
from prereg.stats.calibration_model import BoolArray, Population, aggregate
from prereg.stats.paired import exact_equivalence_region, upper_region


class _Regions:
    """Exact TOST regions, computed once per (n, margin or value, alpha)."""

    def __init__(self) -> None:
        self.cache: dict[tuple[str, int, float, float], BoolArray] = {}

    def equivalence(self, n: int, margin: float, alpha: float) -> BoolArray:
        key = ("eq", n, margin, alpha)
        if key not in self.cache:
            self.cache[key] = exact_equivalence_region(n, margin, alpha)
        return self.cache[key]

    def upper(self, n: int, delta0: float, alpha: float) -> BoolArray:
        key = ("up", n, round(delta0, 12), alpha)
        if key not in self.cache:
            self.cache[key] = upper_region(n, delta0, alpha)
        return self.cache[key]


def _tost(
    plan: PlannedTest,
    yc: BoolArray,
    yt: BoolArray,
    truth: float,
    pop: Population,
    regions: _Regions | None = None,
) -> Outcome:
    """TOST as ``tost_paired`` (method auto) decides it per data set: exact unconditional on
    paired binary per-unit differences, paired t otherwise (undefined with zero spread:
    not equivalent, no interval). ``reject`` is "equivalence declared"."""
    regions = regions or _Regions()
    ctl = _per_unit(aggregate(yc, plan.aggregate), plan.units)
    trt = _per_unit(aggregate(yt, plan.aggregate), plan.units)
    d = trt - ctl
    sims, n = d.shape
    margin, alpha = float(plan.margin or 0.0), plan.alpha
    binary = np.all((d == -1.0) | (d == 0.0) | (d == 1.0), axis=1)
    equivalent = np.zeros(sims, dtype=bool)
    covered = np.zeros(sims, dtype=bool)
    undefined = 0
    if binary.any():
        b = np.sum(d[binary] == 1.0, axis=1)
        c = np.sum(d[binary] == -1.0, axis=1)
        equivalent[binary] = regions.equivalence(n, margin, alpha)[b, c]
        high_ok = ~regions.upper(n, truth, alpha)[b, c]
        low_ok = ~regions.upper(n, -truth, alpha)[c, b]
        covered[binary] = high_ok & low_ok
    rest = ~binary
    if rest.any():
        dr = d[rest]
        est = dr.mean(axis=1)
        sd = dr.std(axis=1, ddof=1) if n >= 2 else np.zeros(dr.shape[0])
        ok = sd > 0
        undefined = int(np.sum(~ok))
        se = np.where(ok, sd, 1.0) / math.sqrt(n)
        df = max(n - 1, 1)
        pl = t_sf((est + margin) / se, df)
        pu = t_cdf((est - margin) / se, df)
        tcrit = float(t_ppf(1.0 - alpha, df))
        equivalent[rest] = ok & (np.maximum(pl, pu) <= alpha)
        covered[rest] = ok & (est - tcrit * se <= truth) & (truth <= est + tcrit * se)
    direction = np.sign(d.mean(axis=1)).astype(np.int64)
    return Outcome(equivalent, direction, covered, undefined)
