"""``analyse`` leaves only this report's figures in ``figures/``: a PNG an earlier
analysis drew (or a stray picture) that the new report does not name is deleted, so a
reader of the folder never sees a picture of numbers the report no longer prints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.reports.test_report_primary_figure import _analysed, _cli

pytest.importorskip("matplotlib")


def test_reanalysis_deletes_pngs_the_report_does_not_name(tmp_path: Path) -> None:
    folder = _analysed(tmp_path / "ws", "music-library-pilot")
    pictures = folder / "figures"
    named = set(json.loads((folder / "report.json").read_text())["figures"])
    assert named and {p.stem for p in pictures.glob("*.png")} == named
    (pictures / "stale_figure.png").write_bytes(b"\x89PNG old")
    (pictures / "notes.txt").write_text("a person's file, not a figure")

    code, out = _cli("-w", tmp_path / "ws", "analyse", "music-library-pilot", "--allow-incomplete")
    assert code == 0, out
    assert not (pictures / "stale_figure.png").exists()
    assert {p.stem for p in pictures.glob("*.png")} == named  # every named figure kept
    assert (pictures / "notes.txt").read_text() == "a person's file, not a figure"
