"""The ``next_handoff`` object and the read-only frontier's certificate (readings 4, 5, F1).

Expected values come from the family file and the reference program read by hand: a
handoff record's object names the connector of the search tool the next reference call
uses (the family file's ``tools``) and that call's query; the frontier's minima are the
seed's 2 + 2h, proved minimal here by enumerating every shorter program.
"""

from __future__ import annotations

import itertools
from decimal import Decimal
from typing import Any

import pytest
import yaml

from prereg.experiments.toolbottleneck.compile import Cell, compile_cell, compile_family
from prereg.experiments.toolbottleneck.encoding import EncodingError, decode, encode
from prereg.experiments.toolbottleneck.family import load_family
from prereg.experiments.toolbottleneck.workflow import (
    Workflow,
    build_workflow,
    certify,
    dependency_problem,
    passes,
)
from prereg.experiments.toolbottleneck.world import Call, Returned, handoff_of, strings_in
from tests.toolbottleneck.helpers import BUNDLED

PATH = BUNDLED / "overdue-case-escalation.yaml"
DOC = yaml.safe_load(PATH.read_text())
ENCODINGS = ("raw", "compact", "typed", "linked")


def _base(function: str) -> str:
    """The family's tool name of an exposed function (``<base>_<route code>``)."""
    return function.rsplit("_", 1)[0]


def _connector(function: str) -> str:
    return next(t["connector"] for t in DOC["tools"] if t["name"] == _base(function))


def _frontier(handoffs: int) -> Workflow:
    fam = load_family(PATH)
    return build_workflow(fam, 0, fam.layouts.low, handoffs, f"frontier-{handoffs}", read_only=True)


def test_each_handoff_names_the_next_calls_connector_and_query() -> None:
    wf = _frontier(3)
    program = wf.program
    by_id = {r.id: r for r in wf.world.records}
    # the reference program: (search, read) per handoff, then per record of the layout
    assert len(program) == 2 * (3 + 1)
    for k in range(3):
        hop = by_id[program[2 * k + 1].arg]
        nxt = program[2 * k + 2]
        assert _base(nxt.function).startswith("search_")
        assert dict(hop.fields) == {
            "next_handoff": {"connector": _connector(nxt.function), "query": nxt.arg}
        }
    # the last record read is the primary (the case), holding every decision fact
    primary = by_id[program[-1].arg]
    assert set(DOC["facts"]) <= set(primary.fields)
    assert "next_handoff" not in primary.fields


def _decoded_by_hand(obs: dict[str, Any], encoding: str) -> list[dict[str, Any]]:
    """This test's own decoder of the four encodings (money from minor units)."""
    out = []
    for obj in obs["objects"]:
        if encoding == "compact":
            names = obs["field_dictionary"][obj[1]]
            out.append(
                {"id": obj[0], "kind": obj[1], "fields": dict(zip(names, obj[2:], strict=True))}
            )
        elif encoding == "raw":
            out.append({"id": obj["id"], "kind": obj["type"], "fields": obj["payload"]})
        else:
            types = obs["type_dictionary"][obj["type"]]
            fields = {
                n: f"{Decimal(v) / 100:.2f}" if types[n] == "money" else v
                for n, v in obj["fields"].items()
            }
            out.append({"id": obj["id"], "kind": obj["type"], "fields": fields})
    return out


