"""A local fake of both providers, for the real ``anthropic`` and ``openai`` SDK clients.

An in-process HTTP/1.1 server on 127.0.0.1 (a free port, a daemon thread) that
speaks the wire formats the drivers use:

- Anthropic: ``POST /v1/messages``; Message Batches (``POST /v1/messages/batches``,
  ``GET /v1/messages/batches/{id}``, results as JSONL from the batch's absolute
  ``results_url``);
- OpenAI: ``POST /v1/responses``; Files (``POST /v1/files`` multipart,
  ``GET /v1/files/{id}/content``) and the Batch API (``POST /v1/batches``,
  ``GET /v1/batches/{id}``) over ``/v1/responses``.

What a model request gets back is, in order: the next scripted reply for that
provider (``script``), else the answer of ``brain`` (a small deterministic agent:
it calls the first offered tool with arguments made from the schema, then
answers with text). Fault injection: ``rate_limit_every`` (every Nth model
request is a 429 with ``retry-after-ms``, at most once per distinct request, so a
retry gets through), scripted 5xx replies, error bodies
that echo the key the client sent (as careless servers do) so redaction is
exercised, and hostile replies (:func:`echo_key`) that echo the bare key in a tool
name, a call id, or a field whose reading fails with a plain ``ValueError``. In a
scripted reply ``{KEY}`` becomes the credential header as sent (``Bearer ...``) and
``{RAW_KEY}`` the bare key. Every request is logged with its headers and JSON body.

A request that names MCP servers (Anthropic ``mcp_servers``, OpenAI ``type: mcp`` tools) is
answered in connector mode (:mod:`tests.providers.fake_connector`): the fake connects to
the servers' URLs with the ``mcp`` client, as a provider does, and answers with the
provider's MCP events; ``connector_log`` keeps what it listed and called.

Nothing here touches the network: the SDKs are pointed at this server through
``ANTHROPIC_BASE_URL`` / ``OPENAI_BASE_URL`` or ``base_url``.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.parser import BytesParser
from email.policy import default as email_policy
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prereg.runners.drivers.base import CutAtCap, Exchange, FinalAnswer, ToolResult
from tests.providers import fake_connector


@dataclass
class Reply:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes | None = None


@dataclass
class Seen:
    at: float
    method: str
    path: str
    headers: dict[str, str]
    body: Any


# ---- wire builders ----------------------------------------------------------------------------


def anthropic_usage(
    input_tokens: int = 120,
    output_tokens: int = 30,
    *,
    cache_read: int = 0,
    thinking: int | None = None,
) -> dict[str, Any]:
    usage: dict[str, Any] = {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cache_read_input_tokens": cache_read,
        "cache_creation_input_tokens": 0,
    }
    if thinking is not None:
        usage["output_tokens_details"] = {"thinking_tokens": thinking}
    return usage


def anthropic_message(
    content: list[dict[str, Any]],
    *,
    model: str = "claude-test",
    stop_reason: str = "end_turn",
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "id": f"msg_{next(_ids)}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage or anthropic_usage(),
    }


def anthropic_text(text: str, **kw: Any) -> dict[str, Any]:
    return anthropic_message([{"type": "text", "text": text}], **kw)


def anthropic_tool_use(
    name: str, arguments: Any, *, call_id: str | None = None, text: str = "", **kw: Any
) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content.append(
        {
            "type": "tool_use",
            "id": call_id or f"toolu_{next(_ids)}",
            "name": name,
            "input": arguments,
        }
    )
    kw.setdefault("stop_reason", "tool_use")
    return anthropic_message(content, **kw)


def anthropic_error(status: int, kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def openai_usage(
    input_tokens: int = 150, output_tokens: int = 40, *, cached: int = 0, reasoning: int = 0
) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": input_tokens + output_tokens,
    }


def openai_response(
    output: list[dict[str, Any]],
    *,
    model: str = "gpt-test",
    status: str = "completed",
    incomplete: str | None = None,
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "id": f"resp_{next(_ids)}",
        "object": "response",
        "created_at": time.time(),
        "status": status,
        "model": model,
        "output": output,
        "error": None,
        "incomplete_details": {"reason": incomplete} if incomplete else None,
        "parallel_tool_calls": False,
        "tool_choice": "auto",
        "tools": [],
        "usage": usage or openai_usage(),
    }


def openai_message_item(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": f"msg_{next(_ids)}",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def openai_call_item(
    name: str, arguments: str, *, call_id: str | None = None, namespace: str | None = None
) -> dict[str, Any]:
    item = {
        "type": "function_call",
        "id": f"fc_{next(_ids)}",
        "call_id": call_id or f"call_{next(_ids)}",
        "name": name,
        "arguments": arguments,
        "status": "completed",
    }
    if namespace:
        item["namespace"] = namespace
    return item


def openai_text(text: str, **kw: Any) -> dict[str, Any]:
    return openai_response([openai_message_item(text)], **kw)


def openai_error(message: str, kind: str = "server_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


_ids = itertools.count(1)


# ---- the default agent ------------------------------------------------------------------------


def _value(schema: dict[str, Any]) -> Any:
    kind = schema.get("type")
    if "enum" in schema and schema["enum"]:
        return schema["enum"][0]
    if kind == "integer":
        return int(schema.get("minimum", 1))
    if kind == "number":
        return float(schema.get("minimum", 1))
    if kind == "boolean":
        return True
    if kind == "array":
        return []
    if kind == "object":
        return {}
    return "x"


def arguments_for(schema: dict[str, Any]) -> dict[str, Any]:
    props = schema.get("properties") or {}
    return {name: _value(props.get(name) or {}) for name in schema.get("required") or []}


def stable(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


@dataclass
class Brain:
    """The default agent: one tool call, then an answer; some prompts are cut at the cap.

    ``suffix`` is appended to the requested model (the returned model differs);
    a prompt is cut when ``stable(prompt) % cut_every == 0`` (0: never).
    """

    suffix: str = "-20991231"
    cut_every: int = 0

    def _cut(self, prompt: str) -> bool:
        return self.cut_every > 0 and stable(prompt) % self.cut_every == 0

    def anthropic(self, body: dict[str, Any]) -> dict[str, Any]:
        model = str(body.get("model")) + self.suffix
        messages = body.get("messages") or []
        prompt = messages[0]["content"] if messages else ""
        cap = int(body.get("max_tokens") or 0)
        if self._cut(str(prompt)):
            return anthropic_text(
                "I will look that up and then",
                model=model,
                stop_reason="max_tokens",
                usage=anthropic_usage(200, cap),
            )
        last = messages[-1] if messages else {}
        answered = isinstance(last.get("content"), list) and any(
            b.get("type") == "tool_result" for b in last["content"]
        )
        tools = [t for t in body.get("tools") or [] if "input_schema" in t]
        if answered or not tools:
            return anthropic_text(
                "Here is what I found.", model=model, usage=anthropic_usage(260, 12)
            )
        tool = tools[0]
        return anthropic_tool_use(
            tool["name"],
            arguments_for(tool["input_schema"]),
            model=model,
            usage=anthropic_usage(220, 25),
        )

    def openai(self, body: dict[str, Any]) -> dict[str, Any]:
        model = str(body.get("model")) + self.suffix
        items = body.get("input") or []
        prompt = items[0].get("content", "") if items else ""
        cap = int(body.get("max_output_tokens") or 0)
        if self._cut(str(prompt)):
            return openai_response(
                [openai_message_item("I will look that up and")],
                model=model,
                status="incomplete",
                incomplete="max_output_tokens",
                usage=openai_usage(210, cap, reasoning=cap // 2),
            )
        answered = any(i.get("type") == "function_call_output" for i in items)
        functions: list[tuple[str | None, dict[str, Any]]] = []
        for tool in body.get("tools") or []:
            if tool.get("type") == "namespace":
                functions += [(tool["name"], t) for t in tool.get("tools") or []]
            elif tool.get("type") == "function":
                functions.append((None, tool))
        if answered or not functions:
            return openai_text("Here is what I found.", model=model, usage=openai_usage(280, 14))
        namespace, fn = functions[0]
        return openai_response(
            [
                openai_call_item(
                    fn["name"],
                    json.dumps(arguments_for(fn.get("parameters") or {})),
                    namespace=namespace,
                )
            ],
            model=model,
            usage=openai_usage(230, 28, reasoning=8),
        )


# ---- the server -------------------------------------------------------------------------------


class FakeProviders:
    """Start with ``with FakeProviders() as fake:``; see the module docstring."""

    def __init__(
        self,
        brain: Brain | None = None,
        *,
        rate_limit_every: int = 0,
        retry_after_ms: int = 20,
        batch_polls: int = 2,
        latency_s: float = 0.0,
    ) -> None:
        self.brain = brain or Brain()
        self.latency_s = latency_s
        self.rate_limit_every = rate_limit_every
        self.retry_after_ms = retry_after_ms
        self.batch_polls = batch_polls
        self.scripts: dict[str, deque[Reply | Callable[[dict[str, Any]], Reply]]] = {
            "anthropic": deque(),
            "openai": deque(),
        }
        self.seen: list[Seen] = []
        self.model_requests = 0
        self.rate_limited = 0
        self.anthropic_batches: dict[str, dict[str, Any]] = {}
        self.openai_batches: dict[str, dict[str, Any]] = {}
        self.files: dict[str, bytes] = {}
        #: custom ids whose batch request errors (both providers)
        self.batch_errors: set[str] = set()
        #: a hostile endpoint's batch ids (None: the provider's usual prefix)
        self.batch_id_prefix: str | None = None
        #: override the origin of Anthropic results_url (to test the same-origin check)
        self.results_origin: str | None = None
        #: connector mode (tests/providers/fake_connector.py): the MCP servers the fake
        #: visited as a provider would; ``anthropic_listing`` adds mcp_tool_listing blocks
        self.connector_log = fake_connector.ConnectorLog()
        self.anthropic_listing = False
        self._limited: set[str] = set()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ---- lifecycle ------------------------------------------------------------------------

    def __enter__(self) -> FakeProviders:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return

            def _handle(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                reply = fake.handle(
                    self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, raw
                )
                data = reply.raw if reply.raw is not None else json.dumps(reply.body).encode()
                self.send_response(reply.status)
                content_type = (
                    "application/octet-stream" if reply.raw is not None else "application/json"
                )
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(data)))
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            do_GET = _handle  # noqa: N815
            do_POST = _handle  # noqa: N815

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = self._thread = None

    @property
    def origin(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def anthropic_url(self) -> str:
        return self.origin

    @property
    def openai_url(self) -> str:
        return self.origin + "/v1"

    def script(self, provider: str, *replies: Reply | Callable[[dict[str, Any]], Reply]) -> None:
        self.scripts[provider].extend(replies)

    def model_bodies(self, provider: str) -> list[dict[str, Any]]:
        path = "/v1/messages" if provider == "anthropic" else "/v1/responses"
        return [s.body for s in self.seen if s.path.split("?", 1)[0] == path and s.method == "POST"]

    # ---- routing --------------------------------------------------------------------------

    def handle(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Reply:
        body: Any = None
        if raw and "multipart/form-data" not in headers.get("content-type", ""):
            try:
                body = json.loads(raw)
            except json.JSONDecodeError:
                body = raw.decode(errors="replace")
        with self._lock:
            self.seen.append(Seen(time.monotonic(), method, path, headers, body))
        path = path.split("?", 1)[0]
        if method == "POST" and path == "/v1/messages":
            return self._model("anthropic", headers, body)
        if method == "POST" and path == "/v1/responses":
            return self._model("openai", headers, body)
        if path.startswith("/v1/messages/batches"):
            return self._anthropic_batches(method, path, body)
        if method == "POST" and path == "/v1/files":
            return self._upload(headers, raw)
        if method == "GET" and path.startswith("/v1/files/") and path.endswith("/content"):
            file_id = path.split("/")[3]
            return Reply(200, None, raw=self.files[file_id])
        if path.startswith("/v1/batches"):
            return self._openai_batches(method, path, body)
        return Reply(404, {"error": {"message": f"no route {method} {path}"}})

    def _key(self, headers: dict[str, str]) -> str:
        return headers.get("x-api-key") or headers.get("authorization", "")

    def _model(self, provider: str, headers: dict[str, str], body: dict[str, Any]) -> Reply:
        if self.latency_s:
            time.sleep(self.latency_s)
        with self._lock:
            self.model_requests += 1
            count = self.model_requests
            scripted = self.scripts[provider].popleft() if self.scripts[provider] else None
        if scripted is not None:
            reply = scripted(body) if callable(scripted) else scripted
            if isinstance(reply.body, dict):
                key = self._key(headers)
                raw_key = key.removeprefix("Bearer ").strip()
                text = json.dumps(reply.body).replace("{RAW_KEY}", raw_key)
                text = text.replace("{KEY}", key)
                reply = Reply(reply.status, json.loads(text), reply.headers, reply.raw)
            return reply
        if self.rate_limit_every and count % self.rate_limit_every == 0:
            digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
            with self._lock:
                first_time = digest not in self._limited  # a retried request gets through
                self._limited.add(digest)
                self.rate_limited += first_time
            if first_time:
                return rate_limited(provider, self.retry_after_ms)
        if fake_connector.is_connector(provider, body):
            return Reply(200, self._connector(provider, body))
        answer = self.brain.anthropic(body) if provider == "anthropic" else self.brain.openai(body)
        return Reply(200, answer)

    def _connector(self, provider: str, body: dict[str, Any]) -> dict[str, Any]:
        """The provider's side of an MCP connector request (fake_connector.py)."""
        model = str(body.get("model")) + self.brain.suffix
        if provider == "anthropic":
            return fake_connector.anthropic_reply(
                body, self.connector_log, model=model, listing=self.anthropic_listing
            )
        return fake_connector.openai_reply(body, self.connector_log, model=model)

    # ---- Anthropic batches ----------------------------------------------------------------

    def _anthropic_batch_view(self, batch: dict[str, Any]) -> dict[str, Any]:
        n = len(batch["requests"])
        ended = batch["polls"] >= self.batch_polls
        errored = sum(1 for r in batch["requests"] if r["custom_id"] in self.batch_errors)
        origin = self.results_origin or self.origin
        created = datetime.now(UTC)
        return {
            "id": batch["id"],
            "type": "message_batch",
            "processing_status": "ended" if ended else "in_progress",
            "request_counts": {
                "processing": 0 if ended else n,
                "succeeded": n - errored if ended else 0,
                "errored": errored if ended else 0,
                "canceled": 0,
                "expired": 0,
            },
            "created_at": created.isoformat(),
            "expires_at": (created + timedelta(hours=24)).isoformat(),
            "ended_at": created.isoformat() if ended else None,
            "archived_at": None,
            "cancel_initiated_at": None,
            "results_url": f"{origin}/v1/messages/batches/{batch['id']}/results" if ended else None,
        }

    def _anthropic_batches(self, method: str, path: str, body: Any) -> Reply:
        parts = path.strip("/").split("/")  # v1 messages batches [id] [results]
        if method == "POST" and len(parts) == 3:
            batch_id = f"{self.batch_id_prefix or 'msgbatch_'}{next(_ids):04d}"
            self.anthropic_batches[batch_id] = {
                "id": batch_id,
                "requests": body["requests"],
                "polls": 0,
            }
            return Reply(200, self._anthropic_batch_view(self.anthropic_batches[batch_id]))
        batch = self.anthropic_batches.get(parts[3]) if len(parts) > 3 else None
        if batch is None:
            return Reply(404, anthropic_error(404, "not_found_error", "no such batch"))
        if len(parts) == 4:
            batch["polls"] += 1
            return Reply(200, self._anthropic_batch_view(batch))
        lines = []
        for request in batch["requests"]:
            if request["custom_id"] in self.batch_errors:
                result: dict[str, Any] = {
                    "type": "errored",
                    "error": {
                        "type": "error",
                        "error": {
                            "type": "invalid_request_error",
                            "message": "scripted batch error",
                        },
                    },
                }
            else:
                result = {"type": "succeeded", "message": self.brain.anthropic(request["params"])}
            lines.append(json.dumps({"custom_id": request["custom_id"], "result": result}))
        return Reply(200, None, raw=("\n".join(lines) + "\n").encode())

    # ---- OpenAI files and batches ---------------------------------------------------------

    def _upload(self, headers: dict[str, str], raw: bytes) -> Reply:
        message = BytesParser(policy=email_policy).parsebytes(
            b"content-type: " + headers["content-type"].encode() + b"\r\n\r\n" + raw
        )
        content = b""
        purpose = ""
        filename = "upload"
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            payload = part.get_payload(decode=True)
            data = payload if isinstance(payload, bytes) else b""
            if name == "file":
                content = data
                filename = part.get_filename() or filename
            elif name == "purpose":
                purpose = data.decode()
        file_id = f"file-{next(_ids):04d}"
        self.files[file_id] = content
        return Reply(
            200,
            {
                "id": file_id,
                "object": "file",
                "bytes": len(content),
                "created_at": int(time.time()),
                "filename": filename,
                "purpose": purpose,
                "status": "processed",
            },
        )

    def _openai_batch_view(self, batch: dict[str, Any]) -> dict[str, Any]:
        lines = batch["lines"]
        ended = batch["polls"] >= self.batch_polls
        view = {
            "id": batch["id"],
            "object": "batch",
            "endpoint": batch["endpoint"],
            "input_file_id": batch["input_file_id"],
            "completion_window": "24h",
            "status": "completed" if ended else "in_progress",
            "created_at": int(time.time()),
            "request_counts": {
                "total": len(lines),
                "completed": len(lines) if ended else 0,
                "failed": 0,
            },
        }
        if ended and "output_file_id" not in batch:
            out, err = [], []
            for line in lines:
                cid = line["custom_id"]
                if cid in self.batch_errors:
                    err.append(
                        {
                            "id": f"batch_req_{next(_ids)}",
                            "custom_id": cid,
                            "response": {
                                "status_code": 400,
                                "request_id": "req",
                                "body": openai_error(
                                    "scripted batch error", "invalid_request_error"
                                ),
                            },
                            "error": None,
                        }
                    )
                    continue
                out.append(
                    {
                        "id": f"batch_req_{next(_ids)}",
                        "custom_id": cid,
                        "response": {
                            "status_code": 200,
                            "request_id": "req",
                            "body": self.brain.openai(line["body"]),
                        },
                        "error": None,
                    }
                )
            batch["output_file_id"] = f"file-{next(_ids):04d}"
            self.files[batch["output_file_id"]] = "".join(
                json.dumps(o) + "\n" for o in out
            ).encode()
            if err:
                batch["error_file_id"] = f"file-{next(_ids):04d}"
                self.files[batch["error_file_id"]] = "".join(
                    json.dumps(e) + "\n" for e in err
                ).encode()
        if ended:
            view["output_file_id"] = batch["output_file_id"]
            view["error_file_id"] = batch.get("error_file_id")
        return view

    def _openai_batches(self, method: str, path: str, body: Any) -> Reply:
        parts = path.strip("/").split("/")  # v1 batches [id]
        if method == "POST" and len(parts) == 2:
            content = self.files[body["input_file_id"]].decode()
            lines = [json.loads(line) for line in content.splitlines() if line.strip()]
            batch_id = f"{self.batch_id_prefix or 'batch_'}{next(_ids):04d}"
            self.openai_batches[batch_id] = {
                "id": batch_id,
                "lines": lines,
                "polls": 0,
                "endpoint": body["endpoint"],
                "input_file_id": body["input_file_id"],
            }
            return Reply(200, self._openai_batch_view(self.openai_batches[batch_id]))
        batch = self.openai_batches.get(parts[2]) if len(parts) > 2 else None
        if batch is None:
            return Reply(404, openai_error("no such batch", "not_found"))
        batch["polls"] += 1
        return Reply(200, self._openai_batch_view(batch))


