"""The replay protocol core, in process: verbatim answers, refusals, JSON-RPC edge cases."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from prereg.runners.mcp import ReplayServer, is_refusal, load_snapshot
from prereg.runners.mcp.replay import REFUSAL_META_KEY, encode
from prereg.runners.mcp.serve_stdio import serve_stdio

INIT = {
    "serverInfo": {"name": "demo", "version": "1", "x-kept": True},
    "protocolVersion": "2025-11-25",
    "capabilities": {"tools": {}, "prompts": {}},
    "_meta": {"k": "v"},
}
PAGES = [
    {"tools": [{"name": "a", "inputSchema": {"type": "object"}}], "nextCursor": "c1"},
    {"tools": [{"inputSchema": {}, "name": "b", "x": None}]},
]


@pytest.fixture
def server() -> ReplayServer:
    doc = {
        "format": "prereg-mcp-snapshot/1",
        "server": {
            "initialize": INIT,
            "lists": {
                "tools/list": {"pages": PAGES},
                "prompts/list": {"error": {"code": -32603, "message": "boom"}},
            },
        },
        "capture": {"taken_at": "2026-10-03T10:00:00Z", "transport": "stdio"},
    }
    return ReplayServer(load_snapshot(json.dumps(doc).encode(), "demo.json"))


def ask(
    server: ReplayServer, method: str, params: dict[str, Any] | None = None, request_id: Any = 1
) -> Any:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return server.handle(message)


def test_initialize_and_pages_are_the_recorded_objects(server: ReplayServer) -> None:
    answer = ask(server, "initialize", {"protocolVersion": "2024-11-05"})
    assert encode(answer["result"]) == encode(INIT)
    assert encode(ask(server, "tools/list")["result"]) == encode(PAGES[0])
    assert encode(ask(server, "tools/list", {"cursor": "c1"})["result"]) == encode(PAGES[1])
    assert ask(server, "tools/list", {"cursor": "forged"})["error"]["code"] == -32602
    assert ask(server, "ping", request_id="s-1") == {"jsonrpc": "2.0", "id": "s-1", "result": {}}


def test_recorded_list_errors_are_replayed(server: ReplayServer) -> None:
    assert ask(server, "prompts/list")["error"] == {"code": -32603, "message": "boom"}
    assert ask(server, "resources/list")["error"]["code"] == -32601  # never recorded


def test_every_call_is_refused_and_nothing_is_echoed(server: ReplayServer) -> None:
    secret = "rm -rf / # SENTINEL-123"
    answer = ask(server, "tools/call", {"name": "a", "arguments": {"cmd": secret}})
    result = answer["result"]
    assert result["isError"] is True and is_refusal(result)
    assert result["_meta"][REFUSAL_META_KEY]["executed"] is False
    assert result["_meta"][REFUSAL_META_KEY]["snapshot"] == server.digest
    assert "SENTINEL" not in json.dumps(answer)
    unknown = ask(server, "tools/call", {"name": f"<{secret}>"})
    assert unknown["error"]["code"] == -32602 and "SENTINEL" not in json.dumps(unknown)
    for method in ("prompts/get", "resources/read", "completion/complete"):
        assert ask(server, method, {"name": "x"})["error"]["code"] == -32010
    assert ask(server, "server/discover")["error"]["code"] == -32601
    assert ask(server, "logging/setLevel", {"level": "info"})["error"]["code"] == -32601


def test_json_rpc_edges(server: ReplayServer) -> None:
    assert server.handle({"jsonrpc": "2.0", "method": "notifications/initialized"}) is None
    assert server.handle({"jsonrpc": "2.0", "id": 5, "result": {}}) is None
    assert server.handle({"id": 1, "method": "ping"})["error"]["code"] == -32600
    assert server.handle({"jsonrpc": "2.0", "id": True, "method": "ping"})["id"] is None
    assert (
        server.handle({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1]})["error"]["code"]
        == -32602
    )
    assert json.loads(server.handle_bytes(b"{nope") or b"")["error"]["code"] == -32700
    assert json.loads(server.handle_bytes(b"\xff") or b"")["error"]["code"] == -32700
    batch = server.handle(
        [
            {"jsonrpc": "2.0", "id": 1, "method": "ping"},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
        ]
    )
    assert batch == [{"jsonrpc": "2.0", "id": 1, "result": {}}]
    assert server.handle([])["error"]["code"] == -32600


def test_stdio_loop_answers_each_request_on_its_own_line(server: ReplayServer) -> None:
    lines = [
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}),
        "",
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    ]
    out = io.BytesIO()
    serve_stdio(server, io.BytesIO(("\n".join(lines) + "\n").encode()), out)
    answers = out.getvalue().split(b"\n")
    assert answers[-1] == b"" and len(answers) == 3
    assert json.loads(answers[0])["result"] == INIT and json.loads(answers[1])["id"] == 2


def test_is_refusal_accepts_sdk_dumps_and_rejects_plain_errors() -> None:
    marker = {REFUSAL_META_KEY: {"refused": True}}
    assert is_refusal({"isError": True, "_meta": marker})
    assert is_refusal({"is_error": True, "meta": marker})
    assert not is_refusal({"isError": True, "content": []})
    assert not is_refusal({"isError": False, "_meta": marker})
