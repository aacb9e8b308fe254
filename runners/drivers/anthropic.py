"""The Anthropic driver: the Messages API through the official ``anthropic`` SDK.

What is sent (and nothing else):

- ``model`` as registered, ``max_tokens`` = the completion cap, the arm's
  registered system prompt (if any) as ``system``, the user prompt,
  then for each past turn the assistant content exactly as returned and a
  ``tool_result`` for its tool call;
- the arm's tools as client-side tools: name, description, input schema.
  **The Claude API path carries no server metadata**: an MCP server's name and
  description have no field here, so only tool names and descriptions can steer
  selection (InvokeRank, 5.3). The integration a tool belongs to is known to the
  harness, never transmitted;
- ``tool_choice: {type: auto, disable_parallel_tool_use: true}``: one decision
  per turn;
- with ``host.tool_search``: every tool ``defer_loading: true`` plus the tool
  search tool (BM25 by default, regex by setting); the tools named by the
  search's ``tool_reference`` results are the turn's surfaced tools, so Surfaced
  is tool-level on this host;
- the registration's ``host.params`` verbatim (``temperature`` and other
  sampling parameters only reach this point when the registration allows them;
  this SDK has no keyword for them, so they travel as extra body fields).

Under ``host.tool_access: connector`` (:mod:`.connector`, docs/providers.md) no
client-side tools are sent: the request carries ``mcp_servers`` (``type: url``, the
integration's URL on the replay, its name, and ``authorization_token`` only when the
user set one) with one ``mcp_toolset`` per server in ``tools``, under the beta header
:data:`MCP_BETA`, posted as ``beta.messages.create`` posts it. The provider lists and calls the
tools itself; its ``mcp_tool_use`` blocks are the calls, its ``mcp_tool_result`` blocks
their results, and an ``mcp_tool_listing`` block, when the provider returns one, what
it surfaced (none returned: Surfaced is not measured, null).

What is read: the first ``tool_use`` block (a non-object ``input`` is a malformed
call, never repaired), ``stop_reason: max_tokens`` as a cut at the cap, the
``model`` string returned, usage (``input_tokens`` plus cache reads and writes,
``output_tokens`` with ``thinking_tokens`` split out), and ``pause_turn``, which
is continued within the same turn.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
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
from prereg.runners.providers.batch import AnthropicBatches
from prereg.runners.providers.credentials import Provider, api_key, base_url
from prereg.runners.providers.driver import Parsed, Stored, TokenSplit
from prereg.runners.providers.plain import anthropic_message
from prereg.runners.providers.prices import Priced
from prereg.runners.providers.send import Route, post, post_plain

TOOL_SEARCH_TOOLS = {
    "bm25": {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"},
    "regex": {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"},
}
_SEARCH_NAMES = frozenset(t["name"] for t in TOOL_SEARCH_TOOLS.values())
#: The MCP connector's beta (``mcp_servers`` plus ``mcp_toolset`` tools).
MCP_BETA = "mcp-client-2025-11-20"


@cache
def _route() -> Route:
    """Where ``messages.create`` posts and its response type."""
    from anthropic.types import Message  # lazy: the SDK loads at the first request

    return Route("/v1/messages", Message)


@cache
def _beta_route() -> Route:
    """Where ``beta.messages.create`` posts (the connector's route), its type and the
    options it marks a beta request with (the beta header is the client's)."""
    from anthropic.types.beta import BetaMessage  # lazy: the SDK loads at the first request

    return Route("/v1/messages", BetaMessage, {"qualifiers": {"beta": "true"}})


def _block_dict(block: Any) -> dict[str, Any]:
    if isinstance(block, dict):
        return dict(block)
    dumped: dict[str, Any] = block.model_dump(mode="json", exclude_none=True, warnings=False)
    return dumped


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def token_split(usage: Any) -> TokenSplit | None:
    """Anthropic usage in prereg's fields (see :class:`TokenSplit`)."""
    if usage is None:
        return None
    uncached = int(_get(usage, "input_tokens") or 0)
    read = int(_get(usage, "cache_read_input_tokens") or 0)
    written = int(_get(usage, "cache_creation_input_tokens") or 0)
    out = int(_get(usage, "output_tokens") or 0)
    details = _get(usage, "output_tokens_details")
    thinking = _get(details, "thinking_tokens") if details is not None else None
    reasoning = None if thinking is None else min(int(thinking), out)
    recorded = Usage(
        input=uncached + read + written,
        output=out - (reasoning or 0),
        reasoning=reasoning,
        cached=read,
    )
    return TokenSplit(
        recorded, Priced(uncached, read, written, out), uncached + read + written + out
    )


class AnthropicDriver(ConnectorDriver):
    provider: ClassVar[Provider] = "anthropic"
    #: the Claude API path has no field for server metadata: only tools are sent
    server_text = "none"
    #: the request fields the driver sets itself (the registry refuses them at register)
    reserved_params: ClassVar[frozenset[str]] = DRIVERS["anthropic"].reserved_params

    def _import_sdk(self) -> ModuleType:
        import anthropic  # lazy: the SDK is heavy; imported off the event loop

        return anthropic

    def _make_client(self) -> Any:
        import anthropic  # lazy: the Anthropic SDK is heavy; loaded at the first request

        return anthropic.AsyncAnthropic(
            api_key=api_key("anthropic"),
            base_url=base_url("anthropic"),
            max_retries=0,
            timeout=self.settings.timeout_s,
            open_telemetry=False,
            http_client=self._http_client(anthropic),
            default_headers=None if self.connector is None else {"anthropic-beta": MCP_BETA},
        )

    # ---- request --------------------------------------------------------------------------

    def tools(self, episode: Episode) -> list[dict[str, Any]]:
        """The arm's tools as Anthropic client tools (no server name or description)."""
        out: list[dict[str, Any]] = []
        for tool in episode.tools:
            spec: dict[str, Any] = {
                "name": tool.name,
                "description": tool.description,
                "input_schema": dict(tool.input_schema),
            }
            if self.tool_search:
                spec["defer_loading"] = True
            out.append(spec)
        if self.tool_search and out:
            out.append(dict(TOOL_SEARCH_TOOLS[self.settings.tool_search_variant]))
        return out

    def build_request(
        self,
        episode: Episode,
        history: Sequence[Exchange],
        transcript: Sequence[Stored] | None = None,
    ) -> dict[str, Any]:
        if episode.completion_cap is None:
            raise InfraError(
                "the anthropic driver needs a completion cap (budgets."
                "completion_cap): max_tokens is required by the Messages API"
            )
        messages: list[dict[str, Any]] = [{"role": "user", "content": episode.prompt}]
        for index, exchange in enumerate(history):
            stored = (
                transcript[index] if transcript is not None else _synthesised(exchange.turn, index)
            )
            messages.append({"role": "assistant", "content": stored.items})
            if exchange.result is None:
                continue
            if stored.call_id is not None:
                messages.append(
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "tool_result",
                                "tool_use_id": stored.call_id,
                                "content": exchange.result.text,
                                "is_error": exchange.result.is_error,
                            }
                        ],
                    }
                )
            else:  # no call id to answer (a rebuilt malformed turn): the result as text
                messages.append({"role": "user", "content": exchange.result.text})
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": episode.completion_cap,
            "messages": messages,
        }
        if episode.system is not None:
            body["system"] = episode.system
        tools = self.tool_specs(episode)
        if tools:
            body["tools"] = tools
            body["tool_choice"] = {"type": "auto", "disable_parallel_tool_use": True}
        body.update(self.params)
        return body

    def connector_request(
        self, episode: Episode, servers: Sequence[ConnectorServer]
    ) -> dict[str, Any]:
        """The servers' URLs as ``mcp_servers`` and their toolsets: no client tools."""
        if episode.completion_cap is None:
            raise InfraError(
                "the anthropic driver needs a completion cap (budgets."
                "completion_cap): max_tokens is required by the Messages API"
            )
        token = connector_token()
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": episode.completion_cap,
            "messages": [{"role": "user", "content": episode.prompt}],
            "mcp_servers": [
                {
                    "type": "url",
                    "url": server.url,
                    "name": server.label,
                    **({} if token is None else {"authorization_token": token}),
                }
                for server in servers
            ],
            "tools": [{"type": "mcp_toolset", "mcp_server_name": s.label} for s in servers],
        }
        if episode.system is not None:
            body["system"] = episode.system
        body.update(self.params)
        return body

    def connector_read(self, parsed: Parsed) -> tuple[list[ToolCall], Action]:
        return read_mcp_blocks(parsed.stored.items, parsed.turn.action)

    def _continuation(self, body: dict[str, Any], parsed: Parsed) -> dict[str, Any]:
        messages = list(body["messages"])
        if messages and messages[-1]["role"] == "assistant":
            previous = list(messages[-1]["content"])
            messages[-1] = {"role": "assistant", "content": previous + parsed.stored.items}
        else:
            messages.append({"role": "assistant", "content": parsed.stored.items})
        return {**body, "messages": messages}

    async def _create(self, client: Any, body: dict[str, Any]) -> Any:
        # the body is wire JSON already: posted as ``messages.create`` would post it
        # (see providers/send.py), the reply read as plain data where that is certain
        # (providers/plain.py); the connector's as ``beta.messages.create`` would, typed
        if self.connector is None:
            return await post_plain(client, _route(), body, anthropic_message)
        return await post(client, _beta_route(), body)

    # ---- response -------------------------------------------------------------------------

    def parse(self, response: Any, *, batch: bool = False) -> Parsed:
        if self.connector is not None:
            return self._parse_connector(response, batch=batch)
        blocks = [_block_dict(b) for b in (_get(response, "content") or [])]
        stop = _get(response, "stop_reason")
        model_returned = _get(response, "model")
        split = token_split(_get(response, "usage"))
        usage = None if split is None else split.usage
        cost = None if split is None else self.cost(split.billed, model_returned, batch=batch)

        kept: list[dict[str, Any]] = []
        call: dict[str, Any] | None = None
        surfaced: list[str] = []
        searched = False
        for block in blocks:
            kind = block.get("type")
            if kind == "server_tool_use" and block.get("name") in _SEARCH_NAMES:
                searched = True
            if kind == "tool_search_tool_result":
                content = block.get("content") or {}
                for ref in content.get("tool_references") or []:
                    name = ref.get("tool_name")
                    if isinstance(name, str) and name not in surfaced:
                        surfaced.append(name)
            if kind == "tool_use":
                if call is None:
                    call = block
                    kept.append(block)
                continue  # a second call (parallel use was disabled) is dropped
            kept.append(block)
        text = "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")

        call_id: str | None = None
        if stop == "max_tokens":
            action: Action = CutAtCap(
                text=text if call is None else text + json.dumps(call.get("input"), default=str)
            )
        elif stop == "pause_turn":
            action = FinalAnswer(text=text)
        elif stop == "model_context_window_exceeded":
            raise InfraError(
                "anthropic: the request exceeded the model's context window "
                "(stop_reason model_context_window_exceeded)"
            )
        elif call is not None:
            call_id = str(call.get("id") or "")
            arguments = call.get("input")
            if isinstance(arguments, dict):
                action = ToolCall(name=str(call.get("name")), arguments=arguments, call_id=call_id)
            else:
                raw = (
                    arguments if isinstance(arguments, str) else json.dumps(arguments, default=str)
                )
                action = Malformed(text=raw)
                # the transcript must stay a valid request: the unparsable input is sent
                # back as an empty object next to the harness's parse error
                kept = [dict(b, input={}) if b is call else b for b in kept]
        else:
            action = FinalAnswer(text=text)
        turn = Turn(
            action=action,
            usage=usage,
            model_returned=model_returned,
            latency_ms=None,
            cost_usd=cost,
            surfaced=tuple(surfaced) if self.tool_search else None,
            searched=searched if self.tool_search else None,
        )
        return Parsed(
            turn,
            Stored(kept, call_id),
            None if split is None else split.total,
            paused=stop == "pause_turn",
        )

    def _parse_connector(self, response: Any, *, batch: bool) -> Parsed:
        """A connector response: measurements, what was surfaced, every block kept whole
        (the calls are read by :func:`read_mcp_blocks` once the turn is complete)."""
        blocks = [_block_dict(b) for b in (_get(response, "content") or [])]
        stop = _get(response, "stop_reason")
        model_returned = _get(response, "model")
        split = token_split(_get(response, "usage"))
        cost = None if split is None else self.cost(split.billed, model_returned, batch=batch)
        if stop == "model_context_window_exceeded":
            raise InfraError(
                "anthropic: the request exceeded the model's context window "
                "(stop_reason model_context_window_exceeded)"
            )
        listings = [b for b in blocks if b.get("type") == "mcp_tool_listing"]
        surfaced = None
        if listings:
            names = [t.get("name") for b in listings for t in b.get("tools") or []]
            surfaced = tuple(dict.fromkeys(n for n in names if isinstance(n, str)))
        turn = Turn(
            action=CutAtCap() if stop == "max_tokens" else FinalAnswer(""),
            usage=None if split is None else split.usage,
            model_returned=model_returned,
            cost_usd=cost,
            surfaced=surfaced,
        )
        return Parsed(
            turn, Stored(blocks, None), None if split is None else split.total, stop == "pause_turn"
        )

    # ---- batches --------------------------------------------------------------------------

    def batch_backend(self) -> AnthropicBatches:
        return AnthropicBatches(self)


