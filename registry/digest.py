"""Canonical digests: sha256 over RFC 8785 (JCS) canonical JSON.

One function per kind of thing hashed, so that every digest in prereg is
computed the same way and displayed as ``sha256:<64 hex>``.
"""

from __future__ import annotations

import hashlib
from typing import Any

import rfc8785

PREFIX = "sha256:"


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_digest(data: bytes) -> str:
    """Digest of a file's bytes, as displayed: ``sha256:<hex>``."""
    return PREFIX + sha256_hex(data)


def canonical_json(document: Any) -> bytes:
    """RFC 8785 canonical bytes: key order, whitespace and number spelling fixed."""
    return rfc8785.dumps(document)


def document_digest(document: Any) -> str:
    """Digest of a JSON-able document: sha256 over its canonical JSON."""
    return PREFIX + sha256_hex(canonical_json(document))


def is_digest(value: str) -> bool:
    if not value.startswith(PREFIX) or len(value) != len(PREFIX) + 64:
        return False
    return all(c in "0123456789abcdef" for c in value[len(PREFIX) :])
