"""``prereg study run``: the bundled study end to end through the command line, offline."""

from __future__ import annotations

import json
from pathlib import Path

STUDY = "experiments/toolbottleneck/study.yaml"


def test_the_bundled_study_runs_and_reports(ws: Path, cli, tmp_path: Path) -> None:
    out = tmp_path / "tb"
    result = cli("-w", ws, "study", "run", ws / STUDY, "--out", out, "--draws", "200", "--json")
    assert result.code == 0, result.stderr
    summary = result.json()
    assert summary["evidence_class"] == "simulated"
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert len(records) == summary["episodes"] > 0
    assert sum(1 for r in records if r["success"]) == summary["successes"]
    report = (out / "report.md").read_text()
    assert report.startswith("# Study ") and "Simulated policy" in report
    for section in ("## Capacity contrasts", "## Failure census", "## Repairs against switches"):
        assert section in report, section


def test_an_out_that_is_a_file_is_refused_before_anything_runs(
    ws: Path, cli, tmp_path: Path
) -> None:
    out = tmp_path / "taken"
    out.write_text("mine")
    result = cli("-w", ws, "study", "run", ws / STUDY, "--out", out)
    assert result.code == 2 and "--out" in result.stderr
    assert out.read_text() == "mine"
