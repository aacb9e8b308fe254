"""Acceptance (issue 13): one registration with an Anthropic arm and an OpenAI arm runs and
analyses through the real SDK clients against the local fake; each record carries its own
driver, model and configuration, and each arm's system prompt reaches its provider."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from prereg.runners.store.sqlite import RunStore
from tests.providers.fakes import Brain, FakeProviders, provider_env

DRAFT = """\
id: two-providers
title: The same surface on a Claude host and a ChatGPT host
hypothesis: The two hosts differ in task success on the focal surface.
falsification: McNemar's exact test does not reject at 0.05.
experiment: podcast-selection
kind: exploratory
split: dev
system_prompt: You are a careful assistant.
arms:
  - id: claude
    surface: focal
  - id: chatgpt
    surface: focal
    host: {driver: openai, model: gpt-5-mini}
    budgets: {completion_cap: 512}
    system_prompt: Use the tools you are given.
host: {driver: anthropic, model: claude-haiku-4-5}
budgets: {completion_cap: 256, episode_tokens: 8000, call_limit: 4, turn_limit: 6,
          spend_usd: 5}
design: {repeats: 1, rotations: 2, seed: 3}
outcome: success
primary: {test: mcnemar_exact, alpha: 0.05, sides: two-sided}
"""


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProviders]:
    with FakeProviders(Brain(cut_every=4), rate_limit_every=0) as server:
        provider_env(monkeypatch, server)
        yield server


def test_an_anthropic_arm_and_an_openai_arm_in_one_registration(
    ws: Path, cli: Any, fake: FakeProviders
) -> None:
    draft = ws / "drafts" / "two.yaml"
    draft.write_text(DRAFT)
    assert cli("-w", ws, "register", draft).code == 0
    dry = cli("-w", ws, "run", "two-providers", "--dry-run", "--json").json()
    assert dry["arms"]["claude"]["driver"] == "anthropic"
    assert dry["arms"]["chatgpt"]["model"] == "gpt-5-mini"
    assert (
        dry["arms"]["chatgpt"]["per_unit_max"]["output_tokens"]
        > (dry["arms"]["claude"]["per_unit_max"]["output_tokens"])
    )
    result = cli("-w", ws, "run", "two-providers", "--json")
    assert result.code == 0, result.stderr
    summary = result.json()
    assert summary["driver"] == "anthropic+openai" and summary["evidence_class"] == "api"
    assert summary["remaining"] == 0

    records = RunStore(ws / "runs").records(registration_id="two-providers")
    by_arm = {arm: [r for r in records if r.arm == arm] for arm in ("claude", "chatgpt")}
    assert all(by_arm.values())
    for arm, driver, model, cap in (
        ("claude", "anthropic", "claude-haiku-4-5", 256),
        ("chatgpt", "openai", "gpt-5-mini", 512),
    ):
        for record in by_arm[arm]:
            assert record.driver == driver and record.model_requested == model
            assert record.config is not None and record.config.driver == driver
            assert record.config.budgets.completion_cap == cap
    digests = {r.config.digest for r in records if r.config is not None}
    assert len(digests) == 2

    anthropic = fake.model_bodies("anthropic")
    openai = fake.model_bodies("openai")
    assert anthropic and openai
    assert {b["system"] for b in anthropic} == {"You are a careful assistant."}
    assert {b["instructions"] for b in openai} == {"Use the tools you are given."}
    assert {b["max_tokens"] for b in anthropic} == {256}
    assert {b["max_output_tokens"] for b in openai} == {512}

    report = cli("-w", ws, "analyse", "two-providers", "--json")
    assert report.code == 0, report.stderr
    arms = {a["id"]: a for a in report.json()["arms"]}
    assert arms["claude"]["configuration"]["driver"] == "anthropic"
    assert arms["chatgpt"]["configuration"]["model"] == "gpt-5-mini"
    markdown = next((ws / "reports").rglob("report.md")).read_text()
    assert "Configurations" in markdown and "gpt-5-mini" in markdown
