"""The OpenAI driver: the Responses API through the official ``openai`` SDK.

What is sent (and nothing else):

- ``model`` as registered, ``max_output_tokens`` = the completion cap (it covers
  reasoning tokens too), the arm's registered system prompt (if any) as
  ``instructions``, the user prompt as the first input item, then for each
  past turn the output items exactly as returned (reasoning, tool search and
  function-call items) and a ``function_call_output`` for its call;
- the arm's tools as client-side function tools, **grouped by integration in a
  ``namespace`` that carries the MCP server's name and description**: on the
  OpenAI path the server description is an extra lever an integration has
  (InvokeRank, 5.3), and unlike the Claude path it is transmitted. Tool schemas
  are sent with ``strict: false``, exactly as registered (strict mode would make
  the provider rewrite invalid arguments away, hiding Invoked failures);
- ``tool_choice: auto`` and ``parallel_tool_calls: false``;
- with ``host.tool_search``: every function ``defer_loading: true`` and the
  hosted ``tool_search`` tool; a deferred namespace is visible to the model only
  by its name and description until a search loads it, so the functions of the
  namespaces a ``tool_search_output`` item returns are the turn's surfaced tools
  (Surfaced is server-level on this host);
- the registration's ``host.params`` verbatim (sampling parameters only when the
  registration allows them).

Under ``host.tool_access: connector`` (:mod:`.connector`, docs/providers.md) no
function tools are sent: one remote MCP tool per integration (``type: mcp``, its
``server_label``, ``server_url`` on the replay, ``server_description``, the offered
tool names as ``allowed_tools``, ``require_approval: never``, and ``authorization``
only when the user set a token). The provider lists and calls the tools itself: its
``mcp_list_tools`` items are what it surfaced, its ``mcp_call`` items the calls with
their ``output`` or ``error``.

What is read: the first ``function_call`` (arguments that are not valid JSON, or
JSON that is not an object, are a malformed call, never repaired, as a non-object
``input`` is on the Anthropic path), ``status: incomplete`` with reason
``max_output_tokens`` as a cut at the cap, the ``model`` string returned, usage
(``input_tokens`` with ``cached_tokens``, ``output_tokens`` with
``reasoning_tokens`` split out).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from types import ModuleType
from typing import Any, ClassVar

from prereg.registry.hosts import DRIVERS
from prereg.runners.drivers.base import (
    Action,
    CutAtCap,
    Episode,
    Exchange,
    FinalAnswer,
    InfraError,
    Malformed,
    OfferedTool,
    ToolCall,
    ToolResult,
    Turn,
    Usage,
)
from prereg.runners.drivers.connector import (
    ConnectorDriver,
    ConnectorServer,
    connector_token,
    result_text,
)
from prereg.runners.providers.batch import OpenAIBatches
from prereg.runners.providers.credentials import Provider, api_key, base_url, redact
from prereg.runners.providers.driver import Parsed, Stored, TokenSplit
from prereg.runners.providers.plain import openai_response
from prereg.runners.providers.prices import Priced
from prereg.runners.providers.send import Route, post_plain

_NAMESPACE_CHARS = re.compile(r"[^A-Za-z0-9_-]+")


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


@cache
def _route() -> Route:
    """Where ``responses.create`` posts, its response type and its credentials."""
    from openai.types.responses import Response  # lazy: the SDK loads at the first request

    return Route("/responses", Response, {"security": {"bearer_auth": True}})


def _item_dict(item: Any) -> dict[str, Any]:
    if isinstance(item, dict):
        return dict(item)
    dumped: dict[str, Any] = item.model_dump(
        mode="json", exclude_none=True, by_alias=True, warnings=False
    )
    return dumped


def namespace_name(integration: str, taken: set[str]) -> str:
    """A namespace name for an integration (letters, digits, _ and -; unique)."""
    base = _NAMESPACE_CHARS.sub("_", integration).strip("_")[:60] or "server"
    name, n = base, 2
    while name in taken:
        name = f"{base}_{n}"
        n += 1
    taken.add(name)
    return name


def token_split(usage: Any) -> TokenSplit | None:
    """OpenAI usage in prereg's fields (see :class:`TokenSplit`)."""
    if usage is None:
        return None
    total_in = int(_get(usage, "input_tokens") or 0)
    in_details = _get(usage, "input_tokens_details")
    cached = int(_get(in_details, "cached_tokens") or 0) if in_details is not None else 0
    written = int(_get(in_details, "cache_write_tokens") or 0) if in_details is not None else 0
    cached = min(cached, total_in)
    written = min(written, total_in - cached)
    out = int(_get(usage, "output_tokens") or 0)
    out_details = _get(usage, "output_tokens_details")
    raw_reasoning = _get(out_details, "reasoning_tokens") if out_details is not None else None
    reasoning = None if raw_reasoning is None else min(int(raw_reasoning), out)
    recorded = Usage(
        input=total_in, output=out - (reasoning or 0), reasoning=reasoning, cached=cached
    )
    return TokenSplit(
        recorded, Priced(total_in - cached - written, cached, written, out), total_in + out
    )


