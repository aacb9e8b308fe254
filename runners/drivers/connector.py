"""MCP-native hosts (``host.tool_access: connector``): the provider calls the replay itself.

Under ``connector`` the Anthropic and OpenAI drivers send no client-side tools. They give
the provider the URL of each offered integration on the user's replay server (``prereg
mcp serve --http``, reachable from the provider: a public URL the user supplies in
:data:`URL_VARIABLE`), and the provider lists the tools, lets the model call them and
calls the server itself, all inside one response. This module holds what both drivers
share:

- where each integration is served: the replay pool's listing (``GET <url>/servers``)
  gives each member's snapshot digest and path; every integration the unit offers must
  be served under the digest it was registered with (the offered surface's
  ``snapshot_digest``), else the unit fails as infrastructure, naming the integration.
  This is why the URL is not digested: it decides nothing about the result when it
  serves the registered snapshots, and it is checked to;
- the turn structure: one provider response (with its ``pause_turn`` continuations) is
  unrolled into the turns the harness already knows, one :class:`ToolCall` per MCP call
  the provider made (``host_result`` set: the provider's result, so the harness executes
  nothing), then the final answer or the cut at the cap. The request's usage, cost and
  latency ride on the first turn; the unrolled ones carry zeros (no further request),
  so the record's sums are the request's;
- redaction: every string of an unrolled turn, the provider's MCP results included,
  passes :func:`redact` before it leaves the driver, and a response any of whose strings
  (an MCP result's too) still holds a key-shaped string afterwards is refused as an
  infrastructure error rather than stored (:func:`holds_key_prefix`). The optional
  authorization token (:data:`TOKEN_VARIABLE`) is sent to the provider and never stored
  or shown.
"""

from __future__ import annotations

import os
import re
from abc import abstractmethod
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from prereg.core.errors import BadInput
from prereg.registry.hosts import base_url_problem
from prereg.runners.drivers.base import (
    Action,
    Episode,
    Exchange,
    InfraError,
    ToolCall,
    ToolResult,
    Turn,
    Usage,
)
from prereg.runners.providers.credentials import (
    holds_key_prefix,
    redact,
    redact_obj,
    secret_values,
)
from prereg.runners.providers.driver import (
    KEY_PREFIX_REFUSED,
    ModelDriver,
    Parsed,
    _merge,
    episode_key,
    redacted_error,
    redacted_turn,
)

#: The replay server's base URL as the provider reaches it (``prereg mcp serve --http``'s
#: address, or a public tunnel in front of it); read at run time, never digested.
URL_VARIABLE = "PREREG_CONNECTOR_URL"
#: An optional token the provider sends the server (Anthropic ``authorization_token``,
#: OpenAI ``authorization``); never written anywhere.
TOKEN_VARIABLE = "PREREG_CONNECTOR_TOKEN"

_MAX_QUEUES = 4096
_LABEL_CHARS = re.compile(r"[^A-Za-z0-9_-]+")
#: the paths a replay pool serves (``prereg mcp serve --http``): nothing else is followed
_POOL_PATH = re.compile(r"/servers/[0-9]{1,6}/mcp|/mcp")


def connector_url() -> str:
    """The replay's base URL from :data:`URL_VARIABLE` (BadInput naming it, exit 2)."""
    value = os.environ.get(URL_VARIABLE, "").strip()
    if not value:
        raise BadInput(
            f"host.tool_access: connector needs the replay server's URL as the provider "
            f"reaches it (a public URL, e.g. a tunnel to `prereg mcp serve --http`): set "
            f"{URL_VARIABLE}",
            field=URL_VARIABLE,
        )
    problem = base_url_problem(value)
    if problem is not None:
        raise BadInput(f"{URL_VARIABLE}: {problem}", field=URL_VARIABLE)
    return value.rstrip("/")


def connector_token() -> str | None:
    """The token for the replay server, if the user set one (sent, never stored)."""
    return os.environ.get(TOKEN_VARIABLE, "").strip() or None


@dataclass(frozen=True)
class ConnectorServer:
    """One offered integration as the provider is told to reach it."""

    label: str  # the name the provider knows the server by (unique, [A-Za-z0-9_-])
    url: str
    integration: str
    description: str
    tools: tuple[str, ...]


def label_for(integration: str, taken: set[str]) -> str:
    """A server label from an integration's name (letters, digits, _ and -; unique)."""
    base = _LABEL_CHARS.sub("_", integration).strip("_")[:60] or "server"
    name, n = base, 2
    while name in taken:
        name = f"{base}_{n}"
        n += 1
    taken.add(name)
    return name


