"""``prereg verify``: recompute everything and name every problem.

Checks, in order: the ledger chain (each line valid JSON, consecutive sequence
numbers, each line's ``prev`` equal to the hash of the line before), each
ledger line against its mirror (the frozen copy or claim file written before
it), each frozen copy's digest recomputed from its document, every stored
object's hash, frozen copies and claims with no ledger line (a truncated
ledger), and, as information only, workspace experiment files that changed
since they were registered.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from prereg.core.errors import IntegrityError
from prereg.registry.audit_log import AuditLog
from prereg.registry.digest import canonical_json, document_digest, file_digest
from prereg.registry.judges import Judge, judge_digest
from prereg.registry.ledger import GENESIS
from prereg.registry.registrations import (
    ANCHOR_EVENT,
    JUDGE_ADDENDUM_EVENT,
    PENDING_SUFFIX,
    VERDICTS_ANCHOR_EVENT,
    Entry,
    Registry,
    frozen_body_digest,
    frozen_shape_problem,
    mirror_reads,
)
from prereg.registry.tables import ADDENDA, ANCHORS, CLAIMS, ledger_problems

#: The ledger's append-only tables whose lines name a registration (issue 40).
_LEDGER_TABLES = {
    "locked-split-claim": CLAIMS,
    ANCHOR_EVENT: ANCHORS,
    VERDICTS_ANCHOR_EVENT: ANCHORS,
    JUDGE_ADDENDUM_EVENT: ADDENDA,
}


@dataclass(frozen=True)
class Problem:
    kind: str  # short machine name, e.g. "ledger-chain", "frozen-edited"
    entry: str  # what it concerns: a registration id, "ledger line N", an object
    message: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Report:
    problems: list[Problem]
    info: list[Problem]
    registrations: int
    ledger_lines: int
    objects: int
    head: dict[str, Any]

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "registrations": self.registrations,
            "ledger_lines": self.ledger_lines,
            "objects": self.objects,
            "ledger_head": self.head,
            "problems": [p.to_json() for p in self.problems],
            "info": [p.to_json() for p in self.info],
        }


def _check_chain(registry: Registry, problems: list[Problem]) -> list[dict[str, Any]]:
    prev_hash = GENESIS
    expected_seq = 1
    events = []
    try:
        raw = registry.ledger.read()
    except IntegrityError as exc:
        problems.append(Problem("ledger-unreadable", "ledger.jsonl", exc.message))
        return []
    if raw and (not raw.endswith(b"\n") or b"\n\n" in raw or raw.startswith(b"\n")):
        problems.append(
            Problem(
                "ledger-format",
                "ledger.jsonl",
                "the ledger is not one line per event ending in a newline "
                "(a blank line was inserted or the last newline removed)",
            )
        )
    for line in registry.ledger.lines():
        where = f"ledger line {line.number}"
        if line.data is None:
            problems.append(Problem("ledger-malformed", where, "not a valid JSON object"))
            prev_hash = line.hash
            expected_seq += 1
            continue
        seq = line.data.get("seq")
        label = f"{where} (seq {seq}, id {line.data.get('id')})"
        if seq != expected_seq:
            problems.append(
                Problem(
                    "ledger-sequence",
                    label,
                    f"sequence number {seq}, expected {expected_seq}: a line was "
                    "removed, inserted or reordered",
                )
            )
        if line.data.get("prev") != prev_hash:
            problems.append(
                Problem(
                    "ledger-chain",
                    label,
                    "its 'prev' hash does not match the line before it: the line "
                    "before was edited, removed or inserted, or lines reordered",
                )
            )
        events.append({**line.data, "_raw": line.raw, "_where": label})
        prev_hash = line.hash
        expected_seq = (seq if isinstance(seq, int) else expected_seq) + 1
    return events


def _read_file(path: Path) -> bytes | str | None:
    """The bytes of the regular file at ``path``; None when nothing is there; else why it
    cannot be read (a folder, a device or a link loop in its place: tampering or damage)."""
    if not os.path.lexists(path):
        return None
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            return "is not a file (a folder or another kind of entry is in its place)"
        return path.read_bytes()
    except FileNotFoundError:  # a link to nothing
        return None
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"


def _check_frozen_event(
    registry: Registry, event: dict[str, Any], problems: list[Problem]
) -> tuple[set[str], dict[str, Any] | None]:
    """One registration's frozen copy against its ledger line: (objects it references, doc)."""
    referenced: set[str] = set()
    reg_id = str(event.get("id"))
    path = registry.frozen_path(reg_id)
    raw = _read_mirror_file(path)
    if not isinstance(raw, bytes):
        kind, what = ("frozen-deleted", "is missing") if raw is None else ("frozen-unreadable", raw)
        problems.append(
            Problem(kind, reg_id, f"frozen copy {path.name} {what} ({event['_where']})")
        )
        return referenced, None
    try:
        frozen = json.loads(raw)
        shape = frozen_shape_problem(frozen)
        if shape is not None:
            problems.append(
                Problem("frozen-unreadable", reg_id, f"frozen copy {path.name}: {shape}")
            )
            return referenced, None
        document = frozen["document"]
        stored_digest = frozen["digest"]
        canonical = canonical_json(frozen) + b"\n"
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError):
        problems.append(
            Problem(
                "frozen-edited",
                reg_id,
                f"frozen copy {path.name} is not a valid frozen registration",
            )
        )
        return referenced, None
    if raw != canonical:
        problems.append(
            Problem(
                "frozen-edited",
                reg_id,
                f"frozen copy {path.name} is not byte-identical to its "
                "canonical form: it was edited (formatting included)",
            )
        )
    recomputed = document_digest(document)
    if recomputed != stored_digest:
        problems.append(
            Problem(
                "frozen-edited",
                reg_id,
                f"frozen copy edited: its document hashes to {recomputed}, "
                f"its recorded digest is {stored_digest}",
            )
        )
    if stored_digest != event.get("digest"):
        problems.append(
            Problem(
                "digest-mismatch",
                reg_id,
                f"ledger digest {event.get('digest')} differs from the "
                f"frozen copy's {stored_digest}",
            )
        )
    if frozen_body_digest(frozen) != event.get("frozen"):
        problems.append(
            Problem(
                "frozen-edited",
                reg_id,
                f"frozen copy {path.name} differs from what its ledger line "
                "pins (source, feasibility or another field was edited)",
            )
        )
    if frozen.get("ledger_line", "").encode() != event["_raw"]:
        problems.append(
            Problem(
                "ledger-edited",
                event["_where"],
                "the ledger line differs from the copy written with the "
                "frozen registration: the line was edited",
            )
        )
    files = (document.get("experiment") or {}).get("files") or {}
    referenced.update(files.values())
    source = (frozen.get("source") or {}).get("object")
    if source:
        referenced.add(source)
    summary = {
        "id": reg_id,
        "experiment": (document.get("experiment") or {}).get("name"),
        "files": files,
    }
    return referenced, summary


