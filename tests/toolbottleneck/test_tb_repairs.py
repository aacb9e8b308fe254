"""Repairs against switches (seed 4.3) on hand-made records, against arithmetic by hand.

Two families, one task each, two repeats per arm (cell means 0, 0.5 or 1):

    arm (lane, cell)      f1    f2
    C0 control, unstressed  1     1
    C1 control, stressed    0     0.5
    R0 repaired, unstr.     1     1
    R1 repaired, stressed   1     0.5
    K0 switch, unstressed   1     0.5
    K1 switch, stressed     0.5   1

L = mean(C0 - C1) = (1 + 0.5) / 2 = 0.75; Gamma = mean(R1 - C1) = (1 + 0) / 2 = 0.5;
Sigma = Gamma - mean(R0 - C0) = 0.5; Sigma^k = mean(K1 - C1) - mean(K0 - C0)
= 0.5 - (-0.25) = 0.75; Delta = 0.5 - 0.75 = -0.25. At the stressed cell the repaired lane
and the switch both succeed 0.75 of the time; the repair spends 100 tokens, the switch 200.
"""

from __future__ import annotations

import pytest

from prereg.core.errors import BadInput
from prereg.core.yamlio import load_model
from prereg.experiments.toolbottleneck.study import StudyFile, StudyRepair
from prereg.reports.toolbottleneck.repairs import (
    NOT_MEASURED,
    RepairRow,
    repair_result,
    repair_tables,
    repairs_markdown,
)
from prereg.runners.toolbottleneck.study import StudyRecord

CELLS = {
    "c0": (1.0, 1.0),
    "c1": (0.0, 0.5),
    "r0": (1.0, 1.0),
    "r1": (1.0, 0.5),
    "k0": (1.0, 0.5),
    "k1": (0.5, 1.0),
}
TOKENS = {"r1": 100, "k1": 200}


def _record(
    arm: str, family: str, repeat: int, success: bool, tokens: dict[str, int]
) -> StudyRecord:
    return StudyRecord(
        study="s",
        study_digest="sha256:" + "0" * 64,
        arm=arm,
        cell={"V": 8, "W": "low", "D": "raw"},
        menu_mode="routed",
        profile="sim-steady",
        completion_cap=1024,
        task_id=f"{family}@0",
        family=family,
        intent=family,
        seed=0,
        repeat=repeat,
        variant="v",
        variant_digest="sha256:" + "0" * 64,
        success=success,
        first_unmet_obligation=None if success else "conclusion",
        terminal_flag=None if success else "wrong_conclusion",
        verdicts={},
        calls=2,
        turns=3,
        call_limit=4,
        turn_limit=6,
        tokens_input=tokens.get(arm, 50),
        tokens_output=0,
    )


def _records(tokens: dict[str, int] = TOKENS) -> list[StudyRecord]:
    out = []
    for arm, means in CELLS.items():
        for family, mean in zip(("f1", "f2"), means, strict=True):
            wins = int(mean * 2)
            out += [_record(arm, family, k, k < wins, tokens) for k in range(2)]
    return out


REPAIR = StudyRepair.model_validate(
    {
        "id": "routed",
        "pressure": "V",
        "repaired": {"stressed": "r1", "unstressed": "r0"},
        "control": {"stressed": "c1", "unstressed": "c0"},
        "switches": [{"id": "k", "stressed": "k1", "unstressed": "k0"}],
    }
)


def test_the_estimands_by_hand() -> None:
    r = repair_result(_records(), REPAIR, draws=2000)
    assert r.families == 2
    assert r.loss.value == pytest.approx(0.75)
    assert r.gain.value == pytest.approx(0.5)
    assert r.specific.value == pytest.approx(0.5)
    assert r.switches["k"].value == pytest.approx(0.75)
    assert r.delta.value == pytest.approx(-0.25)
    for e in (r.loss, r.gain, r.specific, r.switches["k"], r.delta):
        assert e.low <= e.value <= e.high or e.low == e.high


def test_the_decision_matrix_by_hand() -> None:
    r = repair_result(_records(), REPAIR, draws=2000)
    # success: R1 - K1 is +0.5 in f1 and -0.5 in f2: the interval covers zero
    assert r.success_vs["k"].value == pytest.approx(0.0)
    assert r.success_vs["k"].low < 0 < r.success_vs["k"].high
    assert not r.success_superior
    # tokens: 100 - 200 in both families: the interval is the point, below zero
    assert r.tokens_vs["k"].value == pytest.approx(-100)
    assert r.tokens_vs["k"].high == pytest.approx(-100)
    assert r.cost_superior
    # the switch is as good on success and worse on tokens: the repair is not dominated
    assert r.nondominated
    text = "\n".join(repairs_markdown([r]))
    assert "| routed | k |" in text


