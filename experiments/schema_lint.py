"""Authored input schemas may use JSON Schema keywords only.

A JSON Schema validator ignores unknown keywords, so a typo or a YAML flow
mapping split at a comma (``{description: Title, artist or genre}`` gives a
key ``artist``) yields a schema every validator accepts and no host reads as
intended. Seed 002 lists schemas like this among the defects only a rule that
fails the build prevents. Recorded MCP snapshots are third-party data kept
verbatim, so this applies to surfaces written for an experiment only.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

#: Draft 2020-12 keywords (core, applicator, validation, meta-data, format, content),
#: plus the draft-07 spellings hosts still send.
KEYWORDS = frozenset(
    {
        "$schema",
        "$id",
        "$ref",
        "$anchor",
        "$dynamicRef",
        "$dynamicAnchor",
        "$vocabulary",
        "$comment",
        "$defs",
        "definitions",
        "allOf",
        "anyOf",
        "oneOf",
        "not",
        "if",
        "then",
        "else",
        "dependentSchemas",
        "prefixItems",
        "items",
        "additionalItems",
        "contains",
        "properties",
        "patternProperties",
        "additionalProperties",
        "propertyNames",
        "unevaluatedItems",
        "unevaluatedProperties",
        "type",
        "enum",
        "const",
        "multipleOf",
        "maximum",
        "exclusiveMaximum",
        "minimum",
        "exclusiveMinimum",
        "maxLength",
        "minLength",
        "pattern",
        "maxItems",
        "minItems",
        "uniqueItems",
        "maxContains",
        "minContains",
        "maxProperties",
        "minProperties",
        "required",
        "dependentRequired",
        "dependencies",
        "title",
        "description",
        "default",
        "deprecated",
        "readOnly",
        "writeOnly",
        "examples",
        "format",
        "contentEncoding",
        "contentMediaType",
        "contentSchema",
    }
)
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SCHEMA_ONE = (
    "items",
    "additionalItems",
    "additionalProperties",
    "contains",
    "not",
    "if",
    "then",
    "else",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
)


def unknown_keywords(
    schema: Any, path: tuple[str | int, ...] = ()
) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """(path to the schema, key) for every key that is not a JSON Schema keyword.

    Keys starting with ``x-`` are allowed (the usual extension convention).
    """
    if not isinstance(schema, dict):
        return
    for key in schema:
        if key not in KEYWORDS and not str(key).startswith("x-"):
            yield path, str(key)
    for key in _SCHEMA_MAPS:
        value = schema.get(key)
        if isinstance(value, dict):
            for name, sub in value.items():
                yield from unknown_keywords(sub, (*path, key, name))
    for key in _SCHEMA_LISTS:
        value = schema.get(key)
        if isinstance(value, list):
            for index, sub in enumerate(value):
                yield from unknown_keywords(sub, (*path, key, index))
    for key in _SCHEMA_ONE:
        yield from unknown_keywords(schema.get(key), (*path, key))
