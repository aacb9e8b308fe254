"""Run-store tamperings (issue 12, item 2): each is caught by ``verify`` and refused by ``analyse``.

Before, ``verify`` never read runs/ (it caught 0 of 12 store tamperings), an ``UPDATE`` of
outcomes after ``DROP TRIGGER`` flipped verdicts, and a dropped unique index plus a
duplicate row, or a flipped byte, gave a traceback. Each test tampers with a copy of a
fully run pilot workspace through sqlite3 (tamper_tools), then asserts that
``verify --json`` exits 3 naming the runs-* problem expected, and that ``analyse`` and
``export`` exit 3 with an IntegrityError (no traceback) and write nothing: no report, no
export file, no ledger line.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from prereg.runners.store import chain
from tests.conftest import tree_digest
from tests.integrity.tamper_tools import (
    OTHER_ID,
    PILOT_ID,
    attacker,
    copy_workspace,
    db_path,
    digest_of,
    edited,
    flip_outcome,
    forge_store,
    insert,
    logical_content,
    records_pages,
    rewrite,
    stored,
)


@pytest.fixture
def victim(ran_template: Path, tmp_path: Path) -> Path:
    """A writable copy of the run workspace (168 pilot records, 4 of another registration)."""
    return copy_workspace(ran_template, tmp_path / "ws")


def _problems(cli: Any, ws: Path) -> tuple[int, dict[str, Any]]:
    result = cli("-w", ws, "verify", "--json")
    return result.code, json.loads(result.stdout)


def assert_caught(cli: Any, ws: Path, *kinds: str, reg_id: str = PILOT_ID) -> list[dict[str, Any]]:
    """verify exits 3 naming ``kinds``; analyse and export of ``reg_id`` exit 3 and write
    nothing."""
    registry_before = tree_digest(ws / "registry")
    code, data = _problems(cli, ws)
    assert code == 3, data
    runs = data["runs"]["problems"]
    found = {p["kind"] for p in runs}
    assert found, data
    assert all(kind.startswith("runs-") for kind in found), runs
    for kind in kinds:
        assert kind in found, (kind, runs)
    assert [p for p in data["problems"] if p["kind"].startswith("runs-")] == runs
    assert_refused(cli, ws, reg_id)
    assert tree_digest(ws / "registry") == registry_before
    return list(runs)


def assert_refused(cli: Any, ws: Path, reg_id: str = PILOT_ID) -> None:
    analysed = cli("-w", ws, "analyse", reg_id, "--json")
    assert analysed.code == 3, analysed.stdout
    assert json.loads(analysed.stdout)["error"] == "IntegrityError"
    assert not (ws / "reports" / reg_id).exists()
    out = ws.parent / "export.jsonl"
    exported = cli("-w", ws, "export", reg_id, "--out", out, "--json")
    assert exported.code == 3, exported.stdout
    assert not out.exists()


def test_an_intact_store_verifies_and_analyses(victim: Path, cli: Any) -> None:
    code, data = _problems(cli, victim)
    assert code == 0, data
    digest = digest_of(victim)
    head = data["runs"]["chains"][digest]
    assert head["count"] == 168 and head["head"].startswith("sha256:")
    assert data["runs"]["records"] == 168 + 4
    assert data["runs"]["problems"] == []
    anchors = [
        json.loads(line)
        for line in (victim / "registry" / "ledger.jsonl").read_text().splitlines()
        if json.loads(line).get("event") == "runs-anchor" and digest in line
    ]
    assert (anchors[-1]["count"], anchors[-1]["head"]) == (168, head["head"])
    analysed = cli("-w", victim, "analyse", PILOT_ID, "--json")
    assert analysed.code == 0, analysed.stdout
    report = json.loads((victim / "reports" / PILOT_ID / "report.json").read_bytes())
    pinned = json.dumps(report)
    assert head["head"] in pinned


def test_update_after_drop_trigger_flipping_outcomes(victim: Path, cli: Any) -> None:
    """The verdict-flipping attack: every failure of the favoured arm made a success."""
    digest = digest_of(victim)
    with attacker(victim, "TRIGGER records_no_update") as conn:
        flipped = 0
        for seq, record in stored(conn, digest):
            if record.arm == "semantic" and record.success is False:
                rewrite(conn, seq, flip_outcome(record))  # body and columns, stale link
                flipped += 1
    assert flipped
    problems = assert_caught(cli, victim, "runs-chain", "runs-schema")
    assert any("does not match its hash" in p["message"] for p in problems)


def test_update_with_every_hash_recomputed_is_caught_by_the_anchor(victim: Path, cli: Any) -> None:
    digest = digest_of(victim)
    with attacker(victim, "TRIGGER records_no_update") as conn:
        for seq, record in stored(conn, digest):
            if record.arm == "semantic" and record.success is False:
                rewrite(conn, seq, flip_outcome(record))
        forge_store(conn, digest)
    problems = assert_caught(cli, victim, "runs-anchor")
    # the chain itself is consistent again: only the registry's anchor disagrees
    assert not [p for p in problems if p["kind"] in ("runs-chain", "runs-record")]


def test_a_deleted_record(victim: Path, cli: Any) -> None:
    digest = digest_of(victim)
    with attacker(victim, "TRIGGER records_no_delete") as conn:
        conn.execute(
            "DELETE FROM records WHERE registration_digest = ? AND chain_index = 50", (digest,)
        )
    assert_caught(cli, victim, "runs-chain", "runs-schema")


def test_the_last_record_deleted_is_caught_by_the_anchor(victim: Path, cli: Any) -> None:
    """Tail truncation leaves an intact, shorter chain: the anchor pinned 168 records."""
    digest = digest_of(victim)
    with attacker(victim, "TRIGGER records_no_delete") as conn:
        conn.execute(
            "DELETE FROM records WHERE registration_digest = ? AND chain_index = 167", (digest,)
        )
    problems = assert_caught(cli, victim, "runs-anchor")
    assert any("records were removed" in p["message"] for p in problems)


def test_a_dropped_unique_index_and_a_duplicate_ok_row(victim: Path, cli: Any) -> None:
    """A second ok record for a failed unit, appended as a properly forged link."""
    digest = digest_of(victim)
    with attacker(victim, "INDEX one_ok_record_per_unit") as conn:
        rows = stored(conn, digest)
        failed = next(r for _, r in rows if r.success is False)
        head = rows[-1][1].chain
        assert head is not None
        twin = edited(flip_outcome(failed), record_id=failed.record_id[:-4] + "beef")
        insert(conn, chain.link(twin, len(rows), head.hash))
    assert_caught(cli, victim, "runs-duplicate", "runs-schema")


def test_two_records_swapped(victim: Path, cli: Any) -> None:
    digest = digest_of(victim)
    with attacker(victim, "TRIGGER records_no_update") as conn:
        for old, new in ((10, 1_000_000), (20, 10), (1_000_000, 20)):
            conn.execute(
                "UPDATE records SET chain_index = ? WHERE registration_digest = ? AND "
                "chain_index = ?",
                (new, digest, old),
            )
    assert_caught(cli, victim, "runs-chain")


def _flip(path: Path, position: int, xor: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= xor
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("needle", "offset", "xor"),
    [
        (b'"intent":"', 10, 0x20),  # a letter's case: still a valid record, another one
        (b'"success":false', 10, 0x01),  # "fal" -> "gal": not JSON any more
    ],
)
def test_a_flipped_byte_in_a_record(
    victim: Path, cli: Any, needle: bytes, offset: int, xor: int
) -> None:
    db = db_path(victim)
    before = logical_content(db)
    _flip(db, db.read_bytes().index(needle) + offset, xor)
    assert logical_content(db) != before
    assert_caught(cli, victim, "runs-chain")


def test_a_flipped_byte_in_a_page_header(victim: Path, cli: Any) -> None:
    """The records table's root page made another kind of page: SQLite cannot read it."""
    db = db_path(victim)
    size, pages, _ = records_pages(db)
    root = pages[0]
    _flip(db, (root - 1) * size + (100 if root == 1 else 0), 0xFF)
    problems = assert_caught(cli, victim)
    assert {p["kind"] for p in problems} & {"runs-unreadable", "runs-corrupt"}


