"""Telemetry (evidence class T) is never pooled with runs (DESIGN.md invariant 8; issue 41,
item 5): a run record carrying the class ``telemetry`` among a registration's local runs
is refused by ``analyse`` (exit 3) naming the run, as every other mixture is."""

from __future__ import annotations

from pathlib import Path

from prereg.registry.hosts import EvidenceClass
from prereg.runners.record import RunRecord
from tests.reports import append, make_lab, paired_records, record, register, registration


def test_telemetry_is_an_evidence_class_of_the_record() -> None:
    assert "telemetry" in EvidenceClass.__args__  # type: ignore[attr-defined]
    assert RunRecord.model_fields["evidence_class"].annotation is EvidenceClass


def test_a_telemetry_record_among_local_runs_is_refused(cli, ws: Path) -> None:  # type: ignore[no-untyped-def]
    tasks = make_lab(ws, n_tasks=8)
    digest = register(cli, ws, registration("lab-001"))
    ok = [[True] for _ in range(8)]
    records = paired_records("lab-001", digest, tasks, ok, ok)
    tele = record("lab-001", digest, "baseline", tasks[0], True, evidence_class="telemetry")
    records = [r for r in records if not (r.arm == "baseline" and r.task_id == tasks[0])]
    append(ws, [*records, tele])

    result = cli("-w", ws, "analyse", "lab-001", "--json")

    assert result.code == 3
    err = result.json()
    assert "never pooled" in err["message"]
    assert "telemetry: 1" in err["message"]
    assert any(tele.record_id in line and "telemetry" in line for line in err["details"])
