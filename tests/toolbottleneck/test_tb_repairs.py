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
from prereg.reports.toolbottleneck_repairs import repair_result, repairs_markdown
from prereg.runners.toolbottleneck_study import StudyRecord

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