def rate_limited(provider: str, retry_after_ms: int) -> Reply:
    headers = {
        "retry-after-ms": str(retry_after_ms),
        "retry-after": str(max(retry_after_ms // 1000, 0)),
    }
    if provider == "anthropic":
        return Reply(429, anthropic_error(429, "rate_limit_error", "rate limited"), headers)
    return Reply(429, openai_error("rate limited", "rate_limit_exceeded"), headers)


def server_error(provider: str, echo_key: bool = True) -> Reply:
    message = "upstream failure for credential {KEY}" if echo_key else "upstream failure"
    if provider == "anthropic":
        return Reply(500, anthropic_error(500, "api_error", message))
    return Reply(500, openai_error(message))


def echo_key(provider: str, where: str) -> Callable[[dict[str, Any]], Reply]:
    """A hostile reply to a model request that echoes the client's bare key back.

    It is the default agent's answer with the key put in ``where``: ``"tool_name"``
    (the call names a tool after the key), ``"call_id"`` (the call goes to the first
    offered tool under a call id carrying the key) or ``"usage"`` (a 200 response whose
    ``input_tokens`` holds the key: reading it raises a plain ``ValueError`` quoting the
    value, an exception that is not the SDK's). Script it on a request that offers tools.
    """

    def reply(body: dict[str, Any]) -> Reply:
        answer = (
            Brain(suffix="").anthropic(body)
            if provider == "anthropic"
            else Brain(suffix="").openai(body)
        )
        if where == "usage":
            answer["usage"]["input_tokens"] = "{RAW_KEY}"
            return Reply(200, answer)
        kind = "tool_use" if provider == "anthropic" else "function_call"
        items = answer["content"] if provider == "anthropic" else answer["output"]
        call = next(i for i in items if i.get("type") == kind)
        if where == "tool_name":
            call["name"] = "{RAW_KEY}"
        elif provider == "anthropic":
            call["id"] = "toolu_{RAW_KEY}"
        else:
            call["call_id"] = "call_{RAW_KEY}"
        return Reply(200, answer)

    return reply


# ---- fixtures (imported by the test modules) --------------------------------------------------

ANTHROPIC_KEY = "tk-ant-secret-9f8e7d6c5b4a39281706"
OPENAI_KEY = "tk-oai-secret-0a1b2c3d4e5f60718293"


def provider_env(monkeypatch: Any, fake: FakeProviders) -> None:
    """Keys, base URLs pointing at ``fake``, and fast retries, in the environment."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.anthropic_url)
    monkeypatch.setenv("OPENAI_BASE_URL", fake.openai_url)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    monkeypatch.setenv("PREREG_MAX_ATTEMPTS", "4")
    monkeypatch.setenv("PREREG_RETRY_BASE_S", "0.001")
    monkeypatch.setenv("PREREG_RETRY_MAX_S", "0.01")
    monkeypatch.setenv("PREREG_TIMEOUT_S", "20")
    monkeypatch.setenv("PREREG_BATCH_POLL_S", "0.01")
    monkeypatch.setenv("PREREG_BATCH_TIMEOUT_S", "20")
    for name in (
        "ANTHROPIC_AUTH_TOKEN",
        "OPENAI_ORG_ID",
        "OPENAI_PROJECT_ID",
        "PREREG_RPM",
        "PREREG_TPM",
        "PREREG_PRICES",
        "ANTHROPIC_CUSTOM_HEADERS",
        "OPENAI_CUSTOM_HEADERS",
    ):
        monkeypatch.delenv(name, raising=False)


def music_tools() -> tuple[Any, ...]:
    from prereg.runners.drivers.base import OfferedTool

    schema = {
        "type": "object",
        "properties": {"query": {"type": "string"}},
        "required": ["query"],
        "additionalProperties": False,
    }
    track = {
        "type": "object",
        "properties": {"track_id": {"type": "string"}},
        "required": ["track_id"],
        "additionalProperties": False,
    }
    return (
        OfferedTool(
            "search_tracks",
            "Search tracks",
            "Search the tracks in the library.",
            schema,
            "Music Library",
            "Tracks, albums and playlists.",
        ),
        OfferedTool(
            "get_track",
            "Get track",
            "Get one track by its id.",
            track,
            "Music Library",
            "Tracks, albums and playlists.",
        ),
        OfferedTool(
            "find_podcast",
            "Find podcast",
            "Find a podcast episode.",
            schema,
            "Castaway Pods",
            "Podcast search by Castaway.",
        ),
    )


def episode(
    prompt: str = "Which songs by Lumen Drift do I have?",
    *,
    cap: int | None = 256,
    label: str = "arm/t001/0",
    tools: tuple[Any, ...] | None = None,
) -> Any:
    from prereg.runners.drivers.base import Episode

    return Episode(
        prompt=prompt,
        tools=music_tools() if tools is None else tools,
        completion_cap=cap,
        model=None,
        params={},
        seed=7,
        prompt_seed=7,
        label=label,
    )


def run(coro: Any) -> Any:
    """Run a driver coroutine with a bound on its time."""
    return asyncio.run(asyncio.wait_for(coro, timeout=30))


async def play(driver: Any, ep: Any, results: list[ToolResult] | None = None) -> list[Any]:
    """Turns until the episode ends, answering each call with the next result."""
    turns: list[Any] = []
    history: list[Exchange] = []
    results = list(results or [])
    try:
        for _ in range(6):
            turn = await driver.next_turn(ep, history)
            turns.append(turn)
            if isinstance(turn.action, FinalAnswer | CutAtCap):
                break
            result = (
                results.pop(0) if results else ToolResult({"items": []}, False, '{"items": []}')
            )
            history.append(Exchange(turn, result))
    finally:
        await driver.aclose()
    return turns
