"""``run --dry-run --batch`` refuses what ``run --batch`` refuses (issue 16, item 7)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import tree_digest

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
host: {{driver: {driver}{model}}}
budgets: {{completion_cap: 256, episode_tokens: 8000, call_limit: 4, turn_limit: {turns}}}
design: {{repeats: 1, rotations: 1, seed: 3}}
outcome: success
primary: {{test: mcnemar_exact, alpha: 0.05, sides: two-sided}}
"""


@pytest.mark.parametrize(
    ("driver", "model", "turns", "needle"),
    [
        ("openai", ", model: gpt-5-mini", 6, "single-turn"),
        ("local", "", 1, "anthropic or openai host"),
    ],
)
def test_dry_run_batch_refuses_like_run_batch(
    ws: Path,
    cli: Any,
    monkeypatch: pytest.MonkeyPatch,
    driver: str,
    model: str,
    turns: int,
    needle: str,
) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    draft = ws / "drafts" / "batch.yaml"
    draft.write_text(DRAFT.format(id="batchless", driver=driver, model=model, turns=turns))
    registered = cli("-w", ws, "register", draft)
    assert registered.code == 0, registered.stderr
    before = tree_digest(ws)
    real = cli("-w", ws, "run", "batchless", "--batch", "--json")
    dry = cli("-w", ws, "run", "batchless", "--dry-run", "--batch", "--json")
    assert real.code == dry.code == 2, (real.stdout, dry.stdout)
    message = json.loads(real.stdout)["message"]
    assert needle in message and json.loads(dry.stdout)["message"] == message
    assert tree_digest(ws) == before  # nothing written by either
    assert cli("-w", ws, "run", "batchless", "--dry-run", "--json").code == 0  # no --batch
