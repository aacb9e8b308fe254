"""``prereg export``: a registration's verified records and plan, out in every format.

Every format starts here: the target checked (:func:`check_export_target`), then the
registration and its records verified (:func:`export_records`). JSON Lines and CSV
(:func:`export_registration`) and Parquet (:func:`export_parquet`) write the records; an
Inspect AI log (:mod:`prereg.reports.inspect_export`) also needs the planned units and
prompts (:meth:`ExportSource.plan`). Nothing
is parsed before its chain verifies (invariant 11), and records of another digest filed
under the same id are refused (exit 3), as for the other formats.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from prereg.core.errors import BadInput, IntegrityError
from prereg.core.files import refuse_evidence_folder
from prereg.core.workspace import Workspace
from prereg.experiments import Experiment
from prereg.registry.registrations import Entry, Registry
from prereg.registry.units import RunPlan, RunUnit, expand_units, plan_from_registration
from prereg.registry.verify import verified_entry
from prereg.runners.exchange import parquet as parquet_export
from prereg.runners.exchange.text_formats import Format, write_records, write_records_to
from prereg.runners.prepare import open_registry
from prereg.runners.record import RunRecord
from prereg.runners.store.choose import resolve_store
from prereg.runners.store.verify import verified_records


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


def check_export_target(ws: Workspace, out: Path | str, force: bool) -> None:
    """An export never lands in the registry or the run store, nor over a file unasked.

    BadInput (exit 2, nothing written): a path inside the workspace's ``registry/`` or
    ``runs/`` (an export there would overwrite the ledger or the store), a folder, or an
    existing file without ``force``. Nothing to check for ``-`` (standard output).
    """
    if is_stdout(out):
        return
    target = Path(out).resolve()
    for protected in (ws.registry, ws.runs):  # this workspace's, whatever they are named
        root = protected.resolve()
        if target == root or root in target.parents:
            raise BadInput(
                f"refusing to write an export inside the workspace's {protected.name}/ "
                f"({target}): write it elsewhere",
                field="--out",
            )
    refuse_evidence_folder(target, what="an export")  # and any other workspace's
    if target.is_dir():
        raise BadInput(f"{target} is a folder; give a file name", field="--out")
    if target.exists() and not force:
        raise BadInput(f"{target} exists; use --force to replace it", field="--out")


#: ``--out -``: the export goes to standard output.
STDOUT = "-"


def is_stdout(out: Path | str) -> bool:
    """True for ``-``, which names standard output, not a file."""
    return str(out) == STDOUT


def export_records(
    ws: Workspace, registration_id: str, store: str | None
) -> tuple[Registry, Entry, list[RunRecord], dict[str, Any] | None]:
    """The registration and its records in chain order, both verified (exit 3
    otherwise), with the chain head: what every export format writes."""
    registry = open_registry(ws)
    entry = verified_entry(registry, registration_id)
    records, heads = verified_records(resolve_store(ws.runs, store), registry, entry)
    foreign = [r.record_id for r in records if r.registration_digest != entry.digest]
    if foreign:
        raise IntegrityError(
            f"{len(foreign)} record(s) of '{registration_id}' carry a digest "
            f"other than the registration's {entry.digest}",
            details=foreign[:20],
        )
    records.sort(key=lambda r: r.chain.index if r.chain else -1)
    return registry, entry, records, heads.get(entry.digest)


def export_registration(
    ws: Workspace,
    registration_id: str,
    fmt: Format,
    out: Path | str,
    *,
    force: bool = False,
    stdout: BinaryIO | None = None,
    store: str | None = None,
) -> dict[str, Any]:
    """Write every record of a registration, chain links included, to ``out``.

    ``out`` ``-`` writes them to ``stdout`` (default: the process's standard output).

    The target is checked first (:func:`check_export_target`, exit 2), then the
    registration and its run chain are verified (exit 3), and records of another digest
    filed under the same id are refused (exit 3).
    """
    check_export_target(ws, out, force)
    _registry, entry, records, head = export_records(ws, registration_id, store)
    if is_stdout(out):
        if stdout is None:
            sys.stdout.flush()  # text already written goes first
            stdout = sys.stdout.buffer
        n = write_records_to(records, stdout, fmt)
    else:
        n = write_records(records, Path(out), fmt)
    return {
        "registration_id": registration_id,
        "registration_digest": entry.digest,
        "format": fmt,
        "out": str(out),
        "records": n,
        "ok": sum(r.status == "ok" for r in records),
        "infra_error": sum(r.status == "infra_error" for r in records),
        "chain": head,
    }
