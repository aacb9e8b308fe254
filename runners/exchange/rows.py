"""A run record as a flat row, and back: the form of the CSV and Parquet exports
(:mod:`.text_formats`, :mod:`.parquet`).

Tokens, funnel stages and oracle verdicts become columns of their own
(:func:`flatten`, :func:`nest`). In CSV every cell is text: lists (selected operations,
trace) and objects (offer, config, obligations, chain) are JSON-encoded and null is the
empty string (:func:`to_row`, :func:`from_row`); Parquet types the same columns
(:mod:`.parquet`). Its own module because both formats use it, and the text formats'
module also reads Parquet through :mod:`.parquet`: kept in either, the two made an import
circle (issue 38).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from prereg.core.errors import BadInput
from prereg.core.yamlio import format_loc
from prereg.runners.record import EXPORT_COLUMNS, RunRecord

BOOL_COLUMNS = {
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
INT_COLUMNS = {
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
FLOAT_COLUMNS = {"latency_ms", "cost_usd", "selection_rate"}
JSON_COLUMNS = {"selected_operations", "trace"}
JSON_OBJECT_COLUMNS = {"offer", "config", "obligations", "chain"}  # JSON-encoded, empty for null
FUNNEL_COLUMNS = ("surfaced", "selected", "invoked", "executed", "completed")
NULLABLE_TEXT_COLUMNS = {
    "model_requested",
    "model_returned",
    "terminal_class",
    "terminal_flag",
    "first_unmet_obligation",
    "error",
}


def flatten(record: RunRecord) -> dict[str, Any]:
    """The record's JSON values (``model_dump(mode="json")``) by export column: tokens,
    funnel stages and oracle verdicts spread into columns of their own."""
    data = record.model_dump(mode="json")
    flat: dict[str, Any] = {
        k: v for k, v in data.items() if k not in ("tokens", "funnel", "oracles")
    }
    for key, value in data["tokens"].items():
        flat[f"tokens_{key}"] = value
    flat.update(data["funnel"])
    for key, value in data["oracles"].items():
        flat[f"oracle_{key}"] = value
    return {column: flat.get(column) for column in EXPORT_COLUMNS}


def nest(flat: Mapping[str, Any]) -> dict[str, Any]:
    """The record fields of export-column values (the inverse of :func:`flatten`); a null
    top-level value is left out, so the field's default (null, or an empty list) applies.
    Validation is the model's job."""
    unknown = sorted(set(flat) - set(EXPORT_COLUMNS))
    if unknown:
        raise ValueError(f"unknown column(s) {unknown}")
    out: dict[str, Any] = {"tokens": {}, "funnel": {}, "oracles": {}}
    for column, value in flat.items():
        if column.startswith("tokens_"):
            out["tokens"][column.removeprefix("tokens_")] = value
        elif column in FUNNEL_COLUMNS:
            out["funnel"][column] = value
        elif column.startswith("oracle_"):
            out["oracles"][column.removeprefix("oracle_")] = value
        elif value is not None or column in NULLABLE_TEXT_COLUMNS:
            out[column] = value
    return out


def to_row(record: RunRecord) -> dict[str, str]:
    """One CSV row: flat columns, empty string for null."""
    row: dict[str, str] = {}
    for column, value in flatten(record).items():
        if value is None:
            row[column] = ""
        elif column in JSON_COLUMNS or column in JSON_OBJECT_COLUMNS:
            row[column] = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        elif isinstance(value, bool):
            row[column] = "true" if value else "false"
        else:
            row[column] = str(value)
    return row


def from_row(row: dict[str, str]) -> dict[str, Any]:
    """The record fields of a CSV row (validation is the model's job)."""
    return nest({column: _cell(column, text) for column, text in row.items()})


def _cell(column: str, text: str) -> Any:
    """One CSV cell's value (empty: null, or an empty list for a list column)."""
    if text == "" and column not in JSON_COLUMNS:
        return None
    if column in BOOL_COLUMNS:
        if text not in ("true", "false"):
            raise ValueError(f"{column}: expected true, false or empty, got {text!r}")
        return text == "true"
    if column in INT_COLUMNS:
        return int(text)
    if column in FLOAT_COLUMNS:
        return float(text)
    if column in JSON_COLUMNS:
        return json.loads(text) if text else []
    if column in JSON_OBJECT_COLUMNS:
        return json.loads(text)
    return text


def bad_row(path: Path, line: int, exc: Exception) -> BadInput:
    """Exit 2 naming the file, line and field of a record that does not validate."""
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        field = format_loc([p for p in err["loc"] if isinstance(p, (str, int))])
        message = str(err["msg"]).removeprefix("Value error, ")
        more = [f"{format_loc(e['loc'])}: {e['msg']}" for e in exc.errors()[1:]]
        return BadInput(message, file=f"{path}:{line}", field=field, details=more)
    return BadInput(str(exc), file=f"{path}:{line}")
