"""Frontier cells of families with an action (issue 42, item 3; readings 4, 5, F2).

An agent written here, independently of the simulated policy, plays units through the
model-host loop (:func:`~prereg.runners.toolbottleneck.harness.play_host`) reading only
the wire: the prompt (the lookup key, the route, whether the task is read-only), the
offered tools' descriptions (operation, record kind, connector, route) and the tool
results, decoded by its own decoder. It follows ``_ref`` links and ``next_handoff``
objects, and acts on the primary record (the first record of the request's kind that is
not a handoff) only when the request asks for the action. Expectations are counted by
hand from the family files: a search and a read per record and per handoff, plus the
action at the capacity cells; the frontier's 2, 6, 14, 30 for every family.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pytest
import yaml

from prereg.experiments.toolbottleneck.compile import Cell
from prereg.experiments.toolbottleneck.family import FamilyFile, load_family
from prereg.experiments.toolbottleneck.sandbox import Sandbox, build_sandbox
from prereg.runners.drivers.base import Episode, Exchange, FinalAnswer, ToolCall, Turn, Usage
from prereg.runners.toolbottleneck.harness import HostUnit, play_host
from prereg.runners.toolbottleneck.host import PROFILES, Contract, play, unit_rng
from tests.toolbottleneck.helpers import BUNDLED

_DESC = re.compile(r"^(Search|Read|Update) (\S+) records via the (\S+) connector")
_KEY = re.compile(r"\b([A-Z]{3}-[0-9A-F]{10})\b")
_ROUTE = re.compile(r"route is ([^/\s]+)/([^/\s]+)/([^\s]+?)\.")
#: the four families the audit ran (three with an action, one read-only)
FAMILIES = [
    "external-share-review.yaml",
    "invoice-payment-approval.yaml",
    "meeting-room-conflict.yaml",
    "overdue-case-escalation.yaml",
]


@dataclass(frozen=True)
class Told:
    """What the request spells out, read by the test from the family file itself."""

    decision: str
    facts: tuple[str, ...]
    act: bool
    request_kind: str


def _told(path: str) -> Told:
    doc = yaml.safe_load((BUNDLED / path).read_text())
    return Told(doc["decision"], tuple(doc["facts"]), "action" in doc, doc["sources"][0])


def _fields(observation: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(id, kind, fields) of each object of an observation, in any of the four encodings
    (this test's own decoder: the payload, the field dictionary, or typed fields with
    money in minor units)."""
    out = []
    for obj in observation["objects"]:
        if isinstance(obj, list):  # compact: [id, type, v1, v2, ...]
            names = observation["field_dictionary"][obj[1]]
            out.append((obj[0], obj[1], dict(zip(names, obj[2:], strict=True))))
        elif "payload" in obj:  # raw
            out.append((obj["id"], obj["type"], dict(obj["payload"])))
        else:  # typed and linked
            types = observation["type_dictionary"][obj["type"]]
            fields = {
                n: f"{Decimal(v) / 100:.2f}" if types[n] == "money" else v
                for n, v in obj["fields"].items()
            }
            out.append((obj["id"], obj["type"], fields))
    return out


@dataclass(frozen=True)
class _Tool:
    name: str
    verb: str
    kind: str
    connector: str
    on_route: bool


def _tools(episode: Episode, route: str) -> list[_Tool]:
    out = []
    for t in episode.tools:
        found = _DESC.match(t.description)
        if found:
            verb, kind, connector = found.groups()
            out.append(_Tool(t.name, verb, kind, connector, route in t.description))
    return out


def _pick(tools: list[_Tool], verb: str, kind: str | None, connector: str | None) -> _Tool:
    for t in tools:
        if (
            t.on_route
            and t.verb == verb
            and kind in (None, t.kind)
            and connector in (None, t.connector)
        ):
            return t
    raise AssertionError(f"no offered tool to {verb} {kind} via {connector}")


class WireAgent:
    """A driver acting as the request says. ``naive`` instead acts on the first record
    it reads (the one the request names) whatever the request says: the old failure."""

    name = "wire-agent"
    evidence_class = "api"
    sees_solution = False
    loads_all_tools = True

    def __init__(self, told: Told, *, naive: bool = False) -> None:
        self.told, self.naive = told, naive

    async def next_turn(self, episode: Episode, history: Sequence[Exchange]) -> Turn:
        return Turn(self._decide(episode, history), usage=Usage(input=50, output=5))

    async def aclose(self) -> None:
        return None

    def _decide(self, episode: Episode, history: Sequence[Exchange]) -> Any:
        key, where = _KEY.search(episode.prompt), _ROUTE.search(episode.prompt)
        assert key is not None and where is not None
        route = "workspace={} region={} collection={}".format(*where.groups())
        tools = _tools(episode, route)
        kinds = {t.kind for t in tools}
        read_only = "read-only" in episode.prompt
        act = self.told.act and (self.naive or not read_only)
        todo: list[tuple[str, str | None, str | None, str]] = [
            ("Search", self.told.request_kind, None, key.group(1))
        ]
        facts: dict[str, Any] = {}
        sources: list[str] = []
        primary: str | None = None
        first_read: str | None = None
        acted = False
        for exchange in history:
            assert exchange.result is not None and not exchange.result.is_error
            content = exchange.result.content
            if not todo:
                acted = True
                continue
            verb, kind, _, _ = todo.pop(0)
            rid, got_kind, fields = _fields(content)[0]
            if verb == "Search":
                todo.insert(0, ("Read", got_kind, None, rid))
                continue
            first_read = first_read or rid
            hop = fields.get("next_handoff")
            if primary is None and got_kind == self.told.request_kind and hop is None:
                primary = rid
            held = [n for n in self.told.facts if n in fields]
            facts |= {n: fields[n] for n in held}
            sources += [content["source"]] if held else []
            if isinstance(hop, dict):
                # the next search: the handoff's query, with a search tool of its connector
                # whose kind the query's prefix names
                prefix = hop["query"][:3]
                nxt = next(k for k in sorted(kinds) if k[:3].upper() == prefix)
                todo.append(("Search", nxt, hop["connector"], hop["query"]))
            for name, value in fields.items():
                if name.endswith("_ref"):
                    base = name.removesuffix("_ref").replace("_", "-")
                    todo.append(("Search", base, None, value))
        if todo:
            verb, kind, connector, arg = todo[0]
            tool = _pick(tools, verb, kind, connector)
            return ToolCall(tool.name, {("query" if verb == "Search" else "id"): arg})
        if act and not acted:
            target = first_read if self.naive else primary
            assert target is not None
            tool = _pick(tools, "Update", self.told.request_kind, None)
            return ToolCall(tool.name, {"id": target})
        doc = {"decision": self.told.decision, "facts": facts, "sources": sources}
        return FinalAnswer(json.dumps(doc))


