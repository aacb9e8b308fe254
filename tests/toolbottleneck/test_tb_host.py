"""A registered study on a model host (issue 19): ``prereg run`` plays each unit through
the real SDK clients against the local provider fake (tests/providers/fakes.py), whose
scripted model (tests/toolbottleneck/tb_agent.py) reads only the wire.

The expectations are worked out here from the seed and the family file, not read from
the code: the overdue-case family's low workflow is a search, a read and the escalation
(3 calls), so its call limit is 5 and its turn limit 7; the answer's facts are the
family file's; a route neighbour of the action tool changes nothing, so the action the
reference program needs is never made (S fails first) and the records stay in their
seed state (G fails), which the seed's precedence flags as a wrong conclusion.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from prereg.experiments.toolbottleneck.verify import OBLIGATIONS
from prereg.runners.record import RunRecord
from prereg.runners.store.choose import open_store
from tests.providers.fake_chat import FakeChat
from tests.providers.fakes import ANTHROPIC_KEY, FakeProviders, provider_env, server_error
from tests.toolbottleneck.helpers import BUNDLED
from tests.toolbottleneck.tb_agent import FACTS, ROUTE, USAGE_IN, USAGE_OUT, StudyBrain

STUDY = "one-family"
FAMILY = "overdue-case-escalation"
MODELS = {
    "anthropic": "claude-haiku-4-5",
    "openai": "gpt-5-mini",
    "openai-chat": "qwen2.5:7b-instruct",
}
#: open-weights servers have no shipped prices: the user's file prices the chat model
CHAT_PRICES = """\
version: team-local-1
date: '2026-12-01'
providers:
  openai-chat:
    models:
      'qwen2.5:7b-instruct': {input: 0.10, output: 0.40}
