"""Parquet exports carry typed columns (issue 43, item 6).

Read with pyarrow directly (not prereg's reader) and checked against the JSON Lines export
of the same store, parsed with ``json`` and ``datetime``: timestamps are Arrow timestamps
(UTC, tz-aware), lists are Arrow lists, objects of a fixed shape are structs, obligations a
map, and only values whose shape varies per record (a tool call's arguments and result, a
configuration's params) are JSON text. A record with a non-UTC offset and empty strings
round-trips exactly, and a file in the earlier text form (``run-records/1``) still imports.
"""

from __future__ import annotations

import datetime as dt
import io
import json
from pathlib import Path
from typing import Any

import pytest

from prereg.runners.exchange import parquet as parquet_export
from prereg.runners.exchange.rows import BOOL_COLUMNS, FLOAT_COLUMNS, INT_COLUMNS, to_row
from prereg.runners.exchange.text_formats import read_records
from prereg.runners.record import EXPORT_COLUMNS, RunRecord
from tests.exchange.conftest import REG_ID, prereg

pa = pytest.importorskip("pyarrow", reason="needs prereg-agents[parquet] (dev extra)")
pq = pytest.importorskip("pyarrow.parquet")


@pytest.fixture(scope="module")
def table(ran: Path) -> Any:
    out = ran.parent / "typed.parquet"
    code, text = prereg("-w", ran, "export", REG_ID, "--out", out, "-f", "parquet", "--force")
    assert code == 0, text
    return pq.read_table(out)


def test_times_are_utc_timestamps(table: Any, jsonl_export: list[dict[str, Any]]) -> None:
    for column in ("started_at", "finished_at"):
        kind = table.schema.field(column).type
        assert pa.types.is_timestamp(kind) and kind.tz == "UTC" and kind.unit == "us"
        values = table.column(column).to_pylist()
        expected = [dt.datetime.fromisoformat(r[column]) for r in jsonl_export]
        assert values == expected  # equal instants (aware datetimes compare by instant)
        assert all(v.utcoffset() == dt.timedelta(0) for v in values)
        offsets = table.column(column + "_utc_offset_s").to_pylist()
        assert offsets == [int(e.utcoffset().total_seconds()) for e in expected]


def test_lists_are_list_columns(table: Any, jsonl_export: list[dict[str, Any]]) -> None:
    operations = table.schema.field("selected_operations").type
    assert pa.types.is_list(operations) and pa.types.is_string(operations.value_type)
    assert table.column("selected_operations").to_pylist() == [
        r["selected_operations"] for r in jsonl_export
    ]
    trace = table.schema.field("trace").type
    assert pa.types.is_list(trace) and pa.types.is_struct(trace.value_type)
    event = trace.value_type
    assert pa.types.is_integer(event.field("turn").type)
    assert pa.types.is_struct(event.field("usage").type)
    assert pa.types.is_list(event.field("operations").type)
    assert pa.types.is_string(event.field("arguments").type)  # JSON text: varies per call
    rows = table.column("trace").to_pylist()
    calls = 0
    for events, record in zip(rows, jsonl_export, strict=True):
        assert [e["kind"] for e in events] == [e["kind"] for e in record["trace"]]
        assert [e["turn"] for e in events] == [e["turn"] for e in record["trace"]]
        for got, want in zip(events, record["trace"], strict=True):
            if want["arguments"] is None:
                assert got["arguments"] is None
            else:
                assert json.loads(got["arguments"]) == want["arguments"]
                calls += 1
            assert got["usage"] == want["usage"]
            assert got["operations"] == want["operations"]
    assert calls > 0  # the run made tool calls, so the arguments were checked


def test_objects_are_structs_or_maps(table: Any, jsonl_export: list[dict[str, Any]]) -> None:
    schema = table.schema
    chain = schema.field("chain").type
    assert pa.types.is_struct(chain) and pa.types.is_integer(chain.field("index").type)
    assert table.column("chain").to_pylist() == [r["chain"] for r in jsonl_export]
    config = schema.field("config").type
    assert pa.types.is_struct(config)
    assert pa.types.is_struct(config.field("budgets").type)
    assert pa.types.is_string(config.field("params").type)  # JSON text: varies per host
    for got, record in zip(table.column("config").to_pylist(), jsonl_export, strict=True):
        want = record["config"]
        assert got["digest"] == want["digest"] and got["driver"] == want["driver"]
        assert got["budgets"] == want["budgets"]
        assert json.loads(got["params"]) == want["params"]
    offer = schema.field("offer").type
    assert pa.types.is_struct(offer) and pa.types.is_list(offer.field("servers").type)
    assert pa.types.is_map(schema.field("obligations").type)
    assert pa.types.is_boolean(schema.field("success").type)
    assert pa.types.is_floating(schema.field("latency_ms").type)
    assert schema.metadata[b"prereg.format"] == b"run-records/2"