def pool_paths(listing: Any) -> dict[str, str]:
    """Snapshot digest -> path from the replay's ``GET /servers`` answer (untrusted)."""
    members = listing.get("servers") if isinstance(listing, dict) else None
    if not isinstance(members, list):
        raise ValueError("the answer has no 'servers' list")
    out: dict[str, str] = {}
    for member in members:
        if not isinstance(member, dict):
            continue
        digest, path = member.get("digest"), member.get("path")
        if isinstance(digest, str) and isinstance(path, str) and _POOL_PATH.fullmatch(path):
            out.setdefault(digest, path)
    return out


def require_snapshots(episode: Episode) -> None:
    """InfraError naming the first offered integration a replay cannot serve."""
    for tool in episode.tools:
        if tool.snapshot_digest is None:
            raise InfraError(
                f"connector: integration {tool.integration!r} is not an MCP snapshot offered "
                "as recorded (a surface file, or a control's transformed copy): a replay "
                "server cannot serve it; tool_access: connector needs every offered "
                "integration to be a snapshot"
            )


def servers_for(episode: Episode, base: str, paths: dict[str, str]) -> list[ConnectorServer]:
    """The unit's integrations, in offered order, each at its pool path (InfraError
    naming an integration the pool does not serve under its registered digest)."""
    order: dict[str, list[str]] = {}
    digests: dict[str, str | None] = {}
    descriptions: dict[str, str] = {}
    for tool in episode.tools:
        order.setdefault(tool.integration, []).append(tool.name)
        digests.setdefault(tool.integration, tool.snapshot_digest)
        descriptions.setdefault(tool.integration, tool.integration_description)
    taken: set[str] = set()
    out: list[ConnectorServer] = []
    for integration, tools in order.items():
        digest = digests[integration]
        assert digest is not None  # require_snapshots ran first
        path = paths.get(digest)
        if path is None:
            raise InfraError(
                f"connector: the replay at {URL_VARIABLE} does not serve integration "
                f"{integration!r} (snapshot {digest[:19]}...): serve the registered "
                "snapshots with `prereg mcp serve --http`"
            )
        out.append(
            ConnectorServer(
                label_for(integration, taken),
                base + path,
                integration,
                descriptions[integration],
                tuple(tools),
            )
        )
    return out


def zero_usage(usage: Usage | None) -> Usage | None:
    """Zero where ``usage`` measured something, None where it did not: a turn unrolled
    from a response already counted adds nothing and never makes a sum unmeasured."""
    if usage is None:
        return None
    return Usage(
        input=None if usage.input is None else 0,
        output=None if usage.output is None else 0,
        reasoning=None if usage.reasoning is None else 0,
        cached=None if usage.cached is None else 0,
    )


def unroll(first: Turn, calls: Sequence[ToolCall], final: Action) -> list[Turn]:
    """One response as turns: a turn per call the provider made, then the final action.

    ``first`` carries the request's measurements (usage, cost, latency, retries, what
    was surfaced); every later turn is free (zeros, nothing surfaced).
    """
    later = replace(
        first,
        usage=zero_usage(first.usage),
        cost_usd=None if first.cost_usd is None else 0.0,
        latency_ms=None if first.latency_ms is None else 0.0,
        retries=None if first.retries is None else 0,
        surfaced=None,
    )
    actions: list[Action] = [*calls, final]
    return [replace(first if i == 0 else later, action=a) for i, a in enumerate(actions)]


def redacted(turn: Turn) -> Turn:
    """:func:`redacted_turn`, and the provider's MCP result of a call too: its content and
    text redacted, and refused (:class:`InfraError`, :data:`KEY_PREFIX_REFUSED`, naming the
    reason and not the text) when they still hold a key-shaped string afterwards, as every
    other string of a turn is (:func:`holds_key_prefix`)."""
    turn = redacted_turn(turn)
    action = turn.action
    if isinstance(action, ToolCall) and action.host_result is not None:
        result = action.host_result
        secrets = secret_values()  # read once for the result's strings
        clean = ToolResult(
            redact_obj(result.content, secrets), result.is_error, redact(result.text, secrets)
        )
        if holds_key_prefix([clean.content, clean.text]):
            raise InfraError(KEY_PREFIX_REFUSED)
        turn = replace(turn, action=replace(action, host_result=clean))
    return turn


