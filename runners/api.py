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

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from prereg.core.errors import BadInput, IntegrityError, WriteFailure
from prereg.core.workspace import Workspace
from prereg.experiments import Experiment
from prereg.experiments.models import LOCKED_SPLIT
from prereg.registry.registry import Entry, Registry
from prereg.registry.units import RunPlan, build_offers
from prereg.registry.verify import verified_entry
from prereg.runners.exchange import Format, read_records, write_records, write_records_to
from prereg.runners.importing import plan_import
from prereg.runners.orchestrate import Drivers, Progress, RunSummary, execute, settle_heap
from prereg.runners.prepare import open_registry, prepare
from prereg.runners.providers.factory import create_run_drivers
from prereg.runners.record import RunRecord
from prereg.runners.share import WorkerShare
from prereg.runners.store.choose import (
    StoreLocation,
    is_postgres,
    open_store,
    ready_to_write,
    resolve_store,
)
from prereg.runners.store.interface import WrittenLinks
from prereg.runners.store.sqlite import store_path, writable
from prereg.runners.store.verify import anchor_runs, verified_records


@dataclass
class Preflight:
    """A registration checked and ready to run: what :func:`preflight` found."""

    runs: StoreLocation
    registry: Registry
    entry: Entry
    plan: RunPlan
    experiment: Experiment
    driver: Drivers


def preflight(
    ws: Workspace,
    registration_id: str,
    *,
    driver: Drivers | None = None,
    store: str | None = None,
    share: WorkerShare | None = None,
) -> Preflight:
    """Everything ``prereg run`` checks and claims before a unit runs: the registration
    verified and runnable, the store writable (a paid call whose record cannot be written
    is lost), the drivers built, every control applicable (refused, exit 2, before the
    locked split is claimed: a refused run must not spend it), the locked split claimed
    (idempotent for this registration; refused, exit 4, if another claimed it), and the
    stored chain verified (a run resumes only onto a chain that verifies)."""
    runs = resolve_store(ws.runs, store)
    registry, entry, plan, experiment = prepare(ws, registration_id)
    check_store_writable(ws, runs)
    if driver is None:
        try:
            driver = create_run_drivers(plan, ws, store=store, share=share)
        except ValueError as exc:
            raise BadInput(str(exc), field="host.params") from None
    build_offers(plan, experiment)
    if plan.split == LOCKED_SPLIT:
        registry.claim_locked_split(entry)
    verified_records(runs, registry, entry)
    return Preflight(runs, registry, entry, plan, experiment, driver)


def run_registration(
    ws: Workspace,
    registration_id: str,
    *,
    concurrency: int = 4,
    max_units: int | None = None,
    progress: Progress | None = None,
    driver: Drivers | None = None,
    store: str | None = None,
    share: WorkerShare | None = None,
    anchor: bool = True,
    exits_after: bool = False,
) -> RunSummary:
    """Run (or resume) a registration; ``driver`` overrides the registered drivers: one
    driver for every arm, or one per arm id (benches, tests). ``store``: the run store
    (``--store``; :func:`prereg.runners.store.choose.resolve_store`). ``share`` and ``anchor``:
    for a worker process of ``prereg run --workers N`` (:mod:`prereg.runners.workers`),
    which runs its share and leaves the anchor to the parent, once all have ended.
    ``exits_after``: this process exits when the run ends (the ``prereg`` program, a
    worker process), so what is alive before the first unit may be frozen
    (:func:`~prereg.runners.orchestrate.settle_heap`)."""
    check_run_options(concurrency, max_units)
    if exits_after:
        settle_heap()  # what is loaded so far, before the checks allocate
    ready = preflight(ws, registration_id, driver=driver, store=store, share=share)
    return run_ready(
        ready,
        concurrency=concurrency,
        max_units=max_units,
        progress=progress,
        share=share,
        anchor=anchor,
        exits_after=exits_after,
    )


def run_ready(
    ready: Preflight,
    *,
    concurrency: int,
    max_units: int | None,
    progress: Progress | None,
    share: WorkerShare | None = None,
    anchor: bool = True,
    exits_after: bool = False,
) -> RunSummary:
    """Run the units of a registration :func:`preflight` has checked and claimed
    (``exits_after``: as :func:`run_registration` takes it)."""
    if exits_after:
        settle_heap(ready.driver, ready.plan)
    records = open_store(ready.runs)
    written = WrittenLinks()
    try:
        summary = execute(
            ready.plan,
            ready.experiment,
            records,
            ready.driver,
            concurrency=concurrency,
            max_units=max_units,
            progress=progress,
            share=share,
            written=written,
        )
    finally:
        records.close()
    if anchor:
        anchor_runs(ready.runs, ready.registry, ready.entry, written)
    return summary


