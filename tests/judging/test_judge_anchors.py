"""The verdict and gold chains anchored in the ledger: removing the newest verdicts or
gold labels (the DELETE trigger dropped and put back exactly) leaves chains that verify
link by link, and only the ledger's verdicts-anchor shows it."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from types import SimpleNamespace

import pytest

from prereg.cli import main
from prereg.registry.registrations import Registry
from prereg.reports.judged.section import load_verdicts
from prereg.runners.judging import judge_runs as judge_run
from tests.judging.gold_helpers import stored_verdicts
from tests.judging.helpers import local_judges, registration, write

STORE = ("runs", "verdicts.sqlite")


def _judged_with_gold(cli, ws: Path, tmp_path: Path) -> None:
    path = write(ws, registration("judged", judge=local_judges(), repeats=2))
    assert cli("-w", ws, "register", path).code == 0
    assert cli("-w", ws, "run", "judged", "--no-progress").code == 0
    assert cli("-w", ws, "judge", "judged").code == 0
    runs = [str(v["record_id"]) for v in stored_verdicts(ws)]
    gold = tmp_path / "gold.csv"
    gold.write_text("run_id,label,annotator\n" + "".join(f"{r},1,ann1\n" for r in runs[:3]))
    assert cli("-w", ws, "judge", "judged", "--gold", gold).code == 0


def _main(*args: str | Path) -> SimpleNamespace:
    """The CLI in-process without capsys (for the module's shared workspace)."""
    try:
        main([str(a) for a in args])
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    return SimpleNamespace(code=code)


@pytest.fixture(scope="module")
def _base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Registered, run, judged and three gold labels loaded: built once per module."""
    root = tmp_path_factory.mktemp("anchors")
    ws = root / "ws"
    assert _main("init", ws).code == 0
    _judged_with_gold(_main, ws, root)
    return ws


@pytest.fixture
def judged(_base: Path, tmp_path: Path) -> Path:
    """A copy of the module's judged workspace, for one test to tamper with."""
    ws = tmp_path / "judged"
    shutil.copytree(_base, ws)
    return ws


def _ledger(ws: Path) -> list[dict]:
    text = (ws / "registry" / "ledger.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line]


def _stored_heads(ws: Path) -> dict[str, dict[str, object]]:
    """Count and newest link hash of each table, read with sqlite3 (not through prereg)."""
    conn = sqlite3.connect(ws.joinpath(*STORE))
    try:
        out = {}
        for table in ("verdicts", "gold"):
            count, head = conn.execute(
                f"SELECT count(*), (SELECT record_hash FROM {table} ORDER BY seq DESC LIMIT 1) "
                f"FROM {table}"
            ).fetchone()
            out[table] = {"count": count, "head": head}
        return out
    finally:
        conn.close()


def _truncate(ws: Path, table: str, trigger: str) -> None:
    """Drop the DELETE trigger, delete the table's newest row, put the trigger back as it
    was: the schema and every remaining link are untouched."""
    conn = sqlite3.connect(ws.joinpath(*STORE))
    try:
        (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (trigger,)).fetchone()
        conn.execute(f"DROP TRIGGER {trigger}")
        conn.execute(f"DELETE FROM {table} WHERE seq = (SELECT max(seq) FROM {table})")
        conn.execute(sql)
        conn.commit()
    finally:
        conn.close()


def test_judge_and_gold_anchor_the_heads_they_stored(cli, judged: Path) -> None:
    ws = judged
    anchors = [e for e in _ledger(ws) if e["event"] == "verdicts-anchor"]
    assert len(anchors) == 2  # the judging pass, then --gold
    stored = _stored_heads(ws)
    assert {k: anchors[-1][k] for k in ("verdicts", "gold")} == stored
    assert anchors[0]["verdicts"] == stored["verdicts"] and anchors[0]["gold"]["count"] == 0
    mirror = ws / "registry" / "anchors" / f"{anchors[-1]['seq']:06d}.json"
    assert json.loads(mirror.read_bytes()) == anchors[-1]
    assert cli("-w", ws, "verify").code == 0  # an untouched store verifies
    assert cli("-w", ws, "judge", "judged", "--json").json()["judged"] == 0
    assert len([e for e in _ledger(ws) if e["event"] == "verdicts-anchor"]) == 2  # unchanged
    # what analyse reads (its CLI refusal is tested below; a whole report takes seconds):
    # the heads, already pinned, so nothing is appended, with the anchoring seq
    registry = Registry(ws / "registry")
    read = load_verdicts(ws / "runs", registry.get("judged"), registry)
    assert {t: c["anchor"] for t, c in read.heads().items()} == {
        "verdicts": anchors[-1]["seq"],
        "gold": anchors[-1]["seq"],
    }
    assert len([e for e in _ledger(ws) if e["event"] == "verdicts-anchor"]) == 2


@pytest.mark.parametrize(
    ("table", "trigger", "chain"),
    [("verdicts", "verdicts_no_delete", "verdict chain"), ("gold", "gold_no_delete", "gold")],
)
def test_newest_verdict_or_gold_label_removed_is_caught(
    cli, judged: Path, table: str, trigger: str, chain: str
) -> None:
    ws = judged
    before = _stored_heads(ws)[table]["count"]
    _truncate(ws, table, trigger)
    assert _stored_heads(ws)[table]["count"] == before - 1
    checked = cli("-w", ws, "verify", "--json")
    assert checked.code == 3
    problems = checked.json()["problems"]
    # the chain itself still verifies link by link: only the anchor can tell
    assert problems and {p["kind"] for p in problems} == {"verdicts-anchor"}
    named = "verdict chain of 'judged'" if table == "verdicts" else "gold label chain of 'judged'"
    assert all(p["entry"].startswith(named) for p in problems), problems
    assert any(f"pinned {before} " in p["message"] for p in problems)
    ledger = (ws / "registry" / "ledger.jsonl").read_bytes()
    analysed = cli("-w", ws, "analyse", "judged")
    assert analysed.code == 3 and named in analysed.stderr
    judged = cli("-w", ws, "judge", "judged")  # would judge the removed run again: refused
    assert judged.code == 3 and named in judged.stderr
    assert (ws / "registry" / "ledger.jsonl").read_bytes() == ledger  # nothing anchored
    assert not (ws / "reports" / "judged").exists()


def test_deleted_verdict_store_is_caught(cli, judged: Path) -> None:
    ws = judged
    ws.joinpath(*STORE).unlink()
    checked = cli("-w", ws, "verify", "--json")
    assert checked.code == 3
    entries = {p["entry"].split(" (")[0] for p in checked.json()["problems"]}
    assert entries == {"verdict chain of 'judged'", "gold label chain of 'judged'"}


def test_edited_anchor_line_mirror_is_caught(cli, judged: Path) -> None:
    ws = judged
    seq = [e for e in _ledger(ws) if e["event"] == "verdicts-anchor"][-1]["seq"]
    mirror = ws / "registry" / "anchors" / f"{seq:06d}.json"
    mirror.chmod(0o644)
    mirror.write_bytes(mirror.read_bytes().replace(b'"count":3', b'"count":2'))
    checked = cli("-w", ws, "verify", "--json")
    assert checked.code == 3
    assert any(p["kind"] == "ledger-edited" for p in checked.json()["problems"])


def test_a_workspace_judged_before_anchors_still_verifies(
    cli, ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Verdicts and labels stored by a prereg that did not anchor them (no verdicts-anchor
    line in the ledger): verify passes unchanged and writes nothing; analyse's reader
    anchors them, and the ledger verifies with the new line."""
    monkeypatch.setattr(judge_run, "anchor_judgements", lambda *a, **k: None)
    _judged_with_gold(cli, ws, tmp_path)
    monkeypatch.undo()
    ledger = ws / "registry" / "ledger.jsonl"
    old = ledger.read_bytes()
    assert all(e["event"] != "verdicts-anchor" for e in _ledger(ws))
    assert cli("-w", ws, "verify").code == 0
    assert ledger.read_bytes() == old
    registry = Registry(ws / "registry")
    read = load_verdicts(ws / "runs", registry.get("judged"), registry)  # analyse's reader
    assert ledger.read_bytes().startswith(old)  # appended, nothing rewritten
    anchors = [e for e in _ledger(ws) if e["event"] == "verdicts-anchor"]
    assert len(anchors) == 1
    assert {k: anchors[0][k] for k in ("verdicts", "gold")} == _stored_heads(ws)
    assert read.anchor == anchors[0]["seq"]
    assert cli("-w", ws, "verify").code == 0
