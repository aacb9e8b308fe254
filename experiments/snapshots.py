"""Surfaces from MCP snapshots: a recorded server offered as a replay-only integration.

An experiment may name a snapshot file (``*.json`` in the ``prereg-mcp-snapshot/1``
format, made by ``prereg mcp snapshot``) wherever it names a surface file: as one
of its ``surfaces`` or as a pool member. The offered surface is what the server
served, read from the recorded ``initialize`` result and ``tools/list``:

- server name: ``serverInfo.name``; title: ``serverInfo.title`` (else the name);
  description: ``serverInfo.description`` (2025-11-25; empty when absent). The
  ``instructions`` field is not offered: it is addressed to a client, and no host
  path this platform drives transmits it;
- each tool: ``name``, ``title`` (else ``annotations.title``, else empty),
  ``description`` and ``inputSchema``, in the order served.

A snapshot's tools map to no operation of the experiment's service: calls to
them are refused exactly as the replay server refuses them, never executed
(except under a registered live integration, see :mod:`prereg.runners.live`).

Everything in a snapshot is untrusted third-party text: it is checked for shape
(names hosts can call, schemas that are valid JSON Schema) and otherwise only
carried as data. Schemas are never dereferenced: a ``$ref`` to anything outside
the schema is refused here, so validating arguments can never fetch anything.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from jsonschema.validators import validator_for

from prereg.core.errors import BadInput
from prereg.experiments.mcp_snapshot import Snapshot, load_snapshot, snapshot_digest
from prereg.experiments.surfaces import Surface, Tool

#: Tool names a host can call: MCP's recommended character set (2025-11-25).
SNAPSHOT_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


def load_snapshot_bytes(raw: bytes, rel: str) -> Snapshot:
    """Validate snapshot bytes (BadInput naming the file and field)."""
    return load_snapshot(raw, rel)


def snapshot_surface(
    sid: str, rel: str, snapshot: Snapshot, *, transform: str | None = None
) -> Surface:
    """The replay-only surface a snapshot offers (see the module docstring)."""
    tools: list[Tool] = []
    seen: set[str] = set()
    for index, raw in enumerate(snapshot.tools()):
        where = f"server.lists.tools/list: tool {index}"
        name = raw.get("name")
        if not isinstance(name, str) or not SNAPSHOT_TOOL_NAME.fullmatch(name):
            raise BadInput(
                f"tool name {name!r} cannot be offered to a host (expected 1 to "
                "128 of A-Z a-z 0-9 _ . -)",
                file=rel,
                field=where,
            )
        if name in seen:
            raise BadInput(f"duplicate tool name '{name}'", file=rel, field=where)
        seen.add(name)
        schema = check_schema(raw.get("inputSchema"), rel, f"{where} ({name}).inputSchema")
        given = raw.get("annotations")
        annotations: Mapping[str, Any] = given if isinstance(given, dict) else {}
        title = _text(raw.get("title")) or _text(annotations.get("title"))
        tools.append(
            Tool(
                name=name,
                title=title,
                description=_text(raw.get("description")),
                input_schema=schema,
                steps=(),
                surface=sid,
            )
        )
    if not tools:
        raise BadInput(
            "the snapshot lists no tools, so there is nothing to offer",
            file=rel,
            field="server.lists.tools/list",
        )
    name = snapshot.server_name
    return Surface(
        id=sid,
        file=rel,
        name=name,
        title=snapshot.server_title or name,
        description=snapshot.server_description or "",
        replay_only=True,
        tools=tuple(tools),
        source="snapshot",
        snapshot=snapshot,
        snapshot_digest=snapshot_digest(snapshot),
        transform=transform,
    )


def check_schema(schema: Any, rel: str, where: str) -> Mapping[str, Any]:
    """A tool's input schema: an object schema, valid for its draft, with local refs only.

    Returns the schema (typed as the mapping it was checked to be); BadInput otherwise.
    """
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        raise BadInput(
            "a tool's input schema must be a JSON Schema with type 'object'", file=rel, field=where
        )
    remote = _remote_ref(schema)
    if remote is not None:
        raise BadInput(
            f"'$ref': {remote!r} points outside the schema; only local references "
            "('#...') are accepted (schemas are data: nothing is fetched)",
            file=rel,
            field=where,
        )
    try:
        validator_for(schema, default=_default()).check_schema(schema)
    except SchemaError as exc:
        raise BadInput(f"not a valid JSON Schema: {exc.message}", file=rel, field=where) from None
    return schema


def _default() -> Any:

    return Draft202012Validator


def _remote_ref(value: Any) -> str | None:
    if isinstance(value, Mapping):
        for key, inner in value.items():
            if (
                key in ("$ref", "$dynamicRef")
                and isinstance(inner, str)
                and not inner.startswith("#")
            ):
                return inner
            found = _remote_ref(inner)
            if found is not None:
                return found
    elif isinstance(value, list):
        for inner in value:
            found = _remote_ref(inner)
            if found is not None:
                return found
    return None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""
