"""The connector drivers through the real SDK clients: one scripted provider response
unrolled into turns, read field by field (listing, calls, results, errors, the cut at
the cap), its measurements on the first turn only, and everything redacted."""

from __future__ import annotations

import json
from typing import Any

import pytest

from prereg.runners.drivers import anthropic, openai
from prereg.runners.drivers.base import (
    CutAtCap,
    Exchange,
    FinalAnswer,
    InfraError,
    ToolCall,
)
from prereg.runners.drivers.connector import label_for, pool_paths
from prereg.runners.mcp.replay import REFUSAL_TEXT
from tests.connector.conftest import LoggingReplay, offered_episode
from tests.providers.fakes import (
    ANTHROPIC_KEY,
    OPENAI_KEY,
    FakeProviders,
    Reply,
    anthropic_message,
    anthropic_usage,
    openai_response,
    openai_usage,
    play,
    run,
)

TOKEN = "conn-token-77aa88bb99cc"  # noqa: S105 - a test value, checked redacted


@pytest.fixture
def pool(
    replay: tuple[str, list[LoggingReplay]], monkeypatch: pytest.MonkeyPatch
) -> tuple[str, list[LoggingReplay]]:
    monkeypatch.setenv("PREREG_CONNECTOR_TOKEN", TOKEN)
    return replay


def test_anthropic_blocks_become_turns(
    fake: FakeProviders, pool: tuple[str, list[LoggingReplay]]
) -> None:
    url, servers = pool
    fake.script(
        "anthropic",
        Reply(
            200,
            anthropic_message(
                [
                    {
                        "type": "mcp_tool_listing",
                        "mcp_server_name": "podcatch",
                        "tools": [
                            {"name": "podcatch_search", "input_schema": {}},
                            {"name": "podcatch_follow", "input_schema": {}},
                        ],
                    },
                    {"type": "text", "text": "Searching."},
                    {
                        "type": "mcp_tool_use",
                        "id": "mcptoolu_1",
                        "name": "podcatch_search",
                        "server_name": "podcatch",
                        "input": {"query": "astronomy"},
                    },
                    {
                        "type": "mcp_tool_result",
                        "tool_use_id": "mcptoolu_1",
                        "is_error": False,
                        "content": [{"type": "text", "text": "found {RAW_KEY} " + TOKEN}],
                    },
                    {
                        "type": "mcp_tool_use",
                        "id": "mcptoolu_2",
                        "name": "podcatch_follow",
                        "server_name": "podcatch",
                        "input": "not an object",
                    },
                    {"type": "text", "text": "Nothing more."},
                ],
                usage=anthropic_usage(500, 80),
            ),
        ),
    )
    driver = anthropic.create("claude-haiku-4-5", connector_url=url)
    assert driver.loads_all_tools is False and driver.server_text == "name"
    turns = run(play(driver, offered_episode(servers[:1])))
    first, second, last = turns
    assert isinstance(first.action, ToolCall) and first.action.name == "podcatch_search"
    assert first.action.arguments == {"query": "astronomy"}
    result = first.action.host_result
    assert result is not None and not result.is_error
    assert ANTHROPIC_KEY not in result.text and TOKEN not in result.text  # redacted
    assert "[REDACTED]" in result.text
    # a call with no result block: not executed as far as the provider says
    assert isinstance(second.action, ToolCall) and second.action.arguments == "not an object"
    assert second.action.host_result is not None and second.action.host_result.is_error
    assert isinstance(last.action, FinalAnswer) and last.action.text == "Nothing more."
    # the request's measurements on the first turn, zeros after; surfaced as listed
    assert first.usage is not None and first.usage.input == 500 and first.cost_usd
    assert first.surfaced == ("podcatch_search", "podcatch_follow")
    assert second.usage is not None and second.usage.input == 0 and second.cost_usd == 0.0
    assert second.surfaced is None and last.latency_ms == 0.0
    body = fake.model_bodies("anthropic")[0]
    assert "tools" in body and all(t["type"] == "mcp_toolset" for t in body["tools"])
    assert body["mcp_servers"] == [
        {
            "type": "url",
            "url": f"{url}/servers/0/mcp",
            "name": "podcatch",
            "authorization_token": TOKEN,
        }
    ]
    assert not any(m == "tools/call" for s in servers for m, _ in s.requests)  # scripted


def test_anthropic_cut_at_the_cap(
    fake: FakeProviders, pool: tuple[str, list[LoggingReplay]]
) -> None:
    url, servers = pool
    fake.script(
        "anthropic",
        Reply(
            200,
            anthropic_message(
                [{"type": "text", "text": "I will look"}],
                stop_reason="max_tokens",
                usage=anthropic_usage(300, 256),
            ),
        ),
    )
    turns = run(play(anthropic.create("m", connector_url=url), offered_episode(servers)))
    assert len(turns) == 1 and isinstance(turns[0].action, CutAtCap)
    assert turns[0].action.text == "I will look" and turns[0].surfaced is None


