"""The replay server's protocol core: JSON-RPC in, JSON-RPC out, no transport.

Why not the SDK's server: its models drop fields they do not know, reorder keys and
fill in defaults, so what a client received would differ from what was recorded.
Here every result is the recorded JSON object itself, serialised with the key order
it was recorded in, so a client gets the live server's bytes (see the tests).

Negotiation (issue 43, item 5). A snapshot holds the answers of every protocol revision
the live server negotiated at capture time (:meth:`Snapshot.revisions`): the main
recording serves the revisions in ``protocol_versions`` (all of them in older
snapshots: only the one recorded), and ``server.revisions`` holds each other revision's
own answers. The replay negotiates among these, up to the newest revision the installed
``mcp`` SDK knows (``mcp_types.version``), and for each request answers from the
negotiated revision's recording, so the capabilities, identity, instructions and lists a
client sees are the ones the live server gave a client of that revision. The rule:

* ``initialize`` (handshake era) asking for a recorded handshake revision gets it. For
  any other revision the specification lets a server answer another revision it
  supports; the replay answers the closest recorded one: the newest recorded handshake
  revision older than the one asked for, or, when none is older or the revision is not
  one the SDK knows, the main recording's revision (the server's own default, as
  before). Later requests on the connection are answered at the negotiated revision
  (over HTTP, the ``MCP-Protocol-Version`` header names it; absent or unrecorded: the
  main recording).
* ``server/discover`` and every request carrying the 2026-07-28 per-request envelope
  (``_meta`` protocol version) are checked by the SDK's own validation ladder
  (:func:`mcp.shared.inbound.classify_inbound_request`) against the recorded
  discover-era revisions: a recorded revision is answered from its recording, any other
  gets ``-32022`` naming the recorded ones (the protocol's way to let the client pick).
  A snapshot without a discover-era revision answers ``server/discover`` with "method
  not found", on which current SDK clients (``mode="auto"``) fall back to
  ``initialize``, as they do with any handshake-era server.

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
from prereg.experiments.mcp_snapshot import (
    ListRecording,
    Snapshot,
    load_snapshot,
    snapshot_digest,
)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
REFUSED = -32010  # implementation-defined band: a replay never reads or executes anything

DISCOVER = "server/discover"

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


class _Answers:
    """One revision's recorded answers: the opening result and the list pages."""

    def __init__(self, opening: dict[str, Any], lists: dict[str, ListRecording]) -> None:
        self.opening = opening
        self.capabilities: dict[str, Any] = dict(opening.get("capabilities") or {})
        self.pages: dict[str, list[dict[str, Any]]] = {}
        self.cursor_index: dict[str, dict[str, int]] = {}  # cursor -> page index
        self.errors: dict[str, dict[str, Any]] = {}
        for method, recording in lists.items():
            if recording.error is not None:
                self.errors[method] = recording.error.model_dump(exclude_none=True)
                continue
            pages = [dict(page) for page in recording.pages or []]
            self.pages[method] = pages
            self.cursor_index[method] = {
                page["nextCursor"]: i + 1 for i, page in enumerate(pages[:-1])
            }