_SANDBOXES: dict[tuple[str, str], Sandbox] = {}


def _sandbox(path: str, cell: Cell) -> Sandbox:
    key = (path, cell.code)
    if key not in _SANDBOXES:
        _SANDBOXES[key] = build_sandbox(load_family(BUNDLED / path), cell, seed=0)
    return _SANDBOXES[key]


def _play(sandbox: Sandbox, agent: WireAgent) -> Any:
    unit = HostUnit("wire", {}, None, 1, 1, "unit")
    return asyncio.run(play_host(sandbox, agent, unit, Contract()))  # type: ignore[arg-type]


def _records(fam: FamilyFile) -> int:
    return len(fam.layouts.low)


LOW = Cell("capacity", 8, "low", 0, "raw")


@pytest.mark.parametrize("path", FAMILIES)
def test_an_agent_acting_as_told_passes_the_frontier_as_the_low_workflow(path: str) -> None:
    told = _told(path)
    fam = load_family(BUNDLED / path)
    low = _play(_sandbox(path, LOW), WireAgent(told))
    assert low.verification.success, low.verification
    assert len(low.episode.calls) == 2 * _records(fam) + int(told.act)  # by hand
    for handoffs in (0, 2, 6):
        cell = Cell("frontier", 8, "low", handoffs, "raw")
        played = _play(_sandbox(path, cell), WireAgent(told))
        assert played.verification.success, (cell.code, played.verification)
        # the seed's frontier minima, 2 + 2h, with no action call for any family
        assert len(played.episode.calls) == 2 + 2 * handoffs
        assert played.episode.final_state == {}
        if told.act:
            assert "read-only" in _sandbox(path, cell).request


def test_the_old_six_of_eight_case_now_passes() -> None:
    """The audit's case: the three action families' frontier cells at 2 and 6 handoffs
    and the read-only family's (8 units). Before, an agent acting on the case failed 6 of
    8; now every one passes, and an agent that still acts (ignoring the read-only request)
    fails exactly the 6 action-family units: its action leaves the permitted final state
    (G false), which stops the episode at once (the infeasibility stop)."""
    passed, naive_failed = 0, []
    for path in FAMILIES:
        told = _told(path)
        for handoffs in (2, 6):
            sandbox = _sandbox(path, Cell("frontier", 8, "low", handoffs, "raw"))
            passed += _play(sandbox, WireAgent(told)).verification.success
            naive = _play(sandbox, WireAgent(told, naive=True)).verification
            if not naive.success:
                naive_failed.append((path, naive.verdict("final_state"), naive.flag))
    assert sum(_told(p).act for p in FAMILIES) == 3
    assert passed == 8
    assert len(naive_failed) == 6
    # the action leaves the permitted final state: the infeasibility stop ends the episode
    assert {(g, f) for _, g, f in naive_failed} == {(False, "infeasible")}


@pytest.mark.parametrize("encoding", ["raw", "compact", "typed", "linked"])
def test_the_agent_follows_next_handoff_in_every_encoding(encoding: str) -> None:
    path = "overdue-case-escalation.yaml"
    cell = Cell("frontier", 8, "low", 2, encoding)  # type: ignore[arg-type]
    played = _play(_sandbox(path, cell), WireAgent(_told(path)))
    assert played.verification.success, played.verification
    assert len(played.episode.calls) == 6


@pytest.mark.parametrize("path", FAMILIES)
def test_the_simulated_policy_passes_every_frontier_cell_in_the_certified_calls(
    path: str,
) -> None:
    for handoffs, calls in ((0, 2), (2, 6), (6, 14), (14, 30)):
        sandbox = _sandbox(path, Cell("frontier", 8, "low", handoffs, "raw"))
        played = play(sandbox, PROFILES["sim-exact"], Contract(), unit_rng("f", path, handoffs))
        assert played.verification.success, played.verification
        assert len(played.episode.calls) == calls
        assert played.episode.final_state == {}
