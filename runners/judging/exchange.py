"""Export and import of verdicts and gold labels, chain links included (issue 18).

The file is JSON Lines: one ``{"verdict": {...}}`` or ``{"gold": {...}}`` object a line,
each the item as stored with its chain link, verdicts first, each chain in order. It goes
beside a run export: ``prereg export ID --out FILE`` writes it as ``FILE.verdicts.jsonl``
when the registration has verdicts or gold labels (and nothing more when it has none, so
a run export without verdicts is what it always was), and ``prereg import FILE`` imports
it after the runs; ``prereg judge ID --export/--import`` move it on its own.

Import checks everything before writing anything, like the run import:

1. every line parses into a verdict or a gold label (exit 2, naming the line and field);
2. each names a registration of this workspace with its digest, and that registration
   verifies (exit 3); each verdict is of a judge and rubric it registers (exit 3);
3. each digest's verdicts and labels form intact chains from their first link (exit 3);
4. every item is of a run of that registration in the (verified) run store: import the
   runs first (exit 3 otherwise);
5. against the verdict store (verified first, against the ledger's anchors too): a
   stored link must be the same item, and only the links after the stored ones are
   appended, in one transaction; the new heads are then anchored in the ledger.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from prereg.core.errors import BadInput, IntegrityError
from prereg.core.files import write_atomic
from prereg.core.safeio import MAX_JUDGING_BYTES, read_input, split_lines
from prereg.core.workspace import Workspace
from prereg.core.yamlio import format_loc
from prereg.registry.registrations import Entry, Registry
from prereg.registry.verify import verified_entry
from prereg.runners.exchange.export import check_export_target, is_stdout
from prereg.runners.exchange.text_formats import read_records
from prereg.runners.judging.anchors import anchor_judgements, verified_judgements
from prereg.runners.judging.gold import GoldLabel
from prereg.runners.judging.verdicts import DuplicateVerdict, Verdict, VerdictStore, chain_breaks
from prereg.runners.prepare import open_registry
from prereg.runners.store.choose import StoreLocation
from prereg.runners.store.verify import verified_records

MAX_LISTED = 20
#: ``prereg export --out FILE`` writes the registration's verdicts to FILE + this.
SIDECAR_SUFFIX = ".verdicts.jsonl"


def write_items(out: Path, verdicts: Sequence[Verdict], gold: Sequence[GoldLabel]) -> None:
    """One ``{"verdict": ...}`` or ``{"gold": ...}`` line per item, verdicts first."""
    lines = [json.dumps({"verdict": v.model_dump(mode="json")}) for v in verdicts]
    lines += [json.dumps({"gold": g.model_dump(mode="json")}) for g in gold]
    write_atomic(out, ("".join(line + "\n" for line in lines)).encode(), what="the export")


def export_verdicts(
    ws: Workspace, registration_id: str, out: Path, *, force: bool = False
) -> dict[str, Any]:
    """Write the registration's verdicts and gold labels (chains verified, against the
    ledger's anchors too) to ``out``."""
    check_export_target(ws, out, force)
    registry = open_registry(ws)
    entry = verified_entry(registry, registration_id)
    verdicts, gold = verified_judgements(registry, entry, ws.runs)
    write_items(out, verdicts, gold)
    return {
        "registration_id": entry.id,
        "registration_digest": entry.digest,
        "out": str(out),
        "verdicts": len(verdicts),
        "gold": len(gold),
    }


def sidecar_path(out: Path | str) -> Path:
    """Where ``prereg export --out FILE`` puts the verdicts: ``FILE.verdicts.jsonl``."""
    path = Path(out)
    return path.with_name(path.name + SIDECAR_SUFFIX)


