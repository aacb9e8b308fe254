"""Acceptance: snapshot the real ``mcp-server-time`` (PyPI), replay it, compare with live.

The server runs locally over stdio with its local timezone pinned to UTC (its tool
descriptions name the local zone, so pinning makes the snapshot machine-independent).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from prereg.runners.mcp import is_refusal, read_snapshot
from prereg.runners.mcp.replay import encode
from tests.mcp import (
    PREREG,
    TIME_SERVER,
    client_view,
    handshake,
    http_call,
    http_post,
    http_replay,
    raw_stdio,
)

pytest.importorskip("mcp_server_time", reason="needs mcp-server-time (a dev dependency)")

SNAP_TIMEOUT = 60


def _snapshot_cli(out: Path, *source: str) -> dict[str, Any]:
    import subprocess

    done = subprocess.run(
        [*PREREG, "mcp", "snapshot", "--out", str(out), "--json", "--timeout", "30"]
        + ["--no-negotiate", *source],  # negotiation: test_mcp_negotiation.py
        capture_output=True,
        text=True,
        timeout=SNAP_TIMEOUT,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def snaps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("time")
    first = _snapshot_cli(folder / "a.json", "--", *TIME_SERVER)
    second = _snapshot_cli(folder / "b.json", "--", *TIME_SERVER)
    return {"a": folder / "a.json", "b": folder / "b.json", "first": first, "second": second}


@pytest.fixture(scope="module")
def live() -> dict[str, Any]:
    return client_view(TIME_SERVER, mode="legacy", call=False)


def test_two_snapshots_of_an_unchanged_server_share_a_digest(snaps: dict[str, Any]) -> None:
    first, second = snaps["first"], snaps["second"]
    assert first["digest"].startswith("sha256:") and len(first["digest"]) == 71
    assert first["digest"] == second["digest"]
    assert first["capture"]["taken_at"] <= second["capture"]["taken_at"]
    assert read_snapshot(snaps["a"]).server == read_snapshot(snaps["b"]).server
    assert first["server"]["name"] == "mcp-time"
    assert first["tool_names"] == ["get_current_time", "convert_time"]


def test_snapshot_records_the_live_wire_bytes(snaps: dict[str, Any]) -> None:
    """The recorded objects re-encode to exactly the bytes the live server sends."""
    snap = read_snapshot(snaps["a"])
    lines = raw_stdio(
        TIME_SERVER,
        [handshake(1), {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}],
    )
    assert lines[0].rstrip(b"\n") == encode(
        {"jsonrpc": "2.0", "id": 1, "result": snap.initialize_result()}
    )
    assert lines[1].rstrip(b"\n") == encode(
        {"jsonrpc": "2.0", "id": 2, "result": snap.pages("tools/list")[0]}
    )


def test_stdio_replay_answers_byte_for_byte_like_the_live_server(snaps: dict[str, Any]) -> None:
    conversation = [
        handshake(1),
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
        {"jsonrpc": "2.0", "id": 3, "method": "ping"},
    ]
    live_lines = raw_stdio(TIME_SERVER, conversation)
    replay_lines = raw_stdio([*PREREG, "mcp", "serve", str(snaps["a"])], conversation)
    assert replay_lines == live_lines


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_sdk_client_sees_the_live_server_over_stdio_replay(
    snaps: dict[str, Any], live: dict[str, Any], mode: str
) -> None:
    seen = client_view([*PREREG, "mcp", "serve", str(snaps["a"])], mode=mode)
    _assert_same_server(seen, live)
    _assert_every_call_refused(seen)


def test_sdk_client_sees_the_live_server_over_http_replay(
    snaps: dict[str, Any], live: dict[str, Any]
) -> None:
    with http_replay(snaps["a"]) as started:
        [entry] = started["servers"]
        assert entry["url"].startswith("http://127.0.0.1:")
        assert entry["digest"] == snaps["first"]["digest"]
        for url in (entry["url"], started["base_url"] + "/mcp"):
            for mode in ("legacy", "auto"):
                seen = client_view(url, mode=mode)
                _assert_same_server(seen, live)
                _assert_every_call_refused(seen)
        # a snapshot of the replay is the snapshot it replays
        again = _snapshot_cli(snaps["a"].parent / "of-replay.json", "--url", entry["url"])
        assert again["digest"] == snaps["first"]["digest"]
        assert (
            read_snapshot(snaps["a"].parent / "of-replay.json").server
            == read_snapshot(snaps["a"]).server
        )


def test_http_replay_wire_details(snaps: dict[str, Any]) -> None:
    live_lines = raw_stdio(TIME_SERVER, [handshake(7)])
    with http_replay(snaps["a"]) as started:
        url = started["servers"][0]["url"]
        status, body, headers = http_post(url, json.dumps(handshake(7)).encode())
        assert status == 200 and headers["content-type"].startswith("application/json")
        assert body == live_lines[0].rstrip(b"\n")
        assert "mcp-session-id" not in {k.lower() for k in headers}
        note = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
        assert http_post(url, note)[0] == 202
        assert http_call(url, "GET")[0] == 405
        assert http_call(url, "DELETE")[0] == 405
        assert http_post(url, b"{not json")[0] == 400
        assert (
            http_post(url, json.dumps(handshake()).encode(), {"Origin": "http://evil.example"})[0]
            == 403
        )
        assert (
            http_post(url, json.dumps(handshake()).encode(), {"Origin": "http://localhost:3000"})[0]
            == 200
        )


def _assert_same_server(seen: dict[str, Any], live: dict[str, Any]) -> None:
    assert seen["protocol_version"] == live["protocol_version"] == "2025-11-25"
    assert seen["server_info"] == live["server_info"]
    assert seen["server_info"]["name"] == "mcp-time"
    assert seen["instructions"] == live["instructions"]
    assert seen["capabilities"] == live["capabilities"]
    assert seen["tools"] == live["tools"]
    assert [t["name"] for t in seen["tools"]] == ["get_current_time", "convert_time"]


def _assert_every_call_refused(seen: dict[str, Any]) -> None:
    calls = seen["calls"]
    assert set(calls) == {"get_current_time", "convert_time", "<unknown>"}
    for name in ("get_current_time", "convert_time"):
        assert calls[name]["isError"] is True
        assert is_refusal(calls[name])
        assert "structuredContent" not in calls[name]
    assert calls["<unknown>"] == -32602
