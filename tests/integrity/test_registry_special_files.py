"""The registry's own files read through the one safe reader (issue 40, item 4 remainder).

The ledger and the content-addressed objects were read with ``Path.read_bytes``: a FIFO in
their place hung every command for ever, and a device (``/dev/zero``) was read until memory
ran out. Each is now refused with exit 3 naming the file, without blocking.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integrity.tamper_tools import PILOT_ID, copy_workspace
from tests.waiting import HANG_S


def _prereg(ws: Path, *args: str) -> tuple[int, str]:
    """``prereg`` in a child process, so a read that blocks shows as a hang, not a stuck suite."""
    done = subprocess.run(
        [sys.executable, "-m", "prereg", "-w", str(ws), *args],
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )
    return done.returncode, done.stdout + done.stderr


def _object_of(ws: Path) -> Path:
    frozen = json.loads((ws / "registry" / "frozen" / f"{PILOT_ID}.json").read_bytes())
    digest = str(frozen["source"]["object"]).removeprefix("sha256:")
    return ws / "registry" / "objects" / digest[:2] / digest[2:]


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_special_file_in_place_of_the_ledger_is_refused(
    ran_template: Path, tmp_path: Path, kind: str
) -> None:
    ws = copy_workspace(ran_template, tmp_path / "ws")
    ledger = ws / "registry" / "ledger.jsonl"
    ledger.unlink()
    if kind == "fifo":
        os.mkfifo(ledger)
    else:
        ledger.symlink_to("/dev/zero")
    for args in (("verify",), ("analyse", PILOT_ID)):
        code, out = _prereg(ws, *args, "--json")
        assert code == 3, out
        assert "ledger" in out


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_special_file_in_place_of_an_object_is_refused(
    ran_template: Path, tmp_path: Path, kind: str
) -> None:
    ws = copy_workspace(ran_template, tmp_path / "ws")
    obj = _object_of(ws)
    obj.chmod(0o644)
    obj.unlink()
    if kind == "fifo":
        os.mkfifo(obj)
    else:
        obj.symlink_to("/dev/zero")
    for args in (("verify",), ("analyse", PILOT_ID), ("run", PILOT_ID)):
        code, out = _prereg(ws, *args, "--json")
        assert code == 3, (args, out)
