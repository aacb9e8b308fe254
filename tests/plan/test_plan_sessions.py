"""Planning with replicate sessions (issue 41, item 5 of the sessions work; InvokeRank 7.3,
7.8): a registration with ``design.sessions = S`` is S sessions of repeats / S repeats
each, and the between-run component is one shift per session, not per repeat. So the
feasibility gate, the design's MDE and the calibration population divide the run component
by S. A registration without sessions plans exactly as before.

References are independent of the code under test: the MDE against a simulation of the
design written here (prompt effects, one shift per arm and session, within-prompt noise
over every repeat) whose power at the planned MDE must be the planned power within Monte
Carlo error; the population against a numpy re-implementation of the seeded draws before
sessions existed, and of the model with session shifts.
"""

from __future__ import annotations

import math
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
import pytest

from prereg.registry import feasibility
from prereg.registry.calibration import (
    Figures,
    SplitTasks,
    build_population,
    resolve_figures,
    runs_per_arm,
)
from prereg.registry.schema import Registration
from prereg.stats.calibration_model import population, simulate
from tests.invokerank.test_ir_weights import REGISTRATION

Z = NormalDist().inv_cdf(0.975) + NormalDist().inv_cdf(0.8)


def _registration(design: dict[str, Any], plan: dict[str, Any] | None = None) -> Registration:
    data: dict[str, Any] = {**REGISTRATION, "design": design}
    if design.get("sessions", 1) > 1:
        data["invokerank"] = {"interval": "calibrated"}
    if plan is not None:
        data["plan"] = plan
    return Registration.model_validate(data)


# --- a registration without sessions plans exactly as before ------------------------------


def test_without_sessions_the_gate_records_what_it_did() -> None:
    plan = {"mde": 0.2, "sigma_d": 0.3, "sigma_run": 0.05}
    for design in ({"repeats": 3, "seed": 7}, {"repeats": 3, "sessions": 1, "seed": 7}):
        record = feasibility._mde(_registration(design, plan), 40)
        # by hand: every repeat its own run, R = 3
        expected = Z * math.sqrt(0.3**2 / 40 + 2 * 0.05**2 / 3)
        assert record["runs_per_arm"] == 3
        assert record["achievable_mde"] == pytest.approx(expected, rel=1e-9)
        assert "sessions" not in record and "repeats" not in record  # the same keys as before
        assert runs_per_arm(_registration(design)) == 3


def _old_simulate(pop: Any, effects: list[float], sims: int, rng: np.random.Generator) -> Any:
    """The draws of ``simulate`` before sessions existed (one shift per repeat), written out
    here as the reference a design without sessions must reproduce bit for bit."""
    p, r = pop.prompts, pop.runs
    a, b = pop.beta_params
    theta = rng.beta(a, b, (sims, p))
    other = rng.beta(a, b, (sims, p))
    same = rng.random((sims, p)) < pop.shared
    base_t = np.where(same, theta, other)
    s = pop.run_shift_sd
    shift_c = s * rng.standard_normal((sims, 1, r))
    shift_t = s * rng.standard_normal((sims, 1, r))
    u_c = rng.random((sims, p, r))
    u_t = rng.random((sims, p, r))
    control = u_c < np.clip(theta[:, :, None] + shift_c, 0.0, 1.0)
    treatment = {
        d: u_t < np.clip(pop.shifted(base_t, d)[:, :, None] + shift_t, 0.0, 1.0) for d in effects
    }
    return control, treatment


def test_without_sessions_the_population_draws_as_before() -> None:
    reg = _registration({"repeats": 3, "seed": 7}, {"mde": 0.2, "sigma_d": 0.3, "sigma_run": 0.05})
    split = SplitTasks.count_only(12)
    pop = build_population(reg, split, resolve_figures(reg, split))
    assert pop.sessions == 1 and pop.runs == 3
    assert "sessions" not in pop.describe()
    new = simulate(pop, [0.0, 0.1], 50, np.random.default_rng(3))
    control, treatment = _old_simulate(pop, [0.0, 0.1], 50, np.random.default_rng(3))
    assert np.array_equal(new.control, control)
    assert all(np.array_equal(new.treatment[d], treatment[d]) for d in (0.0, 0.1))
    # the true values (shift-averaged aggregates) too: one shift per repeat
    ref = population(12, 3, 0.3, sigma_run=0.05)
    assert pop.truth("majority", 0.1) == ref.truth("majority", 0.1)
    assert np.array_equal(pop.shifts, ref.shifts)


# --- with sessions: the run component is one per session ----------------------------------


