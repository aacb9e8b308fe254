"""The run store: SQLite in WAL mode, append-only, crash-safe, retryable.

Design:

- One table of records; each record is one row written in one transaction, with
  its full registration digest in an indexed column and the whole validated
  record as JSON. A crash or ``kill -9`` leaves either the whole row or nothing.
- Triggers refuse ``UPDATE`` and ``DELETE``: records are never edited or removed.
- Append-only *and* retryable: the uniqueness of a unit (digest, arm, task,
  repeat) is a *partial* unique index over ``status = 'ok'`` rows. An
  ``infra_error`` row is kept as evidence of the failure but does not occupy the
  unit, so the next run retries it by appending a new row; a second ``ok`` row
  for the same unit is refused by the database itself, whatever process writes it.
- ``synchronous=NORMAL`` in WAL mode: a committed transaction survives a killed
  process (the case the issue asks for); only an OS crash or power loss can lose
  the last commits, never corrupt the file. It keeps commits cheap under
  concurrency.
- Reading a store that does not exist yet returns nothing and creates nothing.
- Tamper evidence: every record is a link of its registration digest's hash chain
  (:mod:`prereg.runners.store.chain`), computed inside the appending transaction, so
  concurrent writers serialise on the chain's head; a unique index keeps one record
  per chain position. :mod:`prereg.runners.store.verify` checks the chains, the
  schema (triggers and indexes present and unaltered), SQLite's integrity check and
  the registry's anchors. The schema is applied only to a new store: reading an
  existing one never re-creates a dropped trigger or index (that would erase the
  evidence), and writing to a store whose schema was changed is refused (exit 3).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Self

from prereg.core.errors import BadInput, IntegrityError, WriteFailure
from prereg.runners.record import RunRecord
from prereg.runners.store import chain
from prereg.runners.store.interface import (
    INDEXED_COLUMNS,
    ChainConflict,
    ChainRow,
    DuplicateRecord,
    UnitClaims,
    UnitKey,
    append_each,
    indexed_columns,
)

__all__ = [  # the interface's shared names stay importable from here
    "INDEXED_COLUMNS",
    "ChainConflict",
    "ChainRow",
    "DuplicateRecord",
    "RunStore",
    "indexed_columns",
]

STORE_FILENAME = "runs.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    seq                 INTEGER PRIMARY KEY AUTOINCREMENT,
    record_id           TEXT    NOT NULL UNIQUE,
    registration_digest TEXT    NOT NULL CHECK (registration_digest GLOB 'sha256:*'
                                                AND length(registration_digest) = 71),
    registration_id     TEXT    NOT NULL,
    arm                 TEXT    NOT NULL,
    task_id             TEXT    NOT NULL,
    repeat              INTEGER NOT NULL,
    status              TEXT    NOT NULL CHECK (status IN ('ok', 'infra_error')),
    success             INTEGER,
    cost_usd            REAL,
    written_at          TEXT    NOT NULL,
    chain_index         INTEGER NOT NULL CHECK (chain_index >= 0),
    prev_hash           TEXT    NOT NULL,
    record_hash         TEXT    NOT NULL,
    body                TEXT    NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS one_link_per_chain_position
    ON records (registration_digest, chain_index);
CREATE UNIQUE INDEX IF NOT EXISTS one_ok_record_per_unit
    ON records (registration_digest, arm, task_id, repeat) WHERE status = 'ok';
CREATE INDEX IF NOT EXISTS records_by_registration ON records (registration_id);
CREATE TRIGGER IF NOT EXISTS records_no_update BEFORE UPDATE ON records
BEGIN SELECT RAISE(ABORT, 'run records are append-only: UPDATE is refused'); END;
CREATE TRIGGER IF NOT EXISTS records_no_delete BEFORE DELETE ON records
BEGIN SELECT RAISE(ABORT, 'run records are append-only: DELETE is refused'); END;
"""


#: The columns a store written before run-record hash chains lacks.
CHAIN_COLUMNS = frozenset({"chain_index", "prev_hash", "record_hash"})

_SCHEMA_TABLE_CHECK = ""  # connect first, check the columns, then apply the schema

_EXPECTED: dict[tuple[str, str], str | None] = {}


def expected_schema() -> dict[tuple[str, str], str | None]:
    """(type, name) -> SQL of every schema object of the records table, as SQLite stores it.

    Built once from ``_SCHEMA`` in an in-memory database, so it is exactly the text a
    store created by this prereg holds (SQLite keeps the statement without ``IF NOT
    EXISTS``). A schema change needs a migration of existing stores anyway.
    """
    if not _EXPECTED:
        conn = sqlite3.connect(":memory:")
        try:
            conn.executescript(_SCHEMA)
            _EXPECTED.update(_schema_of(conn))
        finally:
            conn.close()
    return _EXPECTED