class OpenAIDriver(ConnectorDriver):
    provider: ClassVar[Provider] = "openai"
    #: the host path transmits each MCP server's name and description (a namespace)
    server_text = "name_and_description"
    #: the remote MCP tool carries a label and a description too
    connector_server_text = "name_and_description"
    #: the request fields the driver sets itself (the registry refuses them at register)
    reserved_params: ClassVar[frozenset[str]] = DRIVERS["openai"].reserved_params

    def _import_sdk(self) -> ModuleType:
        import openai  # lazy: the SDK is heavy; imported off the event loop

        return openai

    def _make_client(self) -> Any:
        import openai  # lazy: the OpenAI SDK is heavy; loaded at the first request

        return openai.AsyncOpenAI(
            api_key=api_key("openai"),
            base_url=base_url("openai"),
            max_retries=0,
            timeout=self.settings.timeout_s,
            http_client=self._http_client(openai),
        )

    # ---- request --------------------------------------------------------------------------

    def _function(self, tool: OfferedTool) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "type": "function",
            "name": tool.name,
            "description": tool.description,
            "parameters": dict(tool.input_schema),
            "strict": False,
        }
        if self.tool_search:
            spec["defer_loading"] = True
        return spec

    def tools(self, episode: Episode) -> list[dict[str, Any]]:
        """One namespace per integration, in offered order, with its description."""
        groups: dict[str, list[OfferedTool]] = {}
        descriptions: dict[str, str] = {}
        for tool in episode.tools:
            groups.setdefault(tool.integration, []).append(tool)
            descriptions.setdefault(tool.integration, tool.integration_description)
        taken: set[str] = set()
        out: list[dict[str, Any]] = []
        for integration, members in groups.items():
            out.append(
                {
                    "type": "namespace",
                    "name": namespace_name(integration, taken),
                    "description": descriptions[integration] or integration,
                    "tools": [self._function(t) for t in members],
                }
            )
        if self.tool_search and out:
            out.append({"type": "tool_search"})
        return out

    def build_request(
        self,
        episode: Episode,
        history: Sequence[Exchange],
        transcript: Sequence[Stored] | None = None,
    ) -> dict[str, Any]:
        items: list[dict[str, Any]] = [{"role": "user", "content": episode.prompt}]
        for index, exchange in enumerate(history):
            stored = (
                transcript[index] if transcript is not None else _synthesised(exchange.turn, index)
            )
            items.extend(stored.items)
            if exchange.result is None:
                continue
            if stored.call_id is not None:
                items.append(
                    {
                        "type": "function_call_output",
                        "call_id": stored.call_id,
                        "output": exchange.result.text,
                    }
                )
            else:
                items.append({"role": "user", "content": exchange.result.text})
        body: dict[str, Any] = {"model": self.model, "input": items}
        if episode.system is not None:
            body["instructions"] = episode.system
        if episode.completion_cap is not None:
            body["max_output_tokens"] = episode.completion_cap
        tools = self.tool_specs(episode)
        if tools:
            body["tools"] = tools
            body["tool_choice"] = "auto"
            body["parallel_tool_calls"] = False
        body.update(self.params)
        return body

    def connector_request(
        self, episode: Episode, servers: Sequence[ConnectorServer]
    ) -> dict[str, Any]:
        """One remote MCP tool per integration: the provider calls the replay itself."""
        token = connector_token()
        tools = [
            {
                "type": "mcp",
                "server_label": server.label,
                "server_url": server.url,
                "server_description": server.description or server.integration,
                "allowed_tools": list(server.tools),
                "require_approval": "never",
                **({} if token is None else {"authorization": token}),
            }
            for server in servers
        ]
        body: dict[str, Any] = {
            "model": self.model,
            "input": [{"role": "user", "content": episode.prompt}],
            "tools": tools,
            "tool_choice": "auto",
            "parallel_tool_calls": False,
        }
        if episode.system is not None:
            body["instructions"] = episode.system
        if episode.completion_cap is not None:
            body["max_output_tokens"] = episode.completion_cap
        body.update(self.params)
        return body

    def connector_read(self, parsed: Parsed) -> tuple[list[ToolCall], Action]:
        return read_mcp_items(parsed.stored.items, parsed.turn.action)

    async def _create(self, client: Any, body: dict[str, Any]) -> Any:
        # the body is wire JSON already: posted as ``responses.create`` would post it,
        # without the SDK's per-request typed transformation (see providers/send.py); the
        # reply read as plain data where that is certain (providers/plain.py)
        return await post_plain(client, _route(), body, openai_response)

    # ---- response -------------------------------------------------------------------------

    def parse(self, response: Any, *, batch: bool = False) -> Parsed:
        status = _get(response, "status")
        model_returned = _get(response, "model")
        split = token_split(_get(response, "usage"))
        usage = None if split is None else split.usage
        cost = None if split is None else self.cost(split.billed, model_returned, batch=batch)
        if status == "failed":
            error = _get(response, "error")
            message = _get(error, "message") if error is not None else None
            raise InfraError(redact(f"openai: the response failed: {message or 'no detail'}"))

        items = [_item_dict(i) for i in (_get(response, "output") or [])]
        details = _get(response, "incomplete_details")
        reason = _get(details, "reason") if details is not None else None
        if self.connector is not None:
            ended, _ = _action(status, reason, None, "")
            turn = Turn(
                action=ended,
                usage=usage,
                model_returned=model_returned,
                cost_usd=cost,
                surfaced=_listed(items),
            )
            return Parsed(turn, Stored(items, None), None if split is None else split.total)
        output = _read_output(items)
        action, call_id = _action(status, reason, output.call, output.text)
        turn = Turn(
            action=action,
            usage=usage,
            model_returned=model_returned,
            latency_ms=None,
            cost_usd=cost,
            surfaced=tuple(output.surfaced) if self.tool_search else None,
            searched=output.searched if self.tool_search else None,
        )
        return Parsed(turn, Stored(output.kept, call_id), None if split is None else split.total)

    # ---- batches --------------------------------------------------------------------------

    def batch_backend(self) -> OpenAIBatches:
        return OpenAIBatches(self)


