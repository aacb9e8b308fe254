"""Commands that read a registration verify it first (issue 12, item 1).

Each tampering below is one ``verify`` already catches; before, ``run``, ``analyse``,
``export``, ``import``, ``compare`` and ``plan --from-runs`` used the tampered copy
silently. Edits are re-canonicalised, so only the content check can catch them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from prereg.registry.digest import canonical_json

PILOT = "drafts/music-library-pilot.yaml"


def _rewrite_frozen(ws: Path, reg_id: str, change) -> None:  # type: ignore[no-untyped-def]
    path = ws / "registry" / "frozen" / f"{reg_id}.json"
    os.chmod(path, 0o644)
    frozen = json.loads(path.read_bytes())
    change(frozen["document"]["registration"])
    path.write_bytes(canonical_json(frozen) + b"\n")


@pytest.fixture
def ran(ws: Path, cli) -> Path:  # type: ignore[no-untyped-def]
    assert cli("-w", ws, "register", ws / PILOT).code == 0
    assert cli("-w", ws, "run", "music-library-pilot", "--json").code == 0
    return ws


def _alpha(reg: dict) -> None:  # type: ignore[type-arg]
    reg["primary"]["alpha"] = 0.2


def _split(reg: dict) -> None:  # type: ignore[type-arg]
    reg["split"] = "validation"
    reg["design"]["repeats"] = 1


def test_analyse_refuses_an_edited_frozen_copy(ran: Path, cli) -> None:  # type: ignore[no-untyped-def]
    _rewrite_frozen(ran, "music-library-pilot", _alpha)
    result = cli("-w", ran, "analyse", "music-library-pilot", "--json")
    assert result.code == 3, result.stdout
    error = json.loads(result.stdout)
    assert "fails verification" in error["message"]
    assert any("frozen-edited" in d for d in error["details"])
    assert not (ran / "reports" / "music-library-pilot").exists()


def test_run_refuses_an_edited_split_and_writes_no_unit(ws: Path, cli) -> None:  # type: ignore[no-untyped-def]
    assert cli("-w", ws, "register", ws / PILOT).code == 0
    _rewrite_frozen(ws, "music-library-pilot", _split)
    result = cli("-w", ws, "run", "music-library-pilot", "--json")
    assert result.code == 3, result.stdout
    assert not (ws / "runs" / "runs.sqlite").exists()


@pytest.mark.parametrize(
    "command",
    [
        ["export", "music-library-pilot", "--out", "out.jsonl"],
        ["compare", "music-library-pilot", "other"],
        ["plan", "--from-runs", "music-library-pilot"],
    ],
)
def test_other_readers_refuse_too(ran: Path, cli, command: list[str]) -> None:  # type: ignore[no-untyped-def]
    other = ran / "drafts" / "other.yaml"
    other.write_text((ran / PILOT).read_text().replace("id: music-library-pilot", "id: other"))
    assert cli("-w", ran, "register", other).code == 0
    _rewrite_frozen(ran, "music-library-pilot", _alpha)
    args = [a if a != "out.jsonl" else str(ran.parent / "out.jsonl") for a in command]
    result = cli("-w", ran, *args, "--json")
    assert result.code == 3, (command, result.stdout)


def test_import_refuses_records_of_a_tampered_registration(ran: Path, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "records.jsonl"
    assert cli("-w", ran, "export", "music-library-pilot", "--out", out).code == 0
    _rewrite_frozen(ran, "music-library-pilot", _alpha)
    result = cli("-w", ran, "import", out, "--json")
    assert result.code == 3, result.stdout


def test_an_edited_referenced_object_is_refused(ran: Path, cli) -> None:  # type: ignore[no-untyped-def]
    frozen = json.loads((ran / "registry" / "frozen" / "music-library-pilot.json").read_bytes())
    digest = sorted(frozen["document"]["experiment"]["files"].values())[0]
    hexdigest = digest.split(":")[1]
    target = ran / "registry" / "objects" / hexdigest[:2] / hexdigest[2:]
    os.chmod(target, 0o644)
    target.write_bytes(target.read_bytes() + b"\n# edited\n")
    result = cli("-w", ran, "analyse", "music-library-pilot", "--json")
    assert result.code == 3, result.stdout
    assert any("object-edited" in d for d in json.loads(result.stdout)["details"])


def test_an_intact_registration_still_runs_and_analyses(ran: Path, cli) -> None:  # type: ignore[no-untyped-def]
    assert cli("-w", ran, "analyse", "music-library-pilot", "--json").code == 0


@pytest.mark.parametrize("command", [["verify"], ["analyse", "music-library-pilot"]])
def test_a_folder_in_place_of_the_ledger_is_an_integrity_failure(  # type: ignore[no-untyped-def]
    ran: Path, cli, command: list[str]
) -> None:
    ledger = ran / "registry" / "ledger.jsonl"
    ledger.unlink()
    ledger.mkdir()
    result = cli("-w", ran, *command, "--json")
    assert result.code == 3, result.stdout
    assert "ledger" in result.stdout
