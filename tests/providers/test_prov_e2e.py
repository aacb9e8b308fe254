"""Acceptance: ``prereg run`` against the local fake through ``ANTHROPIC_BASE_URL`` /
``OPENAI_BASE_URL``, with the real SDK clients; and no key anywhere in the workspace."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from prereg.runners.providers.batch_store import BatchStore
from prereg.runners.store.sqlite import RunStore
from tests.conftest import tree_digest
from tests.providers.fake_chat import ChatBrain, FakeChat
from tests.providers.fakes import (
    ANTHROPIC_KEY,
    OPENAI_KEY,
    FakeProviders,
    provider_env,
    server_error,
)
from tests.waiting import wait_until

MODELS = {
    "anthropic": "claude-haiku-4-5",
    "openai": "gpt-5-mini",
    "openai-chat": "qwen2.5:7b-instruct",
}
# Every driver that calls a provider API; the fake serves all their wire formats.
API_DRIVERS = ["anthropic", "openai", "openai-chat"]
# Open-weights servers have no shipped prices: the user's file prices the chat model.
CHAT_PRICES = """\
version: team-local-1
date: '2026-12-01'
providers:
  openai-chat:
    models:
      'qwen2.5:7b-instruct': {input: 0.10, output: 0.40}
"""
# Which scripted route of the fake each driver's requests take.
ROUTE = {"anthropic": "anthropic", "openai": "openai", "openai-chat": "chat"}

DRAFT = """\
id: {id}
title: Podcast selection against a provider host
hypothesis: Descriptive metadata raises selection of the focal integration.
falsification: McNemar's exact test does not reject at 0.05.
experiment: podcast-selection
kind: exploratory
split: dev
arms:
  - {{id: descriptive, surface: focal}}
  - {{id: neutral, surface: focal-neutral}}
host: {{driver: {driver}, model: {model}{host_extra}}}
budgets: {{completion_cap: 256, episode_tokens: 8000, call_limit: 4, turn_limit: {turns},
          spend_usd: 5}}
