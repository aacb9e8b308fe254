"""Verified loading reads each record into what its reader keeps as it is verified
(issue 15: analyse at scale), and checks a row's columns with one comparison.

- ``verified_as(..., from_record)`` gives the observations of the records the store's
  own reader returns (a separate query, a separate parse: the reference), in the same
  order, records moved between registration ids and digests included; ``load_runs``
  analyses exactly those.
- ``_row_problems`` finds what the former column-by-column check found, for every typed
  column holding a value of another type and every indexed column disagreeing with the
  body (the former check is kept here as the reference), and nothing on a sound row.
- ``anchor_runs`` (which keeps no record) still refuses a tampered chain and pins
  nothing then.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from prereg.core.errors import IntegrityError
from prereg.core.workspace import Workspace
from prereg.registry.registrations import Registry
from prereg.registry.verify import Problem
from prereg.reports.load import load_runs
from prereg.reports.observations import Obs, from_record
from prereg.runners.record import RunRecord
from prereg.runners.store.interface import INDEXED_COLUMNS, ChainRow, indexed_columns
from prereg.runners.store.sqlite import RunStore
from prereg.runners.store.verify import _row_problems, anchor_runs, verified_as
from tests.integrity.tamper_tools import (
    OTHER_ID,
    PILOT_ID,
    attacker,
    copy_workspace,
    digest_of,
    edited,
    flip_outcome,
    move_records,
    reader_records,
    stored,
)

TEXT = (
    "prev_hash",
    "record_hash",
    "record_id",
    "registration_digest",
    "registration_id",
    "arm",
    "task_id",
    "status",
    "body",
)


def _observed(ws: Path, reg_id: str) -> list[Obs]:
    registry = Registry(ws / "registry")
    observations, heads = verified_as(ws / "runs", registry, registry.get(reg_id), from_record)
    assert heads[digest_of(ws, reg_id)]["count"] > 0
    return observations


def test_observations_are_those_of_the_stored_records(ran_template: Path) -> None:
    for reg_id in (PILOT_ID, OTHER_ID):
        reference = [from_record(r) for r in reader_records(ran_template, reg_id)]
        assert reference  # the comparison is not vacuous
        assert _observed(ran_template, reg_id) == reference


def test_records_moved_between_ids_and_digests(ran_template: Path, tmp_path: Path) -> None:
    ws = copy_workspace(ran_template, tmp_path / "ws")
    move_records(ws)
    for reg_id in (PILOT_ID, OTHER_ID):
        observed = _observed(ws, reg_id)
        assert observed == [from_record(r) for r in reader_records(ws, reg_id)]
        assert {"moved-0000", "moved-0001"} & {o.record_id for o in observed}


def test_load_runs_uses_every_stored_record(ran_template: Path) -> None:
    ws = Workspace(ran_template)
    registry = Registry(ws.registry)
    loaded = load_runs(ws, registry, registry.get(PILOT_ID))
    reference = [from_record(r) for r in reader_records(ran_template, PILOT_ID)]
    assert loaded.records == len(reference)
    assert list(loaded.used) + list(loaded.infra) == [o for o in reference if o.ok] + [
        o for o in reference if not o.ok
    ]


# -- the row check, against the former one ------------------------------------------


def _former_row_problems(row: ChainRow, where: str) -> tuple[list[Problem], RunRecord | None]:
    """The row check as it was before issue 15's fast path (the reference)."""
    wrong = [name for name in TEXT if type(getattr(row, name)) is not str]
    wrong += [n for n in ("seq", "chain_index", "repeat") if type(getattr(row, n)) is not int]
    if row.success is not None and type(row.success) is not int:
        wrong.append("success")
    if row.cost_usd is not None and type(row.cost_usd) is not float:
        wrong.append("cost_usd")
    if wrong:
        message = f"column(s) {', '.join(wrong)} hold a value of another type"
        return [Problem("runs-record", where, message)], None
    try:
        record = RunRecord.model_validate_json(row.body)
    except ValidationError:
        return [Problem("runs-record", where, "the stored record is not a valid run record")], None
    stated = tuple(getattr(row, name) for name in INDEXED_COLUMNS)
    actual = indexed_columns(record)
    differing = [name for name, a, b in zip(INDEXED_COLUMNS, stated, actual, strict=True) if a != b]
    if differing:
        message = f"the row's column(s) {', '.join(differing)} disagree with its record"
        return [Problem("runs-record", where, message)], record
    return [], record


@pytest.fixture(scope="module")
def rows(ran_template: Path) -> list[ChainRow]:
    with RunStore(ran_template / "runs") as store:
        found = store.chain_rows(digest_of(ran_template, PILOT_ID))
    # both nulls and values of the nullable columns, so every sound type pattern is seen
    assert {r.success is None for r in found} >= {False}
    return found


def _same_check(row: ChainRow) -> None:
    found, record = _row_problems(row, "here")
    expected, reference = _former_row_problems(row, "here")
    assert found == expected
    assert record == reference


#: values of other types than a column's (bool is not int, int is not float)
OTHER_TYPES: list[Any] = [None, 1, True, 2.5, "x", b"x"]


def test_sound_rows_pass(rows: list[ChainRow]) -> None:
    for row in rows:
        found, record = _row_problems(row, "here")
        assert found == [] and record == RunRecord.model_validate_json(row.body)
    for row in rows[:3]:  # nullable columns null, and cost set, on a sound row
        _same_check(replace(row, success=None, cost_usd=None))
        _same_check(replace(row, cost_usd=0.5))


@pytest.mark.parametrize("column", [*TEXT, "seq", "chain_index", "repeat", "success", "cost_usd"])
def test_mistyped_columns_are_named_as_before(rows: list[ChainRow], column: str) -> None:
    row = rows[0]
    for value in OTHER_TYPES:
        _same_check(replace(row, **{column: value}))
        _same_check(replace(row, **{column: value, "arm": 7}))  # two columns at once


def _disagreeing(row: ChainRow, column: str) -> Any:
    """A value of the column's own type that is not the body's."""
    changed = {"repeat": row.repeat + 1, "success": 1 - int(row.success or 0), "cost_usd": 0.25}
    return changed.get(column, f"{getattr(row, column)}-x")


@pytest.mark.parametrize("column", INDEXED_COLUMNS)
def test_disagreeing_columns_are_named_as_before(rows: list[ChainRow], column: str) -> None:
    row = next(r for r in rows if r.success is not None and r.cost_usd is None)
    found, _ = _row_problems(replace(row, **{column: _disagreeing(row, column)}), "here")
    assert len(found) == 1 and column in found[0].message
    _same_check(replace(row, **{column: _disagreeing(row, column)}))
    both = {column: _disagreeing(row, column), "task_id": "elsewhere"}
    _same_check(replace(row, **both))


def test_anchor_runs_refuses_a_tampered_chain(ran_template: Path, tmp_path: Path) -> None:
    ws = copy_workspace(ran_template, tmp_path / "ws")
    registry = Registry(ws / "registry")
    entry = registry.get(PILOT_ID)
    before = registry.anchors(entry.digest)
    with attacker(ws, "TRIGGER records_no_update") as conn:
        seq, record = stored(conn, entry.digest)[3]
        body = edited(flip_outcome(record)).model_dump_json()
        conn.execute("UPDATE records SET body = ? WHERE seq = ?", (body, seq))
    with pytest.raises(IntegrityError):
        anchor_runs(ws / "runs", registry, entry)
    assert Registry(ws / "registry").anchors(entry.digest) == before
