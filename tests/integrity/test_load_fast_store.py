"""Stores in the content format, in the earlier format and in both, and where the
canonical-form check is skipped (issue 15: analyse at scale).

- A store written before the content format (bodies as ``model_dump_json``) verifies
  and analyses as before, with the very chain heads the registry anchored; so does a
  store whose older links are in that format and newer ones in the content format.
- ``verified_records`` hashes the links the registry's anchor pins without checking
  their canonical form (the full check ran when the anchor was written). A link past
  the anchor is checked in full: a forged one whose hash an attacker computed over
  non-canonical bytes is refused, so ``analyse`` never pins it. ``verify`` checks every
  link in full, so it names such a link even under an anchor a ledger writer forged.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from prereg.core.errors import IntegrityError
from prereg.registry.registrations import Registry
from prereg.runners.record import RunRecord
from prereg.runners.store.sqlite import RunStore, chain
from prereg.runners.store.verify import verified_records
from tests.integrity.tamper_tools import (
    OTHER_ID,
    PILOT_ID,
    copy_workspace,
    db_path,
    digest_of,
)
from tests.integrity.test_load_fast import _forged

ROW_COLUMNS = (
    "seq, record_id, registration_digest, registration_id, arm, task_id, repeat, status, "
    "success, cost_usd, written_at, chain_index, prev_hash, record_hash, body"
)


def _rows(db: Path) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(f"SELECT {ROW_COLUMNS} FROM records ORDER BY seq").fetchall()
    finally:
        conn.close()


def _rewrite_store(ws: Path, body_of: Any) -> None:
    """A new store file holding the same rows, each body as ``body_of(index, body)``
    gives it (the schema as prereg creates it; rows inserted, nothing updated)."""
    db = db_path(ws)
    rows = _rows(db)
    for suffix in ("", "-wal", "-shm"):
        db.with_name(db.name + suffix).unlink(missing_ok=True)
    with RunStore(ws / "runs") as store, store._tx():
        pass  # creates the schema
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("BEGIN")
        for row in rows:
            conn.execute(
                f"INSERT INTO records ({ROW_COLUMNS}) VALUES ({', '.join('?' * len(row))})",
                (*row[:-1], body_of(row[0], row[-1])),
            )
        conn.execute("COMMIT")
    finally:
        conn.close()


def _pre_format(seq: int, body: str) -> str:
    return RunRecord.model_validate_json(body).model_dump_json()


def _verified(ws: Path, reg_id: str) -> tuple[list[RunRecord], dict[str, Any]]:
    registry = Registry(ws / "registry")
    return verified_records(ws / "runs", registry, registry.get(reg_id))


def _verify(cli: Any, ws: Path) -> tuple[int, dict[str, Any]]:
    result = cli("-w", ws, "verify", "--json")
    return result.code, json.loads(result.stdout)


def test_the_store_writes_the_content_format(ran_template: Path) -> None:
    for seq, *_, index, prev, stated, body in _rows(db_path(ran_template)):
        assert not body.startswith('{"schema_version"'), seq
        assert chain.content_link(body, index, prev, stated, trusted=False) == stated


@pytest.mark.parametrize("older", ["all", "first-half"])
def test_a_store_in_the_earlier_format_verifies_with_the_same_heads(
    ran_template: Path, tmp_path: Path, cli: Any, older: str
) -> None:
    ws = copy_workspace(ran_template, tmp_path / "ws")
    code, before = _verify(cli, ws)
    assert code == 0, before
    half = len(_rows(db_path(ws))) // 2
    _rewrite_store(
        ws, lambda seq, body: _pre_format(seq, body) if older == "all" or seq <= half else body
    )
    bodies = [row[-1] for row in _rows(db_path(ws))]
    assert sum(b.startswith('{"schema_version":1,') for b in bodies) == (
        len(bodies) if older == "all" else half
    )
    code, after = _verify(cli, ws)
    assert code == 0, after
    assert after["runs"]["chains"] == before["runs"]["chains"]
    for reg_id in (PILOT_ID, OTHER_ID):
        assert _verified(ws, reg_id) == _verified(ran_template, reg_id)
    analysed = cli("-w", ws, "analyse", PILOT_ID, "--json")
    assert analysed.code == 0, analysed.stdout


def _append_raw(ws: Path, body_of: Any) -> tuple[str, str]:
    """Insert one more link at the pilot chain's end (an INSERT: no trigger refuses it),
    its body ``body_of(honest body, index, prev)``; returns (its hash column, body)."""
    digest = digest_of(ws)
    with RunStore(ws / "runs") as store:
        template = store.records(registration_id=PILOT_ID)[-1]
        rows = store.chain_rows(digest)
    record = template.model_copy(update={"record_id": "appended-0001", "repeat": 99, "chain": None})
    index, prev = len(rows), rows[-1].record_hash
    linked = chain.link(record, index, prev)
    assert linked.chain is not None
    body, stated = body_of(chain.stored_body(linked), index, prev)
    conn = sqlite3.connect(db_path(ws), isolation_level=None)
    try:
        conn.execute(
            "INSERT INTO records (record_id, registration_digest, registration_id, arm, task_id,"
            " repeat, status, success, cost_usd, written_at, chain_index, prev_hash,"
            " record_hash, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                linked.record_id,
                digest,
                PILOT_ID,
                linked.arm,
                linked.task_id,
                linked.repeat,
                linked.status,
                None if linked.success is None else int(linked.success),
                linked.cost_usd,
                "2026-01-01T00:00:00+00:00",
                index,
                prev,
                stated,
                body,
            ),
        )
    finally:
        conn.close()
    return stated, body


def _honest(body: str, index: int, prev: str) -> tuple[str, str]:
    return body, str(json.loads(body)["chain"]["hash"])


def _respelled_and_rehashed(body: str, index: int, prev: str) -> tuple[str, str]:
    """The content with a space after its first key, the hash computed over those bytes."""
    forged, stated = _forged(body.replace('":', '": ', 1), index, prev)
    return forged, stated


def test_an_honest_link_past_the_anchor_is_read(ran_template: Path, tmp_path: Path) -> None:
    ws = copy_workspace(ran_template, tmp_path / "ws")
    stated, _ = _append_raw(ws, _honest)
    records, heads = _verified(ws, PILOT_ID)
    assert heads[digest_of(ws)] == {"count": 169, "head": stated}
    assert records[-1].record_id == "appended-0001"


def test_a_link_hashed_over_non_canonical_bytes_past_the_anchor_is_refused(
    ran_template: Path, tmp_path: Path, cli: Any
) -> None:
    ws = copy_workspace(ran_template, tmp_path / "ws")
    ledger = (ws / "registry" / "ledger.jsonl").read_bytes()
    _append_raw(ws, _respelled_and_rehashed)
    with pytest.raises(IntegrityError) as refused:
        _verified(ws, PILOT_ID)
    assert any("does not match its hash" in d for d in refused.value.details)
    code, data = _verify(cli, ws)
    assert code == 3
    # the appended record repeats a unit under an unplanned repeat: verify names that too
    assert {p["kind"] for p in data["runs"]["problems"]} == {"runs-chain", "runs-unplanned"}
    analysed = cli("-w", ws, "analyse", PILOT_ID, "--json")
    assert analysed.code == 3, analysed.stdout
    assert (ws / "registry" / "ledger.jsonl").read_bytes() == ledger  # never pinned


def test_the_canonical_check_is_what_refuses_it(
    ran_template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the check past the anchor, the forged link would be read: the check is
    not vacuous."""
    ws = copy_workspace(ran_template, tmp_path / "ws")
    _append_raw(ws, _respelled_and_rehashed)
    monkeypatch.setattr(chain, "is_canonical_content", lambda data: True)
    records, _ = _verified(ws, PILOT_ID)
    assert records[-1].record_id == "appended-0001"


def test_verify_names_it_under_an_anchor_a_ledger_writer_forged(
    ran_template: Path, tmp_path: Path, cli: Any
) -> None:
    """The documented limit: who can also write the ledger can pin a forged chain, and
    ``analyse`` then reads the pinned links on the anchor's word; ``verify`` still checks
    every link in full and names this one."""
    ws = copy_workspace(ran_template, tmp_path / "ws")
    stated, _ = _append_raw(ws, _respelled_and_rehashed)
    registry = Registry(ws / "registry")
    registry.anchor_runs(registry.get(PILOT_ID), 169, stated)
    records, _ = _verified(ws, PILOT_ID)
    assert records[-1].record_id == "appended-0001"
    code, data = _verify(cli, ws)
    assert code == 3
    problems = data["runs"]["problems"]
    assert {p["kind"] for p in problems} == {"runs-chain", "runs-unplanned"}  # as above
    assert any("does not match its hash" in p["message"] for p in problems)
