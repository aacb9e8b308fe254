"""Loading with refusal: foreign digests, mixed evidence classes, strays, incompleteness."""

from __future__ import annotations

import hashlib
from pathlib import Path

from tests.reports import append, make_lab, paired_records, record, register, registration


def _lab(cli, ws: Path, reg_id: str = "lab-001", n: int = 8):  # type: ignore[no-untyped-def]
    tasks = make_lab(ws, n_tasks=n)
    digest = register(cli, ws, registration(reg_id))
    return tasks, digest


def _all_succeed(n: int) -> list[list[bool]]:
    return [[True] for _ in range(n)]


def test_foreign_digest_is_refused_naming_the_runs(cli, ws: Path) -> None:
    tasks, digest = _lab(cli, ws)
    append(ws, paired_records("lab-001", digest, tasks, _all_succeed(8), _all_succeed(8)))
    other = "sha256:" + hashlib.sha256(b"another registration").hexdigest()
    stray = record("lab-001", other, "baseline", tasks[0], True)
    append(ws, [stray])

    result = cli("-w", ws, "analyse", "lab-001", "--json")

    assert result.code == 3
    err = result.json()
    assert err["error"] == "IntegrityError"
    assert other in err["message"]
    named = "\n".join(err["details"])
    assert stray.record_id in named and other in named and f"baseline/{tasks[0]}" in named
    assert not (ws / "reports" / "lab-001").exists()  # nothing written on refusal


def test_run_carrying_the_digest_under_another_name_is_refused(cli, ws: Path) -> None:
    tasks, digest = _lab(cli, ws)
    append(ws, paired_records("lab-001", digest, tasks, _all_succeed(8), _all_succeed(8)))
    append(ws, [record("someone-else", digest, "semantic", tasks[1], True, repeat=5)])

    result = cli("-w", ws, "analyse", "lab-001", "--json")

    assert result.code == 3
    assert "someone-else" in "\n".join(result.json()["details"])


def test_mixed_evidence_classes_are_refused(cli, ws: Path) -> None:
    tasks, digest = _lab(cli, ws)
    records = paired_records("lab-001", digest, tasks, _all_succeed(8), _all_succeed(8))
    api = record("lab-001", digest, "baseline", tasks[0], True, repeat=0, evidence_class="api")
    records = [r for r in records if not (r.arm == "baseline" and r.task_id == tasks[0])]
    append(ws, [*records, api])

    result = cli("-w", ws, "analyse", "lab-001", "--json")

    assert result.code == 3
    err = result.json()
    assert "never pooled" in err["message"]
    assert any(api.record_id in line and "api" in line for line in err["details"])


def test_run_of_an_unplanned_unit_is_refused(cli, ws: Path) -> None:
    tasks, digest = _lab(cli, ws)
    append(ws, paired_records("lab-001", digest, tasks, _all_succeed(8), _all_succeed(8)))
    extra = record("lab-001", digest, "semantic", tasks[2], True, repeat=1)  # 1 repeat planned
    append(ws, [extra])

    result = cli("-w", ws, "analyse", "lab-001", "--json")

    assert result.code == 3
    assert any(extra.record_id in line for line in result.json()["details"])


def test_incomplete_is_refused_then_accepted_as_exploratory(cli, ws: Path) -> None:
    tasks, digest = _lab(cli, ws)
    records = paired_records("lab-001", digest, tasks, _all_succeed(8), _all_succeed(8))
    append(ws, records[:-3])  # the last three semantic units never ran

    refused = cli("-w", ws, "analyse", "lab-001", "--json")
    assert refused.code == 4
    err = refused.json()
    assert "13 of 16" in err["message"] and "--allow-incomplete" in err["message"]
    assert {f"semantic/{t}/r0" for t in tasks[-3:]} <= set(err["details"])

    accepted = cli("-w", ws, "analyse", "lab-001", "--allow-incomplete", "--json")
    assert accepted.code == 0, accepted.stderr
    data = accepted.json()
    assert data["verdict"] == "incomplete"
    assert data["complete"] is False and data["mode"] == "exploratory"
    assert data["completeness"]["missing"] == 3
    # a confirmatory registration's exploratory report never lands where the
    # confirmatory one would
    assert Path(data["report_dir"]) == ws / "reports" / "lab-001" / "exploratory"
    assert not (ws / "reports" / "lab-001" / "report.json").exists()


def test_infrastructure_failures_are_counted_and_keep_the_unit_open(cli, ws: Path) -> None:
    tasks, digest = _lab(cli, ws)
    records = paired_records("lab-001", digest, tasks, _all_succeed(8), _all_succeed(8))
    failed = record("lab-001", digest, "semantic", tasks[0], None, status="infra_error")
    rest = [r for r in records if not (r.arm == "semantic" and r.task_id == tasks[0])]
    append(ws, [*rest, failed])

    refused = cli("-w", ws, "analyse", "lab-001", "--json")
    assert refused.code == 4
    assert "failed on infrastructure" in refused.json()["message"]

    retry = next(r for r in records if r.arm == "semantic" and r.task_id == tasks[0])
    append(ws, [retry])
    done = cli("-w", ws, "analyse", "lab-001", "--json")
    assert done.code == 0, done.stderr
    data = done.json()
    assert data["complete"] is True
    assert data["runs"]["infra_errors"] == 1
    assert data["completeness"]["infra_errors_open"] == 0
    semantic = next(a for a in data["arms"] if a["id"] == "semantic")
    assert semantic["infra_errors"] == 1 and semantic["runs_ok"] == 8
