"""The stored calibration of a registration: written by ``prereg calibrate ID``, shown by
``analyse``.

``prereg calibrate ID`` writes its table whole or not at all (:func:`write_atomic`) to
``reports/<id>/calibration.json``, beside the reports, with the registration digest it
simulated. ``analyse`` carries it in the report (every renderer and ``report.json``)
only when that digest is the registration's: a calibration of another digest (a file
copied from elsewhere, or edited) is ignored with a note, never shown as this design's.
A calibration is simulated, never an input to the verdict. A draft (``prereg calibrate
file.yaml``) is not stored: it has no registration to belong to.

The file carries ``content_digest``, the sha256 of its whole content (canonical JSON, the
field itself left out), and is read as a typed document: an edited file of this digest
(a row's estimate changed, say) or a mistyped one is exit 3 naming it, never shown as
the registration's own and never a traceback. A file written before the field is not
shown (a note says to run ``prereg calibrate`` again). The file is read as a regular file
of at most :data:`~prereg.core.safeio.MAX_CALIBRATION_BYTES`
(:func:`~prereg.core.safeio.read_input`): a FIFO or a device there is exit 2 naming it.
"""

from __future__ import annotations

import hashlib
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from prereg.core.errors import IntegrityError
from prereg.core.files import refuse_linked_folders, write_atomic
from prereg.core.output import dumps
from prereg.core.safeio import MAX_CALIBRATION_BYTES, read_input
from prereg.core.version import code_version
from prereg.core.workspace import Workspace
from prereg.reports.model import CalibrationReport

SCHEMA = "prereg.calibration/1"
FILENAME = "calibration.json"
#: The member holding the sha256 of the rest of the document.
CONTENT_DIGEST = "content_digest"
_ROW_KEYS = (
    "label",
    "test",
    "quantity",
    "scenario",
    "nominal",
    "estimate",
    "mc_se",
    "verdict",
    "sims",
    "note",
)


def calibration_path(ws: Workspace, reg_id: str) -> Path:
    return ws.reports / reg_id / FILENAME


def store_calibration(ws: Workspace, reg_id: str, doc: dict[str, Any]) -> Path:
    """Write ``doc`` (the ``calibrate`` document, with its ``digest``) for ``reg_id``."""
    path = calibration_path(ws, reg_id)
    refuse_linked_folders(ws.root, "reports", reg_id)  # never written through a link
    stored = {
        "schema": SCHEMA,
        "computed_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "prereg_version": code_version(),
        **doc,
    }
    written = json.loads(dumps(stored))  # as it will read back (non-finite floats: null)
    written.pop(CONTENT_DIGEST, None)
    written[CONTENT_DIGEST] = content_digest(written)
    write_atomic(path, (dumps(written) + "\n").encode(), what="the calibration")
    return path


def content_digest(doc: dict[str, Any]) -> str:
    """sha256 of ``doc`` without :data:`CONTENT_DIGEST`, as canonical JSON (sorted keys)."""
    rest = {k: v for k, v in doc.items() if k != CONTENT_DIGEST}
    text = json.dumps(rest, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _report(doc: dict[str, Any], shown: str) -> CalibrationReport:
    return CalibrationReport(
        digest=str(doc["digest"]),
        seed=doc["seed"],
        sims=doc["sims"],
        bootstrap_draws=doc["bootstrap_draws"],
        computed_at=str(doc.get("computed_at", "")),
        prereg_version=str(doc.get("prereg_version", "")),
        file=shown,
        design=dict(doc.get("design") or {}),
        rows=[{k: row.get(k, "") for k in _ROW_KEYS} for row in doc["rows"]],
        skipped=list(doc.get("skipped") or []),
        notes=[str(n) for n in doc.get("notes") or []],
    )


def stored_calibration(
    ws: Workspace, reg_id: str, digest: str
) -> tuple[CalibrationReport | None, str | None]:
    """(the stored calibration of ``reg_id`` when its digest is ``digest``, else None;
    a note when a stored file is ignored). No file: (None, None)."""
    path = calibration_path(ws, reg_id)
    shown = f"reports/{reg_id}/{FILENAME}"
    if not os.path.lexists(path):
        return None, None
    raw = read_input(path, limit=MAX_CALIBRATION_BYTES, what="a calibration")
    try:
        doc = json.loads(raw)
        if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
            raise ValueError(f"not a {SCHEMA} document")
    except ValueError as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return None, f"{shown} is not shown: it is not a readable calibration ({reason})"
    found = str(doc.get("digest"))
    if found != digest:
        return None, (
            f"{shown} is not shown: it calibrates digest {found}, not this registration's {digest}"
        )
    if CONTENT_DIGEST not in doc:
        return None, (
            f"{shown} is not shown: it carries no content digest (written by an earlier "
            f"prereg); run `prereg calibrate {reg_id}` again to show it"
        )
    if doc[CONTENT_DIGEST] != content_digest(doc):
        raise IntegrityError(
            "the calibration was edited: its content does not match its content digest",
            file=str(path),
        )
    try:
        return _report(doc, shown), None
    except (ValueError, KeyError, TypeError, AttributeError, ValidationError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise IntegrityError(
            f"not a readable calibration: a field has the wrong type ({reason})", file=str(path)
        ) from None
