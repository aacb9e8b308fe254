"""Redaction everywhere: a hostile endpoint that echoes the key back gets it nowhere.

Issue 12, "Why" point 7: tool names and call ids a provider returns, and errors that are
not provider errors, were stored unredacted. Each case goes through the real SDK clients
against the local fake (``echo_key``): first at the driver's boundary (what leaves the
driver for the harness), then through ``prereg run``, with every byte of the workspace
and of the command's output searched for the key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from prereg.runners.drivers.anthropic import create as anthropic_driver
from prereg.runners.drivers.base import InfraError, ToolCall
from prereg.runners.drivers.openai import create as openai_driver
from prereg.runners.providers.credentials import REDACTED
from prereg.runners.store.sqlite import RunStore
from tests.providers.fakes import ANTHROPIC_KEY, OPENAI_KEY, FakeProviders, echo_key, episode, play
from tests.providers.fakes import run as run_async
from tests.providers.test_prov_e2e import assert_no_key_anywhere, register

PROVIDERS = ["anthropic", "openai"]
KEYS = {"anthropic": ANTHROPIC_KEY, "openai": OPENAI_KEY}


def _driver(provider: str) -> Any:
    if provider == "anthropic":
        return anthropic_driver("claude-haiku-4-5")
    return openai_driver("gpt-5-mini")


# ---- at the driver's boundary ---------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_key_echoed_in_a_tool_name_leaves_the_driver_redacted(
    fake: FakeProviders, provider: str
) -> None:
    fake.script(provider, echo_key(provider, "tool_name"))
    turns = run_async(play(_driver(provider), episode()))
    call = turns[0].action
    assert isinstance(call, ToolCall) and call.name == REDACTED
    assert KEYS[provider] not in repr(turns)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_key_echoed_in_a_call_id_leaves_the_driver_redacted(
    fake: FakeProviders, provider: str
) -> None:
    fake.script(provider, echo_key(provider, "call_id"))
    turns = run_async(play(_driver(provider), episode()))
    call = turns[0].action
    assert isinstance(call, ToolCall) and call.call_id is not None and REDACTED in call.call_id
    assert KEYS[provider] not in repr(turns)
    # the provider still gets its own call id back, so the conversation goes on
    assert KEYS[provider] in str(fake.model_bodies(provider)[1])


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_key_in_an_exception_that_is_not_the_sdks_leaves_the_driver_redacted(
    fake: FakeProviders, provider: str
) -> None:
    fake.script(provider, echo_key(provider, "usage"))
    with pytest.raises(InfraError) as caught:
        run_async(play(_driver(provider), episode()))
    message = str(caught.value)
    assert "ValueError" in message and REDACTED in message
    assert KEYS[provider] not in message
    # nothing that holds the original text is chained for a traceback to print
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


# ---- through `prereg run`: nothing in the workspace, nothing printed -------------------------


def _run(cli: Any, ws: Path, reg_id: str) -> Any:
    result = cli("-w", ws, "run", reg_id, "--max-units", "2", "--concurrency", "1", "--json")
    assert result.code == 0, result.stderr
    return result


@pytest.mark.parametrize("provider", PROVIDERS)
def test_prereg_run_stores_no_key_echoed_in_a_tool_name(
    ws: Path, cli: Any, fake: FakeProviders, provider: str
) -> None:
    reg_id = register(cli, ws, provider)
    fake.script(provider, echo_key(provider, "tool_name"))
    result = _run(cli, ws, reg_id)
    assert not fake.scripts[provider]  # the hostile reply was served
    records = RunStore(ws / "runs").records(registration_id=reg_id)
    called = [e for r in records for e in r.trace if e.kind == "tool_call"]
    assert called[0].tool == REDACTED
    human = cli("-w", ws, "run", reg_id, "--max-units", "1")
    assert_no_key_anywhere(ws, result.stdout, result.stderr, human.stdout, human.stderr)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_prereg_run_stores_no_key_echoed_in_a_call_id(
    ws: Path, cli: Any, fake: FakeProviders, provider: str
) -> None:
    reg_id = register(cli, ws, provider)
    fake.script(provider, echo_key(provider, "call_id"))
    result = _run(cli, ws, reg_id)
    assert not fake.scripts[provider]
    assert result.json()["completed"] == 2
    assert_no_key_anywhere(ws, result.stdout, result.stderr)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_prereg_run_stores_no_key_from_an_exception_that_is_not_the_sdks(
    ws: Path, cli: Any, fake: FakeProviders, provider: str
) -> None:
    reg_id = register(cli, ws, provider)
    fake.script(provider, echo_key(provider, "usage"))
    result = _run(cli, ws, reg_id)
    assert result.json()["failed"] == 1
    (failed,) = RunStore(ws / "runs").records(registration_id=reg_id, status="infra_error")
    assert "ValueError" in failed.error and REDACTED in failed.error
    assert failed.trace[-1].kind == "error" and REDACTED in (failed.trace[-1].text or "")
    human = cli("-w", ws, "run", reg_id, "--max-units", "1")
    assert_no_key_anywhere(ws, result.stdout, result.stderr, human.stdout, human.stderr)


@pytest.mark.parametrize("driver", ["anthropic", "openai"])
def test_a_batch_id_carrying_the_key_is_refused_and_never_stored(
    ws: Path, cli: Any, fake: FakeProviders, driver: str
) -> None:
    """A batch id is kept verbatim (the batch is fetched by it), so one that echoes the key
    cannot be redacted: it is refused before it is stored or printed."""
    fake.batch_id_prefix = (ANTHROPIC_KEY if driver == "anthropic" else OPENAI_KEY) + "_"
    reg_id = register(cli, ws, driver, turns=1)
    result = cli("-w", ws, "run", reg_id, "--batch", "--json")
    assert result.code == 1, result.stdout
    assert "contains a credential" in result.stdout + result.stderr
    assert_no_key_anywhere(ws, result.stdout, result.stderr)
