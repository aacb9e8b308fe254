"""The run store: append-only, one ok record per unit, infra errors retryable."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import cast

import pytest
from pydantic import ValidationError
from run_helpers import DIGEST_A, DIGEST_B

from prereg.runners.record import RunRecord
from prereg.runners.store import sqlite as store_module
from prereg.runners.store.sqlite import MMAP_BYTES, DuplicateRecord, RunStore, connect_readonly


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


def test_a_new_stores_schema_appears_all_at_once(
    tmp_path: Path, make_record: Callable[..., RunRecord], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Workers start together: one opening the store while another creates it must see
    no table or the table with its indexes and triggers, never the table alone (it
    would refuse that as a store whose triggers were dropped). Looked at from a second
    connection while the creator is between its statements."""
    path = tmp_path / "runs.sqlite"
    seen: list[int] = []
    real = store_module.connect_wal

    def traced(where: Path, schema: str) -> sqlite3.Connection:
        conn = real(where, schema)

        def look(statement: str) -> None:
            if statement.lstrip().startswith("CREATE TRIGGER") and not seen:
                other = sqlite3.connect(path)
                query = "SELECT count(*) FROM sqlite_master WHERE tbl_name = 'records'"
                seen.append(other.execute(query).fetchone()[0])
                other.close()

        conn.set_trace_callback(look)
        return conn

    monkeypatch.setattr(store_module, "connect_wal", traced)
    store = RunStore(tmp_path)
    store.append(make_record())
    assert seen == [0]  # mid-creation: nothing visible yet
    assert store.schema_drift() == []
    store.close()


def _open_new_store(folder: Path) -> int:
    """In a forked child: open ``folder``'s store to write; 0 when its schema is whole."""
    try:
        store = RunStore(folder)
        conn = store._connect(create=True)
        sound = conn is not None and store.schema_drift() == []
        store.close()
        return 0 if sound else 2
    except Exception:  # noqa: BLE001 - the exit code is the answer
        return 1


def test_processes_opening_a_new_store_together_all_get_it_whole(tmp_path: Path) -> None:
    """Really started processes (as ``--workers`` forks them), six at a time on a new
    store, forty times: none is refused ("database is locked" on the change to WAL
    mode, a table seen without its triggers). Before the fixes about one open in fifty
    failed here, so this fails almost always if either race is back."""
    codes = []
    for round_ in range(40):
        folder = tmp_path / f"store-{round_}"
        pids = []
        for _ in range(6):
            pid = os.fork()
            if pid == 0:
                os._exit(_open_new_store(folder))
            pids.append(pid)
        codes += [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids]
    assert codes == [0] * len(codes)


def test_a_change_to_wal_mode_refused_as_locked_is_tried_again() -> None:
    """SQLite refuses a racing journal-mode change at once; anything else is raised."""

    class Refusing:
        def __init__(self, refusals: int, message: str) -> None:
            self.calls, self.refusals, self.message = 0, refusals, message

        def execute(self, sql: str) -> None:
            self.calls += 1
            if self.calls <= self.refusals:
                raise sqlite3.OperationalError(self.message)

    locked = Refusing(3, "database is locked")
    store_module.wal_mode(cast(sqlite3.Connection, locked))
    assert locked.calls == 4
    broken = Refusing(1, "disk I/O error")
    with pytest.raises(sqlite3.OperationalError, match="disk I/O"):
        store_module.wal_mode(cast(sqlite3.Connection, broken))
    assert broken.calls == 1


def test_reads_go_through_a_memory_map_and_see_what_another_writer_appends(
    tmp_path: Path, make_record: Callable[..., RunRecord]
) -> None:
    """Both kinds of connection map the file for reading (``analyse`` reads a large
    store whole; SQLite caps the size at its build's maximum, which must not be 0 here),
    and a reader's map shows what another connection appended after it opened."""
    writer = RunStore(tmp_path)
    first = writer.append(make_record(task_id="t001"))
    reader = RunStore(tmp_path)
    assert reader.records() == [first]
    second = writer.append(make_record(task_id="t002"))
    assert reader.records() == [first, second]
    path = tmp_path / "runs.sqlite"
    for conn in (reader._conn, connect_readonly(path)):
        assert conn is not None
        assert conn.execute("PRAGMA mmap_size").fetchone()[0] == MMAP_BYTES
    writer.close()
    reader.close()


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


def test_a_record_time_without_a_utc_offset_is_refused_not_a_crash(
    make_record: Callable[..., RunRecord],
) -> None:
    """An edit that drops one timestamp's offset (a byte flipped in an export: found by
    the tamper property test) is a ValidationError, which readers turn into a refusal;
    Python's own comparison would raise TypeError, which they do not catch."""
    good = make_record().model_dump(mode="json")
    assert good["finished_at"].endswith("Z")
    for field in ("started_at", "finished_at"):
        edited = {**good, field: good[field].removesuffix("Z")}
        with pytest.raises(ValidationError, match="UTC offset"):
            RunRecord.model_validate(edited)
        with pytest.raises(ValidationError, match="UTC offset"):
            RunRecord.model_validate_json(json.dumps(edited))
    both = {k: good[k].removesuffix("Z") for k in ("started_at", "finished_at")}
    with pytest.raises(ValidationError, match="UTC offset"):  # instants, or not a record
        RunRecord.model_validate({**good, **both})
    RunRecord.model_validate({**good, "started_at": good["started_at"][:-1] + "+02:00"})


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
    from prereg.runners.exchange.rows import from_row, to_row

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
