"""The report carries the registration's own calibration (issue 14, item 4).

Through the CLI: ``prereg calibrate ID`` stores its table beside the reports (keyed by
the registration digest); ``analyse`` then shows that table, with its seed and number of
replications, in report.json, report.md, report.html and the terminal's summary line.
A stored calibration whose digest is not the registration's is not shown; a note says
why. A draft's calibration is not stored.
"""

from __future__ import annotations

import json
from pathlib import Path

DRAFT = "drafts/podcast-selection-controls.yaml"
REG = "podcast-selection-controls"


def test_calibrate_then_analyse_shows_the_table_of_this_digest_only(ws: Path, cli) -> None:
    assert cli("-w", ws, "register", ws / DRAFT).code == 0
    assert cli("-w", ws, "run", REG, "--no-progress").code == 0
    cal = cli(
        "-w", ws, "calibrate", REG, "--sims", "60", "--draws", "200", "--seed", "11", "--json"
    )
    assert cal.code == 0, cal.stderr
    doc = cal.json()
    stored = ws / "reports" / REG / "calibration.json"
    assert doc["stored"] == f"reports/{REG}/calibration.json" and stored.is_file()
    on_disk = json.loads(stored.read_text())
    assert on_disk["digest"] == doc["digest"] and on_disk["rows"] == doc["rows"]

    terminal = cli("-w", ws, "analyse", REG)
    assert terminal.code == 0, terminal.stderr
    assert "calibration (seed 11, 60 replications)" in " ".join(terminal.stdout.split())
    report = json.loads((ws / "reports" / REG / "report.json").read_text())
    assert report["digest"] == doc["digest"]
    shown = report["calibration"]
    assert shown["seed"] == 11 and shown["sims"] == 60 and shown["bootstrap_draws"] == 200
    assert [r["estimate"] for r in shown["rows"]] == [r["estimate"] for r in doc["rows"]]
    assert report["calibration_note"] is None
    md = (ws / "reports" / REG / "report.md").read_text()
    assert "## Calibration of the registered analysis" in md
    assert "60 simulated data sets per scenario (replications), seed 11" in md
    primary = next(r for r in doc["rows"] if r["label"] == "primary")
    assert f"| primary | {primary['test'].replace('_', chr(92) + '_')} |" in md
    html = (ws / "reports" / REG / "report.html").read_text()
    assert "Calibration of the registered analysis" in html and "seed 11" in html

    # a calibration of another digest is ignored, with a note
    on_disk["digest"] = "sha256:" + "0" * 64
    stored.write_text(json.dumps(on_disk))
    report = cli("-w", ws, "analyse", REG, "--json").json()
    assert report["calibration"] is None
    assert "sha256:" + "0" * 64 in report["calibration_note"]
    assert "not shown" in report["calibration_note"]
    md = (ws / "reports" / REG / "report.md").read_text()
    assert "## Calibration of the registered analysis" not in md and "not shown" in md

    # so is a file that is not a calibration
    stored.write_text("{not json")
    report = cli("-w", ws, "analyse", REG, "--json").json()
    assert report["calibration"] is None
    assert "not a readable calibration" in report["calibration_note"]


def test_a_draft_calibration_is_not_stored(ws: Path, cli) -> None:
    cal = cli("-w", ws, "calibrate", ws / DRAFT, "--sims", "30", "--draws", "100", "--json")
    assert cal.code == 0, cal.stderr
    assert cal.json()["stored"] is None
    assert not (ws / "reports" / REG / "calibration.json").exists()