def export_with_verdicts(
    ws: Workspace,
    registration_id: str,
    out: Path | str,
    write: Callable[[], dict[str, Any]],
    *,
    force: bool = False,
) -> dict[str, Any]:
    """``prereg export``: the run records (``write``) and, when the registration has
    verdicts or gold labels, those in ``FILE.verdicts.jsonl`` beside them.

    The run file is exactly what ``write`` makes (byte-identical to an export without
    verdicts); both targets and the verdict and gold chains (against the ledger's
    anchors) are checked before anything is written. With ``--out -`` the verdicts are
    not written (``verdicts_note`` says so).
    """
    check_export_target(ws, out, force)
    registry = open_registry(ws)
    entry = verified_entry(registry, registration_id)
    verdicts: list[Verdict] = []
    gold: list[GoldLabel] = []
    if entry.judges:  # else no verdict can be of it
        verdicts, gold = verified_judgements(registry, entry, ws.runs)
    extra = None if is_stdout(out) or not (verdicts or gold) else sidecar_path(out)
    if extra is not None:
        check_export_target(ws, extra, force)
    result = write()
    if extra is not None:
        write_items(extra, verdicts, gold)
        result.update(verdicts_out=str(extra), verdicts=len(verdicts), gold=len(gold))
    elif verdicts or gold:
        result["verdicts_note"] = (
            f"{len(verdicts)} verdict(s) and {len(gold)} gold label(s) not written to "
            f"standard output: use `prereg judge {entry.id} --export FILE`"
        )
    return result


