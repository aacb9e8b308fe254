"""Replicate sessions run on different days (issue 41, item 1): ``prereg run ID --session
K`` runs only session K's units, the others untouched, resuming like any run; the run and
the analysis show which sessions are complete; an analysis with a session not yet run
withholds the calibrated interval ("sessions run: k of S") instead of estimating the run
component from fewer sessions than registered; ``--session`` is refused on the locked
split (its confirmatory run is one claim, run whole) and is bad input (exit 2) where the
registration has no such session. Expected values come from the exported records and the
registered design, worked out here by hand."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from prereg.core.errors import ProtocolRefusal
from prereg.experiments.loader import folder_reader, load_experiment
from prereg.registry.pilot import PilotOptions
from prereg.registry.schema import Registration
from prereg.registry.sessions import session_progress, sessions_run_text
from prereg.registry.units import expand_units, plan_from_registration
from tests.conftest import tree_digest
from tests.invokerank.test_ir_sessions import BUNDLED, DRAFT
from tests.invokerank.test_ir_weights import REGISTRATION

REG = "ir-sessions"  # DRAFT: 2 arms, repeats 3 in 3 sessions (K = 1: session s is repeat s - 1)
ARMS = {"reference", "placebo"}


def _records(cli: Any, ws: Path, out: Path) -> list[dict[str, Any]]:
    assert cli("-w", ws, "export", REG, "-o", out, "--force").code == 0
    return [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines() if x.strip()]


def _sessions(records: list[dict[str, Any]], planned: int) -> list[dict[str, Any]]:
    """Each session's state by hand: repeat r is session r + 1 (one repeat per session)."""
    done = [sum(r["status"] == "ok" and r["repeat"] == s for r in records) for s in range(3)]
    return [
        {"session": s + 1, "planned": planned, "completed": n, "complete": n == planned}
        for s, n in enumerate(done)
    ]


def _withheld_everywhere(ir: dict[str, Any], reason: str) -> None:
    """Every arm's registered (calibrated) interval, per intent and rolled up, and Figure 7
    withheld with ``reason``; the scores themselves printed."""
    for arm in ir["arms"]:
        assert arm["q"] is not None
        assert [iv["low"] for iv in arm["intervals"]] == [None] * len(arm["intervals"])
        assert all(iv["reason"].startswith(reason) for iv in arm["intervals"])
        for intent in arm["intents"]:
            assert all(iv["low"] is None for iv in intent["calibrated"])
            assert all(iv["reason"].startswith(reason) for iv in intent["calibrated"])
        assert arm["replicate_runs"]["rows"] == []
        assert arm["replicate_runs"]["reason"].startswith(reason)


def test_sessions_run_one_at_a_time(ws: Path, cli: Any, tmp_path: Path) -> None:
    draft = tmp_path / "ir-sessions.yaml"
    draft.write_text(DRAFT)
    assert cli("-w", ws, "register", draft).code == 0
    out = tmp_path / "runs.jsonl"

    # day 1: session 2 alone, then again (resume: nothing run twice)
    first = cli("-w", ws, "run", REG, "--session", "2", "--json")
    assert first.code == 0, first.stderr
    records = _records(cli, ws, out)
    assert {r["repeat"] for r in records} == {1}  # session 2's repeat only
    tasks = {r["task_id"] for r in records}
    n = len(ARMS) * len(tasks)  # one unit per arm and task in a session
    assert {(r["arm"], r["task_id"]) for r in records} == {(a, t) for a in ARMS for t in tasks}
    assert len(records) == n and all(r["status"] == "ok" for r in records)
    run = first.json()
    assert (run["session"], run["planned"], run["completed"], run["remaining"]) == (2, n, n, 0)
    assert run["sessions"] == _sessions(records, n)
    again = cli("-w", ws, "run", REG, "--session", "2", "--json").json()
    assert (again["completed"], again["skipped_existing"]) == (0, n)
    assert again["sessions"] == run["sessions"]

    # the analysis refuses the incomplete set naming the sessions; with
    # --allow-incomplete it says which are complete and withholds the interval
    refused = cli("-w", ws, "analyse", REG)
    assert refused.code == 4
    said = " ".join(refused.stderr.split())
    assert "replicate sessions 1, 3 of 3 not complete" in said and "--session K" in said
    partial = cli("-w", ws, "analyse", REG, "--allow-incomplete", "--json")
    assert partial.code == 0, partial.stderr
    report = partial.json()
    assert report["completeness"]["sessions"] == _sessions(records, n)
    _withheld_everywhere(report["invokerank"], "sessions run: 1 of 3 (sessions 1, 3 have no runs)")
    folder = Path(report["report_dir"])
    for name in ("report.md", "report.html"):
        text = " ".join((folder / name).read_text().split())
        assert "Replicate sessions (design.sessions" in text and "not run" in text
        assert "sessions run: 1 of 3" in text

    # days 2 and 3: sessions 1 and 3; every planned unit once, the analysis as registered
    assert cli("-w", ws, "run", REG, "--session", "1").code == 0
    last = cli("-w", ws, "run", REG, "--session", "3", "--json").json()
    records = _records(cli, ws, out)
    assert last["sessions"] == _sessions(records, n) and all(
        s["complete"] for s in last["sessions"]
    )
    keys = [(r["arm"], r["task_id"], r["repeat"]) for r in records]
    assert len(keys) == len(set(keys)) == 3 * n
    whole = cli("-w", ws, "analyse", REG, "--json")
    assert whole.code == 0, whole.stderr
    done = whole.json()
    assert done["completeness"]["complete"] and done["completeness"]["sessions"] == _sessions(
        records, n
    )
    assert "sessions run" not in json.dumps(done["invokerank"])
    for arm in done["invokerank"]["arms"]:
        assert arm["provenance"]["parameters"]["sessions"] == 3
        assert len(arm["replicate_runs"]["rows"]) == 3  # Figure 7: every session


