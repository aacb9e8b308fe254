"""Verify the run store: every chain, the schema that keeps it append-only, the anchors.

``prereg verify`` runs this after the registry's checks; ``run``, ``analyse``, ``export``
and ``import`` run :func:`verified_records` for the registration they read. A problem is
reported, never raised as a traceback: an edited record, a removed, inserted or
reordered one, a dropped, altered or added trigger or index, a second ok record for a
unit, a record whose columns disagree with its body or hold a value of another type, a
chain shorter than or different from what the registry anchored, a chain of a digest no
registration has, a store SQLite's integrity check faults (a damaged page, an index that
disagrees with its table), and a store file SQLite cannot read. The verdict store
(judges' verdicts and gold labels, always in the workspace's ``runs/verdicts.sqlite``)
is checked too: its schema, SQLite's integrity check, every chain of both tables, that
each chain is of a registered digest, and that every verdicts-anchor of the ledger sits on
its chains (:mod:`prereg.runners.judging.anchors`: the newest verdicts or labels removed).
"""

from __future__ import annotations

import gc
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from operator import attrgetter
from pathlib import Path
from typing import Any, TypeVar, cast

from pydantic import ValidationError

from prereg.core import forked
from prereg.core.errors import IntegrityError, PreregError
from prereg.core.forked import Forked
from prereg.experiments.models import LOCKED_SPLIT
from prereg.registry.registrations import VERDICT_CHAINS, Entry, Registry
from prereg.registry.units import expand_units, plan_from_registration
from prereg.registry.verify import Problem
from prereg.runners.judging.anchors import anchor_problems
from prereg.runners.judging.belong import belonging_problems
from prereg.runners.judging.verdicts import VerdictStore
from prereg.runners.record import RunRecord
from prereg.runners.store.choose import StoreLocation, is_postgres, open_store
from prereg.runners.store.interface import (
    INDEXED_COLUMNS,
    RUNS,
    ChainRow,
    RecordStore,
    StoreUnreadable,
    WrittenLink,
    WrittenLinks,
    indexed_columns,
)
from prereg.runners.store.sqlite import RunStore, chain, not_a_file, store_path

#: Problems named in a refusal (``prereg verify`` lists them all).
MAX_LISTED = 20

#: What a reader makes of each verified record (:func:`verified_as`).
T = TypeVar("T")

#: How a reader reads a link the registry's anchor pins without validating its whole
#: record again (see :func:`check_chain_records`): the body to (the row's indexed columns
#: as the record states them, :func:`indexed_columns`; what the reader keeps), raising
#: ValueError (pydantic's ValidationError is one) where it cannot.
PinnedRead = Callable[[str], tuple[tuple[object, ...], T]]


@dataclass
class RunsReport:
    """What ``verify`` found in the run store."""

    problems: list[Problem] = field(default_factory=list)
    heads: dict[str, dict[str, Any]] = field(default_factory=dict)  # digest -> count, head
    records: int = 0
    #: table (verdicts, gold) -> digest -> items, of the verdict store
    verdicts: dict[str, dict[str, int]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "records": self.records,
            "chains": self.heads,
            "verdicts": self.verdicts,
            "problems": [p.to_json() for p in self.problems],
        }


_TEXT_COLUMNS = (
    "prev_hash",
    "record_hash",
    "record_id",
    "registration_digest",
    "registration_id",
    "arm",
    "task_id",
    "status",
    "body",
)


def _mistyped(row: ChainRow) -> list[str]:
    """Columns holding a value of another type than the schema's (a damaged or edited file)."""
    wrong = [name for name in _TEXT_COLUMNS if type(getattr(row, name)) is not str]
    wrong += [n for n in ("seq", "chain_index", "repeat") if type(getattr(row, n)) is not int]
    if row.success is not None and type(row.success) is not int:
        wrong.append("success")
    if row.cost_usd is not None and type(row.cost_usd) is not float:
        wrong.append("cost_usd")
    return wrong


