"""Each control arm's transformation: deterministic, what it changes and what it keeps."""

from __future__ import annotations

import json
import re

import pytest

from prereg.core.errors import BadInput
from prereg.core.yamlio import FieldRuleError
from prereg.experiments.controls import (
    BLIND_SCHEMA_DESCRIPTION,
    BLIND_SERVER_DESCRIPTION,
    BLIND_SERVER_NAME,
    blind_schema,
    blinded,
    clone_copy,
    clone_labels,
)
from prereg.registry.units import build_offers
from prereg.runners.mcp import ReplayServer, snapshot_digest
from tests.controls.helpers import ARMS, plan, podcast, registration

EXP = podcast()


def _prose(surface) -> list[str]:
    """Every human-readable text a host could read off a surface."""
    texts = [surface.name, surface.title, surface.description]
    for tool in surface.tools:
        texts += [tool.name, tool.title, tool.description, json.dumps(tool.input_schema)]
    return texts


# ---- blinded --------------------------------------------------------------------------------


def test_blinded_yaml_surface_replaces_every_text_and_keeps_the_interface() -> None:
    focal = EXP.surfaces["focal"]
    one, two = blinded(focal), blinded(focal)
    assert one.digest == two.digest and one == two  # deterministic
    assert one.digest != focal.digest
    assert one.transform == "blinded"
    assert (one.name, one.description) == (BLIND_SERVER_NAME, BLIND_SERVER_DESCRIPTION)
    assert [t.name for t in one.tools] == [f"action_{i}" for i in range(1, 8)]
    assert [t.title for t in one.tools] == [f"Action {i}" for i in range(1, 8)]
    assert [t.description for t in one.tools] == [f"Performs action {i}." for i in range(1, 8)]
    # no word of the original metadata survives anywhere a host could read it
    leaked = {"podshelf", "podcast", "podcasts", "subscribe", "episode", "show"}
    text = " ".join(_prose(one)).lower()
    assert not [w for w in leaked if re.search(rf"\b{w}\b", text)]
    # kept: what each tool does, in order, and the call interface (property names, required)
    for before, after in zip(focal.tools, one.tools, strict=True):
        assert after.steps == before.steps and after.operations == before.operations
        assert after.input_schema.get("required") == before.input_schema.get("required")
        assert list(after.input_schema.get("properties", {})) == list(
            before.input_schema.get("properties", {})
        )
        for prop in after.input_schema.get("properties", {}).values():
            assert prop.get("description") in (None, BLIND_SCHEMA_DESCRIPTION)
            assert set(prop) <= {"type", "description", "title"}  # stray keys dropped
    assert focal.tools[0].name == "podshelf_search_podcasts"  # the source is untouched


def test_blind_schema_keeps_constraints_and_drops_prose() -> None:
    schema = {
        "type": "object",
        "title": "Acme lookup",
        "$comment": "internal",
        "x-brand": "Acme",
        "properties": {
            "description": {
                "type": "string",
                "description": "Acme id",
                "examples": ["a-1"],
                "pattern": "^a-",
            },
            "n": {"type": "integer", "minimum": 1, "enum": [1, 2]},
            "tags": {"type": "array", "items": {"type": "string", "title": "Tag"}},
        },
        "required": ["description"],
        "$defs": {"Acme": {"title": "Acme", "type": "string"}},
        "anyOf": [{"description": "one way", "required": ["n"]}],
    }
    out = blind_schema(schema)
    assert out == {
        "type": "object",
        "title": "Value",
        "properties": {
            "description": {"type": "string", "description": "A value.", "pattern": "^a-"},
            "n": {"type": "integer", "minimum": 1, "enum": [1, 2]},
            "tags": {"type": "array", "items": {"type": "string", "title": "Value"}},
        },
        "required": ["description"],
        "$defs": {"Acme": {"title": "Value", "type": "string"}},
        "anyOf": [{"description": "A value.", "required": ["n"]}],
    }
    assert blind_schema(schema) == out and schema["title"] == "Acme lookup"


