"""``prereg import --from inspect``: what a sample's ending becomes, and what is refused.

The logs here are built with inspect_ai's own types and written with its
``write_eval_log`` (test_import_inspect.py imports one an Inspect run wrote): a sample
that ended in an error is an infrastructure failure, not an agent failure; a sample cut
by a token limit failed at the episode budget; a score that is not binary, or a scorer
that cannot be told, is bad input; a confirmatory registration takes no sample made
before it was registered, and such a refusal spends nothing (no claim on the locked split).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from prereg.experiments import load_experiment
from prereg.experiments.loader import folder_reader
from tests.conftest import tree_digest
from tests.exchange.conftest import jsonl_records, prereg

pytest.importorskip("inspect_ai", reason="needs prereg-agents[inspect] (dev extra)")

from inspect_ai.log import (  # noqa: E402
    EvalConfig,
    EvalDataset,
    EvalError,
    EvalLog,
    EvalSample,
    EvalSampleLimit,
    EvalSpec,
    write_eval_log,
)
from inspect_ai.model import (  # noqa: E402
    ChatMessageAssistant,
    ChatMessageTool,
    ChatMessageUser,
    ModelOutput,
)
from inspect_ai.scorer import Score  # noqa: E402
from inspect_ai.tool import ToolCall, ToolCallError  # noqa: E402

MODEL = "openai-api/fake/served-model"


def _register(root: Path, reg_id: str, *, confirmatory: bool = False) -> None:
    source = "music-library-confirmatory.yaml" if confirmatory else "music-library-pilot.yaml"
    text = (root / "drafts" / source).read_text()
    text = text.replace("id: music-library-confirmatory", f"id: {reg_id}")
    text = text.replace("id: music-library-pilot", f"id: {reg_id}")
    text = text.replace("host: {driver: local}", f"host: {{driver: inspect, model: {MODEL}}}")
    text = text.replace("repeats: 3", "repeats: 2")
    path = root / "drafts" / f"{reg_id}.yaml"
    path.write_text(text)
    code, out = prereg("-w", root, "register", path, "--json")
    assert code == 0, out


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("inspect-edges") / "ws"
    assert prereg("init", root)[0] == 0
    _register(root, "edges")
    return root


def _tasks(root: Path, split: str) -> list[str]:
    experiment = load_experiment(
        folder_reader(root / "experiments" / "music-library"), "music-library"
    )
    return sorted(t.id for t in experiment.tasks_in_split(split))[:3]


def _sample(
    task: str,
    epoch: int,
    value: object,
    started: datetime,
    *,
    error: str | None = None,
    limit: str | None = None,
    scorer: str = "match",
) -> EvalSample:
    return EvalSample(
        id=task,
        epoch=epoch,
        input="prompt",
        target="x",
        output=ModelOutput.from_content(MODEL, "an answer"),
        scores=None if value is None else {scorer: Score(value=value)},  # type: ignore[arg-type]
        started_at=started.isoformat(),
        completed_at=(started + timedelta(seconds=2)).isoformat(),
        total_time=2.0,
        error=None if error is None else EvalError(message=error, traceback="", traceback_ansi=""),
        limit=None if limit is None else EvalSampleLimit(type=limit, limit=100),  # type: ignore[arg-type]
    )


def _log(path: Path, samples: list[EvalSample], arm: str = "baseline") -> Path:
    log = EvalLog(
        eval=EvalSpec(
            created=datetime.now(UTC).isoformat(),
            task="edges-task",
            dataset=EvalDataset(name="d"),
            model=MODEL,
            config=EvalConfig(epochs=2),
            metadata={"arm": arm},
        ),
        samples=samples,
    )
    write_eval_log(log, str(path))
    return path


def _import(cli: Callable[..., Any], root: Path, path: Path, reg_id: str) -> Any:
    return cli("-w", root, "import", "--from", "inspect", path, "--registration", reg_id, "--json")


def test_errors_and_limits_become_what_they_are(
    workspace: Path, tmp_path: Path, cli: Callable[..., Any]
) -> None:
    a, b, c = _tasks(workspace, "dev")
    now = datetime.now(UTC)
    path = _log(
        tmp_path / "mixed.eval",
        [
            _sample(a, 1, "C", now),
            _sample(b, 1, "I", now, limit="token"),
            _sample(c, 1, 0, now),
            _sample(a, 2, None, now, error="connection reset by the model server"),
            _sample(b, 2, 1.0, now),
            _sample(c, 2, "N", now, limit="message"),
        ],
    )
    result = _import(cli, workspace, path, "edges")
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout)["infra_error"] == 1
    out = workspace.parent / "edges.jsonl"
    assert prereg("-w", workspace, "export", "edges", "--out", out, "--force")[0] == 0
    got = {
        (r["task_id"], r["repeat"] + 1): (
            r["status"],
            r["success"],
            r["terminal_flag"],
            r["first_unmet_obligation"],
        )
        for r in jsonl_records(out)
    }
    assert got == {
        (a, 1): ("ok", True, None, None),
        (b, 1): ("ok", False, "episode_budget", "termination"),
        (c, 1): ("ok", False, "wrong_conclusion", "answer"),
        (a, 2): ("infra_error", None, None, None),
        (b, 2): ("ok", True, None, None),
        (c, 2): ("ok", False, "turn_limit", "termination"),
    }


def test_tool_results_are_kept_with_their_calls(
    workspace: Path, tmp_path: Path, cli: Callable[..., Any]
) -> None:
    """Each tool message becomes a tool_result at the turn of the call it answers, with
    its text and whether the tool failed (before, only the calls were imported)."""
    a = _tasks(workspace, "dev")[0]
    sample = _sample(a, 1, "C", datetime.now(UTC))
    sample.messages = [
        ChatMessageUser(content="prompt"),
        ChatMessageAssistant(
            content="",
            tool_calls=[
                ToolCall(id="c1", function="search_tracks", arguments={"q": "blue"}),
                ToolCall(id="c2", function="get_album", arguments={"id": 7}),
            ],
        ),
        ChatMessageTool(
            content="3 tracks found",
            tool_call_id="c2",
            function="get_album",
            error=ToolCallError(type="unknown", message="album 7 is gone"),
        ),
        ChatMessageTool(content="track 12, track 19", tool_call_id="c1", function="search_tracks"),
        ChatMessageAssistant(
            content="", tool_calls=[ToolCall(id="c3", function="play", arguments={"id": 12})]
        ),
        ChatMessageTool(content="playing", tool_call_id="c3", function="play"),
        ChatMessageAssistant(content="an answer"),
    ]
    path = _log(tmp_path / "tools.eval", [sample])
    _register(workspace, "edges-tools")
    result = _import(cli, workspace, path, "edges-tools")
    assert result.code == 0, result.stderr
    out = workspace.parent / "edges-tools.jsonl"
    assert prereg("-w", workspace, "export", "edges-tools", "--out", out, "--force")[0] == 0
    (record,) = [r for r in jsonl_records(out) if (r["task_id"], r["repeat"]) == (a, 0)]
    got = [
        (e["kind"], e["turn"], e["tool"], e.get("result"), e.get("is_error"))
        for e in record["trace"]
        if e["kind"] in ("tool_call", "tool_result")
    ]
    assert got == [
        ("tool_call", 0, "search_tracks", None, None),
        ("tool_call", 0, "get_album", None, None),
        ("tool_result", 0, "get_album", "3 tracks found", True),
        ("tool_result", 0, "search_tracks", "track 12, track 19", False),
        ("tool_call", 1, "play", None, None),
        ("tool_result", 1, "play", "playing", False),
    ]
    failed = next(e for e in record["trace"] if e.get("is_error"))
    assert failed["text"] == "album 7 is gone"


@pytest.mark.parametrize(
    ("samples", "needle"),
    [
        (lambda t, now: [_sample(t[0], 1, "P", now)], "'P'"),
        (lambda t, now: [_sample(t[0], 1, 0.5, now)], "0.5"),
        (
            lambda t, now: [
                _sample(t[0], 1, "C", now, scorer="one"),
                _sample(t[1], 1, "C", now, scorer="two"),
            ],
            "['one', 'two']",
        ),
    ],
)
def test_scores_that_do_not_decide_success_are_bad_input(
    workspace: Path,
    tmp_path: Path,
    cli: Callable[..., Any],
    samples: Callable[[list[str], datetime], list[EvalSample]],
    needle: str,
) -> None:
    path = _log(tmp_path / "bad.eval", samples(_tasks(workspace, "dev"), datetime.now(UTC)))
    before = tree_digest(workspace / "runs")
    result = _import(cli, workspace, path, "edges")
    assert result.code == 2 and needle in result.stderr
    assert tree_digest(workspace / "runs") == before


def test_a_confirmatory_registration_takes_no_earlier_runs(
    workspace: Path, tmp_path: Path, cli: Callable[..., Any]
) -> None:
    tasks = _tasks(workspace, "test")
    early = _log(
        tmp_path / "early.eval",
        [_sample(t, 1, "C", datetime(2020, 1, 1, tzinfo=UTC)) for t in tasks],
    )
    _register(workspace, "edges-confirmatory", confirmatory=True)
    before = tree_digest(workspace / "runs"), tree_digest(workspace / "registry")
    refused = _import(cli, workspace, early, "edges-confirmatory")
    assert refused.code == 4 and "before 'edges-confirmatory' was registered" in refused.stderr
    assert "locked-split-claim" not in _ledger(workspace)
    assert (tree_digest(workspace / "runs"), tree_digest(workspace / "registry")) == before
    later = datetime.now(UTC) + timedelta(seconds=1)
    made_after = _log(tmp_path / "after.eval", [_sample(t, 1, "C", later) for t in tasks])
    accepted = _import(cli, workspace, made_after, "edges-confirmatory")
    assert accepted.code == 0, accepted.stderr
    assert "locked-split-claim" in _ledger(workspace)  # now spent, as by a run


def _ledger(root: Path) -> str:
    return "".join(p.read_text() for p in (root / "registry").rglob("*.jsonl"))


def test_an_errored_eval_is_named_by_its_error(
    workspace: Path, tmp_path: Path, cli: Callable[..., Any]
) -> None:
    """An eval that failed before scoring (status "error", no sample scored) is refused
    with the eval's own error, not with "cannot tell which score decides" (issue 43)."""
    a, b, _ = _tasks(workspace, "dev")
    now = datetime.now(UTC)
    failing = "model server refused the request (HTTP 529 overloaded)"
    log = EvalLog(
        eval=EvalSpec(
            created=now.isoformat(),
            task="edges-task",
            dataset=EvalDataset(name="d"),
            model=MODEL,
            config=EvalConfig(epochs=2),
            metadata={"arm": "baseline"},
        ),
        status="error",
        error=EvalError(message=failing, traceback="", traceback_ansi=""),
        samples=[_sample(a, 1, None, now, error=failing), _sample(b, 1, None, now, error=failing)],
    )
    path = tmp_path / "errored.eval"
    write_eval_log(log, str(path))
    before = tree_digest(workspace / "runs")
    result = _import(cli, workspace, path, "edges")
    assert result.code == 2, result.stderr
    assert "ended in an error before any sample was scored" in result.stderr
    assert failing in result.stderr and "which score decides" not in result.stderr
    assert tree_digest(workspace / "runs") == before
