"""``prereg import --from inspect`` (issue 16, item 4): a real Inspect AI run, imported.

A tiny Inspect task (the real ``inspect_ai.eval``, its Chat Completions provider) runs
against the local fake OpenAI-compatible server of tests/providers (no network, no key),
two epochs over three tasks of the registration's split. Its log imports into a
registration whose host is ``driver: inspect``; what the store then holds is checked
against the log as Inspect's own reader reads it and against what the fake server
answered (its usage: 260 prompt and 12 completion tokens per reply). A log that does not
match the registration is refused, exit 3, with the run store byte for byte unchanged.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from prereg.experiments import load_experiment
from prereg.experiments.loader import folder_reader
from tests.conftest import tree_digest
from tests.exchange.conftest import jsonl_records, prereg

inspect_ai = pytest.importorskip("inspect_ai", reason="needs prereg-agents[inspect] (dev extra)")

from inspect_ai.log import EvalLog, read_eval_log, write_eval_log  # noqa: E402

from tests.providers.fake_chat import FakeChat  # noqa: E402

REG = "inspect-pilot"
MODEL = "openai-api/fake/served-model"  # Inspect's Chat Completions provider, service "fake"
TARGETS = ("found", "found", "absent")  # the fake answers "Here is what I found."


def _draft(root: Path, reg_id: str, host: str) -> Path:
    text = (root / "drafts" / "music-library-pilot.yaml").read_text()
    text = text.replace("id: music-library-pilot", f"id: {reg_id}")
    text = text.replace("host: {driver: local}", f"host: {host}")
    text = text.replace("repeats: 3", "repeats: 2")
    path = root / "drafts" / f"{reg_id}.yaml"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Registrations made before the Inspect run: the matching one and two that are not."""
    root = tmp_path_factory.mktemp("inspect-import") / "ws"
    assert prereg("init", root)[0] == 0
    for reg_id, host in [
        (REG, f"{{driver: inspect, model: {MODEL}}}"),
        ("other-model", "{driver: inspect, model: openai-api/fake/another-model}"),
        ("local-pilot", "{driver: local}"),
    ]:
        code, text = prereg("-w", root, "register", _draft(root, reg_id, host), "--json")
        assert code == 0, text
    return root


@pytest.fixture(scope="module")
def tasks(workspace: Path) -> list[Any]:
    """Three tasks of the dev split, from the experiment the registrations froze."""
    experiment = load_experiment(
        folder_reader(workspace / "experiments" / "music-library"), "music-library"
    )
    return sorted(experiment.tasks_in_split("dev"), key=lambda t: t.id)[:3]


