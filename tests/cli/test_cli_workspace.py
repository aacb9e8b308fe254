"""Workspace discovery (issue 16, item 5): upward from the current folder, as git does;
a named workspace that is missing, or is no workspace, is bad input (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from prereg import cli as prereg_cli
from prereg.core.errors import BadInput
from prereg.core.workspace import Workspace, is_workspace
from tests.cli.helpers import PILOT, PILOT_ID


@pytest.fixture(autouse=True)
def _no_workspace_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PREREG_WORKSPACE", raising=False)


def test_list_in_a_subfolder_finds_the_workspace_upward(
    ws: Path, cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert cli("-w", ws, "register", ws / PILOT).code == 0
    monkeypatch.chdir(ws / "experiments" / "music-library")
    result = cli("list", "--json")
    assert result.code == 0, result.stderr
    assert [r["id"] for r in result.json()["registrations"]] == [PILOT_ID]
    human = cli("list")
    assert PILOT_ID in human.stdout and "no registrations yet" not in human.stdout


def test_register_and_run_from_a_subfolder_with_paths_relative_to_it(
    ws: Path, cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ws / "drafts")
    assert cli("register", "music-library-pilot.yaml").code == 0
    result = cli("run", PILOT_ID, "--max-units", "2", "--json")
    assert result.code == 0, result.stderr
    assert result.json()["completed"] == 2
    assert (ws / "runs").is_dir() and not (ws / "drafts" / "runs").exists()


def test_a_missing_workspace_is_exit_2_not_an_empty_list(cli: Any, tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent"
    result = cli("-w", missing, "list", "--json")
    assert result.code == 2
    document = json.loads(result.stdout)
    assert document["exit_code"] == 2 and "does not exist" in document["message"]
    human = cli("-w", missing, "list")
    assert human.code == 2 and "does not exist" in human.stderr
    assert "no registrations yet" not in human.stdout
    assert not missing.exists()  # nothing was created


@pytest.mark.parametrize(
    "args", [["list"], ["verify"], ["show", PILOT_ID], ["run", PILOT_ID], ["split", "show", "x"]]
)
def test_a_folder_that_is_not_a_workspace_is_refused(
    cli: Any, tmp_path: Path, args: list[str]
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    result = cli("-w", plain, *args)
    assert result.code == 2, result.stderr
    assert "not a prereg workspace" in result.stderr and "prereg init" in result.stderr
    assert list(plain.iterdir()) == []  # nothing written there


def test_outside_any_workspace_without_w_is_exit_2(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = cli("list", "--json")
    assert result.code == 2
    assert "not inside a prereg workspace" in json.loads(result.stdout)["message"]


def test_a_missing_workspace_from_the_environment_is_exit_2(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PREREG_WORKSPACE", str(tmp_path / "gone"))
    result = cli("list")
    assert result.code == 2 and "PREREG_WORKSPACE" in result.stderr


def test_init_and_plan_need_no_existing_workspace(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    planned = cli("plan", "--sigma-d", "0.28", "--prompts", "58", "--sims", "0", "--json")
    assert planned.code == 0, planned.stderr
    assert cli("init", "--json").code == 0  # init keeps its behaviour: the current folder
    assert is_workspace(tmp_path)
    assert cli("list", "--json").json() == {"registrations": []}


def test_the_nearest_workspace_wins(tmp_path: Path) -> None:
    outer, inner = tmp_path / "outer", tmp_path / "outer" / "projects" / "inner"
    for root in (outer, inner):
        for sub in ("registry", "runs"):
            (root / sub).mkdir(parents=True)
    (inner / "experiments" / "x").mkdir(parents=True)
    assert Workspace.discover(None, start=inner / "experiments" / "x").root == inner.resolve()
    assert Workspace.discover(None, start=outer / "projects").root == outer.resolve()
    # a folder with registry/ alone (a source checkout of prereg has one) is no workspace
    lone = tmp_path / "checkout"
    (lone / "registry").mkdir(parents=True)
    with pytest.raises(BadInput, match="not inside a prereg workspace"):
        Workspace.discover(None, start=lone)


# ---- -w/--workspace after the command (issue 37, item 4) -------------------------------


def test_w_after_the_command(
    ws: Path, cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert cli("register", ws / PILOT, "-w", ws).code == 0
    monkeypatch.chdir(tmp_path)  # no workspace here or upward: only -w names it
    listed = cli("list", "-w", ws, "--json")
    assert listed.code == 0, listed.stderr
    assert [r["id"] for r in listed.json()["registrations"]] == [PILOT_ID]
    for args in (["show", PILOT_ID, "-w", ws], ["show", "--workspace", ws, PILOT_ID]):
        shown = cli(*args, "--json")
        assert shown.code == 0, shown.stderr
        assert shown.json()["id"] == PILOT_ID
    assert PILOT_ID in cli("list", "-w", ws).stdout


def test_w_after_the_command_wins_and_is_checked(ws: Path, cli: Any, tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent"
    assert cli("-w", missing, "list", "-w", ws, "--json").code == 0  # the nearer one
    refused = cli("list", "-w", missing, "--json")
    assert refused.code == 2 and "does not exist" in refused.json()["message"]
    assert cli("split", "show", "music-library", "-w", ws, "--json").code == 0


def _commands() -> list[tuple[str, Any]]:
    """Every command: (path, click command), subgroups' commands included."""
    found = []
    for name, (module, _) in prereg_cli.COMMANDS.items():
        command = prereg_cli.module_commands(module)[name]
        subs = getattr(command, "commands", None)
        found += [(f"{name} {n}", c) for n, c in subs.items()] if subs else [(name, command)]
    return found


@pytest.mark.parametrize(("path", "command"), _commands(), ids=[p for p, _ in _commands()])
def test_every_command_in_a_workspace_takes_w_after_its_name(path: str, command: Any) -> None:
    names = {n for p in command.params for n in getattr(p, "opts", ())}
    # demo has --dir; mcp and the family scaffold (written relative to the current folder)
    # work in no workspace
    needs_none = path in ("demo", "study new-family") or path.startswith("mcp ")
    assert ({"-w", "--workspace"} <= names) != needs_none, (path, sorted(names))
