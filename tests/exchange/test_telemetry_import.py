"""``prereg telemetry import`` (issue 41, item 5; InvokeRank 5.6): the documented JSON Lines
format, refusals naming the file, line and field with nothing written, a file imported
twice refused, and the append-only log's tamper detection."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

ROW = {
    "integration": "taptax",
    "host": "chatgpt",
    "tool": "create_invoice",
    "outcome": "ok",
    "hour": "2026-10-05T14:00:00Z",
}


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _log(ws: Path) -> Path:
    return ws / "registry" / "telemetry.jsonl"


def test_import_counts_calls_and_show_sums_them(cli: Any, ws: Path, tmp_path: Path) -> None:
    rows = [
        ROW,
        {**ROW, "count": 4, "duration_ms": 310.5},
        {**ROW, "host": "claude", "tool": "list_expenses", "outcome": "error", "first": True},
        {**ROW, "hour": "2026-10-05T15:00:00+00:00", "intent": "invoice", "duration_ms": None},
    ]
    r = cli("-w", ws, "telemetry", "import", _write(tmp_path / "t.jsonl", rows), "--json")
    assert r.code == 0, r.stderr
    data = r.json()
    assert (data["rows"], data["calls"], data["seq"]) == (4, 1 + 4 + 1 + 1, 1)
    shown = cli("-w", ws, "telemetry", "show", "--json").json()
    assert shown == {
        "evidence_class": "telemetry",
        "calls": {"taptax": {"chatgpt": 6, "claude": 1}},
    }
    stored = json.loads(_log(ws).read_text().splitlines()[0])
    assert stored["evidence_class"] == "telemetry"
    assert stored["rows"][3]["hour"] == "2026-10-05T15:00:00Z"  # one spelling of an hour


@pytest.mark.parametrize(
    ("row", "field", "says"),
    [
        ({**ROW, "user_id": "u-17"}, "user_id", "not a telemetry field"),
        ({**ROW, "prompt": "file my taxes"}, "prompt", "not a telemetry field"),
        ({**ROW, "hour": "2026-10-05T14:30:00Z"}, "hour", "minutes and seconds zero"),
        ({**ROW, "hour": "2026-10-05T14:00:00"}, "hour", "UTC"),
        ({**ROW, "hour": "2026-10-05T16:00:00+02:00"}, "hour", "UTC"),
        ({**ROW, "hour": "yesterday"}, "hour", "ISO 8601"),
        ({**ROW, "outcome": "maybe"}, "outcome", ""),
        ({**ROW, "count": 0}, "count", ""),
        ({**ROW, "count": "3"}, "count", ""),
        ({**ROW, "duration_ms": -1}, "duration_ms", ""),
        ({k: v for k, v in ROW.items() if k != "tool"}, "tool", ""),
        ({**ROW, "integration": "Not An Id"}, "integration", ""),
    ],
)
def test_bad_rows_are_exit_2_naming_line_and_field(
    cli: Any, ws: Path, tmp_path: Path, row: dict[str, Any], field: str, says: str
) -> None:
    path = _write(tmp_path / "t.jsonl", [ROW, row])
    r = cli("-w", ws, "telemetry", "import", path, "--json")
    assert r.code == 2
    err = json.loads(r.stdout or r.stderr)
    assert err["file"].endswith("t.jsonl:2")
    assert err["field"] == field
    assert says in err["message"]
    assert not _log(ws).exists()  # nothing written


def test_not_json_and_empty_files_are_exit_2(cli: Any, ws: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(ROW) + "\n[1, 2]\n", encoding="utf-8")
    assert cli("-w", ws, "telemetry", "import", bad).code == 2
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n", encoding="utf-8")
    assert cli("-w", ws, "telemetry", "import", empty).code == 2
    assert cli("-w", ws, "telemetry", "import", tmp_path / "missing.jsonl").code == 2
    assert not _log(ws).exists()


def test_the_same_file_twice_is_refused(cli: Any, ws: Path, tmp_path: Path) -> None:
    path = _write(tmp_path / "t.jsonl", [ROW])
    assert cli("-w", ws, "telemetry", "import", path).code == 0
    before = _log(ws).read_bytes()
    again = cli("-w", ws, "telemetry", "import", path, "--json")
    assert again.code == 2
    assert "already imported" in json.loads(again.stdout or again.stderr)["message"]
    assert _log(ws).read_bytes() == before
    # different bytes are another export
    assert cli("-w", ws, "telemetry", "import", _write(tmp_path / "u.jsonl", [ROW, ROW])).code == 0


@pytest.mark.parametrize("tamper", ["edit-count", "delete-first", "swap"])
def test_a_tampered_log_is_exit_3(cli: Any, ws: Path, tmp_path: Path, tamper: str) -> None:
    for n in (1, 2, 3):
        path = _write(tmp_path / f"t{n}.jsonl", [{**ROW, "count": n}])
        assert cli("-w", ws, "telemetry", "import", path).code == 0
    assert cli("-w", ws, "verify").code == 0  # the intact log is no problem
    lines = _log(ws).read_bytes().splitlines(keepends=True)
    if tamper == "edit-count":
        lines[1] = lines[1].replace(b'"count":2', b'"count":20')
        assert b'"count":20' in lines[1]
    elif tamper == "delete-first":
        lines = lines[1:]
    else:
        lines[0], lines[1] = lines[1], lines[0]
    _log(ws).write_bytes(b"".join(lines))
    r = cli("-w", ws, "telemetry", "show", "--json")
    assert r.code == 3
    assert "telemetry.jsonl" in json.loads(r.stdout or r.stderr)["file"]
    # and an import never extends a tampered log
    assert cli("-w", ws, "telemetry", "import", _write(tmp_path / "t9.jsonl", [ROW])).code == 3
    # and verify names it among the registry's problems
    checked = cli("-w", ws, "verify", "--json")
    assert checked.code == 3
    assert any(
        p["kind"] == "audit-log" and "telemetry.jsonl" in p["entry"]
        for p in json.loads(checked.stdout)["problems"]
    ), checked.stdout
