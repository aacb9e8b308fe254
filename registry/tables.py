"""One verification rule for every append-only table (issue 40; DESIGN.md invariant 14).

Every append-only table keeps a hashed body (a run record, a verdict, a gold label, a
ledger line) and, beside it, columns a reader indexes or queries: the run store's unit
columns, the verdict store's ``judge_digest`` (the one-verdict-per-run slot), the gold
table's ``annotator``, a claim's ``experiment``, an anchor's ``id``. The hash covers the
body only, so a column edited on its own would go unseen, and a reader that trusts it
(``judge`` asking which runs are judged, an index refusing a second verdict) is misled.

The rule is the same for every table: each such column equals the value its hashed body
states, checked by ``verify`` and by every reader, exit 3 otherwise, naming the table and
the column. Each table declares here, once, which columns it keeps and how to read them
from the body (:class:`ChainedTable`, :func:`declare`); its store checks each row with
:meth:`ChainedTable.problem`. A test compares the declarations with the SQLite schemas
(every column that is not the chain's own is declared), so a new table or column cannot
forget the check.

Tables of the registry's ledger (claims, anchors) have no separate columns: a line is its
own body, hashed by the next line and mirrored in a file. What a reader queries them by
(a claim's experiment and id, an anchor's id) names a registration, and must be what the
registration's own line states for its digest (:data:`CLAIMS`, :data:`ANCHORS`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

#: Columns of a chained SQLite table that are the chain itself or the row's bookkeeping
#: (its write order, its link, the body, when it was written), not copied from the body.
CHAIN_COLUMNS = frozenset({"seq", "chain_index", "prev_hash", "record_hash", "body", "written_at"})


@dataclass(frozen=True)
class ChainedTable:
    """One append-only table: the columns it copies from each row's hashed body."""

    name: str  # the SQL table (or the ledger event), as problems name it
    noun: str  # what one row holds: "record", "verdict", "gold label", "claim", "anchor"
    columns: tuple[str, ...]  # every column a reader indexes or queries
    #: the body's values of ``columns`` as the row stores them (default: its attributes,
    #: or its keys for a mapping)
    read: Callable[[Any], tuple[object, ...]] | None = None

    def body_values(self, body: Any) -> tuple[object, ...]:
        """What ``body`` (the validated hashed body) states for each column."""
        if self.read is not None:
            return self.read(body)
        if isinstance(body, dict):
            return tuple(body.get(name) for name in self.columns)
        values = attrgetter(*self.columns)(body)
        return values if len(self.columns) > 1 else (values,)

    def disagreeing(self, stated: Sequence[object], body: Any) -> list[str]:
        """The columns whose stored value is not the body's (type included)."""
        actual = self.body_values(body)
        if tuple(stated) == actual:
            return []
        return [
            name
            for name, a, b in zip(self.columns, stated, actual, strict=True)
            if a != b or type(a) is not type(b)
        ]

    def problem(self, stated: Sequence[object], body: Any) -> str | None:
        """Why the row's columns ``stated`` (in :attr:`columns` order) are not its body's,
        or None; the message names every disagreeing column (where it is, the table and
        the row, is the store's to say)."""
        names = self.disagreeing(stated, body)
        if not names:
            return None
        return f"the row's column(s) {', '.join(names)} disagree with its {self.noun}"


#: Every declared table, by name.
TABLES: dict[str, ChainedTable] = {}


def declare(table: ChainedTable) -> ChainedTable:
    """Register ``table`` (its name once) and return it."""
    known = TABLES.get(table.name)
    if known is not None and known != table:
        raise ValueError(f"table {table.name!r} is declared twice")
    TABLES[table.name] = table
    return table


#: A locked-split claim names its registration by digest; its id and experiment (what
#: ``claim_of`` queries) and split must be the registration line's.
CLAIMS = declare(ChainedTable("claims", "claim", ("id", "experiment", "split")))
#: A run-chain or verdicts anchor names its registration by digest; its id (how readers
#: and problems name the chain) must be the registration line's.
ANCHORS = declare(ChainedTable("anchors", "anchor", ("id",)))
#: A judge addendum (a judge added after registration) names its registration by digest;
#: its id (how readers find the registration's judges) must be the registration line's.
ADDENDA = declare(ChainedTable("judge-addenda", "judge addendum", ("id",)))


def ledger_problems(
    events: Sequence[dict[str, Any]], kinds: dict[str, ChainedTable]
) -> list[tuple[dict[str, Any], str]]:
    """(event, why) for every ledger event of ``kinds`` (event name -> its table) whose
    queried fields disagree with the registration line of its digest, or whose digest no
    registration line has."""
    registered: dict[object, dict[str, Any]] = {}
    for event in events:
        if event.get("event") == "registration":
            registered.setdefault(event.get("digest"), event)
    out = []
    for event in events:
        table = kinds.get(str(event.get("event")))
        if table is None:
            continue
        owner = registered.get(event.get("digest"))
        if owner is None:
            out.append((event, f"the {table.noun}'s digest is no registration's"))
            continue
        stated = tuple(event.get(name) for name in table.columns)
        names = table.disagreeing(stated, owner)
        if names:
            why = (
                f"the {table.noun}'s field(s) {', '.join(names)} disagree with the registration "
                f"line of its digest (table {table.name})"
            )
            out.append((event, why))
    return out