def import_with_verdicts(
    ws: Workspace,
    path: Path,
    run_import: Callable[[], dict[str, Any]],
    runs_store: StoreLocation | None = None,
) -> dict[str, Any]:
    """``prereg import FILE``: the runs (``run_import``), then ``FILE.verdicts.jsonl`` when
    it is there. Every verdict and label is checked before any run is written (their
    runs may be in the file), the runs are imported, then the verdicts and labels, checked
    again; a refusal of either writes nothing."""
    extra = sidecar_path(path)
    if not extra.exists():
        return run_import()
    file_runs = {(r.registration_digest, r.record_id) for _, r in read_records(path)}
    check_items(ws, extra, runs_store, file_runs)
    result = run_import()
    done = import_verdicts(ws, None, extra, runs_store)
    result.update(
        verdicts_file=str(extra),
        verdicts_imported=done["verdicts_imported"],
        gold_imported=done["gold_imported"],
        verdicts_already_stored=done["already_stored"],
    )
    return result


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
        text = read_input(path, limit=MAX_JUDGING_BYTES, what="a verdicts file").decode("utf-8")
    except FileNotFoundError:
        raise BadInput("file not found", file=str(path)) from None
    except (IsADirectoryError, UnicodeDecodeError) as exc:
        raise BadInput(f"cannot be read as UTF-8 text ({exc})", file=str(path)) from None
    return [
        _item(n, line, path) for n, line in enumerate(split_lines(text), start=1) if line.strip()
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
        known = {j.digest: j.rubric_digest for j in entry.judges}
        problems += [
            f"verdict {v.verdict_id}: judge '{v.judge}' with rubric {v.rubric_digest} is not "
            f"a registered judge of '{entry.id}'"
            for v in items
            if known.get(v.judge_digest) != v.rubric_digest
        ]
    return problems


def _group(items: list[Verdict | GoldLabel]) -> dict[tuple[str, str, str], list[Any]]:
    groups: dict[tuple[str, str, str], list[Any]] = defaultdict(list)
    for item in items:
        noun = "verdict" if isinstance(item, Verdict) else "gold"
        groups[(item.registration_id, item.registration_digest, noun)].append(item)
    for group in groups.values():
        group.sort(key=lambda i: i.chain.index if i.chain else -1)
    return groups


def _entries(
    registry: Registry, groups: dict[tuple[str, str, str], list[Any]], path: Path
) -> dict[str, Entry]:
    """The registrations the items name, verified (exit 3 when one is not here)."""
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
    return entries


def _new_links(
    ws: Workspace,
    registry: Registry,
    items: list[Verdict | GoldLabel],
    path: Path,
    runs_store: StoreLocation | None,
    extra_runs: set[tuple[str, str]],
) -> tuple[dict[str, Entry], list[tuple[str, list[Any]]]]:
    """Check every item (module docstring) and return the registrations and, per chain,
    the links after the stored ones; nothing is written. ``extra_runs``: (digest, run
    id) of runs about to be imported with them (``prereg import``)."""
    groups = _group(items)
    entries = _entries(registry, groups, path)
    stored_chains = {
        reg_id: verified_judgements(registry, entry, ws.runs) for reg_id, entry in entries.items()
    }
    plan: list[tuple[str, list[Any]]] = []
    for (reg_id, digest, noun), group in groups.items():
        entry = entries[reg_id]
        broken = chain_breaks(noun, group, digest)
        if broken:
            raise _refuse(f"the {noun} chain of '{reg_id}' is not intact", path, broken)
        records, _ = verified_records(
            ws.runs if runs_store is None else runs_store, registry, entry
        )
        runs = {r.record_id for r in records if r.registration_digest == digest}
        runs |= {rid for d, rid in extra_runs if d == digest}
        bad = _check_group(entry, group, noun, path, runs)
        if bad:
            raise _refuse(f"{noun} items that do not belong to '{reg_id}' here", path, bad)
        verdicts, gold = stored_chains[reg_id]
        stored: list[Verdict] | list[GoldLabel] = verdicts if noun == "verdict" else gold
        hashes = [s.chain.hash if s.chain else "" for s in stored]
        differ = [
            f"{noun} {n} (run {i.record_id}) differs from the one stored at that position"
            for n, (i, h) in enumerate(zip(group, hashes, strict=False))
            if i.chain is None or i.chain.hash != h
        ]
        if differ:
            raise _refuse(f"the {noun} chain of '{reg_id}' differs from this store's", path, differ)
        plan.append((noun, group[len(stored) :]))
    return entries, plan


def check_items(
    ws: Workspace,
    path: Path,
    runs_store: StoreLocation | None = None,
    extra_runs: set[tuple[str, str]] | None = None,
) -> list[Verdict | GoldLabel]:
    """Read and check a verdicts file as :func:`import_verdicts` would, writing nothing
    (``prereg import`` calls it before importing the runs the file goes with)."""
    items = read_items(path)
    _new_links(ws, open_registry(ws), items, path, runs_store, extra_runs or set())
    return items


def import_verdicts(
    ws: Workspace,
    registration_id: str | None,
    path: Path,
    runs_store: StoreLocation | None = None,
) -> dict[str, Any]:
    """Check every item (module docstring), then append the new links; nothing is
    written on a refusal. Every item must be of ``registration_id`` (exit 3; None: of
    any registration of this workspace, as ``prereg import`` reads an export's file)."""
    items = read_items(path)
    registry = open_registry(ws)
    other = sorted({i.registration_id for i in items} - {registration_id})
    if registration_id is not None and other:
        raise _refuse(
            f"the file holds items of other registrations than '{registration_id}'", path, other
        )
    entries, plan = _new_links(ws, registry, items, path, runs_store, set())
    added = {"verdict": 0, "gold": 0}
    with VerdictStore(ws.runs) as store:
        for noun, new in plan:
            plain = [i.model_copy(update={"chain": None}) for i in new]
            try:
                if noun == "verdict":
                    store.append_verdicts(plain)
                else:
                    store.append_gold(plain)
            except DuplicateVerdict as exc:
                raise _refuse(f"a {noun} repeats one already stored", path, [str(exc)]) from None
            added[noun] += len(new)
    for reg_id in sorted(entries):  # the links are the file's: the stored prefix was
        anchor_judgements(registry, entries[reg_id], ws.runs)
    return {
        "file": str(path),
        "items": len(items),
        "verdicts_imported": added["verdict"],
        "gold_imported": added["gold"],
        "already_stored": len(items) - added["verdict"] - added["gold"],
    }
