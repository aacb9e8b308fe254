"""Issue 37, points 5 and 6: ``study compile`` and ``study run`` find their file as
``register`` does (the current folder, then the workspace); ``show`` prints words, not
Python values; ``list`` says each registration's runs and verdict."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from prereg.commands import registry_cmds, study_cmds
from prereg.commands.registry_cmds import input_path
from prereg.core.workspace import Workspace
from tests.cli.helpers import PILOT, PILOT_ID, prereg

FAMILY = "experiments/toolbottleneck/families/overdue-case-escalation.yaml"
STUDY = "experiments/toolbottleneck/study.yaml"
TINY_STUDY = "experiments/toolbottleneck/tiny-study.yaml"


def test_study_commands_share_registers_resolution() -> None:
    assert study_cmds.input_path is registry_cmds.input_path  # one function, not a copy


def test_study_compile_finds_a_workspace_file_from_a_folder_inside_it(
    ws: Path, cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ws / "reports")  # a workspace path, not relative to here
    done = cli("study", "compile", FAMILY, "--json")
    assert done.code == 0, done.stderr
    assert done.json()["family"] == "overdue-case-escalation"


def test_study_compile_from_outside_with_w_and_from_the_current_folder_without_one(
    ws: Path, cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outside = tmp_path / "elsewhere"
    (outside / "fam").mkdir(parents=True)
    monkeypatch.chdir(outside)
    named = cli("-w", ws, "study", "compile", FAMILY, "--json")
    assert named.code == 0, named.stderr
    shutil.copy(ws / FAMILY, outside / "fam" / "mine.yaml")
    here = cli("study", "compile", "fam/mine.yaml", "--json")  # no workspace here at all
    assert here.code == 0, here.stderr
    assert here.json()["family_digest"] == named.json()["family_digest"]
    missing = cli("study", "compile", "fam/none.yaml")
    assert missing.code == 2 and "fam/none.yaml" in missing.stderr


def test_study_run_finds_the_workspace_study_from_a_folder_inside_it(
    ws: Path, cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the bundled study cut to two families and one repeat: what is tested is where the
    # file is found, not the study (the whole one is run by tests/toolbottleneck)
    study = yaml.safe_load((ws / STUDY).read_text())
    study.update(families=study["families"][:2], repeats=1)
    (ws / TINY_STUDY).write_text(yaml.safe_dump(study, sort_keys=False))
    monkeypatch.chdir(ws / "drafts")
    out = tmp_path / "tb"
    done = cli("study", "run", TINY_STUDY, "--out", out, "--draws", "100", "--json")
    assert done.code == 0, done.stderr
    assert (out / "records.jsonl").is_file() and done.json()["episodes"] > 0


def test_the_current_folder_comes_before_the_workspace(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = tmp_path / "here"
    (here / "drafts").mkdir(parents=True)
    (here / PILOT).write_text("mine")
    monkeypatch.chdir(here)
    workspace = Workspace(ws)
    assert input_path(None, Path(PILOT), workspace) == Path(PILOT)  # type: ignore[arg-type]
    (here / PILOT).unlink()
    assert input_path(None, Path(PILOT), workspace) == ws / PILOT  # type: ignore[arg-type]
    missing = Path("drafts/none.yaml")
    assert input_path(None, missing, workspace) == missing  # type: ignore[arg-type]


@pytest.mark.parametrize("command", ["compile", "run"])
def test_the_study_help_says_where_files_are_read(cli: Any, command: str) -> None:
    done = cli("study", command, "--help")
    flat = " ".join(done.stdout.split())
    assert "relative to the current folder, else to the workspace" in flat


def test_show_prints_words_not_python_values(ws: Path, cli: Any) -> None:
    assert cli("-w", ws, "register", ws / PILOT).code == 0
    shown = cli("-w", ws, "show", PILOT_ID)
    assert shown.code == 0, shown.stderr
    lines = {line.split()[0]: line.split()[1:] for line in shown.stdout.splitlines() if line}
    assert lines["supersedes"] == ["none"] and lines["runnable"] == ["yes"]
    assert lines["runs"] == ["no", "runs"]
    head = shown.stdout.split("hypothesis")[0]
    assert "None" not in head and "True" not in head and "False" not in head
    data = cli("-w", ws, "show", PILOT_ID, "--json").json()
    assert data["supersedes"] is None and data["runnable"] is True  # JSON keeps JSON values
    assert data["runs"] == {
        "ok": 0,
        "planned": None,
        "verdict": None,
        "analysed_units": None,
        "verified": False,
    }


def _listing(ws: Path) -> str:
    """The listing as a wide terminal shows it (one line a registration)."""
    done = prereg("-w", ws, "list", env={"COLUMNS": "220"})
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_list_shows_runs_and_the_verdict(ws: Path, cli: Any) -> None:
    assert cli("-w", ws, "register", ws / PILOT).code == 0
    assert "no runs" in _listing(ws)
    assert not (ws / "runs" / "runs.sqlite").exists()  # listing created no store
    assert cli("-w", ws, "run", PILOT_ID, "--max-units", "10", "--json").code == 0
    assert "10/168 ok" in _listing(ws)
    listed = cli("-w", ws, "list", "--json")
    (entry,) = json.loads(listed.stdout)["registrations"]  # one document
    assert entry["runs"] == {
        "ok": 10,
        "planned": 168,
        "verdict": None,
        "analysed_units": None,
        "verified": False,  # a status read as it stands (invariant 11: verify checks it)
    }
    assert "unchecked here: prereg verify" in _listing(ws)

    report = ws / "reports" / PILOT_ID / "report.json"
    report.parent.mkdir(parents=True)
    facts = {"verdict": "supported", "completeness": {"planned": 168, "completed": 10}}
    report.write_text(json.dumps({"digest": entry["digest"], **facts}))
    assert "10/168 ok, verdict supported" in _listing(ws)
    runs = cli("-w", ws, "list", "--json").json()["registrations"][0]["runs"]
    assert runs == {
        "ok": 10,
        "planned": 168,
        "verdict": "supported",
        "analysed_units": 10,
        "verified": False,
    }
    shown = cli("-w", ws, "show", PILOT_ID)
    assert "runs          10/168 ok, verdict supported (status as" in shown.stdout

    report.write_text(json.dumps({"digest": "sha256:" + "0" * 64, **facts}))  # not this one
    assert "verdict" not in _listing(ws)
    report.write_text("{not json")  # unreadable: no verdict, no failure
    assert "10/168 ok" in _listing(ws)


def test_list_marks_a_verdict_reached_on_fewer_runs(ws: Path, cli: Any) -> None:
    assert cli("-w", ws, "register", ws / PILOT).code == 0
    assert cli("-w", ws, "run", PILOT_ID, "--max-units", "6", "--json").code == 0
    digest = cli("-w", ws, "list", "--json").json()["registrations"][0]["digest"]
    report = ws / "reports" / PILOT_ID / "report.json"
    report.parent.mkdir(parents=True)
    completeness = {"planned": 168, "completed": 4}
    report.write_text(
        json.dumps({"digest": digest, "verdict": "inconclusive", "completeness": completeness})
    )
    assert "6/168 ok, verdict inconclusive (at 4)" in _listing(ws)
