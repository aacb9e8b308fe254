"""Running a registration: plan the units, skip the completed ones, run the rest.

- **Resume by default.** Units with an ``ok`` record under the registration's
  digest are skipped; units whose last attempt was an ``infra_error`` run again.
- **Crash safety.** Each unit's record is appended in one transaction as soon as
  the unit ends (while its slot starts the next unit). Ctrl-C or ``kill -9`` at any
  moment loses at most the units in flight, per slot the unit it plays and the record
  it is still appending (never a written one), leaves no half-written row, and
  duplicates nothing: the store's unique key refuses a second ``ok`` record for a unit, even
  from another process running the same registration.
- **Concurrency.** ``concurrency`` asyncio workers share one queue of units; a
  driver's network waits overlap, the harness's own work is small.
- **Spend cap.** The registered ``spend_usd`` caps the measured spend recorded
  under the digest (this run and earlier ones). Once reached, no new unit
  starts. A provider driver also holds each request's worst case before sending it
  (:mod:`prereg.runners.providers.spend`) and refuses one that could pass the cap.
  On a store shared by workers (PostgreSQL) each unit runs inside
  :func:`~prereg.runners.providers.spend.shared_spend`, so those holds are checked
  against every worker's spend and holds in the store, not only this process's.
  Null costs (replay, local) count as zero.
- **Infrastructure failures** (a driver raising, a record that fails its own
  consistency checks) are written as ``status: infra_error`` with the error and
  reported as ``failed``; they are never scored as agent failures. Under the
  registered ``harness: {infrastructure: count_as_failure, attempts: N}`` a unit
  with N infra_error records and no ok one is settled (:func:`settled_keys`): it is
  not run again, and the analysis counts it as a failure (intention to treat).
- **Many workers.** On a store that shares claims (PostgreSQL), each unit is leased to
  one worker at a time (:meth:`RecordStore.unit_claims`): any number of ``prereg run``
  processes on any machines run one registration together, each unit once. A unit whose
  worker died is claimed again once the worker's session or lease lapsed. A worker keeps
  the lease of a unit that ended in infra_error until it exits, so no worker of the same
  round retries it (the next run does, as on one machine).
"""

from __future__ import annotations

import asyncio
import gc
import os
import socket
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from prereg.experiments import Experiment
from prereg.registry.units import RunPlan, RunUnit, build_offers, expand_units
from prereg.runners.drivers.base import Driver
from prereg.runners.harness import EpisodeResult, Harness
from prereg.runners.live import check_live, open_live
from prereg.runners.providers.spend import (
    SharesSpend,
    SpendCapReached,
    SpendLedger,
    shared_spend,
)
from prereg.runners.record import RunRecord
from prereg.runners.scoring import infra_record, score
from prereg.runners.share import WorkerShare
from prereg.runners.store.interface import DuplicateRecord, RecordStore, UnitClaims, WrittenLinks
from prereg.runners.toolbottleneck.study import StudyUnits


@dataclass
class RunSummary:
    """What ``prereg run`` reports (``--json`` prints it as is)."""

    registration_id: str
    registration_digest: str
    driver: str
    evidence_class: str
    planned: int  # units in the registration's plan
    skipped_existing: int  # already settled before this run (an ok record, or counted)
    completed: int  # ok records written by this run
    failed: int  # infra_error records written by this run
    successes: int  # of the completed, how many succeeded
    duplicates: int  # written meanwhile by another process
    remaining: int  # units still unsettled (no ok record, attempts left)
    spend_usd: float  # measured spend recorded under the digest
    stopped: str | None  # None | "spend_cap" | "max_units"
    elapsed_s: float
    units_per_s: float
    workers: int = 1  # processes that ran the units (``prereg run --workers N``)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class Progress:
    """Callbacks the orchestration reports to (the CLI draws a rich bar with them)."""

    def start(self, total: int, already: int) -> None:
        """``total`` units will be attempted; ``already`` were complete before."""

    def advance(self, record: RunRecord, spent: float) -> None:
        """One unit finished (its record is already stored)."""

    def stop(self) -> None:
        """The run ended (normally or not)."""


