"""Issue 37, points 1 and 2: ``init`` starts with the pilot and names the drafts that
spend a locked split; a value-taking option never swallows another option, and a
missing ``--prices`` file is refused whatever the host."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from prereg.cli import module_commands
from prereg.commands._common import option_as_value
from prereg.runners.store.sqlite import RunStore
from tests.cli.helpers import PILOT, PILOT_ID

CONFIRMATORY = "drafts/music-library-confirmatory.yaml"


def test_init_names_the_pilot_next_and_the_drafts_that_spend_the_locked_split(
    tmp_path: Path, cli: Any
) -> None:
    done = cli("init", tmp_path / "ws")
    assert done.code == 0, done.stderr
    flat = " ".join(done.stdout.split())  # as printed, unwrapped
    assert flat.endswith(f"register {PILOT}") and "next: prereg -w" in flat, done.stdout
    assert f"{CONFIRMATORY} spends the locked test split on its first run" in flat
    data = cli("init", tmp_path / "ws", "--json").json()
    assert data["next"] == PILOT
    assert data["spend_locked_split"] == [CONFIRMATORY]


def test_the_locked_drafts_are_read_from_the_drafts_not_from_their_names(
    ws: Path, cli: Any
) -> None:
    pilot = (ws / PILOT).read_text()
    (ws / "drafts" / "aa-final.yaml").write_text(
        pilot.replace("kind: exploratory", "kind: confirmatory").replace(
            "split: dev", "split: test"
        )
    )
    (ws / "drafts" / "ab-test-only.yaml").write_text(pilot.replace("split: dev", "split: test"))
    (ws / "drafts" / "ac-broken.yaml").write_text("id: [unclosed\n")  # not judged, no crash
    confirmatory = ws / CONFIRMATORY
    confirmatory.write_text(
        confirmatory.read_text()
        .replace("kind: confirmatory", "kind: exploratory")
        .replace("split: test", "split: validation")
    )
    data = cli("init", ws, "--json").json()
    assert data["spend_locked_split"] == ["drafts/aa-final.yaml", "drafts/ab-test-only.yaml"]
    assert data["next"] == PILOT  # first in line although other drafts sort before it


def test_a_pilot_edited_onto_the_locked_split_is_not_named_next(ws: Path, cli: Any) -> None:
    pilot = ws / PILOT
    pilot.write_text(
        pilot.read_text()
        .replace("kind: exploratory", "kind: confirmatory")
        .replace("split: dev", "split: test")
    )
    data = cli("init", ws, "--json").json()
    assert PILOT in data["spend_locked_split"]
    assert data["next"] is not None and data["next"] not in data["spend_locked_split"]


def test_a_price_file_option_does_not_swallow_json(ws: Path, cli: Any) -> None:
    assert cli("-w", ws, "register", ws / PILOT).code == 0
    done = cli("-w", ws, "run", PILOT_ID, "--prices", "--json")
    assert done.code == 2
    assert "--prices" in done.stderr and "'--json'" in done.stderr
    assert "planned units" not in done.stdout  # no run, no table: at most the error
    assert RunStore(ws / "runs").records(registration_id=PILOT_ID) == []


@pytest.mark.parametrize(
    "args",
    [
        ["run", PILOT_ID, "--store", "--json"],
        ["list", "--store", "--json"],
        ["show", PILOT_ID, "--store", "--json"],
        ["export", PILOT_ID, "--out", "--json"],
        ["import", "x.jsonl", "--from", "inspect", "--registration", "--json"],
        ["study", "run", "experiments/toolbottleneck/study.yaml", "--out", "--json"],
        ["study", "compile", "x.yaml", "--out", "--force"],
    ],
)
def test_value_options_refuse_another_option(
    ws: Path, cli: Any, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    monkeypatch.chdir(ws)
    assert cli("register", PILOT).code == 0
    done = cli(*args)
    assert done.code == 2, done.stderr
    assert "expects a value, not the option" in done.stderr
    assert not (ws / "--json").exists() and not (ws / "--force").exists()
    assert RunStore(ws / "runs").records(registration_id=PILOT_ID) == []


def test_demo_dir_refuses_an_option(
    tmp_path: Path, cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    done = cli("demo", "--dir", "--json")
    assert done.code == 2 and "expects a value" in done.stderr
    assert list(tmp_path.iterdir()) == []  # no folder called --json, no prereg-demo


def test_an_option_value_is_a_value_unless_it_is_an_option() -> None:
    params = module_commands("run_cmds")["run"].params
    assert option_as_value(params, ["ID", "--out", "-"]) is None  # not run's option
    assert option_as_value(params, ["ID", "--prices", "p.yaml", "--json"]) is None
    assert option_as_value(params, ["ID", "--prices", "./--json"]) is None  # a file so named
    assert option_as_value(params, ["ID", "--prices", "--json"]) == ("--prices", "--json")
    assert option_as_value(params, ["ID", "--prices=--json"]) == ("--prices", "--json")
    assert option_as_value(params, ["ID", "--prices", "-c"]) == ("--prices", "-c")  # run's own
    assert option_as_value(params, ["ID", "--prices", "-z"]) is None  # not an option of run
    assert option_as_value(params, ["ID", "--json", "--dry-run"]) is None  # flags take none
    assert option_as_value(params, ["--", "--prices", "--json"]) is None  # arguments only
    export = module_commands("run_cmds")["export"].params
    assert option_as_value(export, ["ID", "--out", "-", "--force"]) is None  # standard output


def test_every_command_refuses_a_swallowed_option(ws: Path, cli: Any) -> None:
    """One check for every command (the command class's parse), not one per option."""
    for args in (["plan", "--prompts", "--json"], ["calibrate", "x", "--sims", "--json"]):
        done = cli("-w", ws, *args)
        assert done.code == 2 and "expects a value, not the option" in done.stderr, args


@pytest.mark.parametrize("kind", ["missing", "folder"])
def test_a_missing_price_file_is_refused_for_the_local_host(
    ws: Path, cli: Any, tmp_path: Path, kind: str
) -> None:
    assert cli("-w", ws, "register", ws / PILOT).code == 0
    path = tmp_path / "no-such-prices.yaml"
    if kind == "folder":
        path.mkdir()
    for extra in ([], ["--dry-run"]):
        done = cli("-w", ws, "run", PILOT_ID, "--prices", path, "--max-units", "2", *extra)
        assert done.code == 2, done.stdout
        assert str(path) in done.stderr
    assert RunStore(ws / "runs").records(registration_id=PILOT_ID) == []


def test_an_existing_price_file_still_runs_the_local_host(
    ws: Path, cli: Any, tmp_path: Path
) -> None:
    prices = tmp_path / "prices.yaml"
    prices.write_text("version: t1\ndate: '2026-01-01'\nproviders: {}\n")
    assert cli("-w", ws, "register", ws / PILOT).code == 0
    done = cli("-w", ws, "run", PILOT_ID, "--prices", prices, "--max-units", "2", "--json")
    assert done.code == 0, done.stderr
    assert done.json()["completed"] == 2
