"""``prereg export --format parquet`` and its import (optional extra ``prereg-agents[parquet]``).

The columns are the CSV export's (:data:`prereg.runners.record.EXPORT_COLUMNS`), typed
as the run record types them, so a query engine (pyarrow, pandas, DuckDB, Polars) reads
them without parsing text:

- booleans, 64-bit integers, doubles and strings; null where the record has null (an
  empty string stays an empty string, unlike CSV);
- ``started_at`` and ``finished_at``: ``timestamp[us, tz=UTC]``, the instant; the UTC
  offset the record stated goes beside it in ``started_at_utc_offset_s`` and
  ``finished_at_utc_offset_s`` (seconds, int32), so the record reads back as written
  (its chain hash covers the offset's spelling);
- lists (``selected_operations``, ``trace``, an offer's ``servers``, a trace event's
  ``operations``): Arrow list columns;
- nested objects of a fixed shape (a trace event, its ``usage``, ``offer``, ``config``
  and its ``budgets``, ``chain``): structs, whose fields are the record model's;
- ``obligations`` (name to true, false or null): ``map<string, bool>``;
- values whose shape varies per record: a trace event's ``arguments`` and ``result``, a
  configuration's ``params``: JSON text (null stays null).

The schema is derived from the record model (:func:`schema`), so a field added to the
model is a column or struct field here without an edit. A file written before the typed
columns (schema metadata ``run-records/1``: text for lists and times) still reads, through
the CSV reader's conversion. :func:`read_parquet_rows` gives each row as the record's
JSON fields, which ``prereg import`` checks against the row's chain link before
validating it (:mod:`.importing`).
"""

from __future__ import annotations

import datetime as dt
import io
import json
import types
import typing
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from pydantic import BaseModel, TypeAdapter, ValidationError

from prereg.core.errors import BadInput
from prereg.core.files import write_atomic
from prereg.core.safeio import MAX_EXCHANGE_BYTES, read_input
from prereg.runners.exchange import rows as record_rows
from prereg.runners.extras import missing_extra
from prereg.runners.record import EXPORT_COLUMNS, Funnel, Oracles, RunRecord, Tokens

if TYPE_CHECKING:
    import pyarrow as pa

#: Stored in the file's schema metadata: what wrote it, so a reader can tell.
FORMAT_KEY = b"prereg.format"
FORMAT_VALUE = b"run-records/2"
#: The earlier format: the CSV cells, with lists, objects and times as text.
TEXT_FORMAT_VALUE = b"run-records/1"

#: The instants, typed as timestamps, each with its stated UTC offset in a column beside it.
TIME_COLUMNS = ("started_at", "finished_at")
OFFSET_SUFFIX = "_utc_offset_s"
OFFSET_COLUMNS = tuple(c + OFFSET_SUFFIX for c in TIME_COLUMNS)

_INSTANT = TypeAdapter(dt.datetime)

# A column's shape, derived from the record model: ("scalar", arrow type), ("json",),
# ("list", item), ("map", value type), ("struct", model, {field: shape}) or ("time",).
Shape = tuple[Any, ...]


def require() -> tuple[Any, Any]:
    """(pyarrow, pyarrow.parquet), or exit 2 naming the extra."""
    try:
        import pyarrow  # lazy: optional extra prereg-agents[parquet]
        import pyarrow.parquet  # lazy: optional extra prereg-agents[parquet]
    except ImportError as exc:
        raise missing_extra("parquet", "the Parquet format", exc) from None
    return pyarrow, pyarrow.parquet


