"""A reply read as plain data gives the driver what the SDK's typed parse gives it.

The drivers read a successful reply's JSON themselves where that is certain
(``providers/plain.py``) instead of paying the SDK's typed parse. The reference here is the
SDK itself: the same reply bytes, served through the real client (a mock transport, no
network), once parsed by the client into its response type (``cast_to``: what the drivers did
before) and once through :func:`post_plain`. The driver must read the same turn from both and
keep the same blocks to send back, in the same key order (they go back on the wire). The
shapes the plain road does not take (unknown block types, citations, an unknown field with a
value, NaN, a missing required field, ...) must fall back to the SDK's own parse, and error
statuses must still raise the SDK's exceptions.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from prereg.runners.drivers import anthropic as anthropic_driver
from prereg.runners.drivers import openai as openai_driver
from prereg.runners.drivers import openai_chat
from prereg.runners.drivers.base import InfraError
from prereg.runners.providers import plain
from prereg.runners.providers.send import Route, post_plain
from tests.providers import fakes
from tests.providers.fake_chat import chat_completion, chat_text, chat_tool_calls, tool_call
from tests.providers.fakes import run

Reply = dict[str, Any] | bytes


def _client(
    name: str, reply: Reply, status: int = 200, headers: dict[str, str] | None = None
) -> Any:
    content = reply if isinstance(reply, bytes) else json.dumps(reply).encode()
    head = {"content-type": "application/json", **(headers or {})}

    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(status, content=content, headers=head)

    http = httpx2.AsyncClient(transport=httpx2.MockTransport(answer))
    if name == "anthropic":
        return anthropic.AsyncAnthropic(
            api_key="k", base_url="http://fake", http_client=http, max_retries=0
        )
    return openai.AsyncOpenAI(
        api_key="k", base_url="http://fake/v1", http_client=http, max_retries=0
    )


def _setup(name: str) -> tuple[Any, Route, Callable[[dict[str, Any]], Any]]:
    if name == "anthropic":
        return (
            anthropic_driver.create("claude-test"),
            anthropic_driver._route(),
            plain.anthropic_message,
        )
    if name == "openai":
        return openai_driver.create("gpt-test"), openai_driver._route(), plain.openai_response
    return openai_chat.create("served-model"), openai_chat._route(), plain.chat_completion


def _both(name: str, reply: Reply, **headers: str) -> tuple[Any, Any]:
    """(the plain road's reply, the SDK's typed parse of the same bytes)."""

    async def go() -> tuple[Any, Any]:
        _, route, read = _setup(name)
        client = _client(name, reply, headers=headers)
        fast = await post_plain(client, route, {"model": "m"}, read)
        typed = await client.post(
            route.path,
            body={"model": "m"},
            cast_to=route.cast_to,
            options=dict(route.options),
        )
        return fast, typed

    return run(go())


def _parsed(driver: Any, response: Any) -> Any:
    try:
        return driver.parse(response)
    except InfraError as exc:
        return ("InfraError", str(exc))


def _same(name: str, reply: Reply, *, fast: bool, **headers: str) -> None:
    posted, typed = _both(name, reply, **headers)
    assert isinstance(posted, dict) is fast  # which road the reply took
    driver = _setup(name)[0]
    a, b = _parsed(driver, posted), _parsed(driver, typed)
    assert a == b
    if not isinstance(a, tuple):
        # the kept blocks go back on the wire: the same JSON text, key order included
        assert json.dumps(a.stored.items) == json.dumps(b.stored.items)


A_USAGE = fakes.anthropic_usage(thinking=7)
ANTHROPIC_PLAIN = {
    "text": fakes.anthropic_text("Found it."),
    "call": fakes.anthropic_tool_use(
        "search_tracks",
        {"query": "Lumen", "filters": {"year": None, "tags": [None, {"x": None}]}, "n": 2.5},
        text="Looking.",
        usage=A_USAGE,
    ),
    "nulls and empty citations": fakes.anthropic_message(
        [
            {"text": "a", "type": "text", "citations": None},
            {"type": "text", "text": "b", "citations": []},
            {"type": "tool_use", "id": "t1", "name": "n", "input": {}, "caller": None},
        ],
        usage={**fakes.anthropic_usage(), "cache_creation_input_tokens": None},
    ),
    "cut at the cap": fakes.anthropic_tool_use("n", {"q": 1}, stop_reason="max_tokens"),
    "two calls": fakes.anthropic_message(
        [
            {"type": "tool_use", "id": "t1", "name": "a", "input": {"x": 1}},
            {"type": "tool_use", "id": "t2", "name": "b", "input": {"y": 2}},
        ],
        stop_reason="tool_use",
    ),
    "unknown top-level field": {**fakes.anthropic_text("x"), "container": {"id": "c"}},
    "empty content": fakes.anthropic_message([]),
}
ANTHROPIC_TYPED = {
    "thinking block": fakes.anthropic_message(
        [{"type": "thinking", "thinking": "hm", "signature": "s"}, {"type": "text", "text": "x"}]
    ),
    "citations": fakes.anthropic_message(
        [{"type": "text", "text": "x", "citations": [{"type": "char_location", "cited_text": "c"}]}]
    ),
    "unknown block field": fakes.anthropic_message(
        [{"type": "text", "text": "x", "new_field": {"a": None}}]
    ),
    "input not an object": fakes.anthropic_tool_use("n", "not json"),
    "call without id": fakes.anthropic_message([{"type": "tool_use", "name": "n", "input": {}}]),
    "NaN in input": json.dumps(fakes.anthropic_tool_use("n", {"x": float("nan")})).encode(),
    "huge float": json.dumps(fakes.anthropic_tool_use("n", {"x": 1.0}))
    .replace("1.0", "1e400")
    .encode(),
    "server tool use": fakes.anthropic_message(
        [{"type": "server_tool_use", "id": "s", "name": "tool_search_tool_bm25", "input": {}}]
    ),
    "usage not an object": {**fakes.anthropic_text("x"), "usage": [1]},
}

O_ITEMS = [fakes.openai_message_item("Here."), fakes.openai_call_item("search", '{"q": "x"}')]
OPENAI_PLAIN = {
    "text": fakes.openai_text("Found it."),
    "call": fakes.openai_response([fakes.openai_call_item("search", '{"q": null}')]),
    "text and call, logprobs, async, namespace": fakes.openai_response(
        [
            {
                **O_ITEMS[0],
                "content": [
                    {"type": "output_text", "text": "t", "annotations": [], "logprobs": []}
                ],
            },
            {**fakes.openai_call_item("s", "{}", namespace="music"), "async": False},
        ]
    ),
    "refusal": fakes.openai_response(
        [{**O_ITEMS[0], "content": [{"type": "refusal", "refusal": "no"}]}]
    ),
    "incomplete": fakes.openai_response(
        O_ITEMS, status="incomplete", incomplete="max_output_tokens"
    ),
    "failed": {**fakes.openai_text("x"), "status": "failed", "error": {"message": "boom"}},
    "malformed arguments": fakes.openai_response([fakes.openai_call_item("s", "{not json")]),
}
OPENAI_TYPED = {
    "reasoning item": fakes.openai_response(
        [{"type": "reasoning", "id": "r", "summary": []}, O_ITEMS[1]]
    ),
    "annotations": fakes.openai_response(
        [
            {
                **O_ITEMS[0],
                "content": [
                    {
                        "type": "output_text",
                        "text": "t",
                        "annotations": [{"type": "url_citation", "url": "u"}],
                    }
                ],
            }
        ]
    ),
    "unknown item field": fakes.openai_response([{**O_ITEMS[1], "new": 1}]),
    "arguments not a string": fakes.openai_response([{**O_ITEMS[1], "arguments": {"q": 1}}]),
    "tool search call": fakes.openai_response([{"type": "tool_search_call", "id": "x"}]),
}

CHAT_PLAIN = {
    "text": chat_text("Found it."),
    "call": chat_tool_calls(tool_call("search", '{"q": null}'), text="Looking."),
    "server nulls": chat_completion(
        {
            "role": "assistant",
            "content": None,
            "refusal": None,
            "reasoning_content": None,
            "tool_calls": [],
            "annotations": [],
        }
    ),
    "cut": chat_text("abc", finish_reason="length"),
    "malformed arguments": chat_tool_calls(tool_call("s", "{bad")),
    "no choices": {**chat_text("x"), "choices": []},
    "two choices": {
        **chat_text("x"),
        "choices": [*chat_text("x")["choices"], *chat_text("y")["choices"]],
    },
}
CHAT_TYPED = {
    "reasoning text": chat_completion(
        {"role": "assistant", "content": "x", "reasoning_content": "r"}
    ),
    "arguments as an object": chat_tool_calls(tool_call("s", {"q": 1})),
    "custom tool call": chat_completion(
        {"role": "assistant", "tool_calls": [{"id": "c", "type": "custom", "custom": {}}]}
    ),
    "no message": {**chat_text("x"), "choices": [{"index": 0, "finish_reason": "stop"}]},
}

CASES = [
    *[("anthropic", k, v, True) for k, v in ANTHROPIC_PLAIN.items()],
    *[("anthropic", k, v, False) for k, v in ANTHROPIC_TYPED.items()],
    *[("openai", k, v, True) for k, v in OPENAI_PLAIN.items()],
    *[("openai", k, v, False) for k, v in OPENAI_TYPED.items()],
    *[("openai-chat", k, v, True) for k, v in CHAT_PLAIN.items()],
    *[("openai-chat", k, v, False) for k, v in CHAT_TYPED.items()],
]


@pytest.mark.parametrize(
    ("name", "reply", "fast"),
    [c[::2] + c[3:] for c in CASES],
    ids=[f"{c[0]}-{c[1]}" for c in CASES],
)
def test_the_plain_reply_reads_as_the_typed_one(name: str, reply: Reply, fast: bool) -> None:
    _same(name, reply, fast=fast)


@pytest.mark.parametrize("name", ["anthropic", "openai", "openai-chat"])
def test_a_reply_not_labelled_json_takes_the_sdks_road(name: str) -> None:
    reply = {"anthropic": fakes.anthropic_text, "openai": fakes.openai_text}.get(name, chat_text)
    _same(name, reply("x"), fast=False, **{"content-type": "text/plain"})
    posted, typed = _both(name, b"not json at all", **{"content-type": "text/plain"})
    assert posted == typed == "not json at all"


@pytest.mark.parametrize("name", ["anthropic", "openai", "openai-chat"])
def test_error_statuses_still_raise_the_sdks_exceptions(name: str) -> None:
    sdk = anthropic if name == "anthropic" else openai
    body = (
        fakes.anthropic_error(429, "rate_limit_error", "slow down")
        if name == "anthropic"
        else fakes.openai_error("slow down", "rate_limit_error")
    )

    async def go() -> BaseException:
        _, route, read = _setup(name)
        client = _client(name, body, 429, {"retry-after": "7"})
        with pytest.raises(sdk.RateLimitError) as caught:
            await post_plain(client, route, {"model": "m"}, read)
        return caught.value

    error = run(go())
    assert isinstance(error, sdk.RateLimitError)
    assert error.response.headers["retry-after"] == "7"


def test_every_field_a_shape_handles_is_one_the_sdk_declares() -> None:
    """A shape names only declared fields (an SDK upgrade that renames one fails here)."""
    _both("anthropic", fakes.anthropic_text("x"))  # the SDK types load lazily
    for make in (plain._anthropic_blocks, plain._openai_items, plain._chat_message):
        assert make() is not None
    with pytest.raises(ValueError, match="declares no field"):
        plain.shape(anthropic.types.TextBlock, nonsense=plain.verbatim(str))
