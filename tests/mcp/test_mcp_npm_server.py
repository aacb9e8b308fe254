"""Acceptance (issue 16, item 1): snapshot a real npm MCP server, replay it, compare with live.

``@modelcontextprotocol/server-memory`` (the reference TypeScript SDK, not the Python one the
time-server test exercises) is pinned by ``tests/mcp/npm/package.json`` and its lock file
and installed by ``npm ci --prefix tests/mcp/npm`` (``.ci/run``). Without it the tests skip
on a workstation and fail in CI. The server writes its knowledge graph only when a tool
mutates it; the tests never call the live server's tools, and point its file at a temporary
folder all the same.

Node answers a JSON-RPC message with its keys in another order than the replay encodes
them, so the wire checks compare the decoded messages; the time-server test covers bytes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from prereg.experiments.mcp_snapshot import read_snapshot
from prereg.runners.mcp import is_refusal
from tests.conftest import skip_unless_ci
from tests.mcp import OLD_CLIENT_PYTHON, PREREG, client_view, old_client, raw_stdio

NPM = Path(__file__).resolve().parent / "npm"
SERVER_JS = NPM / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"
OLDER = "2025-06-18"
NEWEST = "2025-11-25"
TOOLS = [  # the server's documented tools (its README), in its order
    "create_entities",
    "create_relations",
    "add_observations",
    "delete_entities",
    "delete_observations",
    "delete_relations",
    "read_graph",
    "search_nodes",
    "open_nodes",
]
SNAP_TIMEOUT = 90


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The live server's command (its graph file in a temporary folder)."""
    node = shutil.which("node")
    if node is None or not SERVER_JS.exists():
        skip_unless_ci(
            "needs Node and @modelcontextprotocol/server-memory (npm ci --prefix tests/mcp/npm)"
        )
    assert node is not None
    graph = tmp_path_factory.mktemp("memory") / "graph.jsonl"
    return ["env", f"MEMORY_FILE_PATH={graph}", node, str(SERVER_JS)]


def _snapshot(out: Path, command: list[str], *flags: str) -> dict[str, Any]:
    done = subprocess.run(
        [*PREREG, "mcp", "snapshot", "--out", str(out), "--json", "--timeout", "60"]
        + [*flags, "--", *command],
        capture_output=True,
        text=True,
        timeout=SNAP_TIMEOUT,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@pytest.fixture(scope="module")
def snaps(server: list[str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("npm-snaps")
    flags = [("--client-capabilities", "roots"), ("--client-capabilities", "roots")]
    with ThreadPoolExecutor(2) as pool:  # two captures at once (each starts the server 5 times)
        first, second = pool.map(
            lambda a: _snapshot(folder / f"{a[0]}.json", server, *a[1]), enumerate(flags)
        )
    return {"file": folder / "0.json", "other": folder / "1.json", "first": first, "second": second}


@pytest.fixture(scope="module")
def live(server: list[str]) -> dict[str, Any]:
    return client_view(server, mode="legacy", call=False)


def _initialize(version: str, request_id: int = 1) -> dict[str, Any]:
    params = {
        "protocolVersion": version,
        "capabilities": {},
        "clientInfo": {"name": "raw-test", "version": "0"},
    }
    return {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": params}


def _tools_list(request_id: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/list", "params": {}}


def test_two_snapshots_of_the_npm_server_share_a_digest_and_record_capabilities(
    snaps: dict[str, Any], live: dict[str, Any]
) -> None:
    first, second = snaps["first"], snaps["second"]
    assert first["digest"] == second["digest"] and first["digest"].startswith("sha256:")
    assert read_snapshot(snaps["file"]).server == read_snapshot(snaps["other"]).server
    assert first["server"]["name"] == "memory-server"
    assert first["tool_names"] == TOOLS
    assert first["warnings"] == []  # nothing machine-dependent in its tool text
    snap = read_snapshot(snaps["file"])
    # the server's capabilities as the official client saw them, and the client's declared
    assert snap.initialize_result()["capabilities"] == live["capabilities"]
    assert set(snap.capture.client_capabilities) == {"roots"}
    assert first["capture"]["client_capabilities"] == snap.capture.client_capabilities
    # the TypeScript SDK speaks both revisions the clients below ask for
    assert {OLDER, NEWEST} <= set(snap.protocol_versions())


def test_the_replay_answers_like_the_live_server_at_two_revisions(
    server: list[str], snaps: dict[str, Any]
) -> None:
    replay = [*PREREG, "mcp", "serve", str(snaps["file"])]
    asks = [(cmd, v) for v in (OLDER, NEWEST) for cmd in (server, replay)]
    with ThreadPoolExecutor(len(asks)) as pool:
        answers = list(
            pool.map(lambda a: raw_stdio(a[0], [_initialize(a[1]), _tools_list(2)]), asks)
        )
    decoded = [[json.loads(line) for line in lines] for lines in answers]
    for index, version in enumerate((OLDER, NEWEST)):
        live_lines, replayed = decoded[2 * index], decoded[2 * index + 1]
        assert replayed[0]["result"]["protocolVersion"] == version
        assert replayed == live_lines
    # the tools do not depend on the revision negotiated
    assert decoded[0][1]["result"]["tools"] == decoded[2][1]["result"]["tools"]
    assert [t["name"] for t in decoded[0][1]["result"]["tools"]] == TOOLS


def test_the_current_official_client_sees_the_live_server_in_the_replay(
    snaps: dict[str, Any], live: dict[str, Any]
) -> None:
    seen = client_view([*PREREG, "mcp", "serve", str(snaps["file"])], mode="legacy")
    assert seen["protocol_version"] == live["protocol_version"] == NEWEST
    for key in ("server_info", "instructions", "capabilities", "tools"):
        assert seen[key] == live[key], key
    assert [t["name"] for t in seen["tools"]] == TOOLS
    assert set(seen["calls"]) == {*TOOLS, "<unknown>"}
    assert all(is_refusal(seen["calls"][name]) for name in TOOLS)


def test_an_older_official_client_gets_the_same_tools_from_live_and_replay(
    server: list[str], snaps: dict[str, Any], live: dict[str, Any]
) -> None:
    """mcp 1.12 asks for 2025-06-18; the live server and the replay both agree to it."""
    if not OLD_CLIENT_PYTHON.exists():
        skip_unless_ci("needs .venv-mcp1 with mcp 1.12 (bash .ci/run creates it)")
    with ThreadPoolExecutor(2) as pool:
        old_live, old_replayed = pool.map(
            old_client, [server, [*PREREG, "mcp", "serve", str(snaps["file"])]]
        )
    assert old_live["protocolVersion"] == old_replayed["protocolVersion"] == OLDER
    assert old_replayed["tools"] == old_live["tools"]
    assert old_replayed["capabilities"] == old_live["capabilities"]
    assert [t["name"] for t in old_live["tools"]] == TOOLS
    # the same tools as the current client sees at the newest revision
    assert [t["name"] for t in live["tools"]] == TOOLS
    for old, new in zip(old_live["tools"], live["tools"], strict=True):
        assert old["name"] == new["name"] and old["inputSchema"] == new["inputSchema"]
        assert old.get("description") == new.get("description")
