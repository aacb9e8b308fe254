"""The service file's cross-checks: every operation against the collections it names,
and the collections' fields and seed records.

Schema errors come from pydantic (:mod:`.files`); these are the rules between the parts of
one service file that a schema cannot state, each failing at the node it concerns.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prereg.experiments.loader.files import Doc, Loc
from prereg.experiments.models import CollectionSpec, OperationSpec, ServiceFile
from prereg.experiments.service import type_ok


def _check_service(service: ServiceFile, doc: Doc) -> None:
    colls = service.collections
    for cname, coll in colls.items():
        _check_collection(cname, coll, colls, doc)
    for oname, op in service.operations.items():
        _check_operation(("operations", oname), op, colls, doc)


def _check_operation(
    loc: Loc, op: OperationSpec, colls: Mapping[str, CollectionSpec], doc: Doc
) -> None:
    """One operation against the collections: every name it uses must exist."""
    if op.collection not in colls:
        raise doc.fail(
            (*loc, "collection"),
            f"unknown collection '{op.collection}' (collections: {', '.join(colls)})",
        )
    coll = colls[op.collection]
    for pname, param in op.params.items():
        if param.ref is not None and param.ref not in colls:
            raise doc.fail((*loc, "params", pname, "ref"), f"unknown collection '{param.ref}'")
    _check_operation_kind(loc, op, coll, doc)
    _check_operation_filters(loc, op, coll, doc)
    _check_operation_writes(loc, op, coll, colls, doc)
    _check_destructive(loc, op, coll, doc)


def _need_param(
    doc: Doc, loc: Loc, op: OperationSpec, key: str, value: str | None, *, required: bool = False
) -> None:
    """The operation's ``key`` (or ``value``) names one of its params (a required one)."""
    if value is None:
        raise doc.fail((*loc, key), f"a '{op.kind}' operation needs '{key}'")
    if value not in op.params:
        raise doc.fail(
            (*loc, key),
            f"'{value}' is not one of the operation's params ({', '.join(op.params) or 'none'})",
        )
    if required and not op.params[value].required:
        raise doc.fail(
            (*loc, "params", value, "required"),
            f"param '{value}' must be required (it is the operation's '{key}')",
        )


def _check_operation_kind(loc: Loc, op: OperationSpec, coll: CollectionSpec, doc: Doc) -> None:
    """What the operation's kind requires: a key, and for append/remove a list field."""
    if op.kind in ("get", "update", "append", "remove", "delete"):
        _need_param(doc, loc, op, "key", op.key, required=True)
    if op.kind in ("append", "remove"):
        _need_param(doc, loc, op, "value", op.value, required=True)
        if op.field is None or op.field not in coll.fields:
            raise doc.fail((*loc, "field"), "must name a list field of the collection")
        spec = coll.field_spec(op.field)
        if spec is None or spec.type != "string_list":
            raise doc.fail((*loc, "field"), f"'{op.field}' is not a string_list field")


def _check_operation_filters(loc: Loc, op: OperationSpec, coll: CollectionSpec, doc: Doc) -> None:
    """``match`` and ``equals``: params against fields of the collection (or ``id``)."""
    fields = set(coll.fields) | {"id"}
    for pname, fields_ in op.match.items():
        if pname not in op.params:
            raise doc.fail((*loc, "match", pname), f"'{pname}' is not a param")
        for f in fields_:
            if f not in fields:
                raise doc.fail((*loc, "match", pname), f"unknown field '{f}' of '{op.collection}'")
    for pname, f in op.equals.items():
        if pname not in op.params:
            raise doc.fail((*loc, "equals", pname), f"'{pname}' is not a param")
        if f not in fields:
            raise doc.fail((*loc, "equals", pname), f"unknown field '{f}'")