design: {{repeats: 2, rotations: 2, seed: 3}}
outcome: success
primary: {{test: mcnemar_exact, alpha: 0.05, sides: two-sided}}
"""


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProviders]:
    with FakeChat(ChatBrain(cut_every=4), rate_limit_every=5, retry_after_ms=5) as server:
        provider_env(monkeypatch, server)
        yield server


def price_args(driver: str, folder: Path) -> list[str]:
    """``--prices FILE`` for a driver with no shipped prices (the draft caps spend)."""
    if driver != "openai-chat":
        return []
    prices = folder / "chat-prices.yaml"
    prices.write_text(CHAT_PRICES)
    return ["--prices", str(prices)]


def register(
    cli: Any,
    ws: Path,
    driver: str,
    *,
    turns: int = 6,
    host_extra: str = "",
    reg_id: str | None = None,
) -> str:
    reg_id = reg_id or f"podcast-{driver}"
    draft = ws / "drafts" / f"{reg_id}.yaml"
    draft.write_text(
        DRAFT.format(
            id=reg_id, driver=driver, model=MODELS[driver], turns=turns, host_extra=host_extra
        )
    )
    result = cli("-w", ws, "register", draft, "--json")
    assert result.code == 0, result.stderr
    return reg_id


def assert_no_key_anywhere(root: Path, *outputs: str) -> None:
    """Every byte of every file under the workspace, and the command output."""
    files = [p for p in root.rglob("*") if p.is_file()]
    assert files
    for path in files:
        data = path.read_bytes()
        for key in (ANTHROPIC_KEY, OPENAI_KEY):
            assert key.encode() not in data, f"{key} written to {path}"
    for text in outputs:
        assert ANTHROPIC_KEY not in text and OPENAI_KEY not in text


@pytest.mark.parametrize("driver", API_DRIVERS)
def test_prereg_run_completes_every_unit(
    ws: Path, cli: Any, fake: FakeProviders, driver: str, tmp_path: Path
) -> None:
    reg_id = register(cli, ws, driver)
    result = cli("-w", ws, "run", reg_id, "--json", *price_args(driver, tmp_path))
    assert result.code == 0, result.stderr
    summary = result.json()
    errors = [r.error for r in RunStore(ws / "runs").records(status="infra_error")]
    assert summary["planned"] == 24 and summary["completed"] == 24, (summary, errors)
    assert summary["failed"] == 0 and summary["remaining"] == 0
    assert fake.rate_limited > 0  # 429s happened and were retried

    records = RunStore(ws / "runs").records(registration_id=reg_id)
    assert len(records) == 24 and {r.status for r in records} == {"ok"}
    # every 429 the fake sent was retried, and each retry is on exactly one record
    assert sum(r.retries or 0 for r in records) == fake.rate_limited
    assert all(r.retries is not None for r in records)
    model = MODELS[driver]
    for r in records:
        assert r.driver == driver and r.evidence_class == "api" and not r.batch
        assert r.model_requested == model and r.model_returned == model + "-20991231"
        assert r.tokens.input and r.tokens.output is not None and r.cost_usd
        assert r.latency_ms is not None
        assert r.funnel.surfaced is True  # every tool loaded (no tool search)
    flags = Counter(r.terminal_flag for r in records)
    assert flags["completion_cap"] > 0  # cut responses recorded as cut at the cap
    cut = next(r for r in records if r.terminal_flag == "completion_cap")
    assert [e.kind for e in cut.trace][:1] == ["cut"]
    called = [r for r in records if r.calls]
    assert called and all(r.trace[0].kind == "tool_call" for r in called)
    spent = sum(r.cost_usd for r in records)  # the summary rounds to micro-dollars
    assert summary["spend_usd"] == pytest.approx(spent, rel=1e-6, abs=5e-7)
    assert_no_key_anywhere(ws, result.stdout, result.stderr)


@pytest.mark.parametrize("driver", API_DRIVERS)
def test_infra_errors_are_recorded_redacted_and_retried_next_run(
    ws: Path, cli: Any, fake: FakeProviders, driver: str, tmp_path: Path
) -> None:
    reg_id = register(cli, ws, driver)
    fake.rate_limit_every = 0
    fake.script(ROUTE[driver], *[server_error(ROUTE[driver]) for _ in range(8)])
    prices = price_args(driver, tmp_path)
    first = cli("-w", ws, "run", reg_id, "--concurrency", "1", "--json", *prices)
    assert first.code == 0, first.stderr
    assert first.json()["failed"] == 2 and first.json()["remaining"] == 2
    failed = RunStore(ws / "runs").records(registration_id=reg_id, status="infra_error")
    assert len(failed) == 2
    for record in failed:
        assert "after 4 attempts" in record.error and "[REDACTED]" in record.error
        assert record.success is None and record.trace[-1].kind == "error"
    second = cli("-w", ws, "run", reg_id, "--json", *prices)
    assert second.json()["completed"] == 2 and second.json()["remaining"] == 0
    assert_no_key_anywhere(ws, first.stdout, first.stderr, second.stdout, second.stderr)


def test_dry_run_sends_and_writes_nothing(ws: Path, cli: Any, fake: FakeProviders) -> None:
    reg_id = register(cli, ws, "openai")
    before = tree_digest(ws)
    result = cli("-w", ws, "run", reg_id, "--dry-run", "--json")
    assert result.code == 0, result.stderr
    data = result.json()
    assert tree_digest(ws) == before and not fake.seen
    assert data["units_to_run"] == 24 and data["requests"] == {"min": 24, "max": 24 * 6}
    # per unit: input <= 2 x 8000, output <= min(8000, 5 x 256) + 256, at $0.25 / $2 per M
    assert data["per_unit_max"]["input_tokens"] == 16000
    assert data["per_unit_max"]["output_tokens"] == 1536
    assert data["spend_upper_bound_usd"] == pytest.approx(24 * (16000 * 0.25 + 1536 * 2) / 1e6)
    assert data["price_table"]["origin"] == "packaged" and data["spend_cap_usd"] == 5
    # a multi-turn registration is refused by --dry-run --batch as by run --batch (issue 16)
    refused = cli("-w", ws, "run", reg_id, "--dry-run", "--batch", "--json")
    assert refused.code == 2 and "single-turn" in refused.json()["message"]
    single = register(cli, ws, "openai", turns=1, reg_id="podcast-openai-single")
    sync = cli("-w", ws, "run", single, "--dry-run", "--json").json()
    batch = cli("-w", ws, "run", single, "--dry-run", "--batch", "--json").json()
    assert batch["spend_upper_bound_usd"] == pytest.approx(sync["spend_upper_bound_usd"] / 2)
    human = cli("-w", ws, "run", reg_id, "--dry-run")
    assert "spend upper bound" in human.stdout and "nothing sent" in human.stdout


def test_dry_run_with_an_unpriced_model_and_a_price_file(
    ws: Path, cli: Any, fake: FakeProviders, tmp_path: Path
) -> None:
    draft = DRAFT.format(
        id="sonnet55", driver="anthropic", model="claude-sonnet-5-5", turns=1, host_extra=""
    )
    (ws / "drafts" / "s.yaml").write_text(draft)
    assert cli("-w", ws, "register", ws / "drafts" / "s.yaml").code == 0
    unknown = cli("-w", ws, "run", "sonnet55", "--dry-run", "--json").json()
    assert (
        unknown["spend_upper_bound_usd"] is None and "not in the price table" in unknown["notes"][0]
    )
    prices = tmp_path / "prices.yaml"
    prices.write_text(
        "version: team-2026-12\ndate: '2026-12-01'\nproviders:\n  anthropic:\n"
        "    batch_discount: 0.5\n    models:\n"
        "      claude-sonnet-5-5: {input: 3, output: 15}\n"
    )
    known = cli("-w", ws, "run", "sonnet55", "--dry-run", "--prices", prices, "--json").json()
    assert known["price_table"]["version"] == "team-2026-12"
    assert known["spend_upper_bound_usd"] == pytest.approx(24 * (8000 * 3 + 256 * 15) / 1e6)
    # a spend cap on an unpriced model cannot be enforced: refused, nothing written
    before = tree_digest(ws)
    refused = cli("-w", ws, "run", "sonnet55", "--json")
    assert refused.code == 2 and "no price" in refused.json()["message"]
    assert tree_digest(ws) == before and not fake.seen
    run = cli("-w", ws, "run", "sonnet55", "--prices", prices, "--json")
    assert run.code == 0 and run.json()["completed"] == 24
    assert all(r.cost_usd for r in RunStore(ws / "runs").records(registration_id="sonnet55"))


@pytest.mark.parametrize("driver", ["anthropic", "openai"])
def test_batch_run_records_the_batch_path(
    ws: Path, cli: Any, fake: FakeProviders, driver: str
) -> None:
    reg_id = register(cli, ws, driver, turns=1)
    result = cli("-w", ws, "run", reg_id, "--batch", "--json")
    assert result.code == 0, result.stderr
    data = result.json()
    assert data["completed"] == 24 and data["remaining"] == 0
    assert len(data["batch"]["submitted"]) == 1 and data["batch"]["primed"] == 24
    records = RunStore(ws / "runs").records(registration_id=reg_id)
    assert len(records) == 24 and all(r.batch for r in records)
    assert all(r.latency_ms is None and r.cost_usd for r in records)
    assert not fake.model_bodies(driver)  # nothing went through the synchronous path
    (stored,) = BatchStore(ws / "runs").batches(provider=driver)
    assert stored.state == "collected"
    again = cli("-w", ws, "run", reg_id, "--batch", "--json").json()
    assert again["completed"] == 0 and again["batch"]["submitted"] == []
    assert_no_key_anywhere(ws, result.stdout, result.stderr)


def test_batch_interrupted_then_resumed_by_id(
    ws: Path, cli: Any, fake: FakeProviders, monkeypatch: pytest.MonkeyPatch
) -> None:
    reg_id = register(cli, ws, "anthropic", turns=1)
    fake.batch_polls = 4
    monkeypatch.setenv("PREREG_BATCH_TIMEOUT_S", "0.001")
    first = cli("-w", ws, "run", reg_id, "--batch", "--json")
    assert first.code == 1 and "run `prereg run --batch` again" in first.stderr
    (pending,) = BatchStore(ws / "runs").batches(provider="anthropic", state="submitted")
    monkeypatch.setenv("PREREG_BATCH_TIMEOUT_S", "20")
    second = cli("-w", ws, "run", reg_id, "--batch", "--json")
    assert second.code == 0, second.stderr
    assert second.json()["batch"]["resumed"] == [pending.batch_id]
    assert second.json()["completed"] == 24
    assert len(fake.anthropic_batches) == 1  # never resubmitted


def test_batch_refuses_multi_turn_registrations_and_missing_keys(
    ws: Path, cli: Any, fake: FakeProviders, monkeypatch: pytest.MonkeyPatch
) -> None:
    reg_id = register(cli, ws, "openai", turns=6)
    refused = cli("-w", ws, "run", reg_id, "--batch", "--json")
    assert refused.code == 2 and "turn_limit" in refused.json()["message"]
    monkeypatch.delenv("OPENAI_API_KEY")
    before = tree_digest(ws)
    missing = cli("-w", ws, "run", reg_id, "--json")
    assert missing.code == 2 and "OPENAI_API_KEY" in missing.json()["message"]
    assert tree_digest(ws) == before and not fake.seen


def test_a_batch_registration_runs_only_through_a_batch(
    ws: Path, cli: Any, fake: FakeProviders
) -> None:
    reg_id = register(cli, ws, "anthropic", turns=1, host_extra=", batch: true")
    before = tree_digest(ws)
    sync = cli("-w", ws, "run", reg_id, "--json")
    assert sync.code == 2 and "--batch" in sync.json()["message"]
    assert tree_digest(ws) == before and not fake.seen
    batched = cli("-w", ws, "run", reg_id, "--batch", "--json")
    assert batched.code == 0 and batched.json()["completed"] == 24


def test_tool_search_registration_defers_tools(ws: Path, cli: Any, fake: FakeProviders) -> None:
    reg_id = register(cli, ws, "openai", host_extra=", tool_search: true")
    assert cli("-w", ws, "run", reg_id, "--max-units", "2", "--json").code == 0
    body = fake.model_bodies("openai")[0]
    assert body["tools"][-1] == {"type": "tool_search"}
    records = RunStore(ws / "runs").records(registration_id=reg_id)
    # the host did not search: nothing was surfaced, which is measured (False, not null)
    assert all(r.funnel.surfaced is False for r in records)


KILL_SCRIPT = """
import sys
from prereg.cli import main
main(["-w", sys.argv[1], "run", sys.argv[2], "--concurrency", "3", "--json", *sys.argv[3:]])
"""


def ok_rows(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return int(
                conn.execute("SELECT COUNT(*) FROM records WHERE status = 'ok'").fetchone()[0]
            )
        finally:
            conn.close()
    except sqlite3.OperationalError:
        return 0


@pytest.mark.slow
@pytest.mark.parametrize("driver", ["anthropic", "openai-chat"])
def test_killed_provider_run_resumes_with_one_record_per_unit(
    ws: Path, cli: Any, fake: FakeProviders, driver: str, tmp_path: Path
) -> None:
    reg_id = register(cli, ws, driver)
    prices = price_args(driver, tmp_path)
    fake.latency_s = 0.03
    db = ws / "runs" / "runs.sqlite"
    proc = subprocess.Popen(
        [sys.executable, "-c", KILL_SCRIPT, str(ws), reg_id, *prices],
        env=dict(os.environ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_until(lambda: ok_rows(db) >= 6, "six runs recorded", proc=proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert ok_rows(db) < 24
    fake.latency_s = 0.0
    result = cli("-w", ws, "run", reg_id, "--json", *prices)
    assert result.code == 0, result.stderr
    records = RunStore(ws / "runs").records(registration_id=reg_id, status="ok")
    assert len(records) == 24 and len({r.unit_key for r in records}) == 24
    assert_no_key_anywhere(ws)