@pytest.fixture(scope="module")
def log_file(workspace: Path, tasks: list[Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real Inspect run of arm 'baseline' against the fake server: its .eval log."""
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.scorer import includes
    from inspect_ai.solver import generate

    logs = tmp_path_factory.mktemp("inspect-logs")
    task = Task(
        name="baseline",
        dataset=[
            Sample(id=t.id, input=t.prompt, target=target)
            for t, target in zip(tasks, TARGETS, strict=True)
        ],
        solver=generate(),
        scorer=includes(),
        epochs=2,
    )
    with pytest.MonkeyPatch.context() as env, FakeChat() as fake:
        env.setenv("FAKE_API_KEY", "sk-fake-test")
        env.setenv("NO_PROXY", "127.0.0.1,localhost")
        env.setenv("no_proxy", "127.0.0.1,localhost")
        [log] = inspect_eval(
            task,
            model=MODEL,
            model_base_url=fake.openai_url,
            log_dir=str(logs),
            display="none",
            metadata={"arm": "baseline"},
        )
        assert fake.model_requests == 6
    assert log.status == "success", log.error
    return Path(log.location)


def _records(root: Path, reg_id: str = REG) -> list[dict[str, Any]]:
    out = root.parent / f"{reg_id}-check.jsonl"
    assert prereg("-w", root, "export", reg_id, "--out", out, "--force")[0] == 0
    return jsonl_records(out)


def test_an_inspect_run_imports_onto_the_planned_units(
    workspace: Path, log_file: Path, tasks: list[Any]
) -> None:
    code, text = prereg(
        "-w", workspace, "import", "--from", "inspect", log_file, "--registration", REG, "--json"
    )
    assert code == 0, text
    summary = json.loads(text)
    assert summary["imported"] == 6 and summary["arm"] == "baseline"
    log = read_eval_log(str(log_file))
    assert log.samples is not None
    verdicts = {(s.id, s.epoch): s.scores["includes"].value for s in log.samples}
    expected = {
        (t.id, e): "C" if target == "found" else "I"
        for t, target in zip(tasks, TARGETS, strict=True)
        for e in (1, 2)
    }
    assert verdicts == expected  # the reference: Inspect's own scorer on the fake's answer
    records = _records(workspace)
    assert len(records) == 6
    by_unit = {(r["task_id"], r["repeat"] + 1): r for r in records}
    assert set(by_unit) == set(expected)
    for key, record in by_unit.items():
        assert record["arm"] == "baseline"
        assert record["evidence_class"] == record["driver"] == "inspect"
        assert record["success"] is (expected[key] == "C")
        assert record["tokens"]["input"] == 260 and record["tokens"]["output"] == 12
        assert record["model_requested"] == MODEL
        assert record["funnel"] == dict.fromkeys(
            ("surfaced", "selected", "invoked", "executed", "completed")
        )  # not measured by Inspect: null, never estimated
        assert record["status"] == "ok"
    task_of = {t.id: t for t in tasks}
    assert all(r["intent"] == task_of[r["task_id"]].intent for r in records)


def test_importing_the_same_log_again_writes_nothing(workspace: Path, log_file: Path) -> None:
    # imported once here, whether or not the test above ran in this process (xdist may
    # send it to another worker, with its own module fixture)
    args = ("-w", workspace, "import", "--from", "inspect", log_file, "--registration", REG)
    assert prereg(*args)[0] == 0
    before = tree_digest(workspace / "runs")
    code, text = prereg(
        "-w", workspace, "import", "--from", "inspect", log_file, "--registration", REG, "--json"
    )
    assert code == 0, text
    assert json.loads(text)["imported"] == 0 and json.loads(text)["already_stored"] == 6
    assert tree_digest(workspace / "runs") == before


def test_prereg_does_not_run_an_inspect_registration(
    workspace: Path, cli: Callable[..., Any]
) -> None:
    before = tree_digest(workspace / "runs")
    result = cli("-w", workspace, "run", REG)
    assert result.code == 4 and "import" in result.stderr
    assert tree_digest(workspace / "runs") == before


def _edited(log_file: Path, where: Path, change: Callable[[EvalLog], None]) -> Path:
    log = read_eval_log(str(log_file))
    change(log)
    write_eval_log(log, str(where))
    return where


def _rename_sample(log: EvalLog) -> None:
    assert log.samples is not None
    log.samples[0].id = "t999-not-planned"


def _rename_arm(log: EvalLog) -> None:
    log.eval.metadata = {"arm": "no-such-arm"}


def _third_epoch(log: EvalLog) -> None:
    assert log.samples is not None
    log.samples[0].epoch = 3


@pytest.mark.parametrize(
    ("registration", "change", "needle"),
    [
        ("local-pilot", None, "driver local"),
        ("other-model", None, "another-model"),
        (REG, _rename_sample, "t999-not-planned"),
        (REG, _rename_arm, "no-such-arm"),
        (REG, _third_epoch, "epoch 3"),
    ],
)
def test_a_log_that_does_not_match_is_refused(
    workspace: Path,
    log_file: Path,
    tmp_path: Path,
    cli: Callable[..., Any],
    registration: str,
    change: Callable[[EvalLog], None] | None,
    needle: str,
) -> None:
    path = log_file if change is None else _edited(log_file, tmp_path / "edited.eval", change)
    before = tree_digest(workspace / "runs"), tree_digest(workspace / "registry")
    result = cli(
        "-w", workspace, "import", "--from", "inspect", path, "--registration", registration
    )
    assert result.code == 3, result.stderr
    assert needle in result.stderr and "nothing was imported" in result.stderr
    assert (tree_digest(workspace / "runs"), tree_digest(workspace / "registry")) == before


def test_bad_usage_is_exit_2(
    workspace: Path, log_file: Path, cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    no_reg = cli("-w", workspace, "import", "--from", "inspect", log_file)
    assert no_reg.code == 2 and "--registration" in no_reg.stderr
    not_a_log = workspace / "drafts" / "music-library-pilot.yaml"
    bad = cli("-w", workspace, "import", "--from", "inspect", not_a_log, "--registration", REG)
    assert bad.code == 2 and "Inspect" in bad.stderr
    unknown = cli("-w", workspace, "import", "--from", "promptfoo", log_file)
    assert unknown.code == 2 and "--from" in unknown.stderr
    before = tree_digest(workspace / "runs")
    monkeypatch.setitem(sys.modules, "inspect_ai.log", None)  # as if the extra were missing
    missing = cli("-w", workspace, "import", "--from", "inspect", log_file, "--registration", REG)
    assert missing.code == 2 and "prereg-agents[inspect]" in missing.stderr
    assert tree_digest(workspace / "runs") == before


def test_secrets_in_an_imported_log_are_redacted(
    workspace: Path, log_file: Path, tmp_path: Path
) -> None:
    """The log's text is untrusted: a key-shaped string in an answer is not stored."""
    secret = "sk-proj-" + "Q7fakeKEYfakeKEYfakeKEY12"

    def leak(log: EvalLog) -> None:
        assert log.samples is not None
        log.eval.metadata = {"arm": "semantic"}  # the other arm: units not yet imported
        for sample in log.samples:
            sample.output.completion = f"Here is what I found. The key is {secret}."

    path = _edited(log_file, tmp_path / "leaky.eval", leak)
    code, text = prereg(
        "-w", workspace, "import", "--from", "inspect", path, "--registration", REG, "--json"
    )
    assert code == 0, text
    assert json.loads(text)["imported"] == 6
    out = workspace.parent / "leak-check.jsonl"
    assert prereg("-w", workspace, "export", REG, "--out", out, "--force")[0] == 0
    assert secret not in out.read_text()
    finals = [
        e["text"]
        for r in jsonl_records(out)
        if r["arm"] == "semantic"
        for e in r["trace"]
        if e["kind"] == "final"
    ]
    assert len(finals) == 6 and all("[REDACTED]" in f for f in finals)
    assert secret not in text
