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
    m = np.asarray(runs, dtype=np.int64).ravel()
    r = np.asarray(reached, dtype=np.int64)
    c = np.asarray(cell, dtype=np.int64).ravel()
    if r.ndim != 2 or r.shape[0] != m.size or c.size != m.size:
        raise ValueError("reached must be prompts x stages, with runs and cell per prompt")
    if r.shape[1] == 0 or r.shape[1] > len(FUNNEL_STAGES):
        raise ValueError("between one and five funnel stages")
    if np.any(m < 0) or np.any(r < 0) or np.any(c < 0):
        raise ValueError("counts and cell indices must be non-negative")
    chain = np.concatenate([m[:, None], r], axis=1)
    if np.any(np.diff(chain, axis=1) > 0):
        raise ValueError(
            "funnel counts must be nested (a prompt cannot reach a stage more often than "
            "its parent): a recording error"
        )
    return m, r, c


def _weights(weights: Any, cells: int) -> FloatArray:
    if weights is None:
        return np.full(cells, 1.0 / cells)
    w = np.asarray(weights, dtype=np.float64).ravel()
    if w.size != cells or not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
        raise ValueError(f"weights must be {cells} non-negative numbers with a positive sum")
    return np.asarray(w / w.sum())
