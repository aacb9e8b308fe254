"""The feasibility gate (issue 6, item 4): a hopeless design is recorded, refused, reported.

The gate itself is ``prereg.registry.feasibility``; these tests hold the whole path to
the issue's acceptance: a registration whose `plan:` block its split cannot reach is
still registered (exit 0, listed, ``runnable: false`` with the reason in ``show``),
``prereg run`` refuses it with exit 4 before anything is run, and ``prereg analyse``
reports the pre-committed verdict ``not_runnable``. The run and analyse checks are
skipped only while those commands are not registered on the CLI yet.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from prereg.cli import COMMANDS
from tests.conftest import tree_digest

PILOT = "drafts/music-library-pilot.yaml"
HOPELESS = "hopeless-pilot"


def _has_command(name: str) -> bool:
    return name in COMMANDS


def _variant(ws: Path, reg_id: str, plan: str) -> Path:
    text = (ws / PILOT).read_text()
    assert "id: music-library-pilot" in text and "plan:" not in text
    path = ws / "drafts" / f"{reg_id}.yaml"
    path.write_text(text.replace("id: music-library-pilot", f"id: {reg_id}", 1) + f"plan: {plan}\n")
    return path


def _register_hopeless(ws: Path, cli) -> dict[str, Any]:
    result = cli(
        "-w", ws, "register", _variant(ws, HOPELESS, "{mde: 0.01, sigma_d: 0.5}"), "--json"
    )
    assert result.code == 0, result.stderr
    return result.json()


def test_hopeless_registration_is_recorded_not_runnable(ws: Path, cli) -> None:
    data = _register_hopeless(ws, cli)
    assert data["created"] is True and data["runnable"] is False
    gate = data["feasibility"]
    assert gate["runnable"] is False and gate["registered_mde"] == 0.01
    assert gate["achievable_mde"] > 0.01 and "registered MDE" in gate["reason"]
    # listed, and shown with the reason
    listed = {e["id"]: e for e in cli("-w", ws, "list", "--json").json()["registrations"]}
    assert listed[HOPELESS]["runnable"] is False
    shown = cli("-w", ws, "show", HOPELESS, "--json").json()
    assert shown["runnable"] is False and shown["feasibility"]["reason"] == gate["reason"]
    assert shown["registration"]["plan"]["mde"] == 0.01
    # the ledger line itself carries the mark
    lines = (ws / "registry" / "ledger.jsonl").read_text().splitlines()
    assert json.loads(lines[-1])["runnable"] is False
    # human output says so too
    human = cli("-w", ws, "show", HOPELESS)
    runnable = next(line for line in human.stdout.splitlines() if "runnable" in line)
    assert runnable.split()[1] == "no" and "registered MDE" in human.stdout
    # verify still passes: a not-runnable registration is a valid record
    assert cli("-w", ws, "verify").code == 0


def test_gate_agrees_with_prereg_plan(ws: Path, cli) -> None:
    gate = _register_hopeless(ws, cli)["feasibility"]
    args = [
        "plan",
        "--sigma-d",
        "0.5",
        "--prompts",
        str(gate["prompts"]),
        "--alpha",
        str(gate["alpha"]),
        "--power",
        str(gate["power"]),
        "--runs-per-arm",
        str(gate["runs_per_arm"]),
        "--sigma-run",
        str(gate["sigma_run"]),
        "--json",
    ]
    planned = cli(*args).json()
    assert planned["mde"] == pytest.approx(gate["achievable_mde"], rel=1e-12)
    # and `plan --mde` would have said beforehand that the split is too small
    needed = cli("plan", "--sigma-d", "0.5", "--mde", "0.01", "--json").json()["prompts"]
    assert needed > gate["prompts"]


def test_reachable_plan_is_runnable(ws: Path, cli) -> None:
    result = cli(
        "-w", ws, "register", _variant(ws, "easy-pilot", "{mde: 0.9, sigma_d: 0.1}"), "--json"
    )
    assert result.code == 0, result.stderr
    assert result.json()["runnable"] is True and result.json()["feasibility"]["runnable"]


@pytest.mark.skipif(not _has_command("run"), reason="`prereg run` is not registered yet")
def test_run_refuses_not_runnable_with_exit_4(ws: Path, cli) -> None:
    _register_hopeless(ws, cli)
    before = tree_digest(ws / "runs")
    result = cli("-w", ws, "run", HOPELESS)
    assert result.code == 4, (result.stdout, result.stderr)
    assert "not runnable" in result.stderr.lower().replace("_", " ")
    as_json = cli("-w", ws, "run", HOPELESS, "--json")
    assert as_json.code == 4 and json.loads(as_json.stdout)["exit_code"] == 4
    assert tree_digest(ws / "runs") == before  # no run, no token spent


def _verdict(report: dict[str, Any]) -> str:
    value = report.get("verdict")
    if isinstance(value, dict):
        value = value.get("value")
    if value is None and isinstance(report.get("report"), dict):
        return _verdict(report["report"])
    return str(value)


@pytest.mark.skipif(not _has_command("analyse"), reason="`prereg analyse` is not registered yet")
def test_analyse_reports_not_runnable(ws: Path, cli) -> None:
    _register_hopeless(ws, cli)
    result = cli("-w", ws, "analyse", HOPELESS, "--json")
    assert result.code == 0, (result.stdout, result.stderr)
    assert _verdict(result.json()) == "not_runnable"
