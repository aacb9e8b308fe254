"""Issue 16, items 1 and 2: protocol negotiation, client capabilities, headers, the lint.

The live server answers the revision a client asks for when it speaks it; the replay
must too, or an older client that connects to the live server fails on its replay.
The revisions are learnt at snapshot time by asking the live server for each one.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from prereg.experiments.machine_text import Machine, find_machine_text, snapshot_machine_text
from prereg.experiments.mcp_snapshot import Snapshot, read_snapshot, snapshot_digest
from prereg.runners.mcp.capture import CaptureOptions, HttpTarget, StdioTarget, capture_snapshot
from prereg.runners.mcp.replay import ReplayServer, encode
from prereg.runners.mcp.serve_http import base_url, bind, build_app
from tests.conftest import skip_unless_ci
from tests.mcp import OLD_CLIENT_PYTHON, PREREG, TIME_SERVER, old_client, raw_stdio
from tests.waiting import wait_until

OLDER = "2025-06-18"
NEWEST = "2025-11-25"
SNAP_TIMEOUT = 90


def _initialize(version: str | None, request_id: int = 1) -> dict[str, Any]:
    params: dict[str, Any] = {"capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
    if version is not None:
        params["protocolVersion"] = version
    return {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": params}


def _tools_list(request_id: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/list", "params": {}}


def _snapshot(versions: list[str] | None, recorded: str = NEWEST) -> Snapshot:
    served: dict[str, Any] = {
        "initialize": {
            "protocolVersion": recorded,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "s", "version": "1"},
        },
        "lists": {
            "tools/list": {"pages": [{"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}]}
        },
    }
    if versions is not None:
        served["protocol_versions"] = versions
    capture = {"taken_at": "2026-11-30T00:00:00Z", "transport": "stdio", "command": ["x"]}
    return Snapshot.model_validate({"server": served, "capture": capture})


# -- the replay core ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("requested", "answered"),
    [
        (OLDER, OLDER),  # recorded as accepted: answered in kind
        (NEWEST, NEWEST),
        ("2024-11-05", NEWEST),  # never accepted by the live server: the recorded one
        ("not-a-version", NEWEST),
        (None, NEWEST),
    ],
)
def test_replay_answers_a_revision_the_live_server_accepted(
    requested: str | None, answered: str
) -> None:
    replay = ReplayServer(_snapshot([OLDER, NEWEST]))
    response = replay.handle(_initialize(requested))
    assert response is not None
    assert response["result"]["protocolVersion"] == answered
    recorded = _snapshot([OLDER, NEWEST]).initialize_result()
    assert list(response["result"]) == list(recorded)  # the version keeps its position
    assert {k: v for k, v in response["result"].items() if k != "protocolVersion"} == {
        k: v for k, v in recorded.items() if k != "protocolVersion"
    }


def test_a_snapshot_without_recorded_revisions_answers_only_its_own() -> None:
    replay = ReplayServer(_snapshot(None))
    for requested in (OLDER, NEWEST, "2024-11-05"):
        response = replay.handle(_initialize(requested))
        assert response is not None and response["result"]["protocolVersion"] == NEWEST


def test_recorded_revisions_are_checked() -> None:
    with pytest.raises(ValueError, match="must include the recorded protocolVersion"):
        _snapshot([OLDER])
    with pytest.raises(ValueError, match="each revision once"):
        _snapshot([NEWEST, NEWEST])


def test_the_revisions_are_part_of_what_is_served_and_digested() -> None:
    """A replay that negotiates serves something else than one that does not."""
    assert snapshot_digest(_snapshot([NEWEST])) != snapshot_digest(_snapshot([OLDER, NEWEST]))
    assert snapshot_digest(_snapshot(None)) != snapshot_digest(_snapshot([NEWEST]))


# -- against the real time server (PyPI) ----------------------------------------------------

pytest.importorskip("mcp_server_time", reason="needs mcp-server-time (a dev dependency)")


@pytest.fixture(scope="module")
def negotiated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("negotiated") / "time.json"
    done = subprocess.run(
        [*PREREG, "mcp", "snapshot", "--out", str(out), "--json", "--timeout", "60"]
        + ["--client-capabilities", "roots,sampling", "--", *TIME_SERVER],
        capture_output=True,
        text=True,
        timeout=SNAP_TIMEOUT,
    )
    assert done.returncode == 0, done.stderr
    return {"file": out, "summary": json.loads(done.stdout)}


def test_the_snapshot_records_every_revision_the_server_speaks(negotiated: dict) -> None:
    """The time server (Python SDK) speaks every handshake revision; ask it directly."""
    versions = ("2024-11-05", "2025-03-26", OLDER, NEWEST)
    with ThreadPoolExecutor(len(versions)) as pool:  # four server starts at once
        lines = list(pool.map(lambda v: raw_stdio(TIME_SERVER, [_initialize(v)])[0], versions))
    spoken = [v for v, line in zip(versions, lines, strict=True) if _version_of(line) == v]
    assert len(spoken) >= 2
    assert negotiated["summary"]["protocol_versions"] == spoken
    assert read_snapshot(negotiated["file"]).protocol_versions() == spoken


def test_the_replay_negotiates_as_the_live_server_did(negotiated: dict) -> None:
    """For two revisions: the replay's bytes equal the live server's, version included."""
    replay_cmd = [*PREREG, "mcp", "serve", str(negotiated["file"])]
    asks = [(cmd, v) for v in (OLDER, NEWEST) for cmd in (TIME_SERVER, replay_cmd)]
    with ThreadPoolExecutor(len(asks)) as pool:
        answers = list(
            pool.map(lambda a: raw_stdio(a[0], [_initialize(a[1]), _tools_list(2)]), asks)
        )
    for index, version in enumerate((OLDER, NEWEST)):
        live, replayed = answers[2 * index], answers[2 * index + 1]
        assert _version_of(replayed[0]) == version
        assert replayed == live


def _version_of(line: bytes) -> str:
    return str(json.loads(line)["result"]["protocolVersion"])


def test_the_client_capabilities_are_recorded(negotiated: dict) -> None:
    capture = negotiated["summary"]["capture"]
    assert set(capture["client_capabilities"]) == {"roots", "sampling"}
    assert (
        read_snapshot(negotiated["file"]).capture.client_capabilities
        == (capture["client_capabilities"])
    )


def test_an_unknown_client_capability_is_bad_input(tmp_path: Path) -> None:
    done = subprocess.run(
        [*PREREG, "mcp", "snapshot", "--out", str(tmp_path / "x.json")]
        + ["--client-capabilities", "roots,telepathy", "--", *TIME_SERVER],
        capture_output=True,
        text=True,
        timeout=SNAP_TIMEOUT,
    )
    assert done.returncode == 2
    assert "--client-capabilities" in done.stderr and "telepathy" in done.stderr
    assert not (tmp_path / "x.json").exists()


def test_a_server_pinned_to_the_machine_zone_is_flagged(tmp_path: Path) -> None:
    """The time server names its local zone; on a machine in that zone, the lint says so."""
    command = [*TIME_SERVER[:-1], "Europe/Berlin"]
    snap = capture_snapshot(_stdio(command), timeout=60, options=CaptureOptions(negotiate=False))
    berlin = Machine(zones=frozenset({"Europe/Berlin"}), hostname="", user="", folders=())
    found = snapshot_machine_text(snap, berlin)
    assert found and {f.kind for f in found} == {"timezone"}
    assert all(f.value == "Europe/Berlin" and f.where.startswith("tools[") for f in found)
    utc = Machine(zones=frozenset(), hostname="", user="", folders=())
    assert snapshot_machine_text(snap, utc) == []


def _stdio(command: list[str]) -> StdioTarget:
    return StdioTarget(command)


# -- the lint on constructed text -----------------------------------------------------------


def test_the_lint_finds_each_kind_and_only_where_it_is() -> None:
    machine = Machine(
        zones=frozenset({"Asia/Kolkata"}),
        hostname="build-box-7",
        user="priya",
        folders=("/home/priya",),
    )
    listed = {
        "tools": [
            {"name": "clock", "description": "Times are shown in Asia/Kolkata."},
            {"name": "files", "description": "Reads /home/priya/notes and /srv/data/x.csv."},
            {"name": "who", "inputSchema": {"default": "priya@build-box-7"}},
            {"name": "plain", "description": "Converts e.g. 'America/New_York' to UTC."},
        ]
    }
    found = {(f.where, f.kind, f.value) for f in find_machine_text(listed, machine)}
    assert found == {
        ("tools[clock].description", "timezone", "Asia/Kolkata"),
        ("tools[files].description", "path", "/home/priya"),
        ("tools[files].description", "path", "/home/priya/notes"),
        ("tools[files].description", "path", "/srv/data/x.csv"),
        ("tools[who].inputSchema.default", "hostname", "build-box-7"),
        ("tools[who].inputSchema.default", "user", "priya"),
    }


def test_generic_user_names_are_not_flagged_as_words() -> None:
    machine = Machine(zones=frozenset(), hostname="", user="root", folders=())
    listed = {"tools": [{"name": "t", "description": "Lists the root folder of the project."}]}
    assert find_machine_text(listed, machine) == []


# -- --header: sent, never written ----------------------------------------------------------


@pytest.fixture
def guarded_replay(tmp_path: Path) -> Iterator[str]:
    """The replay over HTTP behind a bearer token, as a server behind auth would be."""
    snap = _snapshot([NEWEST])
    app = build_app([ReplayServer(snap)], "127.0.0.1")

    async def guarded(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            if headers.get(b"authorization") != b"Bearer s3cret-token":
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"unauthorised"})
                return
        await app(scope, receive, send)

    sock = bind("127.0.0.1", 0)
    server = uvicorn.Server(
        uvicorn.Config(guarded, log_level="warning", lifespan="off", access_log=False)
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    wait_until(lambda: server.started, "the guarded server started", poll_s=0.02)
    try:
        yield base_url(sock) + "/mcp"
    finally:
        server.should_exit = True
        thread.join(10)


def test_a_header_from_the_environment_reaches_the_server_and_not_the_file(
    guarded_replay: str, tmp_path: Path
) -> None:
    out = tmp_path / "auth.json"
    command = [*PREREG, "mcp", "snapshot", "--out", str(out), "--json", "--url", guarded_replay]
    env = {**os.environ, "MCP_TOKEN_HEADER": "Bearer s3cret-token"}
    done = subprocess.run(
        [*command, "--header", "Authorization=MCP_TOKEN_HEADER", "--no-negotiate"],
        capture_output=True,
        text=True,
        timeout=SNAP_TIMEOUT,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert "s3cret" not in out.read_text() and "s3cret" not in done.stdout
    assert read_snapshot(out).capture.headers == ["Authorization"]
    assert read_snapshot(out).tool_names() == ["t"]
    refused = subprocess.run(  # the same server without the header: the capture fails
        [*command, "--force", "--no-negotiate"], capture_output=True, text=True, timeout=60
    )
    assert refused.returncode != 0


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--header", "Authorization"], "NAME=ENV_VAR"),
        (["--header", "Authorization=PREREG_TEST_UNSET_VARIABLE"], "is not set"),
    ],
)
def test_bad_headers_are_bad_input(
    guarded_replay: str, tmp_path: Path, flags: list[str], needle: str
) -> None:
    out = tmp_path / "x.json"
    done = subprocess.run(
        [*PREREG, "mcp", "snapshot", "--out", str(out), "--url", guarded_replay, *flags],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and needle in done.stderr and "--header" in done.stderr
    assert not out.exists()


def test_a_header_without_url_is_bad_input(tmp_path: Path) -> None:
    done = subprocess.run(
        [*PREREG, "mcp", "snapshot", "--out", str(tmp_path / "x.json")]
        + ["--header", "A=B", "--", *TIME_SERVER],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "--header goes with --url" in done.stderr


def test_http_capture_through_the_api_records_header_names_only(guarded_replay: str) -> None:
    target = HttpTarget(guarded_replay, headers={"Authorization": "Bearer s3cret-token"})
    snap = capture_snapshot(target, timeout=30, options=CaptureOptions(negotiate=False))
    assert snap.capture.headers == ["Authorization"]
    assert b"s3cret" not in snap.to_json_bytes()
    assert encode(snap.initialize_result())  # served as recorded


# -- an older official client (mcp 1.12, in its own venv: .ci/run makes it) -----------------


def test_an_older_official_client_gets_the_same_tools_from_live_and_replay(
    negotiated: dict,
) -> None:
    """mcp 1.12 asks for 2025-06-18: the live server and its replay both agree to it."""
    if not OLD_CLIENT_PYTHON.exists():
        skip_unless_ci("needs .venv-mcp1 with mcp 1.12 (bash .ci/run creates it)")
    live = old_client(TIME_SERVER)
    replayed = old_client([*PREREG, "mcp", "serve", str(negotiated["file"])])
    assert live["protocolVersion"] == replayed["protocolVersion"] == OLDER
    assert replayed["tools"] == live["tools"] and len(live["tools"]) == 2