def create_schema(conn: sqlite3.Connection, schema: str) -> None:
    """A new store's tables with their indexes and triggers (``schema``, every statement
    ``IF NOT EXISTS``), in one transaction: a process opening the store meanwhile
    (workers start together) sees none of it or all of it, never a table without its
    triggers (which it would refuse as tampered with). A second creator waits for the
    first's lock, then finds every object there."""
    try:
        conn.executescript(f"BEGIN IMMEDIATE;\n{schema}\nCOMMIT;")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _schema_of(conn: sqlite3.Connection) -> dict[tuple[str, str], str | None]:
    rows = conn.execute(
        "SELECT type, name, sql FROM sqlite_master WHERE tbl_name = 'records'"
    ).fetchall()
    return {(str(kind), str(name)): sql for kind, name, sql in rows}


def schema_drift(conn: sqlite3.Connection) -> list[tuple[str, str, str]]:
    """(type, name, what) for every object of the records table that differs from the
    schema this prereg creates: "dropped", "altered" or "added" (a trigger or index an
    attacker dropped, rewrote or slipped in)."""
    expected, actual = expected_schema(), _schema_of(conn)
    drift = [(kind, name, "dropped") for kind, name in expected if (kind, name) not in actual]
    drift += [
        (kind, name, "altered" if (kind, name) in expected else "added")
        for (kind, name), sql in actual.items()
        if expected.get((kind, name), "") != sql
    ]
    return sorted(drift)


@contextmanager
def sqlite_errors() -> Iterator[None]:
    """Let every SQLite failure surface as ``sqlite3.DatabaseError``.

    A damaged file can make SQLite name bytes that are not UTF-8 in an error message
    (a schema entry, say); Python's sqlite3 then raises UnicodeDecodeError instead.
    """
    try:
        yield
    except UnicodeDecodeError as exc:
        raise sqlite3.DatabaseError(
            f"the database holds bytes that are not UTF-8 ({exc.reason} at byte {exc.start} "
            "of an SQLite message)"
        ) from None


def _write_failure(exc: sqlite3.OperationalError, path: Path) -> Exception:
    """A refused write (disk full, read-only) as WriteFailure, exit 1; others unchanged.

    The transaction is rolled back by SQLite, so no half record is left.
    """
    text = str(exc).lower()
    if "full" in text or "disk i/o" in text or _readonly_refused(exc):
        return WriteFailure(f"cannot write a run record: {exc}", file=str(path))
    return exc


def store_path(path: Path | str) -> Path:
    """The database file: ``path`` itself, or ``path/runs.sqlite`` for a folder.

    A path named ``runs.sqlite`` is the file even when a folder is in its place (that is
    reported, not looked into).
    """
    p = Path(path)
    if p.name != STORE_FILENAME and (p.is_dir() or p.suffix == ""):
        return p / STORE_FILENAME
    return p


def not_a_file(path: Path) -> str | None:
    """Why the entry at ``path`` is no database file (a folder in its place, say); None
    when it is a regular file or nothing is there."""
    if not path.exists() or path.is_file():
        return None
    kind = "a folder" if path.is_dir() else "not a regular file"
    return f"the run store {path.name} is {kind}, not a file: it was replaced or damaged"


def connect_wal(path: Path, schema: str) -> sqlite3.Connection:
    """Open (creating) the run database in WAL mode and apply ``schema``.

    One place for the connection settings shared by every table of the run
    database (run records, provider batches): autocommit (explicit
    transactions), WAL, and a long busy timeout for concurrent writers.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, timeout=BUSY_S, isolation_level=None, check_same_thread=False)
    wal_mode(conn)
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(f"PRAGMA busy_timeout={int(BUSY_S * 1000)}")
    _map_reads(conn)
    conn.executescript(schema)
    return conn


#: How long a connection waits for another's lock (workers write one store together).
BUSY_S = 60.0


def wal_mode(conn: sqlite3.Connection) -> None:
    """Put the database in WAL mode. Where other processes open a new store at the same
    moment (workers start together), SQLite can refuse the mode change with "database
    is locked" at once, without waiting as for any other lock: so it is tried again,
    after a short and growing pause, for up to :data:`BUSY_S`."""
    deadline = time.monotonic() + BUSY_S
    pause = 0.001
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(2 * pause, 0.05)


#: How much of the database file a connection reads through a memory map (SQLite caps
#: it at its compile-time maximum, 2 GiB in the usual builds).
MMAP_BYTES = 1 << 30


def _map_reads(conn: sqlite3.Connection) -> None:
    """Read pages through a memory map instead of a ``read`` call each: reading a large
    store whole (``analyse``'s chains, the integrity check) then copies nothing through
    the kernel, a fifth of that read's time. SQLite maps for reading only; writes still
    go through its journal. The store is append-only (never truncated under a reader),
    so the map's one hazard, a file shrunk while mapped, does not arise in use."""
    conn.execute(f"PRAGMA mmap_size={MMAP_BYTES}")


def writable(path: Path) -> bool:
    """Whether this process may write the database file and create its ``-wal`` and
    ``-shm`` files beside it (what opening it for writing in WAL mode needs)."""
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)


