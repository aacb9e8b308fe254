"""The report JSON: keys, provenance, repeats and design effect, stopping, multiplicity."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from prereg.core.version import code_version
from prereg.registry.stream_order import stream_order
from prereg.stats import design_effect, icc_binary, jeffreys_interval
from tests.reports import (
    append,
    intent_of,
    make_lab,
    paired_records,
    record,
    register,
    registration,
    seed002_outcomes,
)


def test_json_keys_provenance_and_files(cli, ws: Path) -> None:
    tasks = make_lab(ws, n_tasks=24)
    digest = register(
        cli,
        ws,
        registration(
            "lab-json",
            secondary=[
                {"test": "paired_bootstrap", "draws": 2000},
                {"test": "tost_paired", "margin": 0.3},
            ],
            multiplicity={"method": "holm", "q": 0.1, "family": "secondary"},
        ),
    )
    ctl, trt = seed002_outcomes(24, 10, 17, 7)
    records = paired_records(
        "lab-json",
        digest,
        tasks,
        ctl,
        trt,
        cost_usd=0.01,
        model_requested="local-bm25",
        model_returned="local-bm25",
    )
    append(ws, records)

    result = cli("-w", ws, "analyse", "lab-json", "--json")
    assert result.code == 0, result.stderr
    data = result.json()
    for key in ("registration", "digest", "kind", "complete", "verdict", "primary", "arms"):
        assert key in data
    assert data["registration"] == "lab-json" and data["digest"] == digest
    primary = data["primary"]
    for key in ("test", "estimate", "interval", "pvalue"):
        assert primary[key] is not None
    assert primary["provenance"]["function"] == "prereg.stats.mcnemar_exact"
    assert primary["provenance"]["registration_field"] == "primary"
    units = sorted(f"{r.arm}/{r.task_id}/r{r.repeat}" for r in records)
    assert primary["provenance"]["runs"]["count"] == 48
    assert (
        primary["provenance"]["runs"]["units_digest"]
        == "sha256:" + hashlib.sha256("\n".join(units).encode()).hexdigest()
    )
    assert data["runs"]["units"] == units
    # the record of what was analysed: ledger head, version, models, spend, failures
    verify = cli("-w", ws, "verify", "--json").json()
    assert data["provenance"]["ledger_head"] == verify["ledger_head"]
    assert data["provenance"]["prereg_version"] == code_version()
    assert data["runs"]["models_requested"] == ["local-bm25"]
    assert data["runs"]["models_returned"] == ["local-bm25"]
    assert data["runs"]["spend_usd"] == pytest.approx(0.48)
    assert data["runs"]["infra_errors"] == 0
    # secondary tests and the registered family
    assert [s["test"] for s in data["secondary"]] == ["paired_bootstrap", "tost_paired"]
    assert all(s["reading"] is None for s in data["secondary"])  # never a verdict
    fam = data["multiplicity"]
    assert fam["family"] == "secondary" and fam["method"] == "holm"
    assert len(fam["members"]) == 2
    # files on disk: report.json is the same document
    folder = Path(data["report_dir"])
    on_disk = json.loads((folder / "report.json").read_text())
    assert on_disk == {k: v for k, v in data.items() if k not in ("report_dir", "files")}
    assert {"arm_rates", "forest"} <= set(data["figures"])
    for name in data["figures"]:
        assert (folder / "figures" / f"{name}.png").read_bytes()[:4] == b"\x89PNG"
    # named before the largest is drawn (report.json is made meanwhile): exactly the drawn
    assert sorted(data["figures"]) == sorted(f.stem for f in (folder / "figures").iterdir())


def test_unmeasured_quantities_are_null(cli, ws: Path) -> None:
    tasks = make_lab(ws, n_tasks=6)
    digest = register(cli, ws, registration("lab-null"))
    ok = [[True]] * 6
    append(ws, paired_records("lab-null", digest, tasks, ok, ok))
    data = cli("-w", ws, "analyse", "lab-null", "--json").json()
    assert data["runs"]["spend_usd"] is None and data["runs"]["tokens"] is None
    assert all(a["spend_usd"] is None for a in data["arms"])
    assert data["exploratory"]["funnel"] == {"baseline": None, "semantic": None}
    assert data["exploratory"]["selection_rate"] == {"baseline": None, "semantic": None}


def test_arm_intervals_use_the_design_effect_of_the_repeats(cli, ws: Path) -> None:
    tasks = make_lab(ws, n_tasks=12)
    digest = register(cli, ws, registration("lab-rep", repeats=3))
    # strongly clustered repeats: a task's three repeats mostly agree
    pattern = [
        [True, True, True],
        [False, False, False],
        [True, True, False],
        [False, False, True],
    ] * 3
    append(ws, paired_records("lab-rep", digest, tasks, pattern, pattern))
    data = cli("-w", ws, "analyse", "lab-rep", "--json").json()

    arm = data["arms"][0]
    values = [v for row in pattern for v in row]
    groups = [t for t in tasks for _ in range(3)]
    rho = icc_binary(values, groups)
    deff = design_effect([3] * 12, rho)
    expected = jeffreys_interval(sum(values), 36, level=0.95, deff=deff)
    assert arm["icc"] == pytest.approx(rho)
    assert arm["design_effect"] == pytest.approx(deff) and deff > 1
    assert arm["interval"]["low"] == pytest.approx(expected.low)
    assert arm["interval"]["high"] == pytest.approx(expected.high)
    naive = jeffreys_interval(sum(values), 36, level=0.95)
    assert arm["interval"]["high"] - arm["interval"]["low"] > naive.high - naive.low


def test_stopping_rule_decides_and_completes_early(cli, ws: Path) -> None:
    tasks = make_lab(ws, n_tasks=30)
    digest = register(
        cli,
        ws,
        registration(
            "lab-stop", stopping={"rule": "beta-mixture", "threshold": 20, "min_prompts": 10}
        ),
    )
    # the treatment wins each of the first 12 tasks in the registered stopping order (a
    # seeded permutation, design.seed 3); nothing else ran
    first = stream_order(tasks, 3)[:12]
    assert first != tasks[:12]
    intents = intent_of(tasks)
    append(
        ws,
        [
            record("lab-stop", digest, arm, task, arm == "semantic", intent=intents[task])
            for arm in ("baseline", "semantic")
            for task in first
        ],
    )

    data = cli("-w", ws, "analyse", "lab-stop", "--json").json()
    stop = data["stopping"]
    # E after t pairs all one way, Beta(1,1) prior: 2^t / (t + 1); >= 20 from t = 7 on,
    # so the first look allowed (t = 10) stops
    assert stop["crossed"] is True and stop["stop_at"] == 10
    assert stop["evalue"] == pytest.approx(2**10 / 11)
    assert data["complete"] is True and data["completeness"]["stopping_cut"] == 10
    assert data["verdict"] == "supported"
    assert data["verdict_detail"]["decided_by"] == "stopping rule"
    assert "eprocess" in data["figures"]


def test_per_intent_family_under_e_bh(cli, ws: Path) -> None:
    tasks = make_lab(ws, n_tasks=24, n_intents=2)
    digest = register(
        cli,
        ws,
        registration("lab-ebh", multiplicity={"method": "e-bh", "q": 0.1, "family": "per-intent"}),
    )
    # intent i1 (even positions): treatment wins all 12; intent i2: no difference
    ctl = [[False] if k % 2 == 0 else [True] for k in range(24)]
    trt = [[True]] * 24
    append(ws, paired_records("lab-ebh", digest, tasks, ctl, trt, n_intents=2))
    data = cli("-w", ws, "analyse", "lab-ebh", "--json").json()
    members = {m["hypothesis"]: m for m in data["multiplicity"]["members"]}
    assert members["intent i1"]["evalue"] == pytest.approx(2**12 / 13)
    assert members["intent i1"]["reject"] is True
    assert members["intent i2"]["reject"] is False
    assert data["per_intent_registered"] is True
    assert [row["intent"] for row in data["per_intent"]] == ["i1", "i2"]


def test_negative_tasks_and_funnel_stages_are_exploratory_only(cli, ws: Path) -> None:
    tasks = make_lab(ws, n_tasks=4, negatives=2)
    digest = register(cli, ws, registration("lab-funnel"))
    funnel = {
        "surfaced": True,
        "selected": True,
        "invoked": True,
        "executed": True,
        "completed": None,
    }
    records = []
    for arm in ("baseline", "semantic"):
        for t in tasks:
            negative = t.startswith("n")
            records.append(
                record(
                    "lab-funnel",
                    digest,
                    arm,
                    t,
                    True,
                    polarity="negative" if negative else "positive",
                    funnel={} if negative else funnel,
                )
            )
    append(ws, records)
    data = cli("-w", ws, "analyse", "lab-funnel", "--json").json()
    fun = data["exploratory"]["funnel"]["baseline"]
    assert fun["stages"]["selected"] == {
        "reached": 4,
        "of": 4,
        "rate": 1.0,
        "conditional_rate": 1.0,
    }
    assert fun["stages"]["completed"] is None
    assert data["exploratory"]["negatives"]["baseline"]["runs"] == 2
    assert data["arms"][0]["measured"] == 6  # success counts every task of the split
