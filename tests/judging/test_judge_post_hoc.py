"""A rubric revised after the verdicts were read is a judge added post hoc (issue 41,
item 3): a ledger addendum, judged on the same runs without re-running, reported as
post hoc and exploratory, never the verdict; refused with file and field when it breaks
a rule of a registered judge; tamper-evident like every ledger line."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from prereg.registry.judges import Judge, judge_digest
from prereg.registry.registrations import Registry
from prereg.registry.schema import Registration
from prereg.reports.judged.section import with_completed
from prereg.runners.judging.verdicts import Verdict
from tests.judging.helpers import local_judges, registration, write
from tests.reports import observation

REG = "judged"
REASON = "rubric v2 counts a partial answer as not completed; written after reading v1"


def _judge_file(ws: Path, **judge: Any) -> Path:
    """A judge entry and its rubric, outside the frozen experiment (drafts/)."""
    (ws / "drafts" / "rubric-v2.md").write_text("Completed only when every fact is given.\n")
    doc = {
        "id": "completion-v2",
        "outcome": "completed",
        "driver": "local",
        "rubric": "rubric-v2.md",
        "rubric_version": "v2",
        **judge,
    }
    path = ws / "drafts" / "judge-v2.yaml"
    path.write_text(yaml.safe_dump({k: v for k, v in doc.items() if v is not None}))
    return path


def _registered_and_judged(cli: Any, ws: Path) -> dict[str, Any]:
    path = write(ws, registration(REG, judge=local_judges()[:1], repeats=2))
    assert cli("-w", ws, "register", path).code == 0
    assert cli("-w", ws, "run", REG, "--no-progress").code == 0
    assert cli("-w", ws, "judge", REG, "--json").code == 0
    before = cli("-w", ws, "analyse", REG, "--json")
    assert before.code == 0, before.stderr
    return json.loads((ws / "reports" / REG / "report.json").read_text())


def _ledger_lines(ws: Path) -> list[dict[str, Any]]:
    raw = (ws / "registry" / "ledger.jsonl").read_text().splitlines()
    return [json.loads(line) for line in raw]


def test_a_judge_added_post_hoc_judges_the_same_runs_and_never_the_verdict(
    cli: Any, ws: Path
) -> None:
    before = _registered_and_judged(cli, ws)
    runs_before = cli("-w", ws, "export", REG, "--out", "-", "-f", "jsonl").stdout
    added = cli(
        "-w", ws, "judge", REG, "--add-judge", _judge_file(ws), "--reason", REASON, "--json"
    )
    assert added.code == 0, added.stderr
    line = _ledger_lines(ws)[-1]
    assert line["event"] == "judge-addendum" and line["reason"] == REASON
    assert added.json()["ledger_seq"] == line["seq"] and added.json()["post_hoc"] is True
    # the rubric is stored as an object, the addendum mirrored beside the ledger
    registry = Registry(ws / "registry")
    rubric = registry.read_object(line["rubric"]).decode()
    assert rubric == "Completed only when every fact is given.\n"
    assert (ws / "registry" / "addenda" / f"{line['seq']:06d}.json").is_file()
    # the new judge is asked about the same runs; the registered one has nothing left
    judged = cli("-w", ws, "judge", REG, "--json")
    assert judged.code == 0, judged.stderr
    counts = judged.json()["judges"]
    needed = before["judged"]["rates"]
    assert counts["completion-v2"]["judged"] == sum(r["needed"] for r in needed) > 0
    assert counts["completed"]["needed"] == 0
    # nothing was re-run: the run records are byte for byte the same
    assert cli("-w", ws, "export", REG, "--out", "-", "-f", "jsonl").stdout == runs_before
    text = cli("-w", ws, "analyse", REG)
    assert text.code == 0, text.stderr
    after = json.loads((ws / "reports" / REG / "report.json").read_text())
    judges = {j["judge"]: j for j in after["judged"]["judges"]}
    assert judges["completed"]["post_hoc"] is None
    post = judges["completion-v2"]["post_hoc"]
    assert post["reason"] == REASON and post["ledger_seq"] == line["seq"]
    assert {r["judge"] for r in after["judged"]["rates"]} == {"completed", "completion-v2"}
    for rate in after["judged"]["rates"]:  # only a consumed judge's rate says what it fills
        params = rate["provenance"]["parameters"]
        assert ("fills_invokerank_completed" in params) == (rate["judge"] == "completed")
    # the registered figures and the verdict are those of before
    for key in ("primary", "verdict", "secondary"):
        assert after.get(key) == before.get(key), key
    shown = " ".join(text.stdout.split())  # the terminal wraps long lines
    assert "POST HOC" in shown and REASON in shown
    md = (ws / "reports" / REG / "report.md").read_text()
    assert "POST HOC" in md
    assert cli("-w", ws, "verify").code == 0


def test_a_judge_added_post_hoc_is_refused_with_file_and_field(cli: Any, ws: Path) -> None:
    _registered_and_judged(cli, ws)
    lines = len(_ledger_lines(ws))
    cases = [
        ({"id": "completed"}, REASON, "id", "already has a judge 'completed'"),
        ({"arms": ["zzz"]}, REASON, "arms", "unknown arm"),
        ({"rubric_version": None}, REASON, "rubric_version", "required"),
        ({"driver": "replay"}, REASON, "driver", "cannot judge"),
        ({}, "  ", None, "needs a reason"),
    ]
    for change, reason, field, says in cases:
        path = _judge_file(ws, **change)
        result = cli("-w", ws, "judge", REG, "--add-judge", path, "--reason", reason, "--json")
        assert result.code == 2, (change, result.stderr)
        assert says in result.stderr, (change, result.stderr)
        if field is not None:
            assert field in result.stderr and "judge-v2.yaml" in result.stderr, result.stderr
    missing = _judge_file(ws, rubric="nowhere.md")
    result = cli("-w", ws, "judge", REG, "--add-judge", missing, "--reason", REASON)
    assert result.code == 2 and "nowhere.md" in result.stderr
    assert cli("-w", ws, "judge", REG, "--reason", REASON).code == 2  # --reason alone
    assert len(_ledger_lines(ws)) == lines  # nothing written by any refusal
    assert not (ws / "registry" / "addenda").exists() or not any(
        (ws / "registry" / "addenda").iterdir()
    )


def test_an_edited_or_orphaned_addendum_is_found_by_verify(cli: Any, ws: Path) -> None:
    _registered_and_judged(cli, ws)
    path = _judge_file(ws)
    assert cli("-w", ws, "judge", REG, "--add-judge", path, "--reason", REASON).code == 0
    line = _ledger_lines(ws)[-1]
    mirror = ws / "registry" / "addenda" / f"{line['seq']:06d}.json"
    original = mirror.read_bytes()
    os.chmod(mirror, 0o644)
    mirror.write_bytes(original.replace(b"rubric v2", b"rubric v9"))
    result = cli("-w", ws, "verify", "--json")
    assert result.code == 3 and "judge addendum" in result.stdout + result.stderr
    mirror.write_bytes(original)
    assert cli("-w", ws, "verify").code == 0
    # the rubric object it references, removed
    registry = Registry(ws / "registry")
    obj = registry.objects.path(line["rubric"])
    os.chmod(obj, 0o644)
    obj.unlink()
    result = cli("-w", ws, "verify", "--json")
    assert result.code == 3 and line["rubric"] in result.stdout + result.stderr


def _verdict(judge: Judge, record_id: str, met: bool) -> Verdict:
    now = datetime.now(UTC)
    rubric = "sha256:" + "3" * 64
    return Verdict(
        verdict_id=f"v-{judge.key}-{record_id}",
        record_id=record_id,
        registration_id=REG,
        registration_digest="sha256:" + "1" * 64,
        judge=judge.key,
        judge_digest=judge_digest(judge, rubric),
        outcome="completed",
        rubric=judge.rubric,
        rubric_version=judge.rubric_version,
        rubric_digest=rubric,
        driver="local",
        prompt="p",
        raw_response="r",
        parse="ok",
        met=met,
        started_at=now,
        finished_at=now,
    )


def test_a_post_hoc_judge_never_fills_completed() -> None:
    """Runs no oracle decided take the registered judge's verdict; the post-hoc judge's
    opposite verdicts fill only its own InvokeRank observations."""
    reg = Registration.model_validate(registration(REG, judge=local_judges()[:1]))
    (registered,) = reg.judge or []
    revised = Judge.model_validate(
        {**registered.model_dump(mode="json"), "id": "completion-v2", "rubric_version": "v2"}
    )
    obs = [
        observation(
            record_id=f"r{i}",
            arm="a" if i % 2 else "b",
            evidence_class="api",
            driver="anthropic",
            model_requested="m",
            model_returned="m",
            funnel={"executed": True, "completed": None},
        )
        for i in range(6)
    ]
    verdicts = [_verdict(registered, o.record_id, True) for o in obs]
    verdicts += [_verdict(revised, o.record_id, False) for o in obs]
    out = with_completed(reg, obs, verdicts, [revised])
    assert [o.funnel["completed"] for o in out] == [True] * 6
    assert "completion-v2" not in (out.completed_by or "")
    assert set(out.by_judge) == {"completed", "completion-v2"}
    own = out.by_judge["completion-v2"][3]
    assert [o.funnel["completed"] for o in own] == [False] * 6
