"""Recorded terminal classes and the Agent Resolution Split (3.3, 6.3).

Classes per run, their shares, and the Host Self-Serve and No-tool Decline Rates, shown
as the published path shows a single rate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from prereg.stats._validate import at_least, counts, integer_labels, probability, same_length
from prereg.stats.invokerank.model import FloatArray, _weights
from prereg.stats.invokerank.rates import _prompt_rate
from prereg.stats.results import ProportionInterval

# --- Terminal classes and the Agent Resolution Split (3.3, 6.3) -------------------------
#
# Recorded terminal classes (search behaviour, no judge): where the first external call
# went (focal, competitor, other_external), or, with none, whether the host answered
# without searching, searched then declined, or gave no answer (unresolved).
# The published split's classes need the native judge for runs with no external call.
# Reading (the seed's Table 1 is not in the text): a no-tool run whose answer the judge
# found to meet the need is native self-service; one judged not to meet it is
# "searched then declined" when the host searched and "unresolved" otherwise; a run with
# no final answer is unresolved without a judge. A no-tool run with an answer and no
# verdict is "unjudged": it stays in the denominator as its own class (never silently
# dropped), and the Host Self-Serve Rate and No-tool Decline Rate are unknown (None)
# while any run is unjudged; the published split that drops them ("degenerate split",
# 6.3) is not shown.

TERMINAL_CLASSES: tuple[str, ...] = (
    "focal",
    "competitor",
    "other_external",
    "answered_without_search",
    "searched_then_declined",
    "unresolved",
)
SPLIT_CLASSES: tuple[str, ...] = (
    "focal",
    "competitor",
    "other_external",
    "native_self_service",
    "searched_then_declined",
    "unresolved",
    "unjudged",
)
_EXTERNAL = frozenset({"focal", "competitor", "other_external"})


def terminal_counts(classes: Sequence[str], intent: Any, cells: int) -> NDArray[np.int64]:
    """Counts per intent cell (rows) and recorded terminal class (:data:`TERMINAL_CLASSES`).

    ValueError naming the argument for no runs, an intent code that is NaN, negative,
    fractional or not below ``cells``, as many intents as classes not given, and
    ``cells`` below 1."""
    cells = at_least(cells, "cells", 1)
    if len(classes) == 0:
        raise ValueError("classes is empty")
    cell = _cells(intent, cells)
    same_length(cell, "intent", list(classes), "classes")
    unknown = sorted(set(classes) - set(TERMINAL_CLASSES))
    if unknown:
        raise ValueError(f"unknown terminal class(es): {', '.join(unknown)}")
    out = np.zeros((cells, len(TERMINAL_CLASSES)), dtype=np.int64)
    for c, name in zip(cell, classes, strict=True):
        out[c, TERMINAL_CLASSES.index(name)] += 1
    return out


def _cells(intent: Any, cells: int) -> NDArray[np.int64]:
    """Intent cell codes in 0 .. cells-1, or ValueError naming ``intent``."""
    cell = counts(np.ravel(intent), "intent").ravel()
    if np.any(cell >= cells):
        raise ValueError(f"intent: {int(cell.max())} is not below cells ({cells})")
    return cell


def split_class(terminal: str, native_met: bool | None) -> str:
    """The Agent Resolution Split class of one positive run (reading above)."""
    if terminal in _EXTERNAL or terminal == "unresolved":
        return terminal
    if terminal not in TERMINAL_CLASSES:
        raise ValueError(f"unknown terminal class: {terminal}")
    if native_met is None:
        return "unjudged"
    if native_met:
        return "native_self_service"
    return "searched_then_declined" if terminal == "searched_then_declined" else "unresolved"


@dataclass(frozen=True)
class ResolutionSplit:
    """The Agent Resolution Split over eligible positive runs (3.3)."""

    counts: NDArray[np.int64]  # (C, len(SPLIT_CLASSES))
    shares: FloatArray  # (len(SPLIT_CLASSES),) pooled over runs, unjudged kept
    weighted_shares: FloatArray  # intent-weighted mean of the per-intent shares
    unjudged: int
    degenerate: bool  # some no-tool run is unjudged: the published split would drop it
    host_self_serve: ProportionInterval | None  # None while any run is unjudged
    no_tool_decline: ProportionInterval | None


def resolution_split(
    terminal: Sequence[str],
    native_met: Sequence[bool | None],
    intent: Any,
    prompt: Any,
    cells: int,
    *,
    weights: Any = None,
    level: float = 0.90,
) -> ResolutionSplit:
    """Classes, shares and the two rates of the split (reading above).

    The rates carry Jeffreys intervals on counts deflated at the indicator's own
    one-way ANOVA rho over prompts (4.1, step 8; the stage default 0.6 when it cannot be
    estimated), like every single rate the published path displays. ValueError naming
    the argument for no runs, a verdict other than True, False or None (NaN among
    them), an intent or prompt code that is missing, fractional or (intent) not in
    0 .. cells-1, lengths that differ, ``cells`` below 1 and a level outside (0, 1).
    """
    level = probability(level, "level")
    cells = at_least(cells, "cells", 1)
    if len(terminal) == 0:
        raise ValueError("terminal is empty")
    same_length(list(terminal), "terminal", list(native_met), "native_met")
    for v in native_met:
        if not (v is None or isinstance(v, (bool, np.bool_)) or v in (0, 1)):
            raise ValueError(f"native_met: each verdict is True, False or None, got {v!r}")
    split = [split_class(t, v) for t, v in zip(terminal, native_met, strict=True)]
    cell = _cells(intent, cells)
    units = integer_labels(np.ravel(prompt), "prompt")
    same_length(list(terminal), "terminal", cell, "intent")
    same_length(list(terminal), "terminal", units, "prompt")
    counts = np.zeros((cells, len(SPLIT_CLASSES)), dtype=np.int64)
    for c, name in zip(cell, split, strict=True):
        counts[c, SPLIT_CLASSES.index(name)] += 1
    total = counts.sum(axis=1)
    w = _weights(weights, cells)
    used = total > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        per_intent = counts / total[:, None]
    weighted = (w[used, None] * per_intent[used]).sum(axis=0) / w[used].sum()
    unjudged = int(counts[:, SPLIT_CLASSES.index("unjudged")].sum())
    rates: list[ProportionInterval | None] = [None, None]
    if unjudged == 0:
        for i, name in enumerate(("native_self_service", "searched_then_declined")):
            hit = np.array([s == name for s in split], dtype=np.float64)
            rates[i] = _prompt_rate(hit, units, level)
    return ResolutionSplit(
        counts=counts,
        shares=counts.sum(axis=0) / counts.sum(),
        weighted_shares=np.asarray(weighted),
        unjudged=unjudged,
        degenerate=unjudged > 0,
        host_self_serve=rates[0],
        no_tool_decline=rates[1],
    )
