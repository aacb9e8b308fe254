"""One estimate with its interval, and how every study table prints it.

Every ToolBottleneckBench analysis (contrasts, the cap sweep, the decomposition, lanes,
the frontier, repairs, the holdout) reports a point estimate with a resampling interval
or the reason the interval is withheld (the one rule for printed intervals,
docs/statistics.md); :func:`estimate_cell` is the one way a table prints it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its interval; ``low``/``high`` None and ``reason`` saying
    why when the interval is withheld."""

    value: float
    low: float | None = None
    high: float | None = None
    reason: str | None = None


def _num(x: float, scale: float, unit: str, digits: int) -> str:
    value = round(scale * x, digits) + 0.0  # never "-0.0"
    return f"{value:+.{digits}f}{unit}"


def estimate_cell(
    e: Estimate | None,
    *,
    missing: str = "-",
    unit: str = " pp",
    scale: float = 100.0,
    digits: int = 1,
) -> str:
    """``E unit [L, H]``; ``E unit; <why> : no interval`` when the interval is withheld
    or both bounds print alike; ``missing`` when there is no estimate. A difference of
    two differences (support [-200, 200]) is printed with ``unit=""``."""
    if e is None:
        return missing
    head = _num(e.value, scale, unit, digits)
    if e.low is None or e.high is None:
        return f"{head}; {e.reason or 'no interval'}: no interval"
    lo, hi = _num(e.low, scale, "", digits), _num(e.high, scale, "", digits)
    if lo == hi:
        return f"{head}; no spread at the printed precision: no interval"
    return f"{head} [{lo}, {hi}]"
