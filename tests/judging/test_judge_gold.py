"""Gold labels: bad input refused with nothing written, labels never changed; the verdict
and gold chains checked by verify and analyse; prereg judge --store."""

from __future__ import annotations

import csv
import hashlib
import json
import sqlite3
from pathlib import Path

from prereg.registry.judges import Judge
from tests.judging.gold_helpers import gold_count, stored_verdicts
from tests.judging.helpers import local_judges, registration, write


def _judged(cli, ws: Path) -> list[dict[str, object]]:
    path = write(ws, registration("judged", judge=local_judges(), repeats=2))
    assert cli("-w", ws, "register", path).code == 0
    assert cli("-w", ws, "run", "judged", "--no-progress").code == 0
    assert cli("-w", ws, "judge", "judged").code == 0
    verdicts = stored_verdicts(ws)
    assert len(verdicts) >= 3
    return verdicts


def test_bad_gold_files_are_refused_and_nothing_is_written(cli, ws: Path) -> None:
    runs = [str(v["record_id"]) for v in _judged(cli, ws)]
    folder = ws.parent
    cases = {
        "unknown.csv": (
            f"run_id,label,annotator\n{runs[0]},1,ann1\nno-such-run,0,ann1\n",
            3,
            "run_id",
        ),
        "label.csv": (
            f"run_id,label,annotator\n{runs[0]},1,ann1\n{runs[1]},maybe,ann1\n",
            3,
            "label",
        ),
        "dup.csv": (
            f"run_id,label,annotator\n{runs[0]},1,ann1\n{runs[1]},1,ann1\n{runs[0]},1,ann1\n",
            4,
            "annotator",
        ),
        "noannot.jsonl": (
            json.dumps({"run_id": runs[0], "label": True, "annotator": "a"})
            + "\n"
            + json.dumps({"run_id": runs[1], "label": 1})
            + "\n",
            2,
            "annotator",
        ),
        "extra.jsonl": (
            json.dumps({"run_id": runs[0], "label": 1, "annotator": "a", "x": 1}),
            1,
            "x",
        ),
        "header.csv": ("run,label,annotator\nr,1,a\n", 1, "run_id"),
    }
    for name, (body, line, field) in cases.items():
        path = folder / name
        path.write_text(body)
        result = cli("-w", ws, "judge", "judged", "--gold", path)
        assert result.code == 2, (name, result.stderr)
        assert f"{path}:{line}" in result.stderr and field in result.stderr, (name, result.stderr)
        assert gold_count(ws) == 0, name
    # a good file, loaded twice: the second load adds nothing
    good = folder / "good.csv"
    good.write_text(f"run_id,label,annotator\n{runs[0]},1,ann1\n{runs[1]},0,ann1\n")
    first = cli("-w", ws, "judge", "judged", "--gold", good, "--json")
    assert first.code == 0 and first.json()["added"] == 2
    again = cli("-w", ws, "judge", "judged", "--gold", good, "--json")
    assert again.code == 0 and (again.json()["added"], again.json()["already_stored"]) == (0, 2)
    # a later file cannot change a stored label (nor add its new rows: all or nothing)
    changed = folder / "changed.jsonl"
    changed.write_text(
        json.dumps({"record_id": runs[2], "label": True, "annotator": "ann1"})
        + "\n"
        + json.dumps({"record_id": runs[1], "label": True, "annotator": "ann1"})
        + "\n"
    )
    refused = cli("-w", ws, "judge", "judged", "--gold", changed)
    assert refused.code == 2 and f"{changed}:2" in refused.stderr and "label" in refused.stderr
    assert "cannot be changed" in refused.stderr
    assert gold_count(ws) == 2
    # the raw UPDATE the triggers refuse
    conn = sqlite3.connect(ws / "runs" / "verdicts.sqlite")
    try:
        try:
            conn.execute("UPDATE gold SET body = body")
            raise AssertionError("the gold table accepted an UPDATE")
        except sqlite3.DatabaseError as exc:
            assert "append-only" in str(exc)
    finally:
        conn.close()