def _now() -> datetime:
    return datetime.now(UTC)


async def run_unit(plan: RunPlan, harness: Harness, unit: RunUnit, driver: Driver) -> RunRecord:
    """Play and score one unit; any failure outside the agent becomes an infra record."""
    started = _now()
    result: EpisodeResult | None = None
    try:
        result = await harness.run(unit, driver)
        return score(plan, unit, driver, result, started, _now())
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # the driver or the recording failed: infrastructure
        message = f"{type(exc).__name__}: {exc}".strip()
        return infra_record(plan, unit, driver, message[:2000], started, _now(), result)


def settled_keys(plan: RunPlan, store: RecordStore) -> set[tuple[str, str, int]]:
    """Units not to run again: those with an ok record and, under ``count_as_failure``,
    those whose registered attempts all ended in infra_error (the store counts them)."""
    done = store.completed_keys(plan.digest)
    if plan.harness.infrastructure != "count_as_failure":
        return done
    attempts = Counter(
        r.unit_key for r in store.records(registration_digest=plan.digest, status="infra_error")
    )
    return done | {key for key, n in attempts.items() if plan.harness.settles(n)}


Drivers = Driver | Mapping[str, Driver]


def drivers_by_arm(plan: RunPlan, drivers: Drivers) -> dict[str, Driver]:
    """Each arm's driver: one driver serves every arm, or a mapping names each arm's."""
    if not isinstance(drivers, Mapping):
        return {arm: drivers for arm, _ in plan.arms}
    missing = [arm for arm, _ in plan.arms if arm not in drivers]
    if missing:
        raise ValueError(f"no driver for arm(s) {', '.join(missing)}")
    return dict(drivers)


def distinct(drivers: Mapping[str, Driver]) -> list[Driver]:
    """The distinct driver objects, in arm order (arms with one host share one driver)."""
    out: list[Driver] = []
    for driver in drivers.values():
        if not any(driver is seen for seen in out):
            out.append(driver)
    return out


def preload(drivers: Drivers, plan: RunPlan) -> None:
    """Load every driver's SDK now (a provider driver's ``preload``; the others have
    nothing to load): before a run's first unit, or once in a parent that forks workers."""
    for each in distinct(drivers_by_arm(plan, drivers)):
        load = getattr(each, "preload", None)
        if callable(load):
            load()


def settle_heap(drivers: Drivers | None = None, plan: RunPlan | None = None) -> None:
    """In a process that exits when its run ends (the ``prereg`` program, a worker
    process): load the drivers' SDKs, when given, and move everything alive then out of
    the cyclic collector's sight (``gc.freeze``). Called before the checks, then before
    the first unit.

    An SDK is tens of thousands of long-lived objects (its modules, its types, the
    HTTP stack), and every full collection walks them all again: on the provider bench
    one, 0.09-0.15 s, fell among the run's first requests (holding all 32) or in its
    checks (issue 15). Frozen objects are never collected, so a library caller (a test,
    a notebook) does not freeze."""
    if drivers is not None and plan is not None:
        preload(drivers, plan)
    gc.freeze()


def describe(drivers: Mapping[str, Driver]) -> tuple[str, str]:
    """(driver names, evidence class) for the summary: names joined by '+' in arm order."""
    names: list[str] = []
    for driver in distinct(drivers):
        if driver.name not in names:
            names.append(driver.name)
    classes = sorted({d.evidence_class for d in drivers.values()})
    return "+".join(names), "+".join(classes)


