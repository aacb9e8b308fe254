"""What every export format starts from: a registration's verified records and its plan.

The JSON Lines and CSV exports (:func:`prereg.runners.api.export_registration`) read the
records inline; the optional formats (Parquet, Inspect AI logs) need the same verified
records and, for Inspect, the planned units and prompts, so they read them here. Nothing
is parsed before its chain verifies (invariant 11), and records of another digest filed
under the same id are refused (exit 3), as for the other formats.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from prereg.core.workspace import Workspace
from prereg.experiments import Experiment
from prereg.registry.registry import Entry, Registry
from prereg.registry.units import RunPlan, RunUnit, expand_units, plan_from_registration
from prereg.runners import parquet_export
from prereg.runners.api import check_export_target, export_records, is_stdout
from prereg.runners.record import RunRecord


@dataclass(frozen=True)
class ExportSource:
    """A verified registration with its records in chain order and its chain head."""

    registry: Registry
    entry: Entry
    records: list[RunRecord]
    head: dict[str, Any] | None

    def plan(self) -> tuple[RunPlan, Experiment, list[RunUnit]]:
        """The registration's plan, its frozen experiment and every planned unit."""
        plan = plan_from_registration(self.entry.registration, self.entry.digest)
        experiment = self.registry.load_experiment(self.entry)
        return plan, experiment, expand_units(plan, experiment)


def verified_source(ws: Workspace, registration_id: str, store: str | None) -> ExportSource:
    """The registration and its records, both verified (exit 3 otherwise)."""
    return ExportSource(*export_records(ws, registration_id, store))


def export_parquet(
    ws: Workspace,
    registration_id: str,
    out: Path | str,
    *,
    force: bool = False,
    stdout: BinaryIO | None = None,
    store: str | None = None,
) -> dict[str, Any]:
    """Like the JSON Lines export (target checked first, then everything verified), as
    Parquet; ``out`` ``-`` writes to standard output unless it is a terminal."""
    check_export_target(ws, out, force)
    parquet_export.require()  # exit 2 naming the extra before anything is read
    source = verified_source(ws, registration_id, store)
    if is_stdout(out):
        if stdout is None:
            sys.stdout.flush()
            stdout = sys.stdout.buffer
        n = parquet_export.write_parquet_to(source.records, stdout)
    else:
        n = parquet_export.write_parquet(source.records, Path(out))
    return {
        "registration_id": registration_id,
        "registration_digest": source.entry.digest,
        "format": "parquet",
        "out": str(out),
        "records": n,
        "ok": sum(r.status == "ok" for r in source.records),
        "infra_error": sum(r.status == "infra_error" for r in source.records),
        "chain": source.head,
    }