def _check_frozen(
    registry: Registry, events: list[dict[str, Any]], problems: list[Problem]
) -> tuple[set[str], list[dict[str, Any]]]:
    referenced: set[str] = set()
    documents = []
    seen = set()
    for event in events:
        if event.get("event") != "registration":
            continue
        seen.add(str(event.get("id")))
        used, summary = _check_frozen_event(registry, event, problems)
        referenced |= used
        if summary is not None:
            documents.append(summary)
    if registry.frozen_dir.is_dir():
        for path in sorted(registry.frozen_dir.glob("*.json")):
            if path.stem not in seen and path.stem not in _ids_now(registry):
                problems.append(
                    Problem(
                        "ledger-truncated",
                        path.stem,
                        f"frozen copy {path.name} has no ledger line: the ledger "
                        "was truncated or its line removed",
                    )
                )
    return referenced, documents


def _read_mirror_file(path: Path) -> bytes | str | None:
    """``_read_file`` of a mirror under its final or pending name (a kill after the
    ledger line, or a writer renaming it right now: see ``mirror_reads``)."""
    raw: bytes | str | None = None
    for candidate in mirror_reads(path):
        raw = _read_file(candidate)
        if raw is not None:
            return raw
    return raw


def _ids_now(registry: Registry) -> set[str]:
    """Registration ids in the ledger as it is now (see ``_seqs_now``)."""
    events = registry.ledger.events()
    return {str(e.get("id")) for e in events if e.get("event") == "registration"}


def _seqs_now(registry: Registry) -> set[Any]:
    """Sequence numbers in the ledger as it is now, re-read: a file that looks like it
    lost its ledger line is first checked against lines appended since the first read
    (a concurrent ``register`` or claim, with no lock held here)."""
    return {e.get("seq") for e in registry.ledger.events()}


def _check_mirrors(
    registry: Registry,
    events: list[dict[str, Any]],
    problems: list[Problem],
    event_kind: str | tuple[str, ...],
    folder: Path,
    what: str,
) -> None:
    """Ledger lines of ``event_kind`` (one or several) against their mirror files in
    ``folder``.

    Each line's mirror is read by name, final or pending, so a writer renaming it while
    this reads (no lock is held) is never mistaken for a deletion. The listing only
    finds what should not be there: entries no line accounts for.
    """
    kinds = (event_kind,) if isinstance(event_kind, str) else event_kind
    mirrored = {e.get("seq"): e for e in events if e.get("event") in kinds}
    for seq, event in mirrored.items():
        path = folder / f"{seq:06d}.json"
        raw = _read_mirror_file(path)
        if raw is None:
            problems.append(
                Problem(f"{what}-deleted", event["_where"], f"the mirror of this {what} is missing")
            )
        elif isinstance(raw, str):
            problems.append(Problem(f"{what}-unreadable", path.name, f"the mirror {raw}"))
        elif raw != event["_raw"]:  # exactly the line, no newline
            problems.append(
                Problem(
                    "ledger-edited",
                    event["_where"],
                    f"the {what} line differs from its mirror: the line was edited",
                )
            )
    if folder.is_dir():
        _check_unaccounted(registry, folder, set(mirrored), problems, what)