"""
CERTIFIED = 3  # search, read, escalation (seed 3.3 / reading 4: 2 reads + 1 action)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProviders]:
    with FakeChat(StudyBrain()) as server:  # type: ignore[arg-type]
        provider_env(monkeypatch, server)
        yield server


@pytest.fixture
def study_ws(ws: Path) -> Path:
    folder = ws / "experiments" / STUDY
    (folder / "families").mkdir(parents=True)
    shutil.copy(BUNDLED / f"{FAMILY}.yaml", folder / "families" / f"{FAMILY}.yaml")
    entry = {
        "name": STUDY,
        "kind": "toolbottleneck",
        "families": [f"families/{FAMILY}.yaml"],
        "seeds": [0],
    }
    (folder / "experiment.yaml").write_text(yaml.safe_dump(entry))
    return ws


def _arm(mode: str, menu_mode: str = "routed") -> dict[str, Any]:
    return {
        "id": mode,
        "surface": "variants",
        "toolbottleneck": {"menu": 8, "menu_mode": menu_mode},
        "system_prompt": f"You are a careful agent. mode: {mode}",
    }


def _register(ws: Path, cli: Any, driver: str) -> str:
    reg_id = f"host-{driver}"
    doc = {
        "id": reg_id,
        "title": "t",
        "hypothesis": "h",
        "falsification": "f",
        "experiment": STUDY,
        "kind": "exploratory",
        "split": "dev",
        "arms": [
            _arm("correct"),
            _arm("neighbour", "fixed"),
            _arm("waste"),
            _arm("cut"),
        ],
        "host": {"driver": driver, "model": MODELS[driver]},
        "budgets": {
            "completion_cap": 512,
            "episode_tokens": 100000,
            "call_limit_over_certified": 2,
            "turn_limit_over_calls": 2,
            "spend_usd": 5,
        },
        "design": {"repeats": 1, "seed": 3},
        "primary": {"test": "mcnemar_exact"},
    }
    path = ws / f"{reg_id}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    result = cli("-w", ws, "register", path, "--json")
    assert result.code == 0, result.stderr
    return reg_id


def _records(ws: Path, reg_id: str) -> dict[str, RunRecord]:
    store = open_store(ws / "runs")
    try:
        records = [r for r in store.records() if r.registration_id == reg_id]
    finally:
        store.close()
    return {r.arm: r for r in records}


def _expected(failing: set[str]) -> dict[str, bool]:
    return {name: name not in failing for name in OBLIGATIONS}


@pytest.mark.parametrize("driver", ["anthropic", "openai", "openai-chat"])
def test_a_study_runs_on_a_model_host(study_ws: Path, cli: Any, fake: FakeProviders, driver: str):
    reg_id = _register(study_ws, cli, driver)
    prices: list[Any] = []
    if driver == "openai-chat":
        (study_ws / "prices.yaml").write_text(CHAT_PRICES)
        prices = ["--prices", study_ws / "prices.yaml"]
    result = cli("-w", study_ws, "run", reg_id, "--json", "--concurrency", "1", *prices)
    assert result.code == 0, result.stderr
    summary = result.json()
    assert summary["evidence_class"] == "api" and summary["completed"] == 4
    records = _records(study_ws, reg_id)
    family = yaml.safe_load((BUNDLED / f"{FAMILY}.yaml").read_text())

    correct = records["correct"]
    assert correct.evidence_class == "api" and correct.status == "ok"
    assert correct.obligations == _expected(set())
    assert correct.success is True and correct.terminal_flag is None
    assert correct.calls == CERTIFIED and correct.turns == CERTIFIED + 1
    # the provider's usage, latency and cost are measured (reading 24 needs them)
    assert correct.tokens.input == USAGE_IN * correct.turns
    assert correct.tokens.output == USAGE_OUT * correct.turns
    assert correct.latency_ms is not None and correct.cost_usd is not None
    assert correct.cost_usd > 0
    final = next(e for e in correct.trace if e.kind == "final")
    answer = yaml.safe_load(final.text or "")
    assert answer["facts"] == {name: family["facts"][name]["value"] for name in FACTS}

    neighbour = records["neighbour"]
    assert neighbour.obligations == _expected({"selection", "final_state"})
    assert neighbour.first_unmet_obligation == "selection"
    assert neighbour.terminal_flag == "wrong_conclusion"

    waste = records["waste"]
    assert waste.terminal_flag == "call_limit"
    assert waste.calls == CERTIFIED + 2  # the sixth call was refused at the limit
    assert waste.obligations is not None and waste.obligations["budgets"] is False
    assert sum(1 for e in waste.trace if e.kind == "tool_result") == CERTIFIED + 2

    cut = records["cut"]
    assert cut.terminal_flag == "completion_cap" and cut.calls == 0
    assert cut.first_unmet_obligation == "selection"  # cut before the first call (reading 20)
    assert cut.success is False


def test_the_routed_menu_narrows_after_the_first_operational_call(
    study_ws: Path, cli: Any, fake: FakeProviders
) -> None:
    reg_id = _register(study_ws, cli, "anthropic")
    result = cli("-w", study_ws, "run", reg_id, "--json", "--concurrency", "1")
    assert result.code == 0, result.stderr
    bodies = [b for b in fake.model_bodies("anthropic") if "mode: correct" in str(b["system"])]
    assert len(bodies) == CERTIFIED + 1
    system = bodies[0]["system"]
    assert "mode: correct" in (system if isinstance(system, str) else str(system))
    menus = [[t["name"] for t in b["tools"]] for b in bodies]
    first = bodies[0]["tools"]
    on_route = sorted(t["name"] for t in first if ROUTE in t["description"])
    assert len(menus[0]) == 8 and len(on_route) < 8  # a neighbour is on the full menu
    # the first call (the case search) returned a record: from then on, the operational
    # tools only (those on the request's route)
    assert all(sorted(m) == on_route for m in menus[1:])
    # the fixed menu keeps every schema
    fixed = [b for b in fake.model_bodies("anthropic") if "mode: neighbour" in str(b["system"])]
    assert all(len(b["tools"]) == 8 for b in fixed)


def test_a_provider_failure_is_an_infrastructure_record(
    study_ws: Path, cli: Any, fake: FakeProviders
) -> None:
    reg_id = _register(study_ws, cli, "anthropic")
    # every attempt of the first request fails (PREREG_MAX_ATTEMPTS=4), echoing the key
    fake.script("anthropic", *[server_error("anthropic") for _ in range(4)])
    result = cli("-w", study_ws, "run", reg_id, "--json", "--concurrency", "1")
    assert result.code == 0, result.stderr
    assert result.json()["failed"] == 1 and result.json()["completed"] == 3
    store = open_store(study_ws / "runs")
    try:
        failed = [r for r in store.records() if r.status == "infra_error"]
    finally:
        store.close()
    assert len(failed) == 1 and failed[0].success is None
    assert ANTHROPIC_KEY not in (failed[0].error or "")
    # the next run retries it, and only it
    again = cli("-w", study_ws, "run", reg_id, "--json", "--concurrency", "1")
    assert again.code == 0 and again.json()["completed"] == 1


@pytest.mark.parametrize(
    ("host", "field"),
    [
        ({"tool_search": True}, "host.tool_search"),
        ({"tool_access": "connector"}, "host.tool_access"),
    ],
)
def test_a_study_host_takes_the_menu_as_client_tools(
    study_ws: Path, cli: Any, host: dict[str, Any], field: str
) -> None:
    """The variant's menu is what the model is shown and the sandbox what runs: a provider
    tool search or connector would bypass both (refused at register, nothing written)."""
    doc = {
        "id": "searching",
        "title": "t",
        "hypothesis": "h",
        "falsification": "f",
        "experiment": STUDY,
        "kind": "exploratory",
        "split": "dev",
        "arms": [_arm("correct"), _arm("waste")],
        "host": {"driver": "anthropic", "model": MODELS["anthropic"], **host},
        "budgets": {"call_limit_over_certified": 2, "turn_limit_over_calls": 2},
        "primary": {"test": "mcnemar_exact"},
    }
    path = study_ws / "searching.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    result = cli("-w", study_ws, "register", path, "--json")
    assert result.code == 2 and field in result.stderr, result.stderr
    assert not (study_ws / "registry" / "frozen" / "searching.json").exists()