def _without_none(annotation: Any) -> Any:
    """``X`` of ``X | None`` (the annotation itself otherwise)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        kept = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(kept) == 1:
            return kept[0]
    return annotation


def _shape(pa: Any, annotation: Any) -> Shape:
    annotation = _without_none(annotation)
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        kinds = {type(v) for v in typing.get_args(annotation)}
        return ("scalar", pa.int64() if kinds == {int} else pa.string())
    if origin is list:
        return ("list", _shape(pa, typing.get_args(annotation)[0]))
    if origin is dict:
        key, value = typing.get_args(annotation)
        inner = _shape(pa, value)
        if key is str and inner[0] == "scalar":
            return ("map", inner[1])
        return ("json",)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        fields = {n: _shape(pa, f.annotation) for n, f in annotation.model_fields.items()}
        return ("struct", annotation, fields)
    if annotation is dt.datetime:
        return ("time",)
    scalars = {bool: pa.bool_(), int: pa.int64(), float: pa.float64(), str: pa.string()}
    if annotation in scalars:
        return ("scalar", scalars[annotation])
    return ("json",)  # Any: the shape varies per record


def _arrow(pa: Any, shape: Shape) -> pa.DataType:
    kind = shape[0]
    if kind == "scalar":
        return shape[1]
    if kind == "json":
        return pa.string()
    if kind == "time":
        return pa.timestamp("us", tz="UTC")
    if kind == "list":
        return pa.list_(_arrow(pa, shape[1]))
    if kind == "map":
        return pa.map_(pa.string(), shape[1])
    return pa.struct([pa.field(n, _arrow(pa, s)) for n, s in shape[2].items()])


def _column_shapes(pa: Any) -> dict[str, Shape]:
    """Every export column's shape, from the record model's fields."""
    nested: dict[str, type[BaseModel]] = {"tokens_": Tokens, "oracle_": Oracles}
    shapes: dict[str, Shape] = {}
    for column in EXPORT_COLUMNS:
        prefix = next((p for p in nested if column.startswith(p)), None)
        if prefix is not None:
            field = nested[prefix].model_fields[column.removeprefix(prefix)]
        elif column in record_rows.FUNNEL_COLUMNS:
            field = Funnel.model_fields[column]
        else:
            field = RunRecord.model_fields[column]
        shapes[column] = _shape(pa, field.annotation)
    return shapes


def schema(pa: Any) -> pa.Schema:
    """The Parquet file's Arrow schema: the export columns, each time followed by its offset."""
    fields = []
    for column, shape in _column_shapes(pa).items():
        fields.append(pa.field(column, _arrow(pa, shape)))
        if column in TIME_COLUMNS:
            fields.append(pa.field(column + OFFSET_SUFFIX, pa.int32()))
    return pa.schema(fields, metadata={FORMAT_KEY: FORMAT_VALUE})


def _to_arrow(shape: Shape, value: Any) -> Any:
    """A JSON value of the record as the Python value pyarrow builds ``shape``'s type from."""
    if value is None:
        return None
    kind = shape[0]
    if kind == "json":
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if kind == "time":
        return dt.datetime.fromisoformat(value).astimezone(dt.UTC)
    if kind == "list":
        return [_to_arrow(shape[1], item) for item in value]
    if kind == "map":
        return list(value.items())
    if kind == "struct":
        fields = shape[2]
        extra = set(value) - set(fields)
        if extra:  # the model changed without the schema: never drop a field silently
            raise ValueError(f"{shape[1].__name__}: no Parquet field for {sorted(extra)}")
        return {n: _to_arrow(s, value.get(n)) for n, s in fields.items()}
    return value


#: A struct field a model's serialiser leaves out when null (so the record's JSON, which
#: its chain hash covers, has no such key): the configuration's ``tool_access``.
_OMITTED_WHEN_NULL = {"Configuration": ("tool_access",)}


def _from_arrow(shape: Shape, value: Any) -> Any:
    """A typed Parquet value as the record's JSON value (the inverse of :func:`_to_arrow`);
    a string where a list, map or struct is expected is read as JSON text."""
    if value is None:
        return None
    kind = shape[0]
    if kind == "json" or (kind in ("list", "map", "struct") and isinstance(value, str)):
        return json.loads(value)
    if kind == "list":
        return [_from_arrow(shape[1], item) for item in value]
    if kind == "map":
        return dict(value.items()) if isinstance(value, dict) else dict(value)
    if kind == "struct":
        model, fields = shape[1], shape[2]
        out = {n: _from_arrow(s, value.get(n)) for n, s in fields.items() if n in value}
        for name in _OMITTED_WHEN_NULL.get(model.__name__, ()):
            if out.get(name) is None:
                out.pop(name, None)
        return out
    return value


def _instant_json(value: Any, offset: Any) -> Any:
    """A timestamp cell and its offset cell as the record's JSON text of the instant."""
    if not isinstance(value, dt.datetime):
        return value  # text (a file not written by prereg): validation judges it
    if value.tzinfo is None:  # a naive timestamp column: its values are UTC
        value = value.replace(tzinfo=dt.UTC)
    zone = dt.UTC if not offset else dt.timezone(dt.timedelta(seconds=int(offset)))
    return _INSTANT.dump_python(value.astimezone(zone), mode="json")