async def run_plan(
    plan: RunPlan,
    experiment: Experiment,
    store: RecordStore,
    driver: Drivers,
    *,
    concurrency: int = 4,
    max_units: int | None = None,
    progress: Progress | None = None,
    clock: Callable[[], float] = time.perf_counter,
    share: WorkerShare | None = None,
    written: WrittenLinks | None = None,
) -> RunSummary:
    """Run the plan's missing units, each on its arm's driver; records go to ``store``.

    ``share``: this process is one of ``prereg run --workers N`` on a store without shared
    claims; it runs only its share of the units under its part of the spend cap (see
    :mod:`prereg.runners.share`). ``written``: collects the links this process appends
    (for the anchor at the end of the run)."""
    if concurrency < 1:
        raise ValueError("concurrency must be >= 1")
    by_arm = drivers_by_arm(plan, driver)
    progress = progress or Progress()
    offers = build_offers(plan, experiment)  # BadInput before anything runs
    check_live(plan, experiment)
    units = own_units(expand_units(plan, experiment), share)
    done = settled_keys(plan, store)
    pending = [u for u in units if u.key not in done]
    skipped = len(units) - len(pending)
    # a ToolBottleneckBench study (issue 19): each unit is played on its compiled variant,
    # every pending one built and checked against its registered digest before any runs
    study = StudyUnits(plan, experiment) if experiment.toolbottleneck is not None else None
    if study is not None:
        study.prepare(pending)
    stopped: str | None = None
    claims = (
        store.unit_claims(plan.digest, [u.key for u in units], worker_name()) if pending else None
    )
    by_key = {u.key: u for u in pending}
    if max_units is not None and len(pending) > max_units:
        pending = pending[:max_units] if claims is None else pending
        stopped = "max_units"
    slots = len(pending) if max_units is None else min(len(pending), max_units)
    live = await open_live(plan, experiment) if pending else None
    harness = Harness(
        experiment,
        plan.budgets,
        plan.model,
        dict(plan.params),
        plan.rotations,
        offers=offers,
        live=live,
        configs=plan.arm_configs(),
    )
    # with run stages registered (arms[].stage), a selection arm replays every call: its
    # units are played by a harness without the live session (seed 5.5)
    replay = (
        Harness(
            experiment,
            plan.budgets,
            plan.model,
            dict(plan.params),
            plan.rotations,
            offers=offers,
            configs=plan.arm_configs(),
        )
        if live is not None and plan.stages
        else harness
    )
    cap, spent = _cap_and_spent(plan, store, share)
    ledger = _ledger(claims, cap)
    next_unit = _next_unit(iter(pending), claims, by_key, max_units)
    state = {
        "spent": spent,
        "storing": 0.0,  # the spend of records whose append is under way (counted at once)
        "completed": 0,
        "failed": 0,
        "successes": 0,
        "duplicates": 0,
        "capped": False,
        "read": clock(),
    }
    start = clock()
    progress.start(len(pending), skipped)

    renewing = asyncio.create_task(_renew(claims)) if claims is not None else None
    try:
        playing = _Slots(
            plan,
            harness,
            study,
            by_arm,
            store,
            claims,
            ledger,
            next_unit,
            state,
            cap,
            clock,
            replay,
        )
        await playing.run(max(1, min(concurrency, slots)), progress, written)
    finally:
        if renewing is not None:
            renewing.cancel()
        if claims is not None:
            claims.close()
        progress.stop()
        if live is not None:
            await live.close()
    elapsed = clock() - start
    if state["capped"]:
        stopped = "spend_cap"
    settled = settled_keys(plan, store)
    remaining = sum(1 for u in units if u.key not in settled)
    attempted = state["completed"] + state["failed"]
    names, evidence_class = describe(by_arm)
    return RunSummary(
        registration_id=plan.registration_id,
        registration_digest=plan.digest,
        driver=names,
        evidence_class=evidence_class,
        planned=len(units),
        skipped_existing=skipped,
        completed=int(state["completed"]),
        failed=int(state["failed"]),
        successes=int(state["successes"]),
        duplicates=int(state["duplicates"]),
        remaining=remaining,
        spend_usd=round(float(state["spent"]), 6),
        stopped=stopped,
        elapsed_s=round(elapsed, 4),
        units_per_s=round(attempted / elapsed, 3) if elapsed > 0 else 0.0,
    )


