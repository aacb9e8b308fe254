"""Returned-state encodings (seed 3.2, D, and appendix A): the same records four ways.

Every observation has an envelope that is identical byte for byte in all four
encodings (``tool``, ``source``, ``hash``, ``provenance``) and blocks that vary:

- ``raw``: ``objects`` of ``{id, type, payload}``, values as stored;
- ``compact``: dictionary-coded tuples ``[id, type, v1, v2, ...]`` and a visible
  ``field_dictionary`` (per type, the field order of the tuples);
- ``typed``: ``objects`` of ``{id, type, fields}`` with values in their declared type
  and a ``type_dictionary`` (per type, field -> type);
- ``linked``: typed, plus identity ``links`` and a ``relation_dictionary`` for the
  fields that hold another record's lookup key. Links only summarise what the object
  already says (they carry no id the records do not), so they never shorten a workflow.

A public handoff's ``next_handoff`` object (``{"connector", "query"}``, reading 5) travels
as that object in every encoding: the raw payload and the compact tuple hold it as is,
the typed encodings declare it of type ``handoff`` (exactly two strings, checked), and
linked lists it as a relation (its ``query`` is the next record's lookup key: the
relation dictionary says ``{"key": "ref", "at": "query"}`` and the link's path ends in
``/next_handoff/query``).

Types (:data:`~.family.FactType`): ``money`` travels as integer minor units and decodes
to a two-decimal string, ``date`` as an ISO date string. A value that does not survive
its encoding (``"12.5"`` as money decodes to ``"12.50"``; a record missing a field its
type's dictionary lists decodes with a null) is caught by :func:`round_trip_problem`
and refused at compile time: every encoding must decode to the same values.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

import rfc8785

from prereg.experiments.toolbottleneck.family import EncodingName
from prereg.experiments.toolbottleneck.world import (
    HANDOFF_FIELD,
    HANDOFF_KEYS,
    FieldValue,
    Returned,
    plain_fields,
)


class EncodingError(ValueError):
    """A value the encoding cannot carry; ``field`` names the record field."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(message)


def value_type(name: str, value: FieldValue, declared: Mapping[str, str]) -> str:
    """The type a typed encoding declares for a field."""
    if name in declared:
        return declared[name]
    if name == HANDOFF_FIELD:
        return "handoff"
    if name == "ref" or name.endswith("_ref"):
        return "key"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return "string"


def _encode_value(name: str, kind: str, value: Any) -> Any:
    try:
        if kind == "handoff":
            if (
                not isinstance(value, Mapping)
                or set(value) != set(HANDOFF_KEYS)
                or not all(isinstance(value[k], str) for k in HANDOFF_KEYS)
            ):
                raise EncodingError(name, f"{value!r} is not a handoff object {HANDOFF_KEYS}")
            return {k: value[k] for k in HANDOFF_KEYS}
        if kind in ("string", "key"):
            return str(value)
        if kind == "integer":
            return int(value)
        if kind == "number":
            return float(value)
        if kind == "boolean":
            return bool(value)
        if kind == "date":
            return dt.date.fromisoformat(str(value)).isoformat()
        if kind == "money":
            units = Decimal(str(value)) * 100
            if units != units.to_integral_value():
                raise EncodingError(name, f"money value {value!r} has more than two decimals")
            return int(units)
    except (ValueError, TypeError, InvalidOperation) as exc:
        if isinstance(exc, EncodingError):
            raise
        raise EncodingError(name, f"{value!r} is not a valid {kind}") from None
    raise EncodingError(name, f"unknown type '{kind}'")


def _decode_value(kind: str, value: Any) -> Any:
    if kind == "money":
        return f"{Decimal(value) / 100:.2f}"
    return value


def _is_relation(name: str) -> bool:
    return name.endswith("_ref") or name == HANDOFF_FIELD


def _relation(name: str) -> dict[str, str]:
    """A relation dictionary entry: which field of the object holds the next lookup key."""
    return {"key": "ref", "at": "query"} if name == HANDOFF_FIELD else {"key": "ref"}


def _relation_path(i: int, name: str) -> str:
    tail = "/query" if name == HANDOFF_FIELD else ""
    return f"/objects/{i}/fields/{name}{tail}"


