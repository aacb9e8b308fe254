"""Export and import of verdicts and gold labels, chain links included (issue 18).

The file is JSON Lines: one ``{"verdict": {...}}`` or ``{"gold": {...}}`` object a line,
each the item as stored with its chain link, verdicts first, each chain in order. It goes
beside a run export (``prereg export``), so another workspace that imports the runs can
import what was judged of them and the gold labels, verified.

Import checks everything before writing anything, like the run import:

1. every line parses into a verdict or a gold label (exit 2, naming the line and field);
2. each names a registration of this workspace with its digest, and that registration
   verifies (exit 3); each verdict is of a judge and rubric it registers (exit 3);
3. each digest's verdicts and labels form intact chains from their first link (exit 3);
4. every item is of a run of that registration in the (verified) run store: import the
   runs first (exit 3 otherwise);
5. against the verdict store (verified first): a stored link must be the same item, and
   only the links after the stored ones are appended, in one transaction.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from prereg.core.errors import BadInput, IntegrityError
from prereg.core.files import write_atomic
from prereg.core.workspace import Workspace
from prereg.core.yamlio import format_loc
from prereg.registry.judges import judge_digest
from prereg.registry.registry import Entry
from prereg.registry.verify import verified_entry
from prereg.runners.api import check_export_target
from prereg.runners.gold import GoldLabel
from prereg.runners.prepare import open_registry
from prereg.runners.stores import StoreLocation
from prereg.runners.verdicts import DuplicateVerdict, Verdict, VerdictStore, chain_breaks
from prereg.runners.verify_runs import verified_records

MAX_LISTED = 20


def export_verdicts(
    ws: Workspace, registration_id: str, out: Path, *, force: bool = False
) -> dict[str, Any]:
    """Write the registration's verdicts and gold labels (chains verified) to ``out``."""
    check_export_target(ws, out, force)
    entry = verified_entry(open_registry(ws), registration_id)
    with VerdictStore(ws.runs) as store:
        verdicts = store.verdicts(entry.digest)
        gold = store.gold(entry.digest)
    lines = [json.dumps({"verdict": v.model_dump(mode="json")}) for v in verdicts]
    lines += [json.dumps({"gold": g.model_dump(mode="json")}) for g in gold]
    write_atomic(out, ("".join(line + "\n" for line in lines)).encode(), what="the export")
    return {
        "registration_id": entry.id,
        "registration_digest": entry.digest,
        "out": str(out),
        "verdicts": len(verdicts),
        "gold": len(gold),
    }


def _item(line: int, text: str, path: Path) -> Verdict | GoldLabel:
    where = f"{path}:{line}"
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        raise BadInput("not a JSON object", file=where) from None
    if not isinstance(data, dict) or len(data) != 1 or next(iter(data)) not in ("verdict", "gold"):
        raise BadInput("expected one object {'verdict': ...} or {'gold': ...}", file=where)
    key, body = next(iter(data.items()))
    model = Verdict if key == "verdict" else GoldLabel
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = [key, *(p for p in err["loc"] if isinstance(p, (str, int)))]
        raise BadInput(str(err["msg"]), file=where, field=format_loc(loc)) from None


def read_items(path: Path) -> list[Verdict | GoldLabel]:
    """Every item of the file, parsed; BadInput (exit 2) on the first bad line."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadInput("file not found", file=str(path)) from None
    except (IsADirectoryError, UnicodeDecodeError) as exc:
        raise BadInput(f"cannot be read as UTF-8 text ({exc})", file=str(path)) from None
    return [
        _item(n, line, path) for n, line in enumerate(text.splitlines(), start=1) if line.strip()
    ]


def _refuse(message: str, path: Path, details: list[str]) -> IntegrityError:
    listed = details[:MAX_LISTED] + (
        [f"... and {len(details) - MAX_LISTED} more"] if len(details) > MAX_LISTED else []
    )
    return IntegrityError(f"{message}; nothing was imported", file=str(path), details=listed)


def _check_group(
    entry: Entry, items: list[Any], noun: str, path: Path, runs: set[str]
) -> list[str]:
    """Problems of one registration's verdicts or labels from the file."""
    problems = [f"{noun} of run {i.record_id}: no such run of '{entry.id}' here" for i in items]
    problems = [p for p, i in zip(problems, items, strict=True) if i.record_id not in runs]
    if noun == "verdict":
        known = {
            judge_digest(j, entry.files[j.rubric]): entry.files[j.rubric]
            for j in entry.registration.judge or []
        }
        problems += [
            f"verdict {v.verdict_id}: judge '{v.judge}' with rubric {v.rubric_digest} is not "
            f"a registered judge of '{entry.id}'"
            for v in items
            if known.get(v.judge_digest) != v.rubric_digest
        ]
    return problems