def _check_unaccounted(
    registry: Registry, folder: Path, mirrored: set[Any], problems: list[Problem], what: str
) -> None:
    """Entries of a mirror folder that no ledger line accounts for.

    Skipped: a write in progress (``write_atomic``'s temporary) and pending files (a
    pending mirror of a line is read by name above; any other is an interrupted write
    that never happened). A numbered final with no line is checked against the ledger
    as it is now, since a concurrent writer may have appended after ``events`` was read.
    """
    for path in sorted(folder.iterdir()):
        name = path.name
        if name.endswith(PENDING_SUFFIX) or (name.startswith(".") and ".tmp" in name):
            continue
        try:
            seq = int(name.removesuffix(".json")) if name.endswith(".json") else None
        except ValueError:
            seq = None
        if seq is None or not path.is_file():
            problems.append(
                Problem(f"{what}-unknown", path.name, f"unexpected entry in {folder.name}/")
            )
        elif seq not in mirrored and seq not in _seqs_now(registry):
            problems.append(
                Problem(
                    "ledger-truncated",
                    path.name,
                    f"a {what} has no ledger line: the ledger was truncated or the line removed",
                )
            )


def _check_claims(
    registry: Registry, events: list[dict[str, Any]], problems: list[Problem]
) -> None:
    _check_mirrors(registry, events, problems, "locked-split-claim", registry.claims_dir, "claim")
    # run-chain and verdict-chain anchors share anchors/
    anchors = (ANCHOR_EVENT, VERDICTS_ANCHOR_EVENT)
    _check_mirrors(registry, events, problems, anchors, registry.anchors_dir, "anchor")
    _check_mirrors(
        registry, events, problems, JUDGE_ADDENDUM_EVENT, registry.addenda_dir, "judge addendum"
    )
    for event, why in ledger_problems(events, _LEDGER_TABLES):
        noun = _LEDGER_TABLES[str(event.get("event"))].noun
        problems.append(Problem(f"{noun}-record", str(event.get("_where")), why))


def _check_objects(registry: Registry, referenced: set[str], problems: list[Problem]) -> int:
    count = 0
    present = set()
    for digest, path in registry.objects.all():
        count += 1
        present.add(digest)
        data = _read_file(path)
        if not isinstance(data, bytes):
            problems.append(Problem("object-unreadable", digest, f"stored object {data}"))
            continue
        actual = file_digest(data)
        if actual != digest:
            problems.append(
                Problem(
                    "object-edited",
                    digest,
                    f"stored object was edited: its content hashes to {actual}",
                )
            )
    for digest in sorted(referenced - present):
        problems.append(Problem("object-missing", digest, "a referenced object is missing"))
    return count


def _check_referenced(registry: Registry, referenced: set[str], problems: list[Problem]) -> None:
    """Only the objects one registration references: present and unedited."""
    for digest in sorted(referenced):
        data = _read_file(registry.objects.path(digest))
        if data is None:
            problems.append(Problem("object-missing", digest, "a referenced object is missing"))
            continue
        if isinstance(data, str):
            problems.append(Problem("object-unreadable", digest, f"stored object {data}"))
            continue
        actual = file_digest(data)
        if actual != digest:
            problems.append(
                Problem(
                    "object-edited",
                    digest,
                    f"stored object was edited: its content hashes to {actual}",
                )
            )


def _workspace_changes(experiments_dir: Path, documents: list[dict[str, Any]]) -> list[Problem]:
    info = []
    for doc in documents:
        folder = experiments_dir / str(doc["experiment"])
        for rel, digest in sorted(doc["files"].items()):
            path = folder / rel
            if not path.is_file():
                info.append(
                    Problem(
                        "workspace-file-removed",
                        doc["id"],
                        f"experiments/{doc['experiment']}/{rel} was removed since "
                        "registration (runs use the frozen copy)",
                    )
                )
            elif file_digest(path.read_bytes()) != digest:
                info.append(
                    Problem(
                        "workspace-file-changed",
                        doc["id"],
                        f"experiments/{doc['experiment']}/{rel} changed since "
                        "registration (runs use the frozen copy)",
                    )
                )
    return info


