"""The verdict store: judges' verdicts as their own append-only records (issue 18).

A verdict never touches the run it judges: run records and their oracle outcomes stay
as recorded, and a verdict is a row of its own, in ``verdicts.sqlite`` beside the run
store in the workspace's ``runs/`` folder. Like the run store:

- the database refuses UPDATE and DELETE (triggers);
- one verdict per (run record id, judge digest), by a unique index, so a judge that is
  killed and run again never judges a run twice, whatever process writes;
- every verdict is a link of its registration digest's hash chain (the run chain's
  construction, :mod:`prereg.runners.chain`, with its own format string), computed
  inside the appending transaction; :meth:`VerdictStore.chain_problems` checks it.

The judge digest covers the judge's whole configuration and its rubric's digest
(:func:`prereg.registry.judges.judge_digest`), so a verdict under another rubric is a
different judge's verdict, kept apart and refused by ``analyse`` (exit 3).
"""

from __future__ import annotations

import hashlib
import sqlite3
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field

from prereg.core.errors import IntegrityError
from prereg.runners.chain import canonical_bytes
from prereg.runners.record import DIGEST_PATTERN, ChainLink

VERDICTS_FILENAME = "verdicts.sqlite"
FORMAT = "prereg.verdict-chain/1"

#: ``ok``: the answer parsed into a verdict; ``unparseable``: it did not (recorded as it
#: came, never guessed, counted as unjudged).
ParseStatus = Literal["ok", "unparseable"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS verdicts (
    seq                 INTEGER PRIMARY KEY AUTOINCREMENT,
    record_id           TEXT NOT NULL,
    judge_digest        TEXT NOT NULL,
    registration_digest TEXT NOT NULL,
    chain_index         INTEGER NOT NULL CHECK (chain_index >= 0),
    record_hash         TEXT NOT NULL,
    body                TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS one_verdict_per_run_and_judge
    ON verdicts (record_id, judge_digest);
CREATE UNIQUE INDEX IF NOT EXISTS one_verdict_per_chain_position
    ON verdicts (registration_digest, chain_index);
CREATE TRIGGER IF NOT EXISTS verdicts_no_update BEFORE UPDATE ON verdicts
BEGIN SELECT RAISE(ABORT, 'verdicts are append-only: UPDATE is refused'); END;
CREATE TRIGGER IF NOT EXISTS verdicts_no_delete BEFORE DELETE ON verdicts
BEGIN SELECT RAISE(ABORT, 'verdicts are append-only: DELETE is refused'); END;
"""


class Verdict(BaseModel):
    """One judge's verdict on one run, with everything needed to audit it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    verdict_id: str = Field(min_length=8, max_length=64)
    record_id: str
    registration_id: str
    registration_digest: str = Field(pattern=DIGEST_PATTERN)
    judge: str  # the judge's id (its outcome when it gives none)
    judge_digest: str = Field(pattern=DIGEST_PATTERN)
    outcome: Literal["completed", "native_self_service"]
    rubric: str  # experiment-relative path
    rubric_version: str
    rubric_digest: str = Field(pattern=DIGEST_PATTERN)
    driver: str
    model_requested: str | None = None
    model_returned: str | None = None
    prompt: str
    raw_response: str
    parse: ParseStatus
    #: the verdict: the need was met (completed / self-served); None when unparseable
    met: bool | None = None
    #: native judge: what the need requires (knowledge, private_state, action, fresh_data)
    need: str | None = None
    evidence: str | None = None
    #: why the verdict differs from the judge's answer (a rule enforced after it), or None
    overruled: str | None = None
    cost_usd: float | None = Field(None, ge=0)
    started_at: datetime
    finished_at: datetime
    chain: ChainLink | None = None


class DuplicateVerdict(Exception):
    """The run already has a verdict of this judge."""


def link_hash(verdict: Verdict, index: int, prev: str) -> str:
    body = verdict.model_dump(mode="json", exclude={"chain"})
    document = {"format": FORMAT, "index": index, "prev": prev, "verdict": body}
    return "sha256:" + hashlib.sha256(canonical_bytes(document)).hexdigest()


class VerdictStore:
    """Verdicts in SQLite (WAL), append-only, hash-chained per registration digest."""

    def __init__(self, runs: Path) -> None:
        folder = runs if runs.suffix != ".sqlite" else runs.parent
        self.path = folder / VERDICTS_FILENAME
        self._conn: sqlite3.Connection | None = None

    def _connect(self, create: bool) -> sqlite3.Connection | None:
        if self._conn is not None:
            return self._conn
        if not self.path.exists():
            if not create:
                return None
            self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        if create:
            conn.executescript(_SCHEMA)
        self._conn = conn
        return conn

    def append(self, verdict: Verdict) -> Verdict:
        """Link ``verdict`` to its chain and write it in one transaction.

        DuplicateVerdict when the run already has this judge's verdict.
        """
        conn = self._connect(create=True)
        assert conn is not None
        conn.execute("BEGIN IMMEDIATE")
        try:
            row = conn.execute(
                "SELECT chain_index, record_hash FROM verdicts WHERE registration_digest = ? "
                "ORDER BY chain_index DESC LIMIT 1",
                (verdict.registration_digest,),
            ).fetchone()
            index, prev = (0, verdict.registration_digest) if row is None else (row[0] + 1, row[1])
            link = ChainLink(index=index, prev=prev, hash=link_hash(verdict, index, prev))
            linked = verdict.model_copy(update={"chain": link})
            conn.execute(
                "INSERT INTO verdicts (record_id, judge_digest, registration_digest, "
                "chain_index, record_hash, body) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    verdict.record_id,
                    verdict.judge_digest,
                    verdict.registration_digest,
                    index,
                    link.hash,
                    linked.model_dump_json(),
                ),
            )
            conn.execute("COMMIT")
        except sqlite3.IntegrityError as exc:
            conn.execute("ROLLBACK")
            raise DuplicateVerdict(str(exc)) from None
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return linked

    def verdicts(self, registration_digest: str) -> list[Verdict]:
        """The digest's verdicts in chain order, after the chain verifies (else exit 3)."""
        conn = self._connect(create=False)
        if conn is None:
            return []
        rows = conn.execute(
            "SELECT chain_index, record_hash, body FROM verdicts WHERE registration_digest = ? "
            "ORDER BY chain_index",
            (registration_digest,),
        ).fetchall()
        out: list[Verdict] = []
        prev = registration_digest
        for position, (index, stored_hash, body) in enumerate(rows):
            try:
                verdict = Verdict.model_validate_json(body)
            except ValueError:
                raise self._broken(f"verdict {position} cannot be read") from None
            link = verdict.chain
            if (
                link is None
                or index != position
                or link.index != position
                or link.prev != prev
                or link.hash != stored_hash
                or link_hash(verdict, position, prev) != stored_hash
            ):
                raise self._broken(f"verdict {position} does not continue the chain")
            prev = stored_hash
            out.append(verdict)
        return out

    def judged(self, registration_digest: str, judge_digest: str) -> set[str]:
        """Record ids that already have this judge's verdict."""
        conn = self._connect(create=False)
        if conn is None:
            return set()
        rows = conn.execute(
            "SELECT record_id FROM verdicts WHERE registration_digest = ? AND judge_digest = ?",
            (registration_digest, judge_digest),
        ).fetchall()
        return {str(r[0]) for r in rows}

    def spent_usd(self, registration_digest: str) -> float:
        return sum(v.cost_usd or 0.0 for v in self.verdicts(registration_digest))

    def _broken(self, what: str) -> IntegrityError:
        return IntegrityError(
            f"the verdict store's hash chain is broken: {what} (a verdict was edited, "
            "removed or reordered)",
            file=str(self.path),
        )

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def as_json(verdict: Verdict) -> dict[str, Any]:
    return verdict.model_dump(mode="json")
