"""``prereg demo``: from an empty folder to a report, offline, with the verdict in --json."""

from __future__ import annotations

from pathlib import Path

import pytest


def test_demo_from_an_empty_folder(cli, tmp_path: Path) -> None:
    target = tmp_path / "fresh"
    result = cli("demo", "--dir", target, "--json")
    assert result.code == 0, result.stdout + result.stderr
    data = result.json()
    assert data["registration"] == "music-library-pilot"
    assert data["kind"] == "exploratory" and data["mode"] == "exploratory"
    assert data["verdict"] in ("supported", "not_supported", "inconclusive")
    assert data["complete"] is True
    assert data["runs"]["evidence_class"] == "local"
    assert data["demo"]["run"]["remaining"] == 0
    folder = target / "reports" / "music-library-pilot"
    assert Path(data["report_dir"]) == folder.resolve()
    for name in ("report.json", "report.md", "report.html"):
        assert (folder / name).is_file()
    rates = [a["rate"] for a in data["arms"]]
    assert all(0 < r < 1 for r in rates)  # the local host makes the comparison non-trivial

    again = cli("demo", "--dir", target, "--json")  # re-running resumes, changes nothing
    assert again.code == 0
    second = again.json()
    assert second["demo"]["run"]["skipped_existing"] == second["demo"]["run"]["planned"]
    assert second["verdict"] == data["verdict"] and second["primary"] == data["primary"]


def test_demo_default_folder_comes_from_the_environment(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PREREG_DEMO_DIR", str(tmp_path / "from-env"))
    result = cli("demo")
    assert result.code == 0, result.stderr
    assert (tmp_path / "from-env" / "reports" / "music-library-pilot" / "report.html").is_file()
    assert "report:" in result.stdout and "Verdict: supported" not in result.stdout
    assert not (tmp_path / "prereg-demo").exists()

    monkeypatch.delenv("PREREG_DEMO_DIR")
    assert cli("demo", "--json").code == 0
    assert (tmp_path / "prereg-demo" / "reports" / "music-library-pilot").is_dir()
