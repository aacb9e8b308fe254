"""The PostgreSQL run store keeps the SQLite store's guarantees, in the database itself."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest

from prereg.core.errors import BadInput, IntegrityError
from prereg.registry.registrations import Registry
from prereg.runners.store.choose import open_store, resolve_store
from prereg.runners.store.interface import DuplicateRecord, StoreUnavailable
from prereg.runners.store.postgres import PgRunStore, redacted
from prereg.runners.store.verify import verify_runs
from tests.runners.run_helpers import DIGEST_A, DIGEST_B, record


def raw(url: str, sql: str) -> list[tuple[Any, ...]]:
    """Run ``sql`` as the database owner would, outside prereg."""
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(sql)  # type: ignore[arg-type]
        return cur.fetchall() if cur.description else []


def test_append_read_back_and_chains(pg_url: str) -> None:
    with PgRunStore(pg_url) as store:
        a = store.append(record(task_id="t001"))
        b = store.append(record(task_id="t002", registration_digest=DIGEST_B, registration_id="r2"))
        c = store.append(record(task_id="t003"))
        assert a.chain is not None and (a.chain.index, a.chain.prev) == (0, DIGEST_A)
        assert b.chain is not None and (b.chain.index, b.chain.prev) == (0, DIGEST_B)
        assert c.chain is not None and (c.chain.index, c.chain.prev) == (1, a.chain.hash)
        assert store.records() == [a, b, c]
        assert store.records(registration_digest=DIGEST_B) == [b]
        assert store.digests() == [DIGEST_A, DIGEST_B]
        assert store.completed_keys(DIGEST_A) == {("baseline", "t001", 0), ("baseline", "t003", 0)}
    # a new connection sees what was committed
    assert PgRunStore(pg_url).records(registration_id="reg-1") == [a, c]


def test_update_delete_and_truncate_are_refused_by_the_database(pg_url: str) -> None:
    with PgRunStore(pg_url) as store:
        store.append(record())
    for sql in (
        "UPDATE records SET status = 'infra_error'",
        "UPDATE records SET body = '{}' WHERE seq = 1",
        "DELETE FROM records",
        "TRUNCATE records",
    ):
        with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
            raw(pg_url, sql)
    assert raw(pg_url, "SELECT count(*), min(status) FROM records") == [(1, "ok")]


def test_one_ok_record_per_unit_and_infra_errors_kept(pg_url: str) -> None:
    failed = dict(status="infra_error", success=None, error="connection reset")
    with PgRunStore(pg_url) as store:
        store.append(record(**failed))
        store.append(record(**failed))
        assert store.completed_keys(DIGEST_A) == set()
        store.append(record())
        with pytest.raises(DuplicateRecord):
            store.append(record())
        store.append(record(registration_digest=DIGEST_B))  # another digest: another unit
        assert [r.status for r in store.records(registration_digest=DIGEST_A)] == [
            "infra_error",
            "infra_error",
            "ok",
        ]
        assert store.counts() == {"infra_error": 2, "ok": 2}
    # the unique index refuses a second ok row whoever writes it, not only prereg
    with pytest.raises(psycopg.errors.UniqueViolation, match="one_ok_record_per_unit"):
        raw(
            pg_url,
            "INSERT INTO records (record_id, registration_digest, registration_id, arm, task_id,"
            " repeat, status, chain_index, prev_hash, record_hash, body) SELECT 'x',"
            " registration_digest, registration_id, arm, task_id, repeat, status, 99, '', '',"
            " body FROM records WHERE status = 'ok' LIMIT 1",
        )
    # and a record without a registration digest cannot be stored at all
    with pytest.raises(psycopg.errors.CheckViolation):
        raw(
            pg_url,
            "INSERT INTO records (record_id, registration_digest, registration_id, arm, task_id,"
            " repeat, status, chain_index, prev_hash, record_hash, body) VALUES ('y', '', 'r',"
            " 'a', 't', 0, 'ok', 0, '', '', '{}')",
        )


def test_spent_and_record_ids(pg_url: str) -> None:
    with PgRunStore(pg_url) as store:
        api = dict(driver="x", evidence_class="api")
        rec = record(status="infra_error", success=None, error="x", cost_usd=0.25, **api)
        store.append(rec)
        assert store.extend([rec, record(task_id="t9", cost_usd=0.5, **api)]) == (1, 1)
        assert store.spent_usd(DIGEST_A) == pytest.approx(0.75)
        assert store.has_record_id(rec.record_id) and not store.has_record_id("nope")


def test_reading_an_empty_database_creates_nothing(pg_url: str) -> None:
    with PgRunStore(pg_url) as store:
        assert store.records() == [] and store.digests() == [] and not store.exists()
        assert store.schema_drift() == []
    assert raw(pg_url, "SELECT to_regclass('records')") == [(None,)]


def test_a_changed_schema_is_reported_and_refused_for_writing(pg_url: str, tmp_path: Path) -> None:
    with PgRunStore(pg_url) as store:
        store.append(record())
        assert store.schema_drift() == []  # what prereg creates is what it expects
    raw(pg_url, "ALTER TABLE records DISABLE TRIGGER records_no_update")
    raw(pg_url, "DROP INDEX one_ok_record_per_unit")
    with PgRunStore(pg_url) as store:
        assert store.schema_drift() == [
            ("index", "one_ok_record_per_unit", "dropped"),
            ("trigger", "records_no_update", "altered"),
        ]
        with pytest.raises(IntegrityError, match="schema was changed"):
            store.append(record(task_id="t2"))
    # with the trigger off, an owner can edit a record: the chain shows it
    raw(pg_url, "UPDATE records SET body = replace(body, '\"success\":true', '\"success\":false')")
    report = verify_runs(pg_url, Registry(tmp_path / "registry"))
    assert {p.kind for p in report.problems} >= {"runs-schema", "runs-chain"}


def test_urls_and_clean_errors(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert redacted("postgresql://u:secret@h/db") == "postgresql://u:***@h/db"
    with pytest.raises(BadInput, match="malformed"):
        PgRunStore("postgresql://[bad")
    with pytest.raises(BadInput, match="unsupported run store URL scheme"):
        resolve_store(Path("runs"), "mysql://h/db")
    monkeypatch.setenv("PREREG_STORE", pg_url)
    assert resolve_store(Path("runs")) == pg_url  # the environment names the store
    assert resolve_store(Path("runs"), "elsewhere") == Path("elsewhere")  # --store wins
    monkeypatch.delenv("PREREG_STORE")
    assert resolve_store(Path("runs")) == Path("runs")  # SQLite stays the default
    gone = "postgresql://u:secret@/db?host=/nonexistent-prereg-socket-dir"
    with pytest.raises(StoreUnavailable, match="cannot reach") as caught:
        open_store(gone).records()
    assert "secret" not in str(caught.value)
