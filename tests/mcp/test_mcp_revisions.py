"""Issue 43, item 5: a snapshot records each protocol revision's answers; the replay
negotiates every revision the live server negotiated and answers with that revision's.

Before, the replay answered only the handshake era: a current client (``mode="auto"``)
agreed on 2026-07-28 with the live server and on 2025-11-25 with its replay, and saw
other capabilities. Here the real ``mcp-server-time`` is recorded, then the official
clients (the current SDK, and mcp 1.12 from ``.venv-mcp1`` when present) connect to the
live server and to its replay, and must negotiate the same revision and see the same
capabilities, identity, instructions and tools.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from mcp_types import PROTOCOL_VERSION_META_KEY
from mcp_types.version import (
    HANDSHAKE_PROTOCOL_VERSIONS,
    KNOWN_PROTOCOL_VERSIONS,
    LATEST_HANDSHAKE_VERSION,
    LATEST_MODERN_VERSION,
    MODERN_PROTOCOL_VERSIONS,
)

from prereg.experiments.mcp_snapshot import Snapshot, read_snapshot, snapshot_digest
from prereg.runners.mcp.replay import METHOD_NOT_FOUND, ReplayServer
from tests.conftest import skip_unless_ci
from tests.mcp import (
    OLD_CLIENT_PYTHON,
    PREREG,
    TIME_SERVER,
    client_view,
    http_replay,
    old_client,
    raw_stdio,
)

SNAP_TIMEOUT = 90
OLDER = "2025-06-18"
UNSUPPORTED_PROTOCOL_VERSION = -32022  # the protocol's code (mcp_types.jsonrpc)
ENVELOPE_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"


# -- constructed snapshots: the rules of the replay core ------------------------------------


def _tool(name: str, description: str) -> dict[str, Any]:
    return {"name": name, "description": description, "inputSchema": {"type": "object"}}


def _served(versions: list[str] | None = None) -> dict[str, Any]:
    served: dict[str, Any] = {
        "initialize": {
            "protocolVersion": LATEST_HANDSHAKE_VERSION,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "s", "version": "1"},
        },
        "lists": {"tools/list": {"pages": [{"tools": [_tool("t", "newest")]}]}},
    }
    if versions is not None:
        served["protocol_versions"] = versions
    return served


def _multi_revision() -> dict[str, Any]:
    """Main recording at the newest handshake revision; 2025-06-18 answered otherwise
    (other capabilities, two pages); a discover-era revision with its own answers."""
    served = _served([LATEST_HANDSHAKE_VERSION])
    served["revisions"] = {
        OLDER: {
            "initialize": {
                "protocolVersion": OLDER,
                "capabilities": {"tools": {}, "logging": {}},
                "serverInfo": {"name": "s", "version": "1"},
                "instructions": "older",
            },
            "lists": {
                "tools/list": {
                    "pages": [
                        {"tools": [_tool("t", "older")], "nextCursor": "c-1"},
                        {"tools": [_tool("u", "older")]},
                    ]
                }
            },
        },
        LATEST_MODERN_VERSION: {
            "discover": {
                "supportedVersions": [LATEST_MODERN_VERSION],
                "capabilities": {"tools": {"listChanged": False}},
                "resultType": "complete",
                "ttlMs": 0,
                "cacheScope": "private",
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "s", "version": "1"}},
            },
            "lists": {
                "tools/list": {
                    "pages": [
                        {
                            "cacheScope": "private",
                            "resultType": "complete",
                            "tools": [_tool("t", "modern")],
                            "ttlMs": 0,
                        }
                    ]
                }
            },
        },
    }
    return served


def _snapshot(served: dict[str, Any]) -> Snapshot:
    capture = {"taken_at": "2026-12-01T00:00:00Z", "transport": "stdio", "command": ["x"]}
    return Snapshot.model_validate({"server": served, "capture": capture})


def _initialize(version: Any, request_id: int = 1) -> dict[str, Any]:
    params = {
        "protocolVersion": version,
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    }
    return {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": params}


def _enveloped(method: str, version: str, request_id: int = 1, **params: Any) -> dict[str, Any]:
    meta = {PROTOCOL_VERSION_META_KEY: version, ENVELOPE_CAPABILITIES: {}}
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": method,
        "params": {**params, "_meta": meta},
    }


def _tools_list(request_id: int = 2, cursor: str | None = None) -> dict[str, Any]:
    params = {} if cursor is None else {"cursor": cursor}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/list", "params": params}


def test_the_revisions_negotiated_are_the_recorded_ones_oldest_first() -> None:
    snap = _snapshot(_multi_revision())
    assert snap.revisions() == [OLDER, LATEST_HANDSHAKE_VERSION, LATEST_MODERN_VERSION]
    assert ReplayServer(snap).negotiable() == snap.revisions()


@pytest.mark.parametrize(
    ("requested", "answered"),
    [
        (OLDER, OLDER),  # recorded with its own answers
        (LATEST_HANDSHAKE_VERSION, LATEST_HANDSHAKE_VERSION),  # the main recording
        ("2024-11-05", LATEST_HANDSHAKE_VERSION),  # older than every recorded one: the main
        ("2025-03-26", LATEST_HANDSHAKE_VERSION),
        ("2099-01-01", LATEST_HANDSHAKE_VERSION),  # not a revision the SDK knows: the main
        (LATEST_MODERN_VERSION, LATEST_HANDSHAKE_VERSION),  # newer: the newest older one
        (None, LATEST_HANDSHAKE_VERSION),
    ],
)
def test_initialize_gets_the_closest_recorded_revision(requested: Any, answered: str) -> None:
    replay = ReplayServer(_snapshot(_multi_revision()))
    response = replay.handle(_initialize(requested))
    assert response is not None and response["result"]["protocolVersion"] == answered


def test_a_gap_gets_the_newest_recorded_revision_older_than_the_one_asked_for() -> None:
    served = _served(["2024-11-05", LATEST_HANDSHAKE_VERSION])  # no 2025-03-26, 2025-06-18
    replay = ReplayServer(_snapshot(served))
    for requested, answered in (("2025-06-18", "2024-11-05"), ("2025-03-26", "2024-11-05")):
        response = replay.handle(_initialize(requested))
        assert response is not None and response["result"]["protocolVersion"] == answered


def test_each_handshake_revision_is_answered_with_its_own_recording() -> None:
    served = _multi_revision()
    replay = ReplayServer(_snapshot(served))
    older = served["revisions"][OLDER]
    # stdio: the connection remembers what it negotiated
    connection = replay.connection()
    first = connection.handle_bytes(json.dumps(_initialize(OLDER)).encode())
    assert first is not None and json.loads(first)["result"] == older["initialize"]
    page = json.loads(connection.handle_bytes(json.dumps(_tools_list()).encode()) or b"")
    assert page["result"] == older["lists"]["tools/list"]["pages"][0]
    second = connection.handle_bytes(json.dumps(_tools_list(3, "c-1")).encode())
    assert json.loads(second or b"")["result"] == older["lists"]["tools/list"]["pages"][1]
    level = {"jsonrpc": "2.0", "id": 4, "method": "logging/setLevel", "params": {"level": "info"}}
    assert "result" in replay.handle(level, OLDER)  # this revision advertised logging
    assert replay.handle(level, LATEST_HANDSHAKE_VERSION)["error"]["code"] == METHOD_NOT_FOUND
    # HTTP: the MCP-Protocol-Version header names the revision; none: the main recording
    assert replay.handle(_tools_list(), OLDER)["result"]["tools"][0]["description"] == "older"
    main = replay.handle(_tools_list(), None)["result"]
    assert main == served["lists"]["tools/list"]["pages"][0]
    newest = replay.handle(_initialize(LATEST_HANDSHAKE_VERSION))["result"]
    assert newest == served["initialize"]


def test_a_discover_era_revision_is_answered_with_its_recording() -> None:
    served = _multi_revision()
    replay = ReplayServer(_snapshot(served))
    modern = served["revisions"][LATEST_MODERN_VERSION]
    found = replay.handle(_enveloped("server/discover", LATEST_MODERN_VERSION))
    assert found is not None and found["result"] == modern["discover"]
    listed = replay.handle(_enveloped("tools/list", LATEST_MODERN_VERSION, 2))
    assert listed is not None and listed["result"] == modern["lists"]["tools/list"]["pages"][0]
    called = replay.handle(_enveloped("tools/call", LATEST_MODERN_VERSION, 3, name="t"))
    assert called is not None and called["result"]["isError"] is True
    assert called["result"]["resultType"] == "complete"


def test_an_unrecorded_discover_revision_gets_the_recorded_ones_named() -> None:
    """-32022 with the recorded revisions: the protocol's way to let the client pick."""
    replay = ReplayServer(_snapshot(_multi_revision()))
    refused = replay.handle(_enveloped("server/discover", "2099-01-01"))
    assert refused is not None and refused["error"]["code"] == UNSUPPORTED_PROTOCOL_VERSION
    assert refused["error"]["data"]["supported"] == [LATEST_MODERN_VERSION]
    malformed = replay.handle(  # the SDK's ladder: the envelope lacks client capabilities
        {
            "jsonrpc": "2.0",
            "id": 5,
            "method": "tools/list",
            "params": {"_meta": {PROTOCOL_VERSION_META_KEY: LATEST_MODERN_VERSION}},
        }
    )
    assert malformed is not None and "error" in malformed


