"""Registered catalogs and frozen retrievers (seed 3.2, R; the Discovery block).

A catalog holds the operational tools, their route neighbours and distractor functions
of other enterprise connectors. Catalogs are nested: one seeded ranking of everything
that is not operational, and a catalog of ``n`` takes the operational tools and the
first ``n - k`` of that ranking, so the 32-function catalog is inside the 512 one,
which is inside the 2,048 one.

A frozen retriever (it never sees the model) turns the request into a shortlist:

- ``flat-lexical``: every function scored by how many distinct request words occur in
  its name and description; the top ``k``, ties broken by a seeded hash;
- ``connector-first``: connector instances (a connector on one route) scored by how
  many of their whole terms (connector name, record kinds, the three route coordinates,
  hyphenated terms kept whole so ``eu-central`` does not match ``eu-west``) occur in the
  request; their functions, best instance first, each instance's functions in
  flat-lexical order, until ``k`` are taken.

Availability A (every required function is in the shortlist) is fixed here, before any
model runs; selection S is what the model does with the shortlist, measured at run
time and null until then. Success is scored intention-to-treat as A x S.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from prereg.experiments.toolbottleneck.family import RetrieverName, Route
from prereg.experiments.toolbottleneck.menu import COLLECTION_SUFFIXES, REGIONS, WORKSPACES
from prereg.experiments.toolbottleneck.world import Function, derive, exposed_name

#: Distractor connectors and their record kinds (accounting, email, files, calendar, ...).
CONNECTORS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("ledger", ("invoice", "payment", "journal-entry", "vendor")),
    ("mailbox", ("message", "thread", "draft", "mailing-list")),
    ("drive", ("file", "folder", "share-link", "revision")),
    ("calendar", ("event", "invitation", "room", "availability")),
    ("crm", ("account", "opportunity", "lead", "contact")),
    ("helpdesk", ("ticket", "case", "sla", "queue")),
    ("people", ("employee", "leave-request", "position", "review")),
    ("procurement", ("purchase-order", "requisition", "contract", "supplier")),
    ("inventory", ("item", "warehouse", "shipment", "stock-count")),
    ("projects", ("task", "milestone", "project", "timesheet")),
    ("expenses", ("expense-report", "receipt", "card-transaction", "reimbursement")),
    ("wiki", ("page", "space", "comment", "attachment")),
)
COLLECTIONS = ("support", "finance", "sales", "operations", "legal", "people", "engineering")
OPERATIONS = ("search", "read", "act")
_WORD = re.compile(r"[a-z0-9]+")
_TERM = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")


def words(text: str) -> frozenset[str]:
    """Flat lexical tokens: runs of letters and digits (``eu-west`` is ``eu``, ``west``)."""
    return frozenset(_WORD.findall(text.lower()))


def terms(text: str) -> frozenset[str]:
    """Whole hyphenated terms (``eu-west`` stays one term): how the router reads a route."""
    return frozenset(_TERM.findall(text.lower()))


def function_words(fn: Function) -> frozenset[str]:
    schema = fn.schema()
    return words(f"{fn.base} {schema['description']}")


def _distractor(index: int, family_id: str, seed: int) -> Function:
    h = derive("distractor", family_id, seed, index)
    connector, kinds = CONNECTORS[int(h[0:4], 16) % len(CONNECTORS)]
    kind = kinds[int(h[4:8], 16) % len(kinds)]
    operation = OPERATIONS[int(h[8:12], 16) % len(OPERATIONS)]
    collection = COLLECTIONS[int(h[12:16], 16) % len(COLLECTIONS)]
    if int(h[16:18], 16) % 3 == 0:
        collection += "-" + COLLECTION_SUFFIXES[int(h[18:22], 16) % len(COLLECTION_SUFFIXES)]
    route = Route.model_construct(
        workspace=WORKSPACES[int(h[22:26], 16) % len(WORKSPACES)],
        region=REGIONS[int(h[26:30], 16) % len(REGIONS)],
        collection=collection,
    )
    base = f"{operation}_{kind.replace('-', '_')}" + ("s" if operation == "search" else "")
    return Function(
        name=exposed_name(base, route),
        base=base,
        operation=operation,
        kind=kind,
        connector=connector,
        route=route,
        summary="",
        operational=False,
    )


def catalog_pool(
    operational: Sequence[Function],
    neighbours: Sequence[Function],
    largest: int,
    family_id: str,
    seed: int,
) -> list[Function]:
    """The operational tools, then every other function in the seeded nesting order;
    ``pool[:n]`` is the catalog of ``n``."""
    taken = {fn.name for fn in operational}
    others: dict[str, Function] = {fn.name: fn for fn in neighbours if fn.name not in taken}
    index = 0
    while len(others) + len(operational) < largest:
        fn = _distractor(index, family_id, seed)
        index += 1
        if fn.name not in taken and fn.name not in others:
            others[fn.name] = fn
    ranked = sorted(others.values(), key=lambda f: derive("catalog", family_id, seed, f.name))
    return [*operational, *ranked[: largest - len(operational)]]


def _flat_order(
    functions: Sequence[Function], query: frozenset[str], family_id: str, seed: int
) -> list[Function]:
    return sorted(
        functions,
        key=lambda f: (-len(query & function_words(f)), derive("tie", family_id, seed, f.name)),
    )


def _instance_terms(members: Sequence[Function]) -> frozenset[str]:
    fn = members[0]
    route = fn.route
    kinds = {m.kind for m in members}
    return frozenset({fn.connector, *kinds, route.workspace, route.region, route.collection})


def shortlist(
    catalog: Sequence[Function],
    request: str,
    retriever: RetrieverName,
    size: int,
    family_id: str,
    seed: int,
) -> list[Function]:
    """The retriever's ``size`` functions for ``request``, best first."""
    query = words(request)
    if retriever == "flat-lexical":
        return _flat_order(catalog, query, family_id, seed)[:size]
    query_terms = terms(request)
    instances: dict[tuple[str, str], list[Function]] = {}
    for fn in catalog:
        instances.setdefault((fn.connector, fn.route.text), []).append(fn)
    ranked = sorted(
        instances.items(),
        key=lambda item: (
            -len(query_terms & _instance_terms(item[1])),
            derive("tie", family_id, seed, *item[0]),
        ),
    )
    out: list[Function] = []
    for _, members in ranked:
        out.extend(_flat_order(members, query, family_id, seed))
        if len(out) >= size:
            break
    return out[:size]


@dataclass(frozen=True)
class Availability:
    """Whether the retriever put every required function in the shortlist (A)."""

    required: tuple[str, ...]
    shortlisted: tuple[str, ...]

    @property
    def missing(self) -> tuple[str, ...]:
        return tuple(name for name in self.required if name not in self.shortlisted)

    @property
    def available(self) -> bool:
        return not self.missing


@dataclass(frozen=True)
class DiscoveryOutcome:
    """A and S kept apart. ``selected`` is None when not measured, and when nothing
    could be selected (the required tools were never retrieved)."""

    available: bool
    selected: bool | None

    def __post_init__(self) -> None:
        if not self.available and self.selected is not None:
            raise ValueError("selection is undefined when the required tools were not retrieved")

    @property
    def itt_success(self) -> bool:
        """Intention-to-treat success A x S: an unretrieved tool counts as a failure."""
        return self.available and self.selected is True
