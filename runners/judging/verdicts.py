"""The verdict store: judges' verdicts as their own append-only records (issue 18).

A verdict never touches the run it judges: run records and their oracle outcomes stay
as recorded, and a verdict is a row of its own, in ``verdicts.sqlite`` beside the run
store in the workspace's ``runs/`` folder. Like the run store:

- the database refuses UPDATE and DELETE (triggers);
- one verdict per (run record id, judge digest), by a unique index, so a judge that is
  killed and run again never judges a run twice, whatever process writes;
- every verdict is a link of its registration digest's hash chain (the run chain's
  construction, :mod:`prereg.runners.store.chain`, with its own format string), computed
  inside the appending transaction; reading checks it (exit 3 when broken), and
  :meth:`VerdictStore.problems` (``prereg verify``) lists every broken link and every
  dropped, altered or added trigger or index.

The same file holds the ``gold`` table (:mod:`prereg.runners.judging.gold`): people's labels of
judged runs, append-only and chained the same way (one label per run and annotator).

The judge digest covers the judge's whole configuration and its rubric's digest
(:func:`prereg.registry.judges.judge_digest`), so a verdict under another rubric is a
different judge's verdict, kept apart and refused by ``analyse`` (exit 3).
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field

from prereg.core.errors import IntegrityError
from prereg.registry.tables import ChainedTable, declare
from prereg.runners.judging.gold import GOLD_FORMAT, GoldLabel
from prereg.runners.record import DIGEST_PATTERN, ChainLink
from prereg.runners.store.chain import canonical_bytes
from prereg.runners.store.sqlite import create_schema, wal_mode

VERDICTS_FILENAME = "verdicts.sqlite"
#: Further problems a refusal lists after the first.
MAX_LISTED = 20
FORMAT = "prereg.verdict-chain/1"

#: ``ok``: the answer parsed into a verdict; ``unparseable``: it did not (recorded as it
#: came, never guessed, counted as unjudged).
ParseStatus = Literal["ok", "unparseable"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS verdicts (
    seq                 INTEGER PRIMARY KEY AUTOINCREMENT,
    record_id           TEXT NOT NULL,
    judge_digest        TEXT NOT NULL,
    registration_digest TEXT NOT NULL,
    chain_index         INTEGER NOT NULL CHECK (chain_index >= 0),
    record_hash         TEXT NOT NULL,
    body                TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS one_verdict_per_run_and_judge
    ON verdicts (record_id, judge_digest);
CREATE UNIQUE INDEX IF NOT EXISTS one_verdict_per_chain_position
    ON verdicts (registration_digest, chain_index);
CREATE TRIGGER IF NOT EXISTS verdicts_no_update BEFORE UPDATE ON verdicts
BEGIN SELECT RAISE(ABORT, 'verdicts are append-only: UPDATE is refused'); END;
CREATE TRIGGER IF NOT EXISTS verdicts_no_delete BEFORE DELETE ON verdicts
BEGIN SELECT RAISE(ABORT, 'verdicts are append-only: DELETE is refused'); END;
CREATE TABLE IF NOT EXISTS gold (
    seq                 INTEGER PRIMARY KEY AUTOINCREMENT,
    record_id           TEXT NOT NULL,
    annotator           TEXT NOT NULL,
    registration_digest TEXT NOT NULL,
    chain_index         INTEGER NOT NULL CHECK (chain_index >= 0),
    record_hash         TEXT NOT NULL,
    body                TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS one_gold_label_per_run_and_annotator
    ON gold (registration_digest, record_id, annotator);
CREATE UNIQUE INDEX IF NOT EXISTS one_gold_label_per_chain_position
    ON gold (registration_digest, chain_index);
CREATE TRIGGER IF NOT EXISTS gold_no_update BEFORE UPDATE ON gold
BEGIN SELECT RAISE(ABORT, 'gold labels are append-only: UPDATE is refused'); END;
CREATE TRIGGER IF NOT EXISTS gold_no_delete BEFORE DELETE ON gold
BEGIN SELECT RAISE(ABORT, 'gold labels are append-only: DELETE is refused'); END;
"""


