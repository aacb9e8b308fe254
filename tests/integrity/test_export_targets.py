"""``export --out`` never overwrites the registry, the run store or a file unasked (item 8)."""

from __future__ import annotations

import errno
import hashlib
from pathlib import Path

import pytest

from prereg.core import files

PILOT = "drafts/music-library-pilot.yaml"


def _digest_tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def ran(ws: Path, cli) -> Path:  # type: ignore[no-untyped-def]
    assert cli("-w", ws, "register", ws / PILOT).code == 0
    assert cli("-w", ws, "run", "music-library-pilot", "--max-units", "4").code == 0
    return ws


@pytest.mark.parametrize("target", ["runs/runs.sqlite", "registry/ledger.jsonl", "runs/x.jsonl"])
def test_export_into_the_store_or_registry_is_refused(ran: Path, cli, target: str) -> None:  # type: ignore[no-untyped-def]
    before = {"runs": _digest_tree(ran / "runs"), "registry": _digest_tree(ran / "registry")}
    result = cli("-w", ran, "export", "music-library-pilot", "--out", ran / target, "--json")
    assert result.code == 2, result.stdout
    assert result.json()["field"] == "--out"
    assert {
        "runs": _digest_tree(ran / "runs"),
        "registry": _digest_tree(ran / "registry"),
    } == before


def test_an_existing_file_needs_force(ran: Path, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "records.jsonl"
    out.write_text("keep me\n")
    result = cli("-w", ran, "export", "music-library-pilot", "--out", out, "--json")
    assert result.code == 2 and "--force" in result.json()["message"]
    assert out.read_text() == "keep me\n"
    forced = cli("-w", ran, "export", "music-library-pilot", "--out", out, "--force", "--json")
    assert forced.code == 0 and forced.json()["records"] == 4


def test_a_folder_is_refused(ran: Path, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    result = cli("-w", ran, "export", "music-library-pilot", "--out", tmp_path, "--json")
    assert result.code == 2


def test_a_full_disk_leaves_no_temporary_file(  # type: ignore[no-untyped-def]
    ran: Path, cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(*_args: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files.os, "replace", full)  # the rename after the last write
    out = tmp_path / "exports" / "r.jsonl"
    result = cli("-w", ran, "export", "music-library-pilot", "--out", out, "--json")
    assert result.code == 1, result.stdout
    error = result.json()
    assert error["error"] == "WriteFailure" and "No space left" in error["message"]
    assert list(out.parent.iterdir()) == []
