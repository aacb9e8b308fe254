"""The hash-chained, append-only ledger (``registry/ledger.jsonl``).

Each line is one event (a registration, a locked-split claim) carrying its
sequence number and the sha256 of the previous line's exact bytes, so any edit,
deletion, insertion or reordering of lines breaks the chain at a named line.
Appends happen under a file lock, so concurrent ``register`` calls cannot
interleave or fork the chain.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from filelock import FileLock

from prereg.core.errors import IntegrityError, WriteFailure
from prereg.core.safeio import MIB, UnreadableFile, read_regular_file
from prereg.core.version import code_version
from prereg.registry.digest import PREFIX, canonical_json, sha256_hex

GENESIS = PREFIX + "0" * 64
# A reader holds no lock, so it can catch an append half written (the kernel copies a
# write page by page); it waits this long, this many times, for the line to end.
PARTIAL_LINE_WAIT = 0.02
PARTIAL_LINE_RETRIES = 10
# The largest ledger read (a confirmatory run adds ~430 bytes a record: millions of records).
MAX_LEDGER_BYTES = 4096 * MIB
# How much of the ledger's end :meth:`Ledger.head` reads at first (a line is ~400 bytes).
TAIL_BLOCK = 16384


@dataclass(frozen=True)
class LedgerLine:
    number: int  # 1-based line number in the file (0: read from the end by Ledger.head)
    raw: bytes  # the line's exact bytes, without the newline
    data: dict[str, Any] | None  # None when the line is not valid JSON

    @property
    def hash(self) -> str:
        return PREFIX + sha256_hex(self.raw)


@dataclass(frozen=True)
class LedgerHead:
    seq: int
    hash: str

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "hash": self.hash}


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Ledger:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.lock = FileLock(str(self.path) + ".lock", timeout=60)

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the ledger's lock (to append); WriteFailure (exit 1) when the registry
        cannot be written (a read-only workspace: the lock file cannot be opened)."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.lock.acquire()
        except OSError as exc:
            raise WriteFailure(
                f"the registry cannot be written (its lock {self.path.name}.lock: "
                f"{exc.strerror or exc})",
                file=str(self.path),
            ) from None
        try:
            yield
        finally:
            self.lock.release()

    def read(self) -> bytes:
        """The ledger's bytes (empty when there is none yet); IntegrityError if unreadable."""
        if not os.path.lexists(self.path):
            return b""
        try:
            data = self._read_file()
            for _ in range(PARTIAL_LINE_RETRIES):
                if not data or data.endswith(b"\n"):
                    break
                time.sleep(PARTIAL_LINE_WAIT)  # an append in progress: let it finish
                data = self._read_file()
            return data  # still no newline: a damaged last line, for the chain check
        except OSError as exc:  # a folder, a broken link or a loop in place of the file
            raise IntegrityError(
                f"the ledger cannot be read ({exc.strerror or exc}); it should be a file",
                file=str(self.path),
            ) from None
        except UnreadableFile as exc:  # a FIFO or a device: never blocks, never read whole
            raise IntegrityError(
                f"the ledger cannot be read: it {exc.reason}", file=str(self.path)
            ) from None

    def _read_file(self) -> bytes:
        return read_regular_file(self.path, limit=MAX_LEDGER_BYTES, what="a ledger")

    def lines(self) -> list[LedgerLine]:
        out = []
        for number, raw in enumerate(self.read().split(b"\n"), start=1):
            if not raw.strip():
                continue
            try:
                data = json.loads(raw)
                if not isinstance(data, dict):
                    data = None
            except (json.JSONDecodeError, UnicodeDecodeError):
                data = None
            out.append(LedgerLine(number=number, raw=raw, data=data))
        return out

    def events(self) -> list[dict[str, Any]]:
        return [line.data for line in self.lines() if line.data is not None]

    def head(self) -> LedgerHead:
        """The newest line's seq and hash, read from the end of the file.

        An append needs only the newest line, and a confirmatory run appends one anchor
        per stored record (:meth:`Registry.pin_link`), so reading the whole ledger here
        would make a run quadratic in its records. A file whose end is not a whole line
        (an append in progress, a damaged end) is read whole, as :meth:`lines` reads it.
        """
        last = self._last_line()
        if last is None:
            lines = self.lines()
            if not lines:
                return LedgerHead(seq=0, hash=GENESIS)
            last = lines[-1]
        seq = int(last.data.get("seq", 0)) if last.data else 0
        return LedgerHead(seq=seq, hash=last.hash)

    def _last_line(self) -> LedgerLine | None:
        """The newest line, reading back from the end in blocks; None when the file is
        missing or empty, does not end with a newline, or ends with a blank line (then
        :meth:`head` reads it whole, as :meth:`lines` does)."""
        try:
            with open(self.path, "rb") as handle:
                end = handle.seek(0, os.SEEK_END)
                block = TAIL_BLOCK
                while True:
                    start = max(0, end - block)
                    handle.seek(start)
                    tail = handle.read(end - start)
                    if not tail.endswith(b"\n"):
                        return None
                    cut = tail.rfind(b"\n", 0, len(tail) - 1)
                    if cut >= 0 or start == 0:
                        break
                    block *= 4
        except OSError:
            return None
        raw = tail[cut + 1 : -1]
        if not raw.strip():
            return None
        try:
            data = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            data = None
        return LedgerLine(number=0, raw=raw, data=data if isinstance(data, dict) else None)

    def prepare(self, event: dict[str, Any]) -> bytes:
        """The exact bytes of the next line for ``event``; hold :meth:`locked`.

        Prepared before appending so the caller can mirror the line in a file
        first (a frozen copy or a claim), which lets ``verify`` detect an edit
        of the last line, which no later line's hash covers.
        """
        head = self.head()
        line = {
            "seq": head.seq + 1,
            **event,
            "time": utc_now(),
            "prereg_version": code_version(),
            "prev": head.hash,
        }
        return canonical_json(line)

    def append_prepared(self, line: bytes) -> None:
        """Append a line made by :meth:`prepare`, durably; hold :meth:`locked`."""
        with open(self.path, "ab") as handle:
            handle.write(line + b"\n")
            handle.flush()
            os.fsync(handle.fileno())
