"""What ``prereg import`` accepts: whole, intact chains of planned records.

An export is a registration's run records with their chain links. Import checks,
before anything is written (so a refusal writes nothing):

0. the file reads as rows (exit 2 otherwise: not UTF-8, not Parquet, a line that is not
   JSON, a missing column); then, before any row is validated, every row's content
   hashes to its own chain link (:func:`check_links`): a cell edited after export is
   tampering (exit 3, naming the file and row), even where the edit also leaves a record
   that would not validate; then every record validates (exit 2 naming the line and field:
   a record prereg would not have written, its chain link intact);
1. every record names a registration of this workspace, with its digest, and that
   registration verifies (exit 3 otherwise);
2. each digest's records form an intact chain from its first link (an edited,
   removed, inserted or reordered record breaks it: exit 3);
3. every record is a unit the registration plans (arm, task, repeat), on its split,
   from its driver and evidence class (exit 3: such a record would make the
   append-only store unanalysable forever);
4. against the store: the stored chain must verify (schema, integrity, links,
   anchors: an import never extends a tampered chain); a stored link must be the same
   record (else the import "differs", exit 3, naming the records); the links after the
   stored ones are appended, each continuing the stored chain;
5. no unit gets a second ok record and no record id is used twice (in the file or
   against the store): the store's unique indexes would refuse such a record half-way
   through the import.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from prereg.core.errors import BadInput, IntegrityError, ProtocolRefusal
from prereg.core.workspace import Workspace
from prereg.experiments.models import LOCKED_SPLIT
from prereg.registry.hosts import DRIVERS
from prereg.registry.registrations import Entry, Registry
from prereg.registry.units import expand_units, plan_from_registration
from prereg.registry.verify import verified_entry
from prereg.runners.exchange.text_formats import RawRow, read_rows, validate_row, validate_rows
from prereg.runners.prepare import open_registry
from prereg.runners.record import RunRecord
from prereg.runners.store import chain
from prereg.runners.store.choose import open_store, resolve_store
from prereg.runners.store.interface import ChainRow, RecordStore
from prereg.runners.store.verify import anchor_runs, check_anchors, check_chain, store_problems

MAX_LISTED = 20


@dataclass
class ImportPlan:
    """The records to append, per digest in chain order, and what is already stored."""

    append: list[RunRecord] = field(default_factory=list)
    already_stored: int = 0
    chains: dict[str, dict[str, object]] = field(default_factory=dict)


def _refuse(message: str, path: str, details: list[str]) -> IntegrityError:
    listed = details[:MAX_LISTED]
    if len(details) > MAX_LISTED:
        listed.append(f"... and {len(details) - MAX_LISTED} more")
    return IntegrityError(f"{message}; nothing was imported", file=path, details=listed)


@cache
def _defaults() -> dict[str, Any]:
    """Every optional record field's default as the record's JSON spells it (shared:
    never mutated)."""
    out: dict[str, Any] = {}
    for name, info in RunRecord.model_fields.items():
        if not info.is_required():
            value = info.get_default(call_default_factory=True)
            out[name] = value.model_dump(mode="json") if isinstance(value, BaseModel) else value
    return out


def _content(fields: dict[str, Any]) -> dict[str, Any]:
    """What a row's chain hash covers (:func:`chain.content` of the record it holds),
    from its unvalidated fields: missing fields at their defaults, without the link."""
    out = dict(_defaults())
    for key, value in fields.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    out.pop("chain", None)
    for name in chain.ADDED_FIELDS:
        if name in out and out[name] is None:
            del out[name]
    return out


def _link_problem(path: Path, row: RawRow) -> str | None:
    """What is wrong with the row against its own chain link: its content does not hash
    to it, or cannot be hashed; None when it does, or when the row states no link
    (validation, then the chain check, say what is wrong with such a row)."""
    number, fields, _ = row
    stated = fields.get("chain")
    if stated is None:
        return None
    where = f"row {number}: record {fields.get('record_id')!r}"
    # a stated link not in the shape prereg writes ({hash, index, prev}) was edited: a
    # key renamed or removed, a value of another type
    if not isinstance(stated, dict) or set(stated) != {"hash", "index", "prev"}:
        return f"{where}: its chain link is not one prereg writes (edited after export)"
    index, prev, claimed = stated.get("index"), stated.get("prev"), stated.get("hash")
    if type(index) is not int or not isinstance(prev, str) or not isinstance(claimed, str):
        return f"{where}: its chain link is not one prereg writes (edited after export)"
    try:
        if chain.link_hash(_content(fields), index, prev) == claimed:
            return None
        problem = f"{where}: its content does not match its hash (edited after export)"
    except (TypeError, ValueError, RecursionError) as exc:  # e.g. a number read as inf
        problem = f"{where} cannot be canonicalised ({exc}), so it cannot match its hash"
    try:  # another spelling of the same record (a field left at its default, say)
        record = validate_row(path, row)
        if chain.link_hash(chain.content(record), index, prev) == claimed:
            return None
    except (BadInput, TypeError, ValueError, RecursionError):
        pass
    return problem


def check_links(path: Path, rows: list[RawRow]) -> None:
    """Refuse (exit 3, naming the file and first row) rows whose content does not hash to
    their own chain link: edited after export. Runs before validation, so an edit that
    also leaves an invalid record is reported as what it is, tampering, not bad input."""
    edited = [(row[0], problem) for row in rows if (problem := _link_problem(path, row))]
    if edited:
        raise _refuse(
            f"the records do not form an intact chain: {len(edited)} record(s) were edited "
            "after export (their content does not match their chain hash)",
            f"{path}:{edited[0][0]}",
            [problem for _, problem in edited],
        )


def _entries(registry: Registry, rows: list[tuple[int, RunRecord]], path: str) -> dict[str, Entry]:
    """The (verified) registration of every record, refusing foreign digests."""
    entries: dict[str, Entry | None] = {}
    foreign: list[str] = []
    for line, record in rows:
        reg_id = record.registration_id
        if reg_id not in entries:
            found = registry.find(reg_id)
            entries[reg_id] = None if found is None else verified_entry(registry, found.id)
        entry = entries[reg_id]
        if entry is None or entry.digest != record.registration_digest:
            why = "is not registered here" if entry is None else f"has digest {entry.digest}"
            foreign.append(
                f"line {line}: record {record.record_id} names registration '{reg_id}' with "
                f"digest {record.registration_digest}, but '{reg_id}' {why}"
            )
    if foreign:
        raise _refuse(
            f"{len(foreign)} record(s) do not belong to the registration they name", path, foreign
        )
    return {reg_id: entry for reg_id, entry in entries.items() if entry is not None}


def _unplanned(registry: Registry, entry: Entry, records: list[RunRecord]) -> list[str]:
    """Records that are not units of ``entry``'s plan, or not of their arm's configuration
    (another driver, evidence class, model, budgets or system prompt)."""
    reg = entry.registration
    plan = plan_from_registration(reg, entry.digest)
    planned = {u.key for u in expand_units(plan, registry.load_experiment(entry))}
    configs = plan.arm_configs()
    wrong: list[str] = []
    for record in records:
        where = f"record {record.record_id} ({record.arm}/{record.task_id}/r{record.repeat})"
        if record.unit_key not in planned:
            wrong.append(f"{where}: not a unit '{entry.id}' plans")
            continue
        if record.split != reg.split:
            wrong.append(f"{where}: split {record.split}, the registration's is {reg.split}")
        config = configs[record.arm]
        evidence = DRIVERS[config.driver].evidence_class  # type: ignore[index]
        if record.driver != config.driver or record.evidence_class != evidence:
            wrong.append(
                f"{where}: driver {record.driver} ({record.evidence_class}); arm "
                f"'{record.arm}' runs {config.driver} ({evidence})"
            )
        elif record.config is not None and record.config.digest != config.digest():
            wrong.append(
                f"{where}: configuration {record.config.digest}; arm '{record.arm}' is "
                f"registered with {config.digest()}"
            )
    return wrong


def _stored_chain(
    registry: Registry, store: RecordStore, entry: Entry, digest: str, stored: list[ChainRow]
) -> None:
    """Refuse to extend (or compare with) a stored chain that does not verify."""
    found, _ = check_chain(stored, digest)
    found += check_anchors(registry, digest, stored)
    if found:
        raise _refuse(
            f"the stored run records of '{entry.id}' fail verification (run `prereg verify`)",
            store.where,
            [f"{p.kind}: {p.entry}: {p.message}" for p in found],
        )


def _doubled_units(stored: list[ChainRow], new: list[RunRecord]) -> list[str]:
    """Units that would hold more than one ok record once ``new`` is appended."""
    units = Counter((r.arm, r.task_id, r.repeat) for r in stored if r.status == "ok")
    units.update(r.unit_key for r in new if r.status == "ok")
    return [
        f"{arm}/{task}/r{repeat}: {n} ok records"
        for (arm, task, repeat), n in sorted(units.items())
        if n > 1
    ]


def _reused_ids(rows: list[tuple[int, RunRecord]]) -> list[str]:
    """Record ids the file uses more than once."""
    counts = Counter(record.record_id for _, record in rows)
    return [f"record id {rid} used {n} times" for rid, n in sorted(counts.items()) if n > 1]


def plan_import(
    registry: Registry, store: RecordStore, rows: list[tuple[int, RunRecord]], path: str
) -> ImportPlan:
    """Check everything (see the module docstring); IntegrityError before any write."""
    entries = _entries(registry, rows, path)
    by_digest: dict[str, list[RunRecord]] = defaultdict(list)
    for _, record in rows:
        by_digest[record.registration_digest].append(record)
    reused = _reused_ids(rows)
    if reused:
        raise _refuse(f"{len(reused)} record id(s) are used more than once", path, reused)
    damaged = store_problems(store)
    if damaged:
        raise _refuse(
            "the run store fails verification (run `prereg verify`)",
            store.where,
            [f"{p.kind}: {p.entry}: {p.message}" for p in damaged],
        )
    result = ImportPlan()
    for digest, records in by_digest.items():
        entry = entries[records[0].registration_id]
        ordered = sorted(records, key=lambda r: r.chain.index if r.chain else -1)
        broken = chain.check_records(ordered, digest)
        if broken:
            raise _refuse(
                f"the records of '{entry.id}' do not form an intact chain (edited, removed, "
                "inserted or reordered records)",
                path,
                broken,
            )
        unplanned = _unplanned(registry, entry, ordered)
        if unplanned:
            raise _refuse(
                f"{len(unplanned)} record(s) are not runs '{entry.id}' plans", path, unplanned
            )
        if entry.registration.split == LOCKED_SPLIT and not any(
            c.get("digest") == entry.digest for c in entry.claims
        ):
            raise ProtocolRefusal(
                f"'{entry.id}' ran on the locked split elsewhere, but holds no claim on it in "
                "this registry: its runs are refused here (the locked split is run once, "
                "under the registration that claims it); nothing was imported",
                file=path,
                field="split",
            )
        stored_rows = store.chain_rows(digest)
        _stored_chain(registry, store, entry, digest, stored_rows)
        stored = [row.record_hash for row in stored_rows]
        differing = [
            f"link {i}: record {record.record_id} differs from the stored record at that position"
            for i, record in enumerate(ordered[: len(stored)])
            if record.chain is not None and record.chain.hash != stored[i]
        ]
        if differing:
            raise _refuse(
                f"{len(differing)} record(s) of '{entry.id}' differ from the records stored "
                "here (an edited export, or runs made elsewhere)",
                path,
                differing,
            )
        new = ordered[len(stored) :]
        doubled = _doubled_units(stored_rows, new)
        if doubled:
            raise _refuse(
                f"{len(doubled)} unit(s) of '{entry.id}' would have more than one ok record",
                path,
                doubled,
            )
        taken = [
            f"record id {r.record_id} is already stored"
            for r in new
            if store.has_record_id(r.record_id)
        ]
        if taken:
            raise _refuse(f"{len(taken)} record id(s) are already stored here", path, taken)
        result.already_stored += min(len(stored), len(ordered))
        result.append.extend(new)
        result.chains[digest] = chain.head_of(ordered, digest)
    return result


def import_file(ws: Workspace, path: Path, store: str | None = None) -> dict[str, Any]:
    """Check every record (:mod:`prereg.runners.exchange.importing`), then append the new links.

    Nothing is written if any record is malformed (exit 2) or fails a check (exit 3).
    Records already stored (the same links) are counted, not written again.
    """
    runs = resolve_store(ws.runs, store)
    raw = read_rows(path)  # exit 2: the file does not read as rows
    check_links(path, raw)  # exit 3: a row edited after export, before any validation
    rows = validate_rows(path, raw)  # exit 2: a record prereg would not have written
    registry = open_registry(ws)
    target = open_store(runs)
    try:
        plan = plan_import(registry, target, rows, str(path))
        for record in plan.append:
            target.append_linked(record)
    finally:
        target.close()
    for reg_id in sorted({r.registration_id for r in plan.append}):
        anchor_runs(runs, registry, registry.get(reg_id))
    return {
        "file": str(path),
        "records": len(rows),
        "imported": len(plan.append),
        "already_stored": plan.already_stored,
        "chains": plan.chains,
    }
