"""The run-store interface: what orchestration, verification, import and analysis use.

Two implementations keep the same guarantees, each enforced by its database:

- :class:`prereg.runners.store.sqlite.RunStore`: SQLite in the workspace's ``runs/`` (one
  machine; the default);
- :class:`prereg.runners.store.postgres.PgRunStore`: PostgreSQL (``--store postgresql://...``
  or ``PREREG_STORE``), shared by workers on any number of machines, which also claims
  units (:class:`UnitClaims`) so each is run once.

Records are append-only (the database refuses UPDATE and DELETE), one ok record per
unit (a partial unique index), infrastructure errors kept, every record carrying its
registration digest and linked into that digest's hash chain inside the appending
transaction (:mod:`prereg.runners.store.chain`). Choosing a store:
:mod:`prereg.runners.store.choose`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, Self

from prereg.core.errors import IntegrityError, PreregError
from prereg.registry.tables import ChainedTable, declare
from prereg.runners.record import RunRecord

#: (arm, task_id, repeat): one run unit of a registration.
UnitKey = tuple[str, str, int]


class DuplicateRecord(Exception):
    """The unit already has an ok record (or this record id was already stored)."""

    @classmethod
    def of(cls, record: RunRecord, detail: str) -> DuplicateRecord:
        """Naming the unit the store refused, with the database's own words."""
        return cls(
            f"{record.registration_id} {record.arm}/{record.task_id}/repeat "
            f"{record.repeat}: {detail}"
        )


def append_each(store: RecordStore, records: Iterable[RunRecord]) -> tuple[int, int]:
    """Append each record in its own transaction; (written, skipped as duplicates)."""
    written = skipped = 0
    for record in records:
        try:
            store.append(record)
            written += 1
        except DuplicateRecord:
            skipped += 1
    return written, skipped


class ChainConflict(IntegrityError):
    """A record with a chain link that does not continue the stored chain (import; exit 3)."""


class StoreUnavailable(PreregError):
    """The run store's server cannot be reached or refused the connection (exit 1).

    Nothing was written: no unit runs before the store is reached.
    """

    exit_code = 1


class StoreUnreadable(Exception):
    """The database answered a read with an error (a damaged or altered store); the
    verification reports it as a problem, like an SQLite file that cannot be read."""


#: The columns copied from a record into its row (indexes and sums read them; the
#: verification compares them with the record's body).
INDEXED_COLUMNS = (
    "record_id",
    "registration_digest",
    "registration_id",
    "arm",
    "task_id",
    "repeat",
    "status",
    "success",
    "cost_usd",
)


def indexed_columns(record: RunRecord) -> tuple[object, ...]:
    """The values of :data:`INDEXED_COLUMNS` for ``record``, as the row stores them."""
    return (
        record.record_id,
        record.registration_digest,
        record.registration_id,
        record.arm,
        record.task_id,
        record.repeat,
        record.status,
        None if record.success is None else int(record.success),
        record.cost_usd,
    )


#: The records table under the one rule of every append-only table
#: (:mod:`prereg.registry.tables`): its indexed columns against the record's body.
RUNS = declare(ChainedTable("records", "record", INDEXED_COLUMNS, indexed_columns))


@dataclass(frozen=True)
class WrittenLink:
    """One link as this process appended it: its hash and its row's indexed columns."""

    hash: str
    columns: tuple[object, ...]


class WrittenLinks:
    """The links this process appended in a run, by digest and chain index.

    ``prereg run`` verifies the registration's chains before it anchors their head. A link
    it wrote itself was made from a validated record by
    :func:`prereg.runners.store.chain.linked_body`;
    when its stored hash and columns are the ones written and its stored body still hashes
    to that hash, the body is the very bytes written (SHA-256), so validating and
    canonicalising it again would prove nothing new (about 0.16 ms a record, 2% of the
    provider bench's wall time; issue 15). Links written by any other process are checked
    in full, and ``prereg verify`` and ``analyse`` always check every link."""

    def __init__(self, pin: Callable[[int, str], object] | None = None) -> None:
        """``pin``: called with (count, head) after each link is added, to pin it in the
        registry at once (a confirmatory run; see
        :func:`prereg.runners.store.verify.link_pin`)."""
        self._by_digest: dict[str, dict[int, WrittenLink]] = {}
        self._pin = pin

    def add(self, linked: RunRecord) -> None:
        """``linked``: a record as :meth:`RecordStore.append` returned it."""
        if linked.chain is None:
            return
        links = self._by_digest.setdefault(linked.registration_digest, {})
        links[linked.chain.index] = WrittenLink(linked.chain.hash, indexed_columns(linked))
        if self._pin is not None:
            self._pin(linked.chain.index + 1, linked.chain.hash)

    def of(self, digest: str) -> Mapping[int, WrittenLink]:
        return self._by_digest.get(digest, {})


