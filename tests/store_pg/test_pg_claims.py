"""Claims: each unit leased to one worker at a time; a dead worker's units are taken over."""

from __future__ import annotations

from prereg.runners.store.postgres import PgRunStore
from tests.runners.run_helpers import DIGEST_A, record
from tests.store_pg.conftest import wait_for_session_end


def end(store: PgRunStore, url: str) -> None:
    """Close ``store``'s session and wait until the server has ended it."""
    pid = store._connection().info.backend_pid
    store.close()
    wait_for_session_end(url, pid)


KEYS = [("baseline", f"t{i:03d}", 0) for i in range(4)]


def test_each_unit_goes_to_one_worker_in_plan_order(pg_url: str) -> None:
    a, b = PgRunStore(pg_url), PgRunStore(pg_url)  # two workers: two database sessions
    try:
        ca = a.unit_claims(DIGEST_A, KEYS, "a")
        cb = b.unit_claims(DIGEST_A, KEYS, "b")  # registering the units twice is harmless
        got = [ca.claim(), cb.claim(), cb.claim(), ca.claim()]
        assert got == KEYS
        assert ca.claim() is None and cb.claim() is None  # all held by live workers
    finally:
        a.close()
        b.close()


def test_a_unit_with_an_ok_record_is_never_claimed_again(pg_url: str) -> None:
    with PgRunStore(pg_url) as a, PgRunStore(pg_url) as b:
        ca = a.unit_claims(DIGEST_A, KEYS[:2], "a")
        first = ca.claim()
        assert first == KEYS[0]
        a.append(record(task_id=first[1]))
        ca.done(first)
        cb = b.unit_claims(DIGEST_A, KEYS[:2], "b")
        assert cb.claim() == KEYS[1] and cb.claim() is None


def test_an_infra_error_unit_stays_with_its_worker_until_it_exits(pg_url: str) -> None:
    a, b = PgRunStore(pg_url), PgRunStore(pg_url)
    try:
        ca = a.unit_claims(DIGEST_A, KEYS[:1], "a")
        assert ca.claim() == KEYS[0]
        a.append(record(status="infra_error", success=None, error="reset"))
        cb = b.unit_claims(DIGEST_A, KEYS[:1], "b")
        assert cb.claim() is None  # not retried by another worker of the same round
        end(a, pg_url)  # the worker exits: the next run retries it
        assert cb.claim() == KEYS[0]
    finally:
        a.close()
        b.close()


def test_a_dead_workers_units_are_claimed_again(pg_url: str) -> None:
    a, b = PgRunStore(pg_url), PgRunStore(pg_url)
    try:
        ca = a.unit_claims(DIGEST_A, KEYS[:2], "a")
        assert ca.claim() == KEYS[0] and ca.claim() == KEYS[1]
        cb = b.unit_claims(DIGEST_A, KEYS[:2], "b")
        assert cb.claim() is None
        end(a, pg_url)  # its session ends (as a killed process's does: its socket closes)
        assert [cb.claim(), cb.claim(), cb.claim()] == [KEYS[0], KEYS[1], None]
    finally:
        a.close()
        b.close()


def test_an_expired_lease_is_claimed_again_and_renewal_keeps_it(pg_url: str) -> None:
    a, b = PgRunStore(pg_url), PgRunStore(pg_url)
    try:
        held = a.unit_claims(DIGEST_A, KEYS[:1], "a", lease_s=3600)
        assert held.claim() == KEYS[0]
        held.lease_s = -1.0  # renew "into the past": the lease has run out, the session lives
        held.renew()
        cb = b.unit_claims(DIGEST_A, KEYS[:1], "b")
        assert cb.claim() == KEYS[0]  # a machine cut off loses its units once its lease ends
        held.lease_s = 3600
        held.renew()  # b holds it now: a's renewal does not take it back
        assert held.claim() is None
    finally:
        a.close()
        b.close()
