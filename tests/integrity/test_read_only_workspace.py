"""A read-only workspace (issue 12, item 8): verify, export and analyse read it; what
needs a write says so (exit 1), never a traceback, never a stray file.

Tests run as root in CI, where ``chmod`` stops no write. So two kinds of test:

- in-process, with ``os.access`` answering as it would for a read-only workspace: the
  store is then opened read-only, and the connection the reads use is shown to refuse
  writes (reading never needs write access, proved by SQLite, not by a mock);
- for real: the workspace ``chmod -R a-w`` and the commands run by a process that
  cannot write it (this user when not root; as root, a forked child that drops to
  ``nobody``). Skipped where neither is possible.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import pwd
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from prereg.cli import main
from prereg.runners.store import sqlite as store_module
from prereg.runners.store.sqlite import RunStore
from tests.conftest import skip_unless_ci, tree_digest
from tests.integrity.tamper_tools import OTHER_ID, PILOT_ID, copy_workspace, db_path

Outcome = tuple[int, dict[str, Any] | None, str]


def _deny_writes_under(monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
    """``os.access(path, W_OK)`` is False under ``root``, as for a read-only workspace."""
    real = os.access
    root = root.resolve()

    def access(path: Any, mode: int, *args: Any, **kwargs: Any) -> bool:
        inside = Path(path).resolve().is_relative_to(root)
        if inside and mode & os.W_OK:
            return False
        return real(path, mode, *args, **kwargs)

    monkeypatch.setattr(os, "access", access)


# ---- in-process, os.access answering "read-only" -----------------------------------------


def test_a_store_it_cannot_write_is_read_through_a_read_only_connection(
    small_template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = copy_workspace(small_template, tmp_path / "ws")
    writable_records = RunStore(ws / "runs").records()
    _deny_writes_under(monkeypatch, ws)
    store = RunStore(ws / "runs")
    try:
        assert store.records() == writable_records
        assert store.readonly
        assert store._conn is not None
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            store._conn.execute("CREATE TABLE scratch (x)")
    finally:
        store.close()


def test_a_write_after_a_read_reopens_the_store_for_writing(
    small_template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = RunStore(db_path(small_template)).records()[:2]
    store_file = tmp_path / "runs" / "runs.sqlite"
    with RunStore(store_file) as store:
        store.append(first)
    with RunStore(store_file) as store:
        with monkeypatch.context() as patch:
            patch.setattr(store_module, "writable", lambda _path: False)
            assert [r.record_id for r in store.records()] == [first.record_id]
            assert store.readonly
        linked = store.append(second)
        assert not store.readonly
        assert linked.chain is not None and linked.chain.index == 1
    with RunStore(store_file) as store:
        assert [r.record_id for r in store.records()] == [first.record_id, second.record_id]


def test_verify_export_and_analyse_read_a_store_they_cannot_write(  # type: ignore[no-untyped-def]
    small_template: Path, tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = copy_workspace(small_template, tmp_path / "ws")
    expected = (small_template.parent / "export.jsonl").read_bytes()
    opened: list[bool] = []
    real_connect = RunStore._connect

    def spy(self: RunStore, create: bool) -> sqlite3.Connection | None:
        conn = real_connect(self, create)
        opened.append(self.readonly)
        return conn

    _deny_writes_under(monkeypatch, ws / "runs")
    monkeypatch.setattr(RunStore, "_connect", spy)
    assert cli("-w", ws, "verify").code == 0
    out = tmp_path / "out.jsonl"
    assert cli("-w", ws, "export", PILOT_ID, "--out", out).code == 0
    assert out.read_bytes() == expected
    result = cli("-w", ws, "analyse", PILOT_ID, "--allow-incomplete", "--json")
    assert result.code == 0, result.stdout
    assert opened and all(opened)  # every read went through a read-only connection


def test_a_store_with_an_unmerged_log_it_cannot_read_says_why(  # type: ignore[no-untyped-def]
    small_template: Path, tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mode=ro needs the -shm file; where it cannot be made and a -wal holds writes,
    the store is not read from the main file alone (that would drop records)."""
    ws = copy_workspace(small_template, tmp_path / "ws")
    db_path(ws).with_name("runs.sqlite-wal").write_bytes(b"\0" * 4096)
    real_connect = sqlite3.connect

    def connect(database: Any, *args: Any, **kwargs: Any) -> sqlite3.Connection:
        if "mode=ro" in str(database):  # as SQLite answers in a read-only folder
            raise sqlite3.OperationalError("attempt to write a readonly database")
        return real_connect(database, *args, **kwargs)

    _deny_writes_under(monkeypatch, ws / "runs")
    monkeypatch.setattr(store_module.sqlite3, "connect", connect)
    result = cli("-w", ws, "analyse", PILOT_ID, "--allow-incomplete", "--json")
    assert result.code == 1, result.stdout
    assert result.json()["error"] == "WriteFailure"
    assert "runs.sqlite-wal" in result.json()["message"]
    assert "Traceback" not in result.stderr


