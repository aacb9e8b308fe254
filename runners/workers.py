"""``prereg run --workers N``: one registration run by N worker processes of this machine.

One process drives every unit's requests from one event loop, and at high concurrency
that loop, not the network, sets the pace (issue 15: each response waits behind the
others' parsing and recording). N processes share the work and the machine's cores:

- On a store without shared claims (SQLite) each worker takes a fixed share of the units
  and of the spend cap's headroom (:mod:`prereg.runners.share`); on PostgreSQL every
  worker claims units from the store and holds spend in its shared ledger, exactly as
  independent ``prereg run`` processes do.
- ``--concurrency`` is the total: it is split among the workers, as are ``--max-units``
  and the client-side rate limits (``PREREG_RPM``, ``PREREG_TPM``; no more workers start
  than the smallest limit has requests or tokens per minute).
- The parent checks and claims what a run checks and claims (:func:`preflight`) before
  any worker starts, imports the providers' SDKs once and starts the workers by fork
  where the platform has it (so none pays the import mid-run), draws the one progress
  bar from the records they report, and pins the chain's head in the registry once,
  after all have ended. A worker that fails or dies leaves its finished units stored
  (each record is written as it ends); the run ends with its error, and running again
  resumes.
- Workers die with their parent (:func:`bind_to_parent`): a parent killed outright
  (SIGKILL from a scheduler, a timeout or the out-of-memory killer) leaves no worker
  running units, spending on a provider, or waiting on a channel nobody reads. On Linux
  the kernel kills each worker when the parent ends (the parent-death signal, asked for
  as the worker starts, then the parent checked once more in case it ended first);
  elsewhere a thread of each worker looks for its parent every :data:`PARENT_POLL_S`
  seconds and ends the worker when it is gone. The parent, for its part, keeps reading
  the workers' channel until every worker has ended, so no worker blocks writing to it.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import queue
import select
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from prereg.core import errors
from prereg.core.errors import PreregError
from prereg.core.workspace import Workspace
from prereg.registry.pilot import PilotOptions
from prereg.registry.units import expand_units
from prereg.runners.api import (
    Preflight,
    check_run_options,
    preflight,
    run_ready,
    run_registration,
)
from prereg.runners.orchestrate import (
    Progress,
    RunSummary,
    describe,
    distinct,
    drivers_by_arm,
    preload,
    settled_keys,
)
from prereg.runners.providers.factory import create_run_drivers
from prereg.runners.providers.ratelimit import RateLimiter
from prereg.runners.record import RunRecord
from prereg.runners.share import WorkerShare, rate_part, split
from prereg.runners.store.choose import is_postgres, open_store
from prereg.runners.store.verify import anchor_runs

#: how often the parent looks for a worker that ended without a word (killed)
_POLL_S = 0.2

#: how often a worker looks for its parent where no signal tells it the parent ended
PARENT_POLL_S = 0.5

#: ``prctl`` option: the signal the kernel sends this process when its parent ends (Linux)
_PR_SET_PDEATHSIG = 1

#: exit code of a worker that ended because its parent had
ORPHANED_EXIT = 75


@dataclass(frozen=True)
class _Job:
    """What one worker process runs."""

    root: Path
    registration_id: str
    index: int
    count: int
    concurrency: int
    max_units: int | None
    store: str | None
    share: WorkerShare | None
    #: the process id of the parent that started the worker
    parent: int
    #: the pilot's subset of the units (``run --limit/--task/--arm/--intent``), if any
    pilot: PilotOptions | None = None


class _Relay(Progress):
    """A worker's progress: each finished unit's record goes to the parent's bar."""

    def __init__(self, channel: Any, parent: int) -> None:
        self.channel = channel
        self.parent = parent

    def advance(self, record: RunRecord, spent: float) -> None:
        if parent_gone(self.parent):  # no reader: end before the next unit (belt and braces)
            os._exit(ORPHANED_EXIT)
        self.channel.put(("unit", record))