def _check_operation_writes(
    loc: Loc, op: OperationSpec, coll: CollectionSpec, colls: Mapping[str, CollectionSpec], doc: Doc
) -> None:
    """``set``, ``defaults`` and ``expand``: writable fields, params, referenced collections."""
    for f, pname in op.set.items():
        if f not in coll.fields or f == "id":
            raise doc.fail((*loc, "set", f), f"unknown or read-only field '{f}'")
        if pname not in op.params:
            raise doc.fail((*loc, "set", f), f"'{pname}' is not a param")
    for f in op.defaults:
        if f not in coll.fields:
            raise doc.fail((*loc, "defaults", f), f"unknown field '{f}'")
    for f, target in op.expand.items():
        if f not in coll.fields:
            raise doc.fail((*loc, "expand", f), f"unknown field '{f}'")
        if target not in colls:
            raise doc.fail((*loc, "expand", f), f"unknown collection '{target}'")


def _check_destructive(loc: Loc, op: OperationSpec, coll: CollectionSpec, doc: Doc) -> None:
    """A delete is destructive; a destructive operation has a key and a typed confirmation."""
    if op.kind == "delete" and not op.destructive:
        raise doc.fail((*loc, "destructive"), "a delete operation must be destructive: true")
    if not op.destructive:
        return
    if op.confirmation is None:
        raise doc.fail(
            (*loc, "confirmation"),
            "a destructive operation needs a confirmation ({param: confirm, equals_field: name})",
        )
    if op.key is None:
        raise doc.fail((*loc, "key"), "a destructive operation needs 'key' (its target)")
    if op.confirmation.param not in op.params:
        raise doc.fail(
            (*loc, "confirmation", "param"),
            f"'{op.confirmation.param}' is not one of the params",
        )
    if op.confirmation.equals_field not in coll.fields:
        raise doc.fail(
            (*loc, "confirmation", "equals_field"),
            f"unknown field '{op.confirmation.equals_field}'",
        )


def _check_collection(
    cname: str, coll: CollectionSpec, colls: Mapping[str, CollectionSpec], doc: Doc
) -> None:
    loc: Loc = ("collections", cname)
    for fname in coll.fields:
        spec = coll.field_spec(fname)
        assert spec is not None
        if spec.ref is not None and spec.ref not in colls:
            raise doc.fail((*loc, "fields", fname), f"unknown collection '{spec.ref}'")
    seen: set[str] = set()
    for index, record in enumerate(coll.records):
        _check_record(loc, index, record, coll, seen, doc)
    for index, record in enumerate(coll.records):
        _check_record_refs(loc, index, record, coll, colls, doc)


def _check_record(
    loc: Loc, index: int, record: Mapping[str, Any], coll: CollectionSpec, seen: set[str], doc: Doc
) -> None:
    """A seed record: a new string id, and known fields of the declared types."""
    rloc = (*loc, "records", index)
    rid = record.get("id")
    if not isinstance(rid, str) or not rid:
        raise doc.fail(rloc, "every record needs a string 'id'")
    if rid in seen:
        raise doc.fail((*rloc, "id"), f"duplicate record id '{rid}'")
    seen.add(rid)
    for fname, value in record.items():
        if fname == "id":
            continue
        spec = coll.field_spec(fname)
        if spec is None:
            raise doc.fail(
                (*rloc, fname), f"unknown field '{fname}' (fields: {', '.join(coll.fields)})"
            )
        if value is None and spec.nullable:
            continue
        if not type_ok(spec.type, value):
            raise doc.fail((*rloc, fname), f"expected {spec.type}, got {type(value).__name__}")


def _check_record_refs(
    loc: Loc,
    index: int,
    record: Mapping[str, Any],
    coll: CollectionSpec,
    colls: Mapping[str, CollectionSpec],
    doc: Doc,
) -> None:
    """Every identifier in a reference field names a seed record of the referenced collection."""
    for fname, value in record.items():
        spec = coll.field_spec(fname) if fname != "id" else None
        if spec is None or spec.ref is None or value is None:
            continue
        known = {r["id"] for r in colls[spec.ref].records}
        for v in value if isinstance(value, list) else [value]:
            if v not in known:
                raise doc.fail(
                    (*loc, "records", index, fname), f"'{v}' is not a record of '{spec.ref}'"
                )