def _record(**changes: Any) -> RunRecord:
    data: dict[str, Any] = {
        "record_id": "0123456789abcdef",
        "registration_id": "reg",
        "registration_digest": "sha256:" + "a" * 64,
        "experiment": "exp",
        "arm": "a",
        "surface": "s",
        "task_id": "t1",
        "intent": "",
        "cluster": "c",
        "split": "dev",
        "polarity": "positive",
        "repeat": 0,
        "rotation": 0,
        "driver": "openai-chat",
        "evidence_class": "api",
        "model_requested": "",
        "started_at": "2026-03-01T09:15:00.250000+05:30",
        "finished_at": "2026-03-01T04:00:01Z",
        "success": True,
        "selected_operations": ["", "b"],
        "trace": [
            {"kind": "tool_call", "turn": 0, "tool": "t", "arguments": {"q": [1, 2.5, None]}},
            {"kind": "tool_result", "turn": 0, "result": "plain text"},
        ],
        "obligations": None,
    }
    data.update(changes)
    return RunRecord.model_validate(data)


def test_offsets_and_empty_strings_round_trip(tmp_path: Path) -> None:
    record = _record()
    data, n = parquet_export.render_parquet([record])
    assert n == 1
    path = tmp_path / "one.parquet"
    path.write_bytes(data)
    read = pq.read_table(path).to_pylist()[0]
    assert read["started_at"] == dt.datetime(2026, 3, 1, 3, 45, 0, 250000, tzinfo=dt.UTC)
    assert read["started_at_utc_offset_s"] == 5 * 3600 + 30 * 60
    assert read["finished_at_utc_offset_s"] == 0
    assert read["intent"] == "" and read["model_requested"] == ""  # not null, unlike CSV
    assert read["model_returned"] is None
    assert read["trace"][1]["result"] == '"plain text"'  # JSON text of a string
    [(_, back)] = read_records(path)
    assert back.model_dump(mode="json") == record.model_dump(mode="json")
    assert back.model_dump(mode="json")["started_at"] == "2026-03-01T09:15:00.250000+05:30"


def _text_format_file(records: list[RunRecord]) -> bytes:
    """A file as prereg wrote it before the typed columns (``run-records/1``): the CSV
    cells, typed only as booleans, integers and doubles."""

    def kind(column: str) -> Any:
        if column in BOOL_COLUMNS:
            return pa.bool_()
        if column in INT_COLUMNS:
            return pa.int64()
        if column in FLOAT_COLUMNS:
            return pa.float64()
        return pa.string()

    def cell(column: str, text: str) -> Any:
        if text == "":
            return None
        if column in BOOL_COLUMNS:
            return text == "true"
        if column in INT_COLUMNS:
            return int(text)
        if column in FLOAT_COLUMNS:
            return float(text)
        return text

    rows = [to_row(r) for r in records]
    schema = pa.schema(
        [pa.field(c, kind(c)) for c in EXPORT_COLUMNS],
        metadata={b"prereg.format": b"run-records/1"},
    )
    table = pa.Table.from_pydict({c: [cell(c, r[c]) for r in rows] for c in EXPORT_COLUMNS}, schema)
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def test_a_file_in_the_earlier_text_form_still_imports(tmp_path: Path) -> None:
    record = _record(intent="i", model_requested="m")  # CSV cells: no empty strings
    path = tmp_path / "old.parquet"
    path.write_bytes(_text_format_file([record]))
    [(_, back)] = read_records(path)
    assert back.model_dump(mode="json") == record.model_dump(mode="json")


def test_every_trace_and_config_field_has_a_parquet_field() -> None:
    """The schema is derived from the record model: no field is dropped on the way."""
    from prereg.runners.record import Configuration, Offer, TraceEvent

    schema = parquet_export.schema(pa)
    event = schema.field("trace").type.value_type
    assert {event.field(i).name for i in range(event.num_fields)} == set(TraceEvent.model_fields)
    config = schema.field("config").type
    assert {config.field(i).name for i in range(config.num_fields)} == set(
        Configuration.model_fields
    )
    offer = schema.field("offer").type
    assert {offer.field(i).name for i in range(offer.num_fields)} == set(Offer.model_fields)
