"""The run store in PostgreSQL: one store shared by workers on any number of machines.

The same records, chains and guarantees as the SQLite store (:mod:`prereg.runners.store.sqlite`),
each enforced by the database, whoever connects:

- triggers refuse ``UPDATE``, ``DELETE`` and ``TRUNCATE`` on ``records``;
- a partial unique index keeps one ok record per unit (digest, arm, task, repeat);
  infra_error rows are kept and do not occupy the unit;
- every row carries its registration digest (a CHECK on its form) and is a link of that
  digest's hash chain, computed inside the appending transaction under an advisory lock
  on the digest, so concurrent writers serialise on the chain's head; a unique index
  keeps one record per chain position;
- the schema is created only in a database without it (under an advisory lock, so
  workers starting together create it once); an existing one is compared with what this
  prereg creates, and a store whose triggers or indexes were dropped, disabled or
  altered is refused for writing and reported by ``prereg verify``.

Units are claimed through the ``claims`` table (:class:`PgClaims`): ``SELECT ... FOR
UPDATE SKIP LOCKED`` hands each unit to one worker with a lease; the lease lapses when
the worker's database session ends (a killed worker: its server process is gone from
``pg_stat_activity``) or when it is not renewed in time (a machine cut off). Claims are
bookkeeping, not evidence: they may be updated; the records alone are append-only.

The spend cap of a registration holds across workers through the ``spend_holds`` table
(:class:`PgSpendLedger`): before each request a worker inserts a hold of its worst-case
cost, in a transaction that takes the digest's chain lock and refuses the hold when the
spend recorded under the digest plus every live hold would pass the cap. The hold then
counts the measured cost until the unit's record, which carries that cost, is stored:
the same transaction deletes it. Holds lapse with their worker's claims (session ended
or lease not renewed). Holds are bookkeeping too, never records; they may be deleted.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Self, TypeGuard
from urllib.parse import unquote

from prereg.core.errors import BadInput, IntegrityError
from prereg.runners.record import RunRecord
from prereg.runners.store import chain
from prereg.runners.store.interface import (
    ChainConflict,
    ChainRow,
    DuplicateRecord,
    StoreUnavailable,
    StoreUnreadable,
    UnitKey,
    append_each,
    indexed_columns,
)

if TYPE_CHECKING:
    import psycopg

#: The URL schemes of a PostgreSQL store.
SCHEMES = ("postgresql://", "postgres://")

#: Seconds a claim is leased for; a running worker renews its leases well before.
LEASE_S = 300.0

_SCHEMA_LOCK = 0x70726572_65670001  # advisory lock key: creating the schema ("prereg" 1)

_FUNCTION_BODY = (
    " BEGIN RAISE EXCEPTION 'run records are append-only: % is refused', TG_OP"
    " USING ERRCODE = 'P0001'; END "
)

_SCHEMA = f"""
CREATE TABLE records (
    seq                 BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    record_id           TEXT    NOT NULL UNIQUE,
    registration_digest TEXT    NOT NULL CHECK (registration_digest LIKE 'sha256:%'
                                                AND length(registration_digest) = 71),
    registration_id     TEXT    NOT NULL,
    arm                 TEXT    NOT NULL,
    task_id             TEXT    NOT NULL,
    repeat              INTEGER NOT NULL,
    status              TEXT    NOT NULL CHECK (status IN ('ok', 'infra_error')),
    success             INTEGER,
    cost_usd            DOUBLE PRECISION,
    written_at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    chain_index         INTEGER NOT NULL CHECK (chain_index >= 0),
    prev_hash           TEXT    NOT NULL,
    record_hash         TEXT    NOT NULL,
    body                TEXT    NOT NULL
);
CREATE UNIQUE INDEX one_link_per_chain_position ON records (registration_digest, chain_index);
CREATE UNIQUE INDEX one_ok_record_per_unit
    ON records (registration_digest, arm, task_id, repeat) WHERE status = 'ok';
CREATE INDEX records_by_registration ON records (registration_id);
CREATE FUNCTION records_append_only() RETURNS trigger LANGUAGE plpgsql
    AS $fn${_FUNCTION_BODY}$fn$;
CREATE TRIGGER records_no_update BEFORE UPDATE ON records
    FOR EACH ROW EXECUTE FUNCTION records_append_only();