class Verdict(BaseModel):
    """One judge's verdict on one run, with everything needed to audit it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    verdict_id: str = Field(min_length=8, max_length=64)
    record_id: str
    registration_id: str
    registration_digest: str = Field(pattern=DIGEST_PATTERN)
    judge: str  # the judge's id (its outcome when it gives none)
    judge_digest: str = Field(pattern=DIGEST_PATTERN)
    outcome: Literal["completed", "native_self_service"]
    rubric: str  # experiment-relative path
    rubric_version: str
    rubric_digest: str = Field(pattern=DIGEST_PATTERN)
    driver: str
    model_requested: str | None = None
    model_returned: str | None = None
    prompt: str
    raw_response: str
    parse: ParseStatus
    #: the verdict: the need was met (completed / self-served); None when unparseable
    met: bool | None = None
    #: native judge: what the need requires (knowledge, private_state, action, fresh_data)
    need: str | None = None
    evidence: str | None = None
    #: why the verdict differs from the judge's answer (a rule enforced after it), or None
    overruled: str | None = None
    cost_usd: float | None = Field(None, ge=0)
    started_at: datetime
    finished_at: datetime
    chain: ChainLink | None = None


class DuplicateVerdict(Exception):
    """The run already has a verdict of this judge (or a gold label of this annotator)."""


#: The verdict store's tables under the one rule of every append-only table
#: (:mod:`prereg.registry.tables`): each column a reader indexes or queries (``judged``
#: asks which runs a judge has judged by ``judge_digest``; the unique indexes keep one
#: verdict per run and judge, one label per run and annotator) equals the body's.
VERDICT_COLUMNS = declare(
    ChainedTable("verdicts", "verdict", ("record_id", "judge_digest", "registration_digest"))
)
GOLD_COLUMNS = declare(
    ChainedTable("gold", "gold label", ("record_id", "annotator", "registration_digest"))
)


@dataclass(frozen=True)
class _Table:
    """One chained table: its model, the key its body is hashed under, its format, its
    columns (and the body fields one row per chain may hold: ``unique``)."""

    name: str
    model: type[Verdict] | type[GoldLabel]
    key: str
    format: str
    noun: str
    columns: ChainedTable
    unique: tuple[str, ...]


_VERDICTS = _Table(
    "verdicts",
    Verdict,
    "verdict",
    FORMAT,
    "verdict",
    VERDICT_COLUMNS,
    ("record_id", "judge_digest"),
)
_GOLD = _Table(
    "gold", GoldLabel, "label", GOLD_FORMAT, "gold label", GOLD_COLUMNS, ("record_id", "annotator")
)


def _hash(table: _Table, item: BaseModel, index: int, prev: str) -> str:
    body = item.model_dump(mode="json", exclude={"chain"})
    document = {"format": table.format, "index": index, "prev": prev, table.key: body}
    return "sha256:" + hashlib.sha256(canonical_bytes(document)).hexdigest()


def link_hash(verdict: Verdict, index: int, prev: str) -> str:
    return _hash(_VERDICTS, verdict, index, prev)


def chain_breaks(kind: str, items: Sequence[Verdict | GoldLabel], digest: str) -> list[str]:
    """Problems of ``items`` (``kind`` "verdict" or "gold", in chain order) as one whole
    chain of ``digest`` from its first link (an export's, before it is imported)."""
    table = _VERDICTS if kind == "verdict" else _GOLD
    out = []
    prev = digest
    for position, item in enumerate(items):
        link = item.chain
        if (
            link is None
            or link.index != position
            or link.prev != prev
            or item.registration_digest != digest
            or _hash(table, item, position, prev) != link.hash
        ):
            out.append(
                f"{table.noun} {position} (run {item.record_id}) does not continue the chain"
            )
        prev = link.hash if link is not None else prev
    return out


def _expected_schema() -> dict[tuple[str, str], str]:
    conn = sqlite3.connect(":memory:")
    try:
        conn.executescript(_SCHEMA)
        return _schema_of(conn)
    finally:
        conn.close()


def _schema_of(conn: sqlite3.Connection) -> dict[tuple[str, str], str]:
    rows = conn.execute(
        "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL "
        "AND name NOT LIKE 'sqlite_%'"
    ).fetchall()
    return {(str(t), str(n)): " ".join(str(q).split()) for t, n, q in rows}


def _drift(conn: sqlite3.Connection) -> list[str]:
    """Objects of the schema that were dropped, altered or added (what keeps the store
    append-only and one verdict per run and judge)."""
    expected, actual = _expected_schema(), _schema_of(conn)
    out = [f"{k} {n} was dropped" for (k, n) in expected if (k, n) not in actual]
    out += [
        f"{k} {n} was {'altered' if (k, n) in expected else 'added'}"
        for (k, n), sql in actual.items()
        if expected.get((k, n)) != sql
    ]
    return sorted(out)


class VerdictStore:
    """Verdicts and gold labels in SQLite (WAL), append-only, hash-chained per
    registration digest."""

    def __init__(self, runs: Path) -> None:
        folder = runs if runs.suffix != ".sqlite" else runs.parent
        self.path = folder / VERDICTS_FILENAME
        self._conn: sqlite3.Connection | None = None
        self._schema_drift: list[str] = []

    def _connect(self, create: bool) -> sqlite3.Connection | None:
        if self._conn is not None:
            return self._conn
        existed = self.path.exists()
        if existed and not self.path.is_file():  # a folder or a special file in its place
            raise IntegrityError(
                "the verdict store is not a regular file (a folder or another non-file is "
                "in its place); run `prereg verify`",
                file=str(self.path),
            )
        if not existed:
            if not create:
                return None
            self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        try:
            if existed:
                self._schema_drift = _drift(conn)
            if create and self._schema_drift:
                raise self._broken("its schema changed: " + "; ".join(self._schema_drift))
            wal_mode(conn)
            conn.execute("PRAGMA synchronous=NORMAL")
            if create and not existed:
                create_schema(conn, _SCHEMA)
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        return conn

    def _append(self, table: _Table, items: Sequence[Verdict | GoldLabel]) -> list[Any]:
        """Link and write ``items`` in one transaction (all or none)."""
        conn = self._connect(create=True)
        assert conn is not None
        out = []
        conn.execute("BEGIN IMMEDIATE")
        try:
            for item in items:
                row = conn.execute(
                    f"SELECT chain_index, record_hash FROM {table.name} "  # noqa: S608
                    "WHERE registration_digest = ? ORDER BY chain_index DESC LIMIT 1",
                    (item.registration_digest,),
                ).fetchone()
                start = item.registration_digest
                index, prev = (0, start) if row is None else (row[0] + 1, row[1])
                link = ChainLink(index=index, prev=prev, hash=_hash(table, item, index, prev))
                linked = item.model_copy(update={"chain": link})
                columns = table.columns
                conn.execute(
                    f"INSERT INTO {table.name} ({', '.join(columns.columns)}, "  # noqa: S608
                    "chain_index, record_hash, body) VALUES (?, ?, ?, ?, ?, ?)",
                    (*columns.body_values(linked), index, link.hash, linked.model_dump_json()),
                )
                out.append(linked)
            conn.execute("COMMIT")
        except sqlite3.IntegrityError as exc:
            conn.execute("ROLLBACK")
            raise DuplicateVerdict(str(exc)) from None
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return out

    def append(self, verdict: Verdict) -> Verdict:
        """Link ``verdict`` to its chain and write it in one transaction.

        DuplicateVerdict when the run already has this judge's verdict.
        """
        linked: Verdict = self._append(_VERDICTS, [verdict])[0]
        return linked

    def append_verdicts(self, verdicts: Sequence[Verdict]) -> list[Verdict]:
        """Link and write every verdict in one transaction: all of them or none."""
        return list(self._append(_VERDICTS, verdicts))

    def append_gold(self, labels: Sequence[GoldLabel]) -> list[GoldLabel]:
        """Link and write every label in one transaction: all of them or none
        (DuplicateVerdict when a run already has a label of that annotator)."""
        return list(self._append(_GOLD, labels))

    def _rows(self, table: _Table, digest: str) -> list[tuple[Any, ...]]:
        """(chain_index, record_hash, body, *the table's columns) of ``digest``'s rows."""
        conn = self._connect(create=False)
        if conn is None:
            return []
        # and rows whose column names another digest but whose body states this one (a
        # moved row: the column problem is named rather than only the gap it leaves)
        stated = f'"registration_digest":"{digest}"'
        try:
            rows = conn.execute(
                f"SELECT chain_index, record_hash, body, {', '.join(table.columns.columns)} "  # noqa: S608
                f"FROM {table.name} WHERE registration_digest = ? OR instr(body, ?) > 0 "
                "ORDER BY seq",
                (digest, stated),
            ).fetchall()
        except sqlite3.OperationalError as exc:
            raise self._broken(f"the {table.name} table cannot be read ({exc})") from None
        return [tuple(r) for r in rows]

    def _chain(self, table: _Table, digest: str) -> tuple[list[Any], list[str]]:
        """The digest's items in chain order and every problem of their chain: each link,
        each row's columns against its body (:mod:`prereg.registry.tables`), and a second
        item of one run and judge (or annotator) that the unique index should have
        refused. After a link that breaks the chain, the links that continue from it as
        stored are counted, not named one by one ("after the break")."""
        out: list[Any] = []
        problems: list[str] = []
        prev = digest
        broken: int | None = None  # the first break's position
        after = 0
        seen: dict[tuple[object, ...], int] = {}
        position = -1
        for index, stored_hash, body, *stated in self._rows(table, digest):
            filed = stated[table.columns.columns.index("registration_digest")] == digest
            position += filed
            where = f"table {table.name}: {table.noun} {position} of {digest[:19]}..."
            try:
                item = table.model.model_validate_json(body)
            except ValueError:
                if not filed:
                    continue

                problems.append(f"{where} cannot be read")
                broken = position if broken is None else broken
                prev = str(stored_hash)
                continue
            if not filed:  # another chain's row by its column
                if item.registration_digest == digest:
                    why = table.columns.problem(stated, item)
                    problems.append(
                        f"table {table.name}: a {table.noun} of {digest[:19]}... "
                        f"(run {item.record_id}): {why}"
                    )
                continue
            link = item.chain
            intact = (
                link is not None
                and link.hash == stored_hash
                and item.registration_digest == digest
                and _hash(table, item, link.index, link.prev) == stored_hash
            )
            if not (intact and link is not None and link.index == position and link.prev == prev):
                continues = (
                    intact and link is not None and link.prev == prev and index == link.index
                )
                if broken is not None and continues:
                    after += 1  # intact, and continues the stored link before it
                else:
                    problems.append(f"{where} (run {item.record_id}) does not continue the chain")
                    broken = position if broken is None else broken
            elif index != position:
                problems.append(f"{where} (run {item.record_id}) is stored at position {index}")
            why = table.columns.problem(stated, item)
            if why is not None:
                problems.append(f"{where} (run {item.record_id}): {why}")
            key = tuple(getattr(item, name) for name in table.unique)
            if key in seen:
                problems.append(
                    f"{where} (run {item.record_id}): a second {table.noun} of "
                    f"{' and '.join(f'{n} {v}' for n, v in zip(table.unique, key, strict=True))} "
                    f"({table.noun} {seen[key]} is the first; the store keeps one)"
                )
            seen.setdefault(key, position)
            prev = str(stored_hash)
            out.append(item)
        if after:
            problems.append(
                f"table {table.name}: {after} {table.noun}(s) of {digest[:19]}... after the "
                f"break at {table.noun} {broken} continue the chain as stored"
            )
        return out, problems

    def _verified(self, table: _Table, digest: str) -> list[Any]:
        if self._connect(create=False) is not None and self._schema_drift:
            raise self._broken("its schema changed: " + "; ".join(self._schema_drift))
        items, problems = self._chain(table, digest)
        if problems:
            raise self._broken(problems[0], problems[1:])
        return items

    def verdicts(self, registration_digest: str) -> list[Verdict]:
        """The digest's verdicts in chain order, after the chain verifies (else exit 3)."""
        return list(self._verified(_VERDICTS, registration_digest))

    def gold(self, registration_digest: str) -> list[GoldLabel]:
        """The digest's gold labels in chain order, after the chain verifies (else exit 3)."""
        return list(self._verified(_GOLD, registration_digest))

    def stored_items(self, registration_digest: str) -> tuple[list[Verdict], list[GoldLabel]]:
        """The digest's verdicts and gold labels that can be read, whether or not their
        chains verify: what ``verify`` checks further once :meth:`problems` named every
        problem of the chains (readers use :meth:`verdicts` and :meth:`gold`)."""
        verdicts, _ = self._chain(_VERDICTS, registration_digest)
        gold, _ = self._chain(_GOLD, registration_digest)
        return verdicts, gold

    def problems(self) -> tuple[list[tuple[str, str]], dict[str, dict[str, int]]]:
        """((where, what) for every problem of the file: its schema, SQLite's integrity
        check and every chain of both tables; counts per table and digest)."""
        where = self.path.name
        try:
            conn = self._connect(create=False)
            if conn is None:
                return [], {}
            found = [(where, f"the {d}") for d in self._schema_drift]
            check = [str(r[0]) for r in conn.execute("PRAGMA integrity_check(20)").fetchall()]
            if check != ["ok"]:
                found += [(where, f"SQLite's integrity check: {c}") for c in check]
            counts: dict[str, dict[str, int]] = {}
            for table in (_VERDICTS, _GOLD):
                for (digest,) in conn.execute(
                    f"SELECT DISTINCT registration_digest FROM {table.name}"  # noqa: S608
                ).fetchall():
                    items, bad = self._chain(table, str(digest))
                    counts.setdefault(table.name, {})[str(digest)] = len(items)
                    found += [(where, b) for b in bad]
        except (sqlite3.DatabaseError, IntegrityError) as exc:
            return [(where, f"the verdict store cannot be read: {exc}")], {}
        return found, counts

    def chain_hashes(self, table: str, registration_digest: str) -> list[str]:
        """The stored link hashes of one chain (``table`` "verdicts" or "gold"), in
        chain order, unchecked: what ``verify`` compares with the ledger's anchors after
        :meth:`problems` checked the links."""
        if table not in (_VERDICTS.name, _GOLD.name):
            raise ValueError(f"no chained table {table!r}")
        return [
            str(h)
            for _, h, *_ in self._rows(
                _VERDICTS if table == "verdicts" else _GOLD, registration_digest
            )
        ]

    def judged(self, registration_digest: str, judge_digest: str) -> set[str]:
        """Record ids that already have this judge's verdict."""
        conn = self._connect(create=False)
        if conn is None:
            return set()
        rows = conn.execute(
            "SELECT record_id FROM verdicts WHERE registration_digest = ? AND judge_digest = ?",
            (registration_digest, judge_digest),
        ).fetchall()
        return {str(r[0]) for r in rows}

    def spent_usd(self, registration_digest: str) -> float:
        return sum(v.cost_usd or 0.0 for v in self.verdicts(registration_digest))

    def _broken(self, what: str, more: Sequence[str] = ()) -> IntegrityError:
        return IntegrityError(
            f"the verdict store fails verification: {what} (a verdict or gold label was "
            "edited, removed or reordered, or the append-only schema changed); run "
            "`prereg verify`",
            file=str(self.path),
            details=list(more[:MAX_LISTED]),
        )

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def as_json(verdict: Verdict) -> dict[str, Any]:
    return verdict.model_dump(mode="json")
