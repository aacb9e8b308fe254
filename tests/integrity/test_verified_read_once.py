"""Verified loading validates each record once (issue 15: analyse at scale).

``verified_records`` hands on the records its chain check validated instead of reading
the store a second time. What it returns must be what the store's own reader returns
for the same filter (the reference: a separate query, a separate parse), in the same
order: the records filed under the registration's id in write order, then its digest's
records filed under another id. And ``from_record``'s path for a validated record must
give the same observation as its generic path (field by field, model or mapping), and a
pinned link read through only the fields an observation reads the same observation as
its validated record.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from prereg.registry.registrations import Registry
from prereg.reports.observations import _from_any, from_record, pinned_observation
from prereg.runners.record import Offer, OfferedServer, RunRecord, TraceEvent
from prereg.runners.store import verify as verify_runs
from prereg.runners.store.interface import indexed_columns
from prereg.runners.store.sqlite import RunStore
from prereg.runners.store.verify import verified_as, verified_records
from tests.integrity.tamper_tools import (
    OTHER_ID,
    PILOT_ID,
    copy_workspace,
    digest_of,
    move_records,
    reader_records,
)


def _verified(ws: Path, reg_id: str) -> list[RunRecord]:
    registry = Registry(ws / "registry")
    records, heads = verified_records(ws / "runs", registry, registry.get(reg_id))
    assert heads[digest_of(ws, reg_id)]["count"] > 0
    return records


def test_verified_records_are_the_stored_records_in_order(ran_template: Path) -> None:
    for reg_id in (PILOT_ID, OTHER_ID):
        reference = reader_records(ran_template, reg_id)
        assert reference  # the comparison is not vacuous
        assert _verified(ran_template, reg_id) == reference


def test_records_moved_between_ids_and_digests(ran_template: Path, tmp_path: Path) -> None:
    """A record filed under the pilot's id with the other digest (read by id), and one
    of the pilot's digest filed under the other id (read by digest): both returned, in
    the order the reader's two queries give (the analysis then names them as foreign)."""
    ws = copy_workspace(ran_template, tmp_path / "ws")
    move_records(ws)
    for reg_id in (PILOT_ID, OTHER_ID):
        verified = _verified(ws, reg_id)
        assert verified == reader_records(ws, reg_id)
        assert {"moved-0000", "moved-0001"} & {r.record_id for r in verified}


def test_observation_of_a_record_is_the_generic_one(ran_template: Path) -> None:
    with RunStore(ran_template / "runs") as store:
        records = store.records()
    first = records[0]
    traced = first.model_copy(
        update={
            "trace": [
                TraceEvent(kind="search", turn=0, surfaced=["b", "a"]),
                TraceEvent(kind="search", turn=1, surfaced=None),
                TraceEvent(kind="search", turn=1, surfaced=["c"]),
                TraceEvent(kind="tool_call", turn=2, tool="a", arguments={"x": [1, 2.5]}),
                TraceEvent(kind="tool_call", turn=3, tool="b", arguments=None),
            ],
            "offer": Offer(
                control="placebo",
                servers=[
                    OfferedServer(key="s", surface="s", role="focal", name="s", digest="d", tools=3)
                ],
                first_server="s",
            ),
            "selection_rate": 0.5,
            "cost_usd": 0.25,
        }
    )
    searched = first.model_copy(
        update={"trace": [TraceEvent(kind="search", turn=0, surfaced=["z"])]}
    )
    for record in [*records, traced, searched]:
        assert from_record(record) == _from_any(record)
        assert from_record(record) == from_record(record.model_dump(mode="json"))
    # runs whose offer blocks are equal share one block (read-only data), others do not
    twin = RunRecord.model_validate_json(
        traced.model_copy(update={"record_id": "twin-0001"}).model_dump_json()
    )
    other = traced.model_copy(
        update={"offer": traced.offer.model_copy(update={"first_server": None})}  # type: ignore[union-attr]
    )
    a, b, c = (from_record(r) for r in (traced, twin, other))
    assert a.offer is b.offer and a.offer == traced.offer.model_dump(mode="json")  # type: ignore[union-attr]
    assert c.offer is not a.offer and c.offer == other.offer.model_dump(mode="json")  # type: ignore[union-attr]
    assert a.arm is b.arm and a.digest is b.digest  # parsed apart, yet one string: interned
    # and one funnel block, one set of surfaced tools (equal data, one object)
    assert a.funnel is b.funnel and a.funnel == traced.funnel.model_dump()
    assert a.surfaced_tools is b.surfaced_tools and a.surfaced_tools == {"a", "b", "c"}


