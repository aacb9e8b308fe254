"""``prereg export --format parquet`` and its import (optional extra ``prereg-agents[parquet]``).

The columns are the CSV export's (:data:`prereg.runners.record.EXPORT_COLUMNS`, nested
values JSON-encoded), typed: booleans, 64-bit integers, doubles and strings, null where
the record has null. A row is read back through the CSV reader's own conversion
(:func:`prereg.runners.exchange.rows.from_row`), so a Parquet export imports back to the very
records, chain links included, and an edited one is refused like an edited CSV.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from pydantic import ValidationError

from prereg.core.errors import BadInput
from prereg.core.files import write_atomic
from prereg.core.safeio import MAX_EXCHANGE_BYTES, read_input
from prereg.runners.exchange import rows as record_rows
from prereg.runners.extras import missing_extra
from prereg.runners.record import EXPORT_COLUMNS, RunRecord

if TYPE_CHECKING:
    import pyarrow as pa

#: Stored in the file's schema metadata: what wrote it, so a reader can tell.
FORMAT_KEY = b"prereg.format"
FORMAT_VALUE = b"run-records/1"


def require() -> tuple[Any, Any]:
    """(pyarrow, pyarrow.parquet), or exit 2 naming the extra."""
    try:
        import pyarrow  # lazy: optional extra prereg-agents[parquet]
        import pyarrow.parquet  # lazy: optional extra prereg-agents[parquet]
    except ImportError as exc:
        raise missing_extra("parquet", "the Parquet format", exc) from None
    return pyarrow, pyarrow.parquet


def _type(pa: Any, column: str) -> pa.DataType:
    if column in record_rows.BOOL_COLUMNS:
        return pa.bool_()
    if column in record_rows.INT_COLUMNS:
        return pa.int64()
    if column in record_rows.FLOAT_COLUMNS:
        return pa.float64()
    return pa.string()


def _typed(column: str, text: str) -> object:
    """A CSV cell as its typed Parquet value (empty: null)."""
    if text == "":
        return None
    if column in record_rows.BOOL_COLUMNS:
        return text == "true"
    if column in record_rows.INT_COLUMNS:
        return int(text)
    if column in record_rows.FLOAT_COLUMNS:
        return float(text)
    return text


def _text(value: object) -> str:
    """A Parquet value as the CSV cell :func:`from_row` reads."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)  # float: repr, which round-trips exactly


def render_parquet(records: Iterable[RunRecord]) -> tuple[bytes, int]:
    """The Parquet file's bytes and the number of records in it."""
    pa, pq = require()
    rows = [record_rows.to_row(record) for record in records]
    schema = pa.schema(
        [pa.field(c, _type(pa, c)) for c in EXPORT_COLUMNS], metadata={FORMAT_KEY: FORMAT_VALUE}
    )
    columns = {c: [_typed(c, row[c]) for row in rows] for c in EXPORT_COLUMNS}
    table = pa.Table.from_pydict(columns, schema=schema)
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue(), len(rows)


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


def read_parquet(path: Path) -> list[tuple[int, RunRecord]]:
    """(row number from 1, record) of every row; BadInput (exit 2) on the first bad one."""
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
    out: list[tuple[int, RunRecord]] = []
    for number, row in enumerate(table.to_pylist(), start=1):
        try:
            fields = record_rows.from_row({c: _text(v) for c, v in row.items()})
            out.append((number, RunRecord.model_validate(fields)))
        except (ValidationError, ValueError) as exc:
            raise record_rows.bad_row(path, number, exc) from None
    return out
