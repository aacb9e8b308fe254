"""The HTTP transport under the SDK clients (:mod:`prereg.runners.providers.transport`)."""

from __future__ import annotations

import ssl
from typing import Any

import anthropic
import openai
import pytest

from prereg.runners.providers.settings import ProviderSettings
from prereg.runners.providers.transport import http_client, tls_context


def _context_of(client: Any) -> ssl.SSLContext:
    """The TLS context the SDK's aiohttp transport connects with."""
    context = client._transport.ssl_context
    assert isinstance(context, ssl.SSLContext)
    return context


@pytest.mark.parametrize("sdk", [openai, anthropic], ids=["openai", "anthropic"])
def test_aiohttp_clients_share_one_verifying_tls_context(sdk: Any) -> None:
    settings = ProviderSettings(http="aiohttp")
    first, second = http_client(sdk, settings), http_client(sdk, settings)
    assert _context_of(first) is _context_of(second) is tls_context()
    # the SDK's own default: certificates and host names checked, as without sharing
    own = _context_of(sdk.DefaultAioHttpClient())
    shared = tls_context()
    assert shared.verify_mode == own.verify_mode == ssl.CERT_REQUIRED
    assert shared.check_hostname is own.check_hostname is True
    assert shared.minimum_version == own.minimum_version
    assert len(shared.get_ca_certs()) == len(own.get_ca_certs())


def test_httpx_keeps_the_sdks_own_client() -> None:
    assert http_client(openai, ProviderSettings(http="httpx")) is None
