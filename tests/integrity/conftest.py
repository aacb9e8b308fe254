"""Workspaces built once per session for the tamper tests; each test copies the one it needs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integrity.tamper_tools import PILOT_ID, make_workspace, prereg


@pytest.fixture(scope="session")
def ran_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The pilot run in full (168 records, anchored), and a second registration with 4 runs."""
    return make_workspace(tmp_path_factory.mktemp("ran") / "ws", other=True)


@pytest.fixture(scope="session")
def registered_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The pilot registered, never run: where an export is imported."""
    return make_workspace(tmp_path_factory.mktemp("registered") / "ws", run=False)


@pytest.fixture(scope="session")
def small_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The pilot with 12 units run (a small store), its JSONL and CSV exports beside it."""
    root = make_workspace(tmp_path_factory.mktemp("small") / "ws", max_units=12)
    for fmt in ("jsonl", "csv"):
        out = root.parent / f"export.{fmt}"
        assert prereg("-w", root, "export", PILOT_ID, "--out", out, "-f", fmt)[0] == 0
    return root
