"""Export and import of run records: JSON Lines (one record per line) or CSV.

JSONL is the lossless form (the record as stored). CSV flattens tokens, funnel
stages and oracle verdicts into columns and JSON-encodes the lists (selected
operations, trace), so a CSV export imports back to the same records.

Import validates every record before writing any: a malformed line is bad input
(exit 2, naming the line and field); the digest check against the registry is
done by the caller (exit 3), so this module stays free of the registry.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, BinaryIO, Literal

from pydantic import ValidationError

from prereg.core.errors import BadInput
from prereg.core.files import write_atomic
from prereg.core.yamlio import format_loc
from prereg.runners import parquet_export  # a module import: the two modules use each other
from prereg.runners.record import EXPORT_COLUMNS, RunRecord

Format = Literal["jsonl", "csv"]

_BOOL = {
    "surfaced",
    "selected",
    "invoked",
    "executed",
    "completed",
    "oracle_final_state",
    "oracle_no_mutation",
    "oracle_prohibited_operations",
    "oracle_confirmation",
    "oracle_answer",
    "success",
    "batch",
}
_INT = {
    "repeat",
    "rotation",
    "tokens_input",
    "tokens_output",
    "tokens_reasoning",
    "tokens_cached",
    "unnecessary_calls",
    "calls",
    "turns",
    "schema_version",
    "retries",
}
_FLOAT = {"latency_ms", "cost_usd", "selection_rate"}
_JSON = {"selected_operations", "trace"}
_JSON_OBJECT = {"offer", "config", "obligations", "chain"}  # JSON-encoded, empty for null
_NULLABLE_STR = {
    "model_requested",
    "model_returned",
    "terminal_class",
    "terminal_flag",
    "first_unmet_obligation",
    "error",
}


def to_row(record: RunRecord) -> dict[str, str]:
    """One CSV row: flat columns, empty string for null."""
    data = record.model_dump(mode="json")
    flat: dict[str, Any] = {
        k: v for k, v in data.items() if k not in ("tokens", "funnel", "oracles")
    }
    for key, value in data["tokens"].items():
        flat[f"tokens_{key}"] = value
    flat.update(data["funnel"])
    for key, value in data["oracles"].items():
        flat[f"oracle_{key}"] = value
    row: dict[str, str] = {}
    for column in EXPORT_COLUMNS:
        value = flat.get(column)
        if value is None:
            row[column] = ""
        elif column in _JSON or column in _JSON_OBJECT:
            row[column] = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        elif isinstance(value, bool):
            row[column] = "true" if value else "false"
        else:
            row[column] = str(value)
    return row


def from_row(row: dict[str, str]) -> dict[str, Any]:
    """The record fields of a CSV row (validation is the model's job)."""
    unknown = sorted(set(row) - set(EXPORT_COLUMNS))
    if unknown:
        raise ValueError(f"unknown column(s) {unknown}")
    out: dict[str, Any] = {"tokens": {}, "funnel": {}, "oracles": {}}
    for column, text in row.items():
        value: Any
        if text == "" and column not in _JSON:
            value = None
        elif column in _BOOL:
            if text not in ("true", "false"):
                raise ValueError(f"{column}: expected true, false or empty, got {text!r}")
            value = text == "true"
        elif column in _INT:
            value = int(text)
        elif column in _FLOAT:
            value = float(text)
        elif column in _JSON:
            value = json.loads(text) if text else []
        elif column in _JSON_OBJECT:
            value = json.loads(text)
        else:
            value = text
        if column.startswith("tokens_"):
            out["tokens"][column.removeprefix("tokens_")] = value
        elif column in ("surfaced", "selected", "invoked", "executed", "completed"):
            out["funnel"][column] = value
        elif column.startswith("oracle_"):
            out["oracles"][column.removeprefix("oracle_")] = value
        elif value is not None or column in _NULLABLE_STR:
            out[column] = value
    return out


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


def _bad(path: Path, line: int, exc: Exception) -> BadInput:
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        field = format_loc([p for p in err["loc"] if isinstance(p, (str, int))])
        message = str(err["msg"]).removeprefix("Value error, ")
        more = [f"{format_loc(e['loc'])}: {e['msg']}" for e in exc.errors()[1:]]
        return BadInput(message, file=f"{path}:{line}", field=field, details=more)
    return BadInput(str(exc), file=f"{path}:{line}")


def read_records(path: Path) -> list[tuple[int, RunRecord]]:
    """(line number, record) for every record in the file; BadInput on the first bad one."""
    path = Path(path)
    if path.suffix.lower() == ".parquet":
        return parquet_export.read_parquet(path)
    fmt = detect_format(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadInput("file not found", file=str(path)) from None
    except UnicodeDecodeError as exc:
        raise BadInput(f"not UTF-8 text ({exc})", file=str(path)) from None
    out: list[tuple[int, RunRecord]] = []
    if fmt == "jsonl":
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                out.append((number, RunRecord.model_validate_json(line)))
            except (ValidationError, ValueError) as exc:
                raise _bad(path, number, exc) from None
        return out
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
            out.append((number, RunRecord.model_validate(from_row(dict(row)))))
        except (ValidationError, ValueError) as exc:
            raise _bad(path, number, exc) from None
    return out
