"""`plan --from-runs` on a pilot with replicate sessions (issue 41; InvokeRank 7.3, 7.8).

A pilot registered with ``design.sessions = S`` is S sessions of K repeats: the session is
the replicate run, so the between-run component is estimated over sessions (each prompt's
success rate per session, the K repeats inside a session being repeat clustering), sigma_d
is rescaled in sessions and the plan is made in sessions per arm. References written here:
the balanced prompt x session two-way ANOVA of the session rates by sums of squares, the
estimator's mean over many simulated pilots against the simulated truth, and the power of
the planned MDE by simulating the planned design outright. A pilot without sessions plans
exactly as before; one session observed withholds the component with its reason.
"""

from __future__ import annotations

import math
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
import pytest

from prereg.reports.planning.pilot import (
    PilotData,
    between_run,
    between_sessions,
    discordance,
    estimate_pilot,
    paired_sigma_d,
    repeat_icc,
    session_sigma_d,
)
from prereg.stats import icc_binary
from tests.plan import store_pilot

PILOT = "drafts/music-library-pilot.yaml"
Z = NormalDist().inv_cdf(0.975) + NormalDist().inv_cdf(0.8)
#: the simulated truth: between-session SD, prompt x session interaction (what makes the
#: repeats inside a session agree beyond the prompt), SD of the per-prompt effect
SIGMA_RUN, SIGMA_PS, TAU = 0.07, 0.06, 0.10


