"""The run store's records table under the one rule (issue 40, item 1): each indexed
column edited on its own with sqlite3 (the UPDATE trigger dropped and put back) is named
by ``verify`` and refused by ``analyse`` (exit 3), naming the chain and the column. The
run store checked this before issue 40; the cases keep the table complete beside the
verdict, gold, claim and anchor tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from prereg.runners.store.interface import INDEXED_COLUMNS
from tests.integrity.tamper_tools import PILOT_ID, attacker, copy_workspace, digest_of

#: another value of each column's own type
OTHER: dict[str, Any] = {
    "record_id": "another-record",
    "registration_digest": "sha256:" + "2" * 64,
    "registration_id": "another-registration",
    "arm": "another-arm",
    "task_id": "another-task",
    "repeat": 77,
    "status": "infra_error",
    "success": None,
    "cost_usd": 0.125,
}


@pytest.mark.parametrize("column", INDEXED_COLUMNS)
def test_an_edited_run_column_is_named(
    cli, small_template: Path, tmp_path: Path, column: str
) -> None:
    ws = copy_workspace(small_template, tmp_path / "ws")
    digest = digest_of(ws, PILOT_ID)
    with attacker(ws, "TRIGGER records_no_update") as conn:
        (seq,) = conn.execute(
            "SELECT seq FROM records WHERE registration_digest = ? AND success IS NOT NULL "
            "ORDER BY chain_index LIMIT 1",
            (digest,),
        ).fetchone()
        conn.execute(f"UPDATE records SET {column} = ? WHERE seq = ?", (OTHER[column], seq))
    checked = cli("-w", ws, "verify", "--json")
    assert checked.code == 3
    named = [
        p
        for p in checked.json()["problems"]
        if p["entry"].startswith("runs ") and f"column(s) {column} " in p["message"]
    ]
    assert named, checked.json()["problems"]
    analysed = cli("-w", ws, "analyse", PILOT_ID, "--allow-incomplete")
    assert analysed.code == 3
    said = " ".join(analysed.stderr.split())
    assert f"column(s) {column} " in said, said
