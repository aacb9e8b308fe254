"""The feasibility gate at ``register``: recorded either way, marked in the ledger."""

from __future__ import annotations

import json
import math
from pathlib import Path

from scipy.stats import norm

from prereg.core.yamlio import load_model
from prereg.experiments import Task, load_experiment
from prereg.experiments.loader import folder_reader
from prereg.registry.feasibility import check
from prereg.registry.schema import Registration

PILOT = "drafts/music-library-pilot.yaml"


def _with_plan(ws: Path, plan: str, reg_id: str) -> Path:
    text = (ws / PILOT).read_text().replace("id: music-library-pilot", f"id: {reg_id}")
    path = ws / "drafts" / f"{reg_id}.yaml"
    path.write_text(text + f"plan: {plan}\n")
    return path


def test_hopeless_design_is_recorded_not_runnable(ws: Path, cli) -> None:
    result = cli(
        "-w", ws, "register", _with_plan(ws, "{mde: 0.01, sigma_d: 0.5}", "hopeless"), "--json"
    )
    assert result.code == 0, result.stderr
    data = result.json()
    assert data["runnable"] is False
    gate = data["feasibility"]
    n = gate["prompts"]
    # independent closed form: (z_{0.975} + z_{0.8}) * sigma_d / sqrt(n)
    expected = (norm.ppf(0.975) + norm.ppf(0.8)) * 0.5 / math.sqrt(n)
    assert math.isclose(gate["achievable_mde"], expected, rel_tol=1e-9)
    assert "0.010" in gate["reason"]
    line = json.loads((ws / "registry" / "ledger.jsonl").read_text().splitlines()[-1])
    assert line["runnable"] is False
    listed = cli("-w", ws, "list", "--json").json()["registrations"]
    assert listed[0]["runnable"] is False


def test_feasible_design_is_runnable(ws: Path, cli) -> None:
    result = cli("-w", ws, "register", _with_plan(ws, "{mde: 0.9, sigma_d: 0.3}", "easy"), "--json")
    assert result.code == 0, result.stderr
    assert result.json()["runnable"] is True
    assert result.json()["feasibility"]["runnable"] is True


def test_no_plan_no_gate(ws: Path, cli) -> None:
    data = cli("-w", ws, "register", ws / PILOT, "--json").json()
    assert data["runnable"] is True and data["feasibility"] is None


# ---- the calibration gate (issue 14, item 3) --------------------------------------------

CONFIRMATORY = "drafts/music-library-confirmatory.yaml"


def _confirmatory(ws: Path, reg_id: str, *replace: tuple[str, str], extra: str = "") -> Path:
    text = (
        (ws / CONFIRMATORY).read_text().replace("id: music-library-confirmatory", f"id: {reg_id}")
    )
    for old, new in replace:
        assert old in text, old
        text = text.replace(old, new)
    path = ws / "drafts" / f"{reg_id}.yaml"
    path.write_text(text + extra)
    return path


def test_confirmatory_primary_is_calibrated_and_runnable(ws: Path, cli) -> None:
    data = cli("-w", ws, "register", ws / CONFIRMATORY, "--json").json()
    gate = data["feasibility"]
    assert data["runnable"] is True and gate["runnable"] is True and gate["reason"] is None
    rows = gate["calibration"]["rows"]
    assert {(r["label"], r["quantity"], r["scenario"]) for r in rows} == {
        ("primary", "type I error", "null"),
        ("primary", "coverage", "null"),
        ("primary", "power", "planned effect"),
        ("primary", "coverage", "planned effect"),
    }
    assert gate["calibration"]["seed"] == 11 and gate["calibration"]["sims"] == 1000
    assert gate["registered_mde"] is None  # no plan: only the calibration is recorded


def test_inflated_type_i_error_is_not_runnable(ws: Path, cli) -> None:
    # one run per arm with a between-run SD of 10 points: McNemar's test on 18 tasks
    # ignores the run component and rejects too often with no effect
    path = _confirmatory(
        ws,
        "run-heavy",
        ("repeats: 3", "repeats: 1"),
        extra="plan: {mde: 0.47, sigma_d: 0.35, sigma_run: 0.1}\n",
    )
    data = cli("-w", ws, "register", path, "--json").json()
    gate = data["feasibility"]
    assert data["runnable"] is False and gate["mde_reached"] is True
    assert "primary test mcnemar_exact: simulated type I error" in gate["reason"]
    assert "exceeds its nominal 0.05" in gate["reason"]
    type_i = next(r for r in gate["calibration"]["rows"] if r["quantity"] == "type I error")
    assert type_i["estimate"] > 0.05 + 2 * math.sqrt(0.05 * 0.95 / 1000)
    assert any("covers" in why for why in gate["reasons"])  # Tango's interval too
    line = json.loads((ws / "registry" / "ledger.jsonl").read_text().splitlines()[-1])
    assert line["runnable"] is False


def test_percentile_bootstrap_primary_over_few_clusters(ws: Path, cli) -> None:
    path = _confirmatory(
        ws,
        "boot-primary",
        (
            "primary: {test: mcnemar_exact, alpha: 0.05, sides: two-sided, favours: semantic, "
            "aggregate: majority}",
            "primary: {test: paired_bootstrap, alpha: 0.05, favours: semantic, draws: 2000}",
        ),
    )
    data = cli("-w", ws, "register", path, "--json").json()
    gate = data["feasibility"]
    assert data["runnable"] is False
    assert "primary test paired_bootstrap: a percentile bootstrap over 18 task(s)" in gate["reason"]
    assert "fewer than 20 clusters" in gate["reason"]
    # the secondary bootstrap of the draft is warned of too
    assert any(w.startswith("secondary[0] test paired_bootstrap") for w in gate["warnings"])


def _draft_and_tasks(ws: Path, name: str) -> tuple[Registration, list[Task]]:
    draft = ws / "drafts" / name
    reg = load_model(Registration, draft.read_bytes(), str(draft))
    experiment = load_experiment(folder_reader(ws / "experiments" / reg.experiment), reg.experiment)
    return reg, experiment.tasks_in_split(reg.split)


def test_exploratory_few_clusters_is_a_warning(ws: Path) -> None:
    reg, tasks = _draft_and_tasks(ws, "podcast-selection-controls.yaml")
    gate = check(reg, len(tasks), tasks)
    assert gate is not None and gate["runnable"] is True and gate["calibration"] is None
    assert len(gate["warnings"]) == 1
    positive = sum(t.polarity == "positive" for t in tasks)  # outcome 'selected'
    assert f"over {positive} task(s), fewer than 20 clusters" in gate["warnings"][0]


def test_few_clusters_are_counted_by_the_registered_unit(ws: Path) -> None:
    reg, tasks = _draft_and_tasks(ws, "music-library-hosts.yaml")
    clusters = len({t.cluster for t in tasks})
    assert clusters < 20 <= len(tasks)
    gate = check(reg, len(tasks), tasks)
    assert gate is not None and gate["runnable"] is True
    assert gate["warnings"] == [
        f"secondary[0] test paired_bootstrap: a percentile bootstrap over {clusters} "
        "cluster(s), fewer than 20 clusters, is anti-conservative (intervals too narrow, "
        "type I error above alpha)"
    ]
    # without the tasks the clusters are unknown, and nothing is claimed about them
    assert check(reg, len(tasks)) is None