@dataclass
class _Slots:
    """The ``concurrency`` asyncio slots of a run: each plays one unit after another and
    appends its records; ``state`` holds the run's counts and spend."""

    plan: RunPlan
    harness: Harness
    study: StudyUnits | None
    by_arm: Mapping[str, Driver]
    store: RecordStore
    claims: UnitClaims | None
    ledger: SpendLedger | None
    next_unit: Callable[[], RunUnit | None]
    state: dict[str, Any]
    cap: float | None
    clock: Callable[[], float]
    #: the harness of the arms that do not run live (the selection arms of a registration
    #: with stages); None: ``harness`` plays every unit
    replay: Harness | None = None

    def harness_of(self, unit: RunUnit) -> Harness:
        """The harness that plays ``unit``: the live one for an arm that runs live."""
        if self.replay is None or self.plan.runs_live(unit.arm):
            return self.harness
        return self.replay

    async def run(self, slots: int, progress: Progress, written: WrittenLinks | None) -> None:
        tasks = [asyncio.create_task(self.slot(progress, written)) for _ in range(slots)]
        await asyncio.gather(*tasks)

    async def slot(self, progress: Progress, written: WrittenLinks | None) -> None:
        """Play units until none is left or the cap is reached.

        The slot's last record is appended while it plays its next unit (at most one
        append per slot under way): the append waits for the store's write lock in a
        thread, and off the slot's path that wait costs no slot time (issue 15). Its
        spend counts against the cap at once (``storing``); an append's error surfaces
        at the slot's next append or when it ends, and a cancelled slot still waits for
        its append."""
        appending: asyncio.Task[None] | None = None
        try:
            while not self.capped():
                unit = self.next_unit()
                if unit is None:
                    return
                with shared_spend(self.ledger, unit.key):  # the unit's holds, seen by all
                    record = await _play(
                        self.plan, self.harness_of(unit), self.study, unit, self.by_arm[unit.arm]
                    )
                if appending is not None:
                    await appending
                self.state["storing"] += record.cost_usd or 0.0
                appending = asyncio.create_task(self.keep(record, progress, written))
                if refused_by_cap(record):  # the cap is reached for this process's requests:
                    self.state["capped"] = True  # more units would only record refusals
        finally:
            if appending is not None:
                await asyncio.shield(appending)

    async def keep(
        self, record: RunRecord, progress: Progress, written: WrittenLinks | None
    ) -> None:
        """Append a unit's record and report it."""
        state = self.state
        try:
            stored = await _store(self.store, self.claims, record, state, written)
        finally:
            state["storing"] -= record.cost_usd or 0.0
        if stored:
            progress.advance(record, float(state["spent"]))

    def capped(self) -> bool:
        """Whether no new unit may start: the cap reached by the spend stored and the
        spend of the records being appended. Where other workers share the store's
        claims they spend too: the recorded spend is re-read, at most once a second."""
        state, cap = self.state, self.cap
        if self.claims is not None and cap is not None and self.clock() - state["read"] >= 1.0:
            state["read"] = self.clock()
            state["spent"] = max(float(state["spent"]), self.store.spent_usd(self.plan.digest))
        if state["capped"] or (cap is not None and state["spent"] + state["storing"] >= cap):
            state["capped"] = True
        return bool(state["capped"])


async def _play(
    plan: RunPlan, harness: Harness, study: StudyUnits | None, unit: RunUnit, driver: Driver
) -> RunRecord:
    """One unit, on its compiled study variant (issue 19) or through the harness."""
    if study is not None:
        return await study.arun(unit, driver)
    return await run_unit(plan, harness, unit, driver)


def _cap_and_spent(
    plan: RunPlan, store: RecordStore, share: WorkerShare | None
) -> tuple[float | None, float]:
    """The spend cap this process runs under and the spend it starts from: the
    registration's and the store's, or its worker share's (see :mod:`.share`)."""
    if share is None:
        return plan.budgets.spend_usd, store.spent_usd(plan.digest)
    return share.cap(plan.budgets.spend_usd), share.spent_before


