"""A write the machine refuses mid-run or mid-analysis: a clear exit 1, nothing half-made.

The disk filling up is simulated at the point where the bytes would be written (SQLite's
own error for the run store; the rename for report files), in-process.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from prereg.core import files
from prereg.core.errors import WriteFailure
from prereg.registry.registrations import Registry
from prereg.runners.store.sqlite import RunStore

PILOT = "drafts/music-library-pilot.yaml"


def test_a_full_disk_stops_the_run_with_exit_1_and_keeps_what_was_written(  # type: ignore[no-untyped-def]
    ws: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert cli("-w", ws, "register", ws / PILOT).code == 0
    assert cli("-w", ws, "run", "music-library-pilot", "--max-units", "3").code == 0
    real = RunStore._insert

    def full(conn: sqlite3.Connection, record: object, body: object = None) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    with monkeypatch.context() as patch:
        patch.setattr(RunStore, "_insert", staticmethod(full))
        result = cli("-w", ws, "run", "music-library-pilot", "--max-units", "6", "--json")
    assert result.code == 1, result.stdout
    assert result.json()["error"] == "WriteFailure"
    assert "disk is full" in result.json()["message"]
    assert RunStore._insert is real
    assert cli("-w", ws, "verify").code == 0  # the three records stand, the chain intact
    assert len(RunStore(ws / "runs").records()) == 3
    assert cli("-w", ws, "run", "music-library-pilot", "--max-units", "6").code == 0  # resumes


def test_a_full_disk_while_writing_the_report_leaves_no_temporary_files(  # type: ignore[no-untyped-def]
    ws: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert cli("-w", ws, "register", ws / PILOT).code == 0
    assert cli("-w", ws, "run", "music-library-pilot").code == 0

    def full(*_args: object) -> None:
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(files.os, "replace", full)
        result = cli("-w", ws, "analyse", "music-library-pilot", "--json")
    assert result.code == 1, result.stdout
    assert result.json()["error"] == "WriteFailure"
    leftovers = [p for p in (ws / "reports").rglob("*") if ".tmp" in p.name]
    assert leftovers == []


def test_a_registry_that_cannot_be_written_still_analyses_with_the_head_unpinned(  # type: ignore[no-untyped-def]
    ws: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert cli("-w", ws, "register", ws / PILOT).code == 0

    def refused(*_args: object) -> None:
        raise WriteFailure("cannot write: Read-only file system")

    with monkeypatch.context() as patch:
        patch.setattr(Registry, "anchor_runs", lambda *_args: None)  # a run with no anchor
        assert cli("-w", ws, "run", "music-library-pilot", "--max-units", "4").code == 0
        patch.setattr(Registry, "anchor_runs", refused)  # then a registry that refuses writes
        result = cli("-w", ws, "analyse", "music-library-pilot", "--allow-incomplete", "--json")
    assert result.code == 0, result.stdout
    chains = result.json()["provenance"]["run_chains"]
    assert [(c["count"], c["anchor"]) for c in chains.values()] == [(4, None)]
