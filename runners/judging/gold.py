"""Gold labels: people's labels of judged runs, the yardstick of a judge (issue 18).

A gold file is CSV (a header row naming ``run_id``, ``label`` and ``annotator``) or JSON
Lines (one object a line with those keys); ``record_id`` is accepted for ``run_id``. A
label is ``1``/``0`` or ``true``/``false`` (JSON booleans too): the run's judged outcome
was met or not, in the sense of the outcome its run needs (``completed`` for a run whose
first call executed, ``native_self_service`` for a positive run with no external call:
the two sets are disjoint, so the run id names the outcome).

Why a loaded, chained table and not a file digested into the registration: labels are
made after the runs exist (they name run ids), so they cannot be frozen before the runs
the way a rubric is. What must hold instead is that a label, once given, never changes:
``prereg judge ID --gold FILE`` checks the whole file (every row a run of the
registration that needs a judged outcome, a valid label, an annotator, no (run,
annotator) twice) and then appends every row in one transaction to the ``gold`` table of
the verdict store, append-only (triggers) and hash-chained per registration digest like
the verdicts. Each label keeps the file's sha256 and its line. Loading the same file
again adds nothing; a file that gives a stored (run, annotator) another label is refused
(exit 2): gold labels cannot be edited after the fact, only added.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from prereg.core.errors import BadInput
from prereg.core.safeio import MAX_JUDGING_BYTES, read_input, split_lines
from prereg.runners.record import DIGEST_PATTERN, ChainLink

GOLD_FORMAT = "prereg.gold-chain/1"
ANNOTATOR_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,99}$"
_TRUE = frozenset({"1", "true"})
_FALSE = frozenset({"0", "false"})
_RUN_KEYS = ("run_id", "record_id")


class GoldLabel(BaseModel):
    """One annotator's label of one run, with where it came from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    record_id: str = Field(min_length=1)
    registration_id: str
    registration_digest: str = Field(pattern=DIGEST_PATTERN)
    outcome: Literal["completed", "native_self_service"]
    label: bool
    annotator: str = Field(pattern=ANNOTATOR_PATTERN)
    source: str  # the file's name as given
    source_digest: str = Field(pattern=DIGEST_PATTERN)
    line: int = Field(ge=1)
    loaded_at: datetime
    chain: ChainLink | None = None


@dataclass(frozen=True)
class GoldRow:
    """A checked row of a gold file, before it becomes a label."""

    line: int
    record_id: str
    label: bool
    annotator: str


def _label(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    text = value.strip().lower() if isinstance(value, str) else None
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise BadInput(f"expected 1, 0, true or false, got {value!r}"[:200], file=where, field="label")


def _text(value: Any, where: str, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise BadInput("expected a non-empty string", file=where, field=name)
    return value.strip()


def _row(data: Mapping[str, Any], line: int, path: Path) -> GoldRow:
    where = f"{path}:{line}"
    run_key = next((k for k in _RUN_KEYS if k in data), "run_id")
    unknown = sorted(set(data) - {*_RUN_KEYS, "label", "annotator"})
    if unknown:
        raise BadInput(f"unknown field(s) {unknown}"[:300], file=where, field=str(unknown[0]))
    if all(k in data for k in _RUN_KEYS):
        raise BadInput("give run_id or record_id, not both", file=where, field="record_id")
    for name in (run_key, "label", "annotator"):
        if name not in data or data[name] is None:
            raise BadInput("missing", file=where, field=name)
    annotator = _text(data["annotator"], where, "annotator")
    if re.fullmatch(ANNOTATOR_PATTERN, annotator) is None:
        raise BadInput(
            "an annotator is a name of letters, digits and . _ @ + - (at most 100)",
            file=where,
            field="annotator",
        )
    return GoldRow(
        line=line,
        record_id=_text(data[run_key], where, run_key),
        label=_label(data["label"], where),
        annotator=annotator,
    )


def _csv_rows(text: str, path: Path) -> list[GoldRow]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    header = [h.strip() for h in reader.fieldnames or []]
    missing = [n for n in ("label", "annotator") if n not in header] + (
        [] if any(k in header for k in _RUN_KEYS) else ["run_id"]
    )
    if missing:
        raise BadInput(
            f"the header must name run_id, label and annotator; missing {missing}",
            file=f"{path}:1",
            field=missing[0],
        )
    reader.fieldnames = header
    out = []
    for row in reader:
        line = reader.line_num
        if None in row or any(v is None for v in row.values()):
            raise BadInput(
                "the row has more or fewer fields than the header", file=f"{path}:{line}"
            )
        if not any(v.strip() for v in row.values()):
            continue
        out.append(_row(row, line, path))
    return out


def _jsonl_rows(text: str, path: Path) -> list[GoldRow]:
    out = []
    for line, body in enumerate(split_lines(text), start=1):
        if not body.strip():
            continue
        try:
            data = json.loads(body)
        except (ValueError, RecursionError):
            raise BadInput("not a JSON object", file=f"{path}:{line}") from None
        if not isinstance(data, dict):
            raise BadInput("not a JSON object", file=f"{path}:{line}")
        out.append(_row(data, line, path))
    return out


def read_gold(path: Path) -> tuple[list[GoldRow], str]:
    """The file's rows, checked one by one and for a (run, annotator) given twice, and the
    file's sha256; BadInput (exit 2) naming file, line and field on the first bad row."""
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".jsonl", ".ndjson"):
        raise BadInput(
            f"cannot tell the format from the extension '{suffix}' (use .csv or .jsonl)",
            file=str(path),
        )
    try:
        data = read_input(path, limit=MAX_JUDGING_BYTES, what="a gold file")
        text = data.decode("utf-8-sig")
    except FileNotFoundError:
        raise BadInput("file not found", file=str(path)) from None
    except IsADirectoryError:
        raise BadInput("a folder, not a gold file", file=str(path)) from None
    except UnicodeDecodeError as exc:
        raise BadInput(f"not UTF-8 text ({exc.reason})", file=str(path)) from None
    rows = _csv_rows(text, path) if suffix == ".csv" else _jsonl_rows(text, path)
    if not rows:
        raise BadInput("the file holds no label", file=str(path))
    first: dict[tuple[str, str], int] = {}
    for row in rows:
        key = (row.record_id, row.annotator)
        if key in first:
            raise BadInput(
                f"run {row.record_id} is labelled by annotator {row.annotator} again (first "
                f"at line {first[key]}): one label per run and annotator",
                file=f"{path}:{row.line}",
                field="annotator",
            )
        first[key] = row.line
    return rows, "sha256:" + hashlib.sha256(data).hexdigest()


def consensus(labels: Iterable[GoldLabel]) -> dict[str, float]:
    """record id -> the mean of its annotators' labels (1, 0, or a share when they
    disagree): the gold value prediction-powered inference corrects the judge with."""
    sums: dict[str, list[int]] = {}
    for g in labels:
        sums.setdefault(g.record_id, []).append(int(g.label))
    return {rid: sum(v) / len(v) for rid, v in sums.items()}


def annotator_pairs(labels: Sequence[GoldLabel]) -> list[tuple[str, str, list[int], list[int]]]:
    """(annotator a, annotator b, a's labels, b's labels) on the runs both labelled, for
    every pair of annotators (sorted by name) who share at least one run."""
    by: dict[str, dict[str, int]] = {}
    for g in labels:
        by.setdefault(g.annotator, {})[g.record_id] = int(g.label)
    names = sorted(by)
    out = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            shared = sorted(by[a].keys() & by[b].keys())
            if shared:
                out.append((a, b, [by[a][r] for r in shared], [by[b][r] for r in shared]))
    return out