def test_blinded_snapshot_is_a_servable_snapshot_with_placeholders() -> None:
    source = EXP.surfaces["podcatch"]
    one, two = blinded(source), blinded(source)
    assert one.snapshot_digest == two.snapshot_digest != source.snapshot_digest
    assert one.digest == two.digest != source.digest
    assert one.source == "snapshot" and one.replay_only and one.transform == "blinded"
    snap = one.snapshot
    assert snap.server_name == BLIND_SERVER_NAME
    assert snap.server_description == BLIND_SERVER_DESCRIPTION
    assert snap.server_title == "Integration" and snap.instructions is None
    assert snap.server_version == source.snapshot.server_version  # not text: kept
    assert snap.capabilities() == source.snapshot.capabilities()
    assert snap.capture.derivation == "blinded"
    assert snap.capture.derived_from == source.snapshot_digest
    raw = snap.tools()
    assert [t["name"] for t in raw] == ["action_1", "action_2"]
    assert "podcast" not in json.dumps(raw).lower() and "follow" not in json.dumps(raw).lower()
    assert [list(t["inputSchema"]["properties"]) for t in raw] == [
        list(t["inputSchema"]["properties"]) for t in source.snapshot.tools()
    ]
    # the replay server serves the blinded snapshot and refuses its calls
    server = ReplayServer(snap)
    listed = server.handle({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert [t["name"] for t in listed["result"]["tools"]] == ["action_1", "action_2"]
    assert snapshot_digest(snap) == one.snapshot_digest


def test_blinded_keeps_empty_text_empty() -> None:
    from dataclasses import replace

    focal = EXP.surfaces["focal"]
    bare = replace(focal, description="", tools=tuple(replace(t, title="") for t in focal.tools))
    out = blinded(bare)
    assert out.description == "" and all(t.title == "" for t in out.tools)
    assert all(t.description.startswith("Performs action") for t in out.tools)


# ---- clone_swap -----------------------------------------------------------------------------


def test_clone_labels_are_opaque_matched_and_deterministic() -> None:
    a = clone_labels(3, "clone")
    assert a == clone_labels(3, "clone")
    assert a[0] != a[1] and all(re.fullmatch(r"srv-[a-z0-9]{4}", x) for x in a)
    assert clone_labels(4, "clone") != a and clone_labels(3, "other") != a


@pytest.mark.parametrize("sid", ["focal", "podcatch"])
def test_clone_copies_differ_only_by_their_label(sid: str) -> None:
    source = EXP.surfaces[sid]
    la, lb = clone_labels(0, "arm")
    a, b = clone_copy(source, la, f"{sid}:a"), clone_copy(source, lb, f"{sid}:b")
    assert clone_copy(source, la, f"{sid}:a").digest == a.digest  # deterministic
    assert (a.name, b.name) == (la, lb)
    assert [t.name for t in a.tools] == [f"{la}_{t.name}" for t in source.tools]
    assert {t.surface for t in a.tools} == {f"{sid}:a"}

    def strip(surface, label):
        content = surface.content()
        content["name"] = "LABEL"
        content["snapshot"] = None
        for tool in content["tools"]:
            tool["name"] = tool["name"].removeprefix(label + "_")
        return json.dumps(content, sort_keys=True)

    assert strip(a, la) == strip(b, lb)  # byte-identical apart from the labels
    assert (a.title, a.description) == (source.title, source.description)
    assert [t.steps for t in a.tools] == [t.steps for t in source.tools]


def test_clone_arm_offers_both_labelings_and_keeps_the_pool() -> None:
    offers = build_offers(plan(), EXP)
    clone, reference = offers["clone"], offers["reference"]
    assert clone.labels == clone_labels(plan().seed, "clone")
    (a0, b0), (a1, b1) = clone.clones
    assert (a0.surface.name, b0.surface.name) == clone.labels
    assert (a1.surface.name, b1.surface.name) == clone.labels[::-1]
    assert [s.digest for s in clone.servers[1:]] == [s.digest for s in reference.servers[1:]]
    assert all(s.role == "focal" for s in (a0, b0, a1, b1))


# ---- decoy and placebo ----------------------------------------------------------------------


def test_decoy_adds_one_unrelated_server_and_changes_nothing_else() -> None:
    offers = build_offers(plan(), EXP)
    decoy, reference = offers["decoy"], offers["reference"]
    assert [s.key for s in decoy.servers] == [s.key for s in reference.servers] + ["tidewatch"]
    assert [s.digest for s in decoy.servers[:-1]] == [s.digest for s in reference.servers]
    added = decoy.servers[-1]
    assert added.role == "decoy" and added.surface.source == "snapshot"
    assert added.digest == EXP.surfaces["tidewatch"].digest


def test_placebo_offers_exactly_the_reference() -> None:
    offers = build_offers(plan(), EXP)
    assert [(s.key, s.role, s.digest) for s in offers["placebo"].servers] == [
        (s.key, s.role, s.digest) for s in offers["reference"].servers
    ]
    assert offers["blinded"].servers[0].digest != offers["reference"].servers[0].digest
    assert [s.digest for s in offers["blinded"].servers[1:]] == [
        s.digest for s in offers["reference"].servers[1:]
    ]


@pytest.mark.parametrize(
    ("decoy", "message"),
    [("weather", "already offered"), ("nowhere", "not a surface of the experiment")],
)
def test_bad_decoy_is_bad_input(decoy: str, message: str) -> None:
    arms = [ARMS[0], {"id": "decoy", "surface": "focal", "control": "decoy", "decoy": decoy}]
    with pytest.raises(BadInput, match=message):
        build_offers(plan(registration(arms, primary={"test": "mcnemar_exact"})), EXP)


@pytest.mark.parametrize(
    ("arms", "message"),
    [
        ([{"id": "d", "surface": "focal", "control": "decoy"}], "names the server it adds"),
        ([{"id": "r", "surface": "focal", "decoy": "x"}], "only for an arm with control: decoy"),
        ([{"id": "r", "surface": "focal", "reference": "x"}], "only for a control arm"),
        (
            [
                {"id": "r", "surface": "focal"},
                {"id": "p", "surface": "focal", "control": "placebo", "reference": "nope"},
            ],
            "unknown arm 'nope'",
        ),
        (
            [
                {"id": "r", "surface": "focal"},
                {"id": "p", "surface": "focal-neutral", "control": "blinded"},
            ],
            "transformation of its reference",
        ),
        (
            [
                {"id": "p", "surface": "focal", "control": "placebo"},
                {"id": "q", "surface": "focal", "control": "placebo"},
            ],
            "needs a reference arm",
        ),
    ],
)
def test_control_fields_are_checked_at_registration(arms, message) -> None:
    from pydantic import ValidationError

    if len(arms) == 1:
        arms = arms + [{"id": "zz", "surface": "focal"}]
    with pytest.raises((ValidationError, FieldRuleError), match=message):
        registration(arms, primary={"test": "mcnemar_exact"})
