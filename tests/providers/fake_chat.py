"""A local fake of an OpenAI-compatible Chat Completions server, for the real ``openai`` SDK.

The provider fake (:mod:`tests.providers.fakes`) with one more route,
``POST /v1/chat/completions``, as vLLM, SGLang, llama.cpp's server and Ollama serve it. A
model request gets, in order, the next reply scripted for ``"chat"`` or the answer of
:class:`ChatBrain` (one call of the first offered tool, then a text answer; some prompts
cut at the cap with ``finish_reason: length``), with the fake's usual fault injection
(``rate_limit_every``, scripted 5xx and 429 replies, ``{KEY}`` / ``{RAW_KEY}`` echoed
back). ``reject_field`` makes the server refuse a body carrying that field with a 400
naming it, as servers that know only ``max_tokens`` do with ``max_completion_tokens``.
"""

from __future__ import annotations

import json
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from tests.providers.fakes import (
    Brain,
    FakeProviders,
    Reply,
    Seen,
    arguments_for,
    openai_error,
)

CHAT_PATH = "/v1/chat/completions"

_counter = iter(range(1, 10**9))


def chat_usage(
    prompt: int = 140,
    completion: int = 30,
    *,
    cached: int | None = None,
    reasoning: int | None = None,
) -> dict[str, Any]:
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    if reasoning is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return usage


def chat_completion(
    message: dict[str, Any],
    *,
    model: str = "served-model",
    finish_reason: str = "stop",
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{next(_counter)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}
        ],
        "usage": usage or chat_usage(),
    }


def chat_text(text: str, **kw: Any) -> dict[str, Any]:
    return chat_completion({"role": "assistant", "content": text}, **kw)


def tool_call(name: str, arguments: Any, call_id: str | None = None) -> dict[str, Any]:
    return {
        "id": call_id or f"call_{next(_counter)}",
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def chat_tool_calls(*calls: dict[str, Any], text: str | None = None, **kw: Any) -> dict[str, Any]:
    kw.setdefault("finish_reason", "tool_calls")
    return chat_completion({"role": "assistant", "content": text, "tool_calls": list(calls)}, **kw)


@dataclass
class ChatBrain(Brain):
    """The default agent of :class:`Brain`, answering Chat Completions bodies too."""

    def openai(self, body: dict[str, Any]) -> dict[str, Any]:
        if "messages" not in body:
            return super().openai(body)
        return self.chat(body)

    def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        model = str(body.get("model")) + self.suffix
        messages = body.get("messages") or []
        prompt = next((m["content"] for m in messages if m.get("role") == "user"), "")
        cap = int(body.get("max_completion_tokens") or body.get("max_tokens") or 0)
        if self._cut(str(prompt)):
            return chat_text(
                "I will look that up and",
                model=model,
                finish_reason="length",
                usage=chat_usage(200, cap),
            )
        answered = any(m.get("role") == "tool" for m in messages)
        tools = [t["function"] for t in body.get("tools") or [] if t.get("type") == "function"]
        if answered or not tools:
            return chat_text("Here is what I found.", model=model, usage=chat_usage(260, 12))
        fn = tools[0]
        return chat_tool_calls(
            tool_call(fn["name"], json.dumps(arguments_for(fn.get("parameters") or {}))),
            model=model,
            usage=chat_usage(220, 25, cached=64),
        )


class FakeChat(FakeProviders):
    """Start with ``with FakeChat() as fake:``; see the module docstring."""

    def __init__(
        self, brain: ChatBrain | None = None, *, reject_field: str | None = None, **options: Any
    ) -> None:
        super().__init__(brain or ChatBrain(), **options)
        self.scripts["chat"] = deque()
        self.reject_field = reject_field
        self.rejected = 0

    def __enter__(self) -> FakeChat:
        self.start()
        return self

    def handle(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Reply:
        if method != "POST" or path.split("?", 1)[0] != CHAT_PATH:
            return super().handle(method, path, headers, raw)
        body = json.loads(raw) if raw else {}
        with self._lock:
            self.seen.append(Seen(time.monotonic(), method, path, headers, body))
        if self.reject_field is not None and self.reject_field in body:
            with self._lock:
                self.rejected += 1
            return Reply(400, unsupported(self.reject_field))
        return self._model("chat", headers, body)

    def chat_bodies(self) -> list[dict[str, Any]]:
        return [s.body for s in self.seen if s.path == CHAT_PATH and s.method == "POST"]

    def chat_seen(self) -> list[Seen]:
        return [s for s in self.seen if s.path == CHAT_PATH and s.method == "POST"]


def unsupported(field: str) -> dict[str, Any]:
    """The 400 body of a server that does not accept ``field``."""
    body = openai_error(f"Unsupported parameter: '{field}'", "invalid_request_error")
    body["error"]["param"] = field
    return body