def refused_by_cap(record: RunRecord) -> bool:
    """Whether the unit ended because the spend cap refused one of its requests (its
    infra record names :class:`SpendCapReached`, as :func:`run_unit` writes it)."""
    return record.status == "infra_error" and (record.error or "").startswith(
        f"{SpendCapReached.__name__}:"
    )


def own_units(units: list[RunUnit], share: WorkerShare | None) -> list[RunUnit]:
    """The units of the plan this process runs: all, or its share's."""
    if share is None:
        return units
    return [unit for position, unit in enumerate(units) if share.takes(position)]


def _ledger(claims: UnitClaims | None, cap: float | None) -> SpendLedger | None:
    """The spend holds shared by every worker, where the claims are shared and a cap is
    registered (None: each process's meters are exact for what it alone spends)."""
    if cap is None or not isinstance(claims, SharesSpend):
        return None
    return claims.spend_ledger()


async def _store(
    store: RecordStore,
    claims: UnitClaims | None,
    record: RunRecord,
    state: dict[str, Any],
    written: WrittenLinks | None,
) -> bool:
    """Append a unit's record and count it; False when another process stored the unit
    meanwhile (a duplicate, not written). A unit with its ok record is marked done on its claim; an
    infra_error unit's claim is kept until this worker exits (see the module docstring).

    The append runs in a worker thread: it waits for the store's write lock (another
    worker process appending to the same store, a PostgreSQL round trip), and the event
    loop must keep every other unit's requests moving meanwhile. The store serialises its
    own writes; the counting stays on the loop."""
    try:
        linked = await asyncio.to_thread(store.append, record)
    except DuplicateRecord:
        state["duplicates"] += 1
        if claims is not None:
            claims.done(record.unit_key)
        return False
    if claims is not None and record.status == "ok":
        claims.done(record.unit_key)
    if written is not None:
        written.add(linked)
    state["spent"] += record.cost_usd or 0.0
    if record.status == "ok":
        state["completed"] += 1
        state["successes"] += bool(record.success)
    else:
        state["failed"] += 1
    return True


def worker_name() -> str:
    """This worker, as the claims name it (host and process id)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _next_unit(
    queue: Iterator[RunUnit],
    claims: UnitClaims | None,
    by_key: Mapping[tuple[str, str, int], RunUnit],
    max_units: int | None,
) -> Callable[[], RunUnit | None]:
    """What each asyncio worker calls for its next unit: the next pending one, or (on a
    store that shares claims) the next unit this process could claim. A claimed unit it
    does not plan to run (settled when it started) stays leased to it, so no other
    worker of this round runs it either."""
    taken: set[tuple[str, str, int]] = set()

    def from_claims() -> RunUnit | None:
        assert claims is not None
        while max_units is None or len(taken) < max_units:
            key = claims.claim()
            if key is None:
                return None
            if key in by_key and key not in taken:
                taken.add(key)
                return by_key[key]
        return None

    return (lambda: next(queue, None)) if claims is None else from_claims


async def _renew(claims: UnitClaims, every_s: float = 30.0) -> None:
    """Renew this worker's leases while it runs (a long unit keeps its claim)."""
    while True:
        await asyncio.sleep(every_s)
        try:
            claims.renew()
        except Exception:  # the store is gone: the next append says so, exit 1
            return


def execute(
    plan: RunPlan,
    experiment: Experiment,
    store: RecordStore,
    driver: Drivers,
    *,
    concurrency: int = 4,
    max_units: int | None = None,
    progress: Progress | None = None,
    share: WorkerShare | None = None,
    written: WrittenLinks | None = None,
) -> RunSummary:
    """Synchronous entry point: run the plan in a fresh event loop, close the drivers."""

    async def main() -> RunSummary:
        try:
            return await run_plan(
                plan,
                experiment,
                store,
                driver,
                concurrency=concurrency,
                max_units=max_units,
                progress=progress,
                share=share,
                written=written,
            )
        finally:
            for each in distinct(drivers_by_arm(plan, driver)):
                await each.aclose()

    return asyncio.run(main())
