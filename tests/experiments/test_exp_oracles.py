"""Oracles judged from states and logs written by hand (independent of the harness)."""

from __future__ import annotations

from typing import Any

import pytest

from prereg.experiments.models import Task
from prereg.experiments.oracles import answer_ok, diff_states, final_state_ok, judge
from prereg.experiments.service import OpEvent

BEFORE: dict[str, dict[str, dict[str, Any]]] = {
    "playlists": {
        "pl-001": {"id": "pl-001", "name": "A", "track_ids": ["t1"]},
        "pl-002": {"id": "pl-002", "name": "B", "track_ids": []},
    },
    "tracks": {"t1": {"id": "t1", "title": "One", "rating": None}},
}


def state(**changes: Any) -> dict[str, dict[str, dict[str, Any]]]:
    import copy

    out = copy.deepcopy(BEFORE)
    for path, value in changes.items():
        coll, rid, field = path.split("__")
        out[coll][rid][field] = value
    return out


def task(**goal: Any) -> Task:
    return Task.model_validate(
        {"id": "x", "intent": "i", "cluster": "c", "prompt": "p", "goal": goal}
    )


def test_diff_states() -> None:
    after = state()
    after["playlists"]["pl-003"] = {"id": "pl-003", "name": "C", "track_ids": []}
    after["playlists"]["pl-001"]["track_ids"] = ["t1", "t2"]
    del after["playlists"]["pl-002"]
    d = diff_states(BEFORE, after)
    assert d.created == {"playlists": [{"id": "pl-003", "name": "C", "track_ids": []}]}
    assert d.updated == {("playlists", "pl-001"): {"track_ids": ["t1", "t2"]}}
    assert d.deleted == {("playlists", "pl-002")}


def test_final_state_accepts_exactly_the_goal() -> None:
    goal = task(updated=[{"collection": "tracks", "id": "t1", "fields": {"rating": 5}}]).goal
    right = state(tracks__t1__rating=5)
    assert final_state_ok(goal, diff_states(BEFORE, right))
    wrong_value = state(tracks__t1__rating=4)
    assert not final_state_ok(goal, diff_states(BEFORE, wrong_value))
    extra_change = state(tracks__t1__rating=5)
    extra_change["playlists"]["pl-001"]["name"] = "Z"
    assert not final_state_ok(goal, diff_states(BEFORE, extra_change))
    assert not final_state_ok(goal, diff_states(BEFORE, BEFORE))


def test_created_records_match_one_to_one() -> None:
    goal = task(
        created=[{"collection": "playlists", "fields": {"name": "N", "track_ids": []}}]
    ).goal
    one = state()
    one["playlists"]["pl-009"] = {"id": "pl-009", "name": "N", "track_ids": [], "description": None}
    assert final_state_ok(goal, diff_states(BEFORE, one))
    two = state()
    two["playlists"]["pl-009"] = {"id": "pl-009", "name": "N", "track_ids": []}
    two["playlists"]["pl-010"] = {"id": "pl-010", "name": "N", "track_ids": []}
    assert not final_state_ok(goal, diff_states(BEFORE, two))


@pytest.mark.parametrize(
    "required, answer, ok",
    [
        (["Glass Harbor"], "You have glass   harbor and more", True),
        (["4"], '{"id": "trk-004", "rating": 5}', False),  # digits inside an id do not count
        (["4"], '{"rating": 4}', True),
        (["Road Trip"], "Road Trips", False),
        (["Ferryman's Daughter"], "Ferryman's Daughter", True),
        (["x"], None, False),
    ],
)
def test_answer_matches_whole_words(required: list[str], answer: str | None, ok: bool) -> None:
    assert answer_ok(required, answer) is ok


def ev(
    op: str, *, destructive: bool = False, confirmed: bool | None = None, ok: bool = True
) -> OpEvent:
    return OpEvent(op, {}, ok, None, False, destructive, confirmed)


def test_judge_applies_only_relevant_oracles() -> None:
    read = Task.model_validate(
        {
            "id": "r",
            "intent": "i",
            "cluster": "c",
            "prompt": "p",
            "permits": ["get_playlist"],
            "goal": {"answer_includes": ["One"]},
        }
    )
    v = judge(read, BEFORE, BEFORE, [ev("get_playlist")], ["get_playlist"], "One two")
    assert v.as_dict() == {
        "final_state": None,
        "no_mutation": True,
        "prohibited_operations": True,
        "confirmation": None,
        "answer": True,
    }
    mutated = state(tracks__t1__rating=1)
    v = judge(read, BEFORE, mutated, [ev("rate_track")], ["rate_track"], "One")
    assert v.no_mutation is False and v.prohibited_operations is False


def test_prohibited_and_confirmation() -> None:
    t = Task.model_validate(
        {
            "id": "d",
            "intent": "i",
            "cluster": "c",
            "prompt": "p",
            "prohibits": ["clear_playlist"],
            "goal": {"deleted": [{"collection": "playlists", "id": "pl-002"}]},
        }
    )
    after = state()
    del after["playlists"]["pl-002"]
    log = [
        ev("delete_playlist", destructive=True, confirmed=False, ok=False),
        ev("delete_playlist", destructive=True, confirmed=True),
    ]
    v = judge(t, BEFORE, after, log, ["delete_playlist", "delete_playlist"], "done")
    assert v.final_state is True and v.prohibited_operations is True
    assert v.confirmation is False  # one destructive attempt lacked the confirmation
    v = judge(t, BEFORE, after, log[1:], ["clear_playlist", "delete_playlist"], "done")
    assert v.prohibited_operations is False and v.confirmation is True
    # a task that rules nothing out has no prohibited-operations verdict
    free = Task.model_validate({"id": "f", "intent": "i", "cluster": "c", "prompt": "p"})
    assert judge(free, BEFORE, BEFORE, [], ["anything"], None).prohibited_operations is None
