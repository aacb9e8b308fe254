"""``prereg corpus eligibility --propose`` through the real anthropic and openai SDKs against
the local provider fakes (no network): every (intent, competitor) asked once per family,
the answers' quotes checked against the pinned snapshot whatever the model claims, and
the refusals before anything is sent."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from prereg.experiments.loader import folder_reader, load_experiment
from prereg.runners.judging.eligibility import build_prompt, parse_answer
from tests.providers.fake_chat import ChatBrain, FakeChat
from tests.providers.fakes import anthropic_text, anthropic_usage, openai_text, provider_env

BUNDLED = Path(__file__).resolve().parents[2] / "experiments" / "bundled" / "podcast-selection"
CLAUDE, GPT = "anthropic:claude-haiku-4-5", "openai:gpt-5-mini"


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _asked(body: dict[str, Any]) -> dict[str, Any]:
    """The intent and integration of an eligibility request (the marked data)."""
    prompt = next(s for s in _strings(body) if "<<<INTEGRATION" in s)
    data = prompt.split("<<<INTEGRATION\n", 1)[1].split("\nINTEGRATION>>>", 1)[0]
    return dict(json.loads(data))


def _answer(family: str, asked: dict[str, Any]) -> str:
    intent = asked["intent"]["id"]
    integration = asked["integration"]
    first = integration["tools"][0]["description"]
    if intent == "podcast-chat":
        return json.dumps({"eligible": False, "quote": None})
    if family == "gpt" and (intent, integration["name"]) == ("episodes", "Castaway"):
        return json.dumps({"eligible": False, "quote": None})  # disagrees with claude
    if family == "gpt" and (intent, integration["name"]) == ("mark-played", "Earbud"):
        return json.dumps({"eligible": True, "quote": "Marks any episode as played."})  # made up
    if family == "gpt" and intent == "subscriptions":
        return "```json\n" + json.dumps({"eligible": True, "quote": first}) + "\n```"
    return json.dumps({"eligible": True, "quote": first})


class EligibilityBrain(ChatBrain):
    requests: list[str]

    def __init__(self) -> None:
        super().__init__()
        self.requests = []

    def anthropic(self, body: dict[str, Any]) -> dict[str, Any]:
        self.requests.append("claude")
        text = _answer("claude", _asked(body))
        return anthropic_text(
            text, model=str(body.get("model")) + self.suffix, usage=anthropic_usage(300, 20)
        )

    def openai(self, body: dict[str, Any]) -> dict[str, Any]:
        self.requests.append("gpt")
        return openai_text(_answer("gpt", _asked(body)), model=str(body.get("model")) + self.suffix)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeChat]:
    brain = EligibilityBrain()
    with FakeChat(brain) as server:
        provider_env(monkeypatch, server)
        yield server


@pytest.fixture
def elig_ws(ws: Path) -> Path:
    target = ws / "experiments" / "podcast-selection"
    if not target.exists():
        shutil.copytree(BUNDLED, target)
    return ws


def test_two_provider_families_through_the_sdks(cli: Any, elig_ws: Path, fake: FakeChat) -> None:
    r = cli(
        "-w", elig_ws, "corpus", "eligibility", "podcast-selection", "--propose",
        "--families", f"{CLAUDE},{GPT}", "--spend-usd", "5", "--json",
    )  # fmt: skip
    assert r.code == 0, r.stderr + r.stdout
    data = r.json()
    brain = fake.brain
    assert isinstance(brain, EligibilityBrain)
    # 6 intents x 2 competitors, once per family
    assert sorted(brain.requests) == ["claude"] * 12 + ["gpt"] * 12
    status = {(p["intent"], p["competitor"]): p["status"] for p in data["pairs"]}
    assert status[("find-podcast", "castaway")] == "eligible"
    assert status[("subscriptions", "earbud")] == "eligible"  # a fenced JSON answer reads
    assert status[("episodes", "castaway")] == "disagree"
    assert status[("mark-played", "earbud")] == "unresolved"  # the made-up quote
    assert status[("podcast-chat", "castaway")] == "ineligible"
    assert sorted(data["needs_review"]) == ["episodes:castaway", "mark-played:earbud"]
    pair = next(
        p for p in data["pairs"] if (p["intent"], p["competitor"]) == ("mark-played", "earbud")
    )
    assert pair["answers"][GPT]["answer"] == "invalid"
    assert "not in the competitor" in pair["answers"][GPT]["reason"]
    assert pair["answers"][CLAUDE]["found_in"] == "tools[earbud_podcast_search].description"
    families = data["proposal"]["families"]
    assert families[CLAUDE]["kind"] == "provider"
    assert families[CLAUDE]["models_returned"] == ["claude-haiku-4-5-20991231"]
    assert families[GPT]["failed"] == 0


@pytest.mark.parametrize(
    ("families", "extra", "field"),
    [
        (f"{CLAUDE},fake-names", ["--spend-usd", "1"], "--families"),  # mixed
        (f"{CLAUDE},anthropic:claude-sonnet-4-5", ["--spend-usd", "1"], "--families"),
        ("nosuch:model,openai:gpt-5-mini", ["--spend-usd", "1"], "--families"),
        (f"{CLAUDE},{GPT}", [], "--spend-usd"),
    ],
)
def test_refusals_before_anything_is_sent(
    cli: Any, elig_ws: Path, fake: FakeChat, families: str, extra: list[str], field: str
) -> None:
    r = cli(
        "-w", elig_ws, "corpus", "eligibility", "podcast-selection", "--propose",
        "--families", families, *extra, "--json",
    )  # fmt: skip
    assert r.code == 2
    assert json.loads(r.stdout or r.stderr)["field"] == field
    brain = fake.brain
    assert isinstance(brain, EligibilityBrain) and brain.requests == []
    assert not (elig_ws / "registry" / "eligibility").exists()


def test_a_missing_key_is_exit_2_naming_the_variable(
    cli: Any, elig_ws: Path, fake: FakeChat, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    r = cli(
        "-w", elig_ws, "corpus", "eligibility", "podcast-selection", "--propose",
        "--families", f"{CLAUDE},{GPT}", "--spend-usd", "5", "--json",
    )  # fmt: skip
    assert r.code == 2
    assert json.loads(r.stdout or r.stderr)["field"] == "OPENAI_API_KEY"
    assert not (elig_ws / "registry" / "eligibility").exists()


def test_the_prompt_marks_the_tool_text_as_data_and_answers_are_strict() -> None:
    podcast = load_experiment(folder_reader(BUNDLED), "podcast-selection")
    prompt = build_prompt("episodes", "List a podcast's episodes.", podcast.surfaces["earbud"])
    assert prompt.count("<<<INTEGRATION") == 1 and "earbud_history" in prompt
    assert parse_answer('{"eligible": true, "quote": "x y z"}') == (True, "x y z")
    assert parse_answer('{"eligible": false, "quote": null}') == (False, None)
    assert parse_answer("yes, it is eligible") == (None, None)
    assert parse_answer('{"eligible": "yes"}') == (None, None)
    assert parse_answer("[true]") == (None, None)
