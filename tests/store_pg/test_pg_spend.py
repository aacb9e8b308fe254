"""Spend holds shared by workers (issue 15): the registered cap holds across any number
of database sessions, not only inside one process.

The reference for every sum is the database read with plain SQL through psycopg, on a
connection of the test's own: ``SUM(cost_usd)`` of the records under the digest plus
``SUM(amount)`` of the holds.
"""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest

from prereg.runners.providers.spend import SpendCapReached, SpendMeter, shared_spend
from prereg.runners.record import RunRecord
from prereg.runners.store.interface import DuplicateRecord
from prereg.runners.store.postgres import LEASE_S, PgRunStore, PgSpendLedger
from tests.runners.run_helpers import DIGEST_A, DIGEST_B, record
from tests.store_pg.test_pg_claims import end

UNIT = ("baseline", "t001", 0)
OTHER = ("baseline", "t002", 0)


def sql(url: str, query: str, *args: object) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(query, args)  # type: ignore[arg-type]
        return cur.fetchall() if cur.description else []


def committed_usd(url: str, digest: str = DIGEST_A) -> float:
    """Recorded spend plus every hold of ``digest``, in one statement (one snapshot)."""
    ((total,),) = sql(
        url,
        "SELECT (SELECT COALESCE(SUM(cost_usd), 0) FROM records WHERE registration_digest = %s)"
        " + (SELECT COALESCE(SUM(amount), 0) FROM spend_holds WHERE registration_digest = %s)",
        digest,
        digest,
    )
    return float(total)


def priced(cost_usd: float | None, **over: Any) -> RunRecord:
    """A provider run's record carrying its measured cost (or none, as an infra_error)."""
    return record(driver="anthropic", evidence_class="api", cost_usd=cost_usd, **over)


def ledger(store: PgRunStore, digest: str = DIGEST_A, lease_s: float = LEASE_S) -> PgSpendLedger:
    return store.unit_claims(digest, [UNIT, OTHER], f"w{id(store)}", lease_s).spend_ledger()


def test_concurrent_reservations_never_hold_more_than_the_cap(pg_url: str) -> None:
    """Eight sessions race for holds of $0.125 (exact in binary) against a $1 cap, with
    $0.25 already recorded: exactly six are granted, and at no moment do the recorded
    spend and the holds together pass the cap."""
    with PgRunStore(pg_url) as first:
        first.append(priced(0.25))
        ledger(first)  # the schema and the units, before the race
    stores = [PgRunStore(pg_url) for _ in range(8)]
    ledgers = [ledger(s) for s in stores]
    start = threading.Barrier(len(stores) + 1)
    granted: list[int] = []
    seen: list[float] = []
    running = threading.Event()
    running.set()

    def race(each: PgSpendLedger) -> None:
        start.wait()
        for _ in range(5):
            hold, _, _ = each.reserve(UNIT, 0.125, 1.0)
            if hold is not None:
                granted.append(hold)

    def watch() -> None:
        start.wait()
        while running.is_set():
            seen.append(committed_usd(pg_url))

    threads = [threading.Thread(target=race, args=(each,)) for each in ledgers]
    watcher = threading.Thread(target=watch)
    try:
        for t in [*threads, watcher]:
            t.start()
        for t in threads:
            t.join()
        running.clear()
        watcher.join()
    finally:
        for s in stores:
            s.close()
    assert len(granted) == 6  # (1 - 0.25) / 0.125, and not one more
    assert seen and max(seen) <= 1.0
    # the sessions ended: their holds no longer count, but the test reads them as stored
    assert sql(pg_url, "SELECT count(*), SUM(amount) FROM spend_holds") == [(6, 0.75)]


def test_a_record_with_its_cost_takes_over_its_units_holds(pg_url: str) -> None:
    with PgRunStore(pg_url) as a, PgRunStore(pg_url) as b:
        la, lb = ledger(a), ledger(b)
        hold, recorded, held = la.reserve(UNIT, 0.5, 1.0)
        assert hold is not None and (recorded, held) == (0.0, 0.0)
        assert lb.reserve(OTHER, 0.75, 1.0)[0] is None  # 0.5 held by a
        la.settle(hold, 0.25)  # measured: the hold shrinks to the cost, still counted
        assert sql(pg_url, "SELECT amount, settled FROM spend_holds") == [(0.25, True)]
        assert lb.reserve(OTHER, 0.875, 1.0)[0] is None  # 0.25 + 0.875 > 1
        a.append(priced(0.25))  # the record carries the cost: the hold ends
        assert sql(pg_url, "SELECT count(*) FROM spend_holds") == [(0,)]
        assert committed_usd(pg_url) == 0.25  # counted once, through the record
        assert lb.reserve(OTHER, 0.875, 1.0)[0] is None  # still 0.25 spent
        granted = lb.reserve(OTHER, 0.75, 1.0)
        assert granted[0] is not None and granted[1:] == (0.25, 0.0)
        assert committed_usd(pg_url) == 1.0