def test_a_session_the_registration_does_not_have_is_exit_2(
    ws: Path, cli: Any, tmp_path: Path
) -> None:
    draft = tmp_path / "ir-sessions.yaml"
    draft.write_text(DRAFT)
    assert cli("-w", ws, "register", draft).code == 0
    assert cli("-w", ws, "register", ws / "drafts" / "music-library-pilot.yaml").code == 0
    before = tree_digest(ws / "runs"), tree_digest(ws / "registry")
    for reg, k, says in (
        (REG, "0", "--session 0 is not a session of 'ir-sessions': it registers 3"),
        (REG, "4", "--session 4 is not a session of 'ir-sessions': it registers 3"),
        ("music-library-pilot", "1", "registers no replicate sessions (design.sessions is 1)"),
    ):
        result = cli("-w", ws, "run", reg, "--session", k, "--json")
        assert result.code == 2, (reg, k, result.stderr)
        assert "--session" in result.stderr and says in " ".join(result.stderr.split())
    assert (tree_digest(ws / "runs"), tree_digest(ws / "registry")) == before


def _plan(**fields: Any) -> Any:
    data = {**REGISTRATION, "invokerank": {"interval": "calibrated"}, **fields}
    return plan_from_registration(Registration.model_validate(data), "sha256:" + "0" * 64)


def test_the_locked_split_refuses_a_session() -> None:
    # the confirmatory run on the locked split: refused (exit 4) by the check prepare()
    # makes before preflight claims the split; on dev the same session is accepted
    design = {"repeats": 3, "sessions": 3, "rotations": 1, "seed": 11}
    locked = _plan(kind="confirmatory", split="test", design=design)
    experiment = load_experiment(folder_reader(BUNDLED), "music-library")
    with pytest.raises(ProtocolRefusal) as refused:
        PilotOptions(session=1).check(locked, experiment.tasks_in_split("test"))
    assert refused.value.exit_code == 4
    said = str(refused.value)
    assert "confirmatory run on the locked test split, one claim run once" in said
    assert "--session is refused" in said
    PilotOptions(session=3).check(_plan(design=design), experiment.tasks_in_split("dev"))
    # a confirmatory registration still refuses a pilot's options, session or not
    with pytest.raises(ProtocolRefusal, match="--limit, --task"):
        PilotOptions(limit=1).check(locked, experiment.tasks_in_split("test"))


def test_sessions_run_text_by_hand() -> None:
    assert sessions_run_text({0, 1, 2}, 3) is None
    assert sessions_run_text({0}, 1) is None  # no replicate sessions
    assert (sessions_run_text({1}, 3) or "").startswith(
        "sessions run: 1 of 3 (sessions 1, 3 have no runs)"
    )
    assert (sessions_run_text({0, 1}, 3) or "").startswith(
        "sessions run: 2 of 3 (session 3 has no runs)"
    )


def test_a_session_keeps_its_units_of_the_plan_unchanged() -> None:
    # repeats 6 in 3 sessions: session 2 is repeats 2 and 3, with the seeds and rotations
    # the whole plan gives them
    plan = _plan(design={"repeats": 6, "sessions": 3, "rotations": 2, "seed": 5})
    experiment = load_experiment(folder_reader(BUNDLED), "music-library")
    whole = expand_units(plan, experiment)
    second = expand_units(replace(plan, pilot=PilotOptions(session=2)), experiment)
    assert second == [u for u in whole if u.repeat in (2, 3)]
    assert {u.repeat for u in second} == {2, 3}
    # progress by hand: 2 of session 2's units and every unit of session 1 done
    keys = [u.key for u in whole]
    per = len(keys) // 3
    done = {u.key for u in whole if u.repeat in (0, 1)} | {second[0].key, second[1].key}
    assert [
        (p.session, p.planned, p.completed, p.complete) for p in session_progress(keys, done, 6, 3)
    ] == [(1, per, per, True), (2, per, 2, False), (3, per, 0, False)]
    assert session_progress(keys, done, 6, 1) == []
