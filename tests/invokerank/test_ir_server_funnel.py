"""The funnel per listed integration (issue 17, item 5) from constructed runs against the
bundled podcast pool: surfaced from the search before the first call, selected as the
first call's server, invoked as that call validating against the called tool's schema,
executed and completed only for the focal integration; counted by hand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from prereg.experiments.loader import folder_reader, load_experiment
from prereg.experiments.offers import ArmSpec, arm_offer
from prereg.reports.invokerank.section import ArmMeta, invokerank_section
from prereg.reports.model import Report
from prereg.reports.observations import Obs, from_record, replaced
from prereg.reports.render.text import invokerank_tables

PODCAST = Path(__file__).resolve().parents[2] / "experiments" / "bundled" / "podcast-selection"
SERVERS = [
    ("castaway", "competitor", "Castaway"),
    ("earbud", "competitor", "Earbud"),
    ("weather", "decoy", "Skycast"),
    ("focal", "focal", "PodShelf"),
]
#: (first call's tool, its arguments, tools the search surfaced before it, focal stages)
RUNS: list[tuple[str | None, Any, list[str] | None, tuple[bool, bool, bool, bool, bool]]] = [
    ("earbud_podcast_search", {"keyword": "x"}, ["earbud_podcast_search"], (0, 0, 0, 0, 0)),
    ("earbud_podcast_search", {"query": "x"}, ["earbud_podcast_search"], (0, 0, 0, 0, 0)),
    ("castaway_find_podcast", {"text": "x"}, ["castaway_find_podcast"], (0, 0, 0, 0, 0)),
    (
        "podshelf_search_podcasts",
        {"query": "x"},
        ["podshelf_search_podcasts", "castaway_follow"],
        (1, 1, 1, 1, 1),
    ),
    ("podshelf_search_podcasts", {"query": "x"}, None, (1, 1, 1, 1, 0)),
    (None, None, ["earbud_podcast_search"], (0, 0, 0, 0, 0)),
]


def _record(i: int) -> Obs:
    tool, args, surfaced, stages = RUNS[i]
    owner = {"earbud": "earbud", "castaway": "castaway", "podshelf": "focal"}
    trace: list[dict[str, Any]] = []
    if surfaced is not None:
        trace.append({"kind": "search", "turn": 0, "surfaced": surfaced})
    if tool is not None:
        trace.append({"kind": "tool_call", "turn": 0, "tool": tool, "arguments": args})
        trace.append({"kind": "tool_call", "turn": 1, "tool": "skycast_forecast", "arguments": {}})
    names = ("surfaced", "selected", "invoked", "executed", "completed")
    return from_record(
        {
            "record_id": f"a/t{i // 2}/{i % 2}",
            "arm": "a",
            "task_id": f"t{i // 2}",
            "intent": "find",
            "polarity": "positive",
            "repeat": i % 2,
            "status": "ok",
            "evidence_class": "local",
            "terminal_class": "focal" if stages[1] else ("competitor" if tool else "unresolved"),
            "funnel": dict(zip(names, map(bool, stages), strict=True)),
            "offer": {
                "servers": [{"key": k, "role": r, "name": n} for k, r, n in SERVERS],
                "first_server": None if tool is None else owner[tool.split("_")[0]],
            },
            "trace": trace,
        }
    )


def test_each_listed_integration_s_funnel_by_hand() -> None:
    experiment = load_experiment(folder_reader(PODCAST), "podcast-selection")
    offer = arm_offer(ArmSpec(id="a", surface="focal"), experiment, 1)
    runs = [_record(i) for i in range(len(RUNS))]
    section = invokerank_section(runs, [ArmMeta("a", "focal", offer=offer)], seed=1)
    assert section is not None
    rows = {f.integration: f for f in section.arms[0].server_funnel}
    reached = {k: [st.reached for st in f.stages] for k, f in rows.items()}
    # surfaced: the search before the first call named one of its tools (run 4 recorded no
    # search: every listed tool was loaded); selected: the first call went to it; invoked:
    # and its arguments validate (run 1 sends 'query' where earbud wants 'keyword');
    # executed and completed: the focal's own, and never for a replayed competitor or decoy
    assert reached["earbud"] == [4, 2, 1, None, None]
    assert reached["castaway"] == [3, 1, 1, None, None]
    assert reached["weather"] == [1, 0, 0, None, None]  # a later call is not a first choice
    assert reached["focal"] == [2, 2, 2, 2, 1]
    assert all(f.listed == 6 for f in rows.values())
    # each rate is a share of the listing runs, with its interval around it
    earbud = rows["earbud"].stages[1]
    assert earbud.rate == pytest.approx(2 / 6) and earbud.interval is not None
    low, high = earbud.interval.low, earbud.interval.high
    assert low is not None and high is not None and low <= 2 / 6 <= high
    assert "replayed" in rows["earbud"].note
    # the focal row agrees with the recorded funnel of the same runs
    names = ("surfaced", "selected", "invoked", "executed", "completed")
    assert reached["focal"] == [sum(bool(o.funnel[s]) for o in runs) for s in names]
    # the report's table: one row per listed integration, unmeasured stages said so
    tables = {t[0]: t for t in invokerank_tables(Report.model_construct(invokerank=section))}
    _, header, body = tables[
        "Funnel per listed integration (runs reaching each stage among the runs listing it)"
    ]
    assert header[4:9] == list(names) and len(body) == 4
    assert body[1][header.index("executed")] == "not measured"  # earbud, replayed


def test_no_offer_no_funnel_and_an_unmeasured_surfaced_stays_null() -> None:
    runs = [_record(i) for i in range(len(RUNS))]
    section = invokerank_section(runs, [ArmMeta("a", "focal")], seed=1)
    assert section is not None and section.arms[0].server_funnel == []
    experiment = load_experiment(folder_reader(PODCAST), "podcast-selection")
    offer = arm_offer(ArmSpec(id="a", surface="focal"), experiment, 1)
    blind = [replaced(o, funnel={**o.funnel, "surfaced": None}) for o in runs]
    section = invokerank_section(blind, [ArmMeta("a", "focal", offer=offer)], seed=1)
    assert section is not None
    for row in section.arms[0].server_funnel:
        assert row.stages[0].reached is None and row.stages[0].interval is None
