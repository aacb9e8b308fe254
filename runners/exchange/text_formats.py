"""Export and import of run records: JSON Lines (one record per line) or CSV.

JSONL is the lossless form (the record as stored). CSV flattens tokens, funnel
stages and oracle verdicts into columns and JSON-encodes the lists (selected
operations, trace), so a CSV export imports back to the same records.

Import reads every row first (:func:`read_rows`: a file that does not read as rows is
bad input, exit 2), then the caller checks each row against its chain link (exit 3,
:mod:`.importing`), then validates every record (:func:`validate_rows`: a malformed record
is bad input, exit 2, naming the line and field) before writing any. The digest check
against the registry is the caller's too, so this module stays free of the registry.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from pathlib import Path
from typing import Any, BinaryIO, Literal

from pydantic import ValidationError

from prereg.core.errors import BadInput
from prereg.core.files import write_atomic
from prereg.core.safeio import MAX_EXCHANGE_BYTES, json_objects, read_text_input
from prereg.runners.exchange import parquet as parquet_export
from prereg.runners.exchange.rows import bad_row, from_row, to_row
from prereg.runners.record import EXPORT_COLUMNS, RunRecord

Format = Literal["jsonl", "csv"]


def render_records(records: Iterable[RunRecord], fmt: Format) -> tuple[bytes, int]:
    """The export file's bytes (UTF-8) and the number of records in it."""
    buffer = io.StringIO(newline="")
    n = 0
    if fmt == "jsonl":
        for record in records:
            buffer.write(record.model_dump_json() + "\n")
            n += 1
    else:
        writer = csv.DictWriter(buffer, fieldnames=list(EXPORT_COLUMNS))
        writer.writeheader()
        for record in records:
            writer.writerow(to_row(record))
            n += 1
    return buffer.getvalue().encode("utf-8"), n


def write_records(records: Iterable[RunRecord], path: Path, fmt: Format) -> int:
    """Write records to ``path`` atomically (temporary file, then rename); returns count."""
    data, n = render_records(records, fmt)
    write_atomic(Path(path), data, what="the export")
    return n


def write_records_to(records: Iterable[RunRecord], stream: BinaryIO, fmt: Format) -> int:
    """Write records to an open binary stream (``--out -``: standard output); returns count."""
    data, n = render_records(records, fmt)
    stream.write(data)
    stream.flush()
    return n


def detect_format(path: Path) -> Format:
    suffix = Path(path).suffix.lower()
    if suffix in (".jsonl", ".ndjson", ".json"):
        return "jsonl"
    if suffix == ".csv":
        return "csv"
    raise BadInput(
        f"cannot tell the format from the extension '{suffix}' (use .jsonl, .csv or .parquet)",
        file=str(path),
    )


#: One row of an export as read, before validation: (line or row number, the record's
#: fields as JSON values, and for JSON Lines the line itself, which validation parses).
RawRow = tuple[int, dict[str, Any], str | None]


def read_rows(path: Path) -> list[RawRow]:
    """Every row of the file as the record's JSON fields, unvalidated: what ``prereg
    import`` checks against each row's chain link before validating it
    (:mod:`.importing`). BadInput (exit 2) for a file that does not read as rows: not
    UTF-8, a line that is not a JSON object, a missing column, a ragged CSV row."""
    path = Path(path)
    if path.suffix.lower() == ".parquet":
        return [(n, fields, None) for n, fields in parquet_export.read_parquet_rows(path)]
    fmt = detect_format(path)
    # regular files only, bounded: a FIFO or /dev/zero is exit 2, never a hang
    text = read_text_input(path, limit=MAX_EXCHANGE_BYTES, what="an export file")
    if fmt == "jsonl":
        # newline only: U+2028, U+2029 and U+0085 are text inside a record's strings
        return list(json_objects(text, path))
    out: list[RawRow] = []
    reader = csv.DictReader(io.StringIO(text, newline=""))
    missing = [
        c
        for c in ("record_id", "registration_id", "registration_digest")
        if c not in (reader.fieldnames or [])
    ]
    if missing:
        raise BadInput(f"missing column(s) {missing}", file=f"{path}:1")
    for row in reader:
        number = reader.line_num
        # csv.DictReader files fields beyond the header under None and pads short rows with None
        if None in row or any(value is None for value in row.values()):
            raise BadInput(
                "the row has more or fewer fields than the header", file=f"{path}:{number}"
            )
        try:
            out.append((number, from_row(dict(row)), None))
        except (ValueError, RecursionError) as exc:  # a cell of the wrong type, JSON that is not
            raise bad_row(path, number, exc) from None
    return out


def validate_row(path: Path, row: RawRow) -> RunRecord:
    """The row as a run record; BadInput (exit 2) naming the line and field otherwise."""
    number, fields, line = row
    try:
        if line is not None:
            return RunRecord.model_validate_json(line)
        return RunRecord.model_validate(fields)
    except (ValidationError, ValueError) as exc:
        raise bad_row(path, number, exc) from None


def validate_rows(path: Path, rows: list[RawRow]) -> list[tuple[int, RunRecord]]:
    """(line number, record) for every row; BadInput on the first that does not validate."""
    return [(row[0], validate_row(Path(path), row)) for row in rows]


def read_records(path: Path) -> list[tuple[int, RunRecord]]:
    """(line number, record) for every record in the file; BadInput on the first bad one."""
    return validate_rows(path, read_rows(path))
