"""Monte Carlo error of a simulated rate and the verdict judged against it.

Verdicts: a rate is ``inflated`` (type I error) or the interval ``under-covers`` when the
estimate is more than two Monte Carlo standard errors worse than nominal, the standard
error taken at the nominal rate, sqrt(q (1 - q) / sims); ``conservative`` /
``over-covers`` the other way; ``below target`` for power under the target by more than
two standard errors; otherwise ``ok``. With many rows, about one in forty ok rows is
flagged by chance at this margin: read a flag with its MC SE.
"""

from __future__ import annotations

import math

import numpy as np

from prereg.stats._validate import draw_count, probability
from prereg.stats.calibration_model import BoolArray

#: a rate is judged against nominal +- this many Monte Carlo standard errors
MC_Z = 2.0


def verdict(quantity: str, estimate: float, nominal: float | None, sims: int) -> str:
    """ok, or how the estimate departs from nominal by more than MC_Z standard errors
    (taken at the nominal rate; see the module docstring); "-" without a nominal or for a
    nan estimate (a row with no data set). ValueError for an infinite ``estimate``, ``sims``
    that is not a positive integer and a ``nominal`` outside (0, 1) (a rate of 0 or 1 has
    no Monte Carlo error to judge against)."""
    if math.isinf(estimate):
        raise ValueError(f"estimate must be a rate or nan, got {estimate!r}")
    if nominal is None or math.isnan(estimate):
        return "-"
    sims = draw_count(sims, "sims")
    nominal = probability(nominal, "nominal")
    se = math.sqrt(nominal * (1.0 - nominal) / sims)
    tolerance = MC_Z * se + 1e-12
    if quantity == "type I error":
        if estimate > nominal + tolerance:
            return "inflated"
        if estimate < nominal - tolerance:
            return "conservative"
        return "ok"
    if quantity == "coverage":
        if estimate < nominal - tolerance:
            return "under-covers"
        if estimate > nominal + tolerance:
            return "over-covers"
        return "ok"
    if quantity == "power":
        return "below target" if estimate < nominal - tolerance else "ok"
    return "-"


def _rate(parts: list[BoolArray]) -> tuple[float, float, int]:
    x = np.concatenate(parts) if parts else np.zeros(0, dtype=bool)
    n = int(x.size)
    if n == 0:
        return math.nan, math.nan, 0
    est = float(x.mean())
    return est, math.sqrt(est * (1.0 - est) / n), n