def test_a_unit_without_its_cost_on_record_keeps_its_holds_while_its_worker_lives(
    pg_url: str,
) -> None:
    """An infra_error record carries no cost, and a duplicate is not written: the spend
    stays held (it was spent) until the worker ends; then, as on one machine, only the
    records count."""
    with PgRunStore(pg_url) as a, PgRunStore(pg_url) as b:
        la = ledger(a)
        hold, _, _ = la.reserve(UNIT, 0.5, 1.0)
        assert hold is not None
        la.settle(hold, 0.5)
        a.append(priced(None, status="infra_error", success=None, error="reset"))
        b.append(priced(0.125))  # another worker stored the unit meanwhile
        with pytest.raises(DuplicateRecord):
            a.append(priced(0.5))
        assert committed_usd(pg_url) == 0.625  # the hold was kept both times
        claims = a.unit_claims(DIGEST_A, [UNIT], "a")
        claims.close()  # the worker is done: its holds go
        assert committed_usd(pg_url) == 0.125


def test_a_dead_workers_holds_stop_counting(pg_url: str) -> None:
    a, b = PgRunStore(pg_url), PgRunStore(pg_url)
    try:
        hold, _, _ = ledger(a).reserve(UNIT, 0.75, 1.0)
        assert hold is not None
        lb = ledger(b)
        assert lb.reserve(OTHER, 0.5, 1.0)[0] is None
        end(a, pg_url)  # killed: its session ends, its hold stays in the table
        assert sql(pg_url, "SELECT hold_id FROM spend_holds") == [(hold,)]
        granted = lb.reserve(OTHER, 0.5, 1.0)
        assert granted[0] is not None and granted[2] == 0.0  # the dead hold did not count
        assert sql(pg_url, "SELECT hold_id FROM spend_holds") == [(granted[0],)]  # purged
    finally:
        a.close()
        b.close()


def test_an_expired_lease_ends_holds_and_renewal_keeps_them(pg_url: str) -> None:
    a, b = PgRunStore(pg_url), PgRunStore(pg_url)
    try:
        claims = a.unit_claims(DIGEST_A, [UNIT], "a", lease_s=3600)
        assert claims.spend_ledger().reserve(UNIT, 0.75, 1.0)[0] is not None
        lb = ledger(b)
        claims.renew()  # renewed: still held
        assert lb.reserve(OTHER, 0.5, 1.0)[0] is None
        claims.lease_s = -1.0  # renewed "into the past": a machine cut off past its lease
        claims.renew()
        assert lb.reserve(OTHER, 0.5, 1.0)[0] is not None
    finally:
        a.close()
        b.close()


def test_holds_are_per_registration(pg_url: str) -> None:
    with PgRunStore(pg_url) as a:
        assert ledger(a, DIGEST_A).reserve(UNIT, 1.0, 1.0)[0] is not None
        assert ledger(a, DIGEST_B).reserve(UNIT, 1.0, 1.0)[0] is not None


def test_a_meter_holds_in_the_ledger_inside_a_shared_unit(pg_url: str) -> None:
    """The drivers' SpendMeter, unchanged for them, is backed by the ledger inside
    ``shared_spend``: a request refused by the other worker's hold, although this
    process alone has spent nothing."""
    with PgRunStore(pg_url) as a, PgRunStore(pg_url) as b:
        mine, theirs = SpendMeter(1.0), SpendMeter(1.0)
        with shared_spend(ledger(a), UNIT):
            hold = mine.reserve(0.5)
        assert sql(pg_url, "SELECT amount, settled FROM spend_holds") == [(0.5, False)]
        lb = ledger(b)
        with shared_spend(lb, OTHER), pytest.raises(SpendCapReached, match="held by the"):
            theirs.reserve(0.625)
        assert theirs.remaining_usd == 1.0  # the refused hold was undone locally
        SpendMeter(1.0).reserve(0.625)  # outside a shared unit: this process's view only
        assert committed_usd(pg_url) == 0.5
        mine.settle(hold, 0.25)
        assert sql(pg_url, "SELECT amount, settled FROM spend_holds") == [(0.25, True)]
        with shared_spend(lb, OTHER):
            other = theirs.reserve(0.75)
        assert committed_usd(pg_url) == 1.0
        theirs.release(other)  # failed before anything was billed: the hold goes
        mine.release(hold)  # settled already: nothing more to do
        assert committed_usd(pg_url) == 0.25


def test_a_store_made_before_spend_holds_gains_the_table(pg_url: str) -> None:
    with PgRunStore(pg_url) as old:
        old.append(record())
    sql(pg_url, "DROP TABLE spend_holds")
    with PgRunStore(pg_url) as store:
        store.append(record(task_id="t002"))
        assert store.schema_drift() == []
        assert ledger(store).reserve(UNIT, 0.5, 1.0)[0] is not None
    assert sql(pg_url, "SELECT count(*) FROM spend_holds") == [(1,)]