CREATE TRIGGER records_no_delete BEFORE DELETE ON records
    FOR EACH ROW EXECUTE FUNCTION records_append_only();
CREATE TRIGGER records_no_truncate BEFORE TRUNCATE ON records
    FOR EACH STATEMENT EXECUTE FUNCTION records_append_only();
CREATE TABLE claims (
    registration_digest TEXT    NOT NULL,
    arm                 TEXT    NOT NULL,
    task_id             TEXT    NOT NULL,
    repeat              INTEGER NOT NULL,
    ordinal             INTEGER NOT NULL,
    worker              TEXT,
    holder_pid          INTEGER,
    holder_start        TIMESTAMPTZ,
    lease_until         TIMESTAMPTZ,
    claimed             INTEGER NOT NULL DEFAULT 0,
    done                BOOLEAN NOT NULL DEFAULT false,
    PRIMARY KEY (registration_digest, arm, task_id, repeat)
);
CREATE INDEX claims_open ON claims (registration_digest, ordinal) WHERE NOT done;
"""

#: Spend holds (:class:`PgSpendLedger`); created apart so that a store made by an earlier
#: prereg gains the table when it is next written to.
_HOLDS = """
CREATE TABLE spend_holds (
    hold_id             BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    registration_digest TEXT    NOT NULL,
    arm                 TEXT    NOT NULL,
    task_id             TEXT    NOT NULL,
    repeat              INTEGER NOT NULL,
    worker              TEXT    NOT NULL,
    holder_pid          INTEGER NOT NULL,
    holder_start        TIMESTAMPTZ,
    lease_until         TIMESTAMPTZ NOT NULL,
    amount              DOUBLE PRECISION NOT NULL CHECK (amount >= 0),
    settled             BOOLEAN NOT NULL DEFAULT false,
    created_at          TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX spend_holds_by_registration ON spend_holds (registration_digest);
"""

#: (type, name) -> definition of every object that enforces the guarantees, as
#: PostgreSQL prints it (``{s}``: the store's schema name), whitespace collapsed.
_EXPECTED: dict[tuple[str, str], str] = {
    ("index", "one_link_per_chain_position"): "CREATE UNIQUE INDEX one_link_per_chain_position "
    "ON {s}.records USING btree (registration_digest, chain_index)",
    ("index", "one_ok_record_per_unit"): "CREATE UNIQUE INDEX one_ok_record_per_unit ON "
    "{s}.records USING btree (registration_digest, arm, task_id, repeat) WHERE "
    "(status = 'ok'::text)",
    ("index", "records_by_registration"): "CREATE INDEX records_by_registration ON "
    "{s}.records USING btree (registration_id)",
    ("index", "records_pkey"): "CREATE UNIQUE INDEX records_pkey ON {s}.records USING btree (seq)",
    ("index", "records_record_id_key"): "CREATE UNIQUE INDEX records_record_id_key ON "
    "{s}.records USING btree (record_id)",
    ("trigger", "records_no_update"): "CREATE TRIGGER records_no_update BEFORE UPDATE ON "
    "{s}.records FOR EACH ROW EXECUTE FUNCTION records_append_only() enabled",
    ("trigger", "records_no_delete"): "CREATE TRIGGER records_no_delete BEFORE DELETE ON "
    "{s}.records FOR EACH ROW EXECUTE FUNCTION records_append_only() enabled",
    ("trigger", "records_no_truncate"): "CREATE TRIGGER records_no_truncate BEFORE TRUNCATE "
    "ON {s}.records FOR EACH STATEMENT EXECUTE FUNCTION records_append_only() enabled",
    ("function", "records_append_only"): _FUNCTION_BODY,
}

_DEFINITIONS = """
SELECT 'index', c.relname, pg_get_indexdef(c.oid)
  FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
 WHERE i.indrelid = %(t)s::regclass
UNION ALL
SELECT 'trigger', t.tgname, pg_get_triggerdef(t.oid) ||
       CASE WHEN t.tgenabled = 'O' THEN ' enabled' ELSE ' disabled' END
  FROM pg_trigger t WHERE t.tgrelid = %(t)s::regclass AND NOT t.tgisinternal
UNION ALL
SELECT 'function', p.proname, p.prosrc
  FROM pg_proc p WHERE p.proname = 'records_append_only'
   AND p.pronamespace = (SELECT relnamespace FROM pg_class WHERE oid = %(t)s::regclass)
"""


def is_postgres_url(location: object) -> TypeGuard[str]:
    """Whether ``location`` names a PostgreSQL store (rather than an SQLite path)."""
    return isinstance(location, str) and location.startswith(SCHEMES)


#: query parameters of a connection URL whose values are secrets or say where one is (libpq's
#: ``password``, ``sslpassword``, ``passfile``), and any whose name says it holds one
_SECRET_PARAMETER = re.compile(r"pass|secret|token|credential", re.IGNORECASE)

#: shortest secret value of a URL removed from a message that may quote it (a shorter one
#: would cut up the message's own words)
_MIN_SCRUBBED = 4


def _secret_parameter(name: str) -> bool:
    return bool(_SECRET_PARAMETER.search(unquote(name)))


def redacted(url: str) -> str:
    """``url`` without its secrets, for messages and reports: the password of its userinfo
    and the value of every query parameter that holds a secret (``password``,
    ``sslpassword``, ``passfile``, ...) become ``***``. Read by hand rather than by
    :func:`urllib.parse.urlsplit`, so a malformed URL is redacted too."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    rest, hashed, fragment = rest.partition("#")
    rest, asked, query = rest.partition("?")
    authority, slash, path = rest.partition("/")
    userinfo, at, hosts = authority.rpartition("@")
    if at and ":" in userinfo:
        authority = f"{userinfo.split(':', 1)[0]}:***@{hosts}"
    if asked:
        query = "&".join(
            f"{name}=***" if eq and _secret_parameter(name) else f"{name}{eq}{value}"
            for name, eq, value in (part.partition("=") for part in query.split("&"))
        )
    return f"{scheme}://{authority}{slash}{path}{asked}{query}{hashed}{fragment}"


def url_secrets(url: str) -> tuple[str, ...]:
    """The secret values ``url`` holds (as written and percent-decoded), longest first."""
    _, _, rest = url.partition("://")
    rest = rest.partition("#")[0]
    rest, _, query = rest.partition("?")
    userinfo, at, _ = rest.partition("/")[0].rpartition("@")
    values = [userinfo.split(":", 1)[1]] if at and ":" in userinfo else []
    for part in query.split("&") if query else ():
        name, eq, value = part.partition("=")
        if eq and _secret_parameter(name):
            values.append(value)
    found = {form for value in values for form in (value, unquote(value))}
    return tuple(sorted((v for v in found if len(v) >= _MIN_SCRUBBED), key=len, reverse=True))


def scrubbed(text: str, url: str) -> str:
    """``text`` (a driver's error message, which may quote the URL or a value of it) with
    ``url``'s secrets and the URL itself redacted."""
    text = text.replace(url, redacted(url))
    for value in url_secrets(url):
        text = text.replace(value, "***")
    return text


def _psycopg() -> Any:
    """psycopg, imported where a PostgreSQL store is used (an optional dependency)."""
    try:
        import psycopg  # lazy: optional extra prereg-agents[postgres], for PostgreSQL stores only
    except ImportError:
        raise BadInput(
            "a PostgreSQL run store needs psycopg: pip install 'prereg-agents[postgres]'",
            field="--store",
        ) from None
    return psycopg


def _squash(text: str | None) -> str:
    return re.sub(r"\s+", " ", text or "").strip()


def _has_table(conn: psycopg.Connection[Any], name: str) -> bool:
    row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (name,)).fetchone()
    return bool(row and row[0])