def encode(
    results: Sequence[Returned], encoding: EncodingName, declared: Mapping[str, str]
) -> dict[str, Any]:
    """The varying blocks of one observation in ``encoding``."""
    if encoding == "raw":
        return {
            "objects": [
                {"id": r.id, "type": r.kind, "payload": plain_fields(r.fields)} for r in results
            ]
        }
    if encoding == "compact":
        dictionary: dict[str, list[str]] = {}
        for r in results:
            names = dictionary.setdefault(r.kind, [])
            names.extend(n for n in sorted(r.fields) if n not in names)
        tuples = [
            [r.id, r.kind, *(plain_fields(r.fields).get(n) for n in dictionary[r.kind])]
            for r in results
        ]
        return {"field_dictionary": dictionary, "objects": tuples}
    types: dict[str, dict[str, str]] = {}
    objects = []
    for r in results:
        kinds = types.setdefault(r.kind, {})
        fields = {}
        for name, value in r.fields.items():
            kind = kinds.setdefault(name, value_type(name, value, declared))
            fields[name] = _encode_value(name, kind, value)
        objects.append({"id": r.id, "type": r.kind, "fields": fields})
    body: dict[str, Any] = {"type_dictionary": types, "objects": objects}
    if encoding == "linked":
        body["relation_dictionary"] = {
            name: _relation(name)
            for kinds in types.values()
            for name in kinds
            if _is_relation(name)
        }
        body["links"] = [
            link
            for i, obj in enumerate(objects)
            for link in [{"path": f"/objects/{i}", "identity": obj["id"]}]
            + [
                {"path": _relation_path(i, name), "relation": name}
                for name in obj["fields"]
                if _is_relation(name)
            ]
        ]
    return body


def decode(body: Mapping[str, Any], encoding: EncodingName) -> list[dict[str, Any]]:
    """The values an observation carries: ``[{id, kind, fields}]``, whatever the encoding."""
    if encoding == "raw":
        return [
            {"id": o["id"], "kind": o["type"], "fields": dict(o["payload"])}
            for o in body["objects"]
        ]
    if encoding == "compact":
        out = []
        for row in body["objects"]:
            names = body["field_dictionary"][row[1]]
            out.append(
                {"id": row[0], "kind": row[1], "fields": dict(zip(names, row[2:], strict=True))}
            )
        return out
    if encoding == "linked":
        _check_links(body)
    types = body["type_dictionary"]
    return [
        {
            "id": o["id"],
            "kind": o["type"],
            "fields": {n: _decode_value(types[o["type"]][n], v) for n, v in o["fields"].items()},
        }
        for o in body["objects"]
    ]


def _check_links(body: Mapping[str, Any]) -> None:
    """Links must point at objects and relation fields that exist (a broken link is an error)."""
    for link in body["links"]:
        parts = link["path"].split("/")
        obj = body["objects"][int(parts[2])]
        if "identity" in link and link["identity"] != obj["id"]:
            raise EncodingError("links", f"identity link {link['path']} names another record")
        if "relation" in link and (
            link["relation"] not in body["relation_dictionary"]
            or parts[4] != link["relation"]
            or parts[4] not in obj["fields"]
            or (
                len(parts) > 5
                and not (
                    isinstance(obj["fields"][parts[4]], Mapping)
                    and parts[5] in obj["fields"][parts[4]]
                )
            )
        ):
            raise EncodingError("links", f"relation link {link['path']} is not in the dictionaries")


def canonical(values: Any) -> bytes:
    return rfc8785.dumps(values)


def round_trip_problem(
    results: Sequence[Returned], encoding: EncodingName, declared: Mapping[str, str]
) -> EncodingError | None:
    """Why ``results`` do not decode to the same values in ``encoding``, or None."""
    try:
        decoded = decode(encode(results, encoding, declared), encoding)
    except EncodingError as exc:
        return exc
    expected = [r.value() for r in results]
    if canonical(decoded) == canonical(expected):
        return None
    for got, want in zip(decoded, expected, strict=True):
        for name in sorted(set(got["fields"]) | set(want["fields"])):
            a, b = got["fields"].get(name, "<absent>"), want["fields"].get(name, "<absent>")
            if canonical(a) != canonical(b):
                return EncodingError(name, f"decodes to {a!r} instead of {b!r}")
    return EncodingError("objects", "decodes to other values")  # pragma: no cover - ids differ


#: How a holdout arm returns records to the model (seed 5.5, structural holdout):
#: ``native`` in the cell's own encoding, ``canonical`` in one canonical encoding whatever
#: the cell (the wrong-layer control: it changes the returned-state layer D, not W).
Delivery = Literal["native", "canonical"]
DELIVERIES: tuple[str, ...] = ("native", "canonical")


def deliver(body: Mapping[str, Any], encoding: EncodingName, delivery: Delivery) -> dict[str, Any]:
    """The varying blocks of an observation as delivered: as encoded (``native``), or the
    decoded values ``{"records": [{id, kind, fields}]}`` with keys in RFC 8785 order
    (``canonical``: the records the cell's encoding carries, in no cell's encoding)."""
    if delivery == "native":
        return dict(body)
    records = decode(body, encoding)
    return {"records": json.loads(canonical(records))}


def received(
    body: Mapping[str, Any], encoding: EncodingName, delivery: Delivery
) -> list[dict[str, Any]]:
    """The records a delivered block carries (the inverse of :func:`deliver`)."""
    if delivery == "native":
        return decode(body, encoding)
    return [
        {"id": r["id"], "kind": r["kind"], "fields": dict(r["fields"])} for r in body["records"]
    ]