def simulate_pilot(
    rng: np.random.Generator,
    prompts: int,
    sessions: int,
    per_session: int,
    effect: float = 0.0,
    sims: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Binary outcomes (sims x) prompts x (sessions K) of control and treatment, column j
    of session j // K: P(success) = base_i (+ effect + delta_i for the treatment) + one
    shift per arm and session N(0, SIGMA_RUN^2) + a prompt x session term N(0, SIGMA_PS^2)
    shared by the K repeats of a prompt in a session. Probabilities stay inside (0, 1)
    (base in 0.3..0.7): no clipping distorts the components."""
    lead = () if sims is None else (sims,)
    base = rng.uniform(0.3, 0.7, (*lead, prompts))
    delta = effect + TAU * rng.standard_normal((*lead, prompts))
    arms = []
    for arm_effect in (np.zeros_like(delta), delta):
        shift = SIGMA_RUN * rng.standard_normal((*lead, 1, sessions))
        inter = SIGMA_PS * rng.standard_normal((*lead, prompts, sessions))
        prob = np.clip((base + arm_effect)[..., None] + shift + inter, 0.0, 1.0)
        prob = np.repeat(prob, per_session, axis=-1)
        arms.append((rng.random(prob.shape) < prob).astype(float))
    return arms[0], arms[1]


def anova(y: np.ndarray) -> tuple[float, float, float]:
    """Balanced two-way ANOVA without replication of a prompts x sessions table, by sums
    of squares: (MS_prompt, MS_session, MS_residual)."""
    n, s = y.shape
    grand = y.mean()
    rows, cols = y.mean(axis=1), y.mean(axis=0)
    ss_rows = s * np.sum((rows - grand) ** 2)
    ss_cols = n * np.sum((cols - grand) ** 2)
    ss_res = np.sum((y - rows[:, None] - cols[None, :] + grand) ** 2)
    return ss_rows / (n - 1), ss_cols / (s - 1), ss_res / ((n - 1) * (s - 1))


def session_rates(y: np.ndarray, per_session: int) -> np.ndarray:
    n, width = y.shape
    return y.reshape(n, width // per_session, per_session).mean(axis=2)


# --- the estimators against a hand ANOVA ---------------------------------------------------


def test_the_components_are_the_two_way_anova_of_the_session_rates() -> None:
    rng = np.random.default_rng(41)
    k = 3
    c, t = simulate_pilot(rng, prompts=40, sessions=5, per_session=k)
    br = between_sessions({"c": c, "t": t}, k, permutations=199, seed=1)
    components = []
    for arm, y in (("c", c), ("t", t)):
        _, ms_session, ms_res = anova(session_rates(y, k))
        component = (ms_session - ms_res) / y.shape[0]
        components.append(component)
        mine = next(a for a in br.by_arm if a.arm == arm)
        assert mine.runs == 5 and mine.prompts == 40
        assert mine.sigma_run == pytest.approx(math.sqrt(max(0.0, component)), rel=1e-10)
    # equal sessions in both arms: the pooled component is their mean, clipped at 0
    assert br.sigma_run == pytest.approx(math.sqrt(max(0.0, np.mean(components))), rel=1e-10)
    assert 0.0 < br.pvalue <= 1.0 and br.ignored == []

    sd = session_sigma_d(c, t, k)
    ms_prompt, _, ms_res = anova(session_rates(t, k) - session_rates(c, k))
    # sigma_d^2 = MS_prompt / S (the variance of the prompts' mean differences);
    # omega_s^2 = MS_residual (a session's difference net of the shifts)
    assert sd.sigma_d == pytest.approx(math.sqrt(ms_prompt / 5), rel=1e-10)
    # in the repeats' units SigmaD.at reads: S K repeats, K omega_s^2
    assert sd.omega2 == pytest.approx(k * ms_res, rel=1e-10)
    assert sd.repeats == 5 * k
    # rescaled to S' sessions of K repeats: MS_prompt / S + MS_res (1/S' - 1/S)
    expected = math.sqrt(ms_prompt / 5 + ms_res * (1 / 10 - 1 / 5))
    assert sd.at(10 * k) == pytest.approx(expected, rel=1e-10)
    assert sd.at(5 * k) == pytest.approx(sd.sigma_d, rel=1e-12)

    est = estimate_pilot(
        PilotData([str(i) for i in range(40)], list(range(15)), {"c": c, "t": t}),
        "c",
        "t",
        permutations=99,
        sessions=5,
        per_session=k,
    )
    # the repeat clustering: the ICC with one group per (arm, prompt, session)
    groups = np.repeat(np.arange(2 * 40 * 5), k)
    outcomes = np.concatenate([c.reshape(-1), t.reshape(-1)])
    assert est.icc.rho == pytest.approx(icc_binary(outcomes, groups), rel=1e-10)
    assert est.icc.repeats == k
    assert est.to_json()["sessions"] == 5 and est.to_json()["per_session"] == k


def test_the_session_component_is_unbiased_for_the_simulated_one() -> None:
    """Over many simulated pilots the mean of the (unclipped) moment estimate is the
    simulated SIGMA_RUN^2, the prompt x session term (the repeats' agreement inside a
    session) not passing for session shifts."""
    rng = np.random.default_rng(7)
    k, reps = 3, 300
    ours = []
    for _ in range(reps):
        c, _ = simulate_pilot(rng, prompts=30, sessions=4, per_session=k)
        arm = between_sessions({"c": c}, k, permutations=1, seed=0).by_arm[0]
        n = arm.prompts
        ours.append((arm.observed_sd**2 - arm.within_sd**2) / (1 - 1 / n))
    se = np.std(ours, ddof=1) / math.sqrt(reps)
    assert abs(np.mean(ours) - SIGMA_RUN**2) < 4 * se, (np.mean(ours), se)


def test_without_sessions_the_estimate_is_the_repeat_estimate() -> None:
    rng = np.random.default_rng(3)
    c = (rng.random((12, 3)) < 0.5).astype(float)
    t = (rng.random((12, 3)) < 0.6).astype(float)
    data = PilotData([str(i) for i in range(12)], [0, 1, 2], {"c": c, "t": t})
    for kwargs in ({}, {"sessions": 1, "per_session": 3}):
        est = estimate_pilot(data, "c", "t", permutations=99, seed=2, **kwargs)
        assert est.sigma_d == paired_sigma_d(c, t)
        assert est.icc == repeat_icc({"c": c, "t": t})
        assert est.between_run == between_run({"c": c, "t": t}, permutations=99, seed=2)
        assert est.discordance == discordance(c, t)
        assert "sessions" not in est.to_json() and "per_session" not in est.to_json()


def test_one_session_withholds_the_component_with_its_reason() -> None:
    rng = np.random.default_rng(5)
    c, t = simulate_pilot(rng, prompts=20, sessions=2, per_session=2)
    c[:, 2:] = np.nan  # only session 0 recorded
    t[:, 2:] = np.nan
    br = between_sessions({"c": c, "t": t}, 2, permutations=9)
    assert math.isnan(br.sigma_run) and br.by_arm == []
    assert all("one session" in a["reason"] and "not estimable" in a["reason"] for a in br.ignored)
    sd = session_sigma_d(c, t, 2)
    assert math.isfinite(sd.sigma_d) and math.isnan(sd.omega2)  # not rescalable


# --- the command -----------------------------------------------------------------------------


def _register(ws: Path, cli: Any, reg_id: str, sessions: int, repeats: int) -> dict[str, Any]:
    text = (ws / PILOT).read_text().replace("id: music-library-pilot", f"id: {reg_id}", 1)
    text = text.replace(
        "design: {repeats: 3, rotations: 1, seed: 7}",
        f"design: {{repeats: {repeats}, sessions: {sessions}, rotations: 1, seed: 7}}",
    )
    text += "invokerank: {interval: calibrated}\n"
    path = ws / "drafts" / f"{reg_id}.yaml"
    path.write_text(text)
    result = cli("-w", ws, "register", path, "--json")
    assert result.code == 0, result.stderr
    entry: dict[str, Any] = result.json()
    return entry


def _plan(cli: Any, ws: Path, *args: str) -> dict[str, Any]:
    result = cli("-w", ws, "plan", "--from-runs", *args, "--sims", "0", "--json")
    assert result.code == 0, result.stderr
    plan: dict[str, Any] = result.json()
    return plan


def test_plan_from_a_sessions_pilot_plans_in_sessions_with_the_planned_power(
    ws: Path, cli: Any
) -> None:
    prompts, sessions, k = 40, 16, 2
    rng = np.random.default_rng(2026)
    c, t = simulate_pilot(rng, prompts, sessions, k)
    entry = _register(ws, cli, "sessions-pilot", sessions, sessions * k)
    store_pilot(ws, entry, {"baseline": c, "semantic": t})

    plan = _plan(cli, ws, "sessions-pilot")
    pilot = plan["pilot"]
    assert plan["run_unit"] == "session" and plan["runs_per_arm"] == sessions
    assert pilot["sessions"] == sessions and pilot["per_session"] == k
    # the components, by the hand ANOVA
    parts = [anova(session_rates(y, k)) for y in (c, t)]
    component = np.mean([(ms_s - ms_r) / prompts for _, ms_s, ms_r in parts])
    assert plan["sigma_run"] == pytest.approx(math.sqrt(component), rel=1e-10)
    ms_prompt, _, _ = anova(session_rates(t, k) - session_rates(c, k))
    assert plan["sigma_d"] == pytest.approx(math.sqrt(ms_prompt / sessions), rel=1e-10)
    mde = plan["mde"]
    assert mde == pytest.approx(
        Z * math.sqrt(plan["sigma_d"] ** 2 / prompts + 2 * plan["sigma_run"] ** 2 / sessions)
    )
    assert any("sessions per arm" in n for n in plan["notes"])
    assert not any("replicate runs (the between-run SD over repeats" in n for n in plan["notes"])

    # the planned design simulated outright at the planned MDE: the z test of the
    # difference of arm means with the planned variance rejects about 80% of the time
    sims = 400
    yc, yt = simulate_pilot(rng, prompts, sessions, k, effect=mde, sims=sims)
    estimate = yt.mean(axis=(1, 2)) - yc.mean(axis=(1, 2))
    power = float(np.mean(np.abs(estimate) > NormalDist().inv_cdf(0.975) * mde / Z))
    assert abs(power - 0.8) < 0.1, power

    # another number of sessions, as a person reads it: sigma_d rescaled, in sessions
    human = cli(
        "-w", ws, "plan", "--from-runs", "sessions-pilot", "--runs-per-arm", "4", "--sims", "0"
    )
    assert human.code == 0, human.stderr
    text = " ".join(human.stdout.split())
    assert "4 session(s) per arm" in text and "sigma_run (sessions)" in text
    assert f"rescaled from the pilot's {sessions} session(s) to 4 session(s) per arm" in text


def test_one_session_observed_is_withheld_never_a_number(ws: Path, cli: Any) -> None:
    rng = np.random.default_rng(9)
    c, t = simulate_pilot(rng, 20, 2, 2)
    entry = _register(ws, cli, "half-run", 2, 4)
    store_pilot(ws, entry, {"baseline": c[:, :2], "semantic": t[:, :2]})  # session 0 only
    plan = _plan(cli, ws, "half-run")
    between = plan["pilot"]["between_run"]
    assert between["sigma_run"] is None and between["by_arm"] == []
    assert all("not estimable" in a["reason"] for a in between["ignored"])
    assert any("not estimable" in n and "withheld" in n for n in plan["notes"])
    assert plan["sigma_run"] == 0.0 and plan["sources"]["sigma_run"] == "default"
    human = cli("-w", ws, "plan", "--from-runs", "half-run", "--sims", "0")
    assert human.code == 0, human.stderr
    line = next(x for x in human.stdout.splitlines() if "sigma_run (sessions)" in x)
    assert "withheld" in line and not any(ch.isdigit() for ch in line.split("withheld")[0])


def test_replicate_registrations_with_sessions_are_refused(ws: Path, cli: Any) -> None:
    _register(ws, cli, "s-a", 2, 4)
    _register(ws, cli, "s-b", 2, 4)
    result = cli("-w", ws, "plan", "--from-runs", "s-a", "s-b", "--json")
    assert result.code == 2 and "replicate sessions" in result.stderr