@dataclass
class _Output:
    """What a response's output items say: the items to send back, the first call, the
    tools a search surfaced, whether the host searched, and its text."""

    kept: list[dict[str, Any]] = field(default_factory=list)
    call: dict[str, Any] | None = None
    surfaced: list[str] = field(default_factory=list)
    searched: bool = False
    texts: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(self.texts)


def _read_output(items: list[dict[str, Any]]) -> _Output:
    """Read the output items in order; a second function call (parallel calls were
    disabled) is dropped from what is sent back."""
    out = _Output()
    for item in items:
        kind = item.get("type")
        if kind == "tool_search_call":
            out.searched = True
        elif kind == "tool_search_output":
            _add_surfaced(item, out.surfaced)
        elif kind == "message":
            out.texts.extend(_message_texts(item))
        elif kind == "function_call":
            if out.call is None:
                out.call = item
                out.kept.append(item)
            continue
        out.kept.append(item)
    return out


def _add_surfaced(item: dict[str, Any], surfaced: list[str]) -> None:
    """The functions of every namespace (or the lone functions) a tool search loaded."""
    for loaded in item.get("tools") or []:
        names = (
            [t.get("name") for t in loaded.get("tools") or []]
            if loaded.get("type") == "namespace"
            else [loaded.get("name")]
        )
        for name in names:
            if isinstance(name, str) and name not in surfaced:
                surfaced.append(name)


def _message_texts(item: dict[str, Any]) -> list[str]:
    """The output text and refusal parts of a message item, in order."""
    texts: list[str] = []
    for part in item.get("content") or []:
        if part.get("type") == "output_text":
            texts.append(str(part.get("text", "")))
        elif part.get("type") == "refusal":
            texts.append(str(part.get("refusal", "")))
    return texts


