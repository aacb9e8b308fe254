"""``prereg judge --store postgresql://...``: the runs read from PostgreSQL (verified),
the verdicts written to the workspace's runs/verdicts.sqlite, analyse reads both."""

from __future__ import annotations

import json
from pathlib import Path

from tests.judging.gold_helpers import stored_verdicts
from tests.judging.helpers import local_judges, registration, write
from tests.store_pg.conftest import pg_server, pg_url

__all__ = ["pg_server", "pg_url"]  # the PostgreSQL fixtures, used by name below


def test_judge_reads_runs_from_postgresql(cli, ws: Path, pg_url: str) -> None:
    path = write(ws, registration("judged", judge=local_judges(), repeats=1))
    assert cli("-w", ws, "register", path).code == 0
    assert cli("-w", ws, "run", "judged", "--no-progress", "--store", pg_url).code == 0
    judged = cli("-w", ws, "judge", "judged", "--json", "--store", pg_url)
    assert judged.code == 0, judged.stderr
    assert judged.json()["judged"] > 0 and judged.json()["remaining"] == 0
    assert len(stored_verdicts(ws)) == judged.json()["judged"]
    runs = [str(v["record_id"]) for v in stored_verdicts(ws)]
    gold = ws.parent / "gold.jsonl"
    gold.write_text(json.dumps({"run_id": runs[0], "label": 1, "annotator": "ann1"}) + "\n")
    assert cli("-w", ws, "judge", "judged", "--gold", gold, "--store", pg_url).code == 0
    assert cli("-w", ws, "analyse", "judged", "--store", pg_url).code == 0
    report = json.loads((ws / "reports" / "judged" / "report.json").read_text())
    corrected = [r["corrected"] for r in report["judged"]["rates"] if r["corrected"]]
    assert len(corrected) == 1 and corrected[0]["gold"]["runs"] == 1
    assert corrected[0]["estimate"] is None and "fewer than 100" in corrected[0]["reason"]
    assert cli("-w", ws, "verify", "--store", pg_url).code == 0