def test_a_revision_the_installed_sdk_does_not_know_is_not_negotiated() -> None:
    served = _multi_revision()
    unknown = copy.deepcopy(served["revisions"][LATEST_MODERN_VERSION])
    unknown["discover"]["supportedVersions"] = ["2099-01-01"]
    served["revisions"] = {"2099-01-01": unknown}
    replay = ReplayServer(_snapshot(served))
    assert "2099-01-01" not in replay.negotiable()
    probe = replay.handle(_enveloped("server/discover", "2099-01-01"))
    assert probe is not None and probe["error"]["code"] == METHOD_NOT_FOUND


def test_a_single_revision_snapshot_replays_as_before() -> None:
    """No ``revisions``: server/discover is unknown (clients fall back to initialize),
    every initialize gets the one revision recorded, the file and digest unchanged."""
    snap = _snapshot(_served())
    replay = ReplayServer(snap)
    assert replay.negotiable() == [LATEST_HANDSHAKE_VERSION] == snap.revisions()
    probe = replay.handle(_enveloped("server/discover", LATEST_MODERN_VERSION))
    assert probe is not None and probe["error"]["code"] == METHOD_NOT_FOUND
    listed = replay.handle(_enveloped("tools/list", LATEST_MODERN_VERSION))
    assert listed is not None and listed["result"] == _served()["lists"]["tools/list"]["pages"][0]
    for version in (*HANDSHAKE_PROTOCOL_VERSIONS, "x"):
        answer = replay.handle(_initialize(version))
        assert answer is not None and answer["result"] == _served()["initialize"]
    assert b"revisions" not in snap.to_json_bytes()


