"""Certified shortest paths (issue 13, item 6): declared in the corpus, checked at load, and
the registered call limit "certified minimum + k" and turn limit "call limit + k"."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from prereg.experiments import load_experiment
from prereg.experiments.loader import folder_reader
from prereg.registry.schema import Registration
from prereg.registry.units import Budgets, plan_from_registration, unit_budgets
from prereg.runners.drivers.base import Malformed, ToolCall
from prereg.runners.store.sqlite import RunStore
from tests.conftest import tree_digest
from tests.harness_rules.helpers import PILOT, certified_copy, draft
from tests.runners.run_helpers import ScriptedDriver, experiment, play

SEARCH = ToolCall("search_tracks", {"query": "Lumen Drift"})


def test_bundled_certified_paths_load_with_their_minimum() -> None:
    exp = experiment("music-library")
    assert exp.task("t001").certified_minimum == 1  # one search
    assert exp.task("t014").certified_minimum == 2  # search the album, then read it
    assert exp.task("t054").certified_minimum == 0  # a negative task uses no tool
    assert exp.task("t009").certified_minimum is None  # its second step is redundant


def _corpus_with(ws: Path, task_id: str, solution: dict[str, Any]) -> None:
    path = ws / "experiments" / "music-library" / "corpus.yaml"
    corpus = yaml.safe_load(path.read_text())
    task = next(t for t in corpus["tasks"] if t["id"] == task_id)
    task["solution"] = solution
    path.write_text(yaml.safe_dump(corpus, sort_keys=False))


BAD_PATHS = [
    # t009: search_tracks already returns the year; get_track adds nothing
    (
        "t009",
        {
            "certified": True,
            "steps": [
                {"op": "search_tracks", "args": {"query": "Runaway Comet"}},
                {"op": "get_track", "args": {"track_id": {"step": 0, "path": "items.0.id"}}},
            ],
        },
        "not minimal: without step 1 (get_track)",
    ),
    # t012: the id of the track is a literal no prompt gives (the search is then droppable)
    (
        "t012",
        {
            "certified": True,
            "steps": [
                {"op": "search_tracks", "args": {"query": "Whiskey Porch"}},
                {"op": "get_track", "args": {"track_id": "trk-025"}},
            ],
        },
        "literal the prompt does not state",
    ),
    # t001 answered from an unrelated search: the goal's strings are in no result
    (
        "t001",
        {"certified": True, "steps": [{"op": "search_tracks", "args": {"query": "jazz"}}]},
        "does not reach the goal",
    ),
]


@pytest.mark.parametrize(("task_id", "solution", "words"), BAD_PATHS)
def test_a_false_certified_path_is_refused_at_register(
    ws: Path, cli: Any, task_id: str, solution: dict[str, Any], words: str
) -> None:
    _corpus_with(ws, task_id, solution)
    before = tree_digest(ws / "registry")
    result = cli("-w", ws, "register", ws / "drafts" / "music-library-pilot.yaml", "--json")
    assert result.code == 2, result.stdout + result.stderr
    error = result.json()
    assert words in error["message"], error
    assert error["field"].endswith("solution.certified"), error
    assert re.search(r"corpus\.yaml:\d+:\d+$", error["file"]), error
    assert tree_digest(ws / "registry") == before


def test_the_rule_resolves_per_task() -> None:
    exp = experiment("music-library")
    rule = Budgets(1024, 32000, None, None, None, 2, 2)
    one, two = unit_budgets(rule, exp.task("t001")), unit_budgets(rule, exp.task("t014"))
    assert (one.call_limit, one.turn_limit) == (3, 5)
    assert (two.call_limit, two.turn_limit) == (4, 6)
    fixed_calls = unit_budgets(Budgets(1024, 32000, 7, None, None, None, 1), exp.task("t001"))
    assert (fixed_calls.call_limit, fixed_calls.turn_limit) == (7, 8)
    with pytest.raises(ValueError, match="t009"):
        unit_budgets(rule, exp.task("t009"))


def test_the_harness_stops_at_the_tasks_own_limits() -> None:
    rule = Budgets(1024, 32000, None, None, None, 1, 1)
    # t001 is certified at 1 call: the limit is 2 calls, and the third call is refused
    rec = play(ScriptedDriver([SEARCH]), "t001", budgets=rule)
    assert rec.calls == 2 and rec.terminal_flag == "call_limit"
    # unparseable turns make no call: the turn limit, 2 + 1, ends the episode
    rec = play(ScriptedDriver([Malformed("??")]), "t001", budgets=rule)
    assert rec.turns == 3 and rec.terminal_flag == "turn_limit"


def _pilot(**budgets: Any) -> dict[str, Any]:
    doc = yaml.safe_load(PILOT.read_text())
    doc["budgets"] = {"completion_cap": 1024, "episode_tokens": 32000, **budgets}
    return doc


def test_a_rule_replaces_its_limit_and_an_arm_may_override_it() -> None:
    doc = _pilot(call_limit_over_certified=2, turn_limit_over_calls=2)
    doc["arms"][1]["budgets"] = {"call_limit": 9}
    reg = Registration.model_validate(doc)
    assert reg.budgets.call_limit is None and reg.budgets.turn_limit is None
    mine = reg.config_of("semantic").budgets
    assert (mine.call_limit, mine.call_limit_over_certified) == (9, None)
    assert mine.turn_limit_over_calls == 2  # inherited: turn limit = 9 + 2
    # a frozen copy (the dump, the replaced limits null) loads again unchanged
    again = Registration.model_validate(reg.model_dump(mode="json"))
    assert again == reg
    config = plan_from_registration(reg, "sha256:" + "0" * 64).config("baseline")
    assert config.as_json()["budgets"] == {
        "completion_cap": 1024,
        "episode_tokens": 32000,
        "call_limit": None,
        "turn_limit": None,
        "call_limit_over_certified": 2,
        "turn_limit_over_calls": 2,
    }


BAD_RULES = [
    (
        {"call_limit": 12, "call_limit_over_certified": 2},
        "budgets.call_limit_over_certified",
        "not both",
    ),
    ({"turn_limit": 16, "turn_limit_over_calls": 2}, "budgets.turn_limit_over_calls", "not both"),
    ({"call_limit_over_certified": -1}, "budgets.call_limit_over_certified", "greater than"),
    # the dev split of music-library has tasks without a certified path
    ({"call_limit_over_certified": 2}, "budgets.call_limit_over_certified", "t012"),
]


@pytest.mark.parametrize(("budgets", "field", "words"), BAD_RULES)
def test_bad_rules_are_refused_at_register(
    ws: Path, cli: Any, budgets: dict[str, Any], field: str, words: str
) -> None:
    path = ws / "drafts" / "bad.yaml"
    path.write_text(yaml.safe_dump(_pilot(**budgets), sort_keys=False))
    before = tree_digest(ws / "registry")
    result = cli("-w", ws, "register", path, "--json")
    assert result.code == 2, result.stdout + result.stderr
    error = result.json()
    assert error["field"] == field, error
    assert words in error["message"], error
    assert re.search(r"bad\.yaml:\d+:\d+$", error["file"]), error
    assert tree_digest(ws / "registry") == before


def test_a_certified_corpus_runs_under_the_rule_and_records_it(ws: Path, cli: Any) -> None:
    certified_copy(ws)
    path = draft(
        ws,
        "certified-replay",
        experiment="music-certified",
        host={"driver": "replay"},
        budgets={
            "completion_cap": 1024,
            "episode_tokens": 32000,
            "call_limit_over_certified": 0,
            "turn_limit_over_calls": 1,
        },
    )
    assert cli("-w", ws, "register", path, "--json").code == 0
    result = cli("-w", ws, "run", "certified-replay", "--json")
    assert result.code == 0, result.stderr
    exp = load_experiment(folder_reader(ws / "experiments" / "music-certified"), "music-certified")
    records = RunStore(ws / "runs").records(registration_id="certified-replay")
    assert records and all(r.status == "ok" for r in records)
    baseline = [r for r in records if r.arm == "baseline"]
    # one tool per operation: the replay walks exactly the certified path, within "+ 0"
    for r in baseline:
        assert r.calls == exp.task(r.task_id).certified_minimum
        assert r.terminal_flag != "call_limit"
    assert all(r.success for r in baseline)
    budgets = records[0].config.budgets  # type: ignore[union-attr]
    assert (budgets.call_limit, budgets.call_limit_over_certified) == (None, 0)
    assert (budgets.turn_limit, budgets.turn_limit_over_calls) == (None, 1)
