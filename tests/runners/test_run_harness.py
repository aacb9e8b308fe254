"""The harness: budgets and terminal flags, funnel nesting, terminal classes, infra errors.

Scripted drivers make every case explicit; the expected values are written from the
definitions (ToolBottleneckBench 3.3-3.4, InvokeRank 3.2-3.3), not from the code's output.
"""

from __future__ import annotations

import pytest
from run_helpers import ScriptedDriver, play

from prereg.registry.units import Budgets
from prereg.runners.drivers.base import (
    CutAtCap,
    FinalAnswer,
    InfraError,
    Malformed,
    ToolCall,
    Turn,
    Usage,
)

SEARCH = ToolCall("search_tracks", {"query": "Lumen Drift"})
ANSWER_T001 = FinalAnswer("Glass Harbor, Midnight Arcade and Chrome Tides")


def test_a_correct_episode() -> None:
    rec = play(ScriptedDriver([SEARCH, ANSWER_T001]), "t001")
    assert rec.success is True and rec.status == "ok"
    assert rec.terminal_flag is None and rec.first_unmet_obligation is None
    assert rec.funnel.model_dump() == {
        "surfaced": True,
        "selected": True,
        "invoked": True,
        "executed": True,
        "completed": True,
    }
    assert rec.terminal_class == "focal"
    assert rec.selected_operations == ["search_tracks"]
    assert rec.selection_rate == 1.0 and rec.unnecessary_calls == 0
    assert rec.calls == 1 and rec.turns == 2
    kinds = [e.kind for e in rec.trace]
    assert kinds == ["tool_call", "tool_result", "final"]


def test_cut_at_completion_cap_takes_precedence() -> None:
    rec = play(ScriptedDriver([SEARCH, CutAtCap("Glass Har")]), "t001")
    assert rec.success is False
    assert rec.terminal_flag == "completion_cap"
    assert rec.first_unmet_obligation == "answer"  # the answer never came
    assert rec.funnel.executed is True and rec.funnel.completed is False


def test_call_limit() -> None:
    rec = play(ScriptedDriver([SEARCH]), "t001", budgets=Budgets(call_limit=3, turn_limit=10))
    assert rec.calls == 3 and rec.terminal_flag == "call_limit"
    assert rec.unnecessary_calls == 2  # exact repeats of a successful call


def test_turn_limit_with_malformed_turns() -> None:
    rec = play(
        ScriptedDriver([Malformed("{search_tracks(")]),
        "t001",
        budgets=Budgets(call_limit=5, turn_limit=4),
    )
    assert rec.turns == 4 and rec.calls == 0
    assert rec.terminal_flag == "turn_limit"
    assert rec.first_unmet_obligation == "tool_use"
    assert rec.terminal_class == "unresolved"
    assert rec.funnel.selected is False and rec.funnel.invoked is False


def test_episode_token_budget() -> None:
    driver = ScriptedDriver([SEARCH, ANSWER_T001], usage=Usage(input=600, output=50))
    rec = play(driver, "t001", budgets=Budgets(episode_tokens=1000, call_limit=5, turn_limit=5))
    # 650 tokens after the call, 1300 after the answer: the answer exceeds the budget
    assert rec.terminal_flag == "episode_budget" and rec.success is False
    assert rec.tokens.input == 1200 and rec.tokens.output == 100
    assert rec.tokens.reasoning is None  # not reported, so not measured


def test_infeasibility_stop_on_prohibited_operation() -> None:
    clear = ToolCall("clear_playlist", {"playlist_id": "pl-001", "confirm": "Road Trip"})
    rec = play(ScriptedDriver([clear, FinalAnswer("done")]), "t037")
    assert rec.terminal_flag == "infeasible" and rec.calls == 1 and rec.turns == 1
    assert rec.oracles.prohibited_operations is False
    assert rec.first_unmet_obligation == "prohibited_operations"
    assert rec.selection_rate == 0.0


def test_infeasibility_stop_on_a_negative_task() -> None:
    rec = play(ScriptedDriver([ToolCall("list_playlists", {})]), "t054")
    assert rec.terminal_flag == "infeasible"
    assert rec.first_unmet_obligation == "no_tool"
    assert rec.unnecessary_calls == 1


