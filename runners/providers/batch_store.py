"""Submitted provider batches, remembered in the run store's database file.

Why: a batch can take hours. Its id is written here, in its own transaction,
*before* prereg waits for it, so a run that is interrupted (Ctrl-C, ``kill -9``,
a closed laptop) resumes by polling the same batch on the next
``prereg run --batch`` instead of paying for the requests twice.

This is a separate table (``provider_batches``) in the same SQLite file as the
run records, owned by this module; :mod:`prereg.runners.store.sqlite` is not changed
and its append-only ``records`` table is not touched. Rows here do change state
(``submitted`` -> ``collected``) because a batch's life has states; the records
a batch produced are still written only through the append-only store.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from prereg.runners.store.sqlite import Database, connect_wal

BatchState = Literal["submitted", "collected"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS provider_batches (
    batch_id            TEXT    PRIMARY KEY,
    provider            TEXT    NOT NULL,
    registration_digest TEXT    NOT NULL,
    model               TEXT    NOT NULL,
    custom_ids          TEXT    NOT NULL,
    input_file_id       TEXT,
    state               TEXT    NOT NULL CHECK (state IN ('submitted', 'collected')),
    submitted_at        TEXT    NOT NULL,
    updated_at          TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS provider_batches_by_digest
    ON provider_batches (registration_digest, provider, state);
"""


@dataclass(frozen=True)
class StoredBatch:
    batch_id: str
    provider: str
    registration_digest: str
    model: str
    custom_ids: tuple[str, ...]
    input_file_id: str | None
    state: BatchState
    submitted_at: str


class BatchStore(Database):
    """The ``provider_batches`` table next to the run records."""

    _conn: sqlite3.Connection | None

    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = connect_wal(self.path, _SCHEMA)
        return self._conn

    def record(
        self,
        batch_id: str,
        *,
        provider: str,
        digest: str,
        model: str,
        custom_ids: list[str],
        input_file_id: str | None = None,
    ) -> None:
        """Remember a submitted batch (committed before anyone waits for it)."""
        now = datetime.now(UTC).isoformat()
        with self._lock:
            conn = self._connect()
            conn.execute(
                "INSERT INTO provider_batches (batch_id, provider, registration_digest, model,"
                " custom_ids, input_file_id, state, submitted_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?, 'submitted', ?, ?)",
                (
                    batch_id,
                    provider,
                    digest,
                    model,
                    json.dumps(custom_ids),
                    input_file_id,
                    now,
                    now,
                ),
            )

    def mark_collected(self, batch_id: str) -> None:
        with self._lock:
            self._connect().execute(
                "UPDATE provider_batches SET state = 'collected', updated_at = ? "
                "WHERE batch_id = ?",
                (datetime.now(UTC).isoformat(), batch_id),
            )

    def batches(
        self,
        digest: str | None = None,
        provider: str | None = None,
        state: BatchState | None = None,
    ) -> list[StoredBatch]:
        clauses, params = [], []
        for column, value in (
            ("registration_digest", digest),
            ("provider", provider),
            ("state", state),
        ):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        with self._lock:
            if self._conn is None and not self.path.exists():
                return []
            rows = (
                self._connect()
                .execute(
                    "SELECT batch_id, provider, registration_digest, model, custom_ids, "
                    f"input_file_id, state, submitted_at FROM provider_batches{where} "
                    "ORDER BY submitted_at, batch_id",
                    tuple(params),
                )
                .fetchall()
            )
        return [
            StoredBatch(
                str(r[0]),
                str(r[1]),
                str(r[2]),
                str(r[3]),
                tuple(json.loads(r[4])),
                r[5],
                r[6],
                str(r[7]),
            )
            for r in rows
        ]