def _bodies_without_defaults(record: RunRecord) -> list[str]:
    """``record``'s body, then with each field the schema defaults left out in turn (in
    the record and in its trace events): what an older record may hold."""
    full = record.model_dump(mode="json", exclude={"chain"})
    bodies = [json.dumps(full)]
    for name, info in RunRecord.model_fields.items():
        if name in full and not info.is_required():
            bodies.append(json.dumps({k: v for k, v in full.items() if k != name}))
    for name, info in TraceEvent.model_fields.items():
        if not info.is_required() and full["trace"]:
            trace = [{k: v for k, v in e.items() if k != name} for e in full["trace"]]
            bodies.append(json.dumps({**full, "trace": trace}))
    return bodies


def test_pinned_observation_is_the_validated_one(ran_template: Path) -> None:
    """A pinned link is read through the fields an observation reads
    (:func:`pinned_observation`): the same columns and observation as the validated
    record gives, for every stored record and for bodies without the defaulted fields;
    a read field of the wrong type is refused (ValueError), an unread one is not read."""
    with RunStore(ran_template / "runs") as store:
        records = store.records()
    traced = records[0].model_copy(
        update={
            "trace": [
                TraceEvent(kind="search", turn=0, surfaced=["b", "a"]),
                TraceEvent(kind="tool_call", turn=1, tool="a", arguments={"x": [1, 2.5]}),
            ],
            "selection_rate": 0.5,
            "cost_usd": 0.25,
        }
    )
    compared = 0
    for record in [*records, traced]:
        for body in (
            _bodies_without_defaults(record)
            if record is traced
            else [record.model_dump_json(exclude={"chain"})]
        ):
            try:
                validated = RunRecord.model_validate_json(body)
            except ValidationError:
                continue  # left out a field another one needs (a failed run's flag, say)
            assert pinned_observation(body) == (indexed_columns(validated), from_record(validated))
            compared += 1
    assert compared > len(records) + 10
    body = json.loads(traced.model_dump_json())
    with pytest.raises(ValueError):
        pinned_observation(json.dumps({**body, "repeat": "first"}))
    with pytest.raises(ValueError):
        pinned_observation(json.dumps({**body, "funnel": {"surfaced": False, "selected": True}}))
    pinned_observation(json.dumps({**body, "calls": "many"}))  # not read, not validated
    # the funnel and offer are decoded once per distinct text: the same object for every
    # run with the same text, and a text never seen is checked even after a valid one
    first, again = (pinned_observation(json.dumps({**body, "repeat": i}))[1] for i in (3, 4))
    assert first.funnel is again.funnel and first.offer is again.offer
    with pytest.raises(ValueError):
        pinned_observation(json.dumps({**body, "funnel": {**body["funnel"], "surfaced": 0}}))


def test_the_anchored_chain_is_read_without_validating_records_again(
    ran_template: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loading the anchored pilot validates no whole record (every link is pinned, so
    :func:`pinned_observation` reads it), and gives the observations the full check gives."""
    registry = Registry(ran_template / "registry")
    entry = registry.get(PILOT_ID)
    full, _ = verified_as(ran_template / "runs", registry, entry, from_record)
    validated: list[str] = []
    row_problems = verify_runs._row_problems
    monkeypatch.setattr(
        verify_runs,
        "_row_problems",
        lambda row, where: validated.append(row.record_id) or row_problems(row, where),
    )
    read, _ = verified_as(
        ran_template / "runs", registry, entry, from_record, read_pinned=pinned_observation
    )
    assert validated == [] and read == full and len(read) == 168
