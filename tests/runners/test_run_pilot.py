"""Pilot iteration (issue 43, item 2): ``run --limit/--task/--arm/--intent``.

The expected units are computed from what ``split show --tasks`` lists and the draft's
arms and repeats, and compared with the (arm, task, repeat) rows the store holds, read
with plain sqlite3.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

PILOT = "music-library-pilot"
CONFIRM = "music-library-confirmatory"
ARMS = ("baseline", "semantic")
REPEATS = 3


def _stored(ws: Path) -> set[tuple[str, str, int]]:
    db = ws / "runs" / "runs.sqlite"
    if not db.exists():
        return set()
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT arm, task_id, repeat FROM records").fetchall()
    finally:
        conn.close()
    return {(a, t, int(r)) for a, t, r in rows}


def _dev_tasks(ws: Path, cli: Any) -> list[dict[str, str]]:
    result = cli("-w", ws, "split", "show", "music-library", "--tasks", "--split", "dev", "--json")
    assert result.code == 0, result.stderr
    return list(result.json()["task_list"])


def _units(tasks: list[str], arms: tuple[str, ...] = ARMS) -> set[tuple[str, str, int]]:
    return {(a, t, r) for a in arms for t in tasks for r in range(REPEATS)}


@pytest.fixture
def pilot(ws: Path, cli: Any) -> Path:
    assert cli("-w", ws, "register", ws / "drafts" / f"{PILOT}.yaml").code == 0
    return ws


def test_limit_runs_the_first_tasks_with_every_arm_and_repeat(pilot: Path, cli: Any) -> None:
    listed = [t["id"] for t in _dev_tasks(pilot, cli)]
    result = cli("-w", pilot, "run", PILOT, "--limit", "4", "--json")
    assert result.code == 0, result.stderr
    assert _stored(pilot) == _units(listed[:4])
    assert result.json()["pilot"]["limit"] == 4
    assert result.json()["planned"] == len(_units(listed[:4]))


def test_task_arm_and_intent_filters_combine(pilot: Path, cli: Any) -> None:
    listed = _dev_tasks(pilot, cli)
    intents = sorted({t["intent"] for t in listed})
    chosen = [t["id"] for t in listed if t["intent"] == intents[1]]
    args = ["--intent", intents[1], "--arm", "semantic"]
    assert cli("-w", pilot, "run", PILOT, *args, "--json").code == 0
    assert _stored(pilot) == _units(chosen, ("semantic",))
    # --task narrows further, --limit after it
    other = [t["id"] for t in listed if t["intent"] == intents[0]]
    picked = [other[-1], other[0]]
    args = ["--task", picked[0], "--task", picked[1], "--limit", "1", "--arm", "baseline"]
    assert cli("-w", pilot, "run", PILOT, *args, "--json").code == 0
    first = next(t for t in other if t in picked)  # the split's order, not the options'
    assert _stored(pilot) == _units(chosen, ("semantic",)) | _units([first], ("baseline",))


def test_a_plain_run_after_a_pilot_runs_the_rest(pilot: Path, cli: Any) -> None:
    listed = [t["id"] for t in _dev_tasks(pilot, cli)]
    assert cli("-w", pilot, "run", PILOT, "--limit", "2").code == 0
    result = cli("-w", pilot, "run", PILOT, "--json")
    assert result.code == 0
    assert result.json()["skipped_existing"] == len(_units(listed[:2]))
    assert _stored(pilot) == _units(listed)


def test_the_dry_run_and_workers_take_the_same_selection(pilot: Path, cli: Any) -> None:
    listed = [t["id"] for t in _dev_tasks(pilot, cli)]
    dry = cli("-w", pilot, "run", PILOT, "--limit", "3", "--dry-run", "--json")
    assert dry.code == 0, dry.stderr
    assert dry.json()["units_planned"] == dry.json()["units_to_run"] == len(_units(listed[:3]))
    assert _stored(pilot) == set()
    result = cli("-w", pilot, "run", PILOT, "--limit", "3", "--workers", "2", "--json")
    assert result.code == 0, result.stderr
    assert _stored(pilot) == _units(listed[:3])


@pytest.mark.parametrize(
    "option",
    [
        ["--limit", "2"],
        ["--task", "t001"],
        ["--arm", "semantic"],
        ["--intent", "find-tracks"],
        ["--cache"],
    ],
)
def test_a_confirmatory_registration_refuses_every_filter(
    ws: Path, cli: Any, option: list[str]
) -> None:
    assert cli("-w", ws, "register", ws / "drafts" / f"{CONFIRM}.yaml").code == 0
    ledger_before = (ws / "registry" / "ledger.jsonl").read_bytes()
    for extra in ([], ["--dry-run"], ["--workers", "2"]):
        result = cli("-w", ws, "run", CONFIRM, *option, *extra, "--json")
        assert result.code == 4, (extra, result.stdout, result.stderr)
        assert "confirmatory" in result.json()["message"]
    # nothing claimed, nothing run
    assert (ws / "registry" / "ledger.jsonl").read_bytes() == ledger_before
    assert _stored(ws) == set()


@pytest.mark.parametrize(
    ("option", "field"),
    [
        (["--task", "no-such-task"], "task"),
        (["--arm", "no-such-arm"], "arm"),
        (["--intent", "no-such-intent"], "intent"),
    ],
)
def test_unknown_names_are_refused_naming_the_option(
    pilot: Path, cli: Any, option: list[str], field: str
) -> None:
    result = cli("-w", pilot, "run", PILOT, *option, "--json")
    assert result.code == 2
    assert result.json()["field"] == field
    assert _stored(pilot) == set()


def test_a_task_outside_the_split_is_refused(pilot: Path, cli: Any) -> None:
    test_split = cli("-w", pilot, "split", "show", "music-library", "--tasks", "--split", "test")
    assert test_split.code == 0
    listed = cli(
        "-w", pilot, "split", "show", "music-library", "--tasks", "--split", "test", "--json"
    ).json()["task_list"]
    result = cli("-w", pilot, "run", PILOT, "--task", listed[0]["id"], "--json")
    assert result.code == 2 and result.json()["field"] == "task"