class ReplayServer:
    """Answers the MCP requests of one snapshot. Holds no connection state: one instance
    serves any number of clients (:meth:`connection` keeps a stdio connection's)."""

    def __init__(self, snapshot: Snapshot) -> None:
        from mcp_types import PROTOCOL_VERSION_META_KEY  # lazy: the SDK's envelope key
        from mcp_types.version import (  # lazy: the SDK's revision registry
            HANDSHAKE_PROTOCOL_VERSIONS,
            KNOWN_PROTOCOL_VERSIONS,
            MODERN_PROTOCOL_VERSIONS,
        )

        self.snapshot = snapshot
        self.digest = snapshot_digest(snapshot)
        self._known: tuple[str, ...] = tuple(KNOWN_PROTOCOL_VERSIONS)
        self._envelope_key: str = PROTOCOL_VERSION_META_KEY
        self._initialize = snapshot.initialize_result()
        self._recorded = snapshot.protocol_version
        self._tool_names = frozenset(snapshot.tool_names())
        self._main = _Answers(self._initialize, snapshot.server.lists)
        # handshake revision -> its answers; the main recording's revisions share them
        self._handshake: dict[str, _Answers] = {v: self._main for v in snapshot.protocol_versions()}
        self._modern: dict[str, _Answers] = {}
        for version, recording in (snapshot.server.revisions or {}).items():
            answers = _Answers(recording.opening(), recording.lists)
            if recording.initialize is not None and version in HANDSHAKE_PROTOCOL_VERSIONS:
                self._handshake[version] = answers
            elif recording.discover is not None and version in MODERN_PROTOCOL_VERSIONS:
                self._modern[version] = answers
            # a revision the installed SDK does not know is not negotiated
        for version in list(self._handshake):  # up to the newest the SDK knows
            if version != self._recorded and version not in HANDSHAKE_PROTOCOL_VERSIONS:
                del self._handshake[version]
        self._modern_versions = [v for v in MODERN_PROTOCOL_VERSIONS if v in self._modern]

    def negotiable(self) -> list[str]:
        """Every revision this replay negotiates, in the SDK's order (oldest first)."""
        spoken = {*self._handshake, *self._modern}
        return [v for v in self._known if v in spoken] + sorted(spoken - set(self._known))

    def connection(self) -> ReplayConnection:
        """A connection's state (its negotiated handshake revision), for stdio."""
        return ReplayConnection(self)

    # -- entry points ---------------------------------------------------------------------
    def handle_bytes(self, data: bytes, version: str | None = None) -> bytes | None:
        """One framed message (a stdio line or an HTTP body) to its response, if any.
        ``version``: the handshake revision the connection negotiated, when known."""
        try:
            message = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return encode(_error(None, PARSE_ERROR, "Parse error"))
        response = self.handle(message, version)
        return None if response is None else encode(response)

    def handle(self, message: Json, version: str | None = None) -> Json | None:
        """A decoded JSON-RPC message (or batch) to its response; None for notifications."""
        if isinstance(message, list):
            if not message:
                return _error(None, INVALID_REQUEST, "Invalid Request")
            answers = [a for a in (self._handle_one(m, version) for m in message) if a is not None]
            return answers or None
        return self._handle_one(message, version)

    def negotiate(self, requested: Any) -> str:
        """The handshake revision answered to an ``initialize`` asking for ``requested``
        (the rule in the module's docstring)."""
        if isinstance(requested, str) and requested in self._handshake:
            return requested
        if isinstance(requested, str) and requested in self._known:
            asked = self._known.index(requested)
            older = [
                v for v in self._handshake if v in self._known and self._known.index(v) < asked
            ]
            if older:
                return max(older, key=self._known.index)
        return self._recorded

    # -- dispatch -------------------------------------------------------------------------
    def _handle_one(self, message: Json, version: str | None) -> Json | None:
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
        params = params or {}
        if self._modern and method != "initialize" and self._enveloped(params, method):
            return self._answer_modern(request_id, method, params)
        return self._answer(request_id, method, params, version)

    def _enveloped(self, params: dict[str, Any], method: str) -> bool:
        """Whether a request claims the 2026-07-28 era: ``server/discover``, or any request
        whose ``_meta`` carries the per-request protocol version."""
        meta = params.get("_meta")
        return method == DISCOVER or (isinstance(meta, dict) and self._envelope_key in meta)

    def _answer(
        self, request_id: Json, method: str, params: dict[str, Any], version: str | None
    ) -> Json:
        if method == "initialize":
            return _result(request_id, self._negotiate(params.get("protocolVersion")))
        answers = self._handshake.get(version or "", self._main)
        if method == "ping":
            return _result(request_id, {})
        if method == "logging/setLevel" and "logging" in answers.capabilities:
            return _result(request_id, {})  # accepted; a replay never logs anything
        return self._served(request_id, method, params, answers, modern=False)

    def _answer_modern(self, request_id: Json, method: str, params: dict[str, Any]) -> Json:
        from mcp.shared.inbound import (  # lazy: the SDK's 2026-07-28 request ladder
            InboundLadderRejection,
            classify_inbound_request,
        )

        route = classify_inbound_request(
            {"method": method, "params": params}, supported_modern_versions=self._modern_versions
        )
        if isinstance(route, InboundLadderRejection):
            error: dict[str, Any] = {"code": route.code, "message": route.message}
            if route.data is not None:
                error["data"] = route.data
            return {"jsonrpc": "2.0", "id": request_id, "error": error}
        answers = self._modern[route.protocol_version]
        if method == DISCOVER:
            return _result(request_id, dict(answers.opening))
        return self._served(request_id, method, params, answers, modern=True)

    def _served(
        self,
        request_id: Json,
        method: str,
        params: dict[str, Any],
        answers: _Answers,
        *,
        modern: bool,
    ) -> Json:
        if method in answers.errors:
            return {"jsonrpc": "2.0", "id": request_id, "error": answers.errors[method]}
        if method in answers.pages:
            return self._list_page(request_id, method, params, answers)
        if method == "tools/call":
            return self._refuse_call(request_id, params, modern=modern)
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
        """The InitializeResult recorded for the negotiated revision. Where the main
        recording serves it, the version key keeps its recorded position, so the bytes
        differ only in the version."""
        version = self.negotiate(requested)
        answers = self._handshake.get(version, self._main)
        if answers is self._main:
            return {**self._initialize, "protocolVersion": version}
        return dict(answers.opening)

    def _list_page(
        self, request_id: Json, method: str, params: dict[str, Any], answers: _Answers
    ) -> Json:
        cursor = params.get("cursor")
        if cursor is None:
            index = 0
        elif isinstance(cursor, str) and cursor in answers.cursor_index[method]:
            index = answers.cursor_index[method][cursor]
        else:
            return _error(request_id, INVALID_PARAMS, "Invalid params: unknown cursor")
        return _result(request_id, answers.pages[method][index])

    def _refuse_call(self, request_id: Json, params: dict[str, Any], *, modern: bool) -> Json:
        name = params.get("name")
        if not isinstance(name, str) or name not in self._tool_names:
            return _error(request_id, INVALID_PARAMS, "Unknown tool")
        refusal: dict[str, Any] = {
            "content": [{"type": "text", "text": REFUSAL_TEXT}],
            "isError": True,
            "_meta": {
                REFUSAL_META_KEY: {"refused": True, "executed": False, "snapshot": self.digest}
            },
        }
        if modern:  # required on the 2026-07-28 wire
            refusal["resultType"] = "complete"
        return _result(request_id, refusal)


class ReplayConnection:
    """One client's connection (stdio): remembers the handshake revision it negotiated,
    so later requests are answered from that revision's recording."""

    def __init__(self, server: ReplayServer) -> None:
        self.server = server
        self.version: str | None = None

    def handle_bytes(self, data: bytes) -> bytes | None:
        try:
            message = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return encode(_error(None, PARSE_ERROR, "Parse error"))
        response = self.server.handle(message, self.version)
        for request in message if isinstance(message, list) else [message]:
            if isinstance(request, dict) and request.get("method") == "initialize":
                params = request.get("params")
                asked = params.get("protocolVersion") if isinstance(params, dict) else None
                self.version = self.server.negotiate(asked)
        return None if response is None else encode(response)


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
