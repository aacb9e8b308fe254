"""A request the SDK client built once for a route, sent again with each new body.

``client.post`` builds every request anew: options copied and prepared, the URL parsed and
merged with the base URL, the headers (key, user agent, ``x-stainless-*``, the client's
defaults) merged and normalised one by one, an idempotency key drawn. Nothing of it
depends on the body, and at 32 requests in flight it was a fifth of the provider path's CPU
(issue 15: ``bench/provider_throughput.py``). Here the client builds the request for a
route once, with its own builder (``_build_request`` after its ``_prepare_options``), and
each later request is that URL, those headers and that timeout with the new body.

What stays the client's, on every request: its request hook (``_prepare_request``), its
send (its HTTP client and transport, redirects, OpenAI's auth wrapper), the
cookies its HTTP client keeps, and its mapping of failures to its exceptions (a timeout to
``APITimeoutError``, a transport failure to ``APIConnectionError``, an error status to
``RateLimitError``, ``BadRequestError``, ... with the response). Retries are prereg's
either way (the clients are built with ``max_retries=0``).

Only for a client whose requests cannot differ between calls but for the body (see
:func:`reusable`): the OpenAI SDK's ``AsyncOpenAI`` with a plain API key (no credential
provider, provider runtime or workload identity), and the Anthropic SDK's
``AsyncAnthropic`` with a plain key and neither tracing nor middleware (prereg builds it
with ``open_telemetry=False``); never a subclass, nor a client with custom auth. Any other
client, and a route's first request on a client (which lets the client settle what it
computes lazily), go through ``client.post`` as before.
``tests/providers/test_prov_prepared.py`` checks that the requests are the same, headers
and cookies included, and that failures raise the same.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

#: what the client sends with a ``body`` mapping (its default headers carry it too)
JSON_HEADERS = {"Content-Type": "application/json"}

_MISSING = object()


def _openai_failures() -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
    from openai import _httpx2 as failures  # lazy: loaded with the SDK, for its clients only

    return failures.timeout_exceptions(), failures.request_exceptions()


def _anthropic_failures() -> tuple[
    tuple[type[BaseException], ...], tuple[type[BaseException], ...]
]:
    import httpx2  # lazy: the SDKs' HTTP client, loaded with them

    return (httpx2.TimeoutException,), (Exception,)


async def _send_request(client: Any, request: Any) -> Any:
    return await client._send_request(request, stream=False)


async def _client_send(client: Any, request: Any) -> Any:
    return await client._client.send(request, stream=False)


@dataclass(frozen=True)
class _Known:
    """A client class this module reuses requests of, and what its own request path does
    with a built request: how it sends it, which failures it maps to its timeout and
    connection errors (as its ``request`` does)."""

    dynamic: tuple[str, ...]  # attributes that make its requests differ when set (or non-empty)
    error: str  # its exceptions' base class, raised as is
    failures: Callable[[], tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]]
    send: Callable[[Any, Any], Awaitable[Any]]
    needed: tuple[str, ...] = ()  # members beyond :data:`_NEEDED`


#: by client class, as its SDK exports it (``sdk.Class``; a subclass is not known)
_CLIENTS = {
    "openai.AsyncOpenAI": _Known(
        ("_api_key_provider", "_provider_runtime", "_workload_identity_auth"),
        "OpenAIError",
        _openai_failures,
        _send_request,
        ("_send_request",),
    ),
    # its request path also runs tracing and middleware: reused only with neither
    "anthropic.AsyncAnthropic": _Known(
        ("_tracer", "_middleware", "_middleware_chain", "_custom_auth", "_token_cache"),
        "AnthropicError",
        _anthropic_failures,
        _client_send,
    ),
}

#: the client's members this module relies on; a client without one is not reused
_NEEDED = (
    "_build_request",
    "_prepare_options",
    "_prepare_request",
    "_make_status_error_from_response",
    "_client",
)


@dataclass(frozen=True)
class Template:
    """What the client built for a route, but the body: the URL, the headers (without
    ``Content-Length`` and ``Cookie``, which each request sets), the request extensions
    (the timeout)."""

    url: Any
    headers: Any
    extensions: Mapping[str, Any]


#: per client: route id -> (the route, kept alive with its id; its template)
_TEMPLATES: weakref.WeakKeyDictionary[Any, dict[int, tuple[object, Template]]] = (
    weakref.WeakKeyDictionary()
)


def _sdk_of(client: Any) -> Any:
    """The SDK package of ``client`` (loaded: the client is one of its objects)."""
    return sys.modules[type(client).__module__.split(".")[0]]


def _class_name(client: Any) -> str:
    """``sdk.Class`` when ``client`` is an instance of exactly the class its SDK exports
    under that name, else ``""``."""
    kind = type(client)
    sdk = sys.modules.get(kind.__module__.split(".")[0])
    if sdk is None or getattr(sdk, kind.__name__, None) is not kind:
        return ""
    return f"{sdk.__name__}.{kind.__name__}"


def reusable(client: Any) -> bool:
    """Whether ``client``'s requests for a route differ only in their body."""
    known = _CLIENTS.get(_class_name(client))
    if known is None:
        return False
    if any(getattr(client, name, _MISSING) for name in known.dynamic):  # set, or not there
        return False
    if getattr(client, "_idempotency_header", _MISSING) is not None:
        return False
    if getattr(client, "custom_auth", _MISSING) is not None:
        return False
    return all(hasattr(client, name) for name in (*_NEEDED, *known.needed))


