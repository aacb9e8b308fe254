"""The interval levels the InvokeRank section shows, and computed bounds as the report
model's :class:`~prereg.reports.model.Interval` (a non-finite bound becomes null).

Every block of the section (scores, negatives, rating and shares, terminal split, server
funnel) states its intervals at these levels and through :func:`_iv`, so they live
below all of them.
"""

from __future__ import annotations

import math
from typing import Any

from prereg.reports.model import Interval

LEVELS: tuple[float, float] = (0.90, 0.95)


def _none(value: float) -> float | None:
    return None if not math.isfinite(value) else float(value)


def _iv(low: Any, high: Any, level: float, method: str) -> Interval:
    return Interval(low=_none(float(low)), high=_none(float(high)), level=level, method=method)
