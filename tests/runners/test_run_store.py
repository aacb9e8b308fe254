"""The run store: append-only, one ok record per unit, infra errors retryable."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from run_helpers import DIGEST_A, DIGEST_B

from prereg.runners.record import RunRecord
from prereg.runners.store import DuplicateRecord, RunStore


def test_append_and_read_back(tmp_path: Path, make_record: Callable[..., RunRecord]) -> None:
    store = RunStore(tmp_path / "runs")
    a = make_record(task_id="t001")
    b = make_record(task_id="t002", registration_digest=DIGEST_B, registration_id="reg-2")
    a = store.append(a)
    b = store.append(b)
    # each digest starts its own chain at link 0, after the registration digest
    assert a.chain is not None and (a.chain.index, a.chain.prev) == (0, DIGEST_A)
    assert b.chain is not None and (b.chain.index, b.chain.prev) == (0, DIGEST_B)
    assert store.records() == [a, b]
    assert store.records(registration_digest=DIGEST_B) == [b]
    assert store.records(registration_id="reg-1") == [a]
    assert store.completed_keys(DIGEST_A) == {("baseline", "t001", 0)}
    assert (tmp_path / "runs" / "runs.sqlite").is_file()
    # a fresh handle sees the same data (it was committed, not buffered)
    assert RunStore(tmp_path / "runs").records() == [a, b]


def test_wal_mode(tmp_path: Path, make_record: Callable[..., RunRecord]) -> None:
    store = RunStore(tmp_path)
    store.append(make_record())
    conn = sqlite3.connect(tmp_path / "runs.sqlite")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_update_and_delete_are_refused(
    tmp_path: Path, make_record: Callable[..., RunRecord]
) -> None:
    store = RunStore(tmp_path)
    store.append(make_record())
    store.close()
    conn = sqlite3.connect(tmp_path / "runs.sqlite")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        conn.execute("UPDATE records SET status = 'infra_error'")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        conn.execute("DELETE FROM records")
    conn.rollback()
    assert len(RunStore(tmp_path).records()) == 1


def test_second_ok_record_for_a_unit_is_refused(
    tmp_path: Path, make_record: Callable[..., RunRecord]
) -> None:
    store = RunStore(tmp_path)
    store.append(make_record())
    with pytest.raises(DuplicateRecord):
        store.append(make_record())
    # the same unit under another digest is another unit
    store.append(make_record(registration_digest=DIGEST_B))
    assert len(store.records()) == 2


def test_infra_errors_are_kept_and_do_not_block_a_retry(
    tmp_path: Path, make_record: Callable[..., RunRecord]
) -> None:
    store = RunStore(tmp_path)
    failed = dict(status="infra_error", success=None, error="connection reset")
    store.append(make_record(**failed))
    store.append(make_record(**failed))
    assert store.completed_keys(DIGEST_A) == set()
    store.append(make_record())
    assert store.completed_keys(DIGEST_A) == {("baseline", "t001", 0)}
    statuses = [r.status for r in store.records()]
    assert statuses == ["infra_error", "infra_error", "ok"]
    assert len(store.records(status="ok")) == 1


def test_same_record_id_twice_is_a_duplicate(
    tmp_path: Path, make_record: Callable[..., RunRecord]
) -> None:
    store = RunStore(tmp_path)
    rec = make_record(status="infra_error", success=None, error="x")
    store.append(rec)
    assert store.extend([rec, make_record(task_id="t9")]) == (1, 1)


def test_reading_a_missing_store_creates_nothing(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs")
    assert store.records() == [] and store.completed_keys(DIGEST_A) == set()
    assert not (tmp_path / "runs").exists()


def test_spent(tmp_path: Path, make_record: Callable[..., RunRecord]) -> None:
    store = RunStore(tmp_path)
    common = dict(driver="x", evidence_class="api")
    store.append(make_record(task_id="a", cost_usd=0.25, **common))
    store.append(make_record(task_id="b", cost_usd=None, **common))
    store.append(
        make_record(
            task_id="c", cost_usd=0.5, status="infra_error", success=None, error="timeout", **common
        )
    )
    assert store.spent_usd(DIGEST_A) == pytest.approx(0.75)


def test_record_invariants(make_record: Callable[..., RunRecord]) -> None:
    with pytest.raises(ValueError, match="parent"):
        make_record(funnel={"surfaced": False, "selected": True})
    with pytest.raises(ValueError, match="terminal flag"):
        make_record(success=False, first_unmet_obligation="final_state")
    with pytest.raises(ValueError, match="no success verdict"):
        make_record(status="infra_error", error="x", success=False)
    with pytest.raises(ValueError, match="replay"):
        make_record(latency_ms=3.0)
    with pytest.raises(ValueError, match="registration_digest"):
        make_record(registration_digest="sha256:abc")
    # null parents are allowed (a stage the host does not report)
    make_record(funnel={"surfaced": None, "selected": True, "invoked": True})


def test_two_writers_cannot_both_complete_a_unit(
    tmp_path: Path, make_record: Callable[..., RunRecord]
) -> None:
    # two processes running the same registration share the file; the database decides
    first, second = RunStore(tmp_path), RunStore(tmp_path)
    first.append(make_record())
    with pytest.raises(DuplicateRecord):
        second.append(make_record())
    assert len(RunStore(tmp_path).records()) == 1


def test_csv_round_trip_of_every_field_kind(make_record: Callable[..., RunRecord]) -> None:
    from prereg.runners.exchange import from_row, to_row

    rec = make_record(
        driver="anthropic",
        evidence_class="api",
        model_requested="m",
        model_returned="m-2",
        latency_ms=12.5,
        cost_usd=0.003,
        tokens={"input": 10, "output": 3, "reasoning": None, "cached": 0},
        funnel={
            "surfaced": None,
            "selected": True,
            "invoked": False,
            "executed": False,
            "completed": False,
        },
        success=False,
        terminal_flag="call_limit",
        first_unmet_obligation="final_state",
        terminal_class="focal",
        oracles={"final_state": False, "answer": None},
        selected_operations=["a", "b"],
        selection_rate=0.5,
        trace=[{"kind": "tool_call", "turn": 0, "tool": "x", "arguments": {"q": 'a,"b"\n'}}],
        batch=True,
    )
    back = RunRecord.model_validate(from_row(to_row(rec)))
    assert back == rec
