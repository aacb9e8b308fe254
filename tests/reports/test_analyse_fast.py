"""The analysis's fast paths give what the plain computation gives.

References: jsonschema's own validator on each call (argument validity remembered per
tool and arguments), hand-written choice sets (first choices built with dict lookups and
arm-wise grouping), the garbage collector's state around an analysis, and the outcome
definitions by hand (computed once, as an observation is built).
"""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from prereg.commands import analyse_cmds
from prereg.commands.analyse_cmds import _no_cycle_collection
from prereg.experiments.surfaces import Tool
from prereg.reports.invokerank.choices import first_choices
from prereg.reports.invokerank.servers import _Validity
from prereg.reports.observations import Obs, replaced
from tests.reports import observation

SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer"}, "flag": {"type": "boolean"}},
    "required": ["n"],
}
ARGUMENTS: list[Any] = [
    {"n": 1},
    {"n": True},  # equal to {"n": 1} in Python, not a JSON integer
    {"n": 1.0},  # a JSON integer (draft 2020-12)
    {"n": 1.5},
    {"flag": 1, "n": 2},
    {"n": 2, "flag": True},
    {"n": 1},
    {1: 2, "n": 1},  # a non-string key: JSON would write it as "1"
    ("n", 1),  # a tuple: JSON would write it as a list
    {"n": float("nan")},
    {"n": 1},
]


def _tool(name: str, schema: dict[str, Any]) -> Tool:
    return Tool(name, name, "d", schema, steps=(), surface="s")


def test_remembered_validity_equals_the_validator_on_every_call() -> None:
    loose = {"type": "object"}
    tools = [_tool("strict", SCHEMA), _tool("loose", loose)]
    valid = _Validity()
    for _ in range(2):  # the second pass answers from memory
        for tool, schema in zip(tools, (SCHEMA, loose), strict=True):
            for arguments in ARGUMENTS:
                expected = Draft202012Validator(schema).is_valid(arguments)
                assert valid(tool, arguments) is expected, (tool.name, arguments)
    assert valid(tools[0], {"n": 1}) and not valid(tools[0], {"n": True})


def _run(task: str, repeat: int, listed: list[str], first: str | None, intent: str) -> Obs:
    return observation(
        record_id=f"{task}-{repeat}",
        task_id=task,
        intent=intent,
        repeat=repeat,
        terminal_class="answered_without_search" if first is None else "focal",
        offer={
            "servers": [{"key": k, "role": "focal" if k == "f" else "competitor"} for k in listed],
            "first_server": first,
        },
    )


def test_first_choices_place_each_run_s_listing_by_hand() -> None:
    runs = [
        _run("t1", 0, ["f", "c1"], "c1", "find"),
        _run("t2", 0, ["c2", "f"], "f", "edit"),
        _run("t1", 1, ["f", "c1"], None, "find"),
        _run("t3", 0, ["c1", "c2", "f"], "c2", "find"),
        _run("t2", 1, ["c2", "f"], "ghost", "edit"),  # first call to nothing listed: dropped
    ]
    ch = first_choices(runs)
    assert ch is not None
    assert ch.keys == ["f", "c1", "c2"]  # in order of first listing
    assert ch.roles == ["focal", "competitor", "competitor"]
    assert ch.chosen == [1, 0, -1, 2]
    assert ch.available == [
        [True, True, False],
        [True, False, True],
        [True, True, False],
        [True, True, True],
    ]
    assert ch.position == [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [2.0, 0.0, 1.0]]
    assert ch.intents == ["edit", "find"]
    assert ch.cell == [1, 0, 1, 1]
    assert ch.prompt == [0, 1, 0, 2]  # tasks in order of first placed run
    assert ch.dropped == 1


class _Collector:
    """A stand-in for the ``gc`` module as :func:`_no_cycle_collection` uses it, recording
    each call. The collector's state is the process's, so a thread an earlier test left
    behind on the same worker (a loader inside ``held_gc``) could change what the real
    module reports mid-test; this one only the code under test changes."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.calls: list[str] = []

    def isenabled(self) -> bool:
        return self.enabled

    def disable(self) -> None:
        self.calls.append("disable")
        self.enabled = False

    def enable(self) -> None:
        self.calls.append("enable")
        self.enabled = True

    def freeze(self) -> None:
        self.calls.append("freeze")


@pytest.mark.parametrize("before", [True, False])
def test_the_collector_is_paused_during_an_analysis_and_restored(
    before: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    collector = _Collector(before)
    monkeypatch.setattr(analyse_cmds, "gc", collector)
    monkeypatch.setattr(analyse_cmds.PROCESS, "program", False)
    with _no_cycle_collection():
        assert not collector.enabled
    assert collector.enabled is before
    with pytest.raises(RuntimeError), _no_cycle_collection():
        raise RuntimeError("an analysis that fails")
    assert collector.enabled is before
    assert "freeze" not in collector.calls  # not the prereg program: nothing frozen


@pytest.mark.parametrize("program", [False, True])
def test_the_program_freezes_what_the_analysis_left_before_collecting_again(
    program: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In the prereg program (exiting next) the objects alive after the analysis are frozen
    before the collector resumes; in another program's process (a test, a notebook)
    nothing is."""
    collector = _Collector(True)
    monkeypatch.setattr(analyse_cmds, "gc", collector)
    monkeypatch.setattr(analyse_cmds.PROCESS, "program", program)
    with _no_cycle_collection():
        assert collector.calls == ["disable"]
    expected = ["disable", "freeze", "enable"] if program else ["disable", "enable"]
    assert collector.calls == expected


def _obs(**fields: Any) -> Obs:
    return observation(
        **{"funnel": {"surfaced": True, "selected": False, "invoked": None}, **fields}
    )


def test_outcomes_are_computed_as_the_run_is_built_and_again_on_replace() -> None:
    """The outcomes kept on an observation are the module's definitions, by hand: a
    null stage after a false one is not reached; a negative task has no funnel or focal
    outcome; an infrastructure failure none; one counted as a failure (built by
    ``replaced``, as loading does) every outcome false, its funnel on positives only."""
    run = _obs()
    assert [run.outcome(n) for n in ("success", "focal", "surfaced", "selected", "invoked")] == [
        True,
        True,
        True,
        False,
        False,  # null after a false stage: not reached
    ]
    assert run.outcome("executed") is False and _obs(funnel={}).outcome("surfaced") is None
    negative = _obs(polarity="negative", success=False)
    assert negative.outcome("success") is False and negative.outcome("focal") is None
    infra = _obs(status="infra_error", success=None)
    assert all(infra.outcome(n) is None for n in ("success", "focal", "completed", "no-such"))
    counted = replaced(infra, counted_failure=True)
    assert all(counted.outcome(n) is False for n in ("success", "focal", "completed"))
    assert replaced(infra, counted_failure=True, polarity="negative").outcome("focal") is None
    with pytest.raises(ValueError, match="unknown outcome"):
        run.outcome("no-such")
    assert not hasattr(run, "__dict__")  # slotted: nothing written on it after it is built


def test_an_observation_crosses_a_pipe_whole() -> None:
    """Forked children send observations back pickled (their own state format): every
    field, the computed outcomes included, comes back equal."""
    for run in (_obs(), replaced(_obs(status="infra_error", success=None), counted_failure=True)):
        back = pickle.loads(pickle.dumps(run, protocol=pickle.HIGHEST_PROTOCOL))
        assert back == run and back.outcomes == run.outcomes
        assert [getattr(back, n) for n in back.__struct_fields__] == [
            getattr(run, n) for n in run.__struct_fields__
        ]
