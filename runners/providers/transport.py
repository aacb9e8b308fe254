"""The HTTP transport under the SDK clients: the SDKs' own aiohttp client by default.

Both SDKs ship ``DefaultAioHttpClient`` (their vendored ``httpx_aiohttp`` transport,
enabled by the ``aiohttp`` extra) "for improved concurrency performance". On the provider
path at 32 concurrent requests the default httpx transport (httpcore's connection pool,
h11) was the largest single CPU cost left after prereg stopped paying the SDK's typed
transformation: about 40% of the run's CPU, against about 15% through aiohttp
(``bench/provider_throughput.py --profile``; issue 15). Everything above the transport
stays the SDK's: authentication, headers, timeouts per request, the mapping of every
error status to its exception, the response types.

``PREREG_HTTP=httpx`` keeps the SDK's default transport (for a proxy setup aiohttp does
not follow, say); ``PREREG_HTTP=aiohttp`` without the package installed is refused.

Every aiohttp client of a process shares one TLS context (:func:`tls_context`): the SDK's
own default, built once instead of once per client.
"""

from __future__ import annotations

import functools
import importlib.util
import ssl
import threading
from types import ModuleType
from typing import Any

from prereg.core.errors import BadInput
from prereg.runners.providers.settings import HttpTransport, ProviderSettings


def aiohttp_installed() -> bool:
    return importlib.util.find_spec("aiohttp") is not None


def chosen(settings: ProviderSettings) -> HttpTransport:
    """The transport ``settings`` ask for (None: aiohttp when installed, else httpx)."""
    if settings.http is None:
        return "aiohttp" if aiohttp_installed() else "httpx"
    if settings.http == "aiohttp" and not aiohttp_installed():
        raise BadInput(
            "PREREG_HTTP=aiohttp needs the aiohttp package, which prereg installs through "
            "the SDKs' aiohttp extra (reinstall prereg-agents, or set PREREG_HTTP=httpx)",
            field="PREREG_HTTP",
        )
    return settings.http


_TLS_LOCK = threading.Lock()


def tls_context() -> ssl.SSLContext:
    """The TLS context of every aiohttp client of this process: the one the SDKs' HTTP
    client builds by default (its CA bundle, certificate and hostname checks,
    ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` honoured), built once.

    Each client would otherwise build its own: 35-70 ms of loading the CA bundle per
    client, and the first one imports the TLS stack (0.1-0.3 s). A ``prereg run
    --workers N`` parent builds it before it forks (``ModelDriver.preload``). Built under
    a lock: the drivers of several arms load their SDK in worker threads at once."""
    with _TLS_LOCK:
        return _built_tls_context()


@functools.cache
def _built_tls_context() -> ssl.SSLContext:
    import httpx2  # lazy: the SDKs' HTTP client, loaded with them

    return httpx2.create_ssl_context()


def http_client(sdk: ModuleType, settings: ProviderSettings) -> Any:
    """The ``http_client`` for an ``sdk`` (``openai`` or ``anthropic``) client: the SDK's
    ``DefaultAioHttpClient`` (its defaults: limits, redirects; the timeout is the
    client's, applied per request; the TLS context :func:`tls_context`), or None for the
    SDK's own httpx client."""
    if chosen(settings) == "httpx":
        return None
    return sdk.DefaultAioHttpClient(timeout=settings.timeout_s, verify=tls_context())
