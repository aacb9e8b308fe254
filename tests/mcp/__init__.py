"""Helpers shared by the MCP tests: bounded subprocesses, raw JSON-RPC, SDK client views.

Every wait here has a deadline, so a wedged server fails a test instead of hanging it;
all network traffic is on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio

from tests.waiting import HANG_S

PY = sys.executable
TIME_SERVER = [PY, "-m", "mcp_server_time", "--local-timezone", "UTC"]
PREREG = [PY, "-m", "prereg"]
STEP_TIMEOUT = HANG_S  # a hang guard (tests/waiting.py), never a speed expectation


def handshake(request_id: int = 1) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "raw-test", "version": "0"},
        },
    }


def raw_stdio(
    command: list[str], messages: list[dict[str, Any]], env: dict[str, str] | None = None
) -> list[bytes]:
    """Send messages one per line; return the raw response line (bytes) of each request."""
    proc = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        bufsize=0,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )
    assert proc.stdin is not None and proc.stdout is not None
    lines: list[bytes] = []
    try:
        for message in messages:
            proc.stdin.write(json.dumps(message).encode() + b"\n")
            proc.stdin.flush()
            if "id" in message:
                lines.append(_readline(proc.stdout, STEP_TIMEOUT))
    finally:
        proc.stdin.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    return lines


def _readline(stream: Any, timeout: float) -> bytes:
    """One line from an unbuffered pipe (a buffered one would hide lines from select)."""
    ready, _, _ = select.select([stream], [], [], timeout)
    if not ready:
        raise TimeoutError("no response line in time")
    line = stream.readline()
    assert line, "the server closed its stdout"
    return bytes(line)


@contextmanager
def http_replay(*snapshots: Path) -> Iterator[dict[str, Any]]:
    """``prereg mcp serve ... --http --port 0 --json``; yields its start-up document."""
    proc = subprocess.Popen(
        [*PREREG, "mcp", "serve", *map(str, snapshots), "--http", "--port", "0", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
    )
    assert proc.stdout is not None
    try:
        text = ""
        deadline = time.monotonic() + STEP_TIMEOUT
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or proc.poll() is not None:
                proc.kill()  # so reading its stderr below cannot block
                proc.wait(5)
                errors = proc.stderr.read() if proc.stderr else b""
                raise RuntimeError(f"replay server did not start: {errors!r}")
            text += _readline(proc.stdout, remaining).decode()
            try:
                doc = json.loads(text)
                break
            except ValueError:
                continue
        yield doc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def http_post(
    url: str, body: bytes, headers: dict[str, str] | None = None
) -> tuple[int, bytes, dict[str, str]]:
    request = urllib.request.Request(
        url,
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            **(headers or {}),
        },
    )
    return _open(request)


def http_call(url: str, method: str) -> tuple[int, bytes, dict[str, str]]:
    return _open(urllib.request.Request(url, method=method))


def _open(request: urllib.request.Request) -> tuple[int, bytes, dict[str, str]]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=STEP_TIMEOUT) as response:
            return response.status, response.read(), dict(response.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), dict(exc.headers)


def client_view(server: Any, mode: str = "legacy", call: bool = True) -> dict[str, Any]:
    """What an SDK client sees: identity, capabilities, every tool; and each call's result.

    ``server`` is a URL or a command list (run over stdio).
    """
    return anyio.run(_client_view, server, mode, call)


async def _client_view(server: Any, mode: str, call: bool) -> dict[str, Any]:
    from mcp import Client, StdioServerParameters
    from mcp.shared.exceptions import MCPError

    target = (
        server
        if isinstance(server, str)
        else StdioServerParameters(command=server[0], args=server[1:], env=dict(os.environ))
    )
    with anyio.fail_after(STEP_TIMEOUT):
        async with Client(target, mode=mode, cache=None) as client:
            info = client.server_info
            tools = []
            cursor = None
            while True:
                page = await client.list_tools(cursor=cursor, cache_mode="bypass")
                tools += [
                    t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in page.tools
                ]
                cursor = page.next_cursor
                if cursor is None:
                    break
            calls: dict[str, Any] = {}
            if call:
                for tool in tools:
                    result = await client.call_tool(tool["name"], {})
                    calls[tool["name"]] = result.model_dump(
                        by_alias=True, mode="json", exclude_none=True
                    )
                try:
                    await client.call_tool("no_such_tool_xyz", {})
                    calls["<unknown>"] = "answered"
                except MCPError as exc:
                    calls["<unknown>"] = exc.error.code
            return {
                "protocol_version": client.protocol_version,
                "server_info": None
                if info is None
                else info.model_dump(by_alias=True, mode="json", exclude_none=True),
                "instructions": client.instructions,
                "capabilities": client.server_capabilities.model_dump(
                    by_alias=True, mode="json", exclude_none=True
                ),
                "tools": tools,
                "calls": calls,
            }


# ---- the older official client (mcp 1.12, in .venv-mcp1; created by .ci/run) ---------------

#: the older client's interpreter; tests that need it skip (outside CI) when it is missing
OLD_CLIENT_PYTHON = Path(__file__).resolve().parents[2] / ".venv-mcp1" / "bin" / "python"
#: what the older client reports of a server it connects to: the negotiated revision, the
#: capabilities, identity and instructions, and the tools
OLD_CLIENT = """
import json, sys
import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

async def main():
    params = StdioServerParameters(command=sys.argv[1], args=sys.argv[2:])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            tools = await session.list_tools()
    print(json.dumps({
        "protocolVersion": init.protocolVersion,
        "capabilities": init.capabilities.model_dump(mode="json", exclude_none=True),
        "serverInfo": init.serverInfo.model_dump(mode="json", exclude_none=True),
        "instructions": init.instructions,
        "tools": [t.model_dump(mode="json", exclude_none=True) for t in tools.tools],
    }))

anyio.run(main)
"""


def old_client(command: list[str]) -> dict[str, Any]:
    """Connect the older official client to the stdio server ``command``; what it saw."""
    done = subprocess.run(
        [str(OLD_CLIENT_PYTHON), "-c", OLD_CLIENT, *command],
        capture_output=True,
        text=True,
        timeout=STEP_TIMEOUT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, Any] = json.loads(done.stdout)
    return result
