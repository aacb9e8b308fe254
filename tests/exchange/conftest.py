"""A workspace run once per module for the export and import tests of issue 16, item 4.

The bundled pilot (local host, no key) registered a second time under another id with
``outcome: completed`` and two repeats: ``completed`` counts positive tasks only, so the
Inspect export has unscored samples (negative tasks) beside scored ones, and two repeats
give two epochs.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from prereg.cli import main

PILOT = "drafts/music-library-pilot.yaml"
REG_ID = "completed-pilot"


def prereg(*args: str | Path) -> tuple[int, str]:
    """``prereg ARGS`` in-process (for module fixtures, where capsys is not at hand)."""
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            main([str(a) for a in args])
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return code, out.getvalue()


def jsonl_records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The workspace, with 100 of the registration's 112 units run (some unrun units)."""
    root = tmp_path_factory.mktemp("exchange") / "ws"
    assert prereg("init", root)[0] == 0
    draft = root / "drafts" / "completed.yaml"
    text = (root / PILOT).read_text()
    text = text.replace("id: music-library-pilot", f"id: {REG_ID}")
    text = text.replace("outcome: success", "outcome: completed")
    text = text.replace("repeats: 3", "repeats: 2")
    draft.write_text(text)
    assert prereg("-w", root, "register", draft)[0] == 0
    assert prereg("-w", root, "run", REG_ID, "--json", "--max-units", "100")[0] == 0
    return root


@pytest.fixture(scope="module")
def jsonl_export(ran: Path) -> list[dict[str, Any]]:
    """The registration's records as ``prereg export --format jsonl`` writes them."""
    out = ran.parent / "export.jsonl"
    assert prereg("-w", ran, "export", REG_ID, "--out", out, "--format", "jsonl")[0] == 0
    return jsonl_records(out)
