"""A kill at any point of a registry write leaves no registration or a complete one (item 8).

The mirror of a ledger line (frozen copy, claim, anchor) is written under a pending name,
the line appended, then the mirror renamed. A kill before the append leaves a pending
file that is no registration; a kill after it leaves a pending mirror that readers use.
Neither makes ``verify`` raise a false alarm, and the next write tidies up.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from prereg.registry import registrations as registry_module

PILOT = "drafts/music-library-pilot.yaml"
OTHER = "drafts/other.yaml"


def _other(ws: Path) -> Path:
    path = ws / OTHER
    path.write_text((ws / PILOT).read_text().replace("id: music-library-pilot", "id: other"))
    return path


def _killed_at(monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    """Interrupt the next registry write before the ledger append or before the rename."""
    if where == "before-line":

        def boom(*_args: object) -> None:
            raise KeyboardInterrupt

        monkeypatch.setattr(registry_module.Ledger, "append_prepared", boom)
    else:
        real = os.replace

        def replace(src: object, dst: object) -> None:
            if str(src).endswith(registry_module.PENDING_SUFFIX):
                raise KeyboardInterrupt
            real(src, dst)  # type: ignore[arg-type]

        monkeypatch.setattr(registry_module.os, "replace", replace)


def test_killed_before_the_line_no_registration_and_no_alarm(  # type: ignore[no-untyped-def]
    ws: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as patch:
        _killed_at(patch, "before-line")
        assert cli("-w", ws, "register", ws / PILOT).code == 130
    assert list((ws / "registry" / "frozen").glob("*.pending"))  # what the kill left
    verify = cli("-w", ws, "verify", "--json")
    assert verify.code == 0, verify.stdout
    assert json.loads(verify.stdout)["registrations"] == 0
    assert cli("-w", ws, "show", "music-library-pilot").code == 2  # no such registration
    assert cli("-w", ws, "register", ws / PILOT).code == 0  # the next write tidies up
    assert not list((ws / "registry" / "frozen").glob("*.pending"))
    assert cli("-w", ws, "verify").code == 0


def test_killed_after_the_line_a_complete_registration(  # type: ignore[no-untyped-def]
    ws: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as patch:
        _killed_at(patch, "after-line")
        assert cli("-w", ws, "register", ws / PILOT).code == 130
    assert not (ws / "registry" / "frozen" / "music-library-pilot.json").exists()
    verify = cli("-w", ws, "verify", "--json")
    assert verify.code == 0, verify.stdout
    assert json.loads(verify.stdout)["registrations"] == 1
    assert cli("-w", ws, "run", "music-library-pilot", "--max-units", "2").code == 0
    assert cli("-w", ws, "register", _other(ws)).code == 0
    assert (ws / "registry" / "frozen" / "music-library-pilot.json").exists()
    assert cli("-w", ws, "verify").code == 0


def test_a_claim_killed_before_its_line_is_no_claim(  # type: ignore[no-untyped-def]
    ws: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert cli("-w", ws, "register", ws / "drafts/music-library-confirmatory.yaml").code == 0
    with monkeypatch.context() as patch:
        _killed_at(patch, "before-line")
        assert cli("-w", ws, "run", "music-library-confirmatory", "--max-units", "1").code == 130
    assert cli("-w", ws, "verify").code == 0
    assert cli("-w", ws, "run", "music-library-confirmatory", "--max-units", "1").code == 0
    assert cli("-w", ws, "verify").code == 0


def test_a_refused_registration_writes_not_even_the_lock_file(ws: Path, cli) -> None:  # type: ignore[no-untyped-def]
    draft = ws / "drafts" / "orphan.yaml"
    draft.write_text(
        (ws / PILOT).read_text().replace("id: music-library-pilot", "id: orphan")
        + "supersedes: nothing-here\n"
    )
    before = sorted(str(p.relative_to(ws)) for p in (ws / "registry").rglob("*"))
    result = cli("-w", ws, "register", draft, "--json")
    assert result.code == 2, result.stdout
    assert sorted(str(p.relative_to(ws)) for p in (ws / "registry").rglob("*")) == before
