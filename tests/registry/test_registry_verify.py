"""``prereg verify`` detects every kind of tampering, naming the entry it concerns."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

PILOT = "drafts/music-library-pilot.yaml"
CONFIRM = "drafts/music-library-confirmatory.yaml"


@pytest.fixture
def three(ws: Path, cli) -> Path:
    """A registry with three registrations (ledger lines 1-3)."""
    assert cli("-w", ws, "register", ws / PILOT).code == 0
    second = ws / "drafts" / "second.yaml"
    second.write_text(
        (ws / PILOT).read_text().replace("id: music-library-pilot", "id: second-pilot")
    )
    assert cli("-w", ws, "register", second).code == 0
    assert cli("-w", ws, "register", ws / CONFIRM).code == 0
    return ws


def _writable(path: Path) -> None:
    os.chmod(path, 0o644)


def _ledger(ws: Path) -> Path:
    return ws / "registry" / "ledger.jsonl"


def _problems(cli, ws: Path) -> tuple[int, list[dict]]:
    result = cli("-w", ws, "verify", "--json")
    data = json.loads(result.stdout)
    return result.code, data["problems"]


def test_intact_registry_verifies(three: Path, cli) -> None:
    result = cli("-w", three, "verify", "--json")
    assert result.code == 0, result.stdout
    data = json.loads(result.stdout)
    assert data["ok"] is True and data["registrations"] == 3 and data["problems"] == []
    assert cli("-w", three, "verify").code == 0


def test_edited_frozen_copy(three: Path, cli) -> None:
    frozen = three / "registry" / "frozen" / "second-pilot.json"
    _writable(frozen)
    frozen.write_text(frozen.read_text().replace("raises task success", "lowers task success"))
    code, problems = _problems(cli, three)
    assert code == 3
    assert any(p["kind"] == "frozen-edited" and p["entry"] == "second-pilot" for p in problems)


def test_deleted_frozen_copy(three: Path, cli) -> None:
    (three / "registry" / "frozen" / "second-pilot.json").unlink()
    code, problems = _problems(cli, three)
    assert code == 3
    assert any(p["kind"] == "frozen-deleted" and p["entry"] == "second-pilot" for p in problems)


@pytest.mark.parametrize("line_index", [0, 1, 2])
def test_edited_ledger_line(three: Path, cli, line_index: int) -> None:
    path = _ledger(three)
    lines = path.read_text().splitlines()
    event = json.loads(lines[line_index])
    event["time"] = "2020-01-01T00:00:00.000000Z"  # a subtle edit: back-dating
    lines[line_index] = json.dumps(event, separators=(",", ":"), sort_keys=True)
    path.write_text("\n".join(lines) + "\n")
    code, problems = _problems(cli, three)
    assert code == 3
    assert any(
        p["kind"] == "ledger-edited" and p["entry"].startswith(f"ledger line {line_index + 1} ")
        for p in problems
    )
    if line_index < 2:  # the next line's hash no longer matches either
        assert any(
            p["kind"] == "ledger-chain" and p["entry"].startswith(f"ledger line {line_index + 2} ")
            for p in problems
        )


def test_removed_ledger_line(three: Path, cli) -> None:
    path = _ledger(three)
    lines = path.read_text().splitlines()
    del lines[1]
    path.write_text("\n".join(lines) + "\n")
    code, problems = _problems(cli, three)
    assert code == 3
    kinds = {p["kind"] for p in problems}
    assert "ledger-chain" in kinds and "ledger-sequence" in kinds
    assert any(p["kind"] == "ledger-truncated" and p["entry"] == "second-pilot" for p in problems)


def test_reordered_ledger_lines(three: Path, cli) -> None:
    path = _ledger(three)
    lines = path.read_text().splitlines()
    lines[1], lines[2] = lines[2], lines[1]
    path.write_text("\n".join(lines) + "\n")
    code, problems = _problems(cli, three)
    assert code == 3
    assert any(p["kind"] == "ledger-chain" for p in problems)


def test_inserted_ledger_line(three: Path, cli) -> None:
    path = _ledger(three)
    lines = path.read_text().splitlines()
    fake = json.loads(lines[0])
    fake.update(seq=2, id="forged", prev=fake["prev"])
    lines.insert(1, json.dumps(fake))
    path.write_text("\n".join(lines) + "\n")
    code, problems = _problems(cli, three)
    assert code == 3
    assert any("forged" in p["entry"] for p in problems)


def test_truncated_ledger(three: Path, cli) -> None:
    path = _ledger(three)
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:2]) + "\n")  # the chain of what is left is intact
    code, problems = _problems(cli, three)
    assert code == 3
    assert any(
        p["kind"] == "ledger-truncated" and p["entry"] == "music-library-confirmatory"
        for p in problems
    )


def test_malformed_ledger_line(three: Path, cli) -> None:
    path = _ledger(three)
    path.write_text(path.read_text().replace('"seq":2', '"seq":2,,', 1))
    code, problems = _problems(cli, three)
    assert code == 3
    assert any(p["kind"] == "ledger-malformed" for p in problems)


def test_edited_object(three: Path, cli) -> None:
    objects = sorted((three / "registry" / "objects").rglob("*"))
    target = next(p for p in objects if p.is_file())
    _writable(target)
    target.write_bytes(target.read_bytes() + b" ")
    code, problems = _problems(cli, three)
    assert code == 3
    digest = "sha256:" + target.parent.name + target.name
    assert any(p["kind"] == "object-edited" and p["entry"] == digest for p in problems)


def test_deleted_object(three: Path, cli) -> None:
    target = next(p for p in sorted((three / "registry" / "objects").rglob("*")) if p.is_file())
    target.unlink()
    code, problems = _problems(cli, three)
    assert code == 3
    assert any(p["kind"] == "object-missing" for p in problems)


def test_workspace_change_is_information_not_a_problem(three: Path, cli) -> None:
    corpus = next(
        p
        for p in sorted((three / "experiments" / "music-library").rglob("*.yaml"))
        if p.name != "experiment.yaml"
    )
    corpus.write_text(corpus.read_text() + "\n# a later edit\n")
    result = cli("-w", three, "verify", "--json")
    assert result.code == 0
    info = json.loads(result.stdout)["info"]
    assert any(i["kind"] == "workspace-file-changed" and corpus.name in i["message"] for i in info)


def test_claim_line_edit_detected(three: Path, cli) -> None:
    from prereg.registry.registrations import Registry

    registry = Registry(three / "registry")
    registry.claim_locked_split(registry.get("music-library-confirmatory"))
    assert cli("-w", three, "verify").code == 0
    path = _ledger(three)
    lines = path.read_text().splitlines()
    lines[-1] = lines[-1].replace('"split":"test"', '"split":"dev"')
    path.write_text("\n".join(lines) + "\n")
    code, problems = _problems(cli, three)
    assert code == 3
    assert any(p["kind"] == "ledger-edited" for p in problems)
