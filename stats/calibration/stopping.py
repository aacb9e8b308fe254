"""The registered stopping rule: the beta-mixture e-process, vectorised over data sets.

Whether the e-process crosses its threshold (from the registered minimum of prompts on),
in which direction, and after how many prompts, as ``sequential_monitor`` runs it.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from prereg.stats.calibration.plans import BINARY_AGGREGATES, MonitorPlan
from prereg.stats.calibration_model import BoolArray, FloatArray, aggregate
from prereg.stats.sequential import _log_evalue


def _monitor(
    monitor: MonitorPlan, yc: BoolArray, yt: BoolArray
) -> tuple[BoolArray, NDArray[np.int64], FloatArray]:
    """The registered e-process over the tasks in order (``sequential_monitor``, vectorised):
    crossed, the sign of c - b at the crossing, and the prompts used."""
    agg = monitor.aggregate if monitor.aggregate in BINARY_AGGREGATES else "majority"
    first, second = aggregate(yc, agg) == 1.0, aggregate(yt, agg) == 1.0
    bpath = np.cumsum(first & ~second, axis=1)
    cpath = np.cumsum(~first & second, axis=1)
    a, b0 = monitor.prior
    loge = _log_evalue(bpath, cpath, a, b0)
    t = np.arange(1, first.shape[1] + 1)[None, :]
    hit = (t >= monitor.min_prompts) & (loge >= math.log(monitor.threshold) - 1e-12)
    crossed = hit.any(axis=1)
    at = np.where(crossed, np.argmax(hit, axis=1), first.shape[1] - 1)
    rows = np.arange(first.shape[0])
    direction = np.sign(cpath[rows, at] - bpath[rows, at]).astype(np.int64)
    used = np.where(crossed, at + 1, first.shape[1]).astype(np.float64)
    return crossed, direction, used
