"""An arm's runs as the estimator's inputs: which positive runs count, the score's level
(which stages every positive run measured), the per-prompt counts of each stage, and
the arm's evidence class.

Kept apart from the statistics: these functions only read observations and count.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from prereg.reports.observations import STAGE_OUTCOMES, STAGES, Obs, outcome_place
from prereg.stats.invokerank.resolution import split_class

Unit = tuple[str, str, int]


@dataclass(frozen=True)
class Prompts:
    """An arm's positive runs reduced to per-prompt counts (prompts in task-id order)."""

    tasks: list[str]
    intents: list[str]
    cell: list[int]
    runs: list[int]
    reached: list[list[int]]
    units: list[tuple[str, str, int]]


def _positive(observations: Sequence[Obs], arm: str) -> list[Obs]:
    return [
        o
        for o in observations
        if o.arm == arm and o.polarity == "positive" and (o.ok or o.counted_failure)
    ]


def _nested_values(values: Sequence[bool | None]) -> bool:
    reached = [v for v in values if v is not None]
    return all(a or not b for a, b in zip(reached, reached[1:], strict=False))


def score_level(runs: Sequence[Obs]) -> tuple[str, tuple[str, ...], str]:
    """(level, stages, reason): the full score, IR_DS, or none (the docstring of
    :mod:`prereg.reports.invokerank.section`)."""
    if not runs:
        return "not_computed", (), "no positive run"
    values = [o.outcomes[STAGE_OUTCOMES] for o in runs]  # each run's stages, read once
    distinct = set(values)  # a handful of patterns: each checked once
    unnested = {v for v in distinct if not _nested_values(v)}
    broken = sum(v in unnested for v in values) if unnested else 0
    if broken:
        return (
            "not_computed",
            (),
            f"{broken} positive run(s) reach a stage without its parent: a recording "
            "error (the funnel is nested), so no score",
        )
    measured = {s: all(v[k] is not None for v in distinct) for k, s in enumerate(STAGES)}
    if all(measured.values()):
        return "full", STAGES, "every stage measured on every positive run"
    if measured["surfaced"] and measured["selected"]:
        missing = ", ".join(s for s in STAGES if not measured[s])
        return (
            "selection",
            STAGES[:2],
            f"{missing} not measured on every positive run: scored at Surfaced x "
            "Selected and labelled Selection-level (IR_DS), never the full score",
        )
    missing = ", ".join(s for s in STAGES[:2] if not measured[s])
    return "not_computed", (), f"{missing} not measured on every positive run"


def prompt_counts(runs: Sequence[Obs], stages: Sequence[str]) -> Prompts:
    by_task: dict[str, list[Obs]] = defaultdict(list)
    for o in runs:
        by_task[o.task_id].append(o)
    intents = sorted({group[0].intent for group in by_task.values()})
    # in task-id order, never the order the runs were stored in (which follows when
    # parallel units finished): a seeded bootstrap resamples by position, so the same
    # runs must give the same interval however they were stored
    tasks = sorted(by_task)
    places = [outcome_place(s) for s in stages]
    return Prompts(
        tasks=tasks,
        intents=intents,
        cell=[intents.index(by_task[t][0].intent) for t in tasks],
        runs=[len(by_task[t]) for t in tasks],
        reached=[[sum(bool(o.outcomes[k]) for o in by_task[t]) for k in places] for t in tasks],
        units=[o.unit for o in runs],
    )


def _evidence(runs: Sequence[Obs]) -> tuple[str | None, bool]:
    classes = {o.evidence_class for o in runs}
    return (next(iter(classes)) if len(classes) == 1 else None), len(classes) > 1


def self_served(runs: Sequence[Obs], native: Mapping[str, bool] | None) -> frozenset[Unit]:
    """The units of the positive runs the native judge found self-served: no external
    call, an answer, and a verdict that it met the need (the Agent Resolution Split's
    ``native_self_service``, :func:`prereg.stats.invokerank.resolution.split_class`).
    The Lever leaves them out (seed 4.2)."""
    if not native:
        return frozenset()
    return frozenset(
        o.unit
        for o in runs
        if o.ok
        and o.terminal_class is not None
        and split_class(str(o.terminal_class), native.get(o.record_id)) == "native_self_service"
    )
