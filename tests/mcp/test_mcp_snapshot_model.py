"""The snapshot model: round trip, digest scope, accessors, and precise bad-input errors."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from prereg.core.errors import BadInput
from prereg.core.untrusted import display_text
from prereg.runners.mcp import FORMAT, Snapshot, load_snapshot, read_snapshot, snapshot_digest


def document(**changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "format": FORMAT,
        "server": {
            "initialize": {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "demo", "version": "1.0.0", "description": "A demo"},
                "instructions": "Be brief.",
            },
            "lists": {
                "tools/list": {
                    "pages": [
                        {
                            "tools": [
                                {
                                    "name": "a",
                                    "description": "first",
                                    "inputSchema": {"type": "object"},
                                }
                            ],
                            "nextCursor": "opaque-1",
                        },
                        {
                            "tools": [
                                {"name": "b", "inputSchema": {"type": "object", "maximum": 2**63}}
                            ]
                        },
                    ]
                }
            },
        },
        "capture": {
            "taken_at": "2026-10-03T10:00:00Z",
            "transport": "stdio",
            "command": ["demo-server"],
        },
    }
    doc.update(changes)
    return doc


def load(doc: dict[str, Any]) -> Snapshot:
    return load_snapshot(json.dumps(doc).encode(), "demo.json")


def test_round_trip_keeps_bytes_order_and_digest() -> None:
    snap = load(document())
    again = load_snapshot(snap.to_json_bytes(), "again.json")
    assert again == snap
    assert again.to_json_bytes() == snap.to_json_bytes()
    assert snapshot_digest(again) == snapshot_digest(snap)
    assert snap.tool_names() == ["a", "b"]
    assert snap.identity()["description"] == "A demo"
    assert snap.instructions == "Be brief."


def test_digest_covers_what_is_served_not_when_or_how() -> None:
    base = snapshot_digest(load(document()))
    later = document(
        capture={
            "taken_at": "2027-01-01T00:00:00Z",
            "transport": "streamable-http",
            "url": "http://127.0.0.1:1/mcp",
        }
    )
    assert snapshot_digest(load(later)) == base
    recursor = document()
    recursor["server"]["lists"]["tools/list"]["pages"][0]["nextCursor"] = "other-token"
    assert snapshot_digest(load(recursor)) == base
    reordered = document()
    tool = reordered["server"]["lists"]["tools/list"]["pages"][0]["tools"][0]
    reordered["server"]["lists"]["tools/list"]["pages"][0]["tools"][0] = dict(
        reversed(list(tool.items()))
    )
    assert snapshot_digest(load(reordered)) == base  # key order is not content (RFC 8785)


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d["server"]["lists"]["tools/list"]["pages"][0]["tools"][0].update(
            description="first."
        ),
        lambda d: d["server"]["initialize"]["serverInfo"].update(version="1.0.1"),
        lambda d: d["server"]["initialize"].update(instructions="Be brief"),
        lambda d: d["server"]["initialize"]["capabilities"].update(logging={}),
        lambda d: d["server"]["lists"]["tools/list"]["pages"][1]["tools"][0]["inputSchema"].update(
            maximum=2**63 + 1
        ),
        lambda d: d["server"]["lists"]["tools/list"].update(
            pages=[
                {
                    "tools": [
                        d["server"]["lists"]["tools/list"]["pages"][0]["tools"][0],
                        d["server"]["lists"]["tools/list"]["pages"][1]["tools"][0],
                    ]
                }
            ]
        ),
    ],
)
def test_any_served_change_changes_the_digest(edit: Any) -> None:
    doc = document()
    edit(doc)
    assert snapshot_digest(load(doc)) != snapshot_digest(load(document()))


def test_accessors_hand_out_copies() -> None:
    snap = load(document())
    tools = snap.tools()
    tools[0]["description"] = "changed"
    snap.server_info()["name"] = "changed"
    assert snap.tools()[0]["description"] == "first"
    assert snap.server_name == "demo"


def _bad(data: bytes | dict[str, Any]) -> BadInput:
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    with pytest.raises(BadInput) as caught:
        load_snapshot(raw, "bad.json")
    assert caught.value.exit_code == 2
    assert caught.value.file == "bad.json"
    return caught.value


def test_malformed_json_names_file_and_position() -> None:
    error = _bad(b'{"format": "prereg-mcp-snapshot/1",\n "server": }')
    assert error.field == "(line 2, column 12)"
    assert "malformed JSON" in error.message


@pytest.mark.parametrize(
    ("where", "field"),
    [
        (lambda d: d.update(extra=1), "extra"),
        (lambda d: d["capture"].update(operator="me"), "capture.operator"),
        (lambda d: d["server"].update(tools=[]), "server.tools"),
        (
            lambda d: d["server"]["lists"]["tools/list"].update(items=[]),
            "server.lists.tools/list.items",
        ),
    ],
)
def test_unknown_fields_are_named(where: Any, field: str) -> None:
    doc = document()
    where(doc)
    error = _bad(doc)
    assert error.field == field
    assert error.message == "unknown field"


def test_recorded_objects_may_carry_fields_the_model_does_not_know() -> None:
    doc = document()
    doc["server"]["initialize"]["x-vendor"] = {"kept": True}
    doc["server"]["lists"]["tools/list"]["pages"][0]["tools"][0]["x-extra"] = 1
    snap = load(doc)
    assert snap.initialize_result()["x-vendor"] == {"kept": True}
    assert snap.tools()[0]["x-extra"] == 1


@pytest.mark.parametrize(
    ("edit", "field", "text"),
    [
        (
            lambda d: d["server"]["initialize"]["serverInfo"].pop("name"),
            "server.initialize",
            "serverInfo.name",
        ),
        (lambda d: d["server"]["lists"].pop("tools/list"), "server.lists", "tools/list"),
        (
            lambda d: d["server"]["lists"]["tools/list"]["pages"][0].pop("nextCursor"),
            "server.lists",
            "nextCursor",
        ),
        (
            lambda d: d["server"]["lists"]["tools/list"]["pages"][1]["tools"][0].pop("name"),
            "server.lists",
            "tool 0 needs a string 'name'",
        ),
        (
            lambda d: d["server"]["lists"].update({"tools/call": {"pages": [{}]}}),
            "server.lists",
            "unknown list method",
        ),
        (lambda d: d["capture"].update(transport="pigeon"), "capture.transport", "stdio"),
        (lambda d: d.update(format="other/1"), "format", "prereg-mcp-snapshot/1"),
    ],
)
def test_invalid_content_names_the_field(edit: Any, field: str, text: str) -> None:
    doc = document()
    edit(doc)
    error = _bad(doc)
    assert error.field == field
    assert text in error.render()


def test_duplicate_keys_nan_and_non_utf8_are_refused() -> None:
    assert _bad(b'{"format": 1, "format": 2}').field == "format"
    text = json.dumps(document()).replace('"maximum": 9223372036854775808', '"maximum": NaN')
    assert "NaN is not JSON" in _bad(text.encode()).message
    assert _bad(b"\xff\xfe").field == "(file)"
    assert _bad(b"[1, 2]").field == "(root)"
    huge = json.dumps(document()).replace('"maximum": 9223372036854775808', '"maximum": 1e999')
    assert "not finite" in _bad(huge.encode()).message


def test_missing_file_and_directory_are_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInput) as missing:
        read_snapshot(tmp_path / "nope.json")
    assert str(missing.value.file).endswith("nope.json") and missing.value.field == "(file)"
    with pytest.raises(BadInput, match="directory"):
        read_snapshot(tmp_path)


def test_display_text_neutralises_terminal_escapes_and_bidi() -> None:
    shown = display_text("ok\x1b[2J\u202eevil\nnext\x00")
    assert "\x1b" not in shown and "\u202e" not in shown and "\x00" not in shown
    assert shown == "ok\\x1b[2J\\u202eevil next\\x00"
    assert display_text("x" * 500, limit=10) == "x" * 9 + "…"
    assert display_text(None) == ""


def test_document_helper_is_not_shared_state() -> None:
    a, b = document(), document()
    a["server"]["initialize"]["serverInfo"]["name"] = "x"
    assert b["server"]["initialize"]["serverInfo"]["name"] == "demo"
    assert copy.deepcopy(b) == document()


def test_derive_makes_a_validated_snapshot_and_records_its_source() -> None:
    snap = load(document())
    tools = snap.tools()
    tools[0]["description"] = "neutral"
    blinded = snap.derive(tools=tools, derivation="test-blind")
    assert blinded.tools()[0]["description"] == "neutral"
    assert [p.get("nextCursor") for p in blinded.pages("tools/list") or []] == ["opaque-1", None]
    assert blinded.capture.derived_from == snapshot_digest(snap)
    assert snapshot_digest(blinded) != snapshot_digest(snap)
    assert snap.tools()[0]["description"] == "first"  # the source is untouched
    same = snap.derive(derivation="placebo")
    assert snapshot_digest(same) == snapshot_digest(snap)
    fewer = snap.derive(tools=tools[:1], derivation="drop")
    assert len(fewer.pages("tools/list") or []) == 1
    again = load_snapshot(blinded.to_json_bytes(), "blinded.json")
    assert again == blinded
    init = snap.initialize_result()
    del init["serverInfo"]["name"]
    with pytest.raises(ValueError, match="serverInfo.name"):
        snap.derive(initialize=init, derivation="broken")
