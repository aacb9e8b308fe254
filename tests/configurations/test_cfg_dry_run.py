"""``prereg run --dry-run`` per arm (issue 13, item 3): per-task limit rules resolved to
bounds that hold for every unit; settled units (count_as_failure) are not pending."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prereg.experiments import load_experiment
from prereg.experiments.loader import folder_reader
from tests.harness_rules.helpers import certified_copy, draft


def test_the_dry_run_bounds_requests_under_per_task_limit_rules(ws: Path, cli: Any) -> None:
    _register_two_arms(ws, cli, "rules-dry")
    data = cli("-w", ws, "run", "rules-dry", "--dry-run", "--json").json()
    exp = load_experiment(folder_reader(ws / "experiments" / "music-certified"), "music-certified")
    tasks = exp.tasks_in_split("dev")
    turns = [(t.certified_minimum or 0) + 2 + 2 for t in tasks]
    baseline, semantic = data["arms"]["baseline"], data["arms"]["semantic"]
    assert baseline["units_to_run"] == semantic["units_to_run"] == len(tasks)
    # the rule's arm: turn limit = certified minimum + 2 + 2, each unit its own task's
    # (summed, so exact per unit); the widest unit is the per-unit maximum
    assert baseline["per_unit_max"]["requests"] == max(turns)
    assert baseline["requests"]["max"] == sum(turns) < len(tasks) * max(turns)
    # the arm that gives an explicit turn limit drops the inherited rule
    assert semantic["per_unit_max"]["requests"] == 3
    assert data["requests"]["max"] == sum(turns) + len(tasks) * 3


def test_the_human_dry_run_shows_each_arms_units_requests_and_bound(ws: Path, cli: Any) -> None:
    _register_two_arms(ws, cli, "rules-dry-human")
    data = cli("-w", ws, "run", "rules-dry-human", "--dry-run", "--json").json()
    human = cli("-w", ws, "run", "rules-dry-human", "--dry-run")
    assert human.code == 0, human.stderr
    assert "per arm" in human.stdout
    rows = [line for line in human.stdout.splitlines() if line.count("│") >= 5]
    for arm, figures in data["arms"].items():
        # the arm's own row carries its units and its request range, from the JSON
        expected = f"{figures['requests']['min']} to {figures['requests']['max']}"
        row = next(r for r in rows if f"│ {arm} " in r)
        assert f" {figures['units_to_run']} " in row and expected in row, row


def _register_two_arms(ws: Path, cli: Any, reg_id: str) -> None:
    """Two arms under per-task limit rules; the second gives its own turn limit."""
    certified_copy(ws)
    path = draft(
        ws,
        reg_id,
        experiment="music-certified",
        host={"driver": "local"},
        arms=[
            {"id": "baseline", "surface": "baseline"},
            {"id": "semantic", "surface": "semantic", "budgets": {"turn_limit": 3}},
        ],
        budgets={
            "completion_cap": 1024,
            "episode_tokens": 32000,
            "call_limit_over_certified": 2,
            "turn_limit_over_calls": 2,
        },
    )
    assert cli("-w", ws, "register", path).code == 0
