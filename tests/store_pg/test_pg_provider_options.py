"""``run --dry-run``, ``run --prices``, the spend meter and ``plan --from-runs`` read the
PostgreSQL store they are given (issue 15); ``run --batch`` refuses one with a reason.

The reference for each figure is the database itself, read with plain SQL through
psycopg: the ok records, the units they cover, the spend recorded under a digest.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from prereg.core.workspace import Workspace
from prereg.runners.prepare import prepare
from prereg.runners.providers.factory import create_run_drivers
from prereg.runners.providers.runs import estimate_run
from prereg.runners.store.postgres import PgRunStore
from tests.conftest import CliResult, tree_digest

PILOT = "music-library-pilot"
PRICED = """\
id: priced-pilot
title: A provider host with a spend cap
hypothesis: Descriptive metadata raises selection of the focal integration.
falsification: McNemar's exact test does not reject at 0.05.
experiment: podcast-selection
kind: exploratory
split: dev
arms:
  - {id: descriptive, surface: focal}
  - {id: neutral, surface: focal-neutral}
host: {driver: anthropic, model: claude-sonnet-4-5}
budgets: {completion_cap: 256, episode_tokens: 8000, call_limit: 4, turn_limit: 4,
          spend_usd: 5}
design: {repeats: 2, rotations: 2, seed: 3}
outcome: success
primary: {test: mcnemar_exact, alpha: 0.05, sides: two-sided}
"""


def _sql(url: str, query: str, *args: object) -> list[tuple[object, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(query, args).fetchall()  # type: ignore[arg-type]


@pytest.fixture
def registered(ws: Path, cli: Callable[..., CliResult]) -> Path:
    draft = ws / "drafts" / f"{PILOT}.yaml"
    assert cli("-w", ws, "register", draft, "--json").code == 0
    return ws


def test_dry_run_counts_the_units_and_spend_of_the_store_it_is_given(
    registered: Path, cli: Callable[..., CliResult], pg_url: str
) -> None:
    run = cli("-w", registered, "run", PILOT, "--store", pg_url, "--max-units", "5", "--json")
    assert run.code == 0, run.stderr
    ok_units = _sql(pg_url, "SELECT count(DISTINCT (arm, task_id, repeat)) FROM records")
    assert ok_units == [(5,)]
    before = tree_digest(registered)
    shared = cli("-w", registered, "run", PILOT, "--dry-run", "--store", pg_url, "--json")
    assert shared.code == 0, shared.stderr
    data = shared.json()
    assert data["units_recorded"] == 5
    assert data["units_to_run"] == data["units_planned"] - 5
    assert data["spent_usd"] == 0.0  # the local host measures no cost
    assert tree_digest(registered) == before  # a dry run writes nothing, anywhere
    local = cli("-w", registered, "run", PILOT, "--dry-run", "--json").json()
    assert local["units_recorded"] == 0  # the workspace's own SQLite store is another store


def test_prices_runs_into_the_store_it_is_given(
    registered: Path, cli: Callable[..., CliResult], pg_url: str
) -> None:
    prices = Path(__file__).resolve().parents[2] / "runners" / "providers" / "prices.yaml"
    result = cli(
        "-w", registered, "run", PILOT, "--prices", prices, "--store", pg_url,
        "--max-units", "3", "--json",
    )  # fmt: skip
    assert result.code == 0, result.stderr
    assert result.json()["prices"] == str(prices)
    assert _sql(pg_url, "SELECT count(*) FROM records WHERE status = 'ok'") == [(3,)]
    assert not (registered / "runs" / "runs.sqlite").exists()  # not silently SQLite


def test_batch_refuses_a_shared_store_before_anything_is_sent(
    registered: Path, cli: Callable[..., CliResult], pg_url: str
) -> None:
    before = tree_digest(registered)
    result = cli("-w", registered, "run", PILOT, "--batch", "--store", pg_url)
    assert result.code == 2
    assert "workers on other machines" in result.stderr
    assert tree_digest(registered) == before
    assert _sql(pg_url, "SELECT count(*) FROM pg_tables WHERE tablename = 'records'") == [(0,)]


def test_the_spend_meter_starts_from_the_spend_the_store_holds(
    ws: Path,
    cli: Callable[..., CliResult],
    pg_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A provider run's spend cap counts what other workers already spent in PostgreSQL."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-a-key")
    draft = ws / "drafts" / "priced-pilot.yaml"
    draft.write_text(PRICED)
    assert cli("-w", ws, "register", draft, "--json").code == 0
    pilot = ws / "drafts" / f"{PILOT}.yaml"
    assert cli("-w", ws, "register", pilot, "--json").code == 0
    assert cli("-w", ws, "run", PILOT, "--store", pg_url, "--max-units", "2").code == 0
    workspace = Workspace(ws)
    _, _, plan, _ = prepare(workspace, "priced-pilot")
    with PgRunStore(pg_url) as store:
        template = store.records()[0]
        for i, cost in enumerate((0.25, 1.5)):  # two units of the priced registration
            store.append(
                template.model_copy(
                    update={
                        "record_id": f"spent-{i}",
                        "registration_id": "priced-pilot",
                        "registration_digest": plan.digest,
                        "repeat": 10 + i,
                        "cost_usd": cost,
                        "chain": None,
                    }
                )
            )
    spent = _sql(
        pg_url, "SELECT sum(cost_usd) FROM records WHERE registration_digest = %s", plan.digest
    )
    assert spent == [(1.75,)]
    drivers = create_run_drivers(plan, workspace, runs=pg_url)
    meters = {id(d.spend): d.spend for d in drivers.values()}  # type: ignore[attr-defined]
    assert [m.spent_usd for m in meters.values()] == [1.75]
    assert create_run_drivers(plan, workspace)["descriptive"].spend.spent_usd == 0.0  # type: ignore[attr-defined]
    estimate = estimate_run(workspace, "priced-pilot", store=pg_url)
    assert estimate["spent_usd"] == 1.75


def test_plan_from_runs_reads_the_store_it_is_given(
    registered: Path, cli: Callable[..., CliResult], pg_url: str
) -> None:
    assert cli("-w", registered, "run", PILOT, "--store", pg_url, "--json").code == 0
    plan = cli("-w", registered, "plan", "--from-runs", PILOT, "--store", pg_url, "--json")
    assert plan.code == 0, plan.stderr
    data = plan.json()
    paired = _sql(
        pg_url,
        "SELECT count(*) FROM (SELECT task_id FROM records WHERE status = 'ok' "
        "GROUP BY task_id HAVING count(DISTINCT arm) = 2) AS both_arms",
    )
    assert data["pilot"]["registration"] == PILOT
    assert data["pilot"]["prompts"] == paired[0][0] > 0
    assert data["sources"]["sigma_d"] == "pilot"
    local = cli("-w", registered, "plan", "--from-runs", PILOT, "--json")
    assert local.code == 2 and "no completed runs" in local.stderr  # another store
    options_only = cli(
        "-w", registered, "plan", "--sigma-d", "0.3", "--prompts", "50", "--store", pg_url
    )
    assert options_only.code == 2 and "--from-runs" in options_only.stderr