@pytest.mark.parametrize("seed", range(6))
def test_a_flipped_byte_at_a_random_place_in_a_used_page(victim: Path, cli: Any, seed: int) -> None:
    """A random byte of the records' cells (every byte there belongs to a record)."""
    db = db_path(victim)
    rng = random.Random(seed)
    _, _, leaves = records_pages(db)
    low, high = rng.choice(leaves)
    before = logical_content(db)
    rows = _rows(db)
    assert rows is not None
    _flip(db, rng.randrange(low, high), rng.randrange(1, 256))
    assert logical_content(db) != before
    # analyse and export refuse the registration whose record the byte belonged to (the
    # other registration's evidence is untouched, and analysing it is not refused)
    after = _rows(db)
    changed = (
        {PILOT_ID.encode()}  # an unreadable store: the pilot's analysis is refused
        if after is None
        else {row[0] for seq, row in rows.items() if after.get(seq) != row}
    )
    assert len(changed) == 1
    assert_caught(cli, victim, reg_id=changed.pop().decode())


def _rows(db: Path) -> dict[int, tuple[Any, ...]] | None:
    """seq -> (registration_id, the rest of the row) as raw bytes; None if unreadable."""
    try:
        conn = sqlite3.connect(f"file:{db}?immutable=1", uri=True)
        conn.text_factory = bytes
        try:
            found = conn.execute(
                "SELECT seq, registration_id, record_id, registration_digest, arm, task_id,"
                " repeat, status, success, cost_usd, chain_index, prev_hash, record_hash, body"
                " FROM records"
            ).fetchall()
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        return None
    return {row[0]: tuple(row[1:]) for row in found}


