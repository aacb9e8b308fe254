"""The turn limit under this harness (reading F3): every turn but the last is a call, so
an episode has at most call limit + 1 turns and the turn limit (call limit + slack)
can end one only when the slack is 0. Checked by sweeping behaviours that waste calls,
for the simulated policy's loop and the model-host loop, against that count.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest

from prereg.experiments.toolbottleneck.compile import Cell
from prereg.experiments.toolbottleneck.family import load_family
from prereg.experiments.toolbottleneck.sandbox import Sandbox, build_sandbox
from prereg.runners.drivers.base import Episode, Exchange, FinalAnswer, ToolCall, Turn, Usage
from prereg.runners.toolbottleneck.harness import HostUnit, play_host
from prereg.runners.toolbottleneck.host import (
    PROFILES,
    Contract,
    play,
    turn_limit_reachable,
    unit_rng,
)
from tests.toolbottleneck.helpers import BUNDLED


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    fam = load_family(BUNDLED / "overdue-case-escalation.yaml")
    return build_sandbox(fam, Cell("capacity", 8, "low", 0, "raw"), seed=0)


def test_only_a_zero_slack_can_reach_the_turn_limit() -> None:
    assert turn_limit_reachable(Contract(turn_slack=0))
    assert not any(turn_limit_reachable(Contract(turn_slack=k)) for k in (1, 2, 5))
    assert not turn_limit_reachable(Contract())  # the seed's contract (slack 2)


@pytest.mark.parametrize("turn_slack", [1, 2, 3])
@pytest.mark.parametrize("call_slack", [0, 2, 6])
def test_the_simulated_policy_never_reaches_the_turn_limit(
    sandbox: Sandbox, turn_slack: int, call_slack: int
) -> None:
    # a policy that repeats calls and stops following the chain often: every ending
    wasteful = replace(PROFILES["sim-exact"], repeat_slip=0.6, stop_slip=0.2, fence_slip=0.3)
    contract = Contract(call_slack=call_slack, turn_slack=turn_slack)
    flags = set()
    for seed in range(40):
        played = play(sandbox, wasteful, contract, unit_rng("turns", seed))
        calls = len(played.episode.calls)
        assert calls <= played.call_limit
        # a turn starts after k calls, k <= call limit < turn limit: the limit never stops one
        assert played.turns <= calls + 1 <= played.call_limit + 1 <= played.turn_limit
        assert "turn_limit" not in played.episode.limits
        flags.add(played.verification.flag)
    assert "turn_limit" not in flags and len(flags) >= 2  # several endings were exercised


def test_at_zero_slack_the_turn_limit_stops_the_answer_turn(sandbox: Sandbox) -> None:
    # certified minimum 3 (search, read, escalate); call limit 3, turn limit 3: the exact
    # policy makes its 3 calls and the 4th turn, its answer, is never started
    contract = Contract(call_slack=0, turn_slack=0)
    played = play(sandbox, PROFILES["sim-exact"], contract, unit_rng("zero"))
    assert (played.call_limit, played.turn_limit) == (3, 3)
    assert len(played.episode.calls) == 3 and played.turns == 3
    assert played.stop == "turn_limit" and played.verification.flag == "turn_limit"


class Waster:
    """Repeats the request's first search ``waste`` times, then answers (wrongly)."""

    name = "waster"
    evidence_class = "api"
    sees_solution = False
    loads_all_tools = True

    def __init__(self, waste: int) -> None:
        self.waste = waste

    async def next_turn(self, episode: Episode, history: Sequence[Exchange]) -> Turn:
        if len(history) < self.waste:
            name = next(t.name for t in episode.tools if t.name.startswith("search_cases"))
            key = episode.prompt.split("case ")[1].split(" ")[0]
            action: Any = ToolCall(name, {"query": key})
        else:
            action = FinalAnswer(json.dumps({"decision": "hold", "facts": {}, "sources": []}))
        return Turn(action, usage=Usage(input=10, output=1))

    async def aclose(self) -> None:
        return None


@pytest.mark.parametrize("turn_slack", [0, 1, 2])
def test_the_host_loop_reaches_the_turn_limit_only_at_zero_slack(
    sandbox: Sandbox, turn_slack: int
) -> None:
    unit = HostUnit("m", {}, None, 1, 1, "unit")
    for call_slack in (0, 2, 9):
        contract = Contract(call_slack=call_slack, turn_slack=turn_slack, menu_mode="fixed")
        call_limit = 3 + call_slack
        for waste in range(call_limit + 3):
            played = asyncio.run(play_host(sandbox, Waster(waste), unit, contract))  # type: ignore[arg-type]
            calls, turns = len(played.episode.calls), len(played.turns)
            assert calls <= call_limit and turns <= calls + 1
            reached = "turn_limit" in played.episode.limits
            # by hand: at slack 0 the turn limit stops the turn after the call limit's last
            # call, unless the infeasibility stop ended the episode before it
            fired_first = (
                turn_slack == 0
                and calls == call_limit
                and "infeasible" not in played.episode.limits
            )
            assert reached == fired_first, (call_slack, waste, played.episode.limits)
            if turn_slack:
                assert not reached
