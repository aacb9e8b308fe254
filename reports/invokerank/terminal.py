"""An arm's recorded terminal classes (Figure 4) and its Agent Resolution Split: how runs
ended, and which no-tool endings the native judge calls resolved.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from prereg import stats
from prereg.reports.invokerank.intervals import LEVELS, _iv
from prereg.reports.model import Provenance, ResolutionRate, ResolutionSplitReport, TerminalRow
from prereg.reports.observations import Obs
from prereg.reports.pairs import runset
from prereg.stats.invokerank import (
    SPLIT_CLASSES,
    TERMINAL_CLASSES,
    resolution_split,
    terminal_counts,
)

SPLIT_NOTE_DEGENERATE = (
    "{n} positive run(s) ended with no external call and carry no native-judge verdict "
    "({why}): they are kept in the denominator as 'unjudged', and the "
    "Host Self-Serve Rate and No-tool Decline Rate are unknown. The published split, "
    "which drops unjudged runs from its denominator, is not shown (the seed's degenerate "
    "split, 6.3)."
)


def terminal_rows(observations: Sequence[Obs], arm: str) -> list[TerminalRow]:
    """Recorded terminal classes per intent: positive runs, then negative runs apart."""
    out = []
    for polarity in ("positive", "negative"):
        runs = [
            o
            for o in observations
            if o.arm == arm and o.polarity == polarity and o.ok and o.terminal_class is not None
        ]
        if not runs:
            continue
        intents = sorted({o.intent for o in runs})
        counts = terminal_counts(
            [str(o.terminal_class) for o in runs],
            [intents.index(o.intent) for o in runs],
            len(intents),
        )
        names = TERMINAL_CLASSES
        for label, row in [("all intents", counts.sum(axis=0)), *zip(intents, counts, strict=True)]:
            out.append(
                TerminalRow(
                    intent=label,
                    polarity=polarity,
                    runs=int(row.sum()),
                    counts={n: int(v) for n, v in zip(names, row, strict=True)},
                )
            )
    return out


def _rate(value: stats.ProportionInterval | None) -> ResolutionRate | None:
    if value is None:
        return None
    return ResolutionRate(
        rate=float(value.estimate),
        successes=int(value.successes),
        runs=int(value.trials),
        interval=_iv(value.low, value.high, LEVELS[0], value.method),
    )


def resolution_block(
    observations: Sequence[Obs], arm: str, native: Mapping[str, bool] | None = None
) -> ResolutionSplitReport | None:
    """The Agent Resolution Split of the arm's positive runs; ``native``: record id -> the
    native judge's parsed verdict (a run without one is unjudged)."""
    runs = [
        o
        for o in observations
        if o.arm == arm and o.polarity == "positive" and o.ok and o.terminal_class is not None
    ]
    if not runs:
        return None
    intents = sorted({o.intent for o in runs})
    tasks = list(dict.fromkeys(o.task_id for o in runs))
    split = resolution_split(
        [str(o.terminal_class) for o in runs],
        [(native or {}).get(o.record_id) for o in runs],
        [intents.index(o.intent) for o in runs],
        [tasks.index(o.task_id) for o in runs],
        len(intents),
        level=LEVELS[0],
    )
    names = SPLIT_CLASSES
    note = (
        SPLIT_NOTE_DEGENERATE.format(
            n=split.unjudged,
            why="no native judge has run" if not native else "not judged yet, or unparseable",
        )
        if split.degenerate
        else "every no-tool run is judged"
    )
    return ResolutionSplitReport(
        runs=len(runs),
        counts={n: int(v) for n, v in zip(names, split.counts.sum(axis=0), strict=True)},
        shares={n: float(v) for n, v in zip(names, split.shares, strict=True)},
        weighted_shares={n: float(v) for n, v in zip(names, split.weighted_shares, strict=True)},
        unjudged=split.unjudged,
        degenerate=split.degenerate,
        note=note,
        host_self_serve=_rate(split.host_self_serve),
        no_tool_decline=_rate(split.no_tool_decline),
        provenance=Provenance(
            function="prereg.stats.invokerank.resolution_split",
            parameters={"level": LEVELS[0], "weights": "equal over intents"},
            registration_field=None,
            runs=runset([o.unit for o in runs], f"arm {arm}; positive tasks; status ok"),
        ),
    )