def render_parquet(records: Iterable[RunRecord]) -> tuple[bytes, int]:
    """The Parquet file's bytes and the number of records in it."""
    pa, pq = require()
    shapes = _column_shapes(pa)
    columns: dict[str, list[Any]] = {name: [] for name in schema(pa).names}
    n = 0
    for record in records:
        for column, value in record_rows.flatten(record).items():
            columns[column].append(_to_arrow(shapes[column], value))
            if column in TIME_COLUMNS:
                offset = dt.datetime.fromisoformat(value).utcoffset()
                seconds = 0 if offset is None else int(offset.total_seconds())
                columns[column + OFFSET_SUFFIX].append(seconds)
        n += 1
    table = pa.Table.from_pydict(columns, schema=schema(pa))
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue(), n


def write_parquet(records: Iterable[RunRecord], path: Path) -> int:
    """Write records to ``path`` atomically; returns the count."""
    data, n = render_parquet(records)
    write_atomic(Path(path), data, what="the export")
    return n


def write_parquet_to(records: Iterable[RunRecord], stream: BinaryIO) -> int:
    """Write records to a binary stream (``--out -``); refused on a terminal (exit 2)."""
    isatty = getattr(stream, "isatty", None)
    if isatty is not None and isatty():
        raise BadInput(
            "Parquet is binary: --out - writes it only to a pipe or a file, not to a "
            "terminal (redirect standard output, or give --out FILE)",
            field="--out",
        )
    data, n = render_parquet(records)
    stream.write(data)
    stream.flush()
    return n


def _text(value: object) -> str:
    """A value of the earlier text format as the CSV cell :func:`rows.from_row` reads."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)  # float: repr, which round-trips exactly


def read_parquet_rows(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(row number from 1, the record's fields as JSON values) of every row, unvalidated;
    BadInput (exit 2) for a file that is not Parquet, lacks the identifying columns or
    has a column no record has."""
    pa, pq = require()
    # regular files only, bounded: a FIFO or /dev/zero is exit 2, never a hang
    data = read_input(path, limit=MAX_EXCHANGE_BYTES, what="an export file")
    try:
        table = pq.read_table(pa.BufferReader(data))
    except (OSError, pa.ArrowException) as exc:
        raise BadInput(f"not a readable Parquet file ({exc})", file=str(path)) from None
    names = list(table.column_names)
    missing = [c for c in ("record_id", "registration_id", "registration_digest") if c not in names]
    if missing:
        raise BadInput(f"missing column(s) {missing}", file=str(path))
    metadata = table.schema.metadata or {}
    text_format = metadata.get(FORMAT_KEY) == TEXT_FORMAT_VALUE
    known = set(EXPORT_COLUMNS) | (set() if text_format else set(OFFSET_COLUMNS))
    unknown = sorted(set(names) - known)
    if unknown:
        raise BadInput(f"unknown column(s) {unknown}", file=str(path))
    shapes = _column_shapes(pa)
    out: list[tuple[int, dict[str, Any]]] = []
    for number, row in enumerate(table.to_pylist(), start=1):
        try:
            if text_format:
                out.append((number, record_rows.from_row({c: _text(v) for c, v in row.items()})))
                continue
            flat = {
                c: _from_arrow(shapes[c], v)
                for c, v in row.items()
                if c in shapes and c not in TIME_COLUMNS
            }
            for column in TIME_COLUMNS:
                if column in row:
                    flat[column] = _instant_json(row[column], row.get(column + OFFSET_SUFFIX))
            out.append((number, record_rows.nest(flat)))
        except (ValueError, TypeError, AttributeError) as exc:  # JSON text that is not JSON
            raise BadInput(
                f"the row does not read as a record ({exc})", file=f"{path}:{number}"
            ) from None
    return out


def read_parquet(path: Path) -> list[tuple[int, RunRecord]]:
    """(row number from 1, record) of every row; BadInput (exit 2) on the first bad one."""
    out: list[tuple[int, RunRecord]] = []
    for number, fields in read_parquet_rows(path):
        try:
            out.append((number, RunRecord.model_validate(fields)))
        except (ValidationError, ValueError) as exc:
            raise record_rows.bad_row(path, number, exc) from None
    return out
