"""Keys, base URLs and redaction: the only place a provider key is read.

Why a module of its own: a key must reach the SDK client and nothing else. The
drivers ask :func:`api_key` for it at client construction and hand it straight
to the SDK; they never store it on an object that gets printed or recorded.
Everything that leaves a driver for a record, a trace, a log or an error message
goes through :func:`redact` first, which removes

- the values of every provider secret variable currently set, as they are and in the
  forms an echoing server may encode them in: base64 and base64url (at each of the three
  byte alignments, so a key inside a longer encoded text is found too), hex (lower and
  upper case) and URL encoding (every byte percent-encoded, or only the reserved ones);
- every piece of such a value of :data:`MIN_FRAGMENT` characters or more, wherever it
  is (a key cut in two, its halves far apart or in two of a response's text blocks, is
  removed half by half);
- anything that looks like a provider key or a bearer credential (so a key from
  another environment, pasted into a prompt or a tool result, is caught too), and the
  secrets of a PostgreSQL connection URL (its userinfo password and ``password``-like
  query parameters, by the store's own :func:`~prereg.runners.store.postgres.redacted`).

What a driver returns is then checked once more (:func:`holds_key_prefix`): a response
that still holds a key-shaped string (a key prefix, ``sk-ant-`` or the prefix of a key set
here such as ``sk-`` or ``sk-proj-``, followed by a key's body: :data:`MIN_KEY_BODY`
characters of the key alphabet, or a redacted piece) holds a credential in a form not
removed above, and is refused as an infrastructure error rather than stored. A prefix
alone, or followed by a word (``sk-learn``), is text: it is kept.

Keys come only from the providers' usual variables (``ANTHROPIC_API_KEY``,
``OPENAI_API_KEY``); the SDKs' other credential sources (profiles, config files,
workload identity) are deliberately not consulted, so what authenticates a run
is always what the user exported. Base URLs come from ``ANTHROPIC_BASE_URL`` /
``OPENAI_BASE_URL`` when set, else the SDK default.
"""

from __future__ import annotations

import base64
import functools
import os
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal, TypeGuard, get_args
from urllib.parse import quote, quote_plus

from prereg.runners.drivers.base import InfraError
from prereg.runners.store.postgres import redacted as redacted_url

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

#: Shortest piece of a secret (or of one of its encoded forms) redacted wherever it is.
MIN_FRAGMENT = 12
#: Pieces are found by their runs of ``_GRAM`` characters: text is looked at every ``_GRAM``
#: characters, so every run it shares with a secret's form of ``2 * _GRAM - 1`` characters
#: or more is found (at most MIN_FRAGMENT).
_GRAM = 6

#: Prefixes of provider keys as their providers document them; with the prefix of each
#: provider key set here (:func:`_own_prefix`), a response still holding one followed by a
#: key's body after redaction is refused (:func:`holds_key_prefix`).
KNOWN_PREFIXES: tuple[str, ...] = ("sk-ant-", "sk-proj-", "sk-svcacct-", "sk-admin-")
_OWN_PREFIX = re.compile(r"[A-Za-z]{2,8}-(?:[A-Za-z]{2,12}-)?")

#: The characters of a key's body after its prefix (base62, ``_`` and ``-``).
KEY_ALPHABET = "A-Za-z0-9_\\-"
#: The shortest body (characters after the prefix) that makes a string key-shaped. The
#: providers' keys are longer: the shortest, OpenAI's legacy ``sk-`` keys, have 48
#: characters after ``sk-``; project, service-account and admin keys (``sk-proj-``,
#: ``sk-svcacct-``, ``sk-admin-``) over 130; Anthropic's ``sk-ant-api03-`` keys 95 after
#: ``api03-`` (source: the ``openai-api-key`` and ``anthropic-api-key`` /
#: ``anthropic-admin-api-key`` rules of gitleaks' default configuration,
#: https://github.com/gitleaks/gitleaks/blob/master/config/gitleaks.toml). 40 leaves a
#: margin below all of them (a key that lost a few characters is still found) and is far
#: above any word a prefix may begin (``sk-learn``). For the key set here, its own body's
#: length when that is shorter (a gateway's short key).
MIN_KEY_BODY = 40

