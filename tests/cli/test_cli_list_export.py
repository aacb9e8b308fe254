"""``list`` adapts to the width (full ids, git-style digests) and ``export --out -``
writes to standard output (issue 16, items 4 and 5)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from prereg.core.output import short_digests
from prereg.runners.store.sqlite import RunStore
from tests.cli.helpers import PILOT, PILOT_ID, prereg

LONG_ID = "music-library-pilot-with-a-rather-long-registration-identifier-2026"


def _register_long(ws: Path, cli: Any) -> None:
    draft = ws / "drafts" / "long.yaml"
    text = (ws / PILOT).read_text().replace(f"id: {PILOT_ID}", f"id: {LONG_ID}")
    draft.write_text(text.replace("seed: 7", "seed: 8"))
    assert cli("-w", ws, "register", ws / PILOT).code == 0
    assert cli("-w", ws, "register", draft).code == 0


@pytest.mark.parametrize("columns", ["80", "50", "200"])
def test_list_shows_whole_ids_and_short_digests(ws: Path, cli: Any, columns: str) -> None:
    _register_long(ws, cli)
    digests = [r["digest"] for r in cli("-w", ws, "list", "--json").json()["registrations"]]
    assert all(len(d) == len("sha256:") + 64 for d in digests)  # whole under --json
    done = prereg("-w", ws, "list", env={"COLUMNS": columns})
    assert done.returncode == 0, done.stderr
    assert LONG_ID in done.stdout and PILOT_ID in done.stdout and "…" not in done.stdout
    width = max(int(columns), len(LONG_ID))  # an id longer than the terminal is shown whole
    assert all(len(line) <= width for line in done.stdout.splitlines()), done.stdout
    for digest in digests:
        assert digest[: len("sha256:") + 12] in done.stdout
        assert digest not in done.stdout


def test_short_digests_are_the_shortest_unique_prefix_of_at_least_12() -> None:
    a = "sha256:" + "0123456789abcd" + "0" * 50
    b = "sha256:" + "0123456789abce" + "0" * 50
    c = "sha256:" + "f" * 64
    short = short_digests([a, b, c, a])
    assert short == {a: a[:21], b: b[:21], c: c[:19]}  # 14 hex for the close pair, 12 else


def test_export_to_standard_output(
    ws: Path, cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert cli("-w", ws, "register", ws / PILOT).code == 0
    assert cli("-w", ws, "run", PILOT_ID, "--max-units", "5", "--json").code == 0
    monkeypatch.chdir(tmp_path)
    jsonl = cli("-w", ws, "export", PILOT_ID, "--out", "-")
    assert jsonl.code == 0, jsonl.stderr
    ids = [json.loads(line)["record_id"] for line in jsonl.stdout.splitlines()]
    stored = RunStore(ws / "runs").records(registration_id=PILOT_ID)
    assert sorted(ids) == sorted(r.record_id for r in stored) and len(ids) == 5
    assert "5 record(s)" in jsonl.stderr and "standard output" in jsonl.stderr
    assert not (tmp_path / "-").exists() and not (ws / "-").exists()
    csv = cli("-w", ws, "export", PILOT_ID, "--out", "-", "--format", "csv")
    assert csv.code == 0 and len(csv.stdout.splitlines()) == 6  # header and 5 rows
    assert csv.stdout.startswith("schema_version,") or "record_id" in csv.stdout.splitlines()[0]
    # what went to stdout imports back, as a file export would
    (tmp_path / "again.jsonl").write_text(jsonl.stdout)
    again = cli("-w", ws, "import", tmp_path / "again.jsonl", "--json")
    assert again.code == 0 and again.json()["already_stored"] == 5
    # an existing file named '-' is no obstacle: nothing checks or replaces it
    (tmp_path / "-").write_text("keep")
    assert cli("-w", ws, "export", PILOT_ID, "--out", "-").code == 0
    assert (tmp_path / "-").read_text() == "keep"


def test_export_to_standard_output_refuses_json(ws: Path, cli: Any) -> None:
    assert cli("-w", ws, "register", ws / PILOT).code == 0
    result = cli("-w", ws, "export", PILOT_ID, "--out", "-", "--json")
    assert result.code == 2
    assert "--out -" in json.loads(result.stdout)["message"]
