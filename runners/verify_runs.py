"""Verify the run store: every chain, the schema that keeps it append-only, the anchors.

``prereg verify`` runs this after the registry's checks; ``analyse`` and ``export`` run
:func:`verified_records` for the registration they read. A problem is reported, never
raised as a traceback: an edited record, a removed, inserted or reordered one, a
dropped trigger or index, a second ok record for a unit, a record whose indexed columns
disagree with its body, a chain shorter than or different from what the registry
anchored, and a store file SQLite cannot read.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from prereg.core.errors import IntegrityError
from prereg.registry.registry import Entry, Registry
from prereg.registry.verify import Problem
from prereg.runners import chain
from prereg.runners.record import RunRecord
from prereg.runners.store import REQUIRED_OBJECTS, ChainRow, RunStore, store_path


@dataclass
class RunsReport:
    """What ``verify`` found in the run store."""

    problems: list[Problem] = field(default_factory=list)
    heads: dict[str, dict[str, Any]] = field(default_factory=dict)  # digest -> count, head
    records: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "records": self.records,
            "chains": self.heads,
            "problems": [p.to_json() for p in self.problems],
        }


def _row_problems(row: ChainRow, where: str) -> list[Problem]:
    """A row's indexed columns against its body (analysis reads the body)."""
    try:
        record = RunRecord.model_validate_json(row.body)
    except ValidationError:
        return [Problem("runs-record", where, "the stored record is not a valid run record")]
    stated = (row.record_id, row.arm, row.task_id, row.repeat, row.status, row.success)
    actual = (
        record.record_id,
        record.arm,
        record.task_id,
        record.repeat,
        record.status,
        None if record.success is None else int(record.success),
    )
    if stated != actual:
        return [Problem("runs-record", where, "the row's columns disagree with its record")]
    return []


def check_chain(rows: list[ChainRow], digest: str) -> tuple[list[Problem], str]:
    """Problems of one stored chain, and its head hash as recomputed."""
    problems: list[Problem] = []
    prev = chain.genesis(digest)
    for expected, row in enumerate(rows):
        where = f"runs {digest[:19]}... link {expected} (record {row.record_id})"
        if row.chain_index != expected:
            problems.append(
                Problem(
                    "runs-chain",
                    where,
                    f"stored at chain position {row.chain_index}, expected {expected}: a "
                    "record was removed, inserted or duplicated",
                )
            )
        if (row.prev_hash, row.chain_index) != (prev, expected):
            problems.append(
                Problem("runs-chain", where, "its 'prev' column does not continue the chain")
            )
        recomputed, issues = chain.body_problems(row.body, expected, prev)
        problems += [Problem("runs-chain", where, issue) for issue in issues]
        if recomputed is not None and row.record_hash != recomputed:
            problems.append(
                Problem("runs-chain", where, "its hash column does not match its content")
            )
        problems += _row_problems(row, where)
        prev = recomputed or row.record_hash
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
    return problems, prev


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


def verify_runs(runs: Path, registry: Registry) -> RunsReport:
    """Check every chain of the store at ``runs`` (a folder or the database file)."""
    report = RunsReport()
    path = store_path(runs)
    if not path.exists():
        for anchor in registry.anchors():
            if anchor.get("count"):
                report.problems.append(
                    Problem(
                        "runs-anchor",
                        f"runs of '{anchor.get('id')}'",
                        "the registry pinned run records, but the run store is missing",
                    )
                )
        return report
    store = RunStore(path)
    try:
        present = store.schema_objects()
        for kind, name in REQUIRED_OBJECTS:
            if (kind, name) not in present:
                report.problems.append(
                    Problem(
                        "runs-schema",
                        f"{path.name}: {kind} {name}",
                        f"the {kind} that keeps the store append-only and one-per-unit was dropped",
                    )
                )
        for digest in store.digests():
            rows = store.chain_rows(digest)
            report.records += len(rows)
            problems, head = check_chain(rows, digest)
            report.problems += problems
            report.problems += check_anchors(registry, digest, rows)
            report.heads[digest] = {"count": len(rows), "head": head}
    except sqlite3.DatabaseError as exc:
        report.problems.append(
            Problem("runs-unreadable", path.name, f"the run store cannot be read: {exc}")
        )
    finally:
        store.close()
    return report


def verified_records(
    runs: Path, registry: Registry, entry: Entry
) -> tuple[list[RunRecord], dict[str, dict[str, Any]]]:
    """The records filed under ``entry`` (its id or its digest), after their chains verify.

    Returns (records, heads by digest); IntegrityError (exit 3) naming every problem of
    each chain involved, the registry's anchors included.
    """
    path = store_path(runs)
    if not path.exists():
        return [], {}
    store = RunStore(path)
    problems: list[Problem] = []
    heads: dict[str, dict[str, Any]] = {}
    try:
        by_id = store.records(registration_id=entry.id)
        digests = {entry.digest} | {r.registration_digest for r in by_id}
        for digest in sorted(digests):
            rows = store.chain_rows(digest)
            found, head = check_chain(rows, digest)
            problems += found + check_anchors(registry, digest, rows)
            if rows:
                heads[digest] = {"count": len(rows), "head": head}
        by_digest = store.records(registration_digest=entry.digest)
    except sqlite3.DatabaseError as exc:
        raise IntegrityError(
            f"the run store cannot be read ({exc}); run `prereg verify`", file=str(path)
        ) from None
    finally:
        store.close()
    if problems:
        raise IntegrityError(
            f"the run records of '{entry.id}' fail verification, so they are not used; run "
            "`prereg verify` for the whole store",
            details=[f"{p.kind}: {p.entry}: {p.message}" for p in problems],
        )
    seen: dict[str, RunRecord] = {}
    for record in [*by_id, *by_digest]:
        seen.setdefault(record.record_id, record)
    return list(seen.values()), heads


def anchor_runs(runs: Path, registry: Registry, entry: Entry) -> dict[str, Any]:
    """Verify ``entry``'s run chain and pin its head in the ledger; returns the head.

    Called at the end of every ``prereg run`` (and by ``analyse``): a chain that does
    not verify is never pinned (IntegrityError, exit 3).
    """
    records, heads = verified_records(runs, registry, entry)
    del records
    head = heads.get(entry.digest, {"count": 0, "head": chain.genesis(entry.digest)})
    if head["count"]:
        registry.anchor_runs(entry, int(head["count"]), str(head["head"]))
    return head