#: A PostgreSQL connection URL in free text (its secrets go, the rest stays readable).
_DB_URL = re.compile(r"postgres(?:ql)?://[^\s\"'<>`]+")


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


def encoded_forms(value: str) -> tuple[str, ...]:
    """``value`` and the forms a server may echo it in, longest first: base64 and base64url
    (whole, and the part that is the same wherever in a longer encoded text the value
    starts: one per byte alignment), hex in both cases, and URL encoding (every byte
    percent-encoded in both cases, or only the reserved characters)."""
    data = value.encode()
    forms = {value, data.hex(), data.hex().upper(), quote(value, safe=""), quote_plus(value)}
    forms |= {"".join(f"%{b:02X}" for b in data), "".join(f"%{b:02x}" for b in data)}
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        whole = encode(data).decode()
        forms |= {whole, whole.rstrip("=")}
        for shift in range(3):
            # the characters that depend on the value's bytes alone: whole groups of three
            # bytes, after the group it shares with what precedes it
            encoded = encode(b"\0" * shift + data).decode()
            forms.add(encoded[4 if shift else 0 : 4 * ((shift + len(data)) // 3)])
    return tuple(sorted((f for f in forms if len(f) >= _MIN_SECRET), key=len, reverse=True))


@dataclass(frozen=True)
class _Matcher:
    """What :func:`redact` looks for, built once per set of secret values."""

    #: every form of every value, longest first (replaced where it occurs whole)
    forms: tuple[str, ...]
    #: every ``_GRAM`` characters of the forms long enough to be cut: (form, offset) each
    grams: dict[str, tuple[tuple[str, int], ...]]


@functools.lru_cache(maxsize=8)
def _matcher(secrets: tuple[str, ...]) -> _Matcher:
    forms = sorted({f for value in secrets for f in encoded_forms(value)}, key=len, reverse=True)
    grams: dict[str, list[tuple[str, int]]] = {}
    for form in forms:
        if len(form) >= MIN_FRAGMENT:
            for offset in range(len(form) - _GRAM + 1):
                grams.setdefault(form[offset : offset + _GRAM], []).append((form, offset))
    return _Matcher(tuple(forms), {gram: tuple(found) for gram, found in grams.items()})


@functools.lru_cache(maxsize=8)
def _prefixes(keys: tuple[str, ...]) -> re.Pattern[str]:
    """The key-shaped strings a response may not hold after redaction: a key prefix (the
    documented ones and those of the provider keys set, ``keys``) at the start of a word,
    followed by a key's body (:data:`MIN_KEY_BODY` characters of :data:`KEY_ALPHABET`, or
    fewer for a key set here whose body is shorter) or by a redacted piece (a key that
    redaction removed only in part)."""
    body: dict[str, int] = dict.fromkeys(KNOWN_PREFIXES, MIN_KEY_BODY)
    for key in keys:
        key = key.strip()
        prefix = _own_prefix(key)
        if prefix:
            shortest = min(MIN_KEY_BODY, len(key) - len(prefix))
            body[prefix] = min(body.get(prefix, MIN_KEY_BODY), shortest)
    shapes = [
        f"{re.escape(prefix)}(?:[{KEY_ALPHABET}]{{{n},}}|{re.escape(REDACTED)})"
        for prefix, n in sorted(body.items(), key=lambda item: len(item[0]), reverse=True)
    ]
    return re.compile(r"(?<![A-Za-z0-9])(?:" + "|".join(shapes) + ")")


def _visible(text: str) -> str:
    """``text`` without its invisible format characters (Unicode category Cf: zero-width
    characters, bidi controls), which a reader does not see and which would otherwise
    hide a key's shape (``sk-ant-`` U+200B ``api03-...``)."""
    if text.isascii():
        return text
    return "".join(c for c in text if unicodedata.category(c) != "Cf")


def _own_prefix(value: str) -> str | None:
    """The prefix of a key's shape (``sk-``, ``sk-ant-``, ``sk-proj-``), if it has one."""
    found = _OWN_PREFIX.match(value)
    return found.group(0) if found and len(found.group(0)) < len(value) else None


def _pieces(text: str, matcher: _Matcher) -> list[tuple[int, int]]:
    """Where ``text`` holds a piece of a secret's form of :data:`MIN_FRAGMENT` characters or
    more: each run in common, grown from a shared gram as far as it goes both ways, merged."""
    found: list[tuple[int, int]] = []
    for at in range(0, len(text) - _GRAM + 1, _GRAM):
        for form, offset in matcher.grams.get(text[at : at + _GRAM], ()):
            start, end, left, right = at, at + _GRAM, offset, offset + _GRAM
            while start > 0 and left > 0 and text[start - 1] == form[left - 1]:
                start, left = start - 1, left - 1
            while end < len(text) and right < len(form) and text[end] == form[right]:
                end, right = end + 1, right + 1
            if end - start >= MIN_FRAGMENT:
                found.append((start, end))
    return _merged(found)


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``spans`` sorted, overlapping ones joined."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _redact_hidden(text: str, matcher: _Matcher) -> str:
    """``text`` with every secret that invisible format characters split (``sk-`` U+200B
    ``ant-...``) replaced whole, the characters inside it included: each form and piece is
    looked for in the text a reader sees (:func:`_visible`) and its span mapped back. Text
    without such characters is returned unchanged (the plain matching handles it)."""
    kept = [i for i, c in enumerate(text) if unicodedata.category(c) != "Cf"]
    if len(kept) == len(text):
        return text
    seen = "".join(text[i] for i in kept)
    spans = [
        (at, at + len(form))
        for form in matcher.forms
        for at in (m.start() for m in re.finditer(re.escape(form), seen))
    ]
    if matcher.grams:
        spans += _pieces(seen, matcher)
    for start, end in reversed(_merged(spans)):
        text = text[: kept[start]] + REDACTED + text[kept[end - 1] + 1 :]
    return text


def redact(text: str, secrets: tuple[str, ...] | None = None) -> str:
    """``text`` with every secret value (in each of its encoded forms, whole or in pieces),
    credential-shaped string and connection URL's secret replaced (``secrets``: the values
    to replace, read from the environment when None)."""
    if not text:
        return text
    matcher = _matcher(secret_values() if secrets is None else secrets)
    if not text.isascii():
        text = _redact_hidden(text, matcher)
    for form in matcher.forms:
        text = text.replace(form, REDACTED)
    if matcher.grams:
        pieces = _pieces(text, matcher)
        for start, end in reversed(pieces):
            text = text[:start] + REDACTED + text[end:]
    for pattern in _PATTERNS:
        if pattern.groups:
            text = pattern.sub(lambda m: m.group(1) + REDACTED, text)
        else:
            text = pattern.sub(REDACTED, text)
    if "postgres" in text:
        text = _DB_URL.sub(lambda m: redacted_url(m.group(0)), text)
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


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def holds_key_prefix(value: Any) -> bool:
    """Whether a string of ``value`` (a JSON-like value, already redacted) still holds a
    key-shaped string (:func:`_prefixes`: the prefix of a provider key, one of
    :data:`KNOWN_PREFIXES` or that of a key set in :data:`KEY_VARIABLES`, followed by a
    key's body or a redacted piece), read without invisible format characters: a key in
    a form :func:`redact` does not remove, which is refused rather than stored. A prefix
    alone or followed by a word (``sk-learn``, ``sk-ant-`` in a sentence) is not."""
    prefixes = _prefixes(tuple(os.environ.get(name, "") for name in KEY_VARIABLES.values()))
    return any(prefixes.search(_visible(text)) for text in _strings(value))


def contains_secret(text: str) -> bool:
    """Whether ``text`` still holds a secret value in any of its encoded forms (used by
    tests and self-checks)."""
    return any(form in text for form in _matcher(secret_values()).forms)
