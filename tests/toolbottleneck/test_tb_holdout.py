"""The structural holdout (issue 42, item 5): Table 10 and L, Gamma, Sigma, Delta (and
the canonical control's L and Gamma) recomputed from the exported records by an
independent numpy implementation, the exact family-cluster bootstrap enumerated here
with itertools; tiny designs withheld with a reason; Delta's support is +-200 points."""

from __future__ import annotations

import itertools
import json
import math
from collections import defaultdict
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from prereg.core.errors import BadInput
from prereg.experiments.toolbottleneck.study import load_study
from prereg.reports.toolbottleneck.holdout import (
    analyse_holdout,
    check_support,
    holdout_markdown,
)
from prereg.reports.toolbottleneck.repairs import Estimate
from prereg.runners.toolbottleneck.study import StudyRecord, run_study
from tests.toolbottleneck.helpers import BUNDLED

COMBOS = [("model", "native"), ("model", "canonical"), ("controller", "native")]


#: held-out families whose intents no core family shares (the bundled holdout study's)
HOLDOUT = [
    "contract-renewal-notice.yaml",
    "interview-panel-check.yaml",
    "leave-request-overlap.yaml",
    "mailing-list-access.yaml",
    "meeting-room-conflict.yaml",
    "recurring-meeting-cleanup.yaml",
    "retention-hold-check.yaml",
    "supplier-refund-claim.yaml",
    "external-share-review.yaml",
    "folder-permission-audit.yaml",
]
CORE = ["card-charge-dispute.yaml", "expense-report-review.yaml"]


