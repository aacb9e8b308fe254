"""The `prereg plan` command: JSON contract, human output, bad input, --from-runs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import tree_digest
from tests.plan import pilot_records

PILOT = "drafts/music-library-pilot.yaml"


def test_json_contract(cli) -> None:
    result = cli("plan", "--sigma-d", "0.28", "--prompts", "58", "--json")
    assert result.code == 0, result.stderr
    data = result.json()
    assert data["prompts"] == 58
    assert round(data["mde"], 3) == 0.103  # a proportion, not points
    assert data["min_discordant"] == 6
    for key, value in {
        "sigma_d": 0.28,
        "alpha": 0.05,
        "power": 0.8,
        "sigma_run": 0.0,
        "runs_per_arm": 1,
        "p01": None,
        "p10": None,
    }.items():
        assert data[key] == value, key
    assert data["inputs"]["sigma_d"] == 0.28 and data["inputs"]["prompts"] == 58
    assert data["inputs"]["mde"] is None
    assert data["solved_for"] == "mde" and data["reachable"] is True
    assert {row["prompts"] for row in data["table"]} >= {58, 100, 200, 400}
    assert data["mcnemar"] is None and data["sequential"] is None and data["pilot"] is None


def test_json_mde_mode_and_floor_message(cli) -> None:
    data = cli(
        "plan", "--sigma-d", "0.23", "--mde", "0.08", "--sigma-run", "0.025", "--json"
    ).json()
    assert data["prompts"] is None and data["mde"] == 0.08
    assert data["reachable"] is False and data["floor_mde"] > 0.08
    assert "below the between-run floor" in data["message"]
    assert "no number of prompts" in data["message"]
    human = cli("plan", "--sigma-d", "0.23", "--mde", "0.08", "--sigma-run", "0.025")
    assert human.code == 0
    assert "between-run floor" in human.stdout and "no number of prompts" in human.stdout


def test_human_output_is_a_figure_9_table(cli) -> None:
    result = cli("plan", "--sigma-d", "0.2268", "--prompts", "58", "--sigma-run", "0.0252")
    assert result.code == 0, result.stderr
    out = result.stdout
    assert "MDE by prompts and alpha" in out and "MDE with run component" in out
    assert "8.3" in out and "13.0" in out  # the 58-prompt row, without and with runs
    assert "6 discordant pairs" in " ".join(out.split())


def test_help_documents_the_command(cli) -> None:
    result = cli("plan", "--help")
    assert result.code == 0
    for fragment in (
        "--sigma-d",
        "--prompts",
        "--mde",
        "--sigma-run",
        "--runs-per-arm",
        "--p01",
        "--p10",
        "--from-runs",
        "--stopping-threshold",
        "--min-prompts",
        "--sims",
        "--seed",
        "Connor",
        "floor",
        "min_discordant",
    ):
        assert fragment in result.stdout, fragment


BAD = [
    (["--sigma-d", "-0.1", "--prompts", "10"], "--sigma-d"),
    (["--sigma-d", "0", "--prompts", "10"], "--sigma-d"),
    (["--sigma-d", "nan", "--prompts", "10"], "--sigma-d"),
    (["--sigma-d", "0.3", "--prompts", "10", "--alpha", "0"], "--alpha"),
    (["--sigma-d", "0.3", "--prompts", "10", "--alpha", "1"], "--alpha"),
    (["--sigma-d", "0.3", "--prompts", "10", "--power", "1.2"], "--power"),
    (["--sigma-d", "0.3", "--prompts", "10", "--power", "0"], "--power"),
    (["--sigma-d", "0.3"], "--prompts/--mde"),
    (["--sigma-d", "0.3", "--prompts", "10", "--mde", "0.1"], "--prompts/--mde"),
    (["--sigma-d", "0.3", "--mde", "10"], "--mde"),
    (["--sigma-d", "0.3", "--prompts", "0"], "--prompts"),
    (["--sigma-d", "0.3", "--prompts", "10", "--sigma-run", "-1"], "--sigma-run"),
    (["--sigma-d", "0.3", "--prompts", "10", "--runs-per-arm", "0"], "--runs-per-arm"),
    (["--prompts", "10"], "--sigma-d"),
    (["--p01", "0.2"], "--p10"),
    (["--p01", "0.7", "--p10", "0.5"], "--p01/--p10"),
    (["--p01", "-0.1", "--p10", "0.5"], "--p01"),
    (["--p01", "0.2", "--p10", "0.1", "--stopping-threshold", "1"], "--stopping-threshold"),
    (["--p01", "0.2", "--p10", "0.1", "--sims", "-1"], "--sims"),
    ([], "--sigma-d"),
]


@pytest.mark.parametrize(("args", "option"), BAD, ids=[" ".join(a) or "nothing" for a, _ in BAD])
def test_bad_input_exits_2_naming_the_option(ws: Path, cli, args: list[str], option: str) -> None:
    before = tree_digest(ws)
    result = cli("-w", ws, "plan", *args)
    assert result.code == 2, (result.stdout, result.stderr)
    assert option in result.stderr, result.stderr
    as_json = cli("-w", ws, "plan", *args, "--json")
    assert as_json.code == 2
    error = json.loads(as_json.stdout)
    assert error["exit_code"] == 2 and error["field"] == option
    assert tree_digest(ws) == before  # nothing written


def test_mde_in_points_gets_a_hint(cli) -> None:
    result = cli("plan", "--sigma-d", "0.3", "--mde", "10")
    assert result.code == 2 and "is 0.1" in result.stderr


def test_non_numeric_option_is_a_usage_error(cli) -> None:
    result = cli("plan", "--sigma-d", "abc", "--prompts", "10")
    assert result.code == 2 and "--sigma-d" in result.stderr


def test_sequential_monitor_simulation(cli) -> None:
    args = (
        "plan",
        "--p01",
        "0.25",
        "--p10",
        "0.05",
        "--max-prompts",
        "200",
        "--sims",
        "2000",
        "--seed",
        "3",
        "--json",
    )
    data = cli(*args).json()
    seq = data["sequential"]
    assert seq["threshold"] == 20.0 and seq["min_prompts"] == 40 and seq["max_prompts"] == 200
    assert seq["null_p01"] == seq["null_p10"] == pytest.approx(0.15)
    # Ville: the monitor's type I error is at most 1 / threshold (plus Monte Carlo error)
    assert seq["type_i_error"] <= seq["type_i_bound"] + 3 * max(seq["type_i_error_se"], 0.005)
    assert seq["power"] > 0.8
    assert 40 <= seq["expected_prompts"] < 200
    assert seq["expected_prompts"] < seq["expected_prompts_null"]
    assert cli(*args).json() == data  # seeded: reproducible to the last digit
    custom = cli(
        "plan",
        "--p01",
        "0.25",
        "--p10",
        "0.05",
        "--stopping-threshold",
        "40",
        "--min-prompts",
        "60",
        "--sims",
        "500",
        "--json",
    ).json()["sequential"]
    assert custom["threshold"] == 40 and custom["min_prompts"] == 60
    assert custom["max_prompts"] >= 60  # default horizon: the plan, at least min_prompts
    assert (
        cli("plan", "--p01", "0.25", "--p10", "0.05", "--sims", "0", "--json").json()["sequential"]
        is None
    )
    human = cli("plan", "--p01", "0.25", "--p10", "0.05", "--sims", "500")
    assert "type I error" in human.stdout and "Connor" in human.stdout


# ---- --from-runs -----------------------------------------------------------------------------


def test_from_runs_estimates_then_plans(ws: Path, cli) -> None:
    from prereg.reports.planning.pilot import PilotData, estimate_pilot
    from prereg.runners.store.sqlite import RunStore

    entry = cli("-w", ws, "register", ws / PILOT, "--json").json()
    rng = np.random.default_rng(11)
    p = rng.uniform(0.2, 0.9, 40)
    outcomes = {
        "baseline": (rng.random((40, 3)) < p[:, None]).astype(float),
        "semantic": (rng.random((40, 3)) < np.clip(p + 0.1, 0, 1)[:, None]).astype(float),
    }
    with RunStore(ws / "runs") as store:
        store.extend(pilot_records(entry, outcomes))
    before = tree_digest(ws)
    result = cli(
        "-w",
        ws,
        "plan",
        "--from-runs",
        "music-library-pilot",
        "--mde",
        "0.10",
        "--runs-per-arm",
        "3",
        "--json",
    )
    assert result.code == 0, result.stderr
    data = result.json()
    pilot = data["pilot"]
    assert pilot["registration"] == "music-library-pilot" and pilot["digest"] == entry["digest"]
    assert pilot["prompts"] == 40 and pilot["repeats"] == 3 and pilot["records"] == 240
    expected = estimate_pilot(
        PilotData([f"task-{i:03d}" for i in range(40)], [0, 1, 2], outcomes),
        "baseline",
        "semantic",
        seed=0,
    )
    assert data["sigma_d"] == pytest.approx(expected.sigma_d.at(3))
    assert data["sigma_d"] == pytest.approx(expected.sigma_d.sigma_d)  # same K as the pilot
    assert data["sigma_run"] == pytest.approx(expected.between_run.sigma_run)
    assert data["p01"] == pytest.approx(expected.discordance.p01)
    assert pilot["icc"]["rho"] == pytest.approx(expected.icc.rho)
    assert pilot["between_run"]["pvalue"] == pytest.approx(expected.between_run.pvalue)
    assert data["sources"] == {"sigma_d": "pilot", "sigma_run": "pilot", "p01_p10": "pilot"}
    assert data["mde"] == 0.10 and data["sequential"] is not None
    # explicit options override the estimates; without --prompts/--mde the pilot size is used
    over = cli(
        "-w",
        ws,
        "plan",
        "--from-runs",
        "music-library-pilot",
        "--sigma-d",
        "0.3",
        "--sigma-run",
        "0",
        "--sims",
        "0",
        "--json",
    ).json()
    assert over["sigma_d"] == 0.3 and over["sigma_run"] == 0.0 and over["prompts"] == 40
    assert over["sources"]["sigma_d"] == "option"
    # without --runs-per-arm the plan keeps the pilot's 3 repeats and says so
    kept = cli(
        "-w", ws, "plan", "--from-runs", "music-library-pilot", "--sims", "0", "--json"
    ).json()
    assert kept["sigma_d"] == pytest.approx(expected.sigma_d.at(3))
    # a single planned run per arm: sigma_d rescaled upwards from the 3-repeat pilot
    single = cli(
        "-w",
        ws,
        "plan",
        "--from-runs",
        "music-library-pilot",
        "--runs-per-arm",
        "1",
        "--sims",
        "0",
        "--json",
    ).json()
    assert single["sigma_d"] == pytest.approx(expected.sigma_d.at(1))
    human = cli("-w", ws, "plan", "--from-runs", "music-library-pilot", "--sims", "0")
    assert human.code == 0 and "Pilot music-library-pilot" in human.stdout
    assert "rho (repeats)" in human.stdout and "sigma_run" in human.stdout
    assert tree_digest(ws) == before  # planning writes nothing


def test_from_runs_without_runs_or_registration(ws: Path, cli) -> None:
    missing = cli("-w", ws, "plan", "--from-runs", "no-such-id", "--json")
    assert missing.code == 2 and "no-such-id" in missing.stderr
    cli("-w", ws, "register", ws / PILOT)
    empty = cli("-w", ws, "plan", "--from-runs", "music-library-pilot")
    assert empty.code == 2 and "no completed runs" in empty.stderr