@dataclass(frozen=True, slots=True)
class ChainRow:
    """One stored link, as the database holds it (for verification).

    The values are as the database returns them: a damaged or edited store can hold a
    value of another type than the column's, which verification reports instead of
    trusting.
    """

    seq: int
    chain_index: int
    prev_hash: str
    record_hash: str
    record_id: str
    registration_digest: str
    registration_id: str
    arm: str
    task_id: str
    repeat: int
    status: str
    success: int | None
    cost_usd: float | None
    body: str


class UnitClaims(Protocol):
    """Units of one registration claimed for this worker, each by one worker at a time.

    A claim is a lease: it lapses when its worker's session ends (killed, crashed) or
    its lease runs out without being renewed, and another worker then claims the unit.
    A unit with an ok record is never claimed again.
    """

    def claim(self) -> UnitKey | None:
        """The next unit this worker may run (now leased to it), or None: none left."""
        ...

    def renew(self) -> None:
        """Extend the leases this worker holds (called while units run)."""
        ...

    def done(self, key: UnitKey) -> None:
        """The unit has its ok record (stored here or by another worker): never claim it
        again."""
        ...

    def close(self) -> None: ...


class RecordStore(Protocol):
    """An append-only store of :class:`RunRecord` (see the module docstring)."""

    @property
    def where(self) -> str:
        """Where the store is, for messages (a file path, or a URL without password)."""
        ...

    @property
    def name(self) -> str:
        """A short name of the store for problem lists (a file name, a database)."""
        ...

    def exists(self) -> bool:
        """Whether the store holds a records table (reading creates nothing)."""
        ...

    def append(self, record: RunRecord) -> RunRecord:
        """Link ``record`` to its chain and write it in one transaction; returns it linked.

        DuplicateRecord if the unit is already ok (or the record id is stored).
        """
        ...

    def append_linked(self, record: RunRecord) -> None:
        """Write an already linked record (an import) only where it continues the chain."""
        ...

    def extend(self, records: Iterable[RunRecord]) -> tuple[int, int]:
        """Append each record in its own transaction; (written, skipped as duplicates)."""
        ...

    def records(
        self,
        registration_digest: str | None = None,
        registration_id: str | None = None,
        status: str | None = None,
        *,
        not_registration_id: str | None = None,
    ) -> list[RunRecord]:
        """Records in write order, optionally filtered."""
        ...

    def completed_keys(self, digest: str) -> set[UnitKey]:
        """(arm, task_id, repeat) of every unit with an ok record under ``digest``."""
        ...

    def spent_usd(self, digest: str) -> float:
        """Measured spend already recorded under ``digest`` (null costs count as 0)."""
        ...

    def digests(self, registration_id: str | None = None) -> list[str]:
        """Every registration digest with records, in order of first appearance."""
        ...

    def chain_rows(self, digest: str) -> list[ChainRow]:
        """The stored links of ``digest``'s chain, in chain order (for verification)."""
        ...

    def has_record_id(self, record_id: str) -> bool: ...

    def counts(self) -> dict[str, int]:
        """Rows per status (for summaries)."""
        ...

    def schema_drift(self) -> list[tuple[str, str, str]]:
        """(type, name, "dropped" | "altered" | "added") for every schema object that
        differs from what this prereg creates (the triggers and indexes that enforce the
        guarantees)."""
        ...

    def integrity_problems(self, limit: int = 20) -> list[str]:
        """The database's own structural check; empty when sound or not available."""
        ...

    def unit_claims(self, digest: str, keys: Sequence[UnitKey], worker: str) -> UnitClaims | None:
        """Claims over ``keys`` (in plan order) shared by every worker of ``digest``; None
        for a store that does not share work between machines (each process then runs
        its pending units and the unique index refuses a second ok record)."""
        ...

    def close(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...
