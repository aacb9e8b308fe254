"""Issue 37, points 3 and 4: an unpriced run's spend reads "not measured" (never $0),
and the local host's records carry the profile asked for as ``model_requested``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from prereg.commands.run_cmds import spend_row, summary_json
from prereg.runners.drivers.local import DEFAULT_PROFILE, PROFILES, create
from prereg.runners.orchestrate import RunSummary
from prereg.runners.providers.prices import spend_measured
from prereg.runners.store.sqlite import RunStore
from tests.cli.helpers import PILOT, PILOT_ID


def _summary(driver: str, spend: float) -> RunSummary:
    return RunSummary(
        PILOT_ID, "sha256:" + "0" * 64, driver, "x", 4, 0, 4, 0, 2, 0, 0, spend, None, 1.0, 4.0
    )


def test_the_local_run_says_its_spend_is_not_measured(ws: Path, cli: Any) -> None:
    assert cli("-w", ws, "register", ws / PILOT).code == 0
    shown = cli("-w", ws, "run", PILOT_ID, "--max-units", "3", "--no-progress")
    assert shown.code == 0, shown.stderr
    assert "not measured" in shown.stdout and "$0.0000" not in shown.stdout
    data = cli("-w", ws, "run", PILOT_ID, "--max-units", "3", "--json").json()
    assert data["spend_usd"] is None and data["spend_measured"] is False
    records = RunStore(ws / "runs").records(registration_id=PILOT_ID)
    assert records and all(r.cost_usd is None for r in records)  # what the summary says
    dry = cli("-w", ws, "run", PILOT_ID, "--dry-run")
    spent = [line for line in dry.stdout.splitlines() if "spent so far" in line]
    assert spent and "not measured" in spent[0] and "$" not in spent[0]


@pytest.mark.parametrize(
    ("drivers", "measured"),
    [
        ("local", False),
        ("replay", False),
        ("inspect", False),
        ("anthropic", True),
        ("openai-chat", True),
        ("local+openai", True),
    ],
)
def test_spend_is_measured_only_where_a_provider_prices_requests(
    drivers: str, measured: bool
) -> None:
    assert spend_measured(drivers.split("+")) is measured
    summary = _summary(drivers, 0.25 if measured else 0.0)
    data = summary_json(summary)
    assert data["spend_measured"] is measured
    assert data["spend_usd"] == (0.25 if measured else None)
    label, text = spend_row(summary)
    assert ("not measured" in text) is not measured
    assert (text == "$0.2500") is measured and label.startswith("spend")


def test_the_default_local_profile_is_recorded_as_requested(ws: Path, cli: Any) -> None:
    assert cli("-w", ws, "register", ws / PILOT).code == 0  # host: {driver: local}, no model
    assert cli("-w", ws, "run", PILOT_ID, "--max-units", "4", "--json").code == 0
    records = RunStore(ws / "runs").records(registration_id=PILOT_ID)
    assert len(records) == 4
    for r in records:
        assert r.model_requested == DEFAULT_PROFILE  # what was asked for ...
        assert r.model_returned is None and r.cost_usd is None  # ... nothing made up
        assert r.config is not None and r.config.model is None  # the registered config


def test_each_local_profile_names_itself_and_the_default_is_a_profile() -> None:
    assert DEFAULT_PROFILE in PROFILES
    assert create().profile == DEFAULT_PROFILE
    assert create(None, {"search_k": 2}).profile == DEFAULT_PROFILE
    for name in PROFILES:
        assert create(name).profile == name
    assert create().params == PROFILES[DEFAULT_PROFILE]
