"""The feasibility gate at ``register``: recorded either way, marked in the ledger."""

from __future__ import annotations

import json
import math
from pathlib import Path

from scipy.stats import norm

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