def _study(tmp_path: Path, held: int, profile: str = "sim-truncating") -> Path:
    fams = tmp_path / "families"
    fams.mkdir()
    names = HOLDOUT[:held] + CORE
    for n in names:
        (fams / n).write_bytes((BUNDLED / n).read_bytes())
    arms: list[dict[str, Any]] = [{"id": "core", "menu": 8, "workflow": "low", "encoding": "raw"}]
    for o, d in COMBOS:
        for h in (0, 14):
            arm = {
                "id": f"{o}-{d}-{h}",
                "menu": 8,
                "workflow": "low",
                "encoding": "raw",
                "handoffs": h,
                "delivery": d,
            }
            if o == "controller":
                arm["controller"] = "public-handoff"
            arms.append(arm)
    doc = {
        "id": "holdout",
        "families": [f"families/{n}" for n in names],
        "policy": {"profile": profile, "params": {"stop_slip": 0.04}},
        "holdout": [n[:-5] for n in names[:held]],
        "arms": arms,
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@cache
def _multisets(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Every bootstrap multiset of n clusters as counts, with its multinomial probability."""
    rows, probs = [], []
    for combo in itertools.combinations_with_replacement(range(n), n):
        counts = np.bincount(combo, minlength=n)
        coef = math.factorial(n)
        for c in counts:
            coef //= math.factorial(int(c))
        rows.append(counts)
        probs.append(coef / n**n)
    return np.array(rows, dtype=float), np.array(probs)


def _quantile(values: np.ndarray, prob: np.ndarray, q: float) -> float:
    order = np.argsort(values, kind="stable")
    cdf = np.cumsum(prob[order])
    return float(values[order][np.argmax(cdf >= q - 1e-12)])


def _reference(exported: list[dict[str, Any]]) -> dict[str, tuple[float, float, float]]:
    """The quantities from the exported JSON records, in numpy, exact bootstrap."""
    rows = [r for r in exported if "orchestration" in r]
    arms = {}
    for r in rows:
        arms[(r["orchestration"], r["delivery"], r["certified_minimum"])] = r["arm"]
    fams = sorted({r["family"] for r in rows})
    names = [arms[(o, d, c)] for o, d in COMBOS for c in (2, 30)]
    # family x arm: mean over the family's tasks of the task's mean over repeats
    task = defaultdict(list)
    for r in rows:
        task[(r["family"], r["task_id"], r["arm"])].append(float(r["success"]))
    m = np.zeros((len(fams), len(names)))
    for i, f in enumerate(fams):
        for j, a in enumerate(names):
            vals = [np.mean(v) for (ff, _, aa), v in task.items() if ff == f and aa == a]
            m[i, j] = np.mean(vals)
    counts, prob = _multisets(len(fams))
    boot = counts @ m / len(fams)
    point = m.mean(axis=0)

    def q(x: np.ndarray) -> dict[str, np.ndarray]:
        n0, n1, k0, k1, c0, c1 = (x[..., j] for j in range(6))
        sigma = (c1 - n1) - (c0 - n0)
        sigma_k = (k1 - n1) - (k0 - n0)
        return {
            "L": n0 - n1,
            "Gamma": c1 - n1,
            "Sigma": sigma,
            "Sigma^canonical": sigma_k,
            "Delta": sigma - sigma_k,
            "L^canonical": k0 - n0,
            "Gamma^canonical": k1 - n1,
        }

    pts, bs = q(point), q(boot)
    return {
        k: (float(pts[k]), _quantile(bs[k], prob, 0.025), _quantile(bs[k], prob, 0.975))
        for k in pts
    }


def test_table10_and_quantities_recomputed_from_exported_records(tmp_path: Path) -> None:
    path = _study(tmp_path, held=10)
    run = run_study(load_study(path), str(path))
    exported = [json.loads(r.model_dump_json()) for r in run.records]
    # the core arm plays only the core families, the holdout arms only the held-out ones
    core = {r["family"] for r in exported if r["arm"] == "core"}
    held = {r["family"] for r in exported if r["arm"] != "core"}
    assert len(core) == 2 and len(held) == 10 and not core & held
    assert all("orchestration" not in r for r in exported if r["arm"] == "core")

    result = analyse_holdout([StudyRecord.model_validate(r) for r in exported])
    # Table 10, recomputed
    for row in result.table:
        rs = [
            r
            for r in exported
            if r.get("orchestration") == row.orchestration
            and r.get("delivery") == row.delivery
            and r.get("certified_minimum") == row.calls
        ]
        assert row.rows == len(rs) == 10
        assert row.vts == pytest.approx(np.mean([r["success"] for r in rs]))
        assert row.requests == pytest.approx(np.mean([r["requests"] for r in rs]))
        assert row.controller_calls == pytest.approx(np.mean([r["controller_calls"] for r in rs]))
        assert row.model_calls == pytest.approx(np.mean([r["model_calls"] for r in rs]))
        assert row.executed == pytest.approx(np.mean([r["calls"] for r in rs]))
        assert row.tokens == pytest.approx(
            np.mean([r["tokens_input"] + r["tokens_output"] for r in rs])
        )
        assert row.over_budget == sum(r["over_budget"] for r in rs)
        assert row.executed == pytest.approx(row.controller_calls + row.model_calls)
    assert [(r.orchestration, r.delivery, r.calls) for r in result.table] == [
        (o, d, c) for c in (2, 30) for o, d in COMBOS
    ]
    # L, Gamma, Sigma, Sigma^k, Delta and the control's figures, recomputed
    assert result.withheld is None and result.families == 10
    ref = _reference(exported)
    for name, (value, low, high) in ref.items():
        got = result.quantities[name]
        assert got.value == pytest.approx(value, abs=1e-12), name
        if got.low is None:
            assert got.reason is not None and abs(high - low) < 1e-12, name
        else:
            assert (got.low, got.high) == pytest.approx((low, high), abs=1e-12), name
    text = "\n".join(holdout_markdown(result))
    assert "Structural holdout arms (Table 10)" in text and "[-200, 200]" in text


def test_a_tiny_design_withholds_the_intervals_with_a_reason(tmp_path: Path) -> None:
    path = _study(tmp_path, held=3)
    run = run_study(load_study(path), str(path))
    result = analyse_holdout(list(run.records))
    assert result.families == 3 and len(result.table) == 6
    for name, e in result.quantities.items():
        assert e.low is None and e.high is None, name
        assert e.reason is not None and "too few" in e.reason, name
    text = "\n".join(holdout_markdown(result))
    assert "too few families (3 &lt; 10): no interval" in text  # Markdown-escaped
    assert "a demonstration" in text


def test_missing_arms_withhold_the_quantities_and_keep_the_table(tmp_path: Path) -> None:
    path = _study(tmp_path, held=3)
    run = run_study(load_study(path), str(path))
    kept = [r for r in run.records if r.arm != "model-canonical-14"]
    result = analyse_holdout(kept)
    assert result.quantities == {}
    assert result.withheld == "model/canonical at 30 calls: no arm (one arm is read)"
    assert len(result.table) == 5
    assert "Withheld: model/canonical at 30 calls" in "\n".join(holdout_markdown(result))


def test_delta_support_is_200_points() -> None:
    # Delta may pass 100 points (the no-repair means cancel), never 200
    check_support("Delta", Estimate(0.94, 0.85, 1.02))
    check_support("Sigma", Estimate(-1.5, -1.9, -1.1))
    with pytest.raises(AssertionError):
        check_support("Delta", Estimate(1.9, 1.5, 2.1))
    with pytest.raises(AssertionError):
        check_support("L", Estimate(0.96, 0.9, 1.02))  # a difference of two rates
    with pytest.raises(AssertionError):
        check_support("Gamma", Estimate(0.5, 0.6, 0.7))  # estimate outside its interval


def test_the_bundled_holdout_study_prints_table_10_with_intervals() -> None:
    path = BUNDLED.parent / "holdout-study.yaml"
    study = load_study(path)
    assert len(study.spec.holdout or []) == 10
    run = run_study(study, str(path))
    result = analyse_holdout(list(run.records))
    assert result.withheld is None and result.families == 10
    assert len(result.table) == 6 and all(r.rows == 10 for r in result.table)
    # the controller passes the 30-call cells issuing all but the model's first call
    ctrl30 = next(r for r in result.table if r.orchestration == "controller" and r.calls == 30)
    assert ctrl30.vts == 1.0 and ctrl30.controller_calls >= 28
    assert all(e.low is not None for k, e in result.quantities.items() if k in ("L", "Delta"))


def test_a_held_out_intent_shared_with_a_core_family_is_refused(tmp_path: Path) -> None:
    path = _study(tmp_path, held=3)
    doc = yaml.safe_load(path.read_text())
    doc["holdout"] = ["card-charge-dispute"]  # expense-report-review (core) shares its intent
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(BadInput) as err:
        load_study(path)
    assert err.value.field == "holdout[0]"
    assert "expense-approval" in str(err.value) and "expense-report-review" in str(err.value)