def test_revisions_are_digested_and_checked() -> None:
    plain, multi = _snapshot(_served([LATEST_HANDSHAKE_VERSION])), _snapshot(_multi_revision())
    assert snapshot_digest(plain) != snapshot_digest(multi)
    moved = _multi_revision()  # the bytes of a cursor are not what the server serves
    moved["revisions"][OLDER]["lists"]["tools/list"]["pages"][0]["nextCursor"] = "other"
    assert snapshot_digest(_snapshot(moved)) == snapshot_digest(multi)
    again = _multi_revision()
    again["revisions"][OLDER]["lists"]["tools/list"]["pages"][1]["tools"][0]["description"] = "x"
    assert snapshot_digest(_snapshot(again)) != snapshot_digest(multi)
    twice = _multi_revision()
    twice["revisions"][LATEST_HANDSHAKE_VERSION] = twice["revisions"].pop(OLDER)
    with pytest.raises(ValueError, match="record it once"):
        _snapshot(twice)
    mislabelled = _multi_revision()
    mislabelled["revisions"]["2025-03-26"] = mislabelled["revisions"].pop(OLDER)
    with pytest.raises(ValueError, match="negotiated"):
        _snapshot(mislabelled)
    both = _multi_revision()
    both["revisions"][OLDER]["discover"] = both["revisions"][LATEST_MODERN_VERSION]["discover"]
    with pytest.raises(ValueError, match="exactly one of"):
        _snapshot(both)