def check_run_options(concurrency: int, max_units: int | None) -> None:
    """``--concurrency`` and ``--max-units`` as ``prereg run`` accepts them (exit 2)."""
    if concurrency < 1:
        raise BadInput("--concurrency must be at least 1", field="concurrency")
    if max_units is not None and max_units < 0:
        raise BadInput("--max-units must be >= 0", field="max-units")


def check_store_writable(ws: Workspace, runs: StoreLocation | None = None) -> None:
    """WriteFailure (exit 1, nothing run) when this process cannot write the run store;
    for a PostgreSQL store: reach it and create or check its schema (exit 1, 3)."""
    if runs is not None and is_postgres(runs):
        ready_to_write(runs)
        return
    path = store_path(ws.runs if runs is None else runs)
    if path.exists():
        target, ok = path, writable(path)
    else:
        target, ok = path.parent, not path.parent.exists() or os.access(path.parent, os.W_OK)
    if not ok:
        raise WriteFailure(
            f"cannot write run records: {target} is read-only for this process; nothing "
            "was run (make it writable, then run again)",
            file=str(target),
        )


def check_export_target(ws: Workspace, out: Path | str, force: bool) -> None:
    """An export never lands in the registry or the run store, nor over a file unasked.

    BadInput (exit 2, nothing written): a path inside the workspace's ``registry/`` or
    ``runs/`` (an export there would overwrite the ledger or the store), a folder, or an
    existing file without ``force``. Nothing to check for ``-`` (standard output).
    """
    if is_stdout(out):
        return
    target = Path(out).resolve()
    for protected in (ws.registry, ws.runs):
        root = protected.resolve()
        if target == root or root in target.parents:
            raise BadInput(
                f"refusing to write an export inside the workspace's {protected.name}/ "
                f"({target}): write it elsewhere",
                field="--out",
            )
    if target.is_dir():
        raise BadInput(f"{target} is a folder; give a file name", field="--out")
    if target.exists() and not force:
        raise BadInput(f"{target} exists; use --force to replace it", field="--out")


#: ``--out -``: the export goes to standard output.
STDOUT = "-"


def is_stdout(out: Path | str) -> bool:
    """True for ``-``, which names standard output, not a file."""
    return str(out) == STDOUT


def export_records(
    ws: Workspace, registration_id: str, store: str | None
) -> tuple[Registry, Entry, list[RunRecord], dict[str, Any] | None]:
    """The registration and its records in chain order, both verified (exit 3
    otherwise), with the chain head: what every export format writes."""
    registry = open_registry(ws)
    entry = verified_entry(registry, registration_id)
    records, heads = verified_records(resolve_store(ws.runs, store), registry, entry)
    foreign = [r.record_id for r in records if r.registration_digest != entry.digest]
    if foreign:
        raise IntegrityError(
            f"{len(foreign)} record(s) of '{registration_id}' carry a digest "
            f"other than the registration's {entry.digest}",
            details=foreign[:20],
        )
    records.sort(key=lambda r: r.chain.index if r.chain else -1)
    return registry, entry, records, heads.get(entry.digest)


def export_registration(
    ws: Workspace,
    registration_id: str,
    fmt: Format,
    out: Path | str,
    *,
    force: bool = False,
    stdout: BinaryIO | None = None,
    store: str | None = None,
) -> dict[str, Any]:
    """Write every record of a registration, chain links included, to ``out``.

    ``out`` ``-`` writes them to ``stdout`` (default: the process's standard output).

    The target is checked first (:func:`check_export_target`, exit 2), then the
    registration and its run chain are verified (exit 3), and records of another digest
    filed under the same id are refused (exit 3).
    """
    check_export_target(ws, out, force)
    _registry, entry, records, head = export_records(ws, registration_id, store)
    if is_stdout(out):
        if stdout is None:
            sys.stdout.flush()  # text already written goes first
            stdout = sys.stdout.buffer
        n = write_records_to(records, stdout, fmt)
    else:
        n = write_records(records, Path(out), fmt)
    return {
        "registration_id": registration_id,
        "registration_digest": entry.digest,
        "format": fmt,
        "out": str(out),
        "records": n,
        "ok": sum(r.status == "ok" for r in records),
        "infra_error": sum(r.status == "infra_error" for r in records),
        "chain": head,
    }


def import_file(ws: Workspace, path: Path, store: str | None = None) -> dict[str, Any]:
    """Check every record (:mod:`prereg.runners.importing`), then append the new links.

    Nothing is written if any record is malformed (exit 2) or fails a check (exit 3).
    Records already stored (the same links) are counted, not written again.
    """
    runs = resolve_store(ws.runs, store)
    rows = read_records(path)
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