def test_a_switch_as_good_on_success_and_cheaper_dominates() -> None:
    r = repair_result(_records({"r1": 300, "k1": 200}), REPAIR, draws=500)
    assert not r.cost_superior
    assert not r.nondominated  # equal success, fewer tokens: the switch dominates


def _rows(
    wall: dict[str, float] | None,
    cost: dict[str, float] | None,
    tokens: dict[str, int] = TOKENS,
) -> list[RepairRow]:
    """The same episodes as repair rows, with wall time and cost per arm when given."""
    return [
        RepairRow(
            r.arm,
            r.task_id,
            r.family,
            r.success,
            float(r.tokens_input),
            None if wall is None else wall.get(r.arm, 1.0),
            None if cost is None else cost.get(r.arm, 0.01),
        )
        for r in _records(tokens)
    ]


def test_unmeasured_wall_time_and_cost_read_not_measured_and_never_zero() -> None:
    r = repair_result(_rows(None, None), REPAIR, draws=500)
    assert r.wall_vs == {"k": None} and r.cost_vs == {"k": None}
    assert r.cost_basis == "tokens" and r.cost_superior  # judged on tokens, and said so
    matrix = repair_tables([r])[1][2][0]
    assert matrix[4:6] == [NOT_MEASURED, NOT_MEASURED] and matrix[7] == "yes (tokens)"
    # one record without a cost is enough: a null is never read as zero
    rows = _rows(None, {"r1": 0.5, "k1": 0.1})
    rows[0] = RepairRow(rows[0].arm, rows[0].task_id, rows[0].family, rows[0].success, 1.0)
    assert repair_result(rows, REPAIR, draws=200).cost_vs == {"k": None}


def test_measured_cost_decides_cost_superiority_and_enters_the_pareto_comparison() -> None:
    # the repair spends fewer tokens (100 vs 200) but costs more (0.5 vs 0.1 USD) at the
    # stressed cell, with equal success: not cost-superior, yet not dominated (fewer tokens)
    r = repair_result(_rows({"r1": 2.0, "k1": 2.0}, {"r1": 0.5, "k1": 0.1}), REPAIR, draws=500)
    assert r.cost_basis == "cost"
    assert r.cost_vs["k"] is not None and r.cost_vs["k"].value == pytest.approx(0.4)
    assert r.wall_vs["k"] is not None and r.wall_vs["k"].value == pytest.approx(0.0)
    assert not r.cost_superior and r.nondominated
    # equal tokens and wall time, equal success, dearer: the switch dominates on cost alone
    same = {"r1": 200, "k1": 200}
    r = repair_result(
        _rows({"r1": 2.0, "k1": 2.0}, {"r1": 0.5, "k1": 0.1}, same), REPAIR, draws=500
    )
    assert not r.nondominated
    # and slower at equal cost: dominated on wall time alone
    r = repair_result(
        _rows({"r1": 3.0, "k1": 2.0}, {"r1": 0.1, "k1": 0.1}, same), REPAIR, draws=500
    )
    assert not r.nondominated
    # cheaper and faster: cost-superior, and no switch dominates it
    r = repair_result(_rows({"r1": 1.0, "k1": 3.0}, {"r1": 0.1, "k1": 0.5}), REPAIR, draws=500)
    assert r.cost_superior and r.nondominated
    assert r.wall_vs["k"] is not None and r.wall_vs["k"].value == pytest.approx(-2.0)
    matrix = repair_tables([r])[1][2][0]
    assert matrix[7] == "yes"


def test_unknown_arms_in_a_repair_are_refused() -> None:
    doc = (
        "id: s\nfamilies: [f.yaml]\narms:\n  - {id: a, menu: 8, workflow: low, encoding: raw}\n"
        "repairs:\n  - id: r\n    pressure: V\n    repaired: {stressed: a, unstressed: a}\n"
        "    control: {stressed: a, unstressed: b}\n"
        "    switches: [{id: k, stressed: a, unstressed: a}]\n"
    )
    with pytest.raises(BadInput) as info:
        load_model(StudyFile, doc, "study.yaml")
    assert "repairs[0].control.unstressed" in str(info.value.field)
