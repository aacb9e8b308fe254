"""Arms as configurations (issue 13): how an arm's host, budgets and system prompt resolve,
and the bad inputs refused at register (exit 2, file, line and field, nothing written)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from prereg.registry.schema import Registration
from prereg.registry.units import plan_from_registration
from tests.conftest import tree_digest

PILOT = Path(__file__).parents[2] / "registry" / "drafts" / "music-library-pilot.yaml"
DIGEST = "sha256:" + "0" * 64


def pilot(**arm_override: Any) -> dict[str, Any]:
    doc = yaml.safe_load(PILOT.read_text())
    doc["arms"][1].update(arm_override)
    return doc


def test_an_arm_inherits_what_it_does_not_override() -> None:
    reg = Registration.model_validate(
        pilot(budgets={"call_limit": 3}, system_prompt="Answer briefly.")
    )
    base, arm = reg.config_of("baseline"), reg.config_of("semantic")
    assert base.host == reg.host and base.budgets == reg.budgets and base.system_prompt is None
    assert arm.budgets.call_limit == 3
    assert arm.budgets.completion_cap == reg.budgets.completion_cap  # inherited field by field
    assert arm.system_prompt == "Answer briefly."


def test_a_registration_system_prompt_is_every_arms_default() -> None:
    doc = pilot(system_prompt="Arm prompt.")
    doc["system_prompt"] = "Default prompt."
    reg = Registration.model_validate(doc)
    assert reg.config_of("baseline").system_prompt == "Default prompt."
    assert reg.config_of("semantic").system_prompt == "Arm prompt."


def test_another_driver_inherits_nothing_but_batch_and_live() -> None:
    doc = pilot(host={"driver": "openai", "model": "gpt-5-mini"})
    doc["host"] = {
        "driver": "anthropic",
        "model": "claude-x",
        "params": {"top_k": 1},
        "allow_sampling": True,
    }
    doc["arms"][0]["host"] = {"model": "claude-y"}
    reg = Registration.model_validate(doc)
    other = reg.config_of("semantic").host
    assert other.driver == "openai" and other.params == {} and not other.allow_sampling
    same = reg.config_of("baseline").host
    assert same.model == "claude-y" and same.params == {"top_k": 1} and same.allow_sampling


def test_the_digest_covers_the_configuration_and_records_state_it() -> None:
    plain = plan_from_registration(Registration.model_validate(pilot()), DIGEST)
    capped = plan_from_registration(
        Registration.model_validate(pilot(budgets={"completion_cap": 64})), DIGEST
    )
    assert plain.config("semantic").digest() != capped.config("semantic").digest()
    assert plain.config("baseline").digest() == capped.config("baseline").digest()
    assert capped.config("semantic").budgets.completion_cap == 64
    # two arms with the same configuration share one digest, whatever their surfaces
    assert plain.config("baseline").digest() == plain.config("semantic").digest()


BAD = [
    # (arm override, field named, words in the message)
    ({"host": {"driver": "local", "modle": "x"}}, "arms[1].host.modle", "unknown field"),
    ({"budgets": {"spend_usd": 3}}, "arms[1].budgets.spend_usd", "unknown field"),
    ({"budgets": {"call_limit": 0}}, "arms[1].budgets.call_limit", "greater than 0"),
    ({"host": {"driver": "anthropic"}}, "arms[1].host", "model"),
    ({"host": {"driver": "anthropic", "model": "claude-x"}}, "arms", "evidence class"),
    ({"host": {"batch": True}}, "arms[1].host.batch", "unknown field"),
    ({"colour": "red"}, "arms[1].colour", "unknown field"),
    ({"host": {"params": {"temperature": 0.2}}}, "arms[1].host", "allow_sampling"),
]


@pytest.mark.parametrize(("override", "field", "words"), BAD)
def test_bad_configurations_are_refused_at_register(
    ws: Path, cli: Any, override: dict[str, Any], field: str, words: str
) -> None:
    draft = ws / "drafts" / "bad.yaml"
    draft.write_text(yaml.safe_dump(pilot(**override), sort_keys=False))
    before = tree_digest(ws / "registry")
    result = cli("-w", ws, "register", draft, "--json")
    assert result.code == 2, result.stdout + result.stderr
    error = result.json()
    assert error["field"].startswith(field), error
    assert words in error["message"], error
    assert re.search(r"bad\.yaml:\d+:\d+$", error["file"]), error  # file:line:column
    assert tree_digest(ws / "registry") == before


def test_a_batch_registration_refuses_arms_on_different_hosts(ws: Path, cli: Any) -> None:
    doc = pilot(host={"model": "claude-y"})
    doc["host"] = {"driver": "anthropic", "model": "claude-x", "batch": True}
    draft = ws / "drafts" / "batch.yaml"
    draft.write_text(yaml.safe_dump(doc, sort_keys=False))
    result = cli("-w", ws, "register", draft, "--json")
    assert result.code == 2 and result.json()["field"] == "host.batch"