#: A row's typed columns in one C call, and every combination of their types that
#: :func:`_mistyped` finds nothing wrong with (success and cost_usd may be null): a sound
#: row costs one tuple lookup, and only another one is named column by column.
_TYPED_COLUMNS = attrgetter(*_TEXT_COLUMNS, "seq", "chain_index", "repeat", "success", "cost_usd")
_SOUND_TYPES = frozenset(
    (str,) * len(_TEXT_COLUMNS) + (int, int, int, success, cost)
    for success in (type(None), int)
    for cost in (type(None), float)
)
_STATED_COLUMNS = attrgetter(*INDEXED_COLUMNS)


def _row_problems(row: ChainRow, where: str) -> tuple[list[Problem], RunRecord | None]:
    """A row's columns against its body (analysis reads the body, the store the columns),
    and the body as a validated record (None when it is not one): the one validation
    :func:`verified_records` hands on, so no record is validated twice."""
    if tuple(map(type, _TYPED_COLUMNS(row))) not in _SOUND_TYPES:
        message = f"column(s) {', '.join(_mistyped(row))} hold a value of another type"
        return [Problem("runs-record", where, message)], None
    try:
        record = RunRecord.model_validate_json(row.body)
    except ValidationError:
        return [Problem("runs-record", where, "the stored record is not a valid run record")], None
    stated = _STATED_COLUMNS(row)
    if stated == indexed_columns(record):  # the usual row: one comparison, no names to collect
        return [], record
    differing = RUNS.problem(stated, record)
    if differing is not None:
        return [Problem("runs-record", where, differing)], record
    return [], record


def _pinned_read(row: ChainRow, read: PinnedRead[T]) -> tuple[T] | None:
    """What ``read`` keeps of a pinned link's body, when the row's columns are of their
    types and state what it read; None: the link is checked in full."""
    if tuple(map(type, _TYPED_COLUMNS(row))) not in _SOUND_TYPES:
        return None
    try:
        columns, kept = read(row.body)
    except ValueError:
        return None
    return (kept,) if columns == _STATED_COLUMNS(row) else None


