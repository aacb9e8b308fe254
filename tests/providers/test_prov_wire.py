"""The body a driver posts through ``client.post`` is what the SDK's typed method sends.

The drivers skip the SDKs' per-request typed transformation (``providers/send.py``). For each
driver, the same request body is sent twice to the local fake through the real SDK client:
once the way the drivers used to send it (``responses.create`` / ``messages.create`` /
``chat.completions.create``, body fields as keywords and the rest in ``extra_body``), once
through the driver's own path. The fake must receive the same JSON, to the last field, and
the same headers (key, version, content type, the SDK's own), on the same path. (The order of
an object's keys may differ: JSON objects are unordered, and the typed method orders them by
its signature.)
"""

from __future__ import annotations

import inspect
import json
import threading
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

from prereg.runners.drivers import anthropic as anthropic_driver
from prereg.runners.drivers import openai as openai_driver
from prereg.runners.drivers import openai_chat
from prereg.runners.drivers.base import Exchange, ToolCall, ToolResult, Turn
from prereg.runners.providers.driver import ModelDriver
from tests.providers.fake_chat import FakeChat
from tests.providers.fakes import episode, provider_env, run

#: headers that differ between any two requests of the same client
VARYING = {"idempotency-key", "x-stainless-retry-count"}

METHODS = {
    "anthropic": lambda client: client.messages.create,
    "openai": lambda client: client.responses.create,
    "openai-chat": lambda client: client.chat.completions.create,
}


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeChat]:
    with FakeChat() as server:
        provider_env(monkeypatch, server)
        yield server


def _driver(name: str, tool_search: bool) -> ModelDriver:
    params: dict[str, Any] = {"temperature": 0.3, "metadata": {"run": "wire"}}
    if name == "anthropic":
        params["top_k"] = 5  # a field messages.create has a keyword for
        return anthropic_driver.create(
            "claude-test", params, allow_sampling=True, tool_search=tool_search
        )
    params["vendor_flag"] = {"nested": [1, "two", None]}  # no SDK keyword: extra_body
    if name == "openai":
        return openai_driver.create(
            "gpt-test", params, allow_sampling=True, tool_search=tool_search
        )
    return openai_chat.create("served-model", params, allow_sampling=True)


def _body(driver: ModelDriver) -> dict[str, Any]:
    """A second-turn body: system prompt, tools, a past call with its result."""
    ep = episode()
    ep = type(ep)(**{**vars(ep), "system": "Answer from the library only."})
    call = ToolCall("search_tracks", {"query": "Lumen Drift"}, call_id="call_wire_1")
    history = [Exchange(Turn(call), ToolResult({"items": []}, False, '{"items": []}'))]
    body = driver.build_request(ep, history)
    if isinstance(driver, openai_chat.OpenAIChatDriver):
        body = openai_chat._with_cap(body, driver.cap_field)
    return body


def _typed(client: Any, method: Any, body: dict[str, Any]) -> Any:
    """The typed method's call: known fields as keywords, the rest in extra_body."""
    known = {
        n
        for n, p in inspect.signature(method).parameters.items()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    } - {"extra_headers", "extra_query", "extra_body", "timeout", "stream"}
    kwargs = {k: v for k, v in body.items() if k in known}
    extra = {k: v for k, v in body.items() if k not in known}
    return method(**kwargs, extra_body=extra or None)


@pytest.mark.parametrize(
    ("name", "tool_search"),
    [("anthropic", False), ("anthropic", True), ("openai", False), ("openai", True)]
    + [("openai-chat", False)],
)
def test_the_posted_body_is_the_typed_methods(fake: FakeChat, name: str, tool_search: bool) -> None:
    driver = _driver(name, tool_search)
    body = _body(driver)

    async def both() -> tuple[Any, Any]:
        client = driver._client_for_loop()
        try:
            typed = await _typed(client, METHODS[name](client), json.loads(json.dumps(body)))
            posted = await driver._create(client, body)
        finally:
            await driver.aclose()
        return typed, posted

    typed, posted = run(both())
    old, new = fake.seen[-2], fake.seen[-1]
    assert new.path == old.path and new.method == old.method == "POST"
    assert new.body == old.body
    assert new.body["tools"] and new.body["messages" if name != "openai" else "input"]
    assert {k: v for k, v in new.headers.items() if k not in VARYING} == {
        k: v for k, v in old.headers.items() if k not in VARYING
    }
    # the reply may come back as plain data (providers/plain.py, checked against the SDK's
    # typed parse of the same bytes in test_prov_plain.py): the driver reads the same turn
    assert driver.parse(posted).turn == driver.parse(typed).turn


@pytest.mark.parametrize("name", ["anthropic", "openai", "openai-chat"])
def test_the_sdk_is_imported_off_the_event_loop(
    fake: FakeChat, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first client's SDK import (seconds of CPU) runs in a worker thread, once per
    loop, so the event loop keeps serving the other units meanwhile."""
    driver = _driver(name, False)
    threads: list[int] = []
    real = driver._import_sdk

    def recording() -> ModuleType:
        threads.append(threading.get_ident())
        return real()

    monkeypatch.setattr(driver, "_import_sdk", recording)

    async def two_turns() -> int:
        loop_thread = threading.get_ident()
        ep = episode()
        await driver.next_turn(ep, [])
        await driver.next_turn(episode(label="arm/t002/0"), [])
        await driver.aclose()
        return loop_thread

    loop_thread = run(two_turns())
    assert len(threads) == 1 and threads[0] != loop_thread
    assert len(fake.seen) == 2
