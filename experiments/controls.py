"""Control arms as deterministic transformations of a surface (InvokeRank, 7.2).

A control arm is registered (``arms[].control``) and its surface is computed
from the frozen experiment and the registration alone, so the registration's
digest already covers it; the transformed surface's own digest
(:attr:`Surface.digest`) goes on every run record and into the report.

- **blinded**: the integration's metadata replaced by neutral placeholders.
  Server text: name ``integration``, title ``Integration``, description
  ``Provides actions.``; tool *i* (1-based, in listed order): name
  ``action_<i>``, title ``Action <i>``, description ``Performs action <i>.``;
  schema text: every ``title`` becomes ``Value`` and every ``description``
  ``A value.``, ``examples`` and ``$comment`` are dropped, at every level of the
  input (and, for snapshots, output) schema, and keywords outside the JSON
  Schema vocabulary (``examples``, ``$comment``, ``$id``, ``x-...``, stray keys)
  are dropped. A text that was empty or absent stays so. Kept, because they are
  the call interface and not prose: property names (and ``$defs`` names), types,
  ``enum``/``const``/``default`` values, ``required``, bounds and patterns, the
  tools' order and count and what each tool does (its operations). For a
  snapshot, ``instructions``, icons, ``websiteUrl`` and ``_meta`` are dropped
  and ``annotations.title`` is blinded; the result is itself a valid snapshot
  (its digest is recorded; ``prereg mcp serve`` could serve it).
- **clone_swap**: two copies of the integration that differ only in a matched
  opaque label, ``srv-`` plus four characters: the label is the copy's server
  name and prefixes its tool names (``<label>_<tool>``; hosts call tools by
  name, so two copies cannot share names). Titles, descriptions, schemas and
  operations are identical. Which copy carries which label and which is listed
  first are crossed per run unit in a balanced 2 x 2 (see
  :func:`prereg.experiments.offers.arrange`).
- **decoy** and **placebo** transform nothing: a decoy arm offers the
  reference's pool plus one unrelated server, a placebo arm exactly the
  reference's offer.

Every function here is pure: the same surface and arguments give the same
result, byte for byte.
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Mapping
from typing import Any, Literal

from prereg.core.errors import BadInput
from prereg.experiments.models import TOOL_NAME_PATTERN
from prereg.experiments.snapshots import snapshot_surface
from prereg.experiments.surfaces import Surface, Tool

#: The control arms a registration may name (``arms[].control``), InvokeRank 7.2.
ControlName = Literal["placebo", "blinded", "decoy", "clone_swap"]

#: What each control does to its reference arm's offer (applied in
#: :func:`prereg.experiments.offers.arm_offer`; judged in
#: :mod:`prereg.reports.invokerank.controls`).
CONTROLS: Mapping[ControlName, str] = {
    "placebo": "offers exactly the reference's pool (an A/A comparison)",
    "blinded": "replaces names, titles, descriptions, schema and server text by placeholders",
    "decoy": "adds one unrelated server (named by 'decoy') to the reference's pool",
    "clone_swap": "two copies of the surface under matched opaque labels, crossed 2 x 2",
}

BLIND_SERVER_NAME = "integration"
BLIND_SERVER_TITLE = "Integration"
BLIND_SERVER_DESCRIPTION = "Provides actions."
BLIND_SCHEMA_TITLE = "Value"
BLIND_SCHEMA_DESCRIPTION = "A value."
LABEL_PREFIX = "srv-"
LABEL_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"

# JSON Schema keywords kept as they are (constraints, not prose); any other keyword is
# dropped by blinding, since outside the vocabulary it can only carry text
_KEEP = frozenset(
    """