def _pointer(doc: Any, path: str) -> Any:
    for part in path.strip("/").split("/"):
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_the_handoff_object_round_trips_in_every_encoding(encoding: str) -> None:
    fam = load_family(PATH)
    raw = compile_cell(fam, Cell("frontier", 8, "low", 2, "raw")).document["observations"]
    variant = compile_cell(fam, Cell("frontier", 8, "low", 2, encoding))  # type: ignore[arg-type]
    observations = variant.document["observations"]
    program = variant.component("workflow")["program"]
    queries = [c["args"].get("query") for c in program]
    hops = 0
    for i, (obs, plain) in enumerate(zip(observations, raw, strict=True)):
        mine = _decoded_by_hand(obs, encoding)
        assert mine == _decoded_by_hand(plain, "raw")  # the same values as raw
        assert mine == decode(obs, encoding)  # type: ignore[arg-type]  # and prereg's decoder
        for j, obj in enumerate(mine):
            hop = obj["fields"].get("next_handoff")
            if hop is None:
                continue
            hops += 1
            nxt = program[i + 1]["function"]
            assert hop == {"connector": _connector(nxt), "query": queries[i + 1]}
            if encoding in ("typed", "linked"):
                assert obs["type_dictionary"][obj["kind"]]["next_handoff"] == "handoff"
            if encoding == "linked":
                assert obs["relation_dictionary"]["next_handoff"] == {"key": "ref", "at": "query"}
                paths = [
                    link["path"] for link in obs["links"] if link.get("relation") == "next_handoff"
                ]
                assert paths == [f"/objects/{j}/fields/next_handoff/query"]
                assert _pointer(obs, paths[0]) == queries[i + 1]
    assert hops == 2  # the two handoff reads


@pytest.mark.parametrize(
    "bad",
    [
        {"connector": "casebook"},
        {"connector": "casebook", "query": "CAS-1", "extra": "x"},
        {"connector": "casebook", "query": 7},
        "CAS-1",
    ],
)
def test_a_malformed_handoff_is_refused_by_the_typed_encodings(bad: Any) -> None:
    results = [Returned("rec_1", "case", {"ref": "CAS-0", "next_handoff": bad})]
    for encoding in ("typed", "linked"):
        with pytest.raises(EncodingError) as info:
            encode(results, encoding, {})
        assert info.value.field == "next_handoff"
    assert handoff_of(results[0].fields) is None  # and never followed


def test_only_a_two_string_handoff_is_followed() -> None:
    assert handoff_of({"next_handoff": {"connector": "c", "query": "Q-1"}}) == ("c", "Q-1")
    assert handoff_of({"next_handoff": {"connector": "c", "query": ""}}) is None
    assert handoff_of({"ref": "Q-1"}) is None
    # what a handoff reveals: its query (and connector) may be passed by a later call
    revealed = strings_in([Returned("r", "k", {"next_handoff": {"connector": "c", "query": "Q"}})])
    assert {"Q", "c", "r"} <= revealed


def test_frontier_minima_are_the_seeds_for_a_family_with_an_action() -> None:
    minima = []
    for h in (0, 2, 6, 14):
        wf = _frontier(h)
        assert dependency_problem(wf.world, wf.program) is None
        minima.append(certify(wf.world, wf.goal, wf.program))
        assert wf.goal.final_state == {} and not wf.acts
    assert minima == [2, 6, 14, 30]
    # the compiler's W-frontier set says the same, and its W set keeps the action
    compiled = compile_family(load_family(PATH))
    certified = [v.component("workflow")["certified_minimum"] for v in compiled.members("W")]
    assert certified == [3, 5, 7]
    frontier = compiled.members("W-frontier")
    assert [v.component("workflow")["certified_minimum"] for v in frontier] == [2, 6, 14, 30]
    assert {v.component("core")["request"] for v in frontier} == {
        frontier[0].component("core")["request"]
    }
    assert all(v.component("core")["permitted_final_state"] == [] for v in frontier)


def test_no_shorter_program_passes_one_handoff_and_acting_fails() -> None:
    wf = _frontier(1)
    assert len(wf.program) == 4 and passes(wf.world, wf.goal, wf.program)
    functions = sorted(f for f, fn in wf.world.functions.items() if fn.operational)
    # every argument a program of up to 3 calls could pass: the request's key and every
    # string any record reveals (a superset of what is reachable)
    strings = set(wf.world.request_literals) | {r.id for r in wf.world.records}
    for r in wf.world.records:
        strings |= strings_in([Returned(r.id, r.kind, {"ref": r.ref, **r.fields})])
    calls = [Call(f, s) for f in functions for s in sorted(strings)]
    for length in range(4):
        for program in itertools.product(calls, repeat=length):
            assert not passes(wf.world, wf.goal, program), program
    # the family's action on the primary record leaves the permitted final state
    act = next(f for f in functions if _base(f) == DOC["action"]["tool"])
    assert not passes(wf.world, wf.goal, [*wf.program, Call(act, wf.primary_id)])
