"""The replay server's protocol core: JSON-RPC in, JSON-RPC out, no transport, no SDK.

Why not the SDK's server: its models drop fields they do not know, reorder keys and
fill in defaults, so what a client received would differ from what was recorded.
Here every result is the recorded JSON object itself, serialised with the key order
it was recorded in, so a client gets the live server's bytes (see the tests).

It speaks the handshake era (``initialize``, protocol revisions up to 2025-11-25),
which is what snapshots record, and negotiates as the live server did: a client asking
for a revision the server accepted at capture time gets that revision, any other the
recorded one (see ``Snapshot.protocol_versions``). ``server/discover`` (the 2026-07-28 probe) gets
"method not found", which the v2 SDK's ``mode="auto"`` client takes as its cue to
fall back to ``initialize``, as it does with any handshake-era server.

Tool calls are refused and never executed. The refusal is a ``CallToolResult`` with
``isError: true`` (not a JSON-RPC error): the protocol reserves JSON-RPC errors for
protocol faults (unknown tool, malformed request), which hosts may retry or treat as
a broken connection, while an ``isError`` result is the channel every host passes back
to the model as "this call did not succeed". Under the seed's funnel that is a call
that was Selected and Invoked but not Executed (Executed needs a non-error result).
Its ``_meta`` carries ``prereg/replay`` so a harness can tell a refusal from a tool's
own error. A call to a name the snapshot does not list gets JSON-RPC -32602, as the
protocol requires of any server. Nothing from the request is echoed back.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prereg.core.errors import BadInput
from prereg.core.safeio import MAX_SNAPSHOT_BYTES, UnreadableFile, escaped, read_regular_file
from prereg.experiments.mcp_snapshot import Snapshot, load_snapshot, snapshot_digest

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
REFUSED = -32010  # implementation-defined band: a replay never reads or executes anything

REFUSAL_META_KEY = "prereg/replay"
REFUSAL_TEXT = (
    "This server is a recorded replay (prereg): tool calls are refused and nothing was executed."
)

Json = Any


def read_snapshot_file(path: str | Path) -> Snapshot:
    """The snapshot in the file at ``path``: a regular file of at most
    :data:`~prereg.core.safeio.MAX_SNAPSHOT_BYTES`, read through
    :func:`~prereg.core.safeio.read_regular_file` (a FIFO, a device, a folder, a file too large:
    exit 2 naming it, never a hang or a machine's memory filled)."""
    try:
        data = read_regular_file(path, limit=MAX_SNAPSHOT_BYTES, what="a snapshot")
    except FileNotFoundError:
        raise BadInput("no such file", file=str(path), field="(file)") from None
    except IsADirectoryError:
        raise BadInput(
            "is a directory, expected a snapshot file", file=str(path), field="(file)"
        ) from None
    except UnreadableFile as exc:
        raise escaped(BadInput(exc.reason, file=str(path), field="(file)")) from None
    return load_snapshot(data, str(path))


def encode(message: Json) -> bytes:
    """Compact UTF-8 JSON, keys in recorded order: the same spelling the SDK's servers use."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


class ReplayServer:
    """Answers the MCP requests of one snapshot. Stateless: one instance serves any client."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.digest = snapshot_digest(snapshot)
        self._initialize = snapshot.initialize_result()
        self._tool_names = frozenset(snapshot.tool_names())
        self._versions = frozenset(snapshot.protocol_versions())
        capabilities = snapshot.capabilities()
        self._logging = "logging" in capabilities
        # cursor -> page index, per list method; the first page has no cursor
        self._pages: dict[str, list[dict[str, Any]]] = {}
        self._cursor_index: dict[str, dict[str, int]] = {}
        self._errors: dict[str, dict[str, Any]] = {}
        for method, recording in snapshot.server.lists.items():
            if recording.error is not None:
                self._errors[method] = recording.error.model_dump(exclude_none=True)
                continue
            pages = snapshot.pages(method) or []
            self._pages[method] = pages
            self._cursor_index[method] = {
                page["nextCursor"]: i + 1 for i, page in enumerate(pages[:-1])
            }

    # -- entry points ---------------------------------------------------------------------
    def handle_bytes(self, data: bytes) -> bytes | None:
        """One framed message (a stdio line or an HTTP body) to its response, if any."""
        try:
            message = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return encode(_error(None, PARSE_ERROR, "Parse error"))
        response = self.handle(message)
        return None if response is None else encode(response)

    def handle(self, message: Json) -> Json | None:
        """A decoded JSON-RPC message (or batch) to its response; None for notifications."""
        if isinstance(message, list):
            if not message:
                return _error(None, INVALID_REQUEST, "Invalid Request")
            answers = [a for a in (self._handle_one(m) for m in message) if a is not None]
            return answers or None
        return self._handle_one(message)

    # -- dispatch -------------------------------------------------------------------------
    def _handle_one(self, message: Json) -> Json | None:
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return _error(_id_of(message), INVALID_REQUEST, "Invalid Request")
        method = message.get("method")
        if method is None and ("result" in message or "error" in message):
            return None  # a response to a request we never send: ignore
        if not isinstance(method, str):
            return _error(_id_of(message), INVALID_REQUEST, "Invalid Request")
        if "id" not in message:
            return None  # notifications (initialized, cancelled, ...) need no answer
        request_id = message["id"]
        if not (
            isinstance(request_id, str)
            or (isinstance(request_id, int) and not isinstance(request_id, bool))
        ):
            return _error(None, INVALID_REQUEST, "Invalid Request")
        params = message.get("params")
        if params is not None and not isinstance(params, dict):
            return _error(request_id, INVALID_PARAMS, "Invalid params")
        return self._answer(request_id, method, params or {})

    def _answer(self, request_id: Json, method: str, params: dict[str, Any]) -> Json:
        if method == "initialize":
            return _result(request_id, self._negotiate(params.get("protocolVersion")))
        if method == "ping":
            return _result(request_id, {})
        if method == "logging/setLevel" and self._logging:
            return _result(request_id, {})  # accepted; a replay never logs anything
        if method in self._errors:
            return {"jsonrpc": "2.0", "id": request_id, "error": self._errors[method]}
        if method in self._pages:
            return self._list_page(request_id, method, params)
        if method == "tools/call":
            return self._refuse_call(request_id, params)
        if method in (
            "prompts/get",
            "resources/read",
            "completion/complete",
            "resources/subscribe",
            "resources/unsubscribe",
        ):
            return _error(
                request_id,
                REFUSED,
                "Refused: this server is a recorded replay and serves only its listings",
            )
        return _error(request_id, METHOD_NOT_FOUND, "Method not found")

    def _negotiate(self, requested: Any) -> dict[str, Any]:
        """The recorded InitializeResult, speaking the client's revision when the live
        server accepted it at capture time (the spec's rule: answer the requested
        version when supported, else another the server supports: the recorded one).
        The key keeps its recorded position, so the bytes differ only in the version."""
        if isinstance(requested, str) and requested in self._versions:
            return {**self._initialize, "protocolVersion": requested}
        return self._initialize

    def _list_page(self, request_id: Json, method: str, params: dict[str, Any]) -> Json:
        cursor = params.get("cursor")
        if cursor is None:
            index = 0
        elif isinstance(cursor, str) and cursor in self._cursor_index[method]:
            index = self._cursor_index[method][cursor]
        else:
            return _error(request_id, INVALID_PARAMS, "Invalid params: unknown cursor")
        return _result(request_id, self._pages[method][index])

    def _refuse_call(self, request_id: Json, params: dict[str, Any]) -> Json:
        name = params.get("name")
        if not isinstance(name, str) or name not in self._tool_names:
            return _error(request_id, INVALID_PARAMS, "Unknown tool")
        return _result(
            request_id,
            {
                "content": [{"type": "text", "text": REFUSAL_TEXT}],
                "isError": True,
                "_meta": {
                    REFUSAL_META_KEY: {"refused": True, "executed": False, "snapshot": self.digest}
                },
            },
        )


def is_refusal(result: dict[str, Any]) -> bool:
    """Whether a ``tools/call`` result is this replay server's refusal (for harnesses)."""
    meta = result.get("_meta") or result.get("meta") or {}
    marker = meta.get(REFUSAL_META_KEY) if isinstance(meta, dict) else None
    return (
        bool(result.get("isError") or result.get("is_error"))
        and isinstance(marker, dict)
        and marker.get("refused") is True
    )


def _result(request_id: Json, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def _error(request_id: Json, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def _id_of(message: Json) -> Json:
    if isinstance(message, dict):
        value = message.get("id")
        if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
            return value
    return None
