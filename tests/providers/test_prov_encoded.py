"""Tool lists encoded once per listing (issue 15: :class:`~prereg.runners.providers.send.Encoded`).

The bytes a request sends must be the very bytes the whole body encodes to: the wire
parity suite (test_prov_wire.py) checks them against the SDKs' typed methods; here the
splice itself is checked against a plain encoding, including where it must not splice.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from prereg.runners.drivers import anthropic as anthropic_driver
from prereg.runners.drivers import openai as openai_driver
from prereg.runners.drivers import openai_chat
from prereg.runners.providers import send
from prereg.runners.providers.send import Encoded
from tests.providers.fakes import episode, music_tools

MODEL = {"openai": "gpt-5-mini", "anthropic": "claude-haiku-4-5", "openai-chat": "served"}
MODULES = {"openai": openai_driver, "anthropic": anthropic_driver, "openai-chat": openai_chat}


def _plain(body: dict[str, Any]) -> bytes:
    """The SDKs' encoding of ``body`` with every list a plain list."""
    data = json.loads(json.dumps(body))
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def test_a_spliced_body_is_the_whole_body_encoded() -> None:
    tools = [{"name": "suche_titel", "description": "Titel suchen: «Lumen» ☂", "n": 1.5}]
    body = {
        "model": "m",
        "input": [{"role": "user", "content": 'quote " and \\ and ünïcode'}],
        "tools": Encoded(tools),
        "tool_choice": "auto",
        "more": Encoded([1, 2, {"a": None}]),
    }
    assert send.encode(body) == _plain(body)
    assert send.encode({"tools": Encoded([])}) == b'{"tools":[]}'


def test_a_body_holding_the_mark_is_encoded_in_full() -> None:
    # the mark is secret, but were a body to hold it, nothing may be spliced into it
    tools = Encoded([{"name": "t"}])
    body = {"input": f"{send._MARK}-0", "tools": tools, "again": [f"{send._MARK}-0"]}
    assert send.encode(body) == _plain(body)


def test_a_value_json_cannot_hold_is_refused_as_before() -> None:
    with pytest.raises(ValueError):
        Encoded([float("nan")])
    with pytest.raises(ValueError):
        send.encode({"tools": Encoded([1]), "x": float("inf")})


@pytest.mark.parametrize("name", sorted(MODULES))
def test_tool_specs_are_built_once_per_listing(name: str) -> None:
    driver = MODULES[name].create(MODEL[name], {})
    tools = music_tools()
    first = driver.tool_specs(episode(tools=tools))
    again = driver.tool_specs(episode("another task", tools=tuple(list(tools))))
    assert again is first and isinstance(first, Encoded)
    assert list(first) == driver.tools(episode(tools=tools))  # what the builder makes
    # the same tools with a changed text, in another order, or fewer: other listings
    renamed = (dataclasses.replace(tools[0], description="Changed."), *tools[1:])
    for other in (renamed, tuple(reversed(tools)), tools[:2]):
        specs = driver.tool_specs(episode(tools=other))
        assert specs is not first
        assert list(specs) == driver.tools(episode(tools=other))


@pytest.mark.parametrize("name", sorted(MODULES))
def test_a_request_body_encodes_as_built(name: str) -> None:
    driver = MODULES[name].create(MODEL[name], {})
    body = driver.build_request(episode(), [])
    assert isinstance(body["tools"], Encoded)
    assert send.encode(body) == _plain(body)
