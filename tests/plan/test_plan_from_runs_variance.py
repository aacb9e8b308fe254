"""`plan --from-runs`: arms without variance stay out of the between-run SD (issue 39).

An arm whose runs are identical (every prompt the same outcome in every run) or that has
a single run carries no estimate of between-run variance: its moment estimate is 0 - 0,
not an estimate of 0. Averaged in, it pulled a pilot's between-run SD from 0.086 to 0.061.
Such an arm is left out of the pooled SD and flagged in the plan (which arm, why), and
the plan's runs per arm default to the pilot's repeats, said in a note.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from prereg.reports.planning.pilot import between_run
from tests.plan import store_pilot

PILOT = "drafts/music-library-pilot.yaml"
PROMPTS = 60
REPEATS = 3


def _sigma_run_by_hand(m: np.ndarray) -> float:
    """The moment estimate of one arm's between-run SD, written out independently."""
    n = m.shape[0]
    rates = m.mean(axis=0)
    s2 = np.var(rates, ddof=1)
    w = np.sum(np.var(m, axis=1, ddof=1)) / n**2
    return math.sqrt(max(0.0, (s2 - w) / (1 - 1 / n)))


def _varying(rng: np.random.Generator) -> np.ndarray:
    """Prompts x repeats with a shift shared by every prompt of a repeat (a run effect)."""
    p = rng.uniform(0.25, 0.75, PROMPTS)
    shift = np.array([-0.15, 0.0, 0.15])
    return (rng.random((PROMPTS, REPEATS)) < np.clip(p[:, None] + shift, 0, 1)).astype(float)


def _constant(rng: np.random.Generator) -> np.ndarray:
    """Prompts x repeats where every repeat is identical (a deterministic arm)."""
    column = (rng.random(PROMPTS) < 0.6).astype(float)
    return np.repeat(column[:, None], REPEATS, axis=1)


def test_plan_from_runs_leaves_out_an_arm_without_variance(ws: Path, cli: Any) -> None:
    rng = np.random.default_rng(39)
    outcomes = {"baseline": _varying(rng), "semantic": _constant(rng)}
    expected = _sigma_run_by_hand(outcomes["baseline"])
    assert expected > 0.05  # the varying arm does show a run effect
    entry = cli("-w", ws, "register", ws / PILOT, "--json").json()
    store_pilot(ws, entry, outcomes)

    result = cli("-w", ws, "plan", "--from-runs", "music-library-pilot", "--sims", "0", "--json")

    assert result.code == 0, result.stderr
    plan = result.json()
    # the pooled between-run SD is the varying arm's own, not averaged with a zero
    assert plan["sigma_run"] == pytest.approx(expected, rel=1e-12)
    between = plan["pilot"]["between_run"]
    assert [a["arm"] for a in between["by_arm"]] == ["baseline"]
    # the arm left out is flagged: which arm and why
    assert [(a["arm"], a["runs"]) for a in between["ignored"]] == [("semantic", REPEATS)]
    assert "identical" in between["ignored"][0]["reason"]
    flagged = [n for n in plan["notes"] if "'semantic'" in n]
    assert len(flagged) == 1 and "left out of the between-run SD" in flagged[0]
    # runs per arm default to the pilot's repeats, and the notes say so
    assert plan["runs_per_arm"] == REPEATS and plan["paired"]["runs_per_arm"] == REPEATS
    assert any(f"pilot's {REPEATS} repeats" in n and "runs per arm" in n for n in plan["notes"])
    human = cli("-w", ws, "plan", "--from-runs", "music-library-pilot", "--sims", "0")
    assert human.code == 0 and "'semantic'" in human.stdout
    # an explicit --runs-per-arm still wins, without the note
    one = cli(
        "-w", ws, "plan", "--from-runs", "music-library-pilot", "--runs-per-arm", "1",
        "--sims", "0", "--json",
    ).json()  # fmt: skip
    assert one["runs_per_arm"] == 1
    assert not any("runs per arm" in n and "pilot's" in n for n in one["notes"])


def test_between_run_flags_a_single_run_and_identical_runs() -> None:
    rng = np.random.default_rng(7)
    varying = _varying(rng)
    single = np.full((PROMPTS, REPEATS), np.nan)
    single[:, 0] = (rng.random(PROMPTS) < 0.5).astype(float)
    br = between_run({"a": varying, "one": single, "same": _constant(rng)}, permutations=99, seed=0)
    assert br.sigma_run == pytest.approx(_sigma_run_by_hand(varying), rel=1e-12)
    assert [a.arm for a in br.by_arm] == ["a"]
    reasons = {f["arm"]: f["reason"] for f in br.ignored}
    assert set(reasons) == {"one", "same"}
    assert "one run" in reasons["one"] and "identical" in reasons["same"]


def _register(ws: Path, cli: Any, reg_id: str) -> Any:
    text = (ws / PILOT).read_text().replace("id: music-library-pilot", f"id: {reg_id}", 1)
    path = ws / "drafts" / f"{reg_id}.yaml"
    path.write_text(text)
    result = cli("-w", ws, "register", path, "--json")
    assert result.code == 0, result.stderr
    return result.json()


def test_replicate_registrations_leave_out_an_arm_without_variance(ws: Path, cli: Any) -> None:
    rng = np.random.default_rng(8)
    p = rng.uniform(0.25, 0.75, PROMPTS)
    fixed = _constant(rng)
    cube = []
    for reg_id, shift in (("rep-a", -0.12), ("rep-b", 0.0), ("rep-c", 0.12)):
        entry = _register(ws, cli, reg_id)
        prob = np.clip(p + shift, 0, 1)
        baseline = (rng.random((PROMPTS, REPEATS)) < prob[:, None]).astype(float)
        cube.append(baseline)
        store_pilot(ws, entry, {"baseline": baseline, "semantic": fixed})
    y = np.stack(cube, axis=1)  # prompts x registrations x repeats
    n, _, k = y.shape
    s2 = np.var(y.mean(axis=(0, 2)), ddof=1)
    w = np.sum(np.var(y.reshape(n, -1), axis=1, ddof=1)) / (n * n * k)
    expected = math.sqrt(max(0.0, (s2 - w) / (1 - 1 / n)))
    assert expected > 0.05

    plan = cli(
        "-w", ws, "plan", "--from-runs", "rep-a", "rep-b", "rep-c", "--sims", "0", "--json"
    ).json()

    rep = plan["pilot"]["replicates"]
    assert rep["sigma_run"] == pytest.approx(expected, rel=1e-12)
    assert plan["sigma_run"] == pytest.approx(expected, rel=1e-12)
    assert [a["arm"] for a in rep["by_arm"]] == ["baseline"]
    assert [a["arm"] for a in rep["ignored"]] == ["semantic"]
    assert any("'semantic'" in n and "left out" in n for n in plan["notes"])
