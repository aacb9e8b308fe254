"""One request through an SDK client's lower-level ``post``, with the body prereg built.

The SDKs' typed methods (``responses.create``, ``chat.completions.create``) run every
request's parameters through the SDK's typed transformation: the TypedDict annotations
walked recursively against the values, the whole tool list included, on every request.
prereg's drivers build the body as wire JSON already (plain dicts, lists and scalars, no
SDK types, no aliased or date fields), so the walk changes nothing, and it cost about half
of the provider path's CPU (issue 15). The drivers send the body through ``client.post``
instead, with the path, response type and request options the typed method passes:
the client still adds the key and its headers, applies its timeout, maps every error
status to the SDK's exception (``RateLimitError`` with its ``retry-after``,
``BadRequestError`` with its ``param``, ...) and parses the reply into the SDK's response
type. Retries stay prereg's (the clients are built with ``max_retries=0``).

The body goes as ``content``: serialised here once, as the SDK's own encoder does (UTF-8,
compact separators, no NaN), because a ``body`` mapping is deep-copied and re-encoded by the
client on every request. Fields the typed method has no keyword for went in ``extra_body``,
which the client merges into the same JSON object; here they are simply part of the body.
Nothing the SDK would send differently: ``tests/providers/test_prov_wire.py`` checks that
the body and headers a fake server receives are the typed method's, for every driver.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from prereg.runners.providers.plain import decode

#: what the client sends with a ``body`` mapping (its default headers carry it too)
JSON_HEADERS = {"Content-Type": "application/json"}


@dataclass(frozen=True)
class Route:
    """Where a typed method posts, the SDK type it parses the reply into, and its options
    (``security``: which of the client's credentials it sends)."""

    path: str
    cast_to: Any
    options: Mapping[str, Any] = field(default_factory=dict)


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


class Encoded(list[Any]):
    """A list of JSON values that keeps its encoding: a body's tool list, the same for every
    request of a listing, is encoded once instead of on every request (with the tool
    schemas it is most of a first request's bytes; about 5% of the provider path's CPU).
    Never changed once made (the drivers share one per listing)."""

    def __init__(self, items: list[Any]) -> None:
        super().__init__(items)
        self.wire = _dumps(items)


#: the stand-in for an :class:`Encoded` value while the rest of a body is encoded: a
#: string no body holds (random per process), replaced by the kept encoding
_MARK = f"prereg-encoded-{secrets.token_hex(16)}"


def encode(body: Mapping[str, Any]) -> bytes:
    """``body`` as the SDKs' encoder writes it (a value JSON cannot hold is a TypeError or
    a ValueError, never sent); a top-level :class:`Encoded` value is spliced in as kept."""
    kept = {key: value.wire for key, value in body.items() if isinstance(value, Encoded)}
    if not kept:
        return _dumps(body)
    marks = {key: f"{_MARK}-{n}" for n, key in enumerate(kept)}
    wire = _dumps({key: marks.get(key, value) for key, value in body.items()})
    for key, mark in marks.items():
        quoted = f'"{mark}"'.encode()
        if wire.count(quoted) != 1:  # cannot happen (the mark is secret); encode in full
            return _dumps(body)
        wire = wire.replace(quoted, kept[key], 1)
    return wire


#: the body of this task's current request and its encoding (see :func:`hold`)
_HELD: ContextVar[tuple[Mapping[str, Any], bytes] | None] = ContextVar("prereg_wire", default=None)


def hold(body: Mapping[str, Any]) -> bytes:
    """``body`` encoded, kept for this task's :func:`post` of the same body object.

    The driver sizes a request (spend hold, rate limit) from the bytes it will send, then
    posts it: the tool list is encoded once per request instead of twice (about 7% of the
    provider path's CPU). Held per task (a context variable), matched by identity: a body
    rebuilt in between (the chat driver's renamed cap field) is encoded afresh."""
    wire = encode(body)
    _HELD.set((body, wire))
    return wire


def encoded(body: Mapping[str, Any]) -> bytes:
    """The bytes :func:`hold` kept for ``body``, else ``body`` encoded now."""
    held = _HELD.get()
    return held[1] if held is not None and held[0] is body else encode(body)


async def post(client: Any, route: Route, body: Mapping[str, Any]) -> Any:
    """``body`` posted through ``client`` as the typed method would, untransformed."""
    return await client.post(
        route.path,
        content=encoded(body),
        cast_to=route.cast_to,
        options={**route.options, "headers": JSON_HEADERS},
    )


async def post_plain(
    client: Any, route: Route, body: Mapping[str, Any], read: Callable[[dict[str, Any]], Any]
) -> Any:
    """:func:`post`, the reply read as plain data by ``read`` (see :mod:`.plain`): ``read``
    returns the reply as the driver's parse takes it, or None when only the SDK's typed parse
    can say what it is; then the response type's own constructor reads the same reply.

    The request goes through ``client.post`` with the public raw-response cast
    (``cast_to=httpx2.Response``, the SDKs' documented way to post to a route and read the
    reply yourself): the client sends, authenticates, times out, and turns every transport
    failure, timeout and error status into its own exception, with its own message, in
    whatever version is installed. Only a successful reply's parse changes hands."""
    import httpx2  # lazy: the SDKs' HTTP client, loaded with them at the first request

    response = await client.post(
        route.path,
        content=encoded(body),
        cast_to=httpx2.Response,
        options={**route.options, "headers": JSON_HEADERS},
    )
    return reply(route, response, read)


def reply(route: Route, response: Any, read: Callable[[dict[str, Any]], Any]) -> Any:
    """A successful reply as plain data when ``read`` is sure of it, else typed."""
    content_type = response.headers.get("content-type", "*").split(";")[0]
    if content_type.lower().endswith("json"):
        try:
            data = decode(response.content)
        except ValueError:  # not JSON, or NaN / infinity: the typed parse decides
            data = None
        fast = read(data) if isinstance(data, dict) else None
        if fast is not None:
            return fast
    return typed(route.cast_to, response)


def typed(cast_to: Any, response: Any) -> Any:
    """A successful reply typed as ``cast_to`` by the response model's public constructor
    (``model_construct``, which the SDK models override to build nested models loosely: what
    the clients' own non-strict parse of a JSON object does); a reply that is not a JSON
    object is handed on as its data, or its text when it is not JSON at all."""
    try:
        data = response.json()
    except ValueError:  # not JSON: the text, as the SDK hands on a non-JSON reply
        return response.text
    if isinstance(data, dict):
        return cast_to.model_construct(**data)
    return data
