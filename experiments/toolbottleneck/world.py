"""The sandbox a compiled variant runs in: functions, records with opaque ids, execution.

Everything is a pure function of its inputs: record ids, lookup keys and orderings are
derived from sha256 over (family, seed, purpose), never from a global random state,
so the same family and seed compile to the same bytes on every machine.

A function has an operation (``search`` a kind by its lookup key, ``read`` a record by
id, ``act`` on a record by id) and a route (workspace, region, collection). It only
ever touches records of its own kind on its own route; that is why a route neighbour
(a function differing from an operational tool in one coordinate) never returns a
record: no record of the family lives on a neighbour's route.

Record fields hold scalars, except a public handoff's ``next_handoff`` object
(``{"connector": ..., "query": ...}``, the seed's system prompt: "A next_handoff object
identifies the connector and exact search query for the next current record"; reading
5). Internal fields (``ref``, ``<kind>_ref`` links, ``next_handoff``) use underscores,
which fact names (slugs) cannot, so they never collide with a decision fact.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from prereg.experiments.toolbottleneck.family import FactValue, Route

#: (record id, field) -> value: the changes a program made to the seed records.
Changes = Mapping[tuple[str, str], FactValue]

#: The field of a public handoff record and the keys of its object (reading 5).
HANDOFF_FIELD = "next_handoff"
HANDOFF_KEYS = ("connector", "query")
#: A record field's value: a scalar, or a handoff's ``{"connector", "query"}`` object.
FieldValue = FactValue | Mapping[str, str]


def handoff(connector: str, query: str) -> dict[str, str]:
    """The ``next_handoff`` object of a public handoff record."""
    return {"connector": connector, "query": query}


def handoff_of(fields: Mapping[str, object]) -> tuple[str, str] | None:
    """(connector, query) of a record's ``next_handoff`` object, or None when the record
    carries none or the object is not exactly two strings (an invalid handoff)."""
    value = fields.get(HANDOFF_FIELD)
    if not isinstance(value, Mapping) or set(value) != set(HANDOFF_KEYS):
        return None
    connector, query = value["connector"], value["query"]
    if not isinstance(connector, str) or not isinstance(query, str) or not query:
        return None
    return connector, query


def derive(*parts: object) -> str:
    """Hex sha256 of the parts, NUL-separated: the only source of "randomness" here."""
    return hashlib.sha256("\x00".join(str(p) for p in parts).encode("utf-8")).hexdigest()


def route_code(route: Route) -> str:
    """A short code of a route; it makes the names of same-named tools on two routes differ."""
    return derive("route", route.text)[:8]


def exposed_name(base: str, route: Route) -> str:
    return f"{base}_{route_code(route)}"


@dataclass(frozen=True)
class Function:
    """A function schema as a catalog or a menu holds it, and what it does when called."""

    name: str
    base: str
    operation: str
    kind: str
    connector: str
    route: Route
    summary: str
    operational: bool = False
    sets: tuple[str, FactValue] | None = None
    where: str = field(default="", repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "where", self.route.text)

    @property
    def arg(self) -> str:
        return "query" if self.operation == "search" else "id"

    def schema(self) -> dict[str, Any]:
        """What the model is shown: name, description (with the route), input schema."""
        verb = {"search": "Search", "read": "Read", "act": "Update"}.get(self.operation, "Use")
        description = (
            f"{verb} {self.kind} records via the {self.connector} connector. {self.summary} "
            f"workspace={self.route.workspace} region={self.route.region} "
            f"collection={self.route.collection}"
        ).replace("  ", " ")
        what = "exact lookup key" if self.arg == "query" else "record id"
        return {
            "name": self.name,
            "description": description,
            "input_schema": {
                "type": "object",
                "properties": {self.arg: {"type": "string", "description": what}},
                "required": [self.arg],
                "additionalProperties": False,
            },
        }


@dataclass(frozen=True)
class Record:
    """A seed record: opaque id, kind, route, lookup key and scalar fields."""

    id: str
    kind: str
    route: Route
    ref: str
    fields: Mapping[str, FieldValue]
    where: str = field(default="", repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "where", self.route.text)


@dataclass(frozen=True)
class Returned:
    """One object of a call's result: what every encoding must decode back to."""

    id: str
    kind: str
    fields: Mapping[str, FieldValue]

    def value(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "fields": plain_fields(self.fields)}


def plain_fields(fields: Mapping[str, FieldValue]) -> dict[str, Any]:
    """The fields as plain JSON values (a handoff object as a dict)."""
    return {k: dict(v) if isinstance(v, Mapping) else v for k, v in fields.items()}


@dataclass(frozen=True)
class Call:
    """One call of a program: the exposed function name and its single argument."""

    function: str
    arg: str

    def document(self, functions: Mapping[str, Function]) -> dict[str, Any]:
        fn = functions.get(self.function)
        key = fn.arg if fn is not None else "arg"
        return {"function": self.function, "args": {key: self.arg}}


@dataclass(frozen=True)
class World:
    """Records and the functions that can touch them, plus what the request reveals."""

    records: tuple[Record, ...]
    functions: Mapping[str, Function]
    request_literals: frozenset[str]
    _by_id: Mapping[str, Record] = field(default_factory=dict, repr=False, compare=False)
    _by_key: Mapping[tuple[str, str, str], tuple[Record, ...]] = field(
        default_factory=dict, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_id", {r.id: r for r in self.records})
        index: dict[tuple[str, str, str], list[Record]] = {}
        for r in self.records:
            index.setdefault((r.kind, r.where, r.ref), []).append(r)
        object.__setattr__(self, "_by_key", {k: tuple(v) for k, v in index.items()})

    def record(self, record_id: str) -> Record | None:
        return self._by_id.get(record_id)

    def lookup(self, kind: str, where: str, ref: str) -> tuple[Record, ...]:
        """Records of ``kind`` on route ``where`` whose lookup key is ``ref``."""
        return self._by_key.get((kind, where, ref), ())


def _matches(fn: Function, record: Record) -> bool:
    return record.kind == fn.kind and record.where == fn.where


def execute(
    fn: Function, arg: str, world: World, changes: Changes
) -> tuple[list[Returned], dict[tuple[str, str], FactValue]]:
    """Run one call; the result objects and the changes after it (inputs untouched)."""
    after = dict(changes)
    if fn.operation == "search":
        hits = world.lookup(fn.kind, fn.where, arg)
        return [Returned(r.id, r.kind, {"ref": r.ref}) for r in hits], after
    record = world.record(arg)
    if record is None or not _matches(fn, record):
        return [], after
    if fn.operation == "read":
        fields: dict[str, FieldValue] = {"ref": record.ref, **record.fields}
        for (rid, name), value in changes.items():
            if rid == record.id:
                fields[name] = value
        return [Returned(record.id, record.kind, fields)], after
    if fn.operation == "act" and fn.sets is not None:
        name, value = fn.sets
        after[(record.id, name)] = value
        return [Returned(record.id, record.kind, {name: value})], after
    return [], after


def strings_in(results: Iterable[Returned]) -> set[str]:
    """Every string a result reveals (ids, string field values and the strings of a
    ``next_handoff`` object): what later calls may pass."""
    out: set[str] = set()
    for item in results:
        out.add(item.id)
        for v in item.fields.values():
            if isinstance(v, str):
                out.add(v)
            elif isinstance(v, Mapping):
                out.update(x for x in v.values() if isinstance(x, str))
    return out
