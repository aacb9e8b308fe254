"""The stateful service: an in-memory store of records with typed operations.

Each run unit gets a fresh :class:`ServiceStore` seeded from the experiment's
service file, so units never share state. Every operation call is validated
against its typed parameters and logged (:class:`OpEvent`); the oracles read the
log and the state the store ends in, never a model's opinion.

Reads never mutate (a pure read returning a deep copy is what makes the
no-mutation oracle meaningful); destructive operations refuse to run without a
valid typed confirmation.

State is copy on write: a fresh store, a snapshot and the store after it share their
records, and an operation copies a record before it changes it for the first time since
the last snapshot (:meth:`ServiceStore._writable`). A unit's store, its before and after
snapshots and every transaction's rollback point cost one dict per collection, not a
deep copy of every record (issue 15: deep copies per unit were the second cost of the
provider path). No record reachable from ``state`` or a snapshot is ever changed in place
unless this store copied it itself, so units still never share state, and the
experiment's seed records are never changed.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from prereg.experiments.models import (
    CollectionSpec,
    FieldType,
    OperationSpec,
    ParamSpec,
    ServiceFile,
)
from prereg.experiments.text import content_words, normalise

State = dict[str, dict[str, dict[str, Any]]]


class OperationError(Exception):
    """A call the service refused: bad arguments, unknown record, missing confirmation."""


@dataclass(frozen=True)
class OpEvent:
    """One operation the store was asked to run (whether or not it succeeded).

    ``confirmed`` is None for non-destructive operations, else whether the call
    carried a valid confirmation.
    """

    op: str
    args: dict[str, Any]
    ok: bool
    error: str | None
    mutated: bool
    destructive: bool
    confirmed: bool | None


def type_ok(kind: FieldType, value: Any) -> bool:
    """Whether ``value`` is a JSON value of field type ``kind``."""
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "string_list":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    return False  # pragma: no cover - FieldType is closed


def _id_number(record_id: str) -> int:
    match = re.search(r"(\d+)$", record_id)
    return int(match.group(1)) if match else 0


class ServiceStore:
    """Collections of records (``state[collection][id] -> record``) and typed operations."""

    def __init__(self, spec: ServiceFile) -> None:
        self.spec = spec
        # the seed records themselves, shared until an operation writes one (copy on write)
        self.state: State = {
            name: {str(rec["id"]): rec for rec in coll.records}
            for name, coll in spec.collections.items()
        }
        #: (collection, id) of the records this store copied since the last snapshot: only
        #: these may be changed in place
        self._owned: set[tuple[str, str]] = set()
        #: the next free id number per collection (one past the seed records' largest),
        #: filled on the collection's first create: most units create nothing, and
        #: scanning every seed id per unit was the store's main construction cost
        self._next_id: dict[str, int] = {}
        self.log: list[OpEvent] = []

    # ---- state ---------------------------------------------------------------------------

    def snapshot(self) -> State:
        """The current state, frozen (for oracles and rollbacks).

        The snapshot shares its records with the store; the store copies a record
        before changing it again, so later operations never show through. Treat it
        as read-only.
        """
        self._owned.clear()
        return {name: dict(records) for name, records in self.state.items()}

    def _writable(self, collection: str, record_id: str) -> dict[str, Any]:
        """The record, copied first unless this store already owns it (copy on write)."""
        record = self.state[collection][record_id]
        if (collection, record_id) not in self._owned:
            record = copy.deepcopy(record)
            self.state[collection][record_id] = record
            self._owned.add((collection, record_id))
        return record

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Roll the state back if the block raises (composite tools are all-or-nothing)."""
        saved = self.snapshot()
        saved_next = dict(self._next_id)
        try:
            yield
        except BaseException:
            self.state = saved
            self._next_id = saved_next
            self._owned.clear()  # the saved records may be shared with an earlier snapshot
            raise

    # ---- calls ---------------------------------------------------------------------------

    def call(self, op_name: str, args: Mapping[str, Any]) -> Any:
        """Run operation ``op_name``; returns a JSON value or raises OperationError."""
        op = self.spec.operations.get(op_name)
        if op is None:
            raise OperationError(f"unknown operation '{op_name}'")
        args = dict(args)
        confirmed: bool | None = None
        if op.destructive:
            confirmed = self._confirmation_ok(op, args)
        try:
            self._check_args(op, args)
            if op.destructive and not confirmed:
                conf = op.confirmation
                assert conf is not None  # the loader requires it for destructive operations
                raise OperationError(
                    f"'{op_name}' is destructive: pass '{conf.param}' equal to the target's "
                    f"{conf.equals_field} to confirm"
                )
            result = self._run(op, args)
        except OperationError as exc:
            self.log.append(
                OpEvent(
                    op_name, copy.deepcopy(args), False, str(exc), False, op.destructive, confirmed
                )
            )
            raise
        self.log.append(
            OpEvent(op_name, copy.deepcopy(args), True, None, op.mutates, op.destructive, confirmed)
        )
        return result

    def _confirmation_ok(self, op: OperationSpec, args: Mapping[str, Any]) -> bool:
        conf = op.confirmation
        if conf is None or op.key is None:
            return False
        given = args.get(conf.param)
        target = self.state[op.collection].get(str(args.get(op.key)))
        if not isinstance(given, str) or target is None:
            return False
        expected = target.get(conf.equals_field)
        return isinstance(expected, str) and given.strip() == expected

    def _check_args(self, op: OperationSpec, args: Mapping[str, Any]) -> None:
        for name in args:
            if name not in op.params:
                known = ", ".join(op.params) or "none"
                raise OperationError(f"unknown parameter '{name}' (parameters: {known})")
        for name, spec in op.params.items():
            if name not in args or args[name] is None:
                if spec.required:
                    raise OperationError(f"missing required parameter '{name}'")
                continue
            self._check_value(name, spec, args[name])

    def _check_value(self, name: str, spec: ParamSpec, value: Any) -> None:
        if not type_ok(spec.type, value):
            raise OperationError(
                f"parameter '{name}' must be of type {spec.type}, got {type(value).__name__}"
            )
        if spec.enum is not None and value not in spec.enum:
            raise OperationError(f"parameter '{name}' must be one of {spec.enum}")
        if spec.minimum is not None and value < spec.minimum:
            raise OperationError(f"parameter '{name}' must be >= {spec.minimum:g}")
        if spec.maximum is not None and value > spec.maximum:
            raise OperationError(f"parameter '{name}' must be <= {spec.maximum:g}")
        if spec.ref is not None:
            values = value if isinstance(value, list) else [value]
            for v in values:
                if str(v) not in self.state[spec.ref]:
                    raise OperationError(f"no {spec.ref} record with id '{v}'")

    def _target(
        self, op: OperationSpec, args: Mapping[str, Any], *, write: bool = False
    ) -> dict[str, Any]:
        """The record the call names; ``write``: one this store may change in place."""
        assert op.key is not None
        record_id = args.get(op.key)
        record = self.state[op.collection].get(str(record_id))
        if record is None:
            raise OperationError(f"no {op.collection} record with id '{record_id}'")
        return self._writable(op.collection, str(record_id)) if write else record

    def _run(self, op: OperationSpec, args: dict[str, Any]) -> Any:
        coll = self.spec.collections[op.collection]
        if op.kind == "get":
            return self._expanded(op, copy.deepcopy(self._target(op, args)))
        if op.kind == "search":
            return self._search(op, args)
        if op.kind == "create":
            return self._create(op, coll, args)
        if op.kind == "update":
            record = self._target(op, args, write=True)
            for field, value in op.defaults.items():
                record[field] = copy.deepcopy(value)
            for field, param in op.set.items():
                if param in args and args[param] is not None:
                    record[field] = copy.deepcopy(args[param])
            return copy.deepcopy(record)
        if op.kind in ("append", "remove"):
            record = self._target(op, args, write=True)
            assert op.field is not None and op.value is not None
            items = record.setdefault(op.field, [])
            value = args[op.value]
            if op.kind == "append":
                if value in items:
                    raise OperationError(f"'{value}' is already in {op.field}")
                items.append(value)
            else:
                if value not in items:
                    raise OperationError(f"'{value}' is not in {op.field}")
                items.remove(value)
            return copy.deepcopy(record)
        if op.kind == "delete":
            record = self._target(op, args)
            del self.state[op.collection][str(record["id"])]
            return {"deleted": record["id"]}
        raise OperationError(f"unsupported operation kind {op.kind}")  # pragma: no cover

    def _search(self, op: OperationSpec, args: Mapping[str, Any]) -> dict[str, Any]:
        ranked: list[tuple[int, int, dict[str, Any]]] = []
        query_words = {
            param: _words(str(args[param]))
            for param in op.match
            if args.get(param) not in (None, "")
        }
        for order, record in enumerate(self.state[op.collection].values()):
            if not all(
                _equal(record.get(field), args[param])
                for param, field in op.equals.items()
                if args.get(param) is not None
            ):
                continue
            score = 0
            for param, wanted in query_words.items():
                haystack: set[str] = set()
                for field in op.match[param]:
                    haystack.update(_words(str(record.get(field, ""))))
                hits = len(wanted & haystack)
                if hits == 0:
                    break
                score += hits
            else:
                ranked.append((-score, order, record))
        ranked.sort(key=lambda item: (item[0], item[1]))
        items = [copy.deepcopy(rec) for _, _, rec in ranked[: op.limit]]
        return {"items": items, "count": len(items)}

    def _create(
        self, op: OperationSpec, coll: CollectionSpec, args: Mapping[str, Any]
    ) -> dict[str, Any]:
        number = self._next_id.get(op.collection)
        if number is None:
            seeds = self.spec.collections[op.collection].records  # as at construction
            number = max((_id_number(str(rec["id"])) for rec in seeds), default=0) + 1
        record_id = f"{coll.id_prefix}-{number:03d}"
        self._next_id[op.collection] = number + 1
        record: dict[str, Any] = {"id": record_id}
        for field in coll.fields:
            spec = coll.field_spec(field)
            assert spec is not None
            if field == "id":
                continue
            if field in op.defaults:
                record[field] = copy.deepcopy(op.defaults[field])
            elif spec.type == "string_list":
                record[field] = []
            else:
                record[field] = None
        for field, param in op.set.items():
            if param in args and args[param] is not None:
                record[field] = copy.deepcopy(args[param])
        self.state[op.collection][record_id] = record
        self._owned.add((op.collection, record_id))
        return copy.deepcopy(record)

    def _expanded(self, op: OperationSpec, record: dict[str, Any]) -> dict[str, Any]:
        for field, target in op.expand.items():
            value = record.get(field)
            ids = value if isinstance(value, list) else [value]
            inlined = [
                copy.deepcopy(self.state[target][str(i)])
                for i in ids
                if str(i) in self.state[target]
            ]
            record[field.removesuffix("_ids") + "s" if field.endswith("_ids") else field] = (
                inlined if isinstance(value, list) else (inlined[0] if inlined else None)
            )
        return record


@lru_cache(maxsize=1 << 16)
def _words(text: str) -> frozenset[str]:
    """The content words of a field's text, kept: every search reads the same records."""
    return frozenset(content_words(text))


def _equal(actual: Any, wanted: Any) -> bool:
    if isinstance(actual, str) and isinstance(wanted, str):
        return normalise(actual) == normalise(wanted)
    return bool(actual == wanted)
