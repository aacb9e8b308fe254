"""The OpenAI driver through the real ``openai`` SDK client against the local fake."""

from __future__ import annotations

import json

import pytest

from prereg.core.errors import BadInput
from prereg.runners.drivers import openai as driver_module
from prereg.runners.drivers.base import (
    CutAtCap,
    FinalAnswer,
    InfraError,
    Malformed,
    ToolCall,
    ToolResult,
)
from prereg.runners.providers.retry import RetriesExhausted
from tests.providers.fakes import (
    OPENAI_KEY,
    FakeProviders,
    Reply,
    episode,
    openai_call_item,
    openai_message_item,
    openai_response,
    openai_text,
    openai_usage,
    play,
    rate_limited,
    run,
    server_error,
)

MODEL = "gpt-5-mini"


def test_tool_use_then_final_text(fake: FakeProviders) -> None:
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": []}
    fake.script(
        "openai",
        Reply(
            200,
            openai_response(
                [
                    reasoning,
                    openai_call_item(
                        "search_tracks",
                        '{"query": "Lumen Drift"}',
                        call_id="call_A",
                        namespace="Music_Library",
                    ),
                ],
                model=MODEL,
                usage=openai_usage(500, 60, cached=200, reasoning=20),
            ),
        ),
        Reply(200, openai_text("You have Glass Harbor.", model=MODEL)),
    )
    driver = driver_module.create(MODEL, {})
    first, second = run(play(driver, episode(), [ToolResult({"n": 1}, False, '{"n": 1}')]))

    assert first.action == ToolCall("search_tracks", {"query": "Lumen Drift"}, "call_A")
    assert second.action == FinalAnswer("You have Glass Harbor.")
    # input includes cached; reasoning split out of output; cost $0.25 / $2 / $0.025 per M
    assert (first.usage.input, first.usage.cached) == (500, 200)
    assert (first.usage.output, first.usage.reasoning) == (40, 20)
    assert first.cost_usd == pytest.approx((300 * 0.25 + 200 * 0.025 + 60 * 2) / 1e6)
    assert first.latency_ms is not None and first.model_returned == MODEL

    body1, body2 = fake.model_bodies("openai")
    assert body1["model"] == MODEL and body1["max_output_tokens"] == 256
    assert body1["parallel_tool_calls"] is False and body1["tool_choice"] == "auto"
    for forbidden in ("temperature", "top_p", "seed"):
        assert forbidden not in body1
    # the OpenAI path carries the server: one namespace per integration, with its description
    assert [(t["type"], t["name"], t["description"]) for t in body1["tools"]] == [
        ("namespace", "Music_Library", "Tracks, albums and playlists."),
        ("namespace", "Castaway_Pods", "Podcast search by Castaway."),
    ]
    functions = body1["tools"][0]["tools"]
    assert [f["name"] for f in functions] == ["search_tracks", "get_track"]
    assert all(f["strict"] is False and "defer_loading" not in f for f in functions)
    assert driver.server_text == "name_and_description"
    # reasoning and the call go back as returned, then the output of the call
    assert [i.get("type") for i in body2["input"][1:]] == [
        "reasoning",
        "function_call",
        "function_call_output",
    ]
    assert body2["input"][3] == {
        "type": "function_call_output",
        "call_id": "call_A",
        "output": '{"n": 1}',
    }
    seen = [s for s in fake.seen if s.path == "/v1/responses"]
    assert all(s.headers["authorization"] == f"Bearer {OPENAI_KEY}" for s in seen)
    assert all(s.headers.get("x-stainless-retry-count") == "0" for s in seen)


def test_incomplete_at_max_output_tokens_is_a_cut(fake: FakeProviders) -> None:
    fake.script(
        "openai",
        Reply(
            200,
            openai_response(
                [openai_message_item("The answer is")],
                model=MODEL,
                status="incomplete",
                incomplete="max_output_tokens",
                usage=openai_usage(100, 32, reasoning=30),
            ),
        ),
    )
    (turn,) = run(play(driver_module.create(MODEL, {}), episode(cap=32)))
    assert turn.action == CutAtCap("The answer is")
    assert (turn.usage.output, turn.usage.reasoning) == (2, 30)


def test_other_incomplete_reasons_and_failures_are_infra(fake: FakeProviders) -> None:
    failed = openai_response([], model=MODEL, status="failed")
    failed["error"] = {"code": "server_error", "message": "model crashed"}
    fake.script("openai", Reply(200, failed))
    with pytest.raises(InfraError, match="model crashed"):
        run(play(driver_module.create(MODEL, {}), episode()))


def test_429_then_success_honours_retry_after(fake: FakeProviders) -> None:
    fake.script("openai", rate_limited("openai", 250), Reply(200, openai_text("ok", model=MODEL)))
    driver = driver_module.create(MODEL, {})
    (turn,) = run(play(driver, episode()))
    assert turn.action == FinalAnswer("ok") and driver.stats.retries == 1
    assert turn.retries == 1
    times = [s.at for s in fake.seen if s.path == "/v1/responses"]
    assert times[1] - times[0] >= 0.24