def _tamper(ws: Path, table: str, trigger: str) -> None:
    """Drop the table's UPDATE trigger, flip the first row's verdict or label, and put the
    trigger back exactly as it was (the schema looks untouched: only the chain can tell)."""
    conn = sqlite3.connect(ws / "runs" / "verdicts.sqlite")
    try:
        (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (trigger,)).fetchone()
        conn.execute(f"DROP TRIGGER {trigger}")
        seq, body = conn.execute(f"SELECT seq, body FROM {table} ORDER BY seq LIMIT 1").fetchone()
        data = json.loads(body)
        key = "met" if table == "verdicts" else "label"
        data[key] = not data[key]
        conn.execute(f"UPDATE {table} SET body = ? WHERE seq = ?", (json.dumps(data), seq))
        conn.execute(sql)
        conn.commit()
    finally:
        conn.close()


def test_tampered_verdict_or_gold_label_is_caught_by_verify_and_analyse(
    cli, ws: Path, tmp_path: Path
) -> None:
    runs = [str(v["record_id"]) for v in _judged(cli, ws)]
    gold = tmp_path / "gold.csv"
    gold.write_text(f"run_id,label,annotator\n{runs[0]},1,ann1\n{runs[1]},0,ann1\n")
    assert cli("-w", ws, "judge", "judged", "--gold", gold).code == 0
    intact = cli("-w", ws, "verify", "--json")
    assert intact.code == 0, intact.stdout
    counts = intact.json()["runs"]["verdicts"]
    assert sum(counts["verdicts"].values()) == len(runs) and sum(counts["gold"].values()) == 2
    assert cli("-w", ws, "analyse", "judged").code == 0
    # the report pins the chain heads it read (the ledger does not anchor them)
    report = json.loads((ws / "reports" / "judged" / "report.json").read_text())
    conn = sqlite3.connect(ws / "runs" / "verdicts.sqlite")
    try:
        heads = {
            table: conn.execute(
                f"SELECT count(*), (SELECT record_hash FROM {table} ORDER BY seq DESC LIMIT 1) "
                f"FROM {table}"
            ).fetchone()
            for table in ("verdicts", "gold")
        }
    finally:
        conn.close()
    for rate in report["judged"]["rates"]:
        pinned = rate["provenance"]["parameters"]["chains"]
        assert {t: (c["count"], c["head"]) for t, c in pinned.items()} == heads
    backup = (ws / "runs" / "verdicts.sqlite").read_bytes()
    for table, trigger in (("verdicts", "verdicts_no_update"), ("gold", "gold_no_update")):
        (ws / "runs" / "verdicts.sqlite").write_bytes(backup)
        _tamper(ws, table, trigger)
        checked = cli("-w", ws, "verify", "--json")
        assert checked.code == 3
        problems = [p for p in checked.json()["problems"] if p["kind"] == "verdicts-chain"]
        noun = "verdict 0" if table == "verdicts" else "gold label 0"
        assert any(noun in p["message"] for p in problems), problems
        analysed = cli("-w", ws, "analyse", "judged")
        assert analysed.code == 3 and "verdict store fails verification" in analysed.stderr
    # a dropped trigger alone is a schema change verify names
    (ws / "runs" / "verdicts.sqlite").write_bytes(backup)
    conn = sqlite3.connect(ws / "runs" / "verdicts.sqlite")
    conn.execute("DROP TRIGGER gold_no_delete")
    conn.close()
    dropped = cli("-w", ws, "verify", "--json")
    assert dropped.code == 3
    assert any("gold_no_delete was dropped" in p["message"] for p in dropped.json()["problems"])


