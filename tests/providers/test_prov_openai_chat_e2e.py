"""Acceptance for the Chat Completions driver: ``prereg run`` and ``prereg analyse`` on a
registration whose host is ``openai-chat``, against the local fake chat-completions server,
through the real ``openai`` SDK (as the other drivers' suite, tests/providers/test_prov_e2e.py)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from prereg.runners.providers.credentials import REDACTED
from prereg.runners.store.sqlite import RunStore
from tests.conftest import tree_digest
from tests.providers.fake_chat import ChatBrain, FakeChat
from tests.providers.fakes import Reply, provider_env, server_error
from tests.providers.test_prov_e2e import assert_no_key_anywhere

MODEL = "qwen2.5:7b-instruct"

DRAFT = """\
id: {id}
title: Podcast selection against an open-weights server
hypothesis: Descriptive metadata raises selection of the focal integration.
falsification: McNemar's exact test does not reject at 0.05.
experiment: podcast-selection
kind: exploratory
split: dev
arms:
  - {{id: descriptive, surface: focal}}
  - {{id: neutral, surface: focal-neutral}}
host: {{driver: openai-chat, model: '{model}'{host_extra}}}
budgets: {{completion_cap: 256, episode_tokens: 8000, call_limit: 4, turn_limit: {turns}{spend}}}
design: {{repeats: 2, rotations: 2, seed: 3}}
outcome: success
primary: {{test: mcnemar_exact, alpha: 0.05, sides: two-sided}}
"""

PRICES = """\
version: team-local-1
date: '2026-12-01'
providers:
  openai-chat:
    models:
      '{model}': {{input: 0.10, output: 0.40}}
