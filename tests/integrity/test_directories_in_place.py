"""A folder in place of a file the integrity chain rests on (issue 12, item 8).

A registry object, a frozen copy, a claim or anchor mirror, the ledger or the run store
replaced by a folder: every command that reads it exits 3 (tampering or damage) naming
the entry, writes nothing, and never shows a traceback.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import tree_digest
from tests.integrity.tamper_tools import PILOT_ID, copy_workspace, make_workspace, prereg

CONFIRMATORY = "drafts/music-library-confirmatory.yaml"


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The pilot with 12 units run (anchored), a confirmatory registration that claimed the
    locked split, and the pilot's export beside the workspace."""
    root = make_workspace(tmp_path_factory.mktemp("dirs") / "ws", max_units=12)
    assert prereg("-w", root, "register", root / CONFIRMATORY)[0] == 0
    run = prereg("-w", root, "run", "music-library-confirmatory", "--max-units", "1")
    assert run[0] == 0
    assert list((root / "registry" / "claims").glob("*.json"))
    export = root.parent / "export.jsonl"
    assert prereg("-w", root, "export", PILOT_ID, "--out", export)[0] == 0
    return root


def _an_object(ws: Path) -> Path:
    frozen = json.loads((ws / "registry" / "frozen" / f"{PILOT_ID}.json").read_bytes())
    digest = sorted(frozen["document"]["experiment"]["files"].values())[0]
    hexdigest = digest.removeprefix("sha256:")
    return ws / "registry" / "objects" / hexdigest[:2] / hexdigest[2:]


def _first(folder: Path) -> Path:
    return sorted(folder.glob("*.json"))[0]


TARGETS: dict[str, Callable[[Path], Path]] = {
    "registry object": _an_object,
    "frozen copy": lambda ws: ws / "registry" / "frozen" / f"{PILOT_ID}.json",
    "claim mirror": lambda ws: _first(ws / "registry" / "claims"),
    "anchor mirror": lambda ws: _first(ws / "registry" / "anchors"),
    "ledger": lambda ws: ws / "registry" / "ledger.jsonl",
    "run store": lambda ws: ws / "runs" / "runs.sqlite",
}

COMMANDS: dict[str, Callable[[Path], list[str]]] = {
    "verify": lambda ws: ["verify", "--json"],
    "analyse": lambda ws: ["analyse", PILOT_ID, "--allow-incomplete", "--json"],
    "run": lambda ws: ["run", PILOT_ID, "--max-units", "2", "--json"],
    "export": lambda ws: ["export", PILOT_ID, "--out", str(ws.parent / "out.jsonl"), "--json"],
    "import": lambda ws: ["import", str(ws.parent / "export.jsonl"), "--json"],
}


def _state(ws: Path, replaced: Path) -> dict[str, dict[str, str]]:
    """Every file of the registry, the run store's folder and the reports, bar the one
    replaced (a folder now)."""
    return {
        name: {k: v for k, v in tree_digest(ws / name).items() if not (ws / name / k) == replaced}
        for name in ("registry", "runs", "reports")
    }


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("target", list(TARGETS))
def test_a_folder_in_place_of_a_file_is_exit_3_naming_it(  # type: ignore[no-untyped-def]
    template: Path, tmp_path: Path, cli, target: str, command: str
) -> None:
    ws = copy_workspace(template, tmp_path / "ws")
    shutil.copy(template.parent / "export.jsonl", tmp_path / "export.jsonl")
    path = TARGETS[target](ws)
    path.chmod(0o644)
    path.unlink()
    path.mkdir()
    (path / "inside").write_text("not the file\n")  # a folder with content, not an empty one
    before = _state(ws, path)

    result = cli("-w", ws, *COMMANDS[command](ws))

    assert result.code == 3, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    said = result.stdout + result.stderr
    assert path.name in said  # the entry is named, and why: not "missing"
    assert any(why in said for why in ("not a file", "cannot be read", "is a folder")), said
    assert _state(ws, path) == before  # nothing written
    assert not (ws.parent / "out.jsonl").exists()


def test_the_store_path_is_never_looked_into(template: Path, tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """A folder named runs.sqlite holding a database of its own is still refused: the
    store is the file ``runs/runs.sqlite``, not ``runs/runs.sqlite/runs.sqlite``."""
    ws = copy_workspace(template, tmp_path / "ws")
    store = ws / "runs" / "runs.sqlite"
    inner = tmp_path / "inner.sqlite"
    shutil.move(store, inner)
    store.mkdir()
    shutil.move(inner, store / "runs.sqlite")
    result = cli("-w", ws, "verify", "--json")
    assert result.code == 3
    kinds = {p["kind"] for p in result.json()["runs"]["problems"]}
    assert "runs-unreadable" in kinds
    assert result.json()["runs"]["records"] == 0
