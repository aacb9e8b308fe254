"""The Anthropic driver through the real ``anthropic`` SDK client against the local fake."""

from __future__ import annotations

import json

import pytest

from prereg.core.errors import BadInput
from prereg.runners.drivers import anthropic as driver_module
from prereg.runners.drivers.base import (
    CutAtCap,
    FinalAnswer,
    Malformed,
    ToolCall,
    ToolResult,
)
from prereg.runners.providers.credentials import MissingKey
from prereg.runners.providers.retry import RetriesExhausted
from prereg.runners.providers.spend import SpendCapReached, SpendMeter
from tests.providers.fakes import (
    ANTHROPIC_KEY,
    FakeProviders,
    Reply,
    anthropic_message,
    anthropic_text,
    anthropic_tool_use,
    anthropic_usage,
    episode,
    play,
    rate_limited,
    run,
    server_error,
)

MODEL = "claude-haiku-4-5"


def test_tool_use_then_final_text(fake: FakeProviders) -> None:
    fake.script(
        "anthropic",
        Reply(
            200,
            anthropic_tool_use(
                "search_tracks",
                {"query": "Lumen Drift"},
                call_id="toolu_A",
                model=MODEL,
                usage=anthropic_usage(300, 40, cache_read=100),
            ),
        ),
        Reply(
            200,
            anthropic_text("You have Glass Harbor.", model=MODEL, usage=anthropic_usage(420, 9)),
        ),
    )
    driver = driver_module.create(MODEL, {})
    result = ToolResult(
        {"items": [{"title": "Glass Harbor"}]}, False, '{"items": [{"title": "Glass Harbor"}]}'
    )
    first, second = run(play(driver, episode(), [result]))

    assert first.action == ToolCall("search_tracks", {"query": "Lumen Drift"}, "toolu_A")
    assert second.action == FinalAnswer("You have Glass Harbor.")
    # usage: input counts cache reads too; cost from the packaged table ($1 / $5 / $0.10)
    assert first.usage.input == 400 and first.usage.cached == 100 and first.usage.output == 40
    assert first.cost_usd == pytest.approx((300 * 1 + 100 * 0.1 + 40 * 5) / 1e6)
    assert first.latency_ms is not None and first.latency_ms > 0
    assert first.model_returned == MODEL and driver.loads_all_tools
    assert first.surfaced is None and first.searched is None

    body1, body2 = fake.model_bodies("anthropic")
    assert body1["model"] == MODEL and body1["max_tokens"] == 256
    assert body1["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    assert body1["messages"] == [{"role": "user", "content": episode().prompt}]
    # client tools: name, description, schema; the Claude path carries no server metadata
    assert [set(t) for t in body1["tools"]] == [{"name", "description", "input_schema"}] * 3
    assert "Music Library" not in json.dumps(body1["tools"])
    assert driver.server_text == "none"
    for forbidden in ("temperature", "top_p", "top_k", "seed"):
        assert forbidden not in body1
    # the second request sends back the assistant content verbatim and the tool result
    assert body2["messages"][1] == {
        "role": "assistant",
        "content": [
            {
                "type": "tool_use",
                "id": "toolu_A",
                "name": "search_tracks",
                "input": {"query": "Lumen Drift"},
            }
        ],
    }
    assert body2["messages"][2]["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "toolu_A",
        "content": '{"items": [{"title": "Glass Harbor"}]}',
        "is_error": False,
    }
    # the key went only into the header the SDK sets (2.x: a bearer token), SDK retries off
    seen = [s for s in fake.seen if s.path == "/v1/messages"]
    assert all(s.headers["authorization"] == f"Bearer {ANTHROPIC_KEY}" for s in seen)
    assert all(s.headers["x-stainless-retry-count"] == "0" for s in seen)
    assert driver.stats.retries == 0 and driver.stats.attempts == 2


def test_truncation_at_the_cap_is_a_cut(fake: FakeProviders) -> None:
    fake.script(
        "anthropic",
        Reply(
            200,
            anthropic_message(
                [{"type": "text", "text": "Let me think about all the"}],
                model=MODEL,
                stop_reason="max_tokens",
                usage=anthropic_usage(100, 64, thinking=50),
            ),
        ),
    )
    (turn,) = run(play(driver_module.create(MODEL, {}), episode(cap=64)))
    assert turn.action == CutAtCap("Let me think about all the")
    # thinking tokens are split out of output so input + output + reasoning is the total
    assert (turn.usage.output, turn.usage.reasoning) == (14, 50)
    assert fake.model_bodies("anthropic")[0]["max_tokens"] == 64


def test_429_then_success_honours_retry_after(fake: FakeProviders) -> None:
    fake.script(
        "anthropic", rate_limited("anthropic", 250), Reply(200, anthropic_text("ok", model=MODEL))
    )
    driver = driver_module.create(MODEL, {})
    (turn,) = run(play(driver, episode()))
    assert turn.action == FinalAnswer("ok")
    assert driver.stats.retries == 1 and driver.stats.by_cause["429"] == 1
    assert turn.retries == 1  # the retry is on the turn, so the record shows it
    times = [s.at for s in fake.seen if s.path == "/v1/messages"]
    assert times[1] - times[0] >= 0.24  # waited the server's retry-after-ms, not the jitter
    assert turn.latency_ms < 240  # latency is the successful attempt's, not the wait


def test_500_until_retries_are_exhausted_is_an_infra_error_with_the_key_redacted(
    fake: FakeProviders,
) -> None:
    fake.script("anthropic", *[server_error("anthropic") for _ in range(4)])
    driver = driver_module.create(MODEL, {})
    with pytest.raises(RetriesExhausted) as info:
        run(play(driver, episode()))
    message = str(info.value)
    assert "after 4 attempts" in message and "500" in message
    assert ANTHROPIC_KEY not in message and "[REDACTED]" in message
    assert info.value.__cause__ is None and info.value.__suppress_context__
    assert driver.stats.attempts == 4 and driver.stats.failures == 1


def test_client_error_is_not_retried(fake: FakeProviders) -> None:
    fake.script(
        "anthropic",
        Reply(
            400,
            {
                "type": "error",
                "error": {"type": "invalid_request_error", "message": "bad tool schema"},
            },
        ),
    )
    driver = driver_module.create(MODEL, {})
    with pytest.raises(Exception, match="bad tool schema"):
        run(play(driver, episode()))
    assert driver.stats.attempts == 1


def test_malformed_tool_input_is_reported_not_repaired(fake: FakeProviders) -> None:
    fake.script(
        "anthropic",
        Reply(
            200,
            anthropic_tool_use("search_tracks", '{"query": "Lumen', model=MODEL, call_id="toolu_M"),
        ),
        Reply(200, anthropic_text("Sorry.", model=MODEL)),
    )
    driver = driver_module.create(MODEL, {})
    error = ToolResult(None, True, "error: the tool call could not be parsed")
    first, second = run(play(driver, episode(), [error]))
    assert first.action == Malformed('{"query": "Lumen')
    assert second.action == FinalAnswer("Sorry.")
    body2 = fake.model_bodies("anthropic")[1]
    # the transcript stays a valid request: same call id, the parse error as its result
    assert body2["messages"][1]["content"][0]["id"] == "toolu_M"
    assert body2["messages"][2]["content"][0]["is_error"] is True


def test_returned_model_differs_from_requested(fake: FakeProviders) -> None:
    fake.script("anthropic", Reply(200, anthropic_text("hi", model="claude-haiku-4-5-20990101")))
    driver = driver_module.create(MODEL, {})
    (turn,) = run(play(driver, episode()))
    assert driver.model == MODEL and turn.model_returned == "claude-haiku-4-5-20990101"
    assert fake.model_bodies("anthropic")[0]["model"] == MODEL  # never another model
    assert turn.cost_usd is not None  # a dated snapshot of a listed model is priced


def test_unpriced_model_has_null_cost(fake: FakeProviders) -> None:
    fake.script("anthropic", Reply(200, anthropic_text("hi", model="claude-sonnet-5-5")))
    (turn,) = run(play(driver_module.create("claude-sonnet-5-5", {}), episode()))
    assert turn.cost_usd is None and turn.usage is not None


def test_tool_search_surfaces_tool_references(fake: FakeProviders) -> None:
    search = anthropic_message(
        [
            {
                "type": "server_tool_use",
                "id": "srvtoolu_1",
                "name": "tool_search_tool_bm25",
                "input": {"query": "tracks"},
            },
            {
                "type": "tool_search_tool_result",
                "tool_use_id": "srvtoolu_1",
                "content": {
                    "type": "tool_search_tool_search_result",
                    "tool_references": [
                        {"type": "tool_reference", "tool_name": "search_tracks"},
                        {"type": "tool_reference", "tool_name": "get_track"},
                    ],
                },
            },
            {
                "type": "tool_use",
                "id": "toolu_S",
                "name": "search_tracks",
                "input": {"query": "Lumen Drift"},
            },
        ],
        model=MODEL,
        stop_reason="tool_use",
    )
    fake.script("anthropic", Reply(200, search), Reply(200, anthropic_text("done", model=MODEL)))
    driver = driver_module.create(MODEL, {}, tool_search=True)
    first, second = run(play(driver, episode()))
    assert not driver.loads_all_tools
    assert first.surfaced == ("search_tracks", "get_track") and first.searched is True
    assert second.surfaced == () and second.searched is False
    body1, body2 = fake.model_bodies("anthropic")
    assert all(t.get("defer_loading") for t in body1["tools"][:-1])
    assert body1["tools"][-1] == {
        "type": "tool_search_tool_bm25_20251119",
        "name": "tool_search_tool_bm25",
    }
    # the search blocks go back to the provider as they came
    kinds = [b["type"] for b in body2["messages"][1]["content"]]
    assert kinds == ["server_tool_use", "tool_search_tool_result", "tool_use"]


def test_sampling_only_when_allowed_and_reserved_params_refused(fake: FakeProviders) -> None:
    with pytest.raises(BadInput, match="allow_sampling"):
        driver_module.create(MODEL, {"temperature": 0.0}, allow_sampling=False)
    with pytest.raises(BadInput, match="max_tokens"):
        driver_module.create(MODEL, {"max_tokens": 10})
    fake.script("anthropic", Reply(200, anthropic_text("ok", model=MODEL)))
    run(
        play(
            driver_module.create(
                MODEL, {"temperature": 0.0, "metadata": {"user_id": "u"}}, allow_sampling=True
            ),
            episode(),
        )
    )
    body = fake.model_bodies("anthropic")[0]
    assert body["temperature"] == 0.0 and body["metadata"] == {"user_id": "u"}


def test_missing_key_names_the_variable(
    fake: FakeProviders, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(MissingKey, match="ANTHROPIC_API_KEY"):
        run(play(driver_module.create(MODEL, {}), episode()))
    assert not fake.seen


def test_spend_cap_refuses_a_request_that_could_pass_it(fake: FakeProviders) -> None:
    driver = driver_module.create(MODEL, {}, spend=SpendMeter(cap_usd=0.001, spent_usd=0.0))
    with pytest.raises(SpendCapReached):
        run(play(driver, episode(cap=4096)))  # 4096 output tokens at $5/M > $0.001
    assert not fake.model_bodies("anthropic")


def test_pause_turn_is_continued_within_the_turn(fake: FakeProviders) -> None:
    paused = anthropic_message(
        [
            {
                "type": "server_tool_use",
                "id": "srvtoolu_P",
                "name": "tool_search_tool_bm25",
                "input": {"query": "x"},
            }
        ],
        model=MODEL,
        stop_reason="pause_turn",
        usage=anthropic_usage(100, 5),
    )
    fake.script(
        "anthropic",
        Reply(200, paused),
        Reply(200, anthropic_text("answer", model=MODEL, usage=anthropic_usage(150, 7))),
    )
    (turn,) = run(play(driver_module.create(MODEL, {}, tool_search=True), episode()))
    assert turn.action == FinalAnswer("answer")
    assert turn.usage.input == 250 and turn.usage.output == 12
    body2 = fake.model_bodies("anthropic")[1]
    assert body2["messages"][-1]["role"] == "assistant"
