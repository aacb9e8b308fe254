"""The connector request a driver posts is what the SDK's typed method sends: the Anthropic
body through ``beta.messages.create`` with the MCP beta (same path, same
headers, the ``anthropic-beta`` one included), the OpenAI body through
``responses.create``; both answered by the fake in connector mode (it visits the replay),
parsed into the same turn."""

from __future__ import annotations

import inspect
import json
from typing import Any

import pytest

from prereg.runners.drivers import anthropic, openai
from prereg.runners.drivers.connector import ConnectorDriver, servers_for
from tests.connector.conftest import LoggingReplay, offered_episode
from tests.providers.fakes import FakeProviders, run

VARYING = {"idempotency-key", "x-stainless-retry-count"}


def _typed(method: Any, body: dict[str, Any], **extra: Any) -> Any:
    known = {
        n
        for n, p in inspect.signature(method).parameters.items()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    } - {"extra_headers", "extra_query", "extra_body", "timeout", "stream"}
    kwargs = {k: v for k, v in body.items() if k in known}
    rest = {k: v for k, v in body.items() if k not in known}
    return method(**kwargs, **extra, extra_body=rest or None)


@pytest.mark.parametrize("name", ["anthropic", "openai"])
def test_the_posted_connector_body_is_the_typed_methods(
    fake: FakeProviders, replay: tuple[str, list[LoggingReplay]], name: str
) -> None:
    url, servers = replay
    driver: ConnectorDriver = (
        anthropic.create("claude-test", connector_url=url)
        if name == "anthropic"
        else openai.create("gpt-test", connector_url=url)
    )
    ep = offered_episode(servers)
    paths = {s.digest: f"/servers/{i}/mcp" for i, s in enumerate(servers)}
    body = driver.connector_request(ep, servers_for(ep, url, paths))

    async def both() -> tuple[Any, Any]:
        client = driver._client_for_loop()
        try:
            if name == "anthropic":
                method = client.beta.messages.create
                extra = {"betas": [anthropic.MCP_BETA]}
            else:
                method, extra = client.responses.create, {}
            typed = await _typed(method, json.loads(json.dumps(body)), **extra)
            posted = await driver._create(client, body)
        finally:
            await driver.aclose()
        return typed, posted

    typed, posted = run(both())
    old, new = fake.seen[-2], fake.seen[-1]
    assert new.path == old.path and new.method == old.method == "POST"
    assert new.body == old.body
    assert {k: v for k, v in new.headers.items() if k not in VARYING} == {
        k: v for k, v in old.headers.items() if k not in VARYING
    }
    if name == "anthropic":
        assert new.path == "/v1/messages"
        assert new.headers["anthropic-beta"] == anthropic.MCP_BETA
    assert type(posted) is type(typed)
    first, second = driver.parse(typed), driver.parse(posted)
    assert driver.connector_read(first)[0] and len(driver.connector_read(first)[0]) == len(
        driver.connector_read(second)[0]
    )
    assert len(fake.connector_log.visits) == 2 * len(servers)  # each request visited both