def test_a_record_moved_to_another_registration(victim: Path, cli: Any) -> None:
    pilot, other = digest_of(victim), digest_of(victim, OTHER_ID)
    with attacker(victim, "TRIGGER records_no_update") as conn:
        seq, record = stored(conn, pilot)[30]
        rewrite(conn, seq, edited(record, registration_digest=other, registration_id=OTHER_ID))
    problems = assert_caught(cli, victim, "runs-chain")
    assert any(pilot[:19] in p["entry"] for p in problems)
    assert any(other[:19] in p["entry"] for p in problems)


@pytest.mark.parametrize("target", ["other", "unregistered"])
def test_a_record_moved_with_both_chains_recomputed(victim: Path, cli: Any, target: str) -> None:
    """Both chains forged consistent: the pilot's anchor still pins 168 records."""
    pilot = digest_of(victim)
    if target == "other":
        digest, reg_id = digest_of(victim, OTHER_ID), OTHER_ID
    else:
        digest, reg_id = "sha256:" + hashlib.sha256(b"nowhere").hexdigest(), PILOT_ID
    with attacker(victim, "TRIGGER records_no_update") as conn:
        seq, record = stored(conn, pilot)[30]
        moved = edited(record, registration_digest=digest, registration_id=reg_id)
        rewrite(conn, seq, moved.model_copy(update={"chain": record.chain}))
        forge_store(conn, pilot)
        forge_store(conn, digest)
    problems = assert_caught(cli, victim, "runs-anchor")
    if target == "unregistered":
        assert "runs-unregistered" in {p["kind"] for p in problems}


def test_a_schema_byte_sqlite_names_in_an_error_is_not_utf8(victim: Path, cli: Any) -> None:
    """SQLite names the damaged schema entry in its message, and Python's sqlite3 raises
    UnicodeDecodeError (not a DatabaseError) for bytes that are not UTF-8: was a traceback."""
    db = db_path(victim)
    data = bytearray(db.read_bytes())
    data[data.index(b"sqlite_autoindex_records_1")] = 0x80
    db.write_bytes(bytes(data))
    problems = assert_caught(cli, victim, "runs-unreadable")
    assert "not UTF-8" in problems[0]["message"]


def test_a_dropped_trigger_alone_is_reported_every_time_and_not_repaired(
    victim: Path, cli: Any
) -> None:
    """Reading the store used to re-apply its schema, re-creating what was dropped: the
    first read erased the evidence and ``verify`` never saw it."""
    with attacker(victim, "TRIGGER records_no_delete"):
        pass
    for _ in range(2):
        problems = assert_caught(cli, victim, "runs-schema")
        assert [p["message"].split(":")[0] for p in problems] == ["the trigger was dropped"]
    with contextlib.closing(sqlite3.connect(db_path(victim))) as conn:
        names = conn.execute("SELECT name FROM sqlite_master").fetchall()
    assert ("records_no_delete",) not in names


def test_an_added_trigger_is_reported_and_no_run_writes_through_it(victim: Path, cli: Any) -> None:
    """A trigger that silently drops every failed record a later run appends: the schema is
    compared object by object, and a run refuses to write to an altered store."""
    with attacker(victim) as conn:
        conn.execute(
            "CREATE TRIGGER keep_successes BEFORE INSERT ON records WHEN new.success = 0 "
            "BEGIN SELECT RAISE(IGNORE); END"
        )
    problems = assert_caught(cli, victim, "runs-schema")
    assert any("keep_successes" in p["entry"] and "added" in p["message"] for p in problems)
    before = tree_digest(victim / "runs")
    ran = cli("-w", victim, "run", OTHER_ID, "--json")
    assert ran.code == 3, ran.stdout
    assert tree_digest(victim / "runs") == before


def test_a_deleted_store_with_anchored_runs(victim: Path, cli: Any) -> None:
    """The registry pinned 168 records: without the store, analyse refuses (was exit 4,
    "incomplete"), and a run does not start the chain again."""
    db_path(victim).unlink()
    assert_caught(cli, victim, "runs-anchor")
    ran = cli("-w", victim, "run", PILOT_ID, "--json")
    assert ran.code == 3, ran.stdout
    assert not db_path(victim).exists()
