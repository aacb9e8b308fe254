"""The stored calibration of a registration: written by ``prereg calibrate ID``, shown by
``analyse``.

``prereg calibrate ID`` writes its table whole or not at all (:func:`write_atomic`) to
``reports/<id>/calibration.json``, beside the reports, with the registration digest it
simulated. ``analyse`` carries it in the report (every renderer and ``report.json``)
only when that digest is the registration's: a calibration of another digest (a file
copied from elsewhere, or edited) is ignored with a note, never shown as this design's.
A calibration is simulated, never an input to the verdict. A draft (``prereg calibrate
file.yaml``) is not stored: it has no registration to belong to.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from prereg.core.files import write_atomic
from prereg.core.output import dumps
from prereg.core.version import code_version
from prereg.core.workspace import Workspace
from prereg.reports.model import CalibrationReport

SCHEMA = "prereg.calibration/1"
FILENAME = "calibration.json"
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
    stored = {
        "schema": SCHEMA,
        "computed_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "prereg_version": code_version(),
        **doc,
    }
    write_atomic(path, (dumps(stored) + "\n").encode(), what="the calibration")
    return path


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
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"{shown} is not shown: it cannot be read ({exc.strerror or exc})"
    try:
        doc = json.loads(raw)
        if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
            raise ValueError(f"not a {SCHEMA} document")
        found = str(doc["digest"])
        if found != digest:
            return None, (
                f"{shown} is not shown: it calibrates digest {found}, not this "
                f"registration's {digest}"
            )
        return _report(doc, shown), None
    except (ValueError, KeyError, TypeError, ValidationError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return None, f"{shown} is not shown: it is not a readable calibration ({reason})"
