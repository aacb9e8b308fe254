"""A key echoed into the MCP result the provider's connector returns (issue 40, item 5).

Under ``tool_access: connector`` the provider calls the MCP server itself and returns its
result (``ToolCall.host_result``); the harness records that result as the call's. Every
other string of a turn is redacted and then checked for a key-shaped string
(:func:`prereg.runners.providers.credentials.holds_key_prefix`), the turn refused as an
infrastructure error when one survives. Before this test the provider's result was
redacted but never checked: a key whose prefix an invisible character kept apart from
its body reached the record (``tk-ant-`` U+200B ``[REDACTED]``, or a foreign key's
whole body). Through the real SDK clients against the local fake, and through
``prereg run``.
"""

from __future__ import annotations

import base64
import json
import secrets
import string
from pathlib import Path
from typing import Any

import pytest

from prereg.runners.drivers import anthropic, openai
from prereg.runners.drivers.base import FinalAnswer, InfraError, ToolCall
from prereg.runners.providers.credentials import REDACTED
from prereg.runners.providers.driver import KEY_PREFIX_REFUSED
from prereg.runners.store.sqlite import RunStore
from tests.connector.conftest import LoggingReplay, offered_episode, register
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
from tests.providers.test_prov_redact_forms import holds_key

KEYS = {"anthropic": ANTHROPIC_KEY, "openai": OPENAI_KEY}
DRIVERS = ["anthropic", "openai"]


def _foreign_key() -> tuple[str, str]:
    """A key of another environment in OpenAI's project-key shape (generated, not real)."""
    alphabet = string.ascii_letters + string.digits + "_-"
    body = "".join(secrets.choice(alphabet) for _ in range(74))
    return "sk-proj-", body + "T3BlbkFJ" + body[::-1]


def echoes(key: str) -> dict[str, str]:
    """What a hostile MCP result holds: forms redaction removes (the key set here, whole,
    encoded, cut, or with its prefix kept apart by an invisible character), and a form
    that keeps a key-shaped string (a foreign key, its prefix kept apart)."""
    half = len(key) // 2
    prefix, body = _foreign_key()
    return {
        "base64": "token " + base64.b64encode(key.encode()).decode(),
        "split in two": f"{key[:half]} ... {key[half:]}",
        "prefix apart": f"take {key[:7]}\u200b{key[7:]}",
        "foreign key apart": f"found {prefix}\u2060{body}",
    }


#: what survives redaction key-shaped, and is refused: a key of another environment
#: (redaction knows only the keys set here). A key set here whose prefix an invisible
#: character keeps apart is redacted whole, the character included, since c2daa1d.
REFUSED = {"foreign key apart"}


def _reply(driver: str, result: str) -> Reply:
    """One connector response: a call the provider made, its result, a final answer."""
    if driver == "anthropic":
        return Reply(
            200,
            anthropic_message(
                [
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
                        "content": [{"type": "text", "text": result}],
                    },
                    {"type": "text", "text": "Nothing more."},
                ],
                usage=anthropic_usage(500, 80),
            ),
        )
    return Reply(
        200,
        openai_response(
            [
                {
                    "type": "mcp_call",
                    "id": "mcp_1",
                    "name": "podcatch_search",
                    "server_label": "podcatch",
                    "arguments": json.dumps({"query": "astronomy"}),
                    "status": "completed",
                    "output": result,
                },
                {
                    "type": "message",
                    "id": "msg_1",
                    "role": "assistant",
                    "status": "completed",
                    "content": [
                        {"type": "output_text", "text": "Nothing more.", "annotations": []}
                    ],
                },
            ],
            usage=openai_usage(400, 60),
        ),
    )


def _driver(driver: str, url: str) -> Any:
    if driver == "anthropic":
        return anthropic.create("claude-haiku-4-5", connector_url=url)
    return openai.create("gpt-5-mini", connector_url=url)


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("form", sorted(echoes("k" * 20)))
def test_a_key_in_the_providers_mcp_result_is_redacted_or_refused(
    fake: FakeProviders, replay: tuple[str, list[LoggingReplay]], driver: str, form: str
) -> None:
    url, servers = replay
    key = KEYS[driver]
    echoed = echoes(key)[form]
    fake.script(driver, _reply(driver, echoed))
    if form in REFUSED:
        with pytest.raises(InfraError) as caught:
            run(play(_driver(driver, url), offered_episode(servers[:1])))
        message = str(caught.value)
        assert KEY_PREFIX_REFUSED in message
        assert not holds_key(message) and key[:7] not in message and "\u2060" not in message
        return
    call, final = run(play(_driver(driver, url), offered_episode(servers[:1])))
    assert isinstance(call.action, ToolCall) and call.action.host_result is not None
    result = call.action.host_result
    assert REDACTED in result.text and not holds_key(result.text)
    assert key[:7] not in result.text and "\u200b" not in result.text
    assert not holds_key(json.dumps(result.content))
    assert isinstance(final.action, FinalAnswer) and final.action.text == "Nothing more."


@pytest.mark.parametrize("driver", DRIVERS)
def test_prereg_run_records_the_refusal_and_stores_no_key(
    connector_ws: Path,
    cli: Any,
    fake: FakeProviders,
    replay: tuple[str, list[LoggingReplay]],
    monkeypatch: pytest.MonkeyPatch,
    driver: str,
) -> None:
    """The unit whose provider result still holds a key-shaped string is an infrastructure
    error saying why; the store holds neither the key nor the foreign key's body."""
    url, _ = replay
    monkeypatch.setenv("PREREG_CONNECTOR_URL", url)
    reg_id = f"connector-keys-{driver}"
    registered = register(
        cli, connector_ws, driver, reg_id=reg_id, host_extra=", tool_access: connector"
    )
    assert registered.code == 0, registered.stderr
    prefix, body = _foreign_key()
    fake.script(driver, _reply(driver, f"found {prefix}\u200b{body}"))
    result = cli("-w", connector_ws, "run", reg_id, "--max-units", "1", "--json")
    assert result.code == 0, result.stderr
    (record,) = RunStore(connector_ws / "runs").records(registration_id=reg_id)
    assert record.status == "infra_error" and KEY_PREFIX_REFUSED in (record.error or "")
    runs = connector_ws / "runs"
    stored = b"".join(p.read_bytes() for p in runs.rglob("*") if p.is_file())
    assert body.encode() not in stored and prefix.encode() + "\u200b".encode() not in stored
    assert body not in result.stdout + result.stderr