def _work(job: _Job, channel: Any, checked: Preflight | None) -> None:
    """A worker process: run its share, report the summary or the error. ``checked``: the
    parent's preflight, inherited by a forked worker (it then only builds its own drivers,
    whose meter caps its share); a spawned worker checks again."""
    bind_to_parent(job.parent)
    try:
        ws = Workspace(job.root)
        if checked is None:
            ready = preflight(
                ws,
                job.registration_id,
                store=job.store,
                share=job.share,
                pilot=job.pilot,
            )
        else:
            drivers = create_run_drivers(checked.plan, ws, runs=checked.runs, share=job.share)
            ready = replace(checked, driver=drivers)
        split_rate_limits(distinct(drivers_by_arm(ready.plan, ready.driver)), job.count, job.index)
        summary = run_ready(
            ready,
            concurrency=job.concurrency,
            max_units=job.max_units,
            progress=_Relay(channel, job.parent),
            share=job.share,
            anchor=False,
            exits_after=True,  # the worker process ends with its share
        )
    except PreregError as exc:
        channel.put(("error", job.index, type(exc).__name__, exc.to_json()))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which raises it
        message = f"{type(exc).__name__}: {exc}".strip()
        channel.put(("error", job.index, "PreregError", {"message": message}))
    else:
        channel.put(("done", job.index, summary.to_json()))


def run_workers(
    ws: Workspace,
    registration_id: str,
    *,
    workers: int,
    concurrency: int = 4,
    max_units: int | None = None,
    progress: Progress | None = None,
    store: str | None = None,
    exits_after: bool = False,
    pilot: PilotOptions | None = None,
) -> RunSummary:
    """Run (or resume) a registration with ``workers`` processes (see the module
    docstring); one worker, or nothing left to run, is a plain run in this process
    (``exits_after``: as :func:`~prereg.runners.api.run_registration` takes it)."""
    check_run_options(concurrency, max_units)
    if workers < 1:
        raise errors.BadInput("--workers must be at least 1", field="workers")
    ready = preflight(ws, registration_id, store=store, pilot=pilot)
    units = expand_units(ready.plan, ready.experiment)
    with open_store(ready.runs) as records:
        settled = settled_keys(ready.plan, records)
        spent_before = records.spent_usd(ready.plan.digest)
    pending = sum(1 for unit in units if unit.key not in settled)
    count = min(workers, concurrency, pending)
    if max_units is not None:
        count = min(count, max(max_units, 1))
    drivers = distinct(drivers_by_arm(ready.plan, ready.driver))
    count = min([count, *_limits(drivers)])  # each worker keeps at least one a minute
    if count <= 1:
        return run_registration(
            ws,
            registration_id,
            concurrency=concurrency,
            max_units=max_units,
            progress=progress,
            store=store,
            exits_after=exits_after,
            pilot=pilot,
        )
    preload(ready.driver, ready.plan)
    shared = is_postgres(ready.runs)
    jobs = [
        _Job(
            root=ws.root,
            registration_id=registration_id,
            index=k,
            count=count,
            concurrency=split(concurrency, count, k),
            max_units=None if max_units is None else split(max_units, count, k),
            store=store,
            share=None if shared else WorkerShare(k, count, spent_before),
            parent=os.getpid(),
            pilot=pilot,
        )
        for k in range(count)
    ]
    started = time.perf_counter()
    bar = progress or Progress()
    total = pending if max_units is None else min(pending, max_units)
    try:
        reports = _supervise(jobs, ready, bar, (total, len(units) - pending), spent_before)
    finally:
        bar.stop()
    anchor_runs(ready.runs, ready.registry, ready.entry)
    _raise_first_error(reports)
    skipped = len(units) - pending
    return _summary(ready, units, skipped, reports, count, time.perf_counter() - started)