#: clients whose request could not be built apart (see :func:`remember`)
_REFUSED: weakref.WeakSet[Any] = weakref.WeakSet()


def template(client: Any, route: Any) -> Template | None:
    """The template built for ``route`` on ``client``, if any yet (see :func:`remember`)."""
    kept = _TEMPLATES.get(client)
    hit = None if kept is None else kept.get(id(route))
    return None if hit is None else hit[1]


async def remember(client: Any, route: Any) -> None:
    """Build and keep ``client``'s template for ``route`` (after a request through
    ``client.post``, so the client has settled what it computes at its first request).

    A build that fails (an SDK whose internals moved) is not an error of the request that
    just succeeded: the client is then never reused, and builds every request itself."""
    if client in _REFUSED or template(client, route) is not None or not reusable(client):
        return
    try:
        sdk = _sdk_of(client)
        options = sdk._models.FinalRequestOptions.construct(
            method="post", url=route.path, content=b"", headers=JSON_HEADERS, **route.options
        )
        options = await client._prepare_options(options)
        request = client._build_request(options, retries_taken=0)
        headers = request.headers.copy()
        for name in ("Content-Length", "Cookie"):
            headers.pop(name, None)
        built = Template(request.url, headers, dict(request.extensions))
    except Exception:  # noqa: BLE001 - see the docstring
        _REFUSED.add(client)
        return
    _TEMPLATES.setdefault(client, {})[id(route)] = (route, built)


async def send(client: Any, made: Template, content: bytes) -> Any:
    """``content`` posted as ``made`` says, through the client's send; the successful
    response (read), or the client's exception for a failure or an error status."""
    import httpx2  # lazy: the SDKs' HTTP client, loaded with them

    known = _CLIENTS[_class_name(client)]
    sdk = _sdk_of(client)
    timeouts, transport = known.failures()
    request = httpx2.Request(
        "POST", made.url, headers=made.headers, content=content, extensions=dict(made.extensions)
    )
    cookies = client._client.cookies
    if cookies:
        cookies.set_cookie_header(request)
    await client._prepare_request(request)
    try:
        response = await known.send(client, request)
    except getattr(sdk, known.error):
        raise
    except timeouts as exc:
        raise sdk.APITimeoutError(request=request) from exc
    except transport as exc:
        raise sdk.APIConnectionError(request=request) from exc
    if not response.is_success:
        if not response.is_closed:
            await response.aread()
        raise client._make_status_error_from_response(response) from None
    return response
