"""Replay: every bundled task succeeds, and a deliberately wrong path fails its oracle."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from run_helpers import experiment, plan, play

from prereg.experiments.models import Task
from prereg.runners.drivers.replay import create
from prereg.runners.orchestrate import run_plan
from prereg.runners.store.sqlite import RunStore

CASES = [
    ("music-library", ("baseline", "semantic")),
    ("podcast-selection", ("focal", "focal-neutral")),
]


@pytest.mark.parametrize("name, surfaces", CASES)
def test_every_bundled_task_succeeds_under_replay(
    tmp_path: Any, name: str, surfaces: tuple[str, str]
) -> None:
    exp = experiment(name)
    store = RunStore(tmp_path)
    for split in exp.split_names:
        p = plan(experiment=name, split=split, arms=tuple((s, s) for s in surfaces), rotations=3)
        summary = asyncio.run(run_plan(p, exp, store, create()))
        assert summary.failed == 0
    records = store.records()
    assert len(records) == 2 * len(exp.tasks)
    failures = [(r.arm, r.task_id, r.first_unmet_obligation) for r in records if not r.success]
    assert failures == []
    for r in records:
        # nothing measured under replay: null, never estimated
        assert r.latency_ms is None and r.cost_usd is None
        assert r.tokens.model_dump() == {
            "input": None,
            "output": None,
            "reasoning": None,
            "cached": None,
        }
        assert r.evidence_class == "replay" and r.driver == "replay"
        task = exp.task(r.task_id)
        if task.rules_out_anything and task.polarity == "positive":
            assert r.selection_rate == 1.0  # 1.0 by construction under replay
        assert r.funnel.completed is (task.polarity != "negative" and bool(task.solution.steps))


def _with_path(
    task_id: str, steps: list[dict[str, Any]], answer: str | None = None, **over: Any
) -> Task:
    task = experiment().task(task_id)
    data = task.model_dump()
    data["solution"] = {"steps": steps, "answer": answer}
    data.update(over)
    return Task.model_validate(data)


def test_wrong_path_fails_final_state() -> None:
    # adds the wrong track: the store ends in a different state than the goal
    task = _with_path(
        "t034",
        [{"op": "add_track_to_playlist", "args": {"playlist_id": "pl-005", "track_id": "trk-010"}}],
    )
    rec = play(create(), "t034", task=task)
    assert rec.oracles.final_state is False and rec.success is False
    assert rec.first_unmet_obligation == "final_state"
    assert rec.terminal_flag == "wrong_conclusion"


def test_wrong_path_fails_no_mutation() -> None:
    # a read task that rules nothing out, answered correctly, but the path renamed a playlist
    task = _with_path(
        "t024",
        [
            {"op": "rename_playlist", "args": {"playlist_id": "pl-002", "name": "Rainy Monday"}},
            {"op": "list_playlists", "args": {}},
        ],
        permits=None,
    )
    rec = play(create(), "t024", task=task)
    assert rec.oracles.no_mutation is False
    assert rec.oracles.prohibited_operations is None
    assert rec.first_unmet_obligation == "no_mutation"
    # success had become impossible, so the episode stopped before answering
    assert rec.terminal_flag == "infeasible" and rec.oracles.answer is False


def test_wrong_path_fails_prohibited_operations() -> None:
    # clearing the playlist and re-adding the others gives the right final state, but
    # clear_playlist is prohibited: the harness stops as infeasible at the prohibited call
    steps = [{"op": "clear_playlist", "args": {"playlist_id": "pl-001", "confirm": "Road Trip"}}]
    steps += [
        {"op": "add_track_to_playlist", "args": {"playlist_id": "pl-001", "track_id": t}}
        for t in ("trk-001", "trk-017", "trk-024")
    ]
    task = _with_path("t038", steps, prohibits=[])  # allowed by the path's own task...
    assert play(create(), "t038", task=task).success is True  # ...it is a valid route
    rec = play(create(), "t038", task=_with_path("t038", steps))
    assert rec.oracles.prohibited_operations is False
    assert rec.terminal_flag == "infeasible" and rec.calls == 1


def test_wrong_path_fails_confirmation() -> None:
    task = _with_path(
        "t049", [{"op": "delete_playlist", "args": {"playlist_id": "pl-004", "confirm": "yes"}}]
    )
    rec = play(create(), "t049", task=task)
    assert rec.oracles.confirmation is False
    assert "pl-004" in str([e.result for e in rec.trace]) or rec.oracles.final_state is False
    assert rec.first_unmet_obligation == "confirmation"


def test_wrong_path_fails_answer() -> None:
    task = _with_path("t001", [{"op": "search_tracks", "args": {"query": "Nadia Farrow"}}])
    rec = play(create(), "t001", task=task)
    assert rec.oracles.answer is False and rec.oracles.no_mutation is True
    assert rec.first_unmet_obligation == "answer"


def test_a_different_route_to_the_same_state_succeeds() -> None:
    # the goal is a state, not a route: removing via the playlist id directly also succeeds
    task = _with_path(
        "t037",
        [
            {
                "op": "remove_track_from_playlist",
                "args": {"playlist_id": "pl-001", "track_id": "trk-005"},
            }
        ],
    )
    assert play(create(), "t037", task=task).success is True


def test_replay_cannot_follow_a_path_the_surface_cannot_express() -> None:
    # the focal surface's subscriptions tool fixes subscribed=true; a path asking for the
    # unsubscribed shows cannot be replayed on it: an infrastructure problem, not an agent failure
    exp = experiment("podcast-selection")
    task = exp.task("p14")
    data = task.model_dump()
    data["solution"] = {"steps": [{"op": "list_subscriptions", "args": {"subscribed": False}}]}
    rec = play(
        create(),
        "p14",
        task=Task.model_validate(data),
        surface="focal",
        name="podcast-selection",
        exp=exp,
    )
    assert rec.status == "infra_error" and rec.success is None
    assert "list_subscriptions" in (rec.error or "")