def test_judge_reads_runs_from_the_store_option(cli, ws: Path, tmp_path: Path) -> None:
    path = write(ws, registration("judged", judge=local_judges()[:1], repeats=1))
    assert cli("-w", ws, "register", path).code == 0
    store = tmp_path / "elsewhere"
    store.mkdir()
    assert cli("-w", ws, "run", "judged", "--no-progress", "--store", store).code == 0
    # the workspace's store holds none of the runs the registry pinned: refused
    missing = cli("-w", ws, "judge", "judged")
    assert missing.code == 3 and "run store holds none of them" in missing.stderr
    dry = cli("-w", ws, "judge", "judged", "--dry-run", "--json", "--store", store)
    assert dry.code == 0 and dry.json()["verdicts_needed"] > 0
    judged = cli("-w", ws, "judge", "judged", "--json", "--store", store)
    assert judged.code == 0, judged.stderr
    assert judged.json()["judged"] == dry.json()["verdicts_needed"]
    assert len(stored_verdicts(ws)) == judged.json()["judged"]  # in the workspace's runs/
    assert not (store / "verdicts.sqlite").exists()
    assert cli("-w", ws, "analyse", "judged", "--store", store).code == 0


def test_registered_gold_draw_lists_its_runs_and_off_draw_labels_are_set_apart(
    cli, ws: Path, tmp_path: Path
) -> None:
    plain = Judge.model_validate(local_judges()[0])
    assert "gold_sample" not in plain.model_dump(mode="json")  # absent: digests unchanged
    judges = local_judges()
    judges[0] = {**judges[0], "gold_sample": {"share": 0.5, "seed": 7}}
    path = write(ws, registration("judged", judge=judges, repeats=2))
    assert cli("-w", ws, "register", path).code == 0
    assert cli("-w", ws, "run", "judged", "--no-progress").code == 0
    assert cli("-w", ws, "judge", "judged").code == 0
    out = tmp_path / "draw.csv"
    made = cli("-w", ws, "judge", "judged", "--gold-template", out, "--json")
    assert made.code == 0, made.stderr
    rows = list(csv.DictReader(out.open()))
    assert rows and all(r["label"] == "" and r["annotator"] == "" for r in rows)

    def drawn(task: str) -> bool:  # the documented rule, written out here
        h = hashlib.sha256(f"gold\0{7}\0{task}".encode()).digest()
        return int.from_bytes(h[:8], "big") / 2**64 < 0.5

    verdicts = [v for v in stored_verdicts(ws) if v["outcome"] == "completed"]
    export = tmp_path / "runs.jsonl"
    assert cli("-w", ws, "export", "judged", "--out", export).code == 0
    task_of = {
        r["record_id"]: r["task_id"] for r in map(json.loads, export.read_text().splitlines())
    }
    expected = {str(v["record_id"]) for v in verdicts if drawn(task_of[str(v["record_id"])])}
    assert {r["run_id"] for r in rows} == expected
    # the unfilled template is refused at its first row (no annotator yet), nothing written
    refused = cli("-w", ws, "judge", "judged", "--gold", out)
    assert refused.code == 2 and f"{out}:2: annotator" in refused.stderr
    assert gold_count(ws) == 0
    outside = next(str(v["record_id"]) for v in verdicts if str(v["record_id"]) not in expected)
    filled = tmp_path / "filled.csv"
    filled.write_text(
        "run_id,label,annotator\n"
        + "".join(f"{r['run_id']},1,ann1\n" for r in rows)
        + f"{outside},0,ann1\n"
    )
    assert cli("-w", ws, "judge", "judged", "--gold", filled).code == 0
    assert cli("-w", ws, "analyse", "judged").code == 0
    report = json.loads((ws / "reports" / "judged" / "report.json").read_text())
    blocks = [r["corrected"]["gold"] for r in report["judged"]["rates"] if r["corrected"]]
    assert sum(b["off_sample"] for b in blocks) == 1
    assert all(b["sample"] == {"share": 0.5, "seed": 7} for b in blocks)
    md = (ws / "reports" / "judged" / "report.md").read_text()
    assert "labelled outside it" in md
    # a registration without a draw has no template to give
    other = write(ws, registration("nodraw", judge=local_judges()[:1], repeats=1))
    assert cli("-w", ws, "register", other).code == 0
    none = cli("-w", ws, "judge", "nodraw", "--gold-template", tmp_path / "none.csv")
    assert none.code == 2 and "gold_sample" in none.stderr