# ---- for real: a process that cannot write the workspace ---------------------------------


def _nobody() -> tuple[int, int] | None:
    try:
        entry = pwd.getpwnam("nobody")
    except KeyError:
        return None
    return entry.pw_uid, entry.pw_gid


def _prereg(args: list[str]) -> Outcome:
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(args)
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException as exc:  # a traceback: reported, so the test names it
        return 99, None, f"{err.getvalue()}\n{type(exc).__name__}: {exc}"
    try:
        data = json.loads(out.getvalue())
    except json.JSONDecodeError:
        data = None
    return code, data, err.getvalue()


def _run_unprivileged(commands: list[list[str]]) -> list[Outcome] | None:
    """``commands`` run by a process that cannot write the workspace; None if impossible.

    Not root: this process (chmod holds). Root: a forked child that becomes ``nobody``
    (the modules it needs are imported already: it may not read the interpreter's files).
    """
    if os.geteuid() != 0:
        return [_prereg(c) for c in commands]
    ids = _nobody()
    if ids is None or not hasattr(os, "fork"):
        return None
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        status = 0
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(ids[1])
            os.setuid(ids[0])
            outcomes = [_prereg(c) for c in commands]
            with os.fdopen(write, "w") as fh:
                json.dump(outcomes, fh)
        except BaseException:
            status = 1
        finally:
            os._exit(status)
    os.close(write)
    with os.fdopen(read) as fh:
        text = fh.read()
    _, status = os.waitpid(pid, 0)
    if status != 0 or not text:
        return None
    return [(int(c), d, str(e)) for c, d, e in json.loads(text)]


def _chmod_read_only(root: Path) -> None:
    for path in [root, *root.rglob("*")]:
        mode = path.lstat().st_mode
        if not stat.S_ISLNK(mode):
            path.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