"""


@pytest.fixture
def chat(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeChat]:
    with FakeChat(ChatBrain(cut_every=4), rate_limit_every=5, retry_after_ms=5) as server:
        provider_env(monkeypatch, server)
        yield server


def register(
    cli: Any,
    ws: Path,
    reg_id: str,
    *,
    host_extra: str = "",
    spend: bool = False,
    turns: int = 6,
) -> str:
    draft = ws / "drafts" / f"{reg_id}.yaml"
    draft.write_text(
        DRAFT.format(
            id=reg_id,
            model=MODEL,
            host_extra=host_extra,
            turns=turns,
            spend=", spend_usd: 5" if spend else "",
        )
    )
    result = cli("-w", ws, "register", draft, "--json")
    assert result.code == 0, result.stderr
    return reg_id


def test_prereg_run_then_analyse(ws: Path, cli: Any, chat: FakeChat) -> None:
    reg_id = register(cli, ws, "podcast-chat")
    result = cli("-w", ws, "run", reg_id, "--json")
    assert result.code == 0, result.stderr
    summary = result.json()
    assert summary["planned"] == 24 and summary["completed"] == 24, summary
    assert summary["failed"] == 0 and summary["remaining"] == 0
    assert chat.rate_limited > 0  # 429s happened and were retried

    records = RunStore(ws / "runs").records(registration_id=reg_id)
    assert len(records) == 24 and {r.status for r in records} == {"ok"}
    assert sum(r.retries or 0 for r in records) == chat.rate_limited
    for r in records:
        assert r.driver == "openai-chat" and r.evidence_class == "api" and not r.batch
        assert r.model_requested == MODEL and r.model_returned == MODEL + "-20991231"
        assert r.tokens.input and r.tokens.output is not None and r.latency_ms is not None
        assert r.cost_usd is None  # unpriced: not measured, never guessed
        assert r.funnel.surfaced is True  # every tool loaded (no tool search)
        assert r.server == urlsplit(chat.openai_url).netloc  # the server, from OPENAI_BASE_URL
    flags = Counter(r.terminal_flag for r in records)
    assert flags["completion_cap"] > 0  # finish_reason length recorded as the cap
    cut = next(r for r in records if r.terminal_flag == "completion_cap")
    assert [e.kind for e in cut.trace][:1] == ["cut"]
    called = [r for r in records if r.calls]
    assert called and all(r.trace[0].kind == "tool_call" for r in called)
    assert all(b.get("max_completion_tokens") == 256 for b in chat.chat_bodies())

    analysed = cli("-w", ws, "analyse", reg_id, "--json")
    assert analysed.code == 0, analysed.stderr
    report = analysed.json()
    # the registered test ran on every run of the chat host (analysed apart: class api)
    assert report["complete"] is True and report["host"]["driver"] == "openai-chat"
    assert report["primary"]["provenance"]["runs"]["count"] == 24
    assert report["verdict"] in ("supported", "not_supported", "inconclusive")
    assert (ws / "reports" / reg_id / "report.md").is_file()
    assert_no_key_anywhere(ws, result.stdout, result.stderr, analysed.stdout, analysed.stderr)


def test_a_registered_base_url_is_used_and_recorded(
    ws: Path, cli: Any, chat: FakeChat, monkeypatch: pytest.MonkeyPatch
) -> None:
    pinned = f", params: {{base_url: '{chat.openai_url}'}}"
    reg_id = register(cli, ws, "chat-pinned", host_extra=pinned)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # nothing listens there
    result = cli("-w", ws, "run", reg_id, "--max-units", "2", "--json")
    assert result.code == 0, result.stderr
    records = RunStore(ws / "runs").records(registration_id=reg_id)
    assert len(records) == 2
    assert all(
        r.config is not None and r.config.params["base_url"] == chat.openai_url for r in records
    )
    assert all("base_url" not in b for b in chat.chat_bodies())  # never sent as a field


def test_a_spend_cap_is_enforced_at_the_price_a_file_gives(
    ws: Path, cli: Any, chat: FakeChat, tmp_path: Path
) -> None:
    reg_id = register(cli, ws, "chat-capped", spend=True)
    before = tree_digest(ws)
    refused = cli("-w", ws, "run", reg_id, "--json")  # a cap on an unpriced model: refused
    assert refused.code == 2 and "no price" in refused.json()["message"]
    assert tree_digest(ws) == before and not chat.seen
    prices = tmp_path / "prices.yaml"
    prices.write_text(PRICES.format(model=MODEL))
    run = cli("-w", ws, "run", reg_id, "--prices", prices, "--max-units", "4", "--json")
    assert run.code == 0, run.stderr
    records = RunStore(ws / "runs").records(registration_id=reg_id)
    assert len(records) == 4 and all(r.cost_usd for r in records)
    assert run.json()["spend_usd"] == pytest.approx(sum(r.cost_usd or 0 for r in records), abs=1e-6)


def test_without_a_base_url_nothing_is_sent_or_written(
    ws: Path, cli: Any, chat: FakeChat, monkeypatch: pytest.MonkeyPatch
) -> None:
    reg_id = register(cli, ws, "chat-nowhere")
    monkeypatch.delenv("OPENAI_BASE_URL")
    before = tree_digest(ws)
    result = cli("-w", ws, "run", reg_id, "--json")
    assert result.code == 2
    assert "OPENAI_BASE_URL" in result.json()["message"] + str(result.json().get("field"))
    assert tree_digest(ws) == before and not chat.seen


def test_a_base_url_with_credentials_is_refused_at_register(ws: Path, cli: Any) -> None:
    draft = ws / "drafts" / "leaky.yaml"
    draft.write_text(
        DRAFT.format(
            id="leaky",
            model=MODEL,
            host_extra=", params: {base_url: 'http://me:hunter22@gw.example/v1'}",
            turns=6,
            spend="",
        )
    )
    before = tree_digest(ws)
    result = cli("-w", ws, "register", draft, "--json")
    assert result.code == 2 and "credentials" in result.stdout + result.stderr
    assert "hunter22" not in result.stdout + result.stderr
    assert tree_digest(ws) == before


def test_batch_is_refused_before_anything_is_sent(ws: Path, cli: Any, chat: FakeChat) -> None:
    reg_id = register(cli, ws, "chat-batch", turns=1)
    before = tree_digest(ws)
    result = cli("-w", ws, "run", reg_id, "--batch", "--json")
    assert result.code == 2 and "no batch API" in result.json()["message"]
    assert tree_digest(ws) == before and not chat.seen


def test_infra_errors_are_recorded_and_retried_next_run(ws: Path, cli: Any, chat: FakeChat) -> None:
    reg_id = register(cli, ws, "chat-flaky")
    chat.rate_limit_every = 0
    chat.script("chat", *[server_error("chat") for _ in range(8)])
    first = cli("-w", ws, "run", reg_id, "--concurrency", "1", "--json")
    assert first.code == 0, first.stderr
    assert first.json()["failed"] == 2 and first.json()["remaining"] == 2
    failed = RunStore(ws / "runs").records(registration_id=reg_id, status="infra_error")
    assert len(failed) == 2
    for record in failed:
        assert record.error is not None and "after 4 attempts" in record.error
        assert "[REDACTED]" in record.error and "[server 127.0.0.1:" in record.error
        assert record.success is None and record.driver == "openai-chat"
    second = cli("-w", ws, "run", reg_id, "--json")
    assert second.json()["completed"] == 2 and second.json()["remaining"] == 0
    assert_no_key_anywhere(ws, first.stdout, first.stderr, second.stdout, second.stderr)


def test_dry_run_and_a_tool_search_registration(ws: Path, cli: Any, chat: FakeChat) -> None:
    reg_id = register(cli, ws, "chat-dry")
    before = tree_digest(ws)
    dry = cli("-w", ws, "run", reg_id, "--dry-run", "--json")
    assert dry.code == 0, dry.stderr
    assert dry.json()["units_to_run"] == 24 and dry.json()["spend_upper_bound_usd"] is None
    assert tree_digest(ws) == before and not chat.seen  # unpriced: no bound, nothing sent
    searching = register(cli, ws, "chat-search", host_extra=", tool_search: true")
    before = tree_digest(ws)
    refused = cli("-w", ws, "run", searching, "--json")
    assert refused.code == 2 and "tool search" in refused.json()["message"]
    assert tree_digest(ws) == before and not chat.seen


def _hostile(where: str) -> Any:
    """The default agent's answer with the client's bare key echoed into ``where``."""

    def reply(body: dict[str, Any]) -> Reply:
        answer = ChatBrain(suffix="").chat(body)
        if where == "usage":  # reading it raises a plain ValueError quoting the key
            answer["usage"]["prompt_tokens"] = "{RAW_KEY}"
            return Reply(200, answer)
        (call,) = answer["choices"][0]["message"]["tool_calls"]
        call["id"] = "call_{RAW_KEY}"
        call["function"]["name"] = "{RAW_KEY}"
        call["function"]["arguments"] = '{"query": "{RAW_KEY}"}'
        answer["model"] = "{RAW_KEY}"
        return Reply(200, answer)

    return reply


def test_prereg_run_stores_no_key_a_hostile_server_echoes(
    ws: Path, cli: Any, chat: FakeChat
) -> None:
    reg_id = register(cli, ws, "chat-hostile")
    chat.rate_limit_every = 0
    chat.script("chat", _hostile("usage"), _hostile("call"))  # unit 1, then unit 2
    result = cli("-w", ws, "run", reg_id, "--max-units", "2", "--concurrency", "1", "--json")
    assert result.code == 0, result.stderr
    assert not chat.scripts["chat"]  # both hostile replies were served
    records = RunStore(ws / "runs").records(registration_id=reg_id)
    called = [e for r in records for e in r.trace if e.kind == "tool_call"]
    assert [(e.tool, e.arguments, e.model_returned) for e in called] == [
        (REDACTED, {"query": REDACTED}, REDACTED)
    ]
    (failed,) = [r for r in records if r.status == "infra_error"]
    assert failed.error is not None and "ValueError" in failed.error and REDACTED in failed.error
    assert_no_key_anywhere(ws, result.stdout, result.stderr)
