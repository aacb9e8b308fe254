"""One verification rule for every append-only table (issue 40, item 1).

The verdict store's indexed columns (``judge_digest``, the gold table's ``annotator``,
``record_id``, ``registration_digest``) must equal the hashed body, like the run store's:
an attacker who edits one with sqlite3 (the UPDATE trigger dropped and put back exactly)
is named by ``verify``, and ``analyse``, ``judge`` and ``export`` refuse (exit 3) naming
the table and the column. Before issue 40 every command exited 0, and editing
``judge_digest`` freed the one-verdict-per-run slot for a second verdict with the
outcome flipped, which ``analyse`` counted.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from types import SimpleNamespace

import pytest

from prereg.cli import main
from prereg.registry.tables import CHAIN_COLUMNS, TABLES
from prereg.runners.judging.verdicts import Verdict, VerdictStore
from tests.judging.gold_helpers import stored_verdicts
from tests.judging.helpers import local_judges, registration, write

STORE = ("runs", "verdicts.sqlite")
REG = "judged"


def _main(*args: str | Path) -> SimpleNamespace:
    try:
        main([str(a) for a in args])
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    return SimpleNamespace(code=code)


@pytest.fixture(scope="module")
def _base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Registered, run, judged by two local judges, three gold labels: built once."""
    root = tmp_path_factory.mktemp("tables")
    ws = root / "ws"
    assert _main("init", ws).code == 0
    path = write(ws, registration(REG, judge=local_judges(), repeats=2))
    assert _main("-w", ws, "register", path).code == 0
    assert _main("-w", ws, "run", REG, "--no-progress").code == 0
    assert _main("-w", ws, "judge", REG).code == 0
    runs = [str(v["record_id"]) for v in stored_verdicts(ws)]
    gold = root / "gold.csv"
    gold.write_text("run_id,label,annotator\n" + "".join(f"{r},1,ann1\n" for r in runs[:3]))
    assert _main("-w", ws, "judge", REG, "--gold", gold).code == 0
    return ws