def test_a_derived_snapshot_keeps_only_the_main_recording() -> None:
    """A transformation (blinded, clone) rewrites the main recording only: the others
    would serve the untransformed text, so they are dropped."""
    snap = _snapshot(_multi_revision())
    derived = snap.derive(tools=[_tool("t", "blinded")], derivation="test")
    assert derived.server.revisions is None
    assert derived.revisions() == [LATEST_HANDSHAKE_VERSION]


def test_a_snapshot_of_the_replay_is_the_snapshot_it_replays(tmp_path: Path) -> None:
    """Capture records each revision the replay accepts with its own answers: the
    multi-revision snapshot comes back whole (same digest)."""
    source = tmp_path / "multi.json"
    source.write_bytes(_snapshot(_multi_revision()).to_json_bytes())
    summary = _snapshot_cli(tmp_path / "again.json", [*PREREG, "mcp", "serve", str(source)])
    assert summary["revisions"] == [OLDER, LATEST_HANDSHAKE_VERSION, LATEST_MODERN_VERSION]
    assert summary["digest"] == snapshot_digest(read_snapshot(source))
    assert read_snapshot(tmp_path / "again.json").server == read_snapshot(source).server


def _snapshot_cli(out: Path, command: list[str], *flags: str) -> dict[str, Any]:
    done = subprocess.run(
        [*PREREG, "mcp", "snapshot", "--out", str(out), "--json", "--timeout", "60", *flags]
        + ["--", *command],
        capture_output=True,
        text=True,
        timeout=SNAP_TIMEOUT,
    )
    assert done.returncode == 0, done.stderr
    summary: dict[str, Any] = json.loads(done.stdout)
    return summary


# -- the real time server (PyPI) --------------------------------------------------------------

time_server = pytest.importorskip("mcp_server_time", reason="needs mcp-server-time (dev)")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("revisions") / "time.json"
    return {"file": out, "summary": _snapshot_cli(out, TIME_SERVER)}


def _spoken_by_the_live_server() -> list[str]:
    """Ask the live server for each revision directly: initialize for the handshake
    ones, server/discover for the others."""
    spoken = []
    for version in KNOWN_PROTOCOL_VERSIONS:
        if version in MODERN_PROTOCOL_VERSIONS:
            [line] = raw_stdio(TIME_SERVER, [_enveloped("server/discover", version)])
            result = json.loads(line).get("result") or {}
            if version in result.get("supportedVersions", []):
                spoken.append(version)
        else:
            [line] = raw_stdio(TIME_SERVER, [_initialize(version)])
            if json.loads(line)["result"]["protocolVersion"] == version:
                spoken.append(version)
    return spoken