def test_500_until_retries_are_exhausted(fake: FakeProviders) -> None:
    fake.script("openai", *[server_error("openai") for _ in range(4)])
    driver = driver_module.create(MODEL, {})
    with pytest.raises(RetriesExhausted) as info:
        run(play(driver, episode()))
    assert OPENAI_KEY not in str(info.value) and "after 4 attempts" in str(info.value)
    assert len(fake.model_bodies("openai")) == 4


def test_malformed_arguments_are_reported_not_repaired(fake: FakeProviders) -> None:
    fake.script(
        "openai",
        Reply(
            200,
            openai_response(
                [openai_call_item("search_tracks", '{"query": ', call_id="call_M")], model=MODEL
            ),
        ),
        Reply(200, openai_text("Sorry.", model=MODEL)),
    )
    error = ToolResult(None, True, "error: the tool call could not be parsed")
    first, second = run(play(driver_module.create(MODEL, {}), episode(), [error]))
    assert first.action == Malformed('{"query": ')
    body2 = fake.model_bodies("openai")[1]
    assert body2["input"][1]["arguments"] == '{"query": '  # sent back as it came
    assert body2["input"][2] == {
        "type": "function_call_output",
        "call_id": "call_M",
        "output": "error: the tool call could not be parsed",
    }


@pytest.mark.parametrize("arguments", ["null", "[1,2]", "3", '"Lumen Drift"', "true"])
def test_arguments_that_are_not_an_object_are_malformed(
    fake: FakeProviders, arguments: str
) -> None:
    """As on the Anthropic path (a non-object ``input``): valid JSON is not enough."""
    fake.script(
        "openai",
        Reply(
            200,
            openai_response(
                [openai_call_item("search_tracks", arguments, call_id="call_N")], model=MODEL
            ),
        ),
        Reply(200, openai_text("Sorry.", model=MODEL)),
    )
    error = ToolResult(None, True, "error: the tool call could not be parsed")
    first, second = run(play(driver_module.create(MODEL, {}), episode(), [error]))
    assert first.action == Malformed(arguments)
    assert second.action == FinalAnswer("Sorry.")
    body2 = fake.model_bodies("openai")[1]
    assert body2["input"][1]["arguments"] == arguments  # sent back as it came
    assert body2["input"][2]["call_id"] == "call_N"


def test_returned_model_differs_from_requested(fake: FakeProviders) -> None:
    fake.script("openai", Reply(200, openai_text("hi", model="gpt-5-mini-2025-08-07")))
    (turn,) = run(play(driver_module.create(MODEL, {}), episode()))
    assert turn.model_returned == "gpt-5-mini-2025-08-07"
    assert fake.model_bodies("openai")[0]["model"] == MODEL
    assert turn.cost_usd is not None


def test_tool_search_surfaces_whole_servers(fake: FakeProviders) -> None:
    search = openai_response(
        [
            {
                "type": "tool_search_call",
                "id": "ts_1",
                "execution": "server",
                "status": "completed",
                "arguments": {"query": "songs"},
            },
            {
                "type": "tool_search_output",
                "id": "tso_1",
                "execution": "server",
                "status": "completed",
                "tools": [
                    {
                        "type": "namespace",
                        "name": "Music_Library",
                        "description": "Tracks.",
                        "tools": [
                            {"type": "function", "name": "search_tracks"},
                            {"type": "function", "name": "get_track"},
                        ],
                    }
                ],
            },
            openai_call_item("search_tracks", '{"query": "x"}', namespace="Music_Library"),
        ],
        model=MODEL,
    )
    fake.script("openai", Reply(200, search), Reply(200, openai_text("done", model=MODEL)))
    driver = driver_module.create(MODEL, {}, tool_search=True)
    first, second = run(play(driver, episode()))
    assert first.surfaced == ("search_tracks", "get_track") and first.searched is True
    assert second.surfaced == () and second.searched is False
    body1, body2 = fake.model_bodies("openai")
    assert body1["tools"][-1] == {"type": "tool_search"}
    assert all(f["defer_loading"] for ns in body1["tools"][:-1] for f in ns["tools"])
    assert [i.get("type") for i in body2["input"][1:4]] == [
        "tool_search_call",
        "tool_search_output",
        "function_call",
    ]


def test_params_pass_through_and_reserved_are_refused(fake: FakeProviders) -> None:
    with pytest.raises(BadInput, match="parallel_tool_calls"):
        driver_module.create(MODEL, {"parallel_tool_calls": True})
    fake.script("openai", Reply(200, openai_text("ok", model=MODEL)))
    run(
        play(
            driver_module.create(MODEL, {"reasoning": {"effort": "low"}, "store": False}), episode()
        )
    )
    body = fake.model_bodies("openai")[0]
    assert body["reasoning"] == {"effort": "low"} and body["store"] is False
    assert json.dumps(body).count("temperature") == 0
