"""``run --dry-run --batch`` refuses what ``run --batch`` refuses (issue 16, item 7)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import tree_digest
from tests.providers.test_prov_e2e import DRAFT  # the provider draft, any host


@pytest.mark.parametrize(
    ("driver", "model", "turns", "needle"),
    [
        ("openai", "gpt-5-mini", 6, "single-turn"),
        ("local", "local-default", 1, "anthropic or openai host"),
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
    draft.write_text(
        DRAFT.format(id="batchless", driver=driver, model=model, turns=turns, host_extra="")
    )
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
