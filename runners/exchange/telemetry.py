"""Telemetry (InvokeRank's evidence class T, 3.5 and 5.6): an integration's real tool calls
as its own server observed them, imported with ``prereg telemetry import`` into an
append-only, hash-chained log (``registry/telemetry.jsonl``,
:class:`~prereg.registry.audit_log.AuditLog`). T evidence is never a run record and is
never pooled with runs (DESIGN.md invariant 8): it is read only by the S-vs-T comparison
(:mod:`prereg.reports.invokerank.telemetry`).

The format (docs/invokerank.md, "Telemetry"): JSON Lines, one object per line, each one
observed call (or ``count`` identical calls of one hour) with exactly these fields, as the
seed's telemetry view holds them (tool, client host, outcome, duration and hour, no user
identifiers):

- ``integration`` (id): the integration whose server logged the call;
- ``host`` (non-empty text): the client host that made it (``claude``, ``chatgpt``, ...);
- ``tool`` (non-empty text): the tool called;
- ``outcome``: ``ok`` or ``error``;
- ``hour``: the hour of the call, ISO 8601 in UTC with minutes and seconds zero
  (``2026-10-05T14:00:00Z``);
- optional ``duration_ms`` (number >= 0, or null), ``count`` (integer >= 1, default 1),
  ``intent`` (id, when the integration classifies its calls), ``first`` (true when the
  call was the first call of its session: the S-vs-T comparison then compares first
  calls with first calls).

Any other field is refused (exit 2, naming the line and field): a user identifier, a
prompt or an argument never enters the workspace. A file already imported (same sha256)
is refused, so an hourly export read twice is not counted twice; overlapping exports
with different bytes cannot be told apart and are the operator's to avoid.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from prereg.core.errors import BadInput
from prereg.core.safeio import MAX_EXCHANGE_BYTES, json_objects, read_text_input
from prereg.experiments.models import Id
from prereg.registry.audit_log import AuditLog
from prereg.registry.digest import file_digest

EVENT = "telemetry-import"
EVIDENCE_CLASS = "telemetry"
Text = Annotated[str, Field(min_length=1, max_length=200)]


class TelemetryRow(BaseModel):
    """One line of a telemetry file (module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    integration: Id
    host: Text
    tool: Text
    outcome: Literal["ok", "error"]
    hour: str
    duration_ms: float | int | None = Field(None, ge=0)
    count: int = Field(1, ge=1)
    intent: Id | None = None
    first: bool | None = None

    @field_validator("hour")
    @classmethod
    def _whole_hour(cls, value: str) -> str:
        try:
            when = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError("expected an ISO 8601 hour such as 2026-10-05T14:00:00Z") from None
        if when.tzinfo is None or when.utcoffset() != UTC.utcoffset(None):
            raise ValueError("the hour must be in UTC (end it with Z)")
        if (when.minute, when.second, when.microsecond) != (0, 0, 0):
            raise ValueError("an hour has minutes and seconds zero (telemetry is hourly)")
        return when.strftime("%Y-%m-%dT%H:00:00Z")


def log_path(registry_dir: Path) -> Path:
    return Path(registry_dir) / "telemetry.jsonl"


def read_telemetry_file(path: Path) -> tuple[list[TelemetryRow], str]:
    """The rows of a telemetry file and its digest; BadInput (exit 2) naming the file, the
    line and the field for anything else."""
    text = read_text_input(path, limit=MAX_EXCHANGE_BYTES, what="a telemetry file")
    rows: list[TelemetryRow] = []
    for number, fields, _line in json_objects(text, path):
        try:
            rows.append(TelemetryRow.model_validate(fields))
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or None
            message = (
                "not a telemetry field (the format has no user identifiers, prompts or arguments)"
                if err["type"] == "extra_forbidden"
                else err["msg"]
            )
            raise BadInput(message, file=f"{path}:{number}", field=where) from None
    if not rows:
        raise BadInput("no telemetry rows in the file", file=str(path))
    return rows, file_digest(text.encode("utf-8"))  # the bytes read (UTF-8 round-trips)


def import_telemetry(registry_dir: Path, path: Path) -> dict[str, Any]:
    """Check ``path`` whole, then append it as one event (nothing is written on a refusal)."""
    rows, digest = read_telemetry_file(path)
    log = AuditLog(log_path(registry_dir))
    for event in log.verified_events():
        if event.get("file_digest") == digest:
            raise BadInput(
                f"this file was already imported (line {event['seq']} of "
                f"{log.path.name}, {event['calls']} calls): a second import would count its "
                "calls twice",
                file=str(path),
            )
    calls = sum(r.count for r in rows)
    event = {
        "event": EVENT,
        "evidence_class": EVIDENCE_CLASS,
        "source": Path(path).name,
        "file_digest": digest,
        "calls": calls,
        "rows": [r.model_dump(mode="json", exclude_none=True) for r in rows],
    }
    written = log.append([event])[0]
    return {
        "imported": str(path),
        "file_digest": digest,
        "seq": written["seq"],
        "rows": len(rows),
        "calls": calls,
        "log": log.path.name,
    }


def stored_rows(registry_dir: Path) -> list[TelemetryRow]:
    """Every imported row, after verifying the log's chain (exit 3 when tampered)."""
    log = AuditLog(log_path(registry_dir))
    out: list[TelemetryRow] = []
    for event in log.verified_events():
        if event.get("event") == EVENT:
            out.extend(TelemetryRow.model_validate(r) for r in event["rows"])
    return out


def summary(rows: Sequence[TelemetryRow]) -> dict[str, Any]:
    """Calls per integration and host (for ``prereg telemetry show``)."""
    table: dict[str, dict[str, int]] = {}
    for r in rows:
        per = table.setdefault(r.integration, {})
        per[r.host] = per.get(r.host, 0) + r.count
    return {"evidence_class": EVIDENCE_CLASS, "calls": table}
