"""prereg judge with the local judge: verdicts apart from runs, exactly once, audited."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from prereg.core.errors import IntegrityError
from prereg.registry.judges import Judge
from prereg.runners.judging.ask import enforce, parse_answer, sampled
from prereg.runners.judging.verdicts import DuplicateVerdict, VerdictStore
from tests.judging.helpers import local_judges, registration, write


@pytest.fixture
def judged(cli, ws: Path) -> Path:
    """A registered, run podcast-selection registration with both local judges."""
    path = write(ws, registration("judged", judge=local_judges(), repeats=2))
    assert cli("--workspace", ws, "register", path).code == 0
    result = cli("--workspace", ws, "run", "judged", "--no-progress", "--json")
    assert result.code == 0, result.stderr
    return ws


def _records(cli, ws: Path) -> list[dict]:
    out = ws / "export.jsonl"
    assert cli("--workspace", ws, "export", "judged", "--out", out, "--force").code == 0
    return [json.loads(line) for line in out.read_text().splitlines() if line]


def _verdicts(cli, ws: Path) -> list:
    digest = _records(cli, ws)[0]["registration_digest"]
    with VerdictStore(ws / "runs") as store:
        return store.verdicts(digest)


def test_judge_records_verdicts_once_and_never_touches_runs(cli, judged: Path) -> None:
    ws = judged
    before = _records(cli, ws)
    dry = cli("--workspace", ws, "judge", "judged", "--dry-run", "--json")
    assert dry.code == 0, dry.stderr
    needed = dry.json()["verdicts_needed"]
    assert needed > 0
    assert not (ws / "runs" / "verdicts.sqlite").exists()  # a dry run writes nothing

    first = cli("--workspace", ws, "judge", "judged", "--json")
    assert first.code == 0, first.stderr
    assert first.json()["judged"] == needed and first.json()["remaining"] == 0
    again = cli("--workspace", ws, "judge", "judged", "--json")
    assert again.json()["judged"] == 0  # resumed: nothing judged twice

    verdicts = _verdicts(cli, ws)
    assert len(verdicts) == needed
    assert len({(v.record_id, v.judge_digest) for v in verdicts}) == needed
    by_id = {r["record_id"]: r for r in before}
    for v in verdicts:
        run = by_id[v.record_id]
        if v.outcome == "completed":
            assert run["funnel"]["executed"] is True
        else:
            assert run["terminal_class"] in ("answered_without_search", "searched_then_declined")
            assert run["polarity"] == "positive"
        assert v.parse == "ok" and v.met is not None
        assert v.rubric_digest.startswith("sha256:") and "<<<RUN" in v.prompt
        assert v.model_returned == "local-rules-v1"
    # the run records are exactly as they were (no verdict written into a run)
    assert _records(cli, ws) == before


def test_local_completion_judge_follows_the_oracles(cli, judged: Path) -> None:
    """Completed by the local rules iff no oracle failed and the answer holds the phrases."""
    ws = judged
    assert cli("--workspace", ws, "judge", "judged").code == 0
    runs = {r["record_id"]: r for r in _records(cli, ws)}
    completed = [v for v in _verdicts(cli, ws) if v.outcome == "completed"]
    assert completed
    for v in completed:
        oracles = runs[v.record_id]["oracles"]
        if any(value is False for value in oracles.values()):
            assert v.met is False


def test_store_is_append_only_and_chained(cli, judged: Path) -> None:
    ws = judged
    assert cli("--workspace", ws, "judge", "judged").code == 0
    digest = _records(cli, ws)[0]["registration_digest"]
    verdicts = _verdicts(cli, ws)
    store = VerdictStore(ws / "runs")
    with pytest.raises(DuplicateVerdict):
        store.append(verdicts[0].model_copy(update={"verdict_id": "x" * 32, "chain": None}))
    store.close()
    conn = sqlite3.connect(ws / "runs" / "verdicts.sqlite")
    for sql in ("UPDATE verdicts SET body = 'x'", "DELETE FROM verdicts"):
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            conn.execute(sql)
    # an edit behind the triggers' back: refused (exit 3), not read (the dropped trigger
    # is named first; test_judge_gold checks the chain alone, the trigger put back)
    conn.execute("DROP TRIGGER verdicts_no_update")
    body = json.loads(conn.execute("SELECT body FROM verdicts WHERE seq = 1").fetchone()[0])
    body["met"] = not body["met"]
    conn.execute("UPDATE verdicts SET body = ? WHERE seq = 1", (json.dumps(body),))
    conn.commit()
    conn.close()
    with pytest.raises(IntegrityError, match="verdicts_no_update was dropped"):
        VerdictStore(ws / "runs").verdicts(digest)
    # and `prereg export`, which carries the verdicts beside the runs, refuses it
    assert cli("--workspace", ws, "export", "judged", "--out", ws.parent / "x.jsonl").code == 3
    assert not (ws.parent / "x.jsonl").exists()


def test_judge_without_registered_judge_is_refused(cli, ws: Path) -> None:
    path = write(ws, registration("nojudge"))
    assert cli("--workspace", ws, "register", path).code == 0
    result = cli("--workspace", ws, "judge", "nojudge")
    assert result.code == 2 and "judge" in result.stderr
    assert not (ws / "runs" / "verdicts.sqlite").exists()


@pytest.mark.parametrize(
    "text",
    [
        "",
        "yes",
        "The task was completed. met: true",
        '{"met": "true"}',
        '{"met": 1}',
        '[{"met": true}]',
        '{"met": true} and more',
        "{" * 5000,
    ],
)
def test_unparseable_answers_are_never_guessed(text: str) -> None:
    assert parse_answer(text, "completed") is None


def test_parse_and_native_rule() -> None:
    parsed = parse_answer('```json\n{"met": true, "evidence": "q"}\n```', "completed")
    assert parsed is not None and parsed.met is True and parsed.evidence == "q"
    assert parse_answer('{"met": true}', "native_self_service") is None  # need required
    assert parse_answer('{"met": true, "need": "vibes"}', "native_self_service") is None
    for need, met in [
        ("knowledge", True),
        ("action", False),
        ("private_state", False),
        ("fresh_data", False),
    ]:
        parsed = parse_answer(json.dumps({"met": True, "need": need}), "native_self_service")
        assert parsed is not None
        verdict, why = enforce(parsed, "native_self_service")
        assert verdict is met and (why is None) == met


def test_sample_rule_is_a_fixed_share_chosen_by_run_id() -> None:
    judge = Judge.model_validate({**local_judges()[0], "sample": 0.3})
    ids = [f"run-{i:05d}" for i in range(2000)]
    chosen = {i for i in ids if sampled(i, judge)}
    assert 0.26 < len(chosen) / len(ids) < 0.34
    assert chosen == {i for i in ids if sampled(i, judge)}  # the same runs on resume
    every = Judge.model_validate(local_judges()[0])
    assert all(sampled(i, every) for i in ids[:50])
