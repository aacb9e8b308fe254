"""``prereg run``: the story of one run, in the order it happens.

1. **Resolve** the run store once (``--store``, else ``$PREREG_STORE``, else the
   workspace's runs/); every later step is handed that location (:func:`preflight`).
2. **Verify** the registration against its digest, loaded from the registry's frozen
   objects, never the editable workspace files (:func:`prereg.runners.prepare.prepare`),
   and the stored chain: a run resumes only onto a chain that verifies.
3. **Plan**: the drivers built (:func:`~prereg.runners.providers.factory.create_run_drivers`),
   every arm's offer checked, the locked split claimed (refused runs spend nothing).
4. **Execute** the units not yet recorded: each through the harness to a scored record
   appended to its chain (:func:`~prereg.runners.orchestrate.execute`, :func:`run_ready`).
5. **Summarise**: the chain verified again and its head pinned in the ledger
   (:func:`~prereg.runners.store.verify.anchor_runs`); the run summary returned.

The CLI is wiring only; code (tests, the bench, the demo) calls
``run_registration(workspace, "music-library-pilot", concurrency=8)``. Several worker
processes: :mod:`prereg.runners.workers`; export and import: :mod:`prereg.runners.exchange`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from prereg.core.errors import BadInput, WriteFailure
from prereg.core.workspace import Workspace
from prereg.experiments import Experiment
from prereg.experiments.models import LOCKED_SPLIT
from prereg.registry.pilot import PilotOptions
from prereg.registry.registrations import Entry, Registry
from prereg.registry.sessions import SessionProgress, session_progress
from prereg.registry.units import RunPlan, build_offers, expand_units
from prereg.runners.orchestrate import Drivers, Progress, RunSummary, execute, settle_heap
from prereg.runners.prepare import prepare
from prereg.runners.providers.factory import create_run_drivers
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
from prereg.runners.store.verify import anchor_runs, link_pin, verified_records


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
    prices: Path | str | None = None,
    pilot: PilotOptions | None = None,
) -> Preflight:
    """Everything ``prereg run`` checks and claims before a unit runs: the registration
    verified and runnable, the store writable (a paid call whose record cannot be written
    is lost), the drivers built, every control applicable (refused, exit 2, before the
    locked split is claimed: a refused run must not spend it), the locked split claimed
    (idempotent for this registration; refused, exit 4, if another claimed it), and the
    stored chain verified (a run resumes only onto a chain that verifies). ``pilot``: a
    pilot's options (a subset of the units, the response cache), refused for a
    confirmatory registration (exit 4) before anything is claimed."""
    runs = resolve_store(ws.runs, store)
    registry, entry, plan, experiment = prepare(ws, registration_id, pilot)
    check_store_writable(ws, runs)
    if driver is None:
        try:
            driver = create_run_drivers(plan, ws, prices=prices, runs=runs, share=share)
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
    prices: Path | str | None = None,
    pilot: PilotOptions | None = None,
) -> RunSummary:
    """Run (or resume) a registration; ``pilot``: a pilot's options
    (:mod:`prereg.registry.pilot`); ``driver`` overrides the registered drivers: one
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
    ready = preflight(
        ws,
        registration_id,
        driver=driver,
        store=store,
        share=share,
        prices=prices,
        pilot=pilot,
    )
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
    written = WrittenLinks(pin=link_pin(ready.registry, ready.entry))
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


def session_status(
    ws: Workspace, registration_id: str, *, store: str | None = None
) -> list[SessionProgress]:
    """Each replicate session's progress (``design.sessions``; [] without): its planned
    units and those with an ok record (:mod:`prereg.registry.sessions`, reading 3), as
    ``prereg run`` prints it after a run (``--session K`` runs one of them)."""
    _, entry, plan, experiment = prepare(ws, registration_id)
    if plan.sessions < 2:
        return []
    with open_store(resolve_store(ws.runs, store)) as runs:
        done = runs.completed_keys(entry.digest)
    units = (u.key for u in expand_units(plan, experiment))
    return session_progress(units, done, plan.repeats, plan.sessions)