def test_wrong_conclusion_and_contract_break() -> None:
    wrong = play(ScriptedDriver([SEARCH, FinalAnswer("Nothing by them")]), "t001")
    assert wrong.terminal_flag == "wrong_conclusion"
    assert wrong.first_unmet_obligation == "answer"
    # a destructive call without confirmation, then the right one: the state is right but
    # the contract (confirmation adherence) was broken; it stops as infeasible at once
    driver = ScriptedDriver(
        [
            ToolCall("delete_playlist", {"playlist_id": "pl-004", "confirm": "yes"}),
            ToolCall("delete_playlist", {"playlist_id": "pl-004", "confirm": "Old Favourites"}),
            FinalAnswer("deleted"),
        ]
    )
    rec = play(driver, "t049")
    assert rec.oracles.confirmation is False
    assert rec.terminal_flag == "infeasible"
    assert rec.first_unmet_obligation == "confirmation"


def test_invalid_arguments_fail_invoked() -> None:
    rec = play(ScriptedDriver([ToolCall("search_tracks", {"q": "x"}), FinalAnswer("?")]), "t001")
    assert rec.funnel.selected is True and rec.funnel.invoked is False
    assert rec.funnel.executed is False
    result = [e for e in rec.trace if e.kind == "tool_result"][0]
    assert result.is_error and "input schema" in (result.text or "")


def test_empty_result_is_not_executed() -> None:
    rec = play(
        ScriptedDriver([ToolCall("search_tracks", {"query": "zzz"}), FinalAnswer("none")]), "t001"
    )
    assert rec.funnel.invoked is True and rec.funnel.executed is False


def test_terminal_classes_without_a_call() -> None:
    declined = ScriptedDriver(
        [
            Turn(
                FinalAnswer("BPM means beats per minute"),
                surfaced=("search_tracks",),
                searched=True,
            )
        ],
        loads_all_tools=False,
    )
    rec = play(declined, "t054")
    assert rec.success is True and rec.terminal_class == "searched_then_declined"
    assert rec.funnel.surfaced is True  # the search put a focal tool in the candidate set
    assert rec.funnel.selected is False  # ... and the host declined it
    direct = play(ScriptedDriver([FinalAnswer("beats per minute")], loads_all_tools=False), "t054")
    assert direct.terminal_class == "answered_without_search"
    assert direct.funnel.surfaced is None  # not measured by this host


def test_competitor_and_decoy_calls_are_refused() -> None:
    rec = play(
        ScriptedDriver(
            [
                ToolCall("castaway_find_podcast", {"text": "astronomy"}),
                FinalAnswer("The Deep Field Hour"),
            ]
        ),
        "p01",
        surface="focal",
        name="podcast-selection",
    )
    assert rec.terminal_class == "competitor"
    assert rec.funnel.selected is False and rec.funnel.completed is False
    assert rec.selection_rate == 0.0 and rec.selected_operations == []
    result = [e for e in rec.trace if e.kind == "tool_result"][0]
    assert result.is_error and "not run" in (result.text or "")
    decoy = play(
        ScriptedDriver([ToolCall("skycast_forecast", {"city": "Oslo"}), FinalAnswer("?")]),
        "p01",
        surface="focal",
        name="podcast-selection",
    )
    assert decoy.terminal_class == "other_external"


def test_driver_failure_is_an_infra_error() -> None:
    class Broken(ScriptedDriver):
        async def next_turn(self, episode, history):  # type: ignore[no-untyped-def]
            raise InfraError("503 from the provider")

    rec = play(Broken([]), "t001")
    assert rec.status == "infra_error" and rec.success is None
    assert "503" in (rec.error or "")
    assert rec.trace[-1].kind == "error"


def test_model_backed_drivers_never_see_the_solution() -> None:
    driver = ScriptedDriver([ANSWER_T001], evidence_class="api")
    driver.sees_solution = True  # even if a driver claims it, only replay gets the path
    play(driver, "t001")
    assert all(ep.solution is None for ep in driver.seen)


@pytest.mark.parametrize("cost, expected", [(0.01, 0.02), (None, None)])
def test_measured_cost_and_latency(cost: float | None, expected: float | None) -> None:
    rec = play(ScriptedDriver([SEARCH, ANSWER_T001], cost=cost), "t001")
    assert rec.cost_usd == (pytest.approx(expected) if expected is not None else None)
    assert rec.model_returned == "scripted-1"