@contextlib.contextmanager
def _shared_dir() -> Iterator[Path]:
    """A folder outside pytest's private tmp (mode 700) that ``nobody`` can enter."""
    base = Path(tempfile.mkdtemp(prefix="prereg-ro-"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        for path in [base, *base.rglob("*")]:
            if not path.is_symlink():
                path.chmod(path.stat().st_mode | stat.S_IWUSR)
        shutil.rmtree(base)


def _listing(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.fixture
def read_only_commands(small_template: Path) -> Callable[..., list[Outcome]]:
    """Run CLI commands against a ``chmod -R a-w`` copy of the small workspace (for real)."""

    def run(*commands: list[str], prepare: Callable[[Path], None] | None = None) -> list[Outcome]:
        with _shared_dir() as base:
            ws = copy_workspace(small_template, base / "ws")
            out = base / "out"
            out.mkdir(mode=0o777)
            out.chmod(0o777)
            if prepare is not None:
                prepare(ws)
            # the same commands once where they can write: every module they need loaded
            warm = copy_workspace(ws, base / "warm")
            for command in commands:
                _prereg([s.replace("{ws}", str(warm)).replace("{out}", str(base)) for s in command])
            _chmod_read_only(ws)
            before = _listing(ws)
            outcomes = _run_unprivileged(
                [
                    [s.replace("{ws}", str(ws)).replace("{out}", str(out)) for s in c]
                    for c in commands
                ]
            )
            if outcomes is None:
                skip_unless_ci("no user that cannot write the workspace (not root, no nobody)")
            assert _listing(ws) == before  # nothing made: no -wal, -shm, .tmp or lock file
            return outcomes

    return run


def test_a_read_only_workspace_verifies_exports_and_says_why_it_cannot_analyse(
    read_only_commands: Callable[..., list[Outcome]],
) -> None:
    verify, export, analyse, run, register = read_only_commands(
        ["-w", "{ws}", "verify", "--json"],
        ["-w", "{ws}", "export", PILOT_ID, "--out", "{out}/records.jsonl", "--json"],
        ["-w", "{ws}", "analyse", PILOT_ID, "--allow-incomplete", "--json"],
        ["-w", "{ws}", "run", PILOT_ID, "--max-units", "12", "--json"],
        ["-w", "{ws}", "register", "{ws}/drafts/music-library-confirmatory.yaml", "--json"],
    )
    assert verify[0] == 0, verify
    assert export[0] == 0 and export[1] is not None and export[1]["records"] == 12, export
    for code, data, err in (analyse, run, register):
        assert code == 1, (code, data, err)
        assert data is not None and data["error"] == "WriteFailure", data
        assert "Traceback" not in err
    assert analyse[1] is not None and "reports" in str(analyse[1]["file"])  # where it must write
    assert run[1] is not None and "cannot write" in run[1]["message"]
    assert register[1] is not None and "registry cannot be written" in register[1]["message"]


def test_a_read_only_workspace_with_a_merged_or_unmerged_log(
    read_only_commands: Callable[..., list[Outcome]],
) -> None:
    """A crashed writer's log with its -shm is read (mode=ro); without the -shm it cannot
    be, and the refusal says how to fix it."""

    def crashed_writer(ws: Path) -> None:
        code = (
            "import os, sqlite3, sys\n"
            "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
            "c.execute('PRAGMA wal_autocheckpoint=0')\n"
            "c.execute('CREATE TABLE scratch (x)')\n"
            "os._exit(0)\n"
        )
        subprocess.run([sys.executable, "-c", code, str(db_path(ws))], check=True)
        assert db_path(ws).with_name("runs.sqlite-wal").stat().st_size > 0

    (with_shm,) = read_only_commands(["-w", "{ws}", "verify", "--json"], prepare=crashed_writer)
    assert with_shm[0] == 0, with_shm

    def without_shm(ws: Path) -> None:
        crashed_writer(ws)
        db_path(ws).with_name("runs.sqlite-shm").unlink()

    (refused,) = read_only_commands(["-w", "{ws}", "verify", "--json"], prepare=without_shm)
    assert refused[0] == 1, refused
    assert refused[1] is not None and "runs.sqlite-wal" in refused[1]["message"]


def test_run_refuses_before_any_unit_when_it_cannot_write_the_store(
    ran_template: Path, tmp_path: Path, cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No unit runs (no paid call is lost) when no record could be written."""
    ws = copy_workspace(ran_template, tmp_path / "ws")
    runs = ws / "runs"
    real = os.access

    def denied(path: Any, mode: int, *args: Any, **kwargs: Any) -> bool:
        if mode & os.W_OK and Path(path).resolve().is_relative_to(runs.resolve()):
            return False
        return real(path, mode, *args, **kwargs)

    monkeypatch.setattr(store_module.os, "access", denied)
    before = tree_digest(runs)
    result = cli("-w", ws, "run", OTHER_ID, "--json")
    assert result.code == 1, result.stdout
    assert result.json()["error"] == "WriteFailure"
    assert "nothing was run" in result.json()["message"]
    assert tree_digest(runs) == before
