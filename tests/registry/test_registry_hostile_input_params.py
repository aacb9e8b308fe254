"""Provider params at register agree with what each driver refuses at run.

The registry's driver table (:mod:`prereg.registry.hosts`) declares, per driver, the
``host.params`` it accepts; the schema refuses the rest at register. These tests hold
the declaration to the drivers themselves, so the two cannot drift apart.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from prereg.core.errors import BadInput
from prereg.registry.hosts import DRIVERS, LOCAL_PARAMS, params_problem
from prereg.registry.schema import SAMPLING_PARAMS, Host
from prereg.runners.drivers import anthropic, local, openai, replay
from prereg.runners.providers import driver as provider_driver


@pytest.mark.parametrize(
    ("name", "cls"), [("anthropic", anthropic.AnthropicDriver), ("openai", openai.OpenAIDriver)]
)
def test_reserved_params_are_the_drivers(name: str, cls: Any) -> None:
    assert DRIVERS[name].params is None  # a provider driver passes other keys on
    assert DRIVERS[name].reserved_params == cls.reserved_params
    for key in sorted(cls.reserved_params):
        with pytest.raises(BadInput):  # what the driver refuses at run ...
            cls("a-model", {key: 1})
        assert params_problem(name, {key: 1}) is not None  # ... is refused at register


def test_sampling_params_are_the_drivers() -> None:
    assert SAMPLING_PARAMS == provider_driver.SAMPLING_PARAMS


def test_local_params_are_the_local_hosts() -> None:
    fields = {f.name: f for f in dataclasses.fields(local.LocalParams)}
    assert set(LOCAL_PARAMS) == set(fields)
    kinds = {"int": "integer", "float": "number", "bool": "boolean"}
    for key, rule in LOCAL_PARAMS.items():
        assert rule.kind == kinds[str(fields[key].type)], key


@pytest.mark.parametrize(
    "params",
    [
        {"search_k": 0},
        {"temperature": 0},
        {"prompt_sd": -0.5},
        {"server_text": "yes"},
        {"search_k": "5"},
        {"nope": 1},
    ],
)
def test_local_params_refused_at_register_are_refused_at_run(params: dict[str, Any]) -> None:
    assert params_problem("local", params) is not None
    with pytest.raises((ValueError, TypeError)):
        local.create(None, params)


@pytest.mark.parametrize(
    "params",
    [{}, {"search_k": 3}, {"temperature": 0.5, "threshold": 2}, {"server_text": True}],
)
def test_local_params_accepted_at_register_are_accepted_at_run(params: dict[str, Any]) -> None:
    assert params_problem("local", params) is None
    local.create(None, params)


def test_replay_takes_no_params() -> None:
    assert params_problem("replay", {"x": 1}) is not None
    with pytest.raises(ValueError):
        replay.create(None, {"x": 1})
    assert params_problem("replay", {}) is None


def test_a_frozen_copy_with_params_now_refused_still_loads() -> None:
    """The check is made at register, not by the schema: old frozen copies stay readable."""
    host = Host.model_validate({"driver": "local", "params": {"serch_k": 3}})
    assert host.params == {"serch_k": 3}
