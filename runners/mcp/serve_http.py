"""The replay server over streamable HTTP: a pool of snapshots, one path per server.

Layout (documented in ``prereg mcp serve --help``): snapshot number ``i`` (0-based, in
the order given) is served at ``/servers/<i>/mcp``; with a single snapshot ``/mcp`` is
an alias of ``/servers/0/mcp``. ``GET /servers`` lists the pool as JSON. One port and
distinct paths keep a pool to one process and one ephemeral port, and index paths
stay distinct when two members are copies of the same server (a clone-swap pair).

The transport is the 2025-11-25 streamable HTTP one, stateless: every POST carries one
JSON-RPC message (or a batch) and is answered with ``application/json``; notifications
get 202. A request's ``MCP-Protocol-Version`` header names the handshake revision the
client negotiated, whose recorded answers it gets (2026-07-28 requests name theirs in
their own ``_meta``). No ``Mcp-Session-Id`` is issued, so clients open no GET stream; GET and DELETE
on an endpoint get 405. A request whose ``Origin`` is not this host is refused (403),
the DNS-rebinding guard the specification asks of local servers.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from prereg.runners.mcp.replay import PARSE_ERROR, ReplayServer

MAX_BODY = 4 * 1024 * 1024
LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1", "[::1]"}


@dataclass(frozen=True)
class Endpoint:
    index: int
    path: str
    server: ReplayServer

    def describe(self, base: str) -> dict[str, Any]:
        snap = self.server.snapshot
        return {
            "index": self.index,
            "url": base + self.path,
            "path": self.path,
            "name": snap.server_name,
            "version": snap.server_version,
            "digest": self.server.digest,
            "tools": len(snap.tool_names()),
        }


def endpoints(servers: list[ReplayServer]) -> list[Endpoint]:
    return [Endpoint(i, f"/servers/{i}/mcp", s) for i, s in enumerate(servers)]


def build_app(servers: list[ReplayServer], host: str) -> Callable[..., Any]:
    """The ASGI app for a pool (a Starlette app; Starlette and uvicorn come with ``mcp``)."""
    from starlette.applications import Starlette  # lazy: only `prereg mcp serve --http`
    from starlette.requests import Request  # lazy: only `prereg mcp serve --http`
    from starlette.responses import JSONResponse, Response  # lazy: only `mcp serve --http`
    from starlette.routing import Route  # lazy: only `prereg mcp serve --http`

    pool = endpoints(servers)
    allowed_hosts = LOOPBACK_NAMES | {host, f"[{host}]"}

    def origin_ok(request: Request) -> bool:
        origin = request.headers.get("origin")
        if origin is None:
            return True  # non-browser clients send none
        return (urlsplit(origin).hostname or "") in allowed_hosts

    def handler(server: ReplayServer) -> Callable[[Request], Any]:
        async def endpoint(request: Request) -> Response:
            if not origin_ok(request):
                return JSONResponse({"error": "origin not allowed"}, status_code=403)
            if request.method != "POST":
                return Response(status_code=405, headers={"Allow": "POST"})
            body = await request.body()
            if len(body) > MAX_BODY:
                return Response(status_code=413)
            version = request.headers.get("mcp-protocol-version")
            answer = server.handle_bytes(body, version)
            if answer is None:
                return Response(status_code=202)
            status = 400 if _is_parse_error(answer) else 200
            return Response(answer, status_code=status, media_type="application/json")

        return endpoint

    async def listing(request: Request) -> Response:
        base = f"{request.url.scheme}://{request.url.netloc}"
        return JSONResponse({"servers": [e.describe(base) for e in pool]})

    routes = [Route(e.path, handler(e.server), methods=["GET", "POST", "DELETE"]) for e in pool]
    if len(pool) == 1:
        routes.append(Route("/mcp", handler(pool[0].server), methods=["GET", "POST", "DELETE"]))
    routes.append(Route("/servers", listing, methods=["GET"]))
    return Starlette(routes=routes)


def bind(host: str, port: int) -> socket.socket:
    """Bind and listen before serving, so port 0 yields a known ephemeral port at once."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    return sock


def base_url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def serve_http(servers: list[ReplayServer], sock: socket.socket, host: str) -> None:
    """Serve until interrupted (SIGINT or SIGTERM end it cleanly)."""
    import uvicorn  # lazy: the HTTP server, only `prereg mcp serve --http`

    config = uvicorn.Config(
        build_app(servers, host), log_level="warning", lifespan="off", access_log=False
    )
    uvicorn.Server(config).run(sockets=[sock])


def _is_parse_error(answer: bytes) -> bool:
    try:
        decoded = json.loads(answer)
    except ValueError:
        return False
    return isinstance(decoded, dict) and decoded.get("error", {}).get("code") == PARSE_ERROR