type required enum const default minimum maximum exclusiveMinimum exclusiveMaximum multipleOf
minLength maxLength pattern format minItems maxItems uniqueItems minContains maxContains
minProperties maxProperties dependentRequired dependencies nullable readOnly writeOnly
deprecated contentEncoding contentMediaType $schema $ref $dynamicRef $anchor $dynamicAnchor
""".split()
)
# JSON Schema keywords whose value is one subschema, a list of them, or a map of them
_ONE = (
    "items",
    "additionalProperties",
    "not",
    "contains",
    "propertyNames",
    "if",
    "then",
    "else",
    "unevaluatedItems",
    "unevaluatedProperties",
    "additionalItems",
)
_MANY = ("allOf", "anyOf", "oneOf", "prefixItems")
_MAP = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")


def blind_tool_texts(index: int) -> tuple[str, str, str]:
    """(name, title, description) placeholders of tool ``index`` (0-based)."""
    n = index + 1
    return f"action_{n}", f"Action {n}", f"Performs action {n}."


def blind_schema(schema: Any) -> Any:
    """A copy of a JSON Schema with its prose replaced (see the module docstring)."""
    if isinstance(schema, list):
        return [blind_schema(s) for s in schema]
    if not isinstance(schema, Mapping):
        return copy.deepcopy(schema)
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            out[key] = BLIND_SCHEMA_TITLE if value else value
        elif key == "description" and isinstance(value, str):
            out[key] = BLIND_SCHEMA_DESCRIPTION if value else value
        elif key in _ONE or key in _MANY:
            out[key] = blind_schema(value)
        elif key in _MAP and isinstance(value, Mapping):
            out[key] = {name: blind_schema(sub) for name, sub in value.items()}
        elif key in _KEEP:
            out[key] = copy.deepcopy(value)
    return out


def _placeholder(original: str, text: str) -> str:
    return text if original else original


def blinded(surface: Surface) -> Surface:
    """The ``blinded`` control of a surface (YAML or snapshot)."""
    if surface.source == "snapshot":
        return _blinded_snapshot(surface)
    tools = []
    for index, tool in enumerate(surface.tools):
        name, title, description = blind_tool_texts(index)
        tools.append(
            Tool(
                name=name,
                title=_placeholder(tool.title, title),
                description=_placeholder(tool.description, description),
                input_schema=blind_schema(tool.input_schema),
                steps=tool.steps,
                surface=tool.surface,
            )
        )
    return Surface(
        id=surface.id,
        file=surface.file,
        name=BLIND_SERVER_NAME,
        title=_placeholder(surface.title, BLIND_SERVER_TITLE),
        description=_placeholder(surface.description, BLIND_SERVER_DESCRIPTION),
        replay_only=surface.replay_only,
        tools=tuple(tools),
        source="yaml",
        transform="blinded",
    )


def _blinded_snapshot(surface: Surface) -> Surface:
    snap = surface.snapshot
    assert snap is not None, "a snapshot surface carries its snapshot"
    init = snap.initialize_result()
    info = init.get("serverInfo") or {}
    new_info: dict[str, Any] = {"name": BLIND_SERVER_NAME, "version": info.get("version", "")}
    if isinstance(info.get("title"), str):
        new_info["title"] = _placeholder(info["title"], BLIND_SERVER_TITLE)
    if isinstance(info.get("description"), str):
        new_info["description"] = _placeholder(info["description"], BLIND_SERVER_DESCRIPTION)
    new_init = {k: v for k, v in init.items() if k not in ("instructions", "_meta")}
    new_init["serverInfo"] = new_info
    tools = []
    for index, raw in enumerate(snap.tools()):
        name, title, description = blind_tool_texts(index)
        tool: dict[str, Any] = {"name": name}
        if isinstance(raw.get("title"), str):
            tool["title"] = _placeholder(raw["title"], title)
        if isinstance(raw.get("description"), str):
            tool["description"] = _placeholder(raw["description"], description)
        tool["inputSchema"] = blind_schema(raw.get("inputSchema"))
        if isinstance(raw.get("outputSchema"), Mapping):
            tool["outputSchema"] = blind_schema(raw["outputSchema"])
        annotations = raw.get("annotations")
        if isinstance(annotations, Mapping):
            kept = {k: copy.deepcopy(v) for k, v in annotations.items() if k != "title"}
            if isinstance(annotations.get("title"), str):
                kept["title"] = _placeholder(annotations["title"], title)
            tool["annotations"] = kept
        tools.append(tool)
    derived = snap.derive(initialize=new_init, tools=tools, derivation="blinded")
    return snapshot_surface(surface.id, surface.file, derived, transform="blinded")


# ---- clone_swap -----------------------------------------------------------------------------


def clone_labels(seed: int, arm: str) -> tuple[str, str]:
    """Two distinct opaque labels ``srv-xxxx`` drawn from the registration's seed and arm."""

    out: list[str] = []
    counter = 0
    while len(out) < 2:
        digest = hashlib.sha256(
            f"prereg-clone-label\x1f{seed}\x1f{arm}\x1f{counter}".encode()
        ).digest()
        label = LABEL_PREFIX + "".join(LABEL_ALPHABET[b % len(LABEL_ALPHABET)] for b in digest[:4])
        if label not in out:
            out.append(label)
        counter += 1
    return out[0], out[1]


def clone_copy(surface: Surface, label: str, key: str) -> Surface:
    """One copy of ``surface`` under ``label`` (its server name and tool-name prefix).

    ``key`` identifies the copy in the arm (its tools' ``surface`` field), so calls
    are attributed to the copy whatever label it carries in a given unit.
    """
    if not re.fullmatch(r"srv-[a-z0-9]{4}", label):
        raise ValueError(f"not an opaque clone label: {label!r}")
    if surface.source == "snapshot":
        return _clone_snapshot(surface, label, key)
    tools = []
    for tool in surface.tools:
        name = f"{label}_{tool.name}"
        if not re.fullmatch(TOOL_NAME_PATTERN, name):
            raise BadInput(
                f"tool '{tool.name}' is too long to carry a clone label "
                f"('{name}' exceeds 64 characters)",
                file=surface.file,
            )
        tools.append(
            Tool(
                name=name,
                title=tool.title,
                description=tool.description,
                input_schema=copy.deepcopy(dict(tool.input_schema)),
                steps=tool.steps,
                surface=key,
            )
        )
    return Surface(
        id=key,
        file=surface.file,
        name=label,
        title=surface.title,
        description=surface.description,
        replay_only=surface.replay_only,
        tools=tuple(tools),
        source="yaml",
        transform=f"clone:{label}",
    )


def _clone_snapshot(surface: Surface, label: str, key: str) -> Surface:
    snap = surface.snapshot
    assert snap is not None, "a snapshot surface carries its snapshot"
    init = snap.initialize_result()
    init["serverInfo"] = {**init.get("serverInfo", {}), "name": label}
    tools = []
    for raw in snap.tools():
        raw["name"] = f"{label}_{raw['name']}"
        tools.append(raw)
    derived = snap.derive(initialize=init, tools=tools, derivation=f"clone:{label}")
    out = snapshot_surface(key, surface.file, derived, transform=f"clone:{label}")
    return out