def lock_key(text: str) -> int:
    """A signed 64-bit advisory lock key for ``text`` (a digest's chain)."""
    return int.from_bytes(
        hashlib.sha256(b"prereg-chain:" + text.encode()).digest()[:8], "big", signed=True
    )


class PgRunStore:
    """Append-only store of :class:`RunRecord` in PostgreSQL (one connection, autocommit;
    explicit transactions where a write needs one)."""

    def __init__(self, url: str) -> None:
        if not is_postgres_url(url):
            raise BadInput(f"not a PostgreSQL URL: {url!r}", field="--store")
        self.url = url
        self._params: dict[str, Any] = {}
        self._conninfo = self._parse(url)
        self._conn: psycopg.Connection[Any] | None = None
        self._lock = threading.Lock()
        self._drift: list[tuple[str, str, str]] | None = None
        self._present = False  # the records table was seen (it is never dropped by us)
        self._ready = False  # the schema was checked for writing
        self._holding = False  # this store's session has held spend (PgSpendLedger)

    def _parse(self, url: str) -> str:
        psycopg = _psycopg()
        try:
            params = psycopg.conninfo.conninfo_to_dict(url)
        except psycopg.ProgrammingError as exc:
            raise BadInput(
                f"malformed PostgreSQL URL {redacted(url)}: {scrubbed(str(exc).strip(), url)}",
                field="--store",
            ) from None
        self._params = dict(params)
        params.setdefault("connect_timeout", 10)
        params.setdefault("application_name", "prereg")
        return str(psycopg.conninfo.make_conninfo(**params))

    # ---- RecordStore: identity -------------------------------------------------------------

    @property
    def where(self) -> str:
        return redacted(self.url)

    def _message(self, exc: BaseException) -> str:
        """A database error's message for ours, without the URL's secrets."""
        return scrubbed(_squash(str(exc)), self.url)

    @property
    def name(self) -> str:
        database = self._params.get("dbname") or "-"
        return f"postgresql database {database}"

    # ---- connection ------------------------------------------------------------------------

    def _connection(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed:
            psycopg = _psycopg()
            try:
                self._conn = psycopg.connect(self._conninfo, autocommit=True)
            except psycopg.OperationalError as exc:
                raise StoreUnavailable(
                    f"cannot reach the run store {self.where}: {self._message(exc)}",
                    field="--store",
                ) from None
        return self._conn

    @contextmanager
    def _session(self) -> Iterator[psycopg.Connection[Any]]:
        """The connection, under this store's lock; a lost server is StoreUnavailable, any
        other database error while reading StoreUnreadable (the caller reports it)."""
        psycopg = _psycopg()
        with self._lock:
            conn = self._connection()
            try:
                yield conn
            except psycopg.OperationalError as exc:
                raise StoreUnavailable(
                    f"the run store {self.where} failed: {self._message(exc)}", field="--store"
                ) from None

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- schema ----------------------------------------------------------------------------

    def _has_records(self, conn: psycopg.Connection[Any]) -> bool:
        if not self._present:
            self._present = _has_table(conn, "records")
        return self._present

    def exists(self) -> bool:
        with self._session() as conn:
            return self._has_records(conn)

    def ensure_schema(self) -> None:
        """Create the schema in a database without one (once, whoever races); refuse
        (IntegrityError, exit 3) to write to a store whose schema was changed."""
        if self._ready:
            return
        with self._session() as conn:
            if not self._has_records(conn) or not _has_table(conn, "spend_holds"):
                self._create_schema(conn)
            drift = self._drift_of(conn)
        if drift:
            raise IntegrityError(
                "the run store's schema was changed, so it no longer keeps records "
                "append-only and one per unit; nothing is written to it. Run `prereg verify`",
                file=self.where,
                details=[f"{kind} {name}: {what}" for kind, name, what in drift],
            )
        self._ready = True

    def _create_schema(self, conn: psycopg.Connection[Any]) -> None:
        """Create the tables unless a racing worker did while this one waited.

        The lock is a session lock taken in a statement of its own, so the check after it
        runs in a new transaction: a transaction that waited for the lock would still
        see the catalogue as it was when it began (PostgreSQL reads the invalidations
        another session's CREATE TABLE sends at the start of a transaction), find no
        table and fail on creating it (DuplicateTable), as a worker started alongside
        others did.
        """
        conn.execute("SELECT pg_advisory_lock(%s)", (_SCHEMA_LOCK,))
        try:
            if not self._has_records(conn):
                with conn.transaction():
                    conn.execute(_SCHEMA)
            if not _has_table(conn, "spend_holds"):  # new, or made by an earlier prereg
                self._create_holds(conn)
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (_SCHEMA_LOCK,))

    def _create_holds(self, conn: psycopg.Connection[Any]) -> None:
        psycopg = _psycopg()
        try:
            with conn.transaction():
                conn.execute(_HOLDS)
        except psycopg.errors.InsufficientPrivilege:
            raise StoreUnavailable(
                f"the run store {self.where} has no spend_holds table (made by an earlier "
                "prereg) and this role may not create it: run `prereg run ID --store ... "
                "--max-units 0` once as the owner of the records table",
                field="--store",
            ) from None

    def _drift_of(self, conn: psycopg.Connection[Any]) -> list[tuple[str, str, str]]:
        if self._drift is None:
            schema = conn.execute(
                "SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE c.oid = 'records'::regclass"
            ).fetchone()
            name = str(schema[0]) if schema else "public"
            actual = {
                (str(kind), str(obj)): _squash(str(sql))
                for kind, obj, sql in conn.execute(_DEFINITIONS, {"t": "records"}).fetchall()
            }
            expected = {key: _squash(sql.replace("{s}", name)) for key, sql in _EXPECTED.items()}
            drift = [(k, n, "dropped") for k, n in expected if (k, n) not in actual]
            drift += [
                (k, n, "altered" if (k, n) in expected else "added")
                for (k, n), sql in actual.items()
                if expected.get((k, n)) != sql
            ]
            self._drift = sorted(drift)
        return list(self._drift)

    def schema_drift(self) -> list[tuple[str, str, str]]:
        with self._session() as conn:
            if not self._has_records(conn):
                return []
            return self._drift_of(conn)

    def integrity_problems(self, limit: int = 20) -> list[str]:
        """Empty: PostgreSQL checks its pages itself (checksums, amcheck are the server
        administrator's); the chains and the schema are what verification checks here."""
        del limit
        return []

    # ---- writing ---------------------------------------------------------------------------

    @contextmanager
    def _tx(self, digest: str) -> Iterator[psycopg.Connection[Any]]:
        """A transaction holding the lock of ``digest``'s chain (writers serialise on it)."""
        self.ensure_schema()
        with self._session() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(digest),))
            yield conn

    def append(self, record: RunRecord) -> RunRecord:
        """Link and insert ``record``; a record that carries its measured cost ends, in
        the same transaction, the spend holds this session charged to its unit (its cost
        now counts through the record: never twice, never in neither)."""
        with self._tx(record.registration_digest) as conn:
            index, prev = self._next_link(conn, record.registration_digest)
            linked, body = chain.linked_body(record.model_copy(update={"chain": None}), index, prev)
            self._insert(conn, linked, body)
            if self._holding and record.cost_usd is not None:
                conn.execute(
                    "DELETE FROM spend_holds WHERE registration_digest = %s AND arm = %s"
                    " AND task_id = %s AND repeat = %s AND holder_pid = pg_backend_pid()",
                    (record.registration_digest, *record.unit_key),
                )
        return linked

    def append_linked(self, record: RunRecord) -> None:
        link = record.chain
        if link is None:
            raise ChainConflict(f"record {record.record_id} carries no chain link")
        with self._tx(record.registration_digest) as conn:
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
    def _next_link(conn: psycopg.Connection[Any], digest: str) -> tuple[int, str]:
        row = conn.execute(
            "SELECT chain_index, record_hash FROM records WHERE registration_digest = %s "
            "ORDER BY chain_index DESC LIMIT 1",
            (digest,),
        ).fetchone()
        if row is None:
            return 0, chain.genesis(digest)
        return int(row[0]) + 1, str(row[1])

    @staticmethod
    def _insert(conn: psycopg.Connection[Any], record: RunRecord, body: str | None = None) -> None:
        """Write a linked record; ``body``: its :func:`chain.stored_body`, if already made."""
        assert record.chain is not None
        psycopg = _psycopg()
        try:
            with conn.transaction():  # a savepoint: the refusal leaves the lock's tx usable
                conn.execute(
                    "INSERT INTO records (record_id, registration_digest, registration_id, arm,"
                    " task_id, repeat, status, success, cost_usd, chain_index, prev_hash,"
                    " record_hash, body) VALUES"
                    " (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    (
                        *indexed_columns(record),
                        record.chain.index,
                        record.chain.prev,
                        record.chain.hash,
                        chain.stored_body(record) if body is None else body,
                    ),
                )
        except psycopg.errors.UniqueViolation as exc:
            raise DuplicateRecord.of(record, _squash(str(exc))) from None

    def extend(self, records: Iterable[RunRecord]) -> tuple[int, int]:
        """Append each record in its own transaction; (written, skipped as duplicates)."""
        return append_each(self, records)

    # ---- reading ---------------------------------------------------------------------------

    def _query(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        psycopg = _psycopg()
        with self._session() as conn:
            if not self._has_records(conn):
                return []
            try:
                return list(conn.execute(sql, params).fetchall())
            except psycopg.DatabaseError as exc:
                if isinstance(exc, psycopg.OperationalError):
                    raise
                raise StoreUnreadable(self._message(exc)) from None

    def records(
        self,
        registration_digest: str | None = None,
        registration_id: str | None = None,
        status: str | None = None,
        *,
        not_registration_id: str | None = None,
    ) -> list[RunRecord]:
        clauses, params = [], []
        for column, value in (
            ("registration_digest = %s", registration_digest),
            ("registration_id = %s", registration_id),
            ("status = %s", status),
            ("registration_id != %s", not_registration_id),
        ):
            if value is not None:
                clauses.append(column)
                params.append(value)
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        rows = self._query(f"SELECT body FROM records{where} ORDER BY seq", params)
        return [RunRecord.model_validate_json(str(body)) for (body,) in rows]

    def completed_keys(self, digest: str) -> set[UnitKey]:
        rows = self._query(
            "SELECT arm, task_id, repeat FROM records WHERE "
            "registration_digest = %s AND status = 'ok'",
            (digest,),
        )
        return {(str(a), str(t), int(r)) for a, t, r in rows}

    def spent_usd(self, digest: str) -> float:
        rows = self._query(
            "SELECT COALESCE(SUM(cost_usd), 0) FROM records WHERE registration_digest = %s",
            (digest,),
        )
        return float(rows[0][0]) if rows else 0.0

    def digests(self, registration_id: str | None = None) -> list[str]:
        where, params = (
            ("", ())
            if registration_id is None
            else (
                " WHERE registration_id = %s",
                (registration_id,),
            )
        )
        rows = self._query(
            f"SELECT registration_digest, MIN(seq) FROM records{where} "
            "GROUP BY registration_digest ORDER BY MIN(seq)",
            params,
        )
        return [str(d) for d, _ in rows]

    def chain_rows(self, digest: str) -> list[ChainRow]:
        rows = self._query(
            "SELECT seq, chain_index, prev_hash, record_hash, record_id, registration_digest,"
            " registration_id, arm, task_id, repeat, status, success, cost_usd, body"
            " FROM records WHERE registration_digest = %s ORDER BY chain_index, seq",
            (digest,),
        )
        return [ChainRow(*row) for row in rows]

    def has_record_id(self, record_id: str) -> bool:
        return bool(self._query("SELECT 1 FROM records WHERE record_id = %s", (record_id,)))

    def counts(self) -> dict[str, int]:
        rows = self._query("SELECT status, COUNT(*) FROM records GROUP BY status")
        return {str(s): int(n) for s, n in rows}

    # ---- claims ----------------------------------------------------------------------------

    def unit_claims(
        self, digest: str, keys: Sequence[UnitKey], worker: str, lease_s: float = LEASE_S
    ) -> PgClaims:
        """Register ``keys`` (plan order) as claimable units of ``digest``; claims on them."""
        self.ensure_schema()
        with self._session() as conn:
            conn.execute(
                "INSERT INTO claims (registration_digest, arm, task_id, repeat, ordinal)"
                " SELECT %s, a, t, r, o FROM unnest(%s::text[], %s::text[], %s::int[],"
                " %s::int[]) AS u(a, t, r, o) ON CONFLICT DO NOTHING",
                (
                    digest,
                    [k[0] for k in keys],
                    [k[1] for k in keys],
                    [k[2] for k in keys],
                    list(range(len(keys))),
                ),
            )
            conn.execute(  # units stored before (an earlier run, an import) are done
                "UPDATE claims c SET done = true WHERE c.registration_digest = %s AND NOT c.done"
                " AND EXISTS (SELECT 1 FROM records r WHERE r.registration_digest ="
                " c.registration_digest AND r.arm = c.arm AND r.task_id = c.task_id"
                " AND r.repeat = c.repeat AND r.status = 'ok')",
                (digest,),
            )
        return PgClaims(self, digest, worker, lease_s)


#: The next open unit in plan order that no live worker holds. ``live`` is read once per
#: claim; the partial index ``claims_open`` skips done units, so a claim visits only the
#: units in flight or held after an infra_error, and the unclaimed one it takes. A holder
#: whose session started after this statement did is not in ``live`` yet, and is never
#: taken for dead (only its lease can end its claim).
_CLAIM = """
WITH live AS MATERIALIZED (SELECT pid, backend_start FROM pg_stat_activity),
next AS (
    SELECT c.arm, c.task_id, c.repeat FROM claims c
     WHERE c.registration_digest = %(d)s AND NOT c.done
       AND (c.holder_pid IS NULL OR c.lease_until IS NULL
            OR c.lease_until < clock_timestamp()
            OR (c.holder_start < statement_timestamp()
                AND NOT EXISTS (SELECT 1 FROM live a WHERE a.pid = c.holder_pid
                                AND (a.backend_start IS NULL
                                     OR a.backend_start = c.holder_start))))
       AND NOT EXISTS (SELECT 1 FROM records r WHERE r.registration_digest = c.registration_digest
                       AND r.arm = c.arm AND r.task_id = c.task_id AND r.repeat = c.repeat
                       AND r.status = 'ok')
     ORDER BY c.ordinal LIMIT 1
     FOR UPDATE OF c SKIP LOCKED
)
UPDATE claims c
   SET worker = %(w)s, holder_pid = pg_backend_pid(),
       holder_start = (SELECT a.backend_start FROM pg_stat_activity a
                        WHERE a.pid = pg_backend_pid() LIMIT 1),
       lease_until = clock_timestamp() + make_interval(secs => %(s)s),
       claimed = c.claimed + 1
  FROM next
 WHERE c.registration_digest = %(d)s AND c.arm = next.arm AND c.task_id = next.task_id
   AND c.repeat = next.repeat
RETURNING c.arm, c.task_id, c.repeat
"""


class PgClaims:
    """Leases on a registration's units, held by this store's database session."""

    def __init__(self, store: PgRunStore, digest: str, worker: str, lease_s: float) -> None:
        self.store, self.digest, self.worker, self.lease_s = store, digest, worker, lease_s

    def claim(self) -> UnitKey | None:
        with self.store._session() as conn:
            row = conn.execute(
                _CLAIM, {"d": self.digest, "w": self.worker, "s": self.lease_s}
            ).fetchone()
        return None if row is None else (str(row[0]), str(row[1]), int(row[2]))

    def renew(self) -> None:
        """Extend this session's leases: its claims and its spend holds."""
        with self.store._session() as conn:
            conn.execute(
                "UPDATE claims SET lease_until = clock_timestamp() + make_interval(secs => %s)"
                " WHERE registration_digest = %s AND holder_pid = pg_backend_pid()"
                " AND lease_until IS NOT NULL",
                (self.lease_s, self.digest),
            )
            if self.store._holding:
                conn.execute(
                    "UPDATE spend_holds SET lease_until = clock_timestamp()"
                    " + make_interval(secs => %s) WHERE registration_digest = %s"
                    " AND holder_pid = pg_backend_pid()",
                    (self.lease_s, self.digest),
                )

    def done(self, key: UnitKey) -> None:
        """Mark the unit done on its claim row. The claim query also skips units with an
        ok record, but a query that started before that record was committed does not
        see it; it does see (re-reads) the claim row it locks, so ``done`` is what makes
        a unit another worker was about to claim unclaimable."""
        with self.store._session() as conn:
            conn.execute(
                "UPDATE claims SET done = true, lease_until = NULL"
                " WHERE registration_digest = %s AND arm = %s AND task_id = %s AND repeat = %s",
                (self.digest, *key),
            )

    def spend_ledger(self) -> PgSpendLedger:
        """This worker's spend holds on the registration, leased like its claims."""
        return PgSpendLedger(self.store, self.digest, self.worker, self.lease_s)

    def close(self) -> None:
        """Drop the spend holds this session still has (units whose record carried no
        cost, or was refused as a duplicate: they counted while this worker ran). Leases
        and holds lapse with the session anyway: a store that fails here is left alone."""
        if not self.store._holding:
            return
        try:
            with self.store._session() as conn:
                conn.execute(
                    "DELETE FROM spend_holds WHERE registration_digest = %s"
                    " AND holder_pid = pg_backend_pid()",
                    (self.digest,),
                )
        except StoreUnavailable:
            return


#: Whether hold ``h`` still counts: its lease runs and its worker's session lives (the
#: same test as a claim's; ``pg_stat_activity`` is read once per transaction, after the
#: digest's lock, so every session whose hold is visible had started by then).
_LIVE_HOLD = """h.lease_until >= clock_timestamp()
   AND EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = h.holder_pid
               AND (a.backend_start IS NULL OR a.backend_start = h.holder_start))"""

_PURGE = f"DELETE FROM spend_holds h WHERE h.registration_digest = %s AND NOT ({_LIVE_HOLD})"

_HOLD = """
INSERT INTO spend_holds (registration_digest, arm, task_id, repeat, worker, holder_pid,
                         holder_start, lease_until, amount)
VALUES (%(d)s, %(a)s, %(t)s, %(r)s, %(w)s, pg_backend_pid(),
        (SELECT a.backend_start FROM pg_stat_activity a WHERE a.pid = pg_backend_pid() LIMIT 1),
        clock_timestamp() + make_interval(secs => %(s)s), %(x)s)
RETURNING hold_id
"""


class PgSpendLedger:
    """A worker's spend holds on one registration (:class:`~prereg.runners.providers.spend.
    SpendLedger`), in the store's session, so they lapse exactly when its claims do.

    A reservation takes the digest's chain lock, the lock every append of the digest
    holds until it commits. So no record of the digest is being written while the
    reservation sums, and a record and the deletion of its unit's holds (one
    transaction) are seen together or not at all. Reservations of all workers are
    serialised the same way, so their sum never passes the cap.
    """

    def __init__(self, store: PgRunStore, digest: str, worker: str, lease_s: float) -> None:
        self.store, self.digest, self.worker, self.lease_s = store, digest, worker, lease_s
        self._seen_seq = 0  # records of the digest up to this seq are summed in _recorded
        self._recorded = 0.0

    def reserve(self, unit: UnitKey, amount: float, cap: float) -> tuple[int | None, float, float]:
        self.store._holding = True  # before the hold exists: append will end it
        with self.store._tx(self.digest) as conn:
            conn.execute(_PURGE, (self.digest,))  # holds of ended workers
            recorded = self._recorded_usd(conn)
            row = conn.execute(
                "SELECT COALESCE(SUM(amount), 0) FROM spend_holds WHERE registration_digest = %s",
                (self.digest,),
            ).fetchone()
            held = float(row[0]) if row else 0.0
            if recorded + held + amount > cap:
                return None, recorded, held
            inserted = conn.execute(
                _HOLD,
                {
                    "d": self.digest,
                    "a": unit[0],
                    "t": unit[1],
                    "r": unit[2],
                    "w": self.worker,
                    "s": self.lease_s,
                    "x": amount,
                },
            ).fetchone()
        assert inserted is not None
        return int(inserted[0]), recorded, held

    def _recorded_usd(self, conn: psycopg.Connection[Any]) -> float:
        """The spend recorded under the digest. Records are append-only and, under the
        digest's lock, committed in ``seq`` order, so only the rows after the last one
        summed need reading."""
        row = conn.execute(
            "SELECT COALESCE(SUM(cost_usd), 0), MAX(seq) FROM records"
            " WHERE registration_digest = %s AND seq > %s",
            (self.digest, self._seen_seq),
        ).fetchone()
        if row is not None and row[1] is not None:
            self._recorded += float(row[0])
            self._seen_seq = int(row[1])
        return self._recorded

    def settle(self, hold: int, cost: float) -> None:
        with self.store._session() as conn:
            conn.execute(
                "UPDATE spend_holds SET amount = %s, settled = true WHERE hold_id = %s",
                (max(cost, 0.0), hold),
            )

    def release(self, hold: int) -> None:
        with self.store._session() as conn:
            conn.execute("DELETE FROM spend_holds WHERE hold_id = %s", (hold,))
