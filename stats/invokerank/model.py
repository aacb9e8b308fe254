"""What the InvokeRank score is computed from and reported at.

The funnel's stages, the reporting levels, the score's interval methods (the registration
schema derives ``invokerank.interval`` from :data:`SCORE_INTERVALS`), the per-prompt funnel
counts (validated) and the roll-up weights over intent cells. Every other module of the
package shares these; they sit here so that none imports another module for them.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

import numpy as np
from numpy.typing import NDArray

from prereg.stats._validate import array, counts, same_length

FUNNEL_STAGES: tuple[str, ...] = ("surfaced", "selected", "invoked", "executed", "completed")
LEVELS: tuple[float, ...] = (0.90, 0.95)
#: The score's interval methods a registration may choose (``invokerank: {interval: ...}``;
#: the schema derives from this table): the one chosen is the score's interval, the other
#: is shown beside it, labelled.
ScoreInterval = Literal["published", "calibrated"]
SCORE_INTERVALS: dict[str, str] = {
    "published": "the published path's equal-tailed interval of the Q draws (4.1)",
    "calibrated": "bootstrap of the plug-in score over prompts within intents (and "
    "sessions when there are three or more), small-sample corrected, widened where needed "
    "to contain the displayed score (7.5; issue 39)",
}
assert tuple(SCORE_INTERVALS) == get_args(ScoreInterval)

FloatArray = NDArray[np.float64]


def _validate_counts(
    runs: Any, reached: Any, cell: Any
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """The per-prompt counts (runs, prompts x stages reached, intent cell), or ValueError
    naming the argument: NaN, infinite, negative or fractional counts (numpy would cast
    NaN to a huge negative integer), no prompts, lengths that differ, counts that are
    not nested."""
    m = counts(runs, "runs", allow_empty=False).ravel()
    r = counts(reached, "reached", allow_empty=False)
    c = counts(cell, "cell", allow_empty=False).ravel()
    if r.ndim != 2:
        raise ValueError(f"reached must be prompts x stages, got shape {r.shape}")
    same_length(m, "runs", r, "reached")
    same_length(m, "runs", c, "cell")
    if r.shape[1] == 0 or r.shape[1] > len(FUNNEL_STAGES):
        raise ValueError("reached: between one and five funnel stages")
    chain = np.concatenate([m[:, None], r], axis=1)
    if np.any(np.diff(chain, axis=1) > 0):
        raise ValueError(
            "funnel counts must be nested (a prompt cannot reach a stage more often than "
            "its parent): a recording error"
        )
    return m, r, c


def _weights(weights: Any, cells: int) -> FloatArray:
    """The roll-up weights over ``cells`` intents, normalised (equal when None), or
    ValueError naming ``weights``."""
    if weights is None:
        return np.full(cells, 1.0 / cells)
    w = array(weights, "weights", allow_empty=True, low=0.0).ravel()
    if w.size != cells or w.sum() <= 0:
        raise ValueError(f"weights must be {cells} non-negative numbers with a positive sum")
    return np.asarray(w / w.sum())
