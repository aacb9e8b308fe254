"""An append-only, hash-chained log of events beside the ledger: the same line format as
``registry/ledger.jsonl`` (:class:`~prereg.registry.ledger.Ledger`: ``seq``, ``time``,
``prereg_version``, ``prev`` = the sha256 of the previous line's exact bytes), plus each
event's own ``body`` digest (the sha256 of the canonical JSON of the event's fields).

Used for the human-reviewed eligibility record (:mod:`prereg.registry.eligibility`) and
the imported telemetry (:mod:`prereg.runners.exchange.telemetry`). Every reader verifies
the whole chain first (:meth:`AuditLog.verified_events`): an edited, removed, inserted or
reordered line breaks the chain or its own body digest at a named line (exit 3). An edit
of the newest line that also rewrites its body digest is what no later line can see; the
ledger guards its own last line with a mirror file, these logs do not (documented).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prereg.core.errors import IntegrityError
from prereg.registry.digest import document_digest
from prereg.registry.ledger import GENESIS, Ledger

_ENVELOPE = ("seq", "time", "prereg_version", "prev", "body")


def body_digest(event: dict[str, Any]) -> str:
    """The digest of an event's own fields (without the chain's envelope)."""
    return document_digest({k: v for k, v in event.items() if k not in _ENVELOPE})


class AuditLog:
    """One append-only JSON Lines file, hash-chained line to line."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._ledger = Ledger(self.path)

    def exists(self) -> bool:
        return self.path.is_file()

    def verified_events(self) -> list[dict[str, Any]]:
        """Every event in order, after checking the chain (IntegrityError naming the line)."""
        out: list[dict[str, Any]] = []
        prev = GENESIS
        for line in self._ledger.lines():
            where = f"{self.path.name}:{line.number}"
            data = line.data
            if data is None:
                raise IntegrityError(f"line {line.number} is not a JSON object", file=where)
            if data.get("seq") != len(out) + 1:
                raise IntegrityError(
                    f"line {line.number} has seq {data.get('seq')!r}, expected {len(out) + 1}: "
                    "a line was removed, inserted or reordered",
                    file=where,
                )
            if data.get("prev") != prev:
                raise IntegrityError(
                    f"line {line.number}'s 'prev' does not match the line before it: a line "
                    "was edited, removed, inserted or reordered",
                    file=where,
                )
            if data.get("body") != body_digest(data):
                raise IntegrityError(
                    f"line {line.number}'s content does not match its own 'body' digest: the "
                    "line was edited",
                    file=where,
                )
            prev = line.hash
            out.append(data)
        return out

    def append(self, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Append ``events`` in order under the lock, after verifying the chain; returns
        the lines written (as data)."""
        written: list[dict[str, Any]] = []
        with self._ledger.locked():
            self.verified_events()  # never extend a tampered chain
            for event in events:
                line = self._ledger.prepare({**event, "body": body_digest(event)})
                self._ledger.append_prepared(line)
                written.append(json.loads(line))
        return written
