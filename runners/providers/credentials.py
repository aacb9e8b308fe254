"""Keys, base URLs and redaction: the only place a provider key is read.

Why a module of its own: a key must reach the SDK client and nothing else. The
drivers ask :func:`api_key` for it at client construction and hand it straight
to the SDK; they never store it on an object that gets printed or recorded.
Everything that leaves a driver for a record, a trace, a log or an error message
goes through :func:`redact` first, which removes

- the exact values of every provider secret variable currently set (so a key
  echoed back by a server in an error body is caught whatever its shape), and
- anything that looks like a provider key or a bearer credential (so a key from
  another environment, pasted into a prompt or a tool result, is caught too).

Keys come only from the providers' usual variables (``ANTHROPIC_API_KEY``,
``OPENAI_API_KEY``); the SDKs' other credential sources (profiles, config files,
workload identity) are deliberately not consulted, so what authenticates a run
is always what the user exported. Base URLs come from ``ANTHROPIC_BASE_URL`` /
``OPENAI_BASE_URL`` when set, else the SDK default.
"""

from __future__ import annotations

import functools
import os
import re
from typing import Any, Literal, TypeGuard, get_args

from prereg.runners.drivers.base import InfraError

Provider = Literal["anthropic", "openai"]

KEY_VARIABLES: dict[str, str] = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}
BASE_URL_VARIABLES: dict[str, str] = {
    "anthropic": "ANTHROPIC_BASE_URL",
    "openai": "OPENAI_BASE_URL",
}
DEFAULT_BASE_URLS: dict[str, str] = {
    "anthropic": "https://api.anthropic.com",
    "openai": "https://api.openai.com/v1",
}

#: Variables whose values are secrets even though prereg never reads them for
#: authentication; their values are redacted all the same.
SECRET_VARIABLES: tuple[str, ...] = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "OPENAI_API_KEY",
    "OPENAI_ADMIN_KEY",
    "OPENAI_WEBHOOK_SECRET",
    "ANTHROPIC_WEBHOOK_SIGNING_KEY",
    # the MCP connector's token for the replay server (runners/drivers/connector.py)
    "PREREG_CONNECTOR_TOKEN",
)

REDACTED = "[REDACTED]"

# Shapes of credentials: provider keys, bearer tokens and key headers. Conservative
# on purpose: a false positive costs a few characters of a trace, a miss leaks a key.
_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"(?<![A-Za-z0-9])sk-ant-[A-Za-z0-9_\-]{8,}"),
    re.compile(r"(?<![A-Za-z0-9])sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{16,}"),
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=\-]{8,}"),
    re.compile(
        r"(?i)((?:x-api-key|api[_-]?key|authorization)[\"']?\s*[:=]\s*[\"']?)"
        r"[^\s\"',}]{8,}"
    ),
)

#: Shortest secret value redacted verbatim (shorter values would redact common words).
_MIN_SECRET = 6


def is_provider(name: str) -> TypeGuard[Provider]:
    """Whether driver ``name`` is a provider with credentials here (a :data:`Provider`)."""
    return name in get_args(Provider)


class MissingKey(InfraError):
    """The provider's key variable is not set (reported without any secret)."""


def api_key(provider: Provider) -> str:
    """The key from the provider's usual variable; MissingKey names the variable."""
    variable = KEY_VARIABLES[provider]
    value = os.environ.get(variable, "").strip()
    if not value:
        raise MissingKey(
            f"{variable} is not set: export it to run against the {provider} "
            "API (prereg reads the key from this variable only)"
        )
    return value


def base_url(provider: Provider) -> str | None:
    """The base URL from the provider's variable, or None for the SDK default."""
    value = os.environ.get(BASE_URL_VARIABLES[provider], "").strip()
    return value or None


def effective_base_url(provider: Provider) -> str:
    """The base URL a client will use (for messages and same-origin checks)."""
    return base_url(provider) or DEFAULT_BASE_URLS[provider]


def secret_values() -> tuple[str, ...]:
    """The secrets to redact, longest first, read from the environment on every call (a
    test or a user may set a key at any time); the sorting is cached per set of values."""
    return _sorted_secrets(tuple(os.environ.get(name, "") for name in SECRET_VARIABLES))


@functools.lru_cache(maxsize=8)
def _sorted_secrets(raw: tuple[str, ...]) -> tuple[str, ...]:
    values = {v.strip() for v in raw}
    return tuple(sorted((v for v in values if len(v) >= _MIN_SECRET), key=len, reverse=True))


def redact(text: str, secrets: tuple[str, ...] | None = None) -> str:
    """``text`` with every secret value and credential-shaped string replaced
    (``secrets``: the values to replace, read from the environment when None)."""
    if not text:
        return text
    for value in secret_values() if secrets is None else secrets:
        text = text.replace(value, REDACTED)
    for pattern in _PATTERNS:
        if pattern.groups:
            text = pattern.sub(lambda m: m.group(1) + REDACTED, text)
        else:
            text = pattern.sub(REDACTED, text)
    return text


def redact_obj(value: Any, secrets: tuple[str, ...] | None = None) -> Any:
    """Redact every string inside a JSON-like value (dicts, lists, tuples), keys included;
    the secret values are read from the environment once per call, not once per string."""
    if secrets is None:
        secrets = secret_values()
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, dict):
        return {redact_obj(k, secrets): redact_obj(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(redact_obj(v, secrets) for v in value)
    return value


def contains_secret(text: str) -> bool:
    """Whether ``text`` still holds a secret value (used by tests and self-checks)."""
    return any(value in text for value in secret_values())