def test_openai_items_become_turns(
    fake: FakeProviders, pool: tuple[str, list[LoggingReplay]]
) -> None:
    url, servers = pool
    fake.script(
        "openai",
        Reply(
            200,
            openai_response(
                [
                    {
                        "type": "mcp_list_tools",
                        "id": "mcpl_1",
                        "server_label": "podcatch",
                        "tools": [{"name": "podcatch_search", "input_schema": {}}],
                    },
                    {
                        "type": "mcp_call",
                        "id": "mcp_1",
                        "name": "podcatch_search",
                        "server_label": "podcatch",
                        "arguments": "[1, 2]",
                        "error": {"type": "mcp_protocol_error", "code": -32602, "message": "bad"},
                    },
                    {
                        "type": "mcp_call",
                        "id": "mcp_2",
                        "name": "tide_times",
                        "server_label": "tidewatch",
                        "arguments": json.dumps({"station": "x"}),
                        "error": {
                            "type": "mcp_tool_execution_error",
                            "content": [{"type": "text", "text": REFUSAL_TEXT}],
                        },
                    },
                ],
                status="incomplete",
                incomplete="max_output_tokens",
                usage=openai_usage(400, 256),
            ),
        ),
    )
    driver = openai.create("gpt-5-mini", connector_url=url)
    assert driver.server_text == "name_and_description"
    turns = run(play(driver, offered_episode(servers)))
    first, second, last = turns
    assert isinstance(first.action, ToolCall) and first.action.arguments == [1, 2]
    assert first.action.host_result is not None
    assert first.action.host_result.text == "mcp_protocol_error: bad"
    assert first.surfaced == ("podcatch_search",)
    assert isinstance(second.action, ToolCall) and second.action.name == "tide_times"
    assert second.action.host_result is not None
    assert second.action.host_result.text == REFUSAL_TEXT
    assert isinstance(last.action, CutAtCap)
    tools = fake.model_bodies("openai")[0]["tools"]
    assert [t["server_label"] for t in tools] == ["podcatch", "tidewatch"]
    assert tools[0]["allowed_tools"] == ["podcatch_search", "podcatch_follow"]
    assert all(t["authorization"] == TOKEN for t in tools)


def test_a_failed_response_is_infrastructure_and_redacted(
    fake: FakeProviders, pool: tuple[str, list[LoggingReplay]]
) -> None:
    url, servers = pool
    failed = openai_response([], status="failed")
    failed["error"] = {"code": "server_error", "message": "boom {RAW_KEY}"}
    fake.script("openai", Reply(200, failed))
    with pytest.raises(InfraError) as caught:
        run(play(openai.create("gpt-5-mini", connector_url=url), offered_episode(servers)))
    assert OPENAI_KEY not in str(caught.value) and "[REDACTED]" in str(caught.value)


def test_the_pool_listing_is_read_as_untrusted_data() -> None:
    assert pool_paths(
        {
            "servers": [
                {"digest": "sha256:a", "path": "/servers/0/mcp"},
                {"digest": "sha256:a", "path": "/servers/1/mcp"},  # a clone: first kept
                {"digest": "sha256:b", "path": "https://elsewhere.example/mcp"},  # not a path
                {"digest": "sha256:c", "path": "/servers/2/mcp?next=//evil"},  # not the layout
                "junk",
            ]
        }
    ) == {"sha256:a": "/servers/0/mcp"}
    with pytest.raises(ValueError):
        pool_paths(["not", "a", "listing"])
    taken: set[str] = set()
    assert [label_for(n, taken) for n in ("Pod Catch!", "Pod Catch?", "")] == [
        "Pod_Catch",
        "Pod_Catch_2",
        "server",
    ]


def test_a_turn_asked_after_the_last_is_an_error_never_a_request(
    fake: FakeProviders, pool: tuple[str, list[LoggingReplay]]
) -> None:
    url, servers = pool
    fake.script(
        "openai",
        Reply(200, openai_response([], usage=openai_usage(10, 2))),
    )
    driver = openai.create("gpt-5-mini", connector_url=url)
    ep = offered_episode(servers)
    turns = run(play(driver, ep))
    assert len(turns) == 1 and isinstance(turns[0].action, FinalAnswer)
    assert len(fake.model_bodies("openai")) == 1
    assert turns[0].surfaced is None  # no listing reported: not measured

    async def ask_again() -> Any:
        return await driver.next_turn(ep, [Exchange(turns[0])])

    with pytest.raises(InfraError, match="no further turn"):
        run(ask_again())


def test_a_paused_connector_turn_is_continued_and_read_as_one_response(
    fake: FakeProviders, pool: tuple[str, list[LoggingReplay]]
) -> None:
    url, servers = pool
    use = {
        "type": "mcp_tool_use",
        "id": "mcptoolu_9",
        "name": "podcatch_search",
        "server_name": "podcatch",
        "input": {"query": "astronomy"},
    }
    result = {
        "type": "mcp_tool_result",
        "tool_use_id": "mcptoolu_9",
        "is_error": True,
        "content": REFUSAL_TEXT,
    }
    fake.script(
        "anthropic",
        Reply(
            200,
            anthropic_message(
                [use, result], stop_reason="pause_turn", usage=anthropic_usage(300, 20)
            ),
        ),
        Reply(
            200,
            anthropic_message(
                [{"type": "text", "text": "It refused."}], usage=anthropic_usage(350, 10)
            ),
        ),
    )
    turns = run(play(anthropic.create("m", connector_url=url), offered_episode(servers[:1])))
    call, final = turns
    assert isinstance(call.action, ToolCall) and call.action.host_result is not None
    assert call.action.host_result.is_error and call.action.host_result.text == REFUSAL_TEXT
    assert isinstance(final.action, FinalAnswer) and final.action.text == "It refused."
    assert call.usage is not None and call.usage.input == 650 and call.usage.output == 30
    second = fake.model_bodies("anthropic")[1]
    assert second["messages"][-1] == {"role": "assistant", "content": [use, result]}
    assert second["mcp_servers"] == fake.model_bodies("anthropic")[0]["mcp_servers"]
