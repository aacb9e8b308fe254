"""Reductions of simulated outcomes that several evaluators share.

Per-unit means of per-task values (the registered resampling unit) and the distinct rows
of a key array, so that a test whose p value depends only on a sufficient statistic is
computed once per distinct value rather than once per data set.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from prereg.stats.calibration_model import FloatArray


def _unique_rows(keys: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.intp]]:
    uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
    return uniq, np.asarray(inverse).ravel()


def _per_unit(values: FloatArray, units: NDArray[np.intp] | None) -> FloatArray:
    """Per-unit means of per-task values (every task once within its unit), as
    :meth:`prereg.reports.pairs.PairData.per_unit`."""
    if units is None:
        return values
    g = int(units.max()) + 1
    onehot = np.zeros((units.size, g))
    onehot[np.arange(units.size), units] = 1.0
    out: FloatArray = np.einsum("sp,pg->sg", values, onehot) / onehot.sum(axis=0)
    return out
