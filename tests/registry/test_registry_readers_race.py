"""Readers hold no lock: a writer's steps landing between a reader's looks are no alarm.

A writer writes a mirror pending, appends the ledger line, then renames the mirror to
its final name; ``verify``, ``list`` and every command that reads a registration do so
without the lock. These tests put the writer's step exactly between two of the
reader's looks (the interleavings that failed CI once, in the concurrent-register test)
and require the reader to see an intact registry. Each would fail if the reader trusted
a single look: "neither name" for a mirror mid-rename, or "no ledger line" for a file
whose line was appended after the ledger was read.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from prereg.commands.registry_cmds import init_workspace
from prereg.registry import registrations
from prereg.registry.ledger import Ledger, LedgerLine
from prereg.registry.registrations import PENDING_SUFFIX, Registry
from prereg.registry.verify import verify

_READ_BYTES = Path.read_bytes


@pytest.fixture
def registry(tmp_path: Path) -> Registry:
    """Two registrations and a locked-split claim, verified intact."""
    init_workspace(tmp_path)
    registry = Registry(tmp_path / "registry")
    for draft in ("music-library-pilot.yaml", "music-library-confirmatory.yaml"):
        registry.register(tmp_path / "drafts" / draft, tmp_path / "experiments")
    registry.claim_locked_split(registry.get("music-library-confirmatory"))
    assert verify(registry).ok
    return registry


def _rename_on_first_pending_read(monkeypatch: pytest.MonkeyPatch, final: Path) -> list[str]:
    """Leave ``final`` pending; the reader's first read of the pending name finds the
    writer has just renamed it (the rename lands after the reader chose that name)."""
    os.replace(final, final.with_name(final.name + PENDING_SUFFIX))
    fired: list[str] = []

    def read_bytes(self: Path) -> bytes:
        if self.name == final.name + PENDING_SUFFIX and not fired:
            fired.append(self.name)
            os.replace(self, final)
            raise FileNotFoundError(str(self))
        return _READ_BYTES(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    original = registrations.read_regular_file

    def read_regular_file(path: str | Path, *, limit: int, what: str) -> bytes:
        # the registry's own reader (regular files only, bounded) meets the same race
        if Path(path).name == final.name + PENDING_SUFFIX and not fired:
            fired.append(Path(path).name)
            os.replace(path, final)
            raise FileNotFoundError(str(path))
        return original(path, limit=limit, what=what)

    monkeypatch.setattr(registrations, "read_regular_file", read_regular_file)
    return fired


def test_a_frozen_copy_renamed_mid_read_is_found(
    registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    fired = _rename_on_first_pending_read(monkeypatch, registry.frozen_path("music-library-pilot"))
    ids = [entry.id for entry in registry.entries()]
    assert fired, "the interleaving under test did not happen"
    assert ids == ["music-library-pilot", "music-library-confirmatory"]


def test_verify_does_not_report_a_frozen_copy_renamed_mid_read(
    registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    fired = _rename_on_first_pending_read(monkeypatch, registry.frozen_path("music-library-pilot"))
    report = verify(registry)
    assert fired and report.problems == []


def test_verify_does_not_report_a_claim_renamed_mid_read(
    registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    (claim,) = sorted(registry.claims_dir.glob("*.json"))
    fired = _rename_on_first_pending_read(monkeypatch, claim)
    report = verify(registry)
    assert fired and report.problems == []


def _stale_first_read(monkeypatch: pytest.MonkeyPatch, registry: Registry) -> list[bool]:
    """The reader's first look at the ledger predates its last line (appended since)."""
    stale: list[bool] = []
    lines = Ledger.lines

    def first_read_stale(self: Ledger) -> list[LedgerLine]:
        current = lines(self)
        if not stale:
            stale.append(True)
            return current[:-1]
        return current

    monkeypatch.setattr(Ledger, "lines", first_read_stale)
    return stale


def test_a_claim_appended_after_the_ledger_was_read_is_not_truncation(
    registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    stale = _stale_first_read(monkeypatch, registry)  # the last line is the claim
    report = verify(registry)
    assert stale and report.problems == []


def test_a_registration_appended_after_the_ledger_was_read_is_not_truncation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    init_workspace(tmp_path)
    registry = Registry(tmp_path / "registry")
    registry.register(tmp_path / "drafts" / "music-library-pilot.yaml", tmp_path / "experiments")
    stale = _stale_first_read(monkeypatch, registry)
    report = verify(registry)
    assert stale and report.problems == []


def test_a_truncated_ledger_is_still_reported(registry: Registry) -> None:
    """The second look is no amnesty: a mirror with no line now is reported."""
    ledger = registry.ledger.path
    os.chmod(ledger, 0o644)
    lines = ledger.read_bytes().splitlines(keepends=True)
    ledger.write_bytes(b"".join(lines[:-1]))  # drop the claim's line
    kinds = {p.kind for p in verify(registry).problems}
    assert "ledger-truncated" in kinds


def test_a_half_written_last_line_is_waited_for(
    registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read that catches an append half-copied (no newline yet) reads again."""
    whole = _READ_BYTES(registry.ledger.path)
    reads: list[int] = []

    def read_file(self: Ledger) -> bytes:
        if self.path == registry.ledger.path:
            reads.append(1)
            return whole[: len(whole) - 40] if len(reads) == 1 else whole
        return _READ_BYTES(self.path)

    monkeypatch.setattr(Ledger, "_read_file", read_file)
    report = verify(registry)
    assert len(reads) >= 2 and report.problems == []


def test_verify_while_registering_never_alarms(tmp_path: Path) -> None:
    """The real thing: registers and verifies in separate processes, at once."""
    init_workspace(tmp_path)
    draft = (tmp_path / "drafts" / "music-library-pilot.yaml").read_text()
    writers = []
    for i in range(4):
        path = tmp_path / "drafts" / f"race-{i}.yaml"
        path.write_text(draft.replace("id: music-library-pilot", f"id: race-{i}"))
        command = [sys.executable, "-m", "prereg", "-w", str(tmp_path), "register", str(path)]
        writers.append(subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    reader = [sys.executable, "-m", "prereg", "-w", str(tmp_path), "verify", "--json"]
    verdicts = []
    while any(w.poll() is None for w in writers):
        verdicts.append(subprocess.run(reader, capture_output=True, check=False))
    codes = [w.wait(timeout=120) for w in writers]
    assert codes == [0] * 4, [w.stderr.read() for w in writers if w.stderr]
    alarms = [v.stdout for v in verdicts if v.returncode != 0]
    assert alarms == []
