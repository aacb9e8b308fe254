"""Visible menus (seed 3.2, V): the operational tools plus route neighbours.

A route neighbour is an operational tool moved to another route by changing exactly one
of its three coordinates (workspace, region or collection). It keeps the tool's
operation, kind and connector, so the menu grows in candidates and context without
ambiguity about which tools apply (the request names the route), and it never returns
a record: no record of the family lives on its route (:mod:`.world`).

Menus are nested (each larger menu contains the smaller one): the neighbours are ranked
once by a seeded hash and a menu of ``n`` takes the operational tools and the first
``n - k`` of them. The displayed order is another seeded hash of the name, the same for
every size, so the operational tools are not always first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from prereg.experiments.toolbottleneck.family import Route
from prereg.experiments.toolbottleneck.world import Function, derive, exposed_name

WORKSPACES = (
    "northwind", "contoso", "fabrikam", "globex", "initech", "umbrella", "hooli", "vandelay",
    "wayne", "stark", "tyrell", "cyberdyne", "soylent", "acme", "wonka", "oscorp", "aperture",
    "massive", "duff", "monarch", "nakatomi", "prestige", "sterling", "virtucon", "dunder",
    "bluth", "krusty", "weyland", "gekko", "lacuna", "rekall", "yoyodyne",
)  # fmt: skip
REGIONS = (
    "eu-west", "eu-central", "eu-north", "us-east", "us-west", "us-central", "ap-south",
    "ap-east", "ap-northeast", "ap-southeast", "ca-central", "sa-east", "me-central",
    "af-south", "au-east", "uk-south",
)  # fmt: skip
COLLECTION_SUFFIXES = (
    "archive", "sandbox", "staging", "legacy", "partner", "internal", "external", "backup",
    "mirror", "training", "draft", "shared", "personal", "team", "historic", "pending",
    "closed", "imported", "test", "review", "audit", "temp", "export", "public",
)  # fmt: skip


def _route(workspace: str, region: str, collection: str) -> Route:
    # constructed, not validated: a neighbour's collection may exceed a slug's length
    return Route.model_construct(workspace=workspace, region=region, collection=collection)


def neighbour_routes(route: Route) -> list[Route]:
    """Every route differing from ``route`` in exactly one coordinate."""
    out = [_route(w, route.region, route.collection) for w in WORKSPACES if w != route.workspace]
    out += [_route(route.workspace, r, route.collection) for r in REGIONS if r != route.region]
    out += [
        _route(route.workspace, route.region, f"{route.collection}-{s}")
        for s in COLLECTION_SUFFIXES
    ]
    return out


def differing_coordinates(a: Route, b: Route) -> int:
    return sum(getattr(a, c) != getattr(b, c) for c in ("workspace", "region", "collection"))


def route_neighbours(operational: Sequence[Function], family_id: str, seed: int) -> list[Function]:
    """All route neighbours of the operational tools, in the seeded nesting order."""
    out: dict[str, Function] = {}
    taken = {fn.name for fn in operational}
    for fn in operational:
        for route in neighbour_routes(fn.route):
            name = exposed_name(fn.base, route)
            if name in taken or name in out:
                continue  # a hash collision of route codes: skip rather than shadow
            out[name] = Function(
                name=name,
                base=fn.base,
                operation=fn.operation,
                kind=fn.kind,
                connector=fn.connector,
                route=route,
                summary=fn.summary,
                operational=False,
                sets=fn.sets,
            )
    return sorted(out.values(), key=lambda f: derive("neighbour", family_id, seed, f.name))


def menu(
    operational: Sequence[Function],
    neighbours: Sequence[Function],
    size: int,
    family_id: str,
    seed: int,
) -> list[Function]:
    """The ``size``-schema menu: the operational tools and the first neighbours, shuffled."""
    chosen = [*operational, *neighbours[: size - len(operational)]]
    return sorted(chosen, key=lambda f: derive("menu-order", family_id, seed, f.name))


def schemas(functions: Sequence[Function]) -> list[dict[str, object]]:
    return [fn.schema() for fn in functions]


def by_name(functions: Sequence[Function]) -> Mapping[str, Function]:
    return {fn.name: fn for fn in functions}
