"""``verify`` reports what the readers refuse (issue 40, item 7): a record of a unit the
registration never planned (``analyse`` refuses it), verdicts of runs that are not
there or need none; and ``analyse`` checks the whole ledger (another registration's
newest line edited used to pass)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from prereg.runners.judging.verdicts import Verdict, VerdictStore
from prereg.runners.record import RunRecord
from prereg.runners.store.sqlite import RunStore
from tests.integrity.tamper_tools import (
    OTHER_ID,
    PILOT_ID,
    copy_workspace,
    digest_of,
    make_workspace,
)
from tests.integrity.test_integrity_tables import REG, _base  # noqa: F401  (the fixture)


def test_a_record_of_an_unplanned_unit_is_reported(
    cli, small_template: Path, tmp_path: Path
) -> None:
    ws = copy_workspace(small_template, tmp_path / "ws")
    with RunStore(ws / "runs") as store:
        template = store.records(registration_id=PILOT_ID)[0]
        store.append(
            template.model_copy(update={"record_id": "unplanned-1", "repeat": 90, "chain": None})
        )
    checked = cli("-w", ws, "verify", "--json")
    assert checked.code == 3
    (found,) = [p for p in checked.json()["problems"] if p["kind"] == "runs-unplanned"]
    assert found["entry"] == f"runs of '{PILOT_ID}'"
    assert f"{template.arm}/{template.task_id}/90" in found["message"]
    assert cli("-w", ws, "analyse", PILOT_ID, "--allow-incomplete").code == 3


@pytest.fixture
def judged(_base: Path, tmp_path: Path) -> Path:  # noqa: F811
    ws = tmp_path / "ws"
    shutil.copytree(_base, ws)
    return ws


def _first_verdict(ws: Path) -> Verdict:
    conn = sqlite3.connect(ws / "runs" / "verdicts.sqlite")
    try:
        (body,) = conn.execute("SELECT body FROM verdicts ORDER BY seq LIMIT 1").fetchone()
    finally:
        conn.close()
    return Verdict.model_validate_json(body)


def _run_needing_none(ws: Path) -> RunRecord:
    """A run of the registration the completion judge has nothing to say about."""
    with RunStore(ws / "runs") as store:
        records = store.records(registration_id=REG)
    return next(r for r in records if r.status == "ok" and r.funnel.executed is not True)


def test_verdicts_of_missing_runs_or_runs_needing_none_are_reported(cli, judged: Path) -> None:
    ws = judged
    first = _first_verdict(ws)
    assert first.outcome == "completed"
    idle = _run_needing_none(ws)
    with VerdictStore(ws / "runs") as store:
        for n, record_id in enumerate(["no-such-run", idle.record_id]):
            store.append(
                first.model_copy(
                    update={"verdict_id": f"stray-{n:04d}", "record_id": record_id, "chain": None}
                )
            )
    checked = cli("-w", ws, "verify", "--json")
    assert checked.code == 3
    found = [p for p in checked.json()["problems"] if p["kind"] == "verdicts-belonging"]
    said = " | ".join(p["message"] for p in found)
    assert len(found) == 2, said
    assert "run no-such-run: no such run" in said
    assert f"run {idle.record_id}: the run needs no verdict" in said


def _edit_newest_line(ws: Path) -> None:
    """Edit the ledger's newest line (another registration's), keeping it valid JSON:
    no later line hashes it, only its frozen copy's mirror shows the edit."""
    ledger = ws / "registry" / "ledger.jsonl"
    lines = ledger.read_bytes().splitlines()
    newest = json.loads(lines[-1])
    assert newest["event"] == "registration" and newest["id"] == OTHER_ID
    newest["runnable"] = not newest["runnable"]
    lines[-1] = json.dumps(newest, separators=(",", ":"), sort_keys=True).encode()
    ledger.chmod(0o644)
    ledger.write_bytes(b"\n".join(lines) + b"\n")


def test_analyse_checks_the_whole_ledger(cli, tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws", max_units=12)
    draft = ws / "drafts" / "other.yaml"
    draft.write_text(
        (ws / "drafts" / "music-library-pilot.yaml")
        .read_text()
        .replace(f"id: {PILOT_ID}", f"id: {OTHER_ID}")
    )
    assert cli("-w", ws, "register", draft).code == 0
    assert digest_of(ws, OTHER_ID) != digest_of(ws, PILOT_ID)
    _edit_newest_line(ws)
    assert cli("-w", ws, "verify").code == 3
    analysed = cli("-w", ws, "analyse", PILOT_ID, "--allow-incomplete")
    assert analysed.code == 3, analysed.stderr
    assert "ledger-edited" in analysed.stderr
