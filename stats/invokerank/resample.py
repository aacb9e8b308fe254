"""Bootstrap resamples as multiplicities, shared by the package's bootstraps.

How often each prompt (drawn with replacement within its intent) or each unit is drawn
per resample, so that a statistic is recomputed from weighted counts instead of from
rebuilt samples: the Invoke Rating's, the shares' and the calibrated score's bootstraps.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from prereg.stats.invokerank.model import FloatArray


def _run_weights(
    rng: np.random.Generator, units: NDArray[np.int64], cell: NDArray[np.int64], resamples: int
) -> FloatArray:
    """Each run's multiplicity (B, T) in B resamples of prompts within intents: intent c's
    prompts are drawn with replacement, as many as it has, and a run counts as often as
    its prompt was drawn (the same resamples as indexing the drawn prompts' runs, without
    building them)."""
    counts, unit_index = _unit_counts(rng, units, cell, resamples)
    return counts[:, unit_index]


def _unit_counts(
    rng: np.random.Generator, units: NDArray[np.int64], cell: NDArray[np.int64], resamples: int
) -> tuple[FloatArray, NDArray[np.int64]]:
    """How often each prompt is drawn (B, U) in the resamples of :func:`_run_weights`, and
    each run's prompt (T,): a statistic linear in the runs' weights can sum its runs per
    prompt first (exactly, when they are counts) instead of weighting a (B, T) matrix."""
    ids, unit_index = np.unique(units, return_inverse=True)
    counts = np.zeros((resamples, ids.size))
    rows = np.arange(resamples)[:, None]
    for c in np.unique(cell):
        members = np.unique(unit_index[cell == c])
        picks = rng.integers(0, members.size, size=(resamples, members.size))
        drawn = np.bincount(
            (rows * members.size + picks).ravel(), minlength=resamples * members.size
        )
        counts[:, members] += drawn.reshape(resamples, members.size)
    return counts, np.asarray(unit_index, np.int64).ravel()


def _row_counts(picks: NDArray[np.int64], size: int) -> FloatArray:
    """How often each of 0 .. size-1 occurs in each row of ``picks`` (one bincount)."""
    rows = picks.shape[0]
    flat = (np.arange(rows)[:, None] * size + picks).ravel()
    return np.bincount(flat, minlength=rows * size).reshape(rows, size).astype(np.float64)