def read_mcp_blocks(
    blocks: Sequence[dict[str, Any]], ended: Action
) -> tuple[list[ToolCall], Action]:
    """The provider's MCP calls, each with its ``mcp_tool_result`` (a call without one
    was not executed as far as the provider reports), and the final action: its text is
    what the model wrote after the last call."""
    results = {b.get("tool_use_id"): b for b in blocks if b.get("type") == "mcp_tool_result"}
    calls: list[ToolCall] = []
    tail: list[str] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "mcp_tool_use":
            call_id = str(block.get("id") or "")
            calls.append(
                ToolCall(
                    name=str(block.get("name")),
                    arguments=block.get("input"),
                    call_id=call_id,
                    host_result=_mcp_result(results.get(call_id)),
                )
            )
            tail = []
        elif kind == "text":
            tail.append(str(block.get("text", "")))
    text = "".join(tail)
    return calls, CutAtCap(text) if isinstance(ended, CutAtCap) else FinalAnswer(text)


def _mcp_result(block: dict[str, Any] | None) -> ToolResult:
    if block is None:
        return ToolResult(None, True, "the provider reported no result for this call")
    text = result_text(block.get("content"))
    is_error = bool(block.get("is_error"))
    return ToolResult(None if is_error or not text else text, is_error, text)


def _synthesised(turn: Turn, index: int) -> Stored:
    """A past turn rebuilt from the protocol's view (used only without a transcript)."""
    action = turn.action
    call_id = f"toolu_prereg_{index:04d}"
    if isinstance(action, ToolCall):
        return Stored(
            [
                {
                    "type": "tool_use",
                    "id": action.call_id or call_id,
                    "name": action.name,
                    "input": action.arguments,
                }
            ],
            action.call_id or call_id,
        )
    if isinstance(action, Malformed):
        return Stored([{"type": "text", "text": action.text}], None)
    text = getattr(action, "text", "")
    return Stored([{"type": "text", "text": text}] if text else [], None)


def create(
    model: str | None = None, params: Mapping[str, Any] | None = None, **options: Any
) -> AnthropicDriver:
    """The Anthropic driver; ``options``: tool_search, allow_sampling, settings, spend,
    prices, http_client_factory (see :class:`ModelDriver`)."""
    return AnthropicDriver(model, params, **options)
