"""SDK judges through the real anthropic / openai clients against the local fakes."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from prereg.runners.judging.verdicts import VerdictStore
from tests.judging.helpers import RUBRIC, registration, write
from tests.providers.fake_chat import ChatBrain, FakeChat, chat_text
from tests.providers.fakes import (
    Reply,
    anthropic_text,
    anthropic_usage,
    openai_text,
    provider_env,
)
from tests.waiting import wait_until

VERDICT = {"met": True, "need": "knowledge", "evidence": "it said so"}


class JudgeBrain(ChatBrain):
    """Answers every judge request with a well-formed verdict (a JSON object)."""

    def anthropic(self, body: dict[str, Any]) -> dict[str, Any]:
        model = str(body.get("model")) + self.suffix
        return anthropic_text(json.dumps(VERDICT), model=model, usage=anthropic_usage(400, 20))

    def openai(self, body: dict[str, Any]) -> dict[str, Any]:
        if "messages" in body:  # the chat-completions route
            return self.chat(body)
        return openai_text(json.dumps(VERDICT), model=str(body.get("model")) + self.suffix)

    def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        return chat_text(json.dumps(VERDICT), model=str(body.get("model")) + self.suffix)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeChat]:
    with FakeChat(JudgeBrain()) as server:
        provider_env(monkeypatch, server)
        yield server


def _judges(chat_url: str) -> list[dict[str, Any]]:
    common = {"rubric": RUBRIC, "rubric_version": "v1"}
    return [
        {
            "id": "done-claude",
            "outcome": "completed",
            "driver": "anthropic",
            "model": "claude-haiku-4-5",
            **common,
        },
        {
            "id": "done-chat",
            "outcome": "completed",
            "driver": "openai-chat",
            "model": "qwen-judge",
            "params": {"base_url": chat_url},
            **common,
        },
        {
            "id": "native-gpt",
            "outcome": "native_self_service",
            "driver": "openai",
            "model": "gpt-5-mini",
            **common,
        },
    ]


def _setup(cli, ws: Path, fake: FakeChat, repeats: int = 1) -> str:
    doc = registration("sdk", judge=_judges(fake.openai_url), repeats=repeats)
    assert cli("--workspace", ws, "register", write(ws, doc)).code == 0
    result = cli("--workspace", ws, "run", "sdk", "--no-progress", "--json")
    assert result.code == 0, result.stderr
    return "sdk"


def _verdicts(ws: Path) -> list:
    conn = sqlite3.connect(ws / "runs" / "verdicts.sqlite")
    digest = conn.execute("SELECT registration_digest FROM verdicts LIMIT 1").fetchone()[0]
    conn.close()
    with VerdictStore(ws / "runs") as store:
        return store.verdicts(digest)


def test_sdk_judges_record_verdicts(cli, ws: Path, fake: FakeChat) -> None:
    _setup(cli, ws, fake)
    dry = cli("--workspace", ws, "judge", "sdk", "--dry-run", "--json")
    assert dry.code == 0, dry.stderr
    needed = dry.json()["verdicts_needed"]
    assert fake.model_requests == 0
    result = cli("--workspace", ws, "judge", "sdk", "--json")
    assert result.code == 0, result.stderr
    assert result.json()["judged"] == needed > 0, result.json()["errors"]
    verdicts = _verdicts(ws)
    assert {v.judge for v in verdicts} == {"done-claude", "done-chat", "native-gpt"}
    for v in verdicts:
        assert v.parse == "ok" and v.raw_response == json.dumps(VERDICT)
        assert v.model_returned == f"{v.model_requested}-20991231"  # as the provider said
        assert v.prompt.count("\n<<<RUN\n") == 1 and v.prompt.endswith("\nRUN>>>\n")
    claude = [v for v in verdicts if v.judge == "done-claude"]
    assert all(v.cost_usd is not None and v.cost_usd > 0 for v in claude)
    # the native rule is applied after the judge: a knowledge need the judge met stays met
    assert all(v.met is True for v in verdicts if v.judge == "native-gpt")
    # the prompt the provider received is the stored one
    bodies = fake.model_bodies("anthropic")
    assert any(
        v.prompt in json.dumps(b["messages"][0]["content"])
        or json.dumps(v.prompt)[1:-1] in json.dumps(b)
        for b in bodies
        for v in claude
    )


def test_malformed_answer_recorded_as_unparseable(cli, ws: Path, fake: FakeChat) -> None:
    _setup(cli, ws, fake)
    fake.script("anthropic", Reply(200, anthropic_text("Yes, it was completed.")))
    result = cli("--workspace", ws, "judge", "sdk", "--concurrency", "1", "--json")
    assert result.code == 0, result.stderr
    bad = [v for v in _verdicts(ws) if v.parse == "unparseable"]
    assert len(bad) == 1 and bad[0].met is None and bad[0].judge == "done-claude"
    assert bad[0].raw_response == "Yes, it was completed."
    assert result.json()["unparseable"] == 1
    # it is recorded, not retried: a second judge run asks nothing
    before = fake.model_requests
    assert cli("--workspace", ws, "judge", "sdk", "--json").json()["judged"] == 0
    assert fake.model_requests == before


KILL_SCRIPT = """
import sys
from prereg.cli import main
main(["-w", sys.argv[1], "judge", sys.argv[2], "--concurrency", "2", "--json"])
"""


def _rows(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return int(conn.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0])
        finally:
            conn.close()
    except sqlite3.OperationalError:
        return 0


def test_killed_judge_resumes_without_double_verdicts(cli, ws: Path, fake: FakeChat) -> None:
    _setup(cli, ws, fake, repeats=3)
    needed = cli("--workspace", ws, "judge", "sdk", "--dry-run", "--json").json()["verdicts_needed"]
    fake.latency_s = 0.05
    db = ws / "runs" / "verdicts.sqlite"
    proc = subprocess.Popen(
        [sys.executable, "-c", KILL_SCRIPT, str(ws), "sdk"],
        env=dict(os.environ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_until(lambda: _rows(db) >= 3, "three verdicts written", proc=proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert _rows(db) < needed
    fake.latency_s = 0.0
    result = cli("--workspace", ws, "judge", "sdk", "--json")
    assert result.code == 0, result.stderr
    verdicts = _verdicts(ws)
    assert len(verdicts) == needed
    assert len({(v.record_id, v.judge_digest) for v in verdicts}) == needed


def test_missing_key_refused_before_anything(
    cli, ws: Path, fake: FakeChat, monkeypatch: pytest.MonkeyPatch
) -> None:
    _setup(cli, ws, fake)
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    result = cli("--workspace", ws, "judge", "sdk")
    assert result.code == 2 and "ANTHROPIC_API_KEY" in result.stderr
    assert fake.model_requests == 0
    assert not (ws / "runs" / "verdicts.sqlite").exists()
