"""The model-host loop (:func:`prereg.runners.toolbottleneck.harness.play_host`) with an
in-process scripted driver: the contract's stops the provider tests do not reach.

Expectations from the seed's contract (3.3) on the bundled overdue-case family's low
workflow (search, read, escalate: certified minimum 3, call limit 5): a malformed call
is a call that breaks the protocol; wasted calls that leave two reference calls for
fewer remaining calls, which is the infeasibility stop; a response past the episode
budget is not acted on; a call the menu does not list executes nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from prereg.experiments.toolbottleneck.compile import Cell
from prereg.experiments.toolbottleneck.family import load_family
from prereg.experiments.toolbottleneck.sandbox import Sandbox, build_sandbox
from prereg.runners.drivers.base import (
    Action,
    Episode,
    Exchange,
    FinalAnswer,
    Malformed,
    ToolCall,
    Turn,
    Usage,
)
from prereg.runners.toolbottleneck.harness import HostUnit, play_host
from prereg.runners.toolbottleneck.host import Contract
from tests.toolbottleneck.helpers import BUNDLED, SMALL_SIZES, family, family_doc
from tests.toolbottleneck.tb_agent import ROUTE


class Scripted:
    """A driver that returns the scripted actions in order, and records what it saw."""

    name = "scripted"
    evidence_class = "api"
    sees_solution = False
    loads_all_tools = True

    def __init__(self, actions: Sequence[Any], tokens: int = 10) -> None:
        self.actions = list(actions)
        self.tokens = tokens
        self.seen: list[Episode] = []

    async def next_turn(self, episode: Episode, history: Sequence[Exchange]) -> Turn:
        self.seen.append(episode)
        step = self.actions[len(history)]
        action: Action = step(episode) if callable(step) else step
        return Turn(action, usage=Usage(input=self.tokens, output=1), latency_ms=5.0)

    async def aclose(self) -> None:
        return None


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    family = load_family(BUNDLED / "overdue-case-escalation.yaml")
    return build_sandbox(family, Cell("capacity", 8, "low", 0, "raw"), seed=0)


def _search(episode: Episode) -> ToolCall:
    name = next(
        t.name
        for t in episode.tools
        if t.name.startswith("search_cases") and ROUTE in t.description
    )
    key = episode.prompt.split("case ")[1].split(" ")[0]
    return ToolCall(name, {"query": key})


def _play(sandbox: Sandbox, driver: Scripted, budget: int = 100_000) -> Any:
    unit = HostUnit("m", {}, None, 1, 1, "unit")
    contract = Contract(completion_cap=256, episode_tokens=budget, menu_mode="fixed")
    return asyncio.run(play_host(sandbox, driver, unit, contract))  # type: ignore[arg-type]


def test_a_malformed_call_breaks_the_protocol(sandbox: Sandbox) -> None:
    played = _play(sandbox, Scripted([Malformed("{not json"), FinalAnswer("{}")]))
    assert len(played.episode.calls) == 1
    assert dict(played.verification.verdicts)["protocol"] is False
    # the empty answer has no decision (X fails), which ranks before a contract break
    assert played.verification.flag == "wrong_conclusion"


def test_wasted_calls_stop_the_episode_as_infeasible(sandbox: Sandbox) -> None:
    played = _play(sandbox, Scripted([_search, _search, _search, _search]))
    # the read and the escalation are still missing: after the third identical search two
    # calls are left (feasible), after the fourth one call is left (infeasible)
    assert len(played.episode.calls) == 4
    assert played.verification.flag == "infeasible"
    assert played.verification.success is False


def test_a_response_past_the_episode_budget_is_not_acted_on(sandbox: Sandbox) -> None:
    played = _play(sandbox, Scripted([_search, _search], tokens=600), budget=1000)
    assert len(played.episode.calls) == 1  # the second response passed the budget
    assert played.verification.flag == "episode_budget"
    assert played.tokens.input == 1200 and played.latency_ms == 10.0


def test_an_unlisted_tool_executes_nothing(sandbox: Sandbox) -> None:
    driver = Scripted([ToolCall("delete_everything", {"id": "x"}), FinalAnswer("{}")])
    played = _play(sandbox, driver)
    call = played.episode.calls[0]
    assert call.listed is False and call.returned == ()
    assert played.episode.final_state == {}
    assert dict(played.verification.verdicts)["protocol"] is False
    result = next(e for e in played.trace if e.kind == "tool_result")
    assert result.is_error is True


def _discovery() -> list[Sandbox]:
    fam = family(family_doc(action=True))
    return [
        build_sandbox(fam, Cell("discovery", 8, "low", 0, "raw", n, r), seed=seed)
        for n in (16, 48)
        for r in ("flat-lexical", "connector-first")
        for seed in (0, 1, 2)
    ]


def test_discovery_shows_the_shortlist_and_stops_before_any_request_without_it() -> None:
    sandboxes = _discovery()
    missing = [s for s in sandboxes if not s.key.required_functions <= s.key.menu]
    present = [s for s in sandboxes if s.key.required_functions <= s.key.menu]
    assert missing and present  # both cases occur among these cells
    for s in missing:
        driver = Scripted([])  # any request would fail: none may be sent
        played = _play(s, driver)
        assert driver.seen == []
        assert played.verification.first_unmet == "availability"
        assert played.verification.flag == "infeasible"
    for s in present:
        driver = Scripted([FinalAnswer("{}")])
        _play(s, driver)
        shortlist = [f["name"] for f in s.variant.component("menu")["functions"]]
        assert [t.name for t in driver.seen[0].tools] == shortlist
        assert len(shortlist) == SMALL_SIZES["shortlist"]