def verify(registry: Registry, experiments_dir: Path | None = None) -> Report:
    problems: list[Problem] = []
    events = _check_chain(registry, problems)
    referenced, documents = _check_frozen(registry, events, problems)
    referenced |= _addenda_objects(events, problems)
    _check_claims(registry, events, problems)
    _check_audit_logs(registry, problems)
    objects = _check_objects(registry, referenced, problems)
    info = _workspace_changes(experiments_dir, documents) if experiments_dir else []
    head = registry.ledger.head()
    return Report(
        problems=problems,
        info=info,
        registrations=sum(1 for e in events if e.get("event") == "registration"),
        ledger_lines=len(events),
        objects=objects,
        head=head.to_json(),
    )


def verify_entry(registry: Registry, reg_id: str) -> list[Problem]:
    """The checks ``verify`` makes, for what one registration depends on.

    The whole ledger chain (one file, cheap to rehash), the registration's frozen copy
    against its ledger line and digest, the objects it references, and every claim
    against its mirror (the locked split concerns every registration). Commands that
    read a registration (run, analyse, export, import, compare, plan from runs) call
    this first (DESIGN.md invariant 11).
    """
    problems: list[Problem] = []
    events = _check_chain(registry, problems)
    mine = [e for e in events if e.get("id") == reg_id]
    referenced: set[str] = set()
    for event in mine:
        if event.get("event") == "registration":
            used, _ = _check_frozen_event(registry, event, problems)
            referenced |= used
    # the newest line is hashed by no later line: only its mirror shows an edit of it,
    # whichever registration it belongs to (claims and anchors: _check_claims below)
    newest = events[-1] if events else None
    if newest is not None and newest.get("event") == "registration" and newest not in mine:
        _check_newest_registration(registry, newest, problems)
    referenced |= _addenda_objects(mine, problems)
    _check_claims(registry, events, problems)  # every claim: the locked split is shared
    _check_referenced(registry, referenced, problems)
    return problems


def audit_logs(registry: Registry) -> list[Path]:
    """The registry's append-only logs beside the ledger (:mod:`prereg.registry.audit_log`):
    each experiment's eligibility record and the imported telemetry."""
    found = sorted((registry.root / "eligibility").glob("*.jsonl"))
    telemetry = registry.root / "telemetry.jsonl"
    return found + ([telemetry] if telemetry.exists() else [])


def _check_audit_logs(registry: Registry, problems: list[Problem]) -> None:
    """Each audit log's chain and line digests; a log that is not a regular file is a
    problem too (never read past its size limit, never blocked on)."""
    for path in audit_logs(registry):
        try:
            AuditLog(path).verified_events()
        except IntegrityError as exc:
            where = exc.file or path.name
            problems.append(Problem("audit-log", str(where), exc.message))
        except OSError as exc:
            problems.append(Problem("audit-log", path.name, f"cannot be read ({exc})"))


def _addenda_objects(events: list[dict[str, Any]], problems: list[Problem]) -> set[str]:
    """The rubric objects judge addenda reference; an addendum whose judge digest is not
    its judge's and rubric's (the line's own parts disagree) is a problem."""
    out: set[str] = set()
    for event in events:
        if event.get("event") != JUDGE_ADDENDUM_EVENT:
            continue
        rubric = event.get("rubric")
        try:
            stated = judge_digest(Judge.model_validate(event.get("judge")), str(rubric))
        except ValueError:
            stated = None
        if not isinstance(rubric, str) or stated != event.get("judge_digest"):
            problems.append(
                Problem(
                    "judge-addendum-record",
                    str(event.get("_where")),
                    "the judge addendum's judge, rubric and judge digest disagree",
                )
            )
            continue
        out.add(rubric)
    return out


def _check_newest_registration(
    registry: Registry, event: dict[str, Any], problems: list[Problem]
) -> None:
    """Another registration's line, the ledger's newest, against the line its frozen copy
    mirrors (only the mirror: its document and objects are that registration's)."""
    path = registry.frozen_path(str(event.get("id")))
    raw = _read_mirror_file(path)
    try:
        line = json.loads(raw)["ledger_line"] if isinstance(raw, bytes) else None
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError):
        line = None
    if not isinstance(line, str) or line.encode() != event["_raw"]:
        problems.append(
            Problem(
                "ledger-edited",
                event["_where"],
                "the ledger's newest line differs from the copy written with its frozen "
                "registration (or that copy cannot be read): the line was edited",
            )
        )


def verified_entry(registry: Registry, reg_id: str) -> Entry:
    """The registration ``reg_id``, after :func:`verify_entry` found nothing (else exit 3)."""
    problems = verify_entry(registry, reg_id)
    if problems:
        raise IntegrityError(
            f"registration '{reg_id}' fails verification, so it is not used; run "
            "`prereg verify` for the whole registry",
            details=[f"{p.kind}: {p.entry}: {p.message}" for p in problems],
        )
    return registry.get(reg_id)
