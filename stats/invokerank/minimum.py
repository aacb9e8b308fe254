"""The small-sample rule of every interval the InvokeRank section prints (issue 39).

Below :data:`MIN_PROMPTS` prompts in an intent, an interval resampled over (or deflated
by) that intent's prompts is not shown: its bounds are null and a label says
"too few prompts (n < m)". The rule applies to the score's intervals (published and
calibrated alike), the Invoke Rating's and the Selection Shares'. An interval over
several intents (the roll-up, a rating, a share's roll-up) needs every intent it weighs
to meet the minimum. With sessions (replicate runs of the arm), the calibrated interval
needs :data:`MIN_SESSIONS` of them, or one: with two, the between-session variance rests
on one degree of freedom.

The minimums come from bench/invokerank_coverage.py (docs/invokerank.md, "The
small-sample rule"): the smallest design at which the calibrated interval covers within
two points of nominal, per intent and rolled up.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from prereg.stats._validate import array, at_least, count, counts, same_length

#: Fewest prompts in an intent for an interval of (or over) that intent.
MIN_PROMPTS = 4
#: Fewest sessions for a calibrated interval that resamples sessions (one session is a
#: single run of the arm: no session level, nothing to resample).
MIN_SESSIONS = 3


def too_few_prompts_text(prompts: int, minimum: int = MIN_PROMPTS) -> str:
    """The label of an interval withheld for too few prompts in an intent."""
    return f"too few prompts ({prompts} < {minimum})"


def too_few_prompts(
    prompts: Sequence[int] | Any,
    weights: Sequence[float] | Any = None,
    minimum: int = MIN_PROMPTS,
) -> tuple[list[str | None], str | None]:
    """Per intent and for a combination over intents (weights: which intents it weighs;
    all by default), the label of an interval withheld for too few prompts, or None.

    An intent with fewer than ``minimum`` prompts gets "too few prompts (n < m)"; the
    combination is withheld when any intent it weighs is, naming the smallest.
    ValueError naming the argument for NaN, infinite, negative or fractional prompt
    counts, no intents, weights that are NaN, infinite or negative or not one per
    intent, and a minimum that is not a non-negative integer."""
    n = counts(prompts, "prompts", allow_empty=False).ravel()
    minimum = count(minimum, "minimum")
    if weights is None:
        w = np.ones(n.size)
    else:
        w = array(weights, "weights", allow_empty=True, low=0.0).ravel()
        same_length(n, "prompts", w, "weights")
    per = [too_few_prompts_text(int(k), minimum) if k < minimum else None for k in n]
    weighed = n[w > 0]
    if weighed.size and int(weighed.min()) < minimum:
        return per, f"too few prompts ({int(weighed.min())} < {minimum} in an intent)"
    return per, None


def too_few_sessions(sessions: int, minimum: int = MIN_SESSIONS) -> str | None:
    """The label of a calibrated interval withheld for too few sessions, or None (one
    session has no session level to resample). ValueError naming the argument for a
    session count below 1 (NaN, infinite or fractional among them) and a minimum that is
    not a non-negative integer."""
    sessions = at_least(sessions, "sessions", 1)
    minimum = count(minimum, "minimum")
    if 1 < sessions < minimum:
        return f"too few sessions ({sessions} < {minimum})"
    return None
