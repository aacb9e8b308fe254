"""`plan` reports the monitor's exact operating characteristics beside the simulation."""

from __future__ import annotations

import pytest

from prereg.stats import sequential_monitor_exact


def test_plan_json_carries_exact_figures_that_the_simulation_agrees_with(cli) -> None:
    result = cli(
        "plan",
        "--sigma-d",
        "0.28",
        "--prompts",
        "120",
        "--p01",
        "0.1",
        "--p10",
        "0.25",
        "--sims",
        "3000",
        "--json",
    )
    assert result.code == 0, result.stderr
    seq = result.json()["sequential"]
    horizon = seq["max_prompts"]
    alt = sequential_monitor_exact(
        0.1, 0.25, horizon, threshold=seq["threshold"], min_prompts=seq["min_prompts"]
    )
    null = sequential_monitor_exact(
        0.175, 0.175, horizon, threshold=seq["threshold"], min_prompts=seq["min_prompts"]
    )
    assert seq["power_exact"] == pytest.approx(alt.rejection_rate)
    assert seq["type_i_error_exact"] == pytest.approx(null.rejection_rate)
    assert seq["type_i_error_exact"] <= 1 / seq["threshold"]
    assert abs(seq["power"] - seq["power_exact"]) <= 4 * seq["power_se"] + 1e-3
    assert (
        abs(seq["expected_prompts"] - seq["expected_prompts_exact"])
        <= 4 * seq["expected_prompts_se"] + 0.5
    )