def import_verdicts(
    ws: Workspace,
    registration_id: str,
    path: Path,
    runs_store: StoreLocation | None = None,
) -> dict[str, Any]:
    """Check every item (module docstring), then append the new links; nothing is
    written on a refusal. Every item must be of ``registration_id`` (exit 3)."""
    items = read_items(path)
    registry = open_registry(ws)
    other = sorted({i.registration_id for i in items} - {registration_id})
    if other:
        raise _refuse(
            f"the file holds items of other registrations than '{registration_id}'", path, other
        )
    groups: dict[tuple[str, str, str], list[Any]] = defaultdict(list)
    for item in items:
        noun = "verdict" if isinstance(item, Verdict) else "gold"
        groups[(item.registration_id, item.registration_digest, noun)].append(item)
    entries: dict[str, Entry] = {}
    problems: list[str] = []
    for reg_id, digest, _ in groups:
        found = registry.find(reg_id)
        if found is None or found.digest != digest:
            problems.append(f"registration '{reg_id}' with digest {digest} is not registered here")
        elif reg_id not in entries:
            entries[reg_id] = verified_entry(registry, reg_id)
    if problems:
        raise _refuse("items of registrations this workspace does not have", path, problems)
    plan: list[tuple[str, list[Any]]] = []
    with VerdictStore(ws.runs) as store:
        for (reg_id, digest, noun), group in groups.items():
            entry = entries[reg_id]
            group.sort(key=lambda i: i.chain.index if i.chain else -1)
            broken = chain_breaks(noun, group, digest)
            if broken:
                raise _refuse(f"the {noun} chain of '{reg_id}' is not intact", path, broken)
            records, _ = verified_records(
                ws.runs if runs_store is None else runs_store, registry, entry
            )
            runs = {r.record_id for r in records if r.registration_digest == digest}
            bad = _check_group(entry, group, noun, path, runs)
            if bad:
                raise _refuse(f"{noun} items that do not belong to '{reg_id}' here", path, bad)
            stored: list[Verdict] | list[GoldLabel] = (
                store.verdicts(digest) if noun == "verdict" else store.gold(digest)
            )
            hashes = [s.chain.hash if s.chain else "" for s in stored]
            differ = [
                f"{noun} {n} (run {i.record_id}) differs from the one stored at that position"
                for n, (i, h) in enumerate(zip(group, hashes, strict=False))
                if i.chain is None or i.chain.hash != h
            ]
            if differ:
                raise _refuse(
                    f"the {noun} chain of '{reg_id}' differs from this store's", path, differ
                )
            plan.append((noun, group[len(stored) :]))
        added = {"verdict": 0, "gold": 0}
        for noun, new in plan:
            plain = [i.model_copy(update={"chain": None}) for i in new]
            try:
                linked = (
                    store.append_verdicts(plain) if noun == "verdict" else store.append_gold(plain)
                )
            except DuplicateVerdict as exc:
                raise _refuse(f"a {noun} repeats one already stored", path, [str(exc)]) from None
            del linked  # the same links as the file's: the stored prefix is the file's
            added[noun] += len(new)
    return {
        "file": str(path),
        "items": len(items),
        "verdicts_imported": added["verdict"],
        "gold_imported": added["gold"],
        "already_stored": len(items) - added["verdict"] - added["gold"],
    }
