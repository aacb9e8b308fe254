"""A stopping rule that could never stop on the split is refused at register (issue 14)."""

from __future__ import annotations

import json
from pathlib import Path

PILOT = "drafts/music-library-pilot.yaml"
ANCHOR = "multiplicity: {method: bh, q: 0.10, family: per-intent}"


def _with_stopping(ws: Path, min_prompts: int) -> Path:
    text = (ws / PILOT).read_text()
    assert ANCHOR in text
    stopping = f"stopping: {{rule: beta-mixture, threshold: 20, min_prompts: {min_prompts}}}"
    path = ws / "drafts" / "stopping.yaml"
    path.write_text(text.replace(ANCHOR, f"{ANCHOR}\n{stopping}", 1))
    return path


def test_min_prompts_beyond_the_split_exits_2_naming_the_field(ws: Path, cli) -> None:
    result = cli("-w", ws, "register", _with_stopping(ws, 100_000), "--json")
    assert result.code == 2, (result.stdout, result.stderr)
    assert "stopping.min_prompts" in result.stderr and "could never stop" in result.stderr
    assert "stopping.yaml:" in result.stderr
    assert json.loads(result.stdout)["exit_code"] == 2


def test_min_prompts_within_the_split_registers(ws: Path, cli) -> None:
    result = cli("-w", ws, "register", _with_stopping(ws, 1), "--json")
    assert result.code == 0, (result.stdout, result.stderr)
