"""The verdict and gold chains pinned in the ledger, as the run chains are (issue 18).

A chain verifies link by link, so removing its newest links (after dropping the
store's DELETE trigger and putting it back) leaves a shorter chain that still
verifies. What catches that is a head held elsewhere: at the end of every ``prereg
judge`` pass, after ``--gold`` and ``--import``, and at every ``analyse``, the heads of
the registration's verdict and gold chains (count and last hash of each) are written to
the ledger in one ``verdicts-anchor`` line (mirrored in ``registry/anchors/``,
:meth:`prereg.registry.registrations.Registry.anchor_verdicts`). Every anchor must then sit
on the stored chains: a chain shorter than a pinned count, or whose link at that count
is not the pinned one, fails (``verify`` names it, ``judge`` and ``analyse`` refuse,
exit 3). An empty chain pins the registration digest (its links' first ``prev``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from prereg.core.errors import IntegrityError
from prereg.registry.registrations import VERDICT_CHAINS, Entry, Registry
from prereg.registry.verify import Problem
from prereg.runners.judging.gold import GoldLabel
from prereg.runners.judging.verdicts import Verdict, VerdictStore

#: The noun of each anchored chain's items, as problems name them.
NOUNS = {"verdicts": "verdict", "gold": "gold label"}
MAX_LISTED = 20


def heads_of(
    verdicts: Sequence[Verdict], gold: Sequence[GoldLabel], digest: str
) -> dict[str, dict[str, Any]]:
    """{"verdicts": {"count", "head"}, "gold": {...}} of two verified chains."""
    out: dict[str, dict[str, Any]] = {}
    for name, items in (("verdicts", verdicts), ("gold", gold)):
        last = items[-1].chain if items else None
        out[name] = {"count": len(items), "head": digest if last is None else last.hash}
    return out


def _one(anchor: Mapping[str, Any], name: str, digest: str, stored: list[str]) -> str | None:
    """Why one anchored chain head is not on the stored chain ``stored`` (its hashes)."""
    noun = NOUNS[name]
    pinned = anchor.get(name)
    count = pinned.get("count") if isinstance(pinned, dict) else None
    head = pinned.get("head") if isinstance(pinned, dict) else None
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        return "the anchor has no valid count"
    if count == 0:
        return None if head == digest else "an empty anchor with a head"
    if count > len(stored):
        return (
            f"the registry pinned {count} {noun}(s), the verdict store holds {len(stored)}: "
            f"{noun}s were removed"
        )
    if stored[count - 1] != head:
        return (
            f"{noun} {count} of the chain is not the one the registry pinned: the chain was "
            "rewritten"
        )
    return None


def anchor_problems(
    registry: Registry, digest: str, hashes: Mapping[str, list[str]]
) -> list[Problem]:
    """Every verdicts-anchor of ``digest`` against the stored chains (``hashes``: chain
    name -> its links' hashes in chain order)."""
    problems = []
    for anchor in registry.verdict_anchors(digest):
        for name in VERDICT_CHAINS:
            why = _one(anchor, name, digest, list(hashes.get(name, [])))
            if why is not None:
                where = (
                    f"{NOUNS[name]} chain of '{anchor.get('id')}' (anchor at ledger seq "
                    f"{anchor.get('seq')})"
                )
                problems.append(Problem("verdicts-anchor", where, why))
    return problems


def verified_judgements(
    registry: Registry, entry: Entry, folder: Path
) -> tuple[list[Verdict], list[GoldLabel]]:
    """``entry``'s verdicts and gold labels, after both chains verify link by link (the
    store) and against every anchor the ledger holds for them; else IntegrityError
    (exit 3) naming the chain."""
    with VerdictStore(folder) as store:
        verdicts = store.verdicts(entry.digest)
        gold = store.gold(entry.digest)
        where = str(store.path)
    hashes = {
        "verdicts": [v.chain.hash for v in verdicts if v.chain is not None],
        "gold": [g.chain.hash for g in gold if g.chain is not None],
    }
    problems = anchor_problems(registry, entry.digest, hashes)
    if problems:
        raise IntegrityError(
            f"the verdict or gold chain of '{entry.id}' fails verification against the "
            "registry's anchors, so it is not used; run `prereg verify`",
            file=where,
            details=[f"{p.kind}: {p.entry}: {p.message}" for p in problems[:MAX_LISTED]],
        )
    return verdicts, gold


def anchor_judgements(registry: Registry, entry: Entry, folder: Path) -> dict[str, dict[str, Any]]:
    """Verify ``entry``'s verdict and gold chains and pin their heads in the ledger
    (nothing is written while both are empty); returns the heads."""
    verdicts, gold = verified_judgements(registry, entry, folder)
    heads = heads_of(verdicts, gold, entry.digest)
    if verdicts or gold:
        registry.anchor_verdicts(entry, heads)
    return heads
