"""The response cache of exploratory pilots (``prereg run --cache``; issue 43, item 2).

Iterating a pilot resends the same requests: the same prompt, tools, model and budgets
for the same unit. With ``--cache`` a provider driver keeps each response it receives,
keyed by the sha256 of the canonical JSON of the provider, the unit (arm/task/repeat)
and the request body exactly as it is posted, and answers a request whose key it holds
from the cache, sending nothing and spending nothing.

- **The unit is in the key**, so the repeats of a prompt keep their own responses: a
  cache keyed by the request alone would answer every repeat with the first one's
  response and make the repeats identical, which the analysis would read as agreement.
- **Records run with the cache carry the evidence class ``cached``**, hits and misses
  alike, so they are never pooled with fresh evidence (``analyse`` refuses a mix, exit
  3) and a confirmatory registration never has them (``--cache`` is refused for it,
  exit 4). A hit's cost is 0 (nothing was sent) and its latency is not measured (null).
- **What is stored** is the response as the provider returned it (plain JSON), read
  again by the driver's own parser: nothing about the provider's behaviour is
  re-created. Entries live in the workspace's ``.cache/responses/`` (not evidence;
  safe to delete), one file per key, written whole or not at all; an entry that does
  not read as JSON is a miss and is written again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from prereg.core.files import write_atomic
from prereg.core.safeio import MAX_EXCHANGE_BYTES, UnreadableFile, read_regular_file
from prereg.registry.digest import canonical_json

#: the key's format: a change of what the key covers changes this, so old entries miss
KEY_FORMAT = "prereg.response-cache/1"


class ResponseCache:
    """Responses by request key, in ``folder`` (see the module docstring)."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(provider: str, unit: str, body: Mapping[str, Any]) -> str:
        """The sha256 (hex) of the canonical JSON of the provider, unit and request."""
        document = {"format": KEY_FORMAT, "provider": provider, "unit": unit, "request": body}
        return hashlib.sha256(canonical_json(document)).hexdigest()

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key[2:]}.json"

    def get(self, key: str) -> Any | None:
        """The stored response, or None (a miss: nothing stored, or not readable)."""
        try:
            data = read_regular_file(self._path(key), limit=MAX_EXCHANGE_BYTES, what="a response")
            response = json.loads(data)
        except (OSError, UnreadableFile, ValueError):
            self.misses += 1
            return None
        self.hits += 1
        return response

    def put(self, key: str, response: Any) -> None:
        """Keep ``response`` (plain JSON) under ``key``."""
        write_atomic(self._path(key), json.dumps(response, ensure_ascii=False).encode())


def plain_response(response: Any) -> Any:
    """A response as plain JSON: the dict the driver read, or the SDK model's own dump
    (its public ``model_dump``, wire names)."""
    if isinstance(response, dict):
        return response
    dump = getattr(response, "model_dump", None)
    if dump is None:
        raise TypeError(f"cannot keep a {type(response).__name__} response in the cache")
    return dump(mode="json", by_alias=True)