def _action(
    status: Any, reason: Any, call: dict[str, Any] | None, text: str
) -> tuple[Action, str | None]:
    """The turn's action and its call id: a cut at the cap, a tool call (malformed when
    its arguments are not a JSON object), or the final answer; any other incomplete response is
    an infrastructure error."""
    if status == "incomplete" and reason == "max_output_tokens":
        return CutAtCap(text=text if call is None else text + str(call.get("arguments", ""))), None
    if status == "incomplete" and reason != "content_filter":
        raise InfraError(f"openai: the response is incomplete (reason {reason!r})")
    if call is None:
        return FinalAnswer(text=text), None
    call_id = str(call.get("call_id") or "")
    raw = call.get("arguments")
    try:
        arguments = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError:
        return Malformed(text=str(raw)), call_id
    if not isinstance(arguments, dict):  # null, a list, a number, a string: no arguments object
        text = raw if isinstance(raw, str) else json.dumps(raw, default=str)
        return Malformed(text=text), call_id
    return ToolCall(name=str(call.get("name")), arguments=arguments, call_id=call_id), call_id


def _listed(items: list[dict[str, Any]]) -> tuple[str, ...] | None:
    """The tools the provider listed from the servers (``mcp_list_tools``); None when it
    reported no listing (not measured)."""
    listings = [i for i in items if i.get("type") == "mcp_list_tools"]
    if not listings:
        return None
    names = [t.get("name") for i in listings for t in i.get("tools") or []]
    return tuple(dict.fromkeys(n for n in names if isinstance(n, str)))


def read_mcp_items(items: list[dict[str, Any]], ended: Action) -> tuple[list[ToolCall], Action]:
    """The provider's ``mcp_call`` items with their output or error, and the final action:
    its text is the messages after the last call. Arguments that are not a JSON object
    are kept as given (the harness records the call as not Invoked)."""
    calls: list[ToolCall] = []
    tail: list[str] = []
    for item in items:
        kind = item.get("type")
        if kind == "mcp_call":
            raw = item.get("arguments")
            try:
                arguments = json.loads(raw) if isinstance(raw, str) else raw
            except json.JSONDecodeError:
                arguments = raw
            calls.append(
                ToolCall(
                    name=str(item.get("name")),
                    arguments=arguments,
                    call_id=str(item.get("id") or ""),
                    host_result=_mcp_result(item),
                )
            )
            tail = []
        elif kind == "message":
            tail.extend(_message_texts(item))
    text = "".join(tail)
    return calls, CutAtCap(text) if isinstance(ended, CutAtCap) else FinalAnswer(text)


def _mcp_result(item: dict[str, Any]) -> ToolResult:
    error = item.get("error")
    if error is None:
        output = item.get("output")
        if output is None:
            return ToolResult(None, True, "the provider reported no output for this call")
        text = str(output)
        return ToolResult(text or None, False, text)
    if not isinstance(error, dict):
        return ToolResult(None, True, str(error))
    if error.get("type") == "mcp_tool_execution_error":  # the tool's own error result
        content = error.get("content")
        return ToolResult(None, True, result_text(content) or json.dumps(content, default=str))
    # a protocol or HTTP error: the provider could not complete the call
    detail = error.get("message") or json.dumps(error, default=str)
    return ToolResult(None, True, f"{error.get('type', 'error')}: {detail}")


def _synthesised(turn: Turn, index: int) -> Stored:
    """A past turn rebuilt from the protocol's view (used only without a transcript)."""
    action = turn.action
    if isinstance(action, ToolCall):
        call_id = action.call_id or f"call_prereg_{index:04d}"
        return Stored(
            [
                {
                    "type": "function_call",
                    "call_id": call_id,
                    "name": action.name,
                    "arguments": json.dumps(action.arguments),
                }
            ],
            call_id,
        )
    text = getattr(action, "text", "")
    return Stored([{"role": "assistant", "content": text}] if text else [], None)


def create(
    model: str | None = None, params: Mapping[str, Any] | None = None, **options: Any
) -> OpenAIDriver:
    """The OpenAI driver; ``options``: tool_search, allow_sampling, settings, spend,
    prices, http_client_factory (see :class:`ModelDriver`)."""
    return OpenAIDriver(model, params, **options)
