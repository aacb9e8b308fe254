"""The Invoke Rating's data and model terms.

Runs' first choices, validated; which terms a fit carries (the alternatives ever chosen,
intent effects, the position and branded terms where they are identified); and the
conditional-logit design built from them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from prereg.stats._validate import array, binary, counts, integer_labels, same_length
from prereg.stats.invokerank.logit import ChoiceDesign
from prereg.stats.invokerank.model import FloatArray


@dataclass(frozen=True)
class ChoiceRuns:
    """First choices of runs, validated (see :func:`invoke_rating`)."""

    chosen: NDArray[np.int64]  # (T,) -1: the outside option
    available: NDArray[np.bool_]  # (T, J)
    intent: NDArray[np.int64]  # (T,)
    prompt: NDArray[np.int64]  # (T,)
    position: FloatArray | None  # (T, J)
    branded: FloatArray | None  # (T, J)

    def take(self, index: NDArray[np.int64]) -> ChoiceRuns:
        def sub(a: FloatArray | None) -> FloatArray | None:
            return None if a is None else a[index]

        return ChoiceRuns(
            chosen=self.chosen[index],
            available=self.available[index],
            intent=self.intent[index],
            prompt=self.prompt[index],
            position=sub(self.position),
            branded=sub(self.branded),
        )


def _choice_runs(
    chosen: Any, available: Any, intent: Any, prompt: Any, position: Any, branded: Any
) -> ChoiceRuns:
    c = array(chosen, "chosen", low=-1, integer=True).ravel().astype(np.int64)
    av = binary(available, "available", allow_empty=True).astype(bool)
    if av.ndim != 2:
        raise ValueError(f"available must be runs x alternatives, got shape {av.shape}")
    same_length(c, "chosen", av, "available")  # one row per run
    if np.any(c >= av.shape[1]):
        raise ValueError("chosen must be -1 (no tool) or an alternative index")
    if np.any((c >= 0) & ~av[np.arange(c.size), np.maximum(c, 0)]):
        raise ValueError("a run chose an alternative that was not available to it")
    cells = (
        np.zeros(c.size, np.int64)
        if intent is None
        else counts(np.ravel(intent), "intent", allow_empty=True).ravel()
    )
    units = np.arange(c.size) if prompt is None else integer_labels(np.ravel(prompt), "prompt")
    same_length(c, "chosen", cells, "intent")
    same_length(c, "chosen", units, "prompt")

    def matrix(a: Any, name: str) -> FloatArray | None:
        if a is None:
            return None
        m = array(a, name, allow_empty=True, allow_nan=True, allow_inf=True)
        if m.shape != av.shape or not np.all(np.isfinite(m[av])):
            raise ValueError(f"{name} must be runs x alternatives, finite where available")
        return np.where(av, m, 0.0)

    return ChoiceRuns(c, av, cells, units, matrix(position, "position"), matrix(branded, "branded"))


def _varies(values: FloatArray | None, available: NDArray[np.bool_]) -> bool:
    """Whether a covariate varies within some choice set (the outside option counts as 0)."""
    if values is None:
        return False
    with_outside = np.concatenate([np.zeros((values.shape[0], 1)), values], axis=1)
    mask = np.concatenate([np.ones((values.shape[0], 1), bool), available], axis=1)
    lo = np.where(mask, with_outside, np.inf).min(axis=1)
    hi = np.where(mask, with_outside, -np.inf).max(axis=1)
    return bool(np.any(hi > lo))


@dataclass(frozen=True)
class RatingTerms:
    """Which parameters a fit carries, in order: beta (kept alternatives), u, gamma, lambda."""

    kept: NDArray[np.int64]  # alternatives in the fit (chosen at least once)
    cells: int  # intent cells with effects (0: none)
    position: bool
    branded: bool


def _design(runs: ChoiceRuns, terms: RatingTerms, prior_sd: float | None) -> ChoiceDesign:
    t, k = runs.chosen.size, terms.kept.size
    cols = k + k * terms.cells + int(terms.position) + int(terms.branded)
    x = np.zeros((t, k + 1, cols))
    x[:, 1:, :k] = np.eye(k)[None, :, :]
    if terms.cells:
        for j in range(k):
            x[np.arange(t), 1 + j, k + j * terms.cells + runs.intent] = 1.0
    col = k + k * terms.cells
    if terms.position and runs.position is not None:
        x[:, 1:, col] = runs.position[:, terms.kept]
        col += 1
    if terms.branded and runs.branded is not None:
        x[:, 1:, col] = runs.branded[:, terms.kept]
    available = np.concatenate([np.ones((t, 1), bool), runs.available[:, terms.kept]], axis=1)
    lookup = np.full(runs.available.shape[1] + 1, 0, np.int64)
    lookup[1 + terms.kept] = np.arange(1, k + 1)
    penalty = np.zeros(cols)
    if terms.cells and prior_sd is not None and math.isfinite(prior_sd):
        penalty[k : k + k * terms.cells] = 1.0 / prior_sd**2
    return ChoiceDesign(x=x, available=available, chosen=lookup[runs.chosen + 1], penalty=penalty)


def _terms(runs: ChoiceRuns, prior_sd: float | None) -> RatingTerms:
    counts = np.bincount(runs.chosen + 1, minlength=runs.available.shape[1] + 1)
    kept = np.flatnonzero(counts[1:] > 0).astype(np.int64)
    cells = int(runs.intent.max()) + 1
    return RatingTerms(
        kept=kept,
        cells=cells if prior_sd is not None and cells > 1 else 0,
        position=_varies(runs.position, runs.available),
        branded=_varies(runs.branded, runs.available),
    )
