"""Where prereg writes and what it reads typed (issue 40, item 7).

- ``--out`` of every command refuses a path inside a workspace's ``registry/`` or
  ``runs/`` (exit 2, nothing written): before, ``study compile --out`` and ``study run
  --out`` wrote there, and ``export`` refused only its own workspace's folders;
- a report is written only into the workspace's own ``reports/`` folder: a
  ``reports/ID`` symlinked into ``registry/`` is exit 3 and nothing is written there
  (before, ``analyse`` wrote its report into the registry);
- a frozen copy with a mistyped member is exit 3 naming the file for ``list`` and
  ``show`` (before, a traceback).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import tree_digest
from tests.integrity.tamper_tools import PILOT, PILOT_ID

FAMILY = "experiments/toolbottleneck/families/meeting-room-conflict.yaml"
STUDY = "experiments/toolbottleneck/study.yaml"


@pytest.fixture
def registered(ws: Path, cli) -> Path:
    assert cli("-w", ws, "register", ws / PILOT).code == 0
    return ws


@pytest.mark.parametrize("folder", ["registry", "runs"])
@pytest.mark.parametrize(
    "command",
    [
        lambda ws, out: ["-w", ws, "study", "compile", ws / FAMILY, "--out", out],
        lambda ws, out: ["-w", ws, "study", "run", ws / STUDY, "--out", out, "--draws", "100"],
        lambda ws, out: ["mcp", "snapshot", "--out", out.parent / "snap.json", "--", "true"],
    ],
    ids=["study compile", "study run", "mcp snapshot"],
)
def test_out_inside_registry_or_runs_is_refused(ws: Path, cli, command, folder: str) -> None:
    before = tree_digest(ws / folder)
    out = ws / folder / "written"
    result = cli(*command(ws, out))
    assert result.code == 2, result.stdout + result.stderr
    assert f"inside the workspace's {folder}/" in result.stderr
    assert tree_digest(ws / folder) == before and not out.exists()
    assert not (ws / folder / "snap.json").exists()


def test_an_export_into_another_workspace_registry_is_refused(
    registered: Path, cli, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    assert cli("init", other).code == 0
    before = tree_digest(other / "registry")
    result = cli("-w", registered, "export", PILOT_ID, "--out", other / "registry" / "x.jsonl")
    assert result.code == 2, result.stderr
    assert "inside the workspace's registry/" in result.stderr
    assert tree_digest(other / "registry") == before


def test_a_report_folder_linked_into_the_registry_is_refused(registered: Path, cli) -> None:
    ws = registered
    assert cli("-w", ws, "run", PILOT_ID, "--max-units", "4", "--no-progress").code == 0
    (ws / "reports").mkdir(exist_ok=True)
    (ws / "reports" / PILOT_ID).symlink_to(ws / "registry", target_is_directory=True)
    before = tree_digest(ws / "registry")
    result = cli("-w", ws, "analyse", PILOT_ID, "--allow-incomplete")
    assert result.code == 3, result.stdout + result.stderr
    assert "symbolic link" in result.stderr and f"reports/{PILOT_ID}" in result.stderr
    assert not (ws / "registry" / "report.html").exists()
    assert not (ws / "registry" / "exploratory").exists()
    assert tree_digest(ws / "registry") == before


@pytest.mark.parametrize("member", ["source", "document", "ledger_line", "feasibility"])
@pytest.mark.parametrize("command", ["list", "show"])
def test_a_mistyped_frozen_copy_is_exit_3_naming_it(
    registered: Path, cli, member: str, command: str
) -> None:
    frozen = registered / "registry" / "frozen" / f"{PILOT_ID}.json"
    frozen.chmod(0o644)
    doc = json.loads(frozen.read_text())
    doc[member] = [1, 2]
    frozen.write_text(json.dumps(doc))
    args = [command] if command == "list" else [command, PILOT_ID]
    result = cli("-w", registered, *args)
    assert result.code == 3, result.stdout + result.stderr
    assert f"{PILOT_ID}.json" in result.stderr and member in result.stderr
