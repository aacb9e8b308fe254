"""``prereg export --format inspect`` writes each sample's whole episode (issue 43, item 1).

The logs are read with Inspect's own reader (``read_eval_log``); every sample's messages
and events are checked against its run record as stored, read here straight from the
SQLite run store (the ``body`` column), by the mapping docs/inspect.md states: the prompt,
then per trace event an assistant message (a call or text) or a tool message (the result
as JSON, or the harness's error), a model event per host turn with the turn's tokens and
latency, a tool event per answered call, an info event per tool search and stop.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.exchange.conftest import REG_ID, prereg

inspect_log = pytest.importorskip(
    "inspect_ai.log", reason="needs prereg-agents[inspect] (dev extra)"
)

TURN_KINDS = {"tool_call", "final", "cut", "malformed"}


def stored_records(ws: Path) -> dict[tuple[str, str, int], dict[str, Any]]:
    """Each unit's ok record, from the store's own table (not through prereg)."""
    with sqlite3.connect(ws / "runs" / "runs.sqlite") as db:
        rows = db.execute(
            "SELECT body FROM records WHERE registration_id = ? AND status = 'ok'", (REG_ID,)
        ).fetchall()
    records = [json.loads(body) for (body,) in rows]
    return {(r["arm"], r["task_id"], r["repeat"]): r for r in records}


@pytest.fixture(scope="module")
def logs(ran: Path) -> dict[str, Any]:
    out = ran.parent / "trajectory-logs"
    code, text = prereg("-w", ran, "export", REG_ID, "--format", "inspect", "--out", out, "--json")
    assert code == 0, text
    return {
        arm: inspect_log.read_eval_log(str(out / f"{REG_ID}_{arm}.eval"))
        for arm in ("baseline", "semantic")
    }


def _expected_roles(trace: list[dict[str, Any]]) -> list[str]:
    roles = ["user"]
    for event in trace:
        if event["kind"] in TURN_KINDS:
            roles.append("assistant")
        elif event["kind"] == "tool_result":
            roles.append("tool")
    return roles


def _tool_content(result_event: dict[str, Any], message: Any) -> None:
    """A tool message holds the result as JSON, or the error text the host was given."""
    if result_event["is_error"]:
        assert message.text == result_event["text"]
        assert message.error is not None
    else:
        assert json.loads(message.text) == result_event["result"]
        assert message.error is None


def test_each_sample_is_its_run_records_episode(ran: Path, logs: dict[str, Any]) -> None:
    records = stored_records(ran)
    seen: Counter[str] = Counter()
    for arm, log in logs.items():
        assert log.samples
        for sample in log.samples:
            record = records[(arm, sample.id, sample.epoch - 1)]
            trace = record["trace"]
            messages = sample.messages
            assert [m.role for m in messages] == _expected_roles(trace)
            assert messages[0].text == sample.input
            # messages, in trace order
            rest = iter(messages[1:])
            calls: dict[int, Any] = {}
            for event in trace:
                if event["kind"] == "tool_call":
                    message = next(rest)
                    [call] = message.tool_calls
                    assert call.function == event["tool"]
                    assert call.arguments == event["arguments"]
                    calls[event["turn"]] = call
                    seen["call"] += 1
                elif event["kind"] in TURN_KINDS:
                    message = next(rest)
                    assert not message.tool_calls
                    assert message.text == (event["text"] or "")
                elif event["kind"] == "tool_result":
                    message = next(rest)
                    assert message.tool_call_id == calls[event["turn"]].id
                    assert message.function == event["tool"]
                    _tool_content(event, message)
                    seen["error" if event["is_error"] else "result"] += 1
            # events
            models = [e for e in sample.events if e.event == "model"]
            tools = [e for e in sample.events if e.event == "tool"]
            infos = [e for e in sample.events if e.event == "info"]
            turns = [e for e in trace if e["kind"] in TURN_KINDS]
            results = [e for e in trace if e["kind"] == "tool_result"]
            assert len(models) == len(turns)
            assert len(tools) == len(results)
            assert len(infos) == sum(1 for e in trace if e["kind"] in {"search", "stop", "error"})
            for event, turn in zip(models, turns, strict=True):
                usage = event.output.usage
                assert usage.input_tokens == turn["usage"]["input"]
                assert usage.output_tokens == turn["usage"]["output"]
                assert event.working_time == pytest.approx(turn["latency_ms"] / 1000)
                # the tools the unit offered: as many as the record's offer lists
                assert len(event.tools) == sum(s["tools"] for s in record["offer"]["servers"])
            assert sum(m.output.usage.input_tokens for m in models) == record["tokens"]["input"]
            assert sum(m.output.usage.output_tokens for m in models) == record["tokens"]["output"]
            for event, result in zip(tools, results, strict=True):
                call = calls[result["turn"]]
                assert (event.function, event.arguments, event.id) == (
                    result["tool"],
                    call.arguments,
                    call.id,
                )
                if result["is_error"]:
                    assert event.result == result["text"] and event.error is not None
                else:
                    assert json.loads(str(event.result)) == result["result"]
            offered = [t["name"] for t in sample.metadata["offered_tools"]]
            assert all([t.name for t in m.tools] == offered for m in models)
            seen["samples"] += 1
    # the check is not vacuous: calls, results and errors all occurred
    assert seen["samples"] == len(records) == 100
    assert seen["call"] > seen["samples"] // 2 and seen["result"] and seen["error"]


def test_the_logs_are_marked_untrusted(logs: dict[str, Any]) -> None:
    for log in logs.values():
        assert log.eval.viewer is not None
        assert log.eval.viewer.trust_content is False
        assert log.eval.metadata["prereg"]["trust_content"] is False


def test_a_system_prompt_opens_the_transcript(ran: Path) -> None:
    """An arm's system prompt (none in the pilot) is the first message, before the task."""
    from prereg.reports.inspect_export import build_sample
    from prereg.runners.record import RunRecord

    body = next(iter(stored_records(ran).values()))
    record = RunRecord.model_validate(body)
    sample = build_sample(record, "the prompt", "completed", "prereg/local", 0, system="Be brief.")
    assert [m.role for m in sample.messages][:2] == ["system", "user"]
    assert (sample.messages[0].text, sample.messages[1].text) == ("Be brief.", "the prompt")


