"""Registered need types (issue 41, item 4): validated, not digested when absent, and the
report's intent-level permutation test runs on them (checked against scipy)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from scipy import stats as sps

from prereg.registry.schema import Registration
from tests.judging.helpers import registration, write

NEED_TYPES = {
    "find-podcast": "knowledge",
    "follow-podcast": "action",
    "episodes": "knowledge",
    "mark-played": "private_state",
    "subscriptions": "fresh_data",  # not on the dev split: coded, never scored
}


def _doc(reg_id: str, need_types: dict[str, str] | None) -> dict:
    doc = registration(reg_id, repeats=2)
    doc["arms"] = [{"id": "a", "surface": "focal"}, {"id": "b", "surface": "focal"}]
    doc["primary"] = {"test": "mcnemar_exact", "compare": ["a", "b"], "alpha": 0.05}
    if need_types is not None:
        doc["invokerank"] = {"need_types": need_types}
    return doc


def test_absent_need_types_are_not_digested() -> None:
    reg = Registration.model_validate({**_doc("n", None), "invokerank": {"interval": "published"}})
    assert reg.model_dump(mode="json")["invokerank"] == {"interval": "published"}
    coded = Registration.model_validate(_doc("n", NEED_TYPES))
    assert coded.model_dump(mode="json")["invokerank"]["need_types"] == NEED_TYPES


def test_unknown_intent_or_value_is_refused(cli, ws: Path) -> None:
    path = write(ws, _doc("bad-intent", {**NEED_TYPES, "no-such-intent": "action"}))
    result = cli("--workspace", ws, "register", path)
    assert result.code == 2
    assert "invokerank.need_types.no-such-intent" in result.stderr
    assert "bad-intent.yaml" in result.stderr
    assert not (ws / "registry" / "frozen" / "bad-intent.yaml").exists()

    path = write(ws, _doc("bad-value", {**NEED_TYPES, "episodes": "vibes"}))
    result = cli("--workspace", ws, "register", path)
    assert result.code == 2
    assert "need_types" in result.stderr and "bad-value.yaml" in result.stderr


def _difference(x: np.ndarray, y: np.ndarray, axis: int) -> np.ndarray:
    return np.mean(x, axis=axis) - np.mean(y, axis=axis)


def test_report_runs_the_registered_need_type_test(cli, ws: Path) -> None:
    path = write(ws, _doc("coded", NEED_TYPES))
    assert cli("--workspace", ws, "register", path).code == 0
    assert cli("--workspace", ws, "run", "coded", "--no-progress").code == 0
    result = cli("--workspace", ws, "analyse", "coded")
    assert result.code == 0, result.stderr
    report = json.loads((ws / "reports" / "coded" / "report.json").read_text())
    arms = report["invokerank"]["arms"]
    tested = 0
    for arm in arms:
        if not arm["intents"]:
            continue
        scores = {i["intent"]: i["q"] for i in arm["intents"]}
        test = arm["need_test"]
        coded = {k: v for k, v in NEED_TYPES.items() if k in scores}
        tool = [scores[k] for k, v in coded.items() if v != "knowledge"]
        knowledge = [scores[k] for k, v in coded.items() if v == "knowledge"]
        assert test["coding"] == coded
        ref = sps.permutation_test(
            (np.array(tool), np.array(knowledge)),
            _difference,
            permutation_type="independent",
            alternative="greater",
            n_resamples=np.inf,
            vectorized=True,
        )
        assert test["pvalue"] == ref.pvalue or abs(test["pvalue"] - ref.pvalue) < 1e-12
        assert abs(test["difference"] - (np.mean(tool) - np.mean(knowledge))) < 1e-12
        tested += 1
    assert tested >= 1