def _simulated_power(
    mde: float,
    *,
    prompts: int,
    sessions: int,
    per_session: int,
    tau: float,
    sigma_e: float,
    sigma_run: float,
    var_planned: float,
    sims: int,
    rng: np.random.Generator,
) -> float:
    """The design simulated outright: prompt i's true difference mde + N(0, tau^2), one
    shift per arm and session N(0, sigma_run^2) shared by every prompt and every repeat
    of the session, and independent noise N(0, sigma_e^2) on every run of every repeat.
    The two-sided z test of the difference of arm means at alpha 0.05 with the planned
    variance; returns the share of rejections."""
    reps = sessions * per_session
    delta = mde + tau * rng.standard_normal((sims, prompts))
    shift = sigma_run * rng.standard_normal((sims, 2, sessions))
    noise = sigma_e * rng.standard_normal((sims, 2, prompts, reps))
    per_repeat_shift = np.repeat(shift, per_session, axis=-1)  # session s: repeats s K..
    arm_c = noise[:, 0] + per_repeat_shift[:, 0, None, :]
    arm_t = delta[:, :, None] + noise[:, 1] + per_repeat_shift[:, 1, None, :]
    estimate = (arm_t - arm_c).mean(axis=(1, 2))
    z = estimate / math.sqrt(var_planned)
    return float(np.mean(np.abs(z) > NormalDist().inv_cdf(0.975)))


def test_with_sessions_the_planned_mde_has_the_planned_power_in_simulation() -> None:
    prompts, sessions, per_session = 30, 2, 3
    tau, sigma_e, sigma_run = 0.2, 0.4, 0.06
    # sigma_d: the SD over prompts of the per-prompt difference of arm means over the
    # 6 repeats (within-session shifts excluded: the run component is planned apart)
    sigma_d = math.sqrt(tau**2 + 2 * sigma_e**2 / (sessions * per_session))
    plan = {"mde": 0.5, "sigma_d": sigma_d, "sigma_run": sigma_run}
    reg = _registration({"repeats": 6, "sessions": 2, "seed": 7}, plan)
    record = feasibility._mde(reg, prompts)
    assert record["runs_per_arm"] == 2
    assert record["sessions"] == 2 and record["repeats"] == 6
    mde = record["achievable_mde"]
    var_sessions = sigma_d**2 / prompts + 2 * sigma_run**2 / sessions
    assert mde == pytest.approx(Z * math.sqrt(var_sessions), rel=1e-9)

    sims = 40_000
    rng = np.random.default_rng(20261205)
    common = {
        "prompts": prompts,
        "sessions": sessions,
        "per_session": per_session,
        "tau": tau,
        "sigma_e": sigma_e,
        "sigma_run": sigma_run,
        "sims": sims,
    }
    power = _simulated_power(mde, var_planned=var_sessions, rng=rng, **common)
    se = math.sqrt(0.8 * 0.2 / sims)
    assert abs(power - 0.8) < 4 * se, (power, se)
    # the figure planned as before (every repeat its own run) is too small an MDE: at
    # it the design's real power falls well short of 0.8
    var_repeats = sigma_d**2 / prompts + 2 * sigma_run**2 / 6
    old_mde = Z * math.sqrt(var_repeats)
    assert old_mde < mde
    old_power = _simulated_power(old_mde, var_planned=var_sessions, rng=rng, **common)
    assert old_power < 0.8 - 8 * se, old_power


def test_the_gate_refuses_a_plan_only_sessions_cannot_reach() -> None:
    # reachable if the 6 repeats were 6 runs, not with 2 sessions
    sigma_d, sigma_run, prompts = 0.25, 0.08, 50
    with_repeats = Z * math.sqrt(sigma_d**2 / prompts + 2 * sigma_run**2 / 6)
    with_sessions = Z * math.sqrt(sigma_d**2 / prompts + 2 * sigma_run**2 / 2)
    target = (with_repeats + with_sessions) / 2
    plan = {"mde": target, "sigma_d": sigma_d, "sigma_run": sigma_run}
    assert feasibility._mde(_registration({"repeats": 6, "seed": 7}, plan), prompts)["mde_reached"]
    record = feasibility._mde(
        _registration({"repeats": 6, "sessions": 2, "seed": 7}, plan), prompts
    )
    assert record["mde_reached"] is False
    assert record["achievable_mde"] == pytest.approx(with_sessions, rel=1e-9)


def test_the_design_mde_without_a_plan_divides_by_sessions() -> None:
    reg = _registration({"repeats": 6, "sessions": 3, "seed": 7})
    split = SplitTasks.count_only(20)
    figures = resolve_figures(reg, split, Figures(sigma_run=0.05))
    # no plan: the effect is the design's own MDE, sigma_d the default 0.35
    expected = Z * math.sqrt(0.35**2 / 20 + 2 * 0.05**2 / 3)
    assert abs(figures.effect) == pytest.approx(expected, rel=1e-9)