def test_calls_of_one_turn_stay_one_assistant_message(ran: Path) -> None:
    """A record imported from Inspect may hold two calls in one turn: one assistant
    message and one model event carry both, and each result answers its own call."""
    from prereg.reports.inspect_export import build_sample
    from prereg.runners.record import RunRecord, TraceEvent

    body = next(iter(stored_records(ran).values()))
    trace = [
        TraceEvent(kind="tool_call", turn=0, tool="a", arguments={"x": 1}),
        TraceEvent(kind="tool_call", turn=0, tool="b", arguments={"y": 2}),
        TraceEvent(kind="tool_result", turn=0, tool="b", result={"ok": "b"}, is_error=False),
        TraceEvent(kind="tool_result", turn=0, tool="a", result={"ok": "a"}, is_error=False),
        TraceEvent(kind="final", turn=1, text="done"),
    ]
    record = RunRecord.model_validate(body).model_copy(update={"trace": trace})
    sample = build_sample(record, "the prompt", "completed", "inspect/model", 0)
    assert [m.role for m in sample.messages] == ["user", "assistant", "tool", "tool", "assistant"]
    messages: list[Any] = list(sample.messages)  # read as the union's members
    calls = {c.function: c for c in messages[1].tool_calls}
    assert {f: c.arguments for f, c in calls.items()} == {"a": {"x": 1}, "b": {"y": 2}}
    answered = {m.function: (m.tool_call_id, json.loads(m.text)) for m in messages[2:4]}
    assert answered == {"a": (calls["a"].id, {"ok": "a"}), "b": (calls["b"].id, {"ok": "b"})}
    assert [e.event for e in sample.events] == ["model", "tool", "tool", "model"]