def result_text(content: Any) -> str:
    """An MCP result's text: a string, or the text of a list of text blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(b.get("text", "")) for b in content if isinstance(b, dict) and "text" in b
        )
    return "" if content is None else str(content)


class Connector:
    """The connector state of one driver: the pool's paths and each episode's turns
    still to hand out (one response unrolled)."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self._paths: dict[str, str] | None = None
        self._queues: dict[str, deque[Turn]] = {}

    async def paths(self, timeout_s: float) -> dict[str, str]:
        """The pool's digest -> path map, read once from ``GET <url>/servers``."""
        if self._paths is None:
            import httpx  # lazy: comes with the SDKs; only a connector run reads the pool

            try:
                async with httpx.AsyncClient(timeout=timeout_s) as client:
                    answer = await client.get(self.url + "/servers")
                    answer.raise_for_status()
                    self._paths = pool_paths(answer.json())
            except (httpx.HTTPError, ValueError) as exc:
                raise InfraError(
                    f"connector: cannot read the replay pool at {URL_VARIABLE} "
                    f"(GET /servers): {type(exc).__name__}"
                ) from None
        return self._paths

    def pending(self, episode: Episode, history: Sequence[Exchange]) -> Turn | None:
        """The next unrolled turn of an episode under way, or None for a fresh one."""
        key = episode_key(episode)
        if not history:
            self._queues.pop(key, None)
            return None
        queue = self._queues.get(key)
        if not queue:
            raise InfraError(
                "connector: the provider's response has no further turn (the harness asked "
                "after the episode's last one)"
            )
        turn = queue.popleft()
        if not queue:
            del self._queues[key]
        return turn

    def start(self, episode: Episode, turns: list[Turn]) -> Turn:
        """Queue an episode's unrolled turns (redacted); the first is returned."""
        clean = [redacted(t) for t in turns]
        if len(clean) > 1:
            self._queues[episode_key(episode)] = deque(clean[1:])
            # an episode the harness stopped early (a limit) never drains its queue
            while len(self._queues) > _MAX_QUEUES:
                del self._queues[next(iter(self._queues))]
        return clean[0]

    def reset(self) -> None:
        self._queues.clear()


_MAX_CONTINUATIONS = 4


class ConnectorDriver(ModelDriver):
    """A provider driver that can also run as an MCP-native host (module docstring).

    Built with ``connector_url`` it sends :meth:`connector_request` bodies and reads
    responses with :meth:`connector_read`; without, it is the client-tools driver,
    unchanged.
    """

    #: what of an integration's server text the connector request carries
    connector_server_text = "name"

    def __init__(
        self,
        model: str | None,
        params: Mapping[str, Any] | None = None,
        *,
        connector_url: str | None = None,
        **options: Any,
    ) -> None:
        super().__init__(model, params, **options)
        self.connector = None if connector_url is None else Connector(connector_url)
        if self.connector is not None:
            # Surfaced is what the provider reports listing (None when it reports nothing)
            self.loads_all_tools = False
            self.server_text = self.connector_server_text

    @abstractmethod
    def connector_request(
        self, episode: Episode, servers: Sequence[ConnectorServer]
    ) -> dict[str, Any]:
        """The request that gives the provider the servers' URLs instead of tools."""

    @abstractmethod
    def connector_read(self, parsed: Parsed) -> tuple[list[ToolCall], Action]:
        """The MCP calls the provider made (with its results) and the final action, from
        a connector response parsed by :meth:`parse` (its items kept whole)."""

    async def next_turn(self, episode: Episode, history: Sequence[Exchange]) -> Turn:
        if self.connector is None:
            return await super().next_turn(episode, history)
        try:
            return await self._connector_turn(self.connector, episode, history)
        except Exception as exc:  # noqa: BLE001 - every failure leaves redacted
            raise redacted_error(exc, self.provider) from None

    async def _connector_turn(
        self, connector: Connector, episode: Episode, history: Sequence[Exchange]
    ) -> Turn:
        pending = connector.pending(episode, history)
        if pending is not None:
            return pending
        require_snapshots(episode)
        paths = await connector.paths(self.settings.timeout_s)
        servers = servers_for(episode, connector.url, paths)
        body = self.connector_request(episode, servers)
        parsed, latency, retries = await self._request(body)
        for _ in range(_MAX_CONTINUATIONS):
            if not parsed.paused:
                break
            body = self._continuation(body, parsed)
            more, more_latency, more_retries = await self._request(body)
            parsed = _merge(parsed, more)
            retries += more_retries
            latency = None if latency is None or more_latency is None else latency + more_latency
        if parsed.paused:
            raise InfraError(
                f"{self.provider} kept pausing the turn ({_MAX_CONTINUATIONS} continuations)"
            )
        calls, final = self.connector_read(parsed)
        first = replace(parsed.turn, latency_ms=latency, retries=retries)
        return connector.start(episode, unroll(first, calls, final))

    async def aclose(self) -> None:
        if self.connector is not None:
            self.connector.reset()
        await super().aclose()