def bind_to_parent(parent: int) -> None:
    """End this worker process when ``parent`` (the process that started it) ends: on
    Linux by the parent-death signal (SIGKILL), elsewhere by a thread that looks for the
    parent every :data:`PARENT_POLL_S` seconds. The parent is checked once after the
    signal is asked for: a parent that ended before (between the fork and now) sends none.
    The kernel sends the signal when the parent's thread that started the worker ends;
    :func:`_supervise` starts and joins every worker from one thread, so that is when the
    parent ends or has stopped waiting for its workers.
    """
    if not (sys.platform.startswith("linux") and _death_signal(signal.SIGKILL)):
        watch = threading.Thread(
            target=_watch_parent, args=(parent,), name="prereg-parent", daemon=True
        )
        watch.start()
    if parent_gone(parent):
        os._exit(ORPHANED_EXIT)


def _death_signal(sig: int) -> bool:
    """Ask the kernel for ``sig`` when this process's parent ends (``prctl``); False where
    that cannot be asked."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def parent_gone(parent: int) -> bool:
    """Whether the process that started this one (``parent``) has ended: where processes
    are re-parented when theirs ends (POSIX), the parent is no longer ``parent``;
    elsewhere the parent's sentinel says it ended."""
    if os.name == "posix":
        return os.getppid() != parent
    process = multiprocessing.parent_process()
    return process is not None and not process.is_alive()


def _watch_parent(parent: int) -> None:
    """A worker's thread: end the process (whatever its other threads are doing, a write
    to the parent's channel included) once the parent has ended. It waits for the parent's
    exit where the platform reports one (kqueue on macOS and the BSDs, the parent's handle
    on Windows), at most :data:`PARENT_POLL_S` seconds at a time, and looks again."""
    wait = _exit_waiter(parent)
    while not parent_gone(parent):
        wait(PARENT_POLL_S)
    os._exit(ORPHANED_EXIT)


def _exit_waiter(parent: int) -> Callable[[float], object]:
    """A function that waits up to the seconds it is given for ``parent`` to exit."""
    bsd: Any = select  # kqueue's names exist on macOS and the BSDs only
    if hasattr(bsd, "kqueue"):
        try:
            watcher = bsd.kqueue()
            event = bsd.kevent(
                parent, filter=bsd.KQ_FILTER_PROC, flags=bsd.KQ_EV_ADD, fflags=bsd.KQ_NOTE_EXIT
            )
            watcher.control([event], 0, 0)
            return lambda seconds: watcher.control(None, 1, seconds)
        except OSError:  # the parent is gone already (or cannot be watched): poll
            pass
    process = multiprocessing.parent_process()
    if os.name != "posix" and process is not None:
        return lambda seconds: process.join(seconds)
    return time.sleep


def _limits(drivers: list[Any]) -> list[int]:
    """The client-side per-minute limits (requests, tokens) of the run's drivers."""
    limiters = [getattr(driver, "limiter", None) for driver in drivers]
    return [
        limit
        for limiter in limiters
        if isinstance(limiter, RateLimiter)
        for limit in (limiter.rpm, limiter.tpm)
        if limit is not None
    ]


def split_rate_limits(drivers: list[Any], count: int, index: int) -> None:
    """Give worker ``index`` of ``count`` its part of each driver's client-side rate limits
    (:func:`~prereg.runners.share.rate_part`), so the workers together keep the limit."""
    for driver in drivers:
        limiter = getattr(driver, "limiter", None)
        if isinstance(limiter, RateLimiter) and not limiter.unlimited:
            driver.limiter = RateLimiter(
                rate_part(limiter.rpm, count, index), rate_part(limiter.tpm, count, index)
            )


