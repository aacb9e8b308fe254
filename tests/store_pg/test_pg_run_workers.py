"""``prereg run --workers N --store postgresql://...``: the workers claim units from the
store (no fixed shares), so every unit is run once and the chain is anchored once."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from prereg.registry.registrations import Registry
from prereg.runners.store.postgres import PgRunStore
from tests.conftest import CliResult

PILOT = "music-library-pilot"


def test_workers_on_postgresql_claim_every_unit_once(
    ws: Path, cli: Callable[..., CliResult], pg_url: str
) -> None:
    assert cli("-w", ws, "register", ws / "drafts" / f"{PILOT}.yaml").code == 0
    result = cli("-w", ws, "run", PILOT, "--workers", "3", "-c", "6", "--store", pg_url, "--json")
    assert result.code == 0, result.stderr
    summary = result.json()
    assert summary["workers"] == 3 and summary["completed"] == 168 == summary["planned"]
    assert summary["remaining"] == 0 and summary["duplicates"] == 0
    with PgRunStore(pg_url) as store:
        records = store.records(registration_id=PILOT)
    keys = [(r.arm, r.task_id, r.repeat) for r in records]
    assert len(keys) == len(set(keys)) == 168
    anchors = Registry(ws / "registry").anchors(summary["registration_digest"])
    assert [a["count"] for a in anchors] == [168]
    assert cli("-w", ws, "verify", "--store", pg_url, "--json").code == 0
