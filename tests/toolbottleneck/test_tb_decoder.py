"""The failure-record decoder (seed appendix H) on hand-made packets, against hand counts."""

from __future__ import annotations

import pytest

from prereg.reports.toolbottleneck.decoder import (
    FEATURES,
    Packet,
    balanced_accuracy,
    calls_bin,
    decode_pressure,
    loio_predictions,
    packets,
)
from prereg.runners.toolbottleneck.study import StudyRecord


def _rec(
    arm: str,
    cell: dict[str, object],
    success: bool,
    *,
    task: str = "f@0",
    intent: str = "i1",
    obligation: str | None = None,
    calls: int = 2,
    cap: int = 1024,
    flag: str | None = None,
    repeat: int = 0,
) -> StudyRecord:
    return StudyRecord(
        study="s",
        study_digest="sha256:" + "0" * 64,
        arm=arm,
        cell=cell,
        menu_mode="routed",
        profile="sim-steady",
        completion_cap=cap,
        task_id=task,
        family=task.split("@")[0],
        intent=intent,
        seed=0,
        repeat=repeat,
        variant="v",
        variant_digest="sha256:" + "0" * 64,
        success=success,
        first_unmet_obligation=None if success else (obligation or "conclusion"),
        terminal_flag=None if success else (flag or "wrong_conclusion"),
        verdicts={},
        calls=calls,
        turns=calls + 1,
        call_limit=5,
        turn_limit=7,
        tokens_input=10,
        tokens_output=1,
    )


CELLS = {
    "base": {"V": 8, "W": "low", "D": "raw"},
    "v": {"V": 128, "W": "low", "D": "raw"},
    "w": {"V": 8, "W": "high", "D": "raw"},
    "d": {"V": 8, "W": "low", "D": "linked"},
}


def _unit(task: str, outcomes: dict[str, bool]) -> list[StudyRecord]:
    return [_rec(arm, CELLS[arm], ok, task=task) for arm, ok in outcomes.items()]


def test_packets_keep_units_whose_baseline_succeeds_and_one_stressed_cell_fails() -> None:
    records = (
        _unit("a@0", {"base": True, "v": False, "w": True, "d": True})  # a V packet
        + _unit("b@0", {"base": True, "v": True, "w": True, "d": False})  # a D packet
        + _unit("c@0", {"base": True, "v": False, "w": False, "d": True})  # two fail
        + _unit("e@0", {"base": False, "v": False, "w": True, "d": True})  # baseline fails
        + _unit("g@0", {"base": True, "v": True, "w": True, "d": True})  # nothing fails
    )
    got = packets(records, "base")
    assert [(p.failed.task_id, p.label) for p in got] == [("a@0", "V"), ("b@0", "D")]


def _packet(intent: str, label: str, obligation: str, calls: int) -> Packet:
    return Packet(intent, label, _rec("x", CELLS["v"], False, obligation=obligation, calls=calls))


def test_leave_one_intent_out_with_an_unseen_tuple_falls_back_to_the_prior() -> None:
    items = [
        _packet("i1", "V", "selection", 0),
        _packet("i1", "W", "evidence", 7),
        _packet("i2", "V", "selection", 0),
        _packet("i2", "W", "evidence", 7),
        _packet("i2", "V", "selection", 0),
        _packet("i3", "D", "protocol", 3),  # no other intent has 'protocol'
    ]
    predicted = loio_predictions(items, FEATURES["obligation"])
    # i3's tuple is unseen: the training prior is V (3 V, 2 W)
    assert predicted == ["V", "W", "V", "W", "V", "V"]
    # recalls: V 3/3, W 2/2, D 0/1
    assert balanced_accuracy([p.label for p in items], predicted) == pytest.approx(2 / 3)


def test_the_record_beats_call_counts_when_calls_cannot_tell_the_pressures_apart() -> None:
    items = [
        _packet(intent, label, obligation, calls)
        for intent in ("i1", "i2", "i3")
        for label, obligation, calls in (
            ("V", "selection", 3),
            ("W", "evidence", 4),
            ("D", "conclusion", 5),
        )
    ]
    assert {calls_bin(c) for c in (3, 4, 5)} == {"3-5"}
    result = decode_pressure(items, draws=300)
    assert result is not None
    assert result.classes == {"V": 3, "W": 3, "D": 3}
    assert result.accuracy["obligation"][0] == pytest.approx(1.0)
    # one bin for all: the majority is a three-way tie, broken in the order V, W, D
    assert result.accuracy["calls"][0] == pytest.approx(1 / 3)
    assert result.gains["obligation"][0] == pytest.approx(2 / 3)
    assert result.level == pytest.approx(1 - 0.05 / 3)
    assert decode_pressure(items[:3]) is None  # one intent: no held-out fold to train on
