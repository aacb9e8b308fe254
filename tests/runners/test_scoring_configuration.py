"""A record's configuration is built once per distinct configuration and still carries
the arm's own digest (``ArmConfig.digest``: sha256 of the RFC 8785 canonical JSON)."""

from __future__ import annotations

import types

import pytest

from prereg.registry.units import ArmConfig, Budgets
from prereg.runners import scoring
from prereg.runners.record import Configuration

CONFIGS = [
    ArmConfig("openai", "gpt-5-mini", {"temperature": 0.5, "stop": ["\u00e9", 2.5e-7]}),
    ArmConfig("local", None, {}, system_prompt="caf\u00e9", budgets=Budgets(completion_cap=7)),
    ArmConfig("anthropic", "claude-haiku-4-5", {}, tool_search=True, tool_access="connector"),
]


def plan_of(config: ArmConfig) -> object:
    return types.SimpleNamespace(config=lambda arm: config)


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.driver)
def test_the_shared_configuration_is_the_arms_own(config: ArmConfig) -> None:
    built = scoring.configuration(plan_of(config), "a")  # type: ignore[arg-type]
    fresh = Configuration(**config.as_json(), digest=config.digest())
    assert built == fresh and built.digest == config.digest()


def test_equal_configurations_share_one_instance_and_different_ones_do_not() -> None:
    one = scoring.configuration(plan_of(CONFIGS[0]), "a")  # type: ignore[arg-type]
    same = ArmConfig("openai", "gpt-5-mini", {"stop": ["\u00e9", 2.5e-7], "temperature": 0.5})
    assert scoring.configuration(plan_of(same), "b") is one  # type: ignore[arg-type]
    other = ArmConfig("openai", "gpt-5-mini", {"temperature": 0.6, "stop": ["\u00e9", 2.5e-7]})
    differs = scoring.configuration(plan_of(other), "c")  # type: ignore[arg-type]
    assert differs is not one and differs.digest == other.digest() != one.digest
