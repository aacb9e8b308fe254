"""The ledger's append-only tables under the one rule (issue 40, item 1): a claim's and an
anchor's queried fields (a claim's id, experiment and split; an anchor's id) must be what
the registration line of their digest states.

The attacker here rewrites the ledger from the line on and recomputes every later line's
``prev`` and every mirror (the documented limit of a registry an attacker can rewrite):
the chain and the mirrors are consistent again, so only the rule can tell. A claim whose
experiment names another experiment no longer answers ``claim_of`` for its own, and an
anchor filed under another id pins a chain under the wrong name.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from prereg.registry.digest import canonical_json
from prereg.registry.ledger import GENESIS, LedgerLine
from tests.integrity.tamper_tools import make_workspace, prereg

CONFIRM = "drafts/music-library-confirmatory.yaml"
CONFIRM_ID = "music-library-confirmatory"


@pytest.fixture(scope="module")
def _claimed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The pilot registered (not run) and the confirmatory registration run for two units:
    its claim, then its anchor, are the ledger's last lines."""
    ws = make_workspace(tmp_path_factory.mktemp("claimed") / "ws", run=False)
    assert prereg("-w", ws, "register", ws / CONFIRM)[0] == 0
    assert prereg("-w", ws, "run", CONFIRM_ID, "--max-units", "2", "--json")[0] == 0
    return ws


def _rewrite(ws: Path, event: str, change: Callable[[dict[str, Any]], None]) -> None:
    """Change the first ledger line of ``event`` and re-chain the ledger after it, every
    mirror rewritten to match (claims and anchors: the line; frozen copies: ledger_line)."""
    registry = ws / "registry"
    ledger = registry / "ledger.jsonl"
    raw = ledger.read_bytes().splitlines()
    lines = [json.loads(r) for r in raw]
    target = next(i for i, e in enumerate(lines) if e["event"] == event)
    change(lines[target])
    prev = GENESIS if target == 0 else LedgerLine(0, raw[target - 1], None).hash
    for i in range(target, len(lines)):
        lines[i]["prev"] = prev
        raw[i] = canonical_json(lines[i])
        prev = LedgerLine(0, raw[i], None).hash
        folder = {"locked-split-claim": "claims", "registration": "frozen"}.get(
            lines[i]["event"], "anchors"
        )
        if folder == "frozen":
            mirror = registry / "frozen" / f"{lines[i]['id']}.json"
            frozen = json.loads(mirror.read_bytes())
            frozen["ledger_line"] = raw[i].decode()
            data = canonical_json(frozen) + b"\n"
        else:
            mirror = registry / folder / f"{lines[i]['seq']:06d}.json"
            data = raw[i]
        mirror.chmod(0o644)
        mirror.write_bytes(data)
    ledger.chmod(0o644)
    ledger.write_bytes(b"".join(r + b"\n" for r in raw))


def _set(**fields: Any) -> Callable[[dict[str, Any]], None]:
    return lambda event: event.update(fields)


CASES = [
    ("locked-split-claim", "experiment", _set(experiment="podcast-selection"), "claim"),
    ("locked-split-claim", "id", _set(id="music-library-pilot"), "claim"),
    ("locked-split-claim", "split", _set(split="dev"), "claim"),
    ("runs-anchor", "id", _set(id="music-library-pilot"), "anchor"),
]


@pytest.mark.parametrize(("event", "field", "change", "noun"), CASES)
def test_a_claim_or_anchor_field_edited_is_named(
    cli, _claimed: Path, tmp_path: Path, event: str, field: str, change: Any, noun: str
) -> None:
    ws = tmp_path / "ws"
    shutil.copytree(_claimed, ws)
    _rewrite(ws, event, change)
    checked = cli("-w", ws, "verify", "--json")
    assert checked.code == 3, checked.stdout
    problems = checked.json()["problems"]
    found = [p for p in problems if p["kind"] == f"{noun}-record"]
    assert found, problems
    table = "claims" if noun == "claim" else "anchors"
    assert f"field(s) {field} " in found[0]["message"]
    assert f"(table {table})" in found[0]["message"]
    analysed = cli("-w", ws, "analyse", CONFIRM_ID, "--allow-incomplete")
    assert analysed.code == 3
    said = " ".join(analysed.stderr.split())
    assert f"{noun}-record" in said and f"field(s) {field} " in said, said