@pytest.fixture
def judged(_base: Path, tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    shutil.copytree(_base, ws)
    return ws


def _update(ws: Path, table: str, column: str, value: object, seq: int | None = None) -> None:
    """UPDATE one row's column with the trigger dropped, then the trigger put back as it
    was: the schema is untouched, the body and its hash too."""
    trigger = f"{table}_no_update"
    conn = sqlite3.connect(ws.joinpath(*STORE))
    try:
        (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (trigger,)).fetchone()
        conn.execute(f"DROP TRIGGER {trigger}")
        if seq is None:
            (seq,) = conn.execute(f"SELECT min(seq) FROM {table}").fetchone()
        conn.execute(f"UPDATE {table} SET {column} = ? WHERE seq = ?", (value, seq))
        conn.execute(sql)
        conn.commit()
    finally:
        conn.close()


def _other_run(ws: Path, table: str) -> str:
    """A run of the registration that the table has no row about (so the unique index
    takes the edit)."""
    conn = sqlite3.connect(ws.joinpath(*STORE))
    try:
        rows = {str(r) for (r,) in conn.execute(f"SELECT record_id FROM {table}")}
    finally:
        conn.close()
    runs = sqlite3.connect(ws / "runs" / "runs.sqlite")
    try:
        ids = [str(r) for (r,) in runs.execute("SELECT record_id FROM records ORDER BY seq")]
    finally:
        runs.close()
    return next(r for r in ids if r not in rows)


CASES = [
    ("verdicts", "judge_digest", "sha256:" + "0" * 64),
    ("verdicts", "record_id", None),  # another run's id
    ("verdicts", "registration_digest", "sha256:" + "1" * 64),
    ("gold", "annotator", "someone-else"),
    ("gold", "record_id", None),
    ("gold", "registration_digest", "sha256:" + "1" * 64),
]


@pytest.mark.parametrize(("table", "column", "value"), CASES)
def test_an_edited_column_is_named_by_every_reader(
    cli, judged: Path, tmp_path: Path, table: str, column: str, value: object
) -> None:
    ws = judged
    _update(ws, table, column, value if value is not None else _other_run(ws, table))
    named = f"table {table}"

    checked = cli("-w", ws, "verify", "--json")
    assert checked.code == 3
    problems = [p for p in checked.json()["problems"] if p["kind"] == "verdicts-chain"]
    assert any(named in p["message"] and column in p["message"] for p in problems), problems

    for args in (
        ("analyse", REG),
        ("judge", REG),
        ("export", REG, "--out", tmp_path / "out.jsonl"),
    ):
        refused = cli("-w", ws, *args)
        assert refused.code == 3, (args, refused.stderr)
        said = " ".join(refused.stderr.split())
        assert named in said and f"column(s) {column}" in said, (args, said)
    assert not (tmp_path / "out.jsonl").exists()
    assert not (ws / "reports" / REG).exists()


def _met(ws: Path) -> dict[str, int]:
    """met / judged of the completion judge's verdicts, as stored."""
    verdicts = [v for v in stored_verdicts(ws) if v["parse"] == "ok" and v["met"] is not None]
    return {"met": sum(bool(v["met"]) for v in verdicts), "judged": len(verdicts)}


def test_the_verdict_slot_attack_is_refused(cli, judged: Path) -> None:
    """Edit a verdict's judge_digest (the slot the unique index keeps), then append a
    second verdict of the same judge on the same run with the outcome flipped, through
    prereg's own store as an attacker holding the code would: every reader refuses."""
    ws = judged
    conn = sqlite3.connect(ws.joinpath(*STORE))
    try:
        seq, body = conn.execute(
            "SELECT seq, body FROM verdicts WHERE json_extract(body, '$.met') IS NOT NULL "
            "ORDER BY seq LIMIT 1"
        ).fetchone()
    finally:
        conn.close()
    original = Verdict.model_validate_json(body)
    before = _met(ws)
    _update(ws, "verdicts", "judge_digest", "sha256:" + "0" * 64, seq)
    flipped = original.model_copy(
        update={"verdict_id": "flipped-0001", "met": not original.met, "chain": None}
    )
    with VerdictStore(ws / "runs") as store:
        store.append(flipped)  # the unique index no longer sees the first verdict
    assert _met(ws)["judged"] == before["judged"] + 1  # the second verdict is stored

    checked = cli("-w", ws, "verify", "--json")
    assert checked.code == 3
    said = json.dumps(checked.json()["problems"])
    assert "judge_digest" in said and "a second verdict" in said, said
    for args in (("analyse", REG), ("judge", REG), ("judge", REG, "--json")):
        refused = cli("-w", ws, *args)
        assert refused.code == 3, (args, refused.stdout, refused.stderr)
        assert "judge_digest" in refused.stderr, refused.stderr
    assert not (ws / "reports" / REG).exists()


def test_every_chained_sqlite_table_declares_its_columns(judged: Path) -> None:
    """The rule cannot be forgotten: every column of every chained table of the run and
    verdict stores that is not the chain's own is declared, and so checked."""
    seen = set()
    for path in (ws_file for ws_file in (judged / "runs").glob("*.sqlite")):
        conn = sqlite3.connect(path)
        try:
            names = [
                str(n)
                for (n,) in conn.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' "
                    "AND name NOT LIKE 'sqlite_%'"
                )
            ]
            for name in names:
                columns = {str(r[1]) for r in conn.execute(f"PRAGMA table_info({name})")}
                if "record_hash" not in columns:
                    continue  # not a chained table
                assert name in TABLES, f"{path.name} table {name} declares no columns"
                assert columns - CHAIN_COLUMNS == set(TABLES[name].columns), name
                seen.add(name)
        finally:
            conn.close()
    assert seen == {"records", "verdicts", "gold"}
