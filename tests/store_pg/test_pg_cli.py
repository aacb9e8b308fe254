"""``--store`` on the command line: bad URLs and unreachable servers are clean errors with
the CLI contract's exit codes, and nothing is written (no server needed)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult, tree_digest

GONE = "postgresql://prereg:hunter2@/prereg?host=/nonexistent-prereg-socket-dir"


@pytest.fixture
def registered(ws: Path, cli: Callable[..., CliResult]) -> Path:
    draft = ws / "drafts" / "music-library-pilot.yaml"
    assert cli("-w", ws, "register", draft, "--json").code == 0
    return ws


CASES = [  # (command, --store, exit code, what the message says)
    ("run", "postgresql://[bad", 2, "malformed PostgreSQL URL"),
    ("run", "mysql://h/db", 2, "unsupported run store URL scheme 'mysql://'"),
    ("run", GONE, 1, "cannot reach the run store"),
    ("analyse", GONE, 1, "cannot reach the run store"),
    ("export", GONE, 1, "cannot reach the run store"),
    ("import", "postgresql://[bad", 2, "malformed PostgreSQL URL"),
    ("run --dry-run", GONE, 1, "cannot reach the run store"),
    ("run --batch", GONE, 2, "workers on other machines"),
]


def test_bad_or_unreachable_store_is_a_clean_error_and_writes_nothing(
    registered: Path, cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    before = tree_digest(registered)
    export = tmp_path / "out.jsonl"
    export.write_text("")
    for command, store, code, says in CASES:
        verb, *flags = command.split()
        target = [str(export)] if verb == "import" else ["music-library-pilot"]
        extra = ["-o", str(tmp_path / "new.jsonl")] if verb == "export" else []
        result = cli("-w", registered, verb, *target, *flags, "--store", store, *extra)
        assert result.code == code, (command, store, result.stderr)
        assert says in result.stderr and "Traceback" not in result.stderr, result.stderr
        assert "hunter2" not in result.stderr + result.stdout  # a password is never printed
    assert tree_digest(registered) == before  # nothing run, written or anchored
    assert not (tmp_path / "new.jsonl").exists()


def test_environment_names_the_store(
    registered: Path, cli: Callable[..., CliResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PREREG_STORE", GONE)
    result = cli("-w", registered, "run", "music-library-pilot")
    assert result.code == 1 and "cannot reach the run store" in result.stderr
    assert not (registered / "runs" / "runs.sqlite").exists()  # not silently SQLite


def test_verify_reads_the_store_it_is_given(
    registered: Path, cli: Callable[..., CliResult], pg_url: str
) -> None:
    """``verify --store`` checks the PostgreSQL chains the registry anchored; the
    workspace's own (empty) store lacks them, which verify reports as a problem."""
    run = cli("-w", registered, "run", "music-library-pilot", "--store", pg_url, "--json")
    assert run.code == 0, run.stderr
    shared = cli("-w", registered, "verify", "--store", pg_url, "--json")
    assert shared.code == 0, shared.stdout
    assert shared.json()["runs"]["records"] == run.json()["completed"] > 0
    local = cli("-w", registered, "verify", "--json")
    assert local.code == 3 and local.json()["runs"]["records"] == 0
    assert [p["kind"] for p in local.json()["runs"]["problems"]] == ["runs-anchor"]
