"""Reading a compiled variant back from disk, verified (DESIGN.md invariant 11).

``prereg study compile --out`` writes one JSON file per variant. Whatever reads one
later (a runner, a report) loads it through :func:`load_variant`: the file is checked
as strict JSON, validated against :class:`StoredVariant` (bad input, exit 2) and its
digests are recomputed (an edited file is an integrity error, exit 3, naming the part
that no longer matches).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from prereg.core.errors import BadInput, IntegrityError
from prereg.core.safeio import (
    MAX_EXPERIMENT_FILE_BYTES,
    UnreadableFile,
    check_json,
    escape_control,
    escaped,
    read_regular_file,
)
from prereg.core.yamlio import validate
from prereg.experiments.toolbottleneck.compile import COMPONENTS, FORMAT, digest


class StoredVariant(BaseModel):
    """One compiled variant as written to disk (components stay JSON: they are data)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    format: Literal["prereg-toolbottleneck-variants/1"]
    id: str
    family: str
    seed: int
    cell: dict[str, Any]
    component_digests: dict[str, str]
    measures: dict[str, Any]
    components: dict[str, Any]
    observations: list[dict[str, Any]]
    digest: str


assert FORMAT == "prereg-toolbottleneck-variants/1"  # the Literal above spells it out


def digest_problem(document: Mapping[str, Any]) -> str | None:
    """Which digest of a variant document no longer matches its content, or None."""
    components = document["components"]
    if sorted(components) != sorted(COMPONENTS) or sorted(document["component_digests"]) != sorted(
        COMPONENTS
    ):
        return f"components must be exactly {', '.join(COMPONENTS)}"
    for name in COMPONENTS:
        if digest(components[name]) != document["component_digests"][name]:
            return f"component '{name}' does not match its digest"
    keys = ("format", "id", "family", "seed", "cell", "component_digests", "measures")
    head = {k: document[k] for k in keys}
    sealed = digest({**head, "observations": digest(document["observations"])})
    if sealed != document["digest"]:
        return "the variant does not match its digest"
    return None


def load_variant(path: str | Path) -> StoredVariant:
    """A variant file, validated and verified; BadInput (2) or IntegrityError (3)."""
    name = str(path)
    try:
        raw = read_regular_file(path, limit=MAX_EXPERIMENT_FILE_BYTES, what="a variant")
    except (FileNotFoundError, IsADirectoryError):
        raise escaped(BadInput("no such variant file", file=name)) from None
    except UnreadableFile as exc:
        raise escaped(BadInput(exc.reason, file=name)) from None
    check_json(raw, name)
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise escaped(BadInput(f"not JSON ({exc})", file=name)) from None
    variant = validate(StoredVariant, data, filename=name)
    problem = digest_problem(variant.model_dump())
    if problem is not None:
        raise IntegrityError(problem, file=escape_control(name), field="digest")
    return variant
