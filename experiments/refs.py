"""Resolving argument sources: tool arguments, earlier step results, constants.

Paths are plain data (``items.0.id``): looked up key by key, never evaluated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from prereg.experiments.models import ArgRef, ArgSource, Const, StepRef


class RefError(LookupError):
    """A path or argument that does not resolve (an empty search result, say)."""


def lookup(value: Any, path: str) -> Any:
    """Follow a dotted path of keys and list indices into a JSON value."""
    current = value
    if not path:
        return current
    for part in path.split("."):
        if isinstance(current, Mapping):
            if part not in current:
                raise RefError(f"no '{part}' in the result")
            current = current[part]
        elif isinstance(current, Sequence) and not isinstance(current, str):
            try:
                index = int(part)
            except ValueError:
                raise RefError(f"'{part}' is not a list index") from None
            if not -len(current) <= index < len(current):
                raise RefError(f"index {index} is out of range (the list has {len(current)})")
            current = current[index]
        else:
            raise RefError(f"cannot take '{part}' of a {type(current).__name__}")
    return current


def resolve_source(
    source: ArgSource, tool_args: Mapping[str, Any], results: Sequence[Any]
) -> tuple[bool, Any]:
    """(present, value) of one argument source; an absent tool argument is not present."""
    if isinstance(source, ArgRef):
        if source.arg not in tool_args:
            return False, None
        return True, tool_args[source.arg]
    if isinstance(source, StepRef):
        if source.step >= len(results):
            raise RefError(f"step {source.step} has not run yet")
        return True, lookup(results[source.step], source.path)
    if isinstance(source, Const):
        return True, source.value
    raise TypeError(source)  # pragma: no cover


def as_step_ref(value: Any) -> StepRef | None:
    """A solution argument ``{step: i, path: ...}`` as a StepRef, else None (a literal)."""
    if isinstance(value, Mapping) and "step" in value and set(value) <= {"step", "path"}:
        return StepRef.model_validate(dict(value))
    return None
