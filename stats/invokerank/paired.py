"""The paired prompt bootstrap of the change between two runs of one design (seed 6.6).

The same-day repeat is compared "paired over the same prompts": each prompt's runs in run
A and in run B give its plug-in rate in each; intent c's change is
d_c = sum_p y_B / sum_p n_B - sum_p y_A / sum_p n_A over its prompts, and the roll-up's is
D = sum_c w_c d_c with the weights normalised. A resample draws each intent's prompts
with replacement, as many as it has, the same draw for A and B (the pairing), and
recomputes every d_c and D from the drawn prompts' counts; the interval is the percentile
interval of the resampled changes (numpy's default, linear, quantiles). Pure: the caller
decides which runs, which stage and which prompts pair.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from prereg.stats._validate import array, counts
from prereg.stats.invokerank.model import FloatArray
from prereg.stats.invokerank.resample import _unit_counts

#: Resamples of the paired prompt bootstrap.
PAIRED_RESAMPLES = 10_000


@dataclass(frozen=True)
class PairedChange:
    """Per intent and rolled up: the change B - A, and its percentile interval."""

    change: FloatArray  # (C,) d_c
    low: FloatArray  # (C,)
    high: FloatArray  # (C,)
    rollup: float
    rollup_low: float
    rollup_high: float
    prompts: FloatArray  # (C,) prompts per intent
    level: float
    resamples: int
    method: str


def paired_prompt_bootstrap(
    runs_a: Any,
    reached_a: Any,
    runs_b: Any,
    reached_b: Any,
    cell: Any,
    *,
    weights: Any = None,
    level: float = 0.90,
    resamples: int = PAIRED_RESAMPLES,
    seed: int | None = 0,
) -> PairedChange:
    """One row per prompt: its positive runs and how many reached the stage in A and in B,
    and its intent ``cell`` (0 .. C-1, every intent with a prompt). ValueError naming the
    argument for negative or non-finite counts, reached above runs, lengths that differ,
    a prompt with no run on either side, a level outside (0, 1), fewer than one resample
    and weights that are negative, of the wrong length or sum to 0."""
    na = array(runs_a, "runs_a", low=0.0).ravel()
    ya = array(reached_a, "reached_a", low=0.0).ravel()
    nb = array(runs_b, "runs_b", low=0.0).ravel()
    yb = array(reached_b, "reached_b", low=0.0).ravel()
    c = counts(cell, "cell", allow_empty=False).ravel().astype(np.int64)
    for name, v in (("reached_a", ya), ("runs_b", nb), ("reached_b", yb), ("cell", c)):
        if v.size != na.size:
            raise ValueError(f"{name} has {v.size} rows, runs_a has {na.size}")
    if np.any(ya > na) or np.any(yb > nb):
        raise ValueError("reached exceeds runs in a row")
    if np.any(na <= 0) or np.any(nb <= 0):
        raise ValueError("every prompt needs a run in A and in B (runs_a, runs_b > 0)")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if int(resamples) < 1:
        raise ValueError("resamples must be at least 1")
    cells = int(c.max()) + 1
    if np.unique(c).size != cells:
        raise ValueError("cell must number the intents 0 .. C-1, each with a prompt")
    w = np.ones(cells) if weights is None else np.asarray(weights, dtype=np.float64).ravel()
    if w.size != cells or np.any(~np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
        raise ValueError("weights: one non-negative weight per intent, not all 0")
    w = w / w.sum()

    def changes(mult: FloatArray) -> FloatArray:
        """d_c for each row of prompt multiplicities (B, P) -> (B, C)."""
        one_hot = np.zeros((na.size, cells))
        one_hot[np.arange(na.size), c] = 1.0
        sums = {
            k: (mult * v) @ one_hot for k, v in (("na", na), ("ya", ya), ("nb", nb), ("yb", yb))
        }
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.asarray(sums["yb"] / sums["nb"] - sums["ya"] / sums["na"], np.float64)

    observed = changes(np.ones((1, na.size)))[0]
    rng = np.random.default_rng(seed)
    mult, index = _unit_counts(rng, np.arange(na.size, dtype=np.int64), c, int(resamples))
    drawn = changes(mult[:, index])
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(drawn, [tail, 1.0 - tail], axis=0)
    roll = drawn @ w
    rlow, rhigh = np.quantile(roll, [tail, 1.0 - tail])
    return PairedChange(
        change=observed,
        low=np.asarray(low, np.float64),
        high=np.asarray(high, np.float64),
        rollup=float(observed @ w),
        rollup_low=float(rlow),
        rollup_high=float(rhigh),
        prompts=np.bincount(c, minlength=cells).astype(np.float64),
        level=level,
        resamples=int(resamples),
        method=f"paired prompt bootstrap within intents, percentile ({int(resamples)} resamples)",
    )
