"""A run record as a flat row of text columns, and back: the form of the CSV and Parquet
exports (:mod:`.text_formats`, :mod:`.parquet`).

Tokens, funnel stages and oracle verdicts become columns of their own; lists (selected
operations, trace) and objects (offer, config, obligations, chain) are JSON-encoded; null
is the empty string. Both formats read through :func:`from_row`, so either imports back
to the same records. Its own module because both formats use it, and the text formats' module
also reads Parquet through :mod:`.parquet`: kept in either, the two made an import
circle (issue 38).
"""

from __future__ import annotations

import json
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
NULLABLE_TEXT_COLUMNS = {
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
        elif column in JSON_COLUMNS or column in JSON_OBJECT_COLUMNS:
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
        if text == "" and column not in JSON_COLUMNS:
            value = None
        elif column in BOOL_COLUMNS:
            if text not in ("true", "false"):
                raise ValueError(f"{column}: expected true, false or empty, got {text!r}")
            value = text == "true"
        elif column in INT_COLUMNS:
            value = int(text)
        elif column in FLOAT_COLUMNS:
            value = float(text)
        elif column in JSON_COLUMNS:
            value = json.loads(text) if text else []
        elif column in JSON_OBJECT_COLUMNS:
            value = json.loads(text)
        else:
            value = text
        if column.startswith("tokens_"):
            out["tokens"][column.removeprefix("tokens_")] = value
        elif column in ("surfaced", "selected", "invoked", "executed", "completed"):
            out["funnel"][column] = value
        elif column.startswith("oracle_"):
            out["oracles"][column.removeprefix("oracle_")] = value
        elif value is not None or column in NULLABLE_TEXT_COLUMNS:
            out[column] = value
    return out


def bad_row(path: Path, line: int, exc: Exception) -> BadInput:
    """Exit 2 naming the file, line and field of a record that does not validate."""
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        field = format_loc([p for p in err["loc"] if isinstance(p, (str, int))])
        message = str(err["msg"]).removeprefix("Value error, ")
        more = [f"{format_loc(e['loc'])}: {e['msg']}" for e in exc.errors()[1:]]
        return BadInput(message, file=f"{path}:{line}", field=field, details=more)
    return BadInput(str(exc), file=f"{path}:{line}")
