"""What fills a truncated first response (seed appendix E, Table 8; issue 42, item 4).

The seed reads the saved provider responses: for each configuration with reasoning-token
telemetry, the first response of every episode that carried the largest menu (128
schemas), those that ended at the completion cap, and the content of each truncated
response: reasoning only (no visible text and no tool call), a partial tool call,
partial visible text, or both.

prereg reads the run records (readings T1-T3 of docs/toolbottleneck.md):

- **A first request** is the first model request of a graded (status ok) episode at a
  configuration's largest menu in a capacity cell; a unit counted as an infrastructure
  failure has no response and is not a first request.
- **Truncated** when the episode's trace records a ``cut`` event (the response that ended
  at the completion cap) at turn 0.
- **Content.** The record keeps the cut response's text, which the drivers write as the
  visible text followed by any partial tool-call arguments, with no mark between them;
  so prereg counts *reasoning only* (an empty cut text with reasoning tokens reported in
  the event's usage) and *visible text or a partial call* (a non-empty cut text), and
  withholds the seed's split of the second between "partial call", "partial text" and
  "both", saying why. An empty cut text without reported reasoning tokens is counted
  apart ("empty, no reasoning reported"). Reasoning telemetry: a configuration whose
  records report reasoning tokens on any turn.
- A study whose records keep no response (the simulated policy's traces hold calls and
  stops only) gets the table's reason instead of its rows.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from prereg.reports.toolbottleneck.model import StudyTable
from prereg.runners.record import RunRecord

SPLIT_WITHHELD = (
    "partial call / partial text / both: not told apart (the record keeps the cut "
    "response's visible text and partial call arguments as one text)"
)


@dataclass(frozen=True)
class FirstResponses:
    configuration: str
    telemetry: bool
    first: int
    truncated: int
    reasoning_only: int
    visible: int
    empty: int


def first_responses(
    records: Sequence[RunRecord],
    largest: Mapping[str, str],
) -> list[FirstResponses]:
    """Per configuration (``largest``: arm -> configuration, the arms at each
    configuration's largest menu), the counts of the module's docstring."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])
    telemetry: dict[str, bool] = defaultdict(bool)
    for r in records:
        config = largest.get(r.arm)
        if config is None or r.status != "ok":
            continue
        if any(e.usage is not None and e.usage.reasoning is not None for e in r.trace):
            telemetry[config] = True
        c = counts[config]
        if r.turns < 1:
            continue
        c[0] += 1
        cut = next((e for e in r.trace if e.kind == "cut" and e.turn == 0), None)
        if cut is None:
            continue
        c[1] += 1
        text = (cut.text or "").strip()
        if text:
            c[3] += 1
        elif cut.usage is not None and (cut.usage.reasoning or 0) > 0:
            c[2] += 1
        else:
            c[4] += 1
    return [FirstResponses(config, telemetry[config], *counts[config]) for config in sorted(counts)]


def first_response_tables(
    records: Sequence[RunRecord], largest: Mapping[str, str]
) -> list[StudyTable]:
    """Table 8 in the seed's shape, or its reason."""
    if not largest:
        return []
    rows = first_responses(records, largest)
    title = "Truncated first responses at the largest menu and what fills them (seed Table 8)"
    kept = any(e.kind == "cut" for r in records if r.arm in largest for e in r.trace)
    cut_at_cap = any(
        r.terminal_flag == "completion_cap" for r in records if r.arm in largest and r.turns
    )
    if cut_at_cap and not kept:
        return [
            StudyTable(
                title=title,
                columns=["configuration", "reason"],
                rows=[
                    [
                        ", ".join(sorted(set(largest.values()))),
                        "withheld: the records keep no truncated response (the simulated "
                        "policy's traces hold its calls and stops only), so their content "
                        "cannot be read",
                    ]
                ],
            )
        ]
    body = [
        [
            r.configuration,
            "yes" if r.telemetry else "no",
            str(r.first),
            str(r.truncated),
            str(r.reasoning_only) if r.telemetry else "not measured",
            str(r.visible),
            str(r.empty),
            "withheld",
        ]
        for r in rows
    ]
    return [
        StudyTable(
            title=title,
            columns=[
                "configuration",
                "reasoning telemetry",
                "first requests",
                "truncated",
                "reasoning only",
                "visible text or partial call",
                "empty, no reasoning reported",
                "partial call / partial text / both",
            ],
            rows=body,
            note=(
                "First requests: the first model request of each graded episode at the "
                "configuration's largest menu (capacity cells); truncated: its response ended "
                "at the completion cap. Reasoning only: an empty cut response whose usage "
                "reports reasoning tokens ('not measured' without reasoning telemetry). "
                f"Withheld, {SPLIT_WITHHELD}."
            ),
        )
    ]
