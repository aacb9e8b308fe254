"""The interval levels the InvokeRank section shows, and computed bounds as the report
model's :class:`~prereg.reports.model.LabelledInterval` (a non-finite bound becomes null).

Every block of the section (scores, negatives, rating and shares, terminal split, server
funnel) states its intervals at these levels and through :func:`_iv`, so they live
below all of them. The rule for a printed interval (issue 39): one withheld by the
small-sample rule has null bounds and its reason (:func:`_withheld`); one with no width
says why (:data:`ZERO_WIDTH`, or the caller's reason); one given the estimate it is
printed beside contains it (a bound on the wrong side is moved to it, and it says so).
"""

from __future__ import annotations

import math
from typing import Any

from prereg.reports.model import LabelledInterval

LEVELS: tuple[float, float] = (0.90, 0.95)

#: The label of an interval with no width whose caller gave no reason of its own.
ZERO_WIDTH = (
    "zero width: every resample (or posterior draw) gives the same value, so the interval "
    "measures no uncertainty"
)
#: The label of an interval moved out to contain the estimate printed beside it.
EXTENDED = "extended to contain the estimate printed beside it"
#: The label of an interval with a null bound whose caller gave no reason.
NOT_COMPUTED = "not computed: the estimate or its resamples are not defined"


def _none(value: float) -> float | None:
    return None if not math.isfinite(value) else float(value)


def _iv(
    low: Any,
    high: Any,
    level: float,
    method: str,
    *,
    reason: str | None = None,
    zero_width: str | None = None,
    estimate: float | None = None,
) -> LabelledInterval:
    """An interval; ``reason``: why it is withheld (its bounds become null);
    ``zero_width``: the label if it has no width (:data:`ZERO_WIDTH` by default);
    ``estimate``: the figure printed beside it, which it is made to contain."""
    if reason is not None:
        return _withheld(level, method, reason)
    lo, hi = _none(float(low)), _none(float(high))
    label = None
    if estimate is not None and math.isfinite(estimate) and lo is not None and hi is not None:
        if estimate < lo or estimate > hi:
            lo, hi, label = min(lo, estimate), max(hi, estimate), EXTENDED
    if lo is not None and hi is not None and hi - lo <= 1e-12:
        label = zero_width or ZERO_WIDTH
    if lo is None or hi is None:
        label = NOT_COMPUTED
    return LabelledInterval(low=lo, high=hi, level=level, method=method, reason=label)


def _withheld(level: float, method: str, reason: str) -> LabelledInterval:
    """An interval the small-sample rule withholds: null bounds, and why."""
    return LabelledInterval(low=None, high=None, level=level, method=method, reason=reason)