def test_the_population_shares_one_shift_per_session() -> None:
    reg = _registration(
        {"repeats": 6, "sessions": 2, "seed": 7}, {"mde": 0.1, "sigma_d": 0.3, "sigma_run": 0.08}
    )
    split = SplitTasks.count_only(10)
    pop = build_population(reg, split, resolve_figures(reg, split))
    assert pop.sessions == 2 and pop.runs == 6 and pop.describe()["sessions"] == 2
    # the truth's fixed shift vectors: constant within a session, apart between sessions
    assert np.array_equal(pop.shifts[:, 0], pop.shifts[:, 2])
    assert np.array_equal(pop.shifts[:, 3], pop.shifts[:, 5])
    assert not np.array_equal(pop.shifts[:, 0], pop.shifts[:, 3])

    # the spread of the difference of arm means over simulated data sets against a
    # numpy simulation of the model written here with one shift per arm and session
    sims = 20_000
    draws = simulate(pop, [0.0], sims, np.random.default_rng(11))
    diff = draws.treatment[0.0].mean(axis=(1, 2)) - draws.control.mean(axis=(1, 2))

    rng = np.random.default_rng(12)
    a, b = pop.beta_params
    theta = rng.beta(a, b, (sims, pop.prompts))
    other = rng.beta(a, b, (sims, pop.prompts))
    rates_t = np.where(rng.random((sims, pop.prompts)) < pop.shared, theta, other)
    shifts = pop.run_shift_sd * rng.standard_normal((2, sims, 1, 2))
    shifts = np.repeat(shifts, 3, axis=-1)
    y_c = rng.random((sims, pop.prompts, 6)) < np.clip(theta[..., None] + shifts[0], 0, 1)
    y_t = rng.random((sims, pop.prompts, 6)) < np.clip(rates_t[..., None] + shifts[1], 0, 1)
    ref = y_t.mean(axis=(1, 2)) - y_c.mean(axis=(1, 2))
    # two sample variances of ~normal data: the ratio's SE is about sqrt(4 / sims)
    assert np.var(diff) / np.var(ref) == pytest.approx(1.0, abs=4 * math.sqrt(4 / sims))
    # and markedly more than with one shift per repeat (the old reading)
    per_repeat = population(10, 6, pop.sigma_d, sigma_run=0.08, icc=pop.icc)
    old = simulate(per_repeat, [0.0], sims, np.random.default_rng(11))
    old_diff = old.treatment[0.0].mean(axis=(1, 2)) - old.control.mean(axis=(1, 2))
    assert np.var(diff) > 1.2 * np.var(old_diff)


def test_population_refuses_sessions_that_do_not_divide_the_repeats() -> None:
    with pytest.raises(ValueError, match="sessions 4 must divide"):
        population(10, 6, 0.3, sigma_run=0.05, sessions=4)


def test_register_records_the_sessions_plan(ws: Path, cli: Any) -> None:
    text = (ws / "drafts" / "music-library-pilot.yaml").read_text()
    text = text.replace("id: music-library-pilot", "id: sessions-plan", 1).replace(
        "design: {repeats: 3, rotations: 1, seed: 7}",
        "design: {repeats: 4, sessions: 2, rotations: 1, seed: 7}",
    )
    text += "invokerank: {interval: calibrated}\nplan: {mde: 0.5, sigma_d: 0.3, sigma_run: 0.05}\n"
    path = ws / "drafts" / "sessions-plan.yaml"
    path.write_text(text)
    result = cli("-w", ws, "register", path, "--json")
    assert result.code == 0, result.stderr
    gate = result.json()["feasibility"]
    assert gate["runs_per_arm"] == 2 and gate["sessions"] == 2 and gate["repeats"] == 4
    n = gate["prompts"]
    assert gate["achievable_mde"] == pytest.approx(
        Z * math.sqrt(0.3**2 / n + 2 * 0.05**2 / 2), rel=1e-9
    )


def test_plan_from_a_sessions_pilot_plans_in_sessions(ws: Path, cli: Any) -> None:
    """--from-runs reads a pilot with sessions in sessions (the estimators are checked in
    test_plan_from_runs_sessions.py); a pilot without them plans as before."""
    text = (ws / "drafts" / "music-library-pilot.yaml").read_text()
    sessions = text.replace("id: music-library-pilot", "id: sessions-pilot", 1).replace(
        "design: {repeats: 3, rotations: 1, seed: 7}",
        "design: {repeats: 4, sessions: 2, rotations: 1, seed: 7}",
    )
    sessions += "invokerank: {interval: calibrated}\n"
    path = ws / "drafts" / "sessions-pilot.yaml"
    path.write_text(sessions)
    plain_draft = ws / "drafts" / "music-library-pilot.yaml"
    for draft, reg_id in ((path, "sessions-pilot"), (plain_draft, "music-library-pilot")):
        assert cli("-w", ws, "register", draft).code == 0
        assert cli("-w", ws, "run", reg_id).code == 0
    planned = cli("-w", ws, "plan", "--from-runs", "sessions-pilot", "--mde", "0.3", "--json")
    assert planned.code == 0, planned.stderr
    plan = planned.json()
    assert plan["run_unit"] == "session" and plan["runs_per_arm"] == 2
    assert plan["pilot"]["sessions"] == 2 and plan["pilot"]["per_session"] == 2
    assert not [n for n in plan["notes"] if "reads its 4 repeats as" in n]
    plain = cli("-w", ws, "plan", "--from-runs", "music-library-pilot", "--mde", "0.3", "--json")
    assert plain.code == 0, plain.stderr
    assert "run_unit" not in plain.json() and "sessions" not in plain.json()["pilot"]
    assert plain.json()["runs_per_arm"] == 3
