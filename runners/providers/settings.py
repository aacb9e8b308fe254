"""Operational settings of a provider driver: rate limits, retries, timeouts, prices.

Why separate from the registration's ``host.params``: ``params`` is sent to the
provider and is part of the digest (it decides results); these settings only
decide how politely and how persistently prereg talks to the provider, so they
come from the environment or the command line and may differ between two runs
of the same registration without changing what is measured.

Variables (a provider-specific one wins over the generic one):
``PREREG_RPM`` / ``PREREG_ANTHROPIC_RPM`` / ``PREREG_OPENAI_RPM`` (requests per
minute), ``PREREG_TPM`` (tokens per minute), ``PREREG_MAX_ATTEMPTS`` (attempts
per request, first included), ``PREREG_TIMEOUT_S`` (per attempt),
``PREREG_RETRY_BASE_S`` / ``PREREG_RETRY_MAX_S`` (backoff), ``PREREG_PRICES``
(price table file), ``PREREG_BATCH_POLL_S`` and ``PREREG_BATCH_TIMEOUT_S``, and
``PREREG_HTTP`` (the SDK client's HTTP transport: ``aiohttp``, the SDKs' own
``DefaultAioHttpClient``, the default when the ``aiohttp`` package is installed; or
``httpx``, the SDKs' default transport).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal

from prereg.core.errors import BadInput
from prereg.runners.providers.retry import RetryPolicy

ToolSearchVariant = Literal["bm25", "regex"]
HttpTransport = Literal["aiohttp", "httpx"]


@dataclass(frozen=True)
class ProviderSettings:
    rpm: int | None = None
    tpm: int | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    timeout_s: float = 600.0
    prices_path: str | None = None
    batch_poll_s: float = 30.0
    batch_timeout_s: float = 24 * 3600.0
    #: Anthropic's tool search comes in two variants; OpenAI has one.
    tool_search_variant: ToolSearchVariant = "bm25"
    #: the SDK client's transport (None: aiohttp when installed, else httpx); see
    #: :func:`prereg.runners.providers.transport.http_client`
    http: HttpTransport | None = None

    @classmethod
    def from_env(
        cls, provider: str, overrides: Mapping[str, Any] | None = None
    ) -> ProviderSettings:
        """Settings from ``PREREG_*`` variables, then ``overrides`` (e.g. CLI options)."""
        env = os.environ

        def read(name: str) -> str | None:
            value = env.get(f"PREREG_{provider.upper()}_{name}") or env.get(f"PREREG_{name}")
            return value.strip() if value and value.strip() else None

        def number(name: str, kind: type) -> Any:
            raw = read(name)
            if raw is None:
                return None
            try:
                value = kind(raw)
            except ValueError:
                raise BadInput(f"expected a number, got {raw!r}", field=f"PREREG_{name}") from None
            if value <= 0:
                raise BadInput("must be positive", field=f"PREREG_{name}")
            return value

        base = cls()
        retry = base.retry
        attempts = number("MAX_ATTEMPTS", int)
        retry_base = number("RETRY_BASE_S", float)
        retry_max = number("RETRY_MAX_S", float)
        retry = replace(
            retry,
            **{
                k: v
                for k, v in (
                    ("max_attempts", attempts),
                    ("base_delay", retry_base),
                    ("max_delay", retry_max),
                )
                if v is not None
            },
        )
        values: dict[str, Any] = {
            "rpm": number("RPM", int),
            "tpm": number("TPM", int),
            "timeout_s": number("TIMEOUT_S", float),
            "prices_path": read("PRICES"),
            "batch_poll_s": number("BATCH_POLL_S", float),
            "batch_timeout_s": number("BATCH_TIMEOUT_S", float),
            "tool_search_variant": read("TOOL_SEARCH"),
            "http": read("HTTP"),
        }
        settings = replace(base, retry=retry, **{k: v for k, v in values.items() if v is not None})
        return settings.with_overrides(overrides or {})

    def with_overrides(self, overrides: Mapping[str, Any]) -> ProviderSettings:
        known = {f.name for f in fields(self)} | {"max_attempts"}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise BadInput(f"unknown provider setting(s): {', '.join(unknown)}")
        values = {k: v for k, v in overrides.items() if v is not None}
        if "max_attempts" in values:
            values["retry"] = replace(
                values.get("retry", self.retry), max_attempts=int(values.pop("max_attempts"))
            )
        out = replace(self, **values)
        if out.tool_search_variant not in ("bm25", "regex"):
            raise BadInput(
                "tool search variant must be 'bm25' or 'regex'", field="PREREG_TOOL_SEARCH"
            )
        if out.http not in (None, "aiohttp", "httpx"):
            raise BadInput(
                f"the HTTP transport must be 'aiohttp' or 'httpx', got {out.http!r}",
                field="PREREG_HTTP",
            )
        return out
