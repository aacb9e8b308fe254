"""The operations behind ``prereg run``, ``export`` and ``import``.

The CLI is wiring only; these functions are what code (tests, the bench, the
demo) calls:

    from prereg.runners.api import run_registration
    summary = run_registration(workspace, "music-library-pilot", concurrency=8)

Runs always load the experiment through the registry's frozen objects (the
content whose digest was registered), never the editable workspace files
(:func:`prereg.runners.prepare.prepare`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prereg.core.errors import BadInput, IntegrityError
from prereg.core.workspace import Workspace
from prereg.experiments.models import LOCKED_SPLIT
from prereg.registry.units import build_offers
from prereg.registry.verify import verified_entry
from prereg.runners.drivers.base import Driver
from prereg.runners.exchange import Format, read_records, write_records
from prereg.runners.orchestrate import Progress, RunSummary, execute
from prereg.runners.prepare import open_registry, prepare
from prereg.runners.providers.factory import create_run_driver
from prereg.runners.store import RunStore
from prereg.runners.verify_runs import anchor_runs, verified_records


def run_registration(
    ws: Workspace,
    registration_id: str,
    *,
    concurrency: int = 4,
    max_units: int | None = None,
    progress: Progress | None = None,
    driver: Driver | None = None,
) -> RunSummary:
    """Run (or resume) a registration; ``driver`` overrides the registered one (benches)."""
    if concurrency < 1:
        raise BadInput("--concurrency must be at least 1", field="concurrency")
    if max_units is not None and max_units < 0:
        raise BadInput("--max-units must be >= 0", field="max-units")
    registry, entry, plan, experiment = prepare(ws, registration_id)
    if driver is None:
        try:
            driver = create_run_driver(plan, entry.registration, ws)  # providers: issue 7
        except ValueError as exc:
            raise BadInput(str(exc), field="host.params") from None
    build_offers(plan, experiment)  # a control that cannot apply is refused (exit 2) here,
    # before the locked split is claimed: a refused run must not spend it
    if plan.split == LOCKED_SPLIT:
        # the first run of a confirmatory registration spends the locked split (idempotent
        # for this registration; refused, exit 4, if another registration claimed it)
        registry.claim_locked_split(entry)
    verified_records(ws.runs, registry, entry)  # resume only onto a chain that verifies
    store = RunStore(ws.runs)
    try:
        summary = execute(
            plan,
            experiment,
            store,
            driver,
            concurrency=concurrency,
            max_units=max_units,
            progress=progress,
        )
    finally:
        store.close()
    anchor_runs(ws.runs, registry, entry)
    return summary


def export_registration(
    ws: Workspace, registration_id: str, fmt: Format, out: Path
) -> dict[str, Any]:
    """Write every record of a registration to ``out``; refuses foreign digests (exit 3)."""
    entry = verified_entry(open_registry(ws), registration_id)
    store = RunStore(ws.runs)
    records = store.records(registration_id=registration_id)
    store.close()
    foreign = [r.record_id for r in records if r.registration_digest != entry.digest]
    if foreign:
        raise IntegrityError(
            f"{len(foreign)} record(s) of '{registration_id}' carry a digest "
            f"other than the registration's {entry.digest}",
            details=foreign[:20],
        )
    n = write_records(records, out, fmt)
    return {
        "registration_id": registration_id,
        "registration_digest": entry.digest,
        "format": fmt,
        "out": str(out),
        "records": n,
        "ok": sum(r.status == "ok" for r in records),
        "infra_error": sum(r.status == "infra_error" for r in records),
    }


def import_file(ws: Workspace, path: Path) -> dict[str, Any]:
    """Validate every record, check each digest against its registration, then append.

    Nothing is written if any record is malformed (exit 2) or names a registration
    whose digest differs (exit 3). Records already stored are skipped.
    """
    rows = read_records(path)
    registry = open_registry(ws)
    digests: dict[str, str | None] = {}
    foreign: list[str] = []
    for line, record in rows:
        if record.registration_id not in digests:
            entry = registry.find(record.registration_id)
            if entry is not None:
                entry = verified_entry(registry, entry.id)
            digests[record.registration_id] = None if entry is None else entry.digest
        expected = digests[record.registration_id]
        if expected != record.registration_digest:
            why = "is not registered here" if expected is None else f"has digest {expected}"
            foreign.append(
                f"line {line}: record {record.record_id} names registration "
                f"'{record.registration_id}' with digest "
                f"{record.registration_digest}, but '{record.registration_id}' {why}"
            )
    if foreign:
        raise IntegrityError(
            f"{len(foreign)} record(s) do not belong to the registration they "
            "name; nothing was imported",
            file=str(path),
            details=foreign[:20],
        )
    store = RunStore(ws.runs)
    try:
        written = skipped = 0
        for _, record in rows:
            if store.has_record_id(record.record_id):
                skipped += 1
                continue
            w, s = store.extend([record])
            written += w
            skipped += s
    finally:
        store.close()
    return {
        "file": str(path),
        "records": len(rows),
        "imported": written,
        "skipped_duplicates": skipped,
    }
