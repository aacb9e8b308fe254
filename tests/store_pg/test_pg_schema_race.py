"""Workers started together create the store's schema once, and none of them fails.

The race, made deterministic: a worker that has already looked for the tables (and not
found them) waits on the schema lock while another session creates them and commits.
It must then see the tables and go on; it once failed with ``DuplicateTable`` (its
transaction still saw the catalogue as it was before the wait), as one of three workers
started alongside each other did in tests/store_pg/test_pg_workers.py.
"""

from __future__ import annotations

import threading

import psycopg

from prereg.runners.store import postgres as store_pg
from prereg.runners.store.postgres import PgRunStore
from tests.waiting import wait_until


def _someone_waits_for_an_advisory_lock(url: str) -> bool:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        ).fetchone()
    return row is not None and row[0] > 0


def test_a_worker_that_waited_for_the_schema_lock_finds_the_tables(pg_url: str) -> None:
    waiting = PgRunStore(pg_url)
    assert not waiting.exists()  # its session looked for the tables and did not find them
    errors: list[BaseException] = []

    def ensure() -> None:
        try:
            waiting.ensure_schema()
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    worker = threading.Thread(target=ensure)
    with psycopg.connect(pg_url, autocommit=True) as creator:
        with creator.transaction():
            creator.execute("SELECT pg_advisory_xact_lock(%s)", (store_pg._SCHEMA_LOCK,))
            worker.start()
            wait_until(
                lambda: _someone_waits_for_an_advisory_lock(pg_url),
                "the worker waits for the lock",
            )
            creator.execute(store_pg._SCHEMA)  # type: ignore[arg-type]
    worker.join(timeout=30)
    assert not worker.is_alive()
    assert errors == []
    assert waiting.schema_drift() == []  # the one schema, created once
    with psycopg.connect(pg_url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_tables WHERE tablename = 'records'").fetchone()
    assert row == (1,)
    waiting.close()