def test_the_snapshot_records_each_revision_the_server_accepts(recorded: dict) -> None:
    spoken = _spoken_by_the_live_server()
    assert LATEST_MODERN_VERSION in spoken and LATEST_HANDSHAKE_VERSION in spoken
    assert recorded["summary"]["revisions"] == spoken
    snap = read_snapshot(recorded["file"])
    assert snap.revisions() == spoken
    modern = snap.revision(LATEST_MODERN_VERSION)
    assert modern is not None and modern.era == "modern"
    assert modern.server_info() == snap.server_info()  # the same server, in each era
    assert [t["name"] for t in modern.lists["tools/list"].pages[0]["tools"]] == snap.tool_names()


SEEN = ("protocol_version", "capabilities", "server_info", "instructions", "tools")


@pytest.mark.parametrize("mode", ["auto", "legacy", LATEST_MODERN_VERSION])
def test_the_current_client_negotiates_alike_live_and_replay_over_stdio(
    recorded: dict, mode: str
) -> None:
    live = client_view(TIME_SERVER, mode=mode, call=False)
    replayed = client_view([*PREREG, "mcp", "serve", str(recorded["file"])], mode=mode)
    assert {k: replayed[k] for k in SEEN} == {k: live[k] for k in SEEN}
    if mode != "legacy":  # the newest revision both agree on is the discover era's
        assert live["protocol_version"] == LATEST_MODERN_VERSION
    calls = dict(replayed["calls"])
    assert calls.pop("<unknown>") == -32602  # a name the snapshot does not list
    assert calls and all(result["isError"] for result in calls.values())  # refused


def test_the_current_client_negotiates_alike_live_and_replay_over_http(recorded: dict) -> None:
    live = {mode: client_view(TIME_SERVER, mode=mode, call=False) for mode in ("auto", "legacy")}
    with http_replay(recorded["file"]) as started:
        url = started["servers"][0]["url"]
        for mode in ("auto", "legacy"):
            replayed = client_view(url, mode=mode)
            assert {k: replayed[k] for k in SEEN} == {k: live[mode][k] for k in SEEN}


def test_an_older_official_client_negotiates_alike_live_and_replay(recorded: dict) -> None:
    """mcp 1.12 asks for 2025-06-18 over initialize: live and replay both agree to it."""
    if not OLD_CLIENT_PYTHON.exists():
        skip_unless_ci("needs .venv-mcp1 with mcp 1.12 (bash .ci/run creates it)")
    live = old_client(TIME_SERVER)
    replayed = old_client([*PREREG, "mcp", "serve", str(recorded["file"])])
    assert replayed == live
    assert live["protocolVersion"] == OLDER


# -- a server of another SDK: the reference memory server (npm, TypeScript SDK) ---------------

SERVER_JS = (
    Path(__file__).resolve().parent
    / "npm"
    / "node_modules"
    / "@modelcontextprotocol"
    / "server-memory"
    / "dist"
    / "index.js"
)


@pytest.fixture(scope="module")
def npm_server(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    node = shutil.which("node")
    if node is None or not SERVER_JS.exists():
        skip_unless_ci(
            "needs Node and @modelcontextprotocol/server-memory (npm ci --prefix tests/mcp/npm)"
        )
    assert node is not None
    graph = tmp_path_factory.mktemp("memory") / "graph.jsonl"
    return ["env", f"MEMORY_FILE_PATH={graph}", node, str(SERVER_JS)]


def test_a_typescript_server_negotiates_alike_live_and_replay(
    npm_server: list[str], tmp_path: Path
) -> None:
    out = tmp_path / "memory.json"
    summary = _snapshot_cli(out, npm_server)
    assert summary["revisions"] == read_snapshot(out).revisions()
    replay = [*PREREG, "mcp", "serve", str(out)]
    for mode in ("auto", "legacy"):
        live = client_view(npm_server, mode=mode, call=False)
        replayed = client_view(replay, mode=mode)
        assert {k: replayed[k] for k in SEEN} == {k: live[k] for k in SEEN}
        assert live["protocol_version"] in summary["revisions"]
    if OLD_CLIENT_PYTHON.exists():
        assert old_client(replay) == old_client(npm_server)
