"""Replicate sessions not yet run, in the InvokeRank section (issue 41, item 1).

``prereg run ID --session K`` runs one replicate session at a time
(:mod:`prereg.registry.sessions`), so an analysis (``--allow-incomplete``) can meet a
registration with a session that has no runs. The calibrated interval's session part
resamples the sessions it is given: with one of three it would silently drop the
run-to-run component (one session has no session level), with two of three it would
estimate it from fewer sessions than registered. Neither is the interval the
registration committed to, so it is withheld, per intent and rolled up, with
"sessions run: k of S" (:func:`prereg.registry.sessions.sessions_run_text`). A session
with some runs counts as run: the report is then already labelled incomplete (its
completeness lists each session's units), and the interval resamples what exists.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import replace

import numpy as np

from prereg.registry.sessions import sessions_run_text
from prereg.reports.observations import Obs
from prereg.stats.invokerank import BootstrapScore


def missing_sessions(runs: Iterable[Obs], sessions: int, per_session: int) -> str | None:
    """Why the calibrated interval is withheld for these positive runs of an arm, or None
    when every registered session has a run (or there are no replicate sessions)."""
    return sessions_run_text({o.repeat // per_session for o in runs}, sessions)


def withheld(boot: BootstrapScore, reason: str) -> BootstrapScore:
    """``boot`` with every interval withheld for ``reason`` (the point estimates kept)."""
    cells = int(np.asarray(boot.q).size)
    nan = np.full(cells, math.nan)
    return replace(
        boot,
        q_low={lv: nan.copy() for lv in boot.q_low},
        q_high={lv: nan.copy() for lv in boot.q_high},
        rollup_low=dict.fromkeys(boot.rollup_low, math.nan),
        rollup_high=dict.fromkeys(boot.rollup_high, math.nan),
        q_reason=(reason,) * cells,
        rollup_reason=reason,
    )
