"""The Chat Completions driver through the real ``openai`` SDK client against a local fake
chat-completions server (as vLLM, SGLang, llama.cpp's server and Ollama serve it)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from prereg.core.errors import BadInput
from prereg.registry.hosts import params_problem
from prereg.runners.drivers import openai_chat as driver_module
from prereg.runners.drivers.base import (
    CutAtCap,
    FinalAnswer,
    InfraError,
    Malformed,
    ToolCall,
    ToolResult,
)
from prereg.runners.providers.credentials import REDACTED
from prereg.runners.providers.prices import PriceTable
from prereg.runners.providers.retry import RetriesExhausted
from prereg.runners.providers.spend import SpendCapReached, SpendMeter
from tests.providers.fake_chat import (
    FakeChat,
    chat_completion,
    chat_text,
    chat_tool_calls,
    chat_usage,
    tool_call,
)
from tests.providers.fakes import (
    OPENAI_KEY,
    Reply,
    episode,
    play,
    provider_env,
    rate_limited,
    run,
    server_error,
)

MODEL = "Qwen/Qwen2.5-7B-Instruct"
PARSE_ERROR = ToolResult(None, True, "error: the tool call could not be parsed")


@pytest.fixture
def chat(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeChat]:
    """A running fake, with OPENAI_BASE_URL and OPENAI_API_KEY pointing at it."""
    with FakeChat() as server:
        provider_env(monkeypatch, server)
        yield server


def driver(params: dict[str, Any] | None = None, **options: Any) -> Any:
    return driver_module.create(MODEL, params or {}, **options)


def test_tool_call_then_final_text(chat: FakeChat) -> None:
    chat.script(
        "chat",
        Reply(
            200,
            chat_tool_calls(
                tool_call("search_tracks", '{"query": "Lumen Drift"}', "call_A"),
                model=MODEL,
                usage=chat_usage(500, 60, cached=200, reasoning=20),
            ),
        ),
        Reply(200, chat_text("You have Glass Harbor.", model=MODEL)),
    )
    d = driver()
    first, second = run(play(d, episode(), [ToolResult({"n": 1}, False, '{"n": 1}')]))

    assert first.action == ToolCall("search_tracks", {"query": "Lumen Drift"}, "call_A")
    assert second.action == FinalAnswer("You have Glass Harbor.")
    # input counts the cached tokens; reasoning is split out of the output
    assert (first.usage.input, first.usage.cached) == (500, 200)
    assert (first.usage.output, first.usage.reasoning) == (40, 20)
    assert first.model_returned == MODEL and first.latency_ms is not None
    assert first.cost_usd is None  # no price for an open-weights server: not measured
    assert d.name == "openai-chat" and d.evidence_class == "api" and d.server_text == "none"

    body1, body2 = chat.chat_bodies()
    assert body1["model"] == MODEL and body1["max_completion_tokens"] == 256
    assert "max_tokens" not in body1
    assert body1["tool_choice"] == "auto" and body1["parallel_tool_calls"] is False
    assert body1["messages"] == [{"role": "user", "content": episode().prompt}]
    for forbidden in ("temperature", "top_p", "seed", "base_url", "stream"):
        assert forbidden not in body1
    # function tools in offered order, schemas as registered; no server name or text
    assert [t["function"]["name"] for t in body1["tools"]] == [
        "search_tracks",
        "get_track",
        "find_podcast",
    ]
    assert all(t["type"] == "function" and "strict" not in t["function"] for t in body1["tools"])
    assert "Music Library" not in json.dumps(body1["tools"])
    # the call goes back as returned, answered by a tool message
    assert body2["messages"][1:] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [tool_call("search_tracks", '{"query": "Lumen Drift"}', "call_A")],
        },
        {"role": "tool", "tool_call_id": "call_A", "content": '{"n": 1}'},
    ]
    seen = chat.chat_seen()
    assert all(s.headers["authorization"] == f"Bearer {OPENAI_KEY}" for s in seen)
    assert all(s.headers.get("x-stainless-retry-count") == "0" for s in seen)


def test_plain_text_answer_with_a_system_prompt(chat: FakeChat) -> None:
    chat.script("chat", Reply(200, chat_text("No tool needed.", model="served/" + MODEL)))
    ep = episode()
    ep = type(ep)(**{**ep.__dict__, "system": "Be brief."})
    (turn,) = run(play(driver(), ep))
    assert turn.action == FinalAnswer("No tool needed.")
    assert turn.model_returned == "served/" + MODEL  # what the server says it ran
    assert turn.retries == 0
    # details the server does not report are null, never zero
    assert (turn.usage.input, turn.usage.output) == (140, 30)
    assert turn.usage.cached is None and turn.usage.reasoning is None
    (body,) = chat.chat_bodies()
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}


def test_finish_reason_length_is_a_cut_at_the_cap(chat: FakeChat) -> None:
    chat.script(
        "chat",
        Reply(
            200,
            chat_text(
                "The answer is", model=MODEL, finish_reason="length", usage=chat_usage(90, 32)
            ),
        ),
    )
    (turn,) = run(play(driver(), episode(cap=32)))
    assert turn.action == CutAtCap("The answer is")
    assert turn.usage.output == 32
    assert chat.chat_bodies()[0]["max_completion_tokens"] == 32


def test_a_call_cut_at_the_cap_is_a_cut_not_a_call(chat: FakeChat) -> None:
    cut = chat_tool_calls(
        tool_call("search_tracks", '{"query": "Lu'), model=MODEL, finish_reason="length"
    )
    chat.script("chat", Reply(200, cut))
    (turn,) = run(play(driver(), episode()))
    assert turn.action == CutAtCap('{"query": "Lu')


def test_429_then_success_honours_retry_after(chat: FakeChat) -> None:
    chat.script("chat", rate_limited("chat", 250), Reply(200, chat_text("ok", model=MODEL)))
    d = driver()
    (turn,) = run(play(d, episode()))
    assert turn.action == FinalAnswer("ok") and turn.retries == 1 and d.stats.retries == 1
    first, second = (s.at for s in chat.chat_seen())
    assert second - first >= 0.24


def test_500_then_success(chat: FakeChat) -> None:
    chat.script("chat", server_error("chat"), Reply(200, chat_text("ok", model=MODEL)))
    d = driver()
    (turn,) = run(play(d, episode()))
    assert turn.action == FinalAnswer("ok") and turn.retries == 1
    assert d.stats.by_cause["500"] == 1


def test_exhausted_retries_are_an_infrastructure_failure_naming_the_server(
    chat: FakeChat,
) -> None:
    chat.script("chat", *[server_error("chat") for _ in range(4)])
    with pytest.raises(RetriesExhausted) as info:
        run(play(driver(), episode()))
    message = str(info.value)
    assert "after 4 attempts" in message and REDACTED in message  # the echoed key
    assert OPENAI_KEY not in message
    port = chat.origin.rsplit(":", 1)[1]
    assert f"[server 127.0.0.1:{port}]" in message and "/v1" not in message.split("[server")[1]
    assert len(chat.chat_bodies()) == 4


@pytest.mark.parametrize("arguments", ['{"query": ', "null", "[1, 2]", "3", '"Lumen"'])
def test_malformed_arguments_are_reported_never_repaired(chat: FakeChat, arguments: str) -> None:
    chat.script(
        "chat",
        Reply(200, chat_tool_calls(tool_call("search_tracks", arguments, "call_M"), model=MODEL)),
        Reply(200, chat_text("Sorry.", model=MODEL)),
    )
    first, second = run(play(driver(), episode(), [PARSE_ERROR]))
    assert first.action == Malformed(arguments)
    assert second.action == FinalAnswer("Sorry.")
    # the call goes back as an empty object (servers parse past arguments for their chat
    # template), answered by the harness's parse error under the same call id
    assistant, tool = chat.chat_bodies()[1]["messages"][1:]
    assert assistant["tool_calls"][0]["function"] == {"name": "search_tracks", "arguments": "{}"}
    assert tool == {"role": "tool", "tool_call_id": "call_M", "content": PARSE_ERROR.text}


def test_only_the_first_of_parallel_calls_is_taken_and_sent_back(chat: FakeChat) -> None:
    chat.script(
        "chat",
        Reply(
            200,
            chat_tool_calls(
                tool_call("search_tracks", '{"query": "a"}', "call_1"),
                tool_call("find_podcast", '{"query": "b"}', "call_2"),
                model=MODEL,
            ),
        ),
        Reply(200, chat_text("done", model=MODEL)),
    )
    first, _ = run(play(driver(), episode()))
    assert first.action == ToolCall("search_tracks", {"query": "a"}, "call_1")
    assistant = chat.chat_bodies()[1]["messages"][1]
    assert [c["id"] for c in assistant["tool_calls"]] == ["call_1"]


def test_a_call_without_an_id_gets_one_that_its_answer_carries(chat: FakeChat) -> None:
    call = {
        "type": "function",
        "function": {"name": "get_track", "arguments": '{"track_id": "t1"}'},
    }
    chat.script(
        "chat",
        Reply(200, chat_completion({"role": "assistant", "content": "", "tool_calls": [call]})),
        Reply(200, chat_text("done")),
    )
    run(play(driver(), episode()))
    assistant, tool = chat.chat_bodies()[1]["messages"][1:]
    assert (
        assistant["tool_calls"][0]["id"]
        and tool["tool_call_id"] == assistant["tool_calls"][0]["id"]
    )


def test_max_tokens_fallback_is_remembered_for_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeChat(reject_field="max_completion_tokens") as chat:
        provider_env(monkeypatch, chat)
        d = driver()

        async def two_episodes() -> list[Any]:
            turns = []
            for label in ("arm/t001/0", "arm/t002/0"):
                turns.append(await d.next_turn(episode(label=label), []))
            await d.aclose()
            return turns

        first, second = run(two_episodes())
        assert first.action == ToolCall("search_tracks", {"query": "x"}, first.action.call_id)
        assert isinstance(second.action, ToolCall)
        bodies = chat.chat_bodies()
        # refused once, then max_tokens for this request and every later one
        assert [("max_completion_tokens" in b, b.get("max_tokens")) for b in bodies] == [
            (True, None),
            (False, 256),
            (False, 256),
        ]
        assert chat.rejected == 1 and d.cap_field == "max_tokens"


def test_a_server_that_ignores_max_completion_tokens_gets_max_tokens(chat: FakeChat) -> None:
    """Some servers drop fields they do not know: an answer longer than the cap shows it."""

    def server(body: dict[str, Any]) -> Reply:
        if "max_tokens" in body:  # the cap it knows: enforced
            return Reply(200, chat_text("short", finish_reason="length", usage=chat_usage(9, 32)))
        return Reply(200, chat_text("long " * 500, usage=chat_usage(9, 500)))

    chat.script("chat", server, server, server)
    d = driver()
    first = run(play(d, episode(cap=32)))[0]
    assert first.action == CutAtCap("short") and first.usage.output == 32
    assert d.cap_field == "max_tokens"
    assert [sorted(k for k in b if k.startswith("max_")) for b in chat.chat_bodies()] == [
        ["max_completion_tokens"],
        ["max_tokens"],
    ]


def test_another_400_is_not_taken_for_the_cap_field(chat: FakeChat) -> None:
    bad = {"error": {"message": "model not found", "type": "invalid_request_error"}}
    # a 400 about another field that echoes the body (and so names the cap field)
    echo = {"error": {"message": "bad temperature in {'max_completion_tokens': 256}"}}
    echo["error"]["param"] = "temperature"
    for reply in (bad, echo):
        chat.script("chat", Reply(400, reply))
        d = driver()
        with pytest.raises(InfraError, match=str(reply["error"]["message"])[:9]):
            run(play(d, episode()))
        assert d.cap_field == "max_completion_tokens"
    assert len(chat.chat_bodies()) == 2


def test_no_key_reaches_what_leaves_the_driver(chat: FakeChat) -> None:
    hostile = chat_tool_calls(tool_call("{RAW_KEY}", '{"q": "{RAW_KEY}"}', "call_{RAW_KEY}"))
    chat.script("chat", Reply(200, hostile), Reply(200, chat_text("key {RAW_KEY}")))
    first, second = run(play(driver(), episode()))
    text = repr(first) + repr(second)
    assert OPENAI_KEY not in text and REDACTED in text
    # the server gets its own transcript back unredacted (it sent it)
    assert chat.chat_bodies()[1]["messages"][2]["tool_call_id"] == f"call_{OPENAI_KEY}"


def test_without_a_key_the_placeholder_is_sent(
    chat: FakeChat, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    chat.script("chat", Reply(200, chat_text("ok")))
    run(play(driver(), episode()))
    assert chat.chat_seen()[0].headers["authorization"] == "Bearer EMPTY"


def test_base_url_from_the_registration_wins_and_is_not_sent(
    chat: FakeChat, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # nothing listens there
    chat.script("chat", Reply(200, chat_text("ok")))
    d = driver({"base_url": chat.openai_url})
    assert d.server == chat.origin.removeprefix("http://")  # host:port, no scheme or path
    assert driver().server == "127.0.0.1:9"
    (turn,) = run(play(d, episode()))
    assert turn.action == FinalAnswer("ok")
    assert "base_url" not in chat.chat_bodies()[0]


def test_a_missing_or_unusable_base_url_names_the_field(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(BadInput) as missing:
        driver_module.resolve_base_url({})
    assert missing.value.field == "host.params.base_url or OPENAI_BASE_URL"
    with pytest.raises(BadInput) as secret:
        driver_module.resolve_base_url({"base_url": "http://user:pw@localhost:8000/v1"})
    assert secret.value.field == "host.params.base_url" and "pw" not in str(secret.value)
    monkeypatch.setenv("OPENAI_BASE_URL", "localhost:8000")
    with pytest.raises(BadInput) as no_scheme:
        driver_module.resolve_base_url({})
    assert no_scheme.value.field == "OPENAI_BASE_URL"
    # the registry refuses at register what the driver refuses at run
    assert params_problem("openai-chat", {"base_url": "ftp://x/v1"}) is not None
    assert params_problem("openai-chat", {"base_url": "http://localhost:8000/v1?k=1"})
    assert params_problem("openai-chat", {"base_url": "https://gw.example/v1"}) is None


def test_params_pass_through_and_reserved_are_refused(chat: FakeChat) -> None:
    for reserved in ("max_tokens", "max_completion_tokens", "parallel_tool_calls", "messages"):
        with pytest.raises(BadInput, match=reserved):
            driver({reserved: 1})
        assert params_problem("openai-chat", {reserved: 1}) is not None
    with pytest.raises(BadInput, match="allow_sampling"):
        driver({"temperature": 0.2}, allow_sampling=False)
    with pytest.raises(BadInput, match="tool search"):
        driver(tool_search=True)
    chat.script("chat", Reply(200, chat_text("ok")))
    params = {"temperature": 0.0, "top_k": 20, "chat_template_kwargs": {"enable_thinking": False}}
    run(play(driver(params, allow_sampling=True), episode()))
    body = chat.chat_bodies()[0]
    assert body["temperature"] == 0.0 and body["top_k"] == 20  # a server's own field too
    assert body["chat_template_kwargs"] == {"enable_thinking": False}


def test_a_response_without_choices_is_an_infrastructure_failure(chat: FakeChat) -> None:
    empty = chat_text("x")
    empty["choices"] = []
    chat.script("chat", Reply(200, empty))
    with pytest.raises(InfraError, match="no choices"):
        run(play(driver(), episode()))


def _priced(output_per_m: float) -> PriceTable:
    return PriceTable.model_validate(
        {
            "version": "t",
            "date": "2026-12-01",
            "providers": {
                "openai-chat": {"models": {MODEL: {"input": 0.0, "output": output_per_m}}}
            },
        }
    )


def test_spend_cap_holds_the_completion_cap_before_a_request(chat: FakeChat) -> None:
    """The worst case counts the completion cap whichever field carries it: 4096 output
    tokens at $1/M pass a $0.001 cap, so nothing is sent."""
    d = driver(prices=_priced(1.0), spend=SpendMeter(cap_usd=0.001, spent_usd=0.0))
    with pytest.raises(SpendCapReached):
        run(play(d, episode(cap=4096)))
    assert not chat.chat_bodies()
    chat.script("chat", Reply(200, chat_text("ok", model=MODEL, usage=chat_usage(100, 50))))
    cheap = driver(prices=_priced(1.0), spend=SpendMeter(cap_usd=0.001, spent_usd=0.0))
    (turn,) = run(play(cheap, episode(cap=64)))
    assert turn.cost_usd == pytest.approx(50 / 1e6)