def _supervise(
    jobs: list[_Job], ready: Preflight, bar: Progress, counts: tuple[int, int], spent: float
) -> dict[int, tuple[Any, ...]]:
    """Start the workers, then the bar (``counts``: units to attempt, already settled: its
    drawing thread must not exist when a worker is forked), relay their units to it, and
    return each worker's last word (a summary, an error, or an exit without either) once
    all have ended. Output still buffered is written first, so no forked worker writes it
    again when it exits. The channel is read until every worker has ended, whatever ends
    this loop (an interrupt included), so no worker blocks writing to it."""
    method = _start_method()
    context: Any = multiprocessing.get_context(method)
    channel = context.Queue()
    checked = ready if method == "fork" else None  # a spawned worker pickles its arguments
    processes = [context.Process(target=_work, args=(job, channel, checked)) for job in jobs]
    sys.stdout.flush()
    sys.stderr.flush()
    for process in processes:
        process.start()
    bar.start(*counts)
    reports: dict[int, tuple[Any, ...]] = {}
    try:
        while len(reports) < len(jobs):
            try:
                message = channel.get(timeout=_POLL_S)
            except queue.Empty:
                _note_silent_exits(processes, reports)
                continue
            if message[0] == "unit":
                record: RunRecord = message[1]
                spent += record.cost_usd or 0.0
                bar.advance(record, spent)
            else:
                reports[int(message[1])] = message
    finally:
        _join_reading(processes, channel)
    return reports


def _join_reading(processes: list[Any], channel: Any) -> None:
    """Wait for every worker to end, reading (and dropping) what they still send: a worker
    writing to a full channel nobody reads would never end."""
    for process in processes:
        while process.is_alive():
            process.join(_POLL_S)
            try:
                while True:
                    channel.get_nowait()
            except queue.Empty:
                pass


def _start_method() -> str:
    """Fork where the platform has it: a worker then starts with the SDKs the parent
    imported; elsewhere a fresh interpreter (spawn)."""
    return "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"


def _note_silent_exits(processes: list[Any], reports: dict[int, tuple[Any, ...]]) -> None:
    """A worker that ended without reporting (killed, out of memory) is an error."""
    for index, process in enumerate(processes):
        if index not in reports and process.exitcode is not None:
            message = (
                f"worker {index + 1} of {len(processes)} ended with exit code {process.exitcode}"
            )
            reports[index] = ("error", index, "PreregError", {"message": message})


def _raise_first_error(reports: dict[int, tuple[Any, ...]]) -> None:
    """The first worker's error, raised as its class (so its exit code) where prereg has
    it, naming how many workers failed."""
    failed = [reports[k] for k in sorted(reports) if reports[k][0] == "error"]
    if not failed:
        return
    _, index, name, data = failed[0]
    kind = getattr(errors, name, PreregError)
    if not (isinstance(kind, type) and issubclass(kind, PreregError)):
        kind = PreregError
    details = list(data.get("details") or [])
    if len(failed) > 1:
        details.append(f"{len(failed)} of the workers failed; every finished unit is stored")
    raise kind(
        f"worker {int(index) + 1}: {data.get('message', 'failed')}",
        file=data.get("file"),
        field=data.get("field"),
        details=details,
    )


def _summary(
    ready: Preflight,
    units: list[Any],
    skipped: int,
    reports: dict[int, tuple[Any, ...]],
    count: int,
    elapsed: float,
) -> RunSummary:
    """The run's summary: the workers' counts summed, the store read once more for what
    is left and what was spent."""
    parts = [report[2] for report in reports.values() if report[0] == "done"]
    with open_store(ready.runs) as records:
        settled = settled_keys(ready.plan, records)
        spend = records.spent_usd(ready.plan.digest)
    names, evidence_class = describe(drivers_by_arm(ready.plan, ready.driver))
    stops = {part["stopped"] for part in parts}
    attempted = sum(part["completed"] + part["failed"] for part in parts)
    summary = RunSummary(
        registration_id=ready.entry.id,
        registration_digest=ready.plan.digest,
        driver=names,
        evidence_class=evidence_class,
        planned=len(units),
        skipped_existing=skipped,
        completed=sum(part["completed"] for part in parts),
        failed=sum(part["failed"] for part in parts),
        successes=sum(part["successes"] for part in parts),
        duplicates=sum(part["duplicates"] for part in parts),
        remaining=sum(1 for unit in units if unit.key not in settled),
        spend_usd=round(spend, 6),
        stopped="spend_cap"
        if "spend_cap" in stops
        else ("max_units" if "max_units" in stops else None),
        elapsed_s=round(elapsed, 4),
        units_per_s=round(attempted / elapsed, 3) if elapsed > 0 else 0.0,
    )
    return replace(summary, workers=count)