def _readonly_refused(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "readonly" in text or "read-only" in text or "unable to open" in text


def connect_readonly(path: Path) -> sqlite3.Connection:
    """Open the run database for reading only: it cannot write the file, whatever runs.

    ``mode=ro`` first: it reads a write-ahead log a writer left (SQLite needs the
    ``-shm`` file beside it, existing or creatable). Where it cannot be created (a
    read-only folder) and there is no log to read, ``immutable=1``: SQLite then reads
    the file alone and takes no locks, which is sound because no writer is at work (a
    writer in WAL mode keeps a ``-shm`` file). A log with content that cannot be read
    is WriteFailure (exit 1), saying so, rather than a silently shorter store.
    """
    uri = path.absolute().as_uri()
    try:
        conn = sqlite3.connect(
            f"{uri}?mode=ro", uri=True, timeout=60.0, isolation_level=None, check_same_thread=False
        )
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            _map_reads(conn)
        except BaseException:
            conn.close()
            raise
        return conn
    except sqlite3.OperationalError as exc:
        if not _readonly_refused(exc):
            raise
    wal = path.with_name(path.name + "-wal")
    if wal.exists() and wal.stat().st_size > 0:
        raise WriteFailure(
            f"the run store cannot be read without write access to {path.parent}: its "
            f"write-ahead log {wal.name} holds writes not yet merged into {path.name}, and "
            f"SQLite must create {path.name}-shm beside it to read them. Make the folder "
            "writable and run `prereg verify` once (it merges the log); then it reads "
            "read-only",
            file=str(path),
        )
    conn = sqlite3.connect(
        f"{uri}?immutable=1", uri=True, isolation_level=None, check_same_thread=False
    )
    _map_reads(conn)
    return conn


class Database:
    """A lazily opened connection to the run database, closed once."""

    _conn: sqlite3.Connection | None

    def __init__(self, path: Path | str) -> None:
        self.path = store_path(path)
        self._conn: sqlite3.Connection | None = None
        self.readonly = False  # whether the open connection is read-only
        self._lock = threading.Lock()
        self._drift: list[tuple[str, str, str]] = []

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RunStore(Database):
    """Append-only store of :class:`RunRecord`. ``RunStore(workspace.runs)`` works.

    The SQLite implementation of :class:`prereg.runners.store.interface.RecordStore`.
    """

    @property
    def where(self) -> str:
        return str(self.path)

    @property
    def name(self) -> str:
        return self.path.name

    def exists(self) -> bool:
        return self.path.exists()

    def unit_claims(self, digest: str, keys: Sequence[UnitKey], worker: str) -> UnitClaims | None:
        """None: one machine's processes share no claims; the unique index refuses a
        second ok record for a unit (the other process counts it as a duplicate)."""
        del digest, keys, worker
        return None

    # ---- connection ----------------------------------------------------------------------

    def _connect(self, create: bool) -> sqlite3.Connection | None:
        """The connection: read-only for reading a store this process cannot write (a
        read-only workspace reads like any other); read-write to create or append."""
        if self._conn is not None and (not create or not self.readonly):
            return self._conn
        if not create and not self.path.exists():
            return None
        if self._conn is not None:  # read-only so far; a write needs a writable connection
            self._conn.close()
            self._conn = None
        problem = not_a_file(self.path)
        if problem is not None:
            raise IntegrityError(f"{problem}; run `prereg verify`", file=str(self.path))
        with sqlite_errors():
            conn, readonly = self._open(create)
            try:
                if readonly and not self._columns(conn):
                    conn.close()  # no records table yet: nothing to read, nothing created
                    return None
                self._drift = self._prepare(conn)
            except BaseException:
                conn.close()
                raise
        self._conn, self.readonly = conn, readonly
        return self._conn

    def _open(self, create: bool) -> tuple[sqlite3.Connection, bool]:
        """(connection, whether it is read-only)."""
        if not create and not writable(self.path):
            return connect_readonly(self.path), True
        try:
            return connect_wal(self.path, _SCHEMA_TABLE_CHECK), False
        except sqlite3.OperationalError as exc:
            if create or not _readonly_refused(exc):
                raise
            return connect_readonly(self.path), True  # refused although access said yes

    @staticmethod
    def _columns(conn: sqlite3.Connection) -> set[str]:
        return {str(row[1]) for row in conn.execute("PRAGMA table_info(records)")}

    def _prepare(self, conn: sqlite3.Connection) -> list[tuple[str, str, str]]:
        """Create a new store's schema; return how an existing one's differs from it.

        An existing store's schema is never re-applied: a dropped trigger or index would
        be re-created by the next read, and the tampering would leave no trace.
        """
        columns = self._columns(conn)
        if columns and not columns & CHAIN_COLUMNS:
            raise BadInput(
                f"{self.path} was written by a prereg without run-record hash chains; "
                "its records cannot be verified. Move it away and run again (or import "
                "its records through a prereg of that version's export)",
                file=str(self.path),
            )
        if not columns:  # a new store (or one holding other tables only)
            create_schema(conn, _SCHEMA)
        return schema_drift(conn)

    def schema_drift(self) -> list[tuple[str, str, str]]:
        """How the store's schema differs from this prereg's (see :func:`schema_drift`)."""
        with self._lock:
            if self._connect(create=False) is None:
                return []
            return list(self._drift)

    def integrity_problems(self, limit: int = 20) -> list[str]:
        """SQLite's own ``integrity_check`` (b-tree structure, every index against its
        table, row order): empty when the file is sound."""
        rows = self._query(f"PRAGMA integrity_check({int(limit)})")
        found = [str(row[0]) for row in rows]
        return [] if found == ["ok"] else found

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                conn = self._connect(create=True)
            except sqlite3.OperationalError as exc:  # a store that cannot be opened to write
                raise _write_failure(exc, self.path) from None
            assert conn is not None
            if self._drift:
                raise IntegrityError(
                    "the run store's schema was changed, so it no longer keeps records "
                    "append-only and one per unit; nothing is written to it. Run `prereg "
                    "verify`",
                    file=str(self.path),
                    details=[f"{kind} {name}: {what}" for kind, name, what in self._drift],
                )
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            except sqlite3.OperationalError as exc:
                raise _write_failure(exc, self.path) from None

    # ---- writing -------------------------------------------------------------------------

    def append(self, record: RunRecord) -> RunRecord:
        """Link ``record`` to its chain and write it in one transaction; returns it linked.

        DuplicateRecord if the unit is already ok (or the record id is stored).
        """
        with self._tx() as conn:
            index, prev = self._next_link(conn, record.registration_digest)
            linked, body = chain.linked_body(record.model_copy(update={"chain": None}), index, prev)
            self._insert(conn, linked, body)
        return linked

    def append_linked(self, record: RunRecord) -> None:
        """Write an already linked record (an import) only where it continues the chain.

        ChainConflict when its link is not the next one of the stored chain;
        DuplicateRecord as :meth:`append`.
        """
        link = record.chain
        if link is None:
            raise ChainConflict(f"record {record.record_id} carries no chain link")
        with self._tx() as conn:
            index, prev = self._next_link(conn, record.registration_digest)
            if (link.index, link.prev) != (index, prev):
                raise ChainConflict(
                    f"record {record.record_id} is link {link.index} after {link.prev[:19]}..., "
                    f"but the stored chain continues at link {index} after {prev[:19]}..."
                )
            if chain.link_hash(chain.content(record), link.index, link.prev) != link.hash:
                raise ChainConflict(f"record {record.record_id}: content does not match its hash")
            self._insert(conn, record)

    @staticmethod
    def _next_link(conn: sqlite3.Connection, digest: str) -> tuple[int, str]:
        row = conn.execute(
            "SELECT chain_index, record_hash FROM records WHERE registration_digest = ? "
            "ORDER BY chain_index DESC LIMIT 1",
            (digest,),
        ).fetchone()
        if row is None:
            return 0, chain.genesis(digest)
        return int(row[0]) + 1, str(row[1])

    @staticmethod
    def _insert(conn: sqlite3.Connection, record: RunRecord, body: str | None = None) -> None:
        """Write a linked record; ``body``: its :func:`chain.stored_body`, if already made."""
        assert record.chain is not None
        row = (
            *indexed_columns(record),
            datetime.now(UTC).isoformat(),
            record.chain.index,
            record.chain.prev,
            record.chain.hash,
            chain.stored_body(record) if body is None else body,
        )
        try:
            conn.execute(
                "INSERT INTO records (record_id, registration_digest, registration_id, arm,"
                " task_id, repeat, status, success, cost_usd, written_at, chain_index,"
                " prev_hash, record_hash, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                row,
            )
        except sqlite3.IntegrityError as exc:
            raise DuplicateRecord.of(record, str(exc)) from None

    def extend(self, records: Iterable[RunRecord]) -> tuple[int, int]:
        """Append each record in its own transaction; (written, skipped as duplicates)."""
        return append_each(self, records)

    # ---- reading -------------------------------------------------------------------------

    def _query(self, sql: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
        with self._lock:
            conn = self._connect(create=False)
            if conn is None:
                return []
            with sqlite_errors():
                return conn.execute(sql, params).fetchall()

    def records(
        self,
        registration_digest: str | None = None,
        registration_id: str | None = None,
        status: str | None = None,
        *,
        not_registration_id: str | None = None,
    ) -> list[RunRecord]:
        """Records in write order, optionally filtered by digest, registration id, status
        (and filed under another registration id than ``not_registration_id``)."""
        clauses, params = [], []
        for column, value in (
            ("registration_digest = ?", registration_digest),
            ("registration_id = ?", registration_id),
            ("status = ?", status),
            ("registration_id != ?", not_registration_id),
        ):
            if value is not None:
                clauses.append(column)
                params.append(value)
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        rows = self._query(f"SELECT body FROM records{where} ORDER BY seq", tuple(params))
        return [RunRecord.model_validate_json(str(body)) for (body,) in rows]

    def completed_keys(self, digest: str) -> set[tuple[str, str, int]]:
        """(arm, task_id, repeat) of every unit with an ok record under ``digest``."""
        rows = self._query(
            "SELECT arm, task_id, repeat FROM records WHERE "
            "registration_digest = ? AND status = 'ok'",
            (digest,),
        )
        return {(str(a), str(t), int(r)) for a, t, r in rows}  # type: ignore[call-overload]

    def spent_usd(self, digest: str) -> float:
        """Measured spend already recorded under ``digest`` (null costs count as 0)."""
        rows = self._query(
            "SELECT COALESCE(SUM(cost_usd), 0) FROM records WHERE registration_digest = ?",
            (digest,),
        )
        return float(rows[0][0]) if rows else 0.0  # type: ignore[arg-type]

    def digests(self, registration_id: str | None = None) -> list[str]:
        """Every registration digest with records (filed under ``registration_id``, if
        given), in order of first appearance."""
        where = ""
        params: tuple[str, ...] = ()
        if registration_id is not None:
            where, params = " WHERE registration_id = ?", (registration_id,)
        rows = self._query(
            f"SELECT registration_digest, MIN(seq) FROM records{where} "
            "GROUP BY registration_digest ORDER BY MIN(seq)",
            params,
        )
        return [str(d) for d, _ in rows]

    def chain_rows(self, digest: str) -> list[ChainRow]:
        """The stored links of ``digest``'s chain, in chain order (for verification)."""
        rows = self._query(
            "SELECT seq, chain_index, prev_hash, record_hash, record_id, registration_digest,"
            " registration_id, arm, task_id, repeat, status, success, cost_usd, body"
            " FROM records WHERE registration_digest = ? ORDER BY chain_index, seq",
            (digest,),
        )
        return [ChainRow(*row) for row in rows]  # type: ignore[arg-type]

    def schema_objects(self) -> set[tuple[str, str]]:
        """(type, name) of the triggers and indexes the database holds."""
        rows = self._query(
            "SELECT type, name FROM sqlite_master WHERE type IN ('trigger', 'index')"
        )
        return {(str(t), str(n)) for t, n in rows}

    def has_record_id(self, record_id: str) -> bool:
        return bool(self._query("SELECT 1 FROM records WHERE record_id = ?", (record_id,)))

    def counts(self) -> dict[str, int]:
        """Rows per status (for summaries)."""
        rows = self._query("SELECT status, COUNT(*) FROM records GROUP BY status")
        return {str(s): int(n) for s, n in rows}  # type: ignore[call-overload]