@contextmanager
def held_gc(*, freeze: bool = False) -> Iterator[None]:
    """Hold the cyclic garbage collector while tens of thousands of records are built.

    Every record is a tree of fresh objects (no cycles), and the collector would walk
    the growing heap again and again: a third of the loading time at 27,000 records.
    Reference counting still frees everything; collection resumes afterwards.
    ``freeze``: first move what is alive now (the loaded records, which the caller keeps
    for its whole analysis) out of the collector's sight (``gc.freeze``), so the next
    collections do not walk them either.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if freeze:
            gc.freeze()
        if enabled:
            gc.enable()


def _dropped(record: RunRecord) -> None:
    """A reader that only needs the verdict keeps nothing of a record."""
    return None


def _as_is(record: RunRecord) -> RunRecord:
    return record


def check_chain(rows: list[ChainRow], digest: str) -> tuple[list[Problem], str]:
    """Problems of one stored chain, and its head hash as recomputed."""
    problems, head, _ = check_chain_records(rows, digest, _dropped)
    return problems, head


def check_chain_records(
    rows: list[ChainRow],
    digest: str,
    convert: Callable[[RunRecord], T],
    pinned: int = 0,
    own: Mapping[int, WrittenLink] | None = None,
    read_pinned: PinnedRead[T] | None = None,
    alongside: Callable[[], object] | None = None,
) -> tuple[list[Problem], str, list[tuple[str, T] | None]]:
    """:func:`check_chain`, and for each row (in row order) its record's id and what
    ``convert`` makes of the record its body validated to (None where the body is not a
    valid record): what the reader uses once no problem is found.

    Each record is converted as soon as it is validated and then let go, so a reader
    that keeps less than the record (an observation, nothing) never holds tens of
    thousands of records at once: at 27,000 records that is over half a gigabyte, and
    building then freeing it cost a third of the loading time.

    ``pinned``: how many links the registry's newest anchor pins. Their bodies in the
    content format are hashed without the canonical-form check (see
    :func:`prereg.runners.store.chain.content_link`); only a caller that then refuses a chain
    off its anchors (:func:`check_anchors`) may pass it. ``verify`` checks every link
    in full.

    ``own``: the links this process appended (:class:`WrittenLinks`), by chain index; one
    whose row still holds what was written is checked by its hash alone, and its record
    is not validated again (so only a ``convert`` that keeps nothing may be used).

    ``read_pinned``: how to read a pinned link's body instead of validating it as a whole
    record and converting that (:data:`PinnedRead`). Its bytes are the very bytes a full
    check accepted when the anchor was written (its hash is the anchored chain's), so
    the record was valid then; the reader validates only what it keeps, as the record's
    schema does. A pinned link it cannot read, or whose row's columns disagree with what
    it read, is checked in full (which names the problem).

    ``alongside``: the caller's own work for later, done by this process while forked
    children check the first ranges of a long chain (:func:`prereg.core.forked.fork_map`'s
    ``first``); not called where the chain is checked in one process."""
    if own and convert is not _dropped:
        raise ValueError("own links are not validated again: their records are not read")
    with held_gc():
        return _check_links(rows, digest, pinned, convert, own or {}, read_pinned, alongside)


def _is_as_written(row: ChainRow, mine: WrittenLink, index: int, prev: str) -> bool:
    """Whether ``row`` holds the link this process wrote: the same hash and columns, and
    a body that hashes to it after ``prev`` (so it is the very body written)."""
    return (
        row.record_hash == mine.hash
        and tuple(map(type, _TYPED_COLUMNS(row))) in _SOUND_TYPES
        and _STATED_COLUMNS(row) == mine.columns
        and chain.content_link(row.body, index, prev, mine.hash, trusted=True) == mine.hash
    )


#: The fewest links a range of a chain checked apart holds (a shorter chain is checked in
#: one process: a fork costs more than it saves); a long chain is cut into several ranges
#: per process, claimed one at a time, so a slower process takes fewer, and the last
#: ranges are short: at 27,000 links, 8 per process (about 0.09 s each) rather than 4
#: made the wait for the process that finishes last 0.15 s shorter.
RANGE_LINKS = 1000
RANGES_PER_JOB = 8


def _check_links(
    rows: list[ChainRow],
    digest: str,
    pinned: int,
    convert: Callable[[RunRecord], T],
    own: Mapping[int, WrittenLink],
    read_pinned: PinnedRead[T] | None = None,
    alongside: Callable[[], object] | None = None,
) -> tuple[list[Problem], str, list[tuple[str, T] | None]]:
    """The chain checked link by link, in consecutive ranges in parallel where it is
    long (:mod:`prereg.core.forked`): each range starts from the hash and write order
    its preceding row states. When no range finds a problem, every row's recomputed hash
    is the one it states, so the ranges computed exactly what one pass would; when any
    does, the chain is checked again in one pass, so the problems named are one pass's."""
    ranges = forked.split(len(rows), RANGES_PER_JOB * forked.jobs(), RANGE_LINKS)
    if len(ranges) > 1:
        duplicates: list[list[Problem]] = []  # found while the last ranges are checked
        parts = forked.fork_map(
            lambda span: _check_range(rows, span, digest, pinned, convert, own, read_pinned),
            ranges,
            first=alongside,
            meanwhile=lambda: duplicates.append(_duplicates(rows, digest)),
        )
        if not any(found for found, _, _ in parts):
            records = [record for _, _, part in parts for record in part]
            found = duplicates[0] if duplicates else _duplicates(rows, digest)
            return found, parts[-1][1], records
    problems, head, records = _check_range(
        rows, range(len(rows)), digest, pinned, convert, own, read_pinned
    )
    return problems + _duplicates(rows, digest), head, records


def _check_range(
    rows: list[ChainRow],
    span: range,
    digest: str,
    pinned: int,
    convert: Callable[[RunRecord], T],
    own: Mapping[int, WrittenLink],
    read_pinned: PinnedRead[T] | None = None,
) -> tuple[list[Problem], str, list[tuple[str, T] | None]]:
    """Links ``span`` of the chain: (problems, the hash after the last, the records)."""
    problems: list[Problem] = []
    records: list[tuple[str, T] | None] = []
    start = span.start
    prev = chain.genesis(digest) if start == 0 else rows[start - 1].record_hash
    last_seq: object = None if start == 0 else rows[start - 1].seq
    broken: int | None = None  # the first link that breaks the chain
    after = 0  # intact links after it, continuing the stored link before each
    for expected in span:
        row = rows[expected]
        where = f"runs {digest[:19]}... link {expected} (record {row.record_id})"
        if isinstance(last_seq, int) and isinstance(row.seq, int) and row.seq <= last_seq:
            problems.append(
                Problem(
                    "runs-chain",
                    where,
                    "stored before the link it follows: the store's write order was changed",
                )
            )
        last_seq = row.seq
        stored_prev = chain.genesis(digest) if expected == 0 else rows[expected - 1].record_hash
        continues = (row.prev_hash, row.chain_index) == (prev, expected)
        if broken is not None and not continues and _intact_as_stored(row, stored_prev):
            found, record = _row_problems(row, where)  # its columns are still checked
            problems += found
            records.append(None if record is None else (record.record_id, convert(record)))
            after += 1
            prev = row.record_hash
            continue
        before = len(problems)
        if row.chain_index != expected:
            problems.append(
                Problem(
                    "runs-chain",
                    where,
                    f"stored at chain position {row.chain_index}, expected {expected}: a "
                    "record was removed, inserted or duplicated",
                )
            )
        if not continues:
            problems.append(
                Problem("runs-chain", where, "its 'prev' column does not continue the chain")
            )
        mine = own.get(expected)
        if mine is not None and _is_as_written(row, mine, expected, prev):
            if broken is None and len(problems) > before:
                broken = expected
            records.append((row.record_id, cast(T, None)))  # what _dropped keeps
            prev = mine.hash
            continue
        recomputed, issues = chain.body_problems(
            row.body, expected, prev, row.record_hash, trusted=expected < pinned
        )
        unsound = bool(issues) or row.record_hash != recomputed
        if unsound and _intact_as_stored(row, row.prev_hash):
            # sound where it says it is: the chain breaks before it, this link is not edited
            problems.append(
                Problem(
                    "runs-chain",
                    where,
                    f"the link is intact as link {row.chain_index} after the hash it names, "
                    "but that is not the link stored before it: a record before it was "
                    "removed, inserted, reordered or edited",
                )
            )
            recomputed = row.record_hash
        elif unsound:
            problems += [Problem("runs-chain", where, issue) for issue in issues]
            if recomputed is not None and row.record_hash != recomputed:
                problems.append(
                    Problem("runs-chain", where, "its hash column does not match its content")
                )
        elif read_pinned is not None and expected < pinned:
            kept = _pinned_read(row, read_pinned)
            if kept is not None:
                records.append((row.record_id, kept[0]))
                prev = recomputed or row.record_hash
                continue
        if broken is None and len(problems) > before:
            broken = expected
        found, record = _row_problems(row, where)
        problems += found
        records.append(None if record is None else (record.record_id, convert(record)))
        prev = recomputed or row.record_hash
    if after:
        problems.append(
            Problem(
                "runs-chain",
                f"runs {digest[:19]}... after link {broken}",
                f"{after} link(s) after the break at link {broken} are intact and continue "
                "the chain as stored (each hashes to its hash column after the link stored "
                "before it): not edited, shifted by the break",
            )
        )
    return problems, prev, records


def _intact_as_stored(row: ChainRow, stored_prev: str) -> bool:
    """Whether ``row`` is a sound link where it says it is: its prev column is the hash
    of the row stored before it and its body hashes to its hash column at its own
    stated index (a link after a break, shifted by a removal or an insertion)."""
    if type(row.chain_index) is not int or row.prev_hash != stored_prev:
        return False
    recomputed, issues = chain.body_problems(
        row.body, row.chain_index, row.prev_hash, row.record_hash
    )
    return not issues and recomputed == row.record_hash


def _duplicates(rows: list[ChainRow], digest: str) -> list[Problem]:
    """A second ok record of a unit (the store's unique index refuses one)."""
    problems = []
    ok_units = Counter((r.arm, r.task_id, r.repeat) for r in rows if r.status == "ok")
    for unit, n in sorted(ok_units.items()):
        if n > 1:
            problems.append(
                Problem(
                    "runs-duplicate",
                    f"runs {digest[:19]}... unit {'/'.join(map(str, unit))}",
                    f"{n} ok records for one unit (the store allows one)",
                )
            )
    return problems


def check_anchors(registry: Registry, digest: str, rows: list[ChainRow]) -> list[Problem]:
    """Every anchor the ledger holds for ``digest`` must sit on the stored chain."""
    problems: list[Problem] = []
    hashes = [r.record_hash for r in rows]
    for anchor in registry.anchors(digest):
        count, head = anchor.get("count"), anchor.get("head")
        where = f"runs of '{anchor.get('id')}' (anchor at ledger seq {anchor.get('seq')})"
        if not isinstance(count, int) or count < 0:
            problems.append(Problem("runs-anchor", where, "the anchor has no valid count"))
        elif count == 0:
            if head != chain.genesis(digest):
                problems.append(Problem("runs-anchor", where, "an empty anchor with a head"))
        elif count > len(hashes):
            problems.append(
                Problem(
                    "runs-anchor",
                    where,
                    f"the registry pinned {count} records, the store holds {len(hashes)}: "
                    "records were removed",
                )
            )
        elif hashes[count - 1] != head:
            problems.append(
                Problem(
                    "runs-anchor",
                    where,
                    f"record {count} of the chain is not the one the registry pinned: the "
                    "records were rewritten",
                )
            )
    return problems


def pinned_links(registry: Registry, digest: str) -> int:
    """How many links of ``digest``'s chain the registry's anchors pin (the largest
    count; :func:`check_anchors` checks that each sits on the stored chain)."""
    counts = [a.get("count") for a in registry.anchors(digest)]
    return max((c for c in counts if type(c) is int and c > 0), default=0)


def check_claim(registry: Registry, digest: str, rows: list[ChainRow]) -> list[Problem]:
    """Runs of a registration on the locked split need that registration's claim.

    Catches the documented tail limit of the registry: removing the newest claim line
    together with its mirror leaves a consistent ledger, but not runs no claim covers.
    """
    events = registry.ledger.events()
    registered = [
        e for e in events if e.get("event") == "registration" and e.get("digest") == digest
    ]
    if not rows or not registered or registered[0].get("split") != LOCKED_SPLIT:
        return []
    if any(e.get("event") == "locked-split-claim" and e.get("digest") == digest for e in events):
        return []
    return [
        Problem(
            "runs-locked-split",
            f"runs of '{registered[0].get('id')}'",
            f"{len(rows)} record(s) on the locked split, but no claim of the registry covers "
            "them (a claim line was removed, or the runs were made elsewhere)",
        )
    ]


def check_owner(registry: Registry, digest: str, rows: list[ChainRow]) -> list[Problem]:
    """The chain's digest must be a registration's, and its records filed under its id."""
    owners = {
        e.get("digest"): e.get("id")
        for e in registry.ledger.events()
        if e.get("event") == "registration"
    }
    where = f"runs {digest[:19]}..."
    if digest not in owners:
        return [
            Problem(
                "runs-unregistered",
                where,
                f"{len(rows)} record(s) of a registration digest no registration here has",
            )
        ]
    stray = sorted({str(r.registration_id) for r in rows if r.registration_id != owners[digest]})
    if stray:
        return [
            Problem(
                "runs-record",
                where,
                f"records filed under {stray}, but the digest is that of '{owners[digest]}'",
            )
        ]
    return []


def store_problems(store: RecordStore) -> list[Problem]:
    """The schema (triggers and indexes present and unaltered) and SQLite's integrity check."""
    name = store.name
    problems = [
        Problem(
            "runs-schema",
            f"{name}: {kind} {obj}",
            f"the {kind} was {what}: the store's schema is what keeps it append-only and "
            "one record per unit and per chain position",
        )
        for kind, obj, what in store.schema_drift()
    ]
    problems += [
        Problem("runs-corrupt", name, f"SQLite's integrity check: {issue}")
        for issue in store.integrity_problems()
    ]
    return problems


def _missing_chains(
    registry: Registry, present: set[str], digest: str | None = None
) -> list[Problem]:
    """Anchors pinning records of a digest the store holds none of (the chain was removed)."""
    pinned: dict[str, str] = {}
    for anchor in registry.anchors(digest):
        if anchor.get("count") and anchor.get("digest") not in present:
            pinned[str(anchor.get("digest"))] = str(anchor.get("id"))
    return [
        Problem(
            "runs-anchor",
            f"runs of '{reg_id}'",
            "the registry pinned run records, but the run store holds none of them",
        )
        for reg_id in sorted(pinned.values())
    ]


def _present(runs: StoreLocation) -> tuple[RecordStore | None, Problem | None]:
    """The store to read (None when there is none yet), or why it cannot be read.

    Reading creates nothing: an SQLite file that is not there, or a PostgreSQL database
    without the records table, holds no records.
    """
    if is_postgres(runs):
        store = open_store(runs)
        if store.exists():
            return store, None
        store.close()
        return None, None
    path = store_path(runs)
    problem = not_a_file(path)
    if problem is not None:
        return None, Problem("runs-unreadable", path.name, problem)
    return (open_store(path), None) if path.exists() else (None, None)


def check_verdicts(folder: Path, registry: Registry) -> tuple[list[Problem], dict[str, Any]]:
    """Problems of the verdict store in ``folder`` (see the module docstring), and its
    counts per table and digest."""
    with VerdictStore(folder) as store:
        found, counts = store.problems()
        problems = [Problem("verdicts-chain", where, what) for where, what in found]
        anchored = {str(a.get("digest")) for a in registry.verdict_anchors()}
        try:
            for digest in sorted(anchored | {d for per in counts.values() for d in per}):
                hashes = {name: store.chain_hashes(name, digest) for name in VERDICT_CHAINS}
                problems += anchor_problems(registry, digest, hashes)
        except (sqlite3.DatabaseError, IntegrityError):
            pass  # an unreadable store: problems() named it
    owners = {e.get("digest") for e in registry.ledger.events() if e.get("event") == "registration"}
    for table, per in sorted(counts.items()):
        problems += [
            Problem(
                "verdicts-unregistered",
                f"{store.path.name} {table} {digest[:19]}...",
                f"{n} item(s) of a registration digest no registration here has",
            )
            for digest, n in sorted(per.items())
            if digest not in owners
        ]
    return problems, counts


def _entries_by_digest(registry: Registry) -> dict[str, Entry]:
    """Each registration by digest; empty where the registry cannot be read (its own
    check names why)."""
    try:
        return {e.digest: e for e in registry.entries()}
    except (PreregError, KeyError, TypeError, ValueError):
        return {}


def check_planned(registry: Registry, entry: Entry | None, rows: list[ChainRow]) -> list[Problem]:
    """Records of a unit the registration never planned (arm, task of its split, repeat):
    what ``analyse`` and ``import`` refuse, reported by ``verify`` too."""
    if entry is None or not rows:
        return []
    try:
        experiment = registry.load_experiment(entry)
        plan = plan_from_registration(entry.registration, entry.digest)
        planned = {unit.key for unit in expand_units(plan, experiment)}
    except (PreregError, KeyError, TypeError, ValueError, OSError):
        return []  # a registration that cannot be read: the registry's check names it
    stray = [r for r in rows if (r.arm, r.task_id, r.repeat) not in planned]
    if not stray:
        return []
    shown = ", ".join(f"{r.arm}/{r.task_id}/{r.repeat} (link {r.chain_index})" for r in stray[:5])
    return [
        Problem(
            "runs-unplanned",
            f"runs of '{entry.id}'",
            f"{len(stray)} record(s) of units the registration does not plan (arm, task of "
            f"the split, repeat): {shown}{' ...' if len(stray) > 5 else ''}",
        )
    ]


def check_belonging(
    folder: Path,
    entries: Mapping[str, Entry],
    judged: set[str],
    runs: Mapping[str, Mapping[str, RunRecord]],
) -> list[Problem]:
    """Verdicts and gold labels of runs that are not there or need none, and verdicts of
    judges not registered (:func:`prereg.runners.judging.belong.belonging_problems`)."""
    problems: list[Problem] = []
    with VerdictStore(folder) as store:
        for digest in sorted(judged):
            entry = entries.get(digest)
            if entry is None:
                continue  # verdicts of no registration: check_verdicts names them
            try:
                verdicts, gold = store.stored_items(digest)
            except (sqlite3.DatabaseError, IntegrityError):
                return problems  # an unreadable store: check_verdicts named it
            problems += [
                Problem("verdicts-belonging", f"verdicts of '{entry.id}'", why)
                for why in belonging_problems(entry, verdicts, gold, runs.get(digest, {}))
            ]
    return problems


def verify_runs(
    runs: StoreLocation, registry: Registry, verdicts: Path | None = None
) -> RunsReport:
    """Check every chain of the store at ``runs`` (a folder, the database file or a
    PostgreSQL URL) and of the verdict store in ``verdicts`` (default: the workspace's
    ``runs/`` beside ``registry``)."""
    report = RunsReport()
    folder = verdicts or registry.root.parent / "runs"
    found, report.verdicts = check_verdicts(folder, registry)
    report.problems += found
    judged = {digest for per in report.verdicts.values() for digest in per}
    entries = _entries_by_digest(registry)
    kept: dict[str, dict[str, RunRecord]] = {}  # the records of judged digests, by id
    store, problem = _present(runs)
    if problem is not None:
        report.problems.append(problem)
    if store is None:
        report.problems += _missing_chains(registry, set())
        report.problems += check_belonging(folder, entries, judged, kept)
        return report
    try:
        report.problems += store_problems(store)
        digests = store.digests()
        for digest in digests:
            rows = store.chain_rows(digest)
            report.records += len(rows)
            if digest in judged:
                problems, head, records = check_chain_records(rows, digest, _as_is)
                kept[digest] = {r[0]: r[1] for r in records if r is not None}
            else:
                problems, head = check_chain(rows, digest)
            report.problems += problems
            report.problems += check_anchors(registry, digest, rows)
            report.problems += check_owner(registry, digest, rows)
            report.problems += check_claim(registry, digest, rows)
            report.problems += check_planned(registry, entries.get(digest), rows)
            report.heads[digest] = {"count": len(rows), "head": head}
        report.problems += _missing_chains(registry, set(digests))
    except (sqlite3.DatabaseError, StoreUnreadable) as exc:
        report.problems.append(
            Problem("runs-unreadable", store.name, f"the run store cannot be read: {exc}")
        )
    finally:
        store.close()
    report.problems += check_belonging(folder, entries, judged, kept)
    return report


def verified_records(
    runs: StoreLocation, registry: Registry, entry: Entry
) -> tuple[list[RunRecord], dict[str, dict[str, Any]]]:
    """:func:`verified_as`, the records themselves."""
    return verified_as(runs, registry, entry, _as_is)


def verified_as(
    runs: StoreLocation,
    registry: Registry,
    entry: Entry,
    convert: Callable[[RunRecord], T],
    own: WrittenLinks | None = None,
    read_pinned: PinnedRead[T] | None = None,
    alongside: Callable[[], object] | None = None,
) -> tuple[list[T], dict[str, dict[str, Any]]]:
    """The records filed under ``entry`` (its id or its digest), after their chains verify,
    each as ``convert`` makes it (as it is validated: see :func:`check_chain_records`;
    ``read_pinned`` and ``alongside`` as there, ``alongside`` done at most once).

    Returns (records, heads by digest); IntegrityError (exit 3) naming every problem of
    the store's schema and integrity and of each chain involved, the registry's anchors
    included. The records are the very rows verified, each validated once by the check
    (no second read, so nothing appended after the check is returned unverified): those
    filed under the id in write order, then the digest's filed under another id (foreign
    runs the reader names).
    """
    store, problem = _present(runs)
    if problem is not None:
        _refuse_if(entry, [problem])
    if store is None:
        _refuse_if(entry, _missing_chains(registry, set(), entry.digest))
        return [], {}
    # SQLite's integrity check of a large file takes as long as reading its chains: it
    # runs in a forked child (its own connection) meanwhile (:mod:`prereg.core.forked`)
    large = isinstance(store, RunStore) and store.path.stat().st_size >= PARALLEL_BYTES
    check_store = partial(Forked, partial(_store_problems_at, runs), fork=large)
    with held_gc():
        return _verified(store, registry, entry, convert, own, check_store, read_pinned, alongside)


#: SQLite stores from this size on are checked in parallel with reading their chains.
PARALLEL_BYTES = 8 << 20


def _store_problems_at(runs: StoreLocation) -> list[Problem]:
    with open_store(runs) as store:
        return store_problems(store)


def _verified(
    store: RecordStore,
    registry: Registry,
    entry: Entry,
    convert: Callable[[RunRecord], T],
    own: WrittenLinks | None,
    check_store: Callable[[], Forked[list[Problem]]],
    read_pinned: PinnedRead[T] | None = None,
    alongside: Callable[[], object] | None = None,
) -> tuple[list[T], dict[str, dict[str, Any]]]:
    """:func:`verified_as` of an open store (closed here); ``check_store``: starts finding
    the store's own problems (:func:`store_problems`)."""
    problems: list[Problem] = []
    heads: dict[str, dict[str, Any]] = {}
    by_id: list[tuple[int, tuple[str, T] | None]] = []
    foreign: list[tuple[int, tuple[str, T] | None]] = []
    checked: Forked[list[Problem]] | None = None
    try:
        digests = {entry.digest, *store.digests(registration_id=entry.id)}
        alongside = _once(alongside)  # done by the first chain checked in parallel
        for digest in sorted(digests):
            rows = store.chain_rows(digest)
            if checked is None:  # from now on, while the rows are checked, not while they
                # are read: both scan the file (the reading took half as long again beside it)
                checked = check_store()
            pinned = pinned_links(registry, digest)
            mine = None if own is None else own.of(digest)
            found, head, records = check_chain_records(
                rows, digest, convert, pinned, mine, read_pinned, alongside
            )
            problems += found + check_anchors(registry, digest, rows)
            if rows:  # whose records these are is the reader's check (naming each run)
                heads[digest] = {"count": len(rows), "head": head}
            for row, record in zip(rows, records, strict=True):
                if row.registration_id == entry.id:
                    by_id.append((row.seq, record))
                elif digest == entry.digest:
                    foreign.append((row.seq, record))
        if checked is None:
            checked = check_store()
        _refuse_if(entry, checked.result() + problems)
    except (sqlite3.DatabaseError, StoreUnreadable) as exc:
        raise IntegrityError(
            f"the run store cannot be read ({exc}); run `prereg verify`", file=store.where
        ) from None
    finally:
        if checked is not None:
            checked.cancel()
        store.close()
    seen: dict[str, T] = {}
    for _, record in sorted(by_id, key=_first) + sorted(foreign, key=_first):
        assert record is not None  # a row that is no valid record is a problem, refused
        seen.setdefault(*record)
    return list(seen.values()), heads


def _once(work: Callable[[], object] | None) -> Callable[[], object] | None:
    """``work``, done on the first call only (None stays None)."""
    if work is None:
        return None
    done: list[object] = []

    def once() -> object:
        if not done:
            done.append(work())
        return done[0]

    return once


def _first(item: tuple[int, object]) -> int:
    return item[0]


def _refuse_if(entry: Entry, problems: list[Problem]) -> None:
    if problems:
        raise IntegrityError(
            f"the run records of '{entry.id}' fail verification, so they are not used; run "
            "`prereg verify` for the whole store",
            details=[f"{p.kind}: {p.entry}: {p.message}" for p in problems[:MAX_LISTED]]
            + (
                [f"... and {len(problems) - MAX_LISTED} more"] if len(problems) > MAX_LISTED else []
            ),
        )


def anchor_runs(
    runs: StoreLocation, registry: Registry, entry: Entry, written: WrittenLinks | None = None
) -> dict[str, Any]:
    """Verify ``entry``'s run chain and pin its head in the ledger; returns the head.

    Called at the end of every ``prereg run`` (and by ``analyse``): a chain that does
    not verify is never pinned (IntegrityError, exit 3). ``written``: the links the run
    appended, checked by their hashes (see :class:`WrittenLinks`).
    """
    _, heads = verified_as(runs, registry, entry, _dropped, written)
    head = heads.get(entry.digest, {"count": 0, "head": chain.genesis(entry.digest)})
    if head["count"]:
        registry.anchor_runs(entry, int(head["count"]), str(head["head"]))
    return head


def link_pin(registry: Registry, entry: Entry) -> Callable[[int, str], object] | None:
    """The per-link pin of a run on the locked split, for :class:`WrittenLinks` (None
    for any other run).

    A confirmatory run pins every link it stores, at once (issue 40, item 8): the
    end-of-run anchor alone left a window in which a run killed before its end could
    have its records deleted and be run again, leaving a consistent, shorter history.
    What stays open is at most one link per unit in flight: a kill between a record's
    append and its pin (docs/integrity.md)."""
    if entry.registration.split != LOCKED_SPLIT:
        return None
    return partial(registry.pin_link, entry)
