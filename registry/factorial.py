"""Factorial designs: factors crossed into cells, each cell an arm (issue 13, item 3).

A registration may give ``factorial:`` instead of ``arms:``::

    factorial:
      base: {surface: baseline}            # the arm every cell starts from
      factors:
        - {id: profile, sets: host.model, levels: [local-careful, local-hasty]}
        - {id: cap, sets: budgets.completion_cap, levels: [64, 1024]}
      extra_cells:                          # e.g. ToolBottleneckBench's checkpoint cells
        - {profile: local-careful, cap: 4096}

Every combination of levels (in factor order, the last factor varying fastest) and then
every extra cell becomes an arm: the base with each factor's ``sets`` field set to the
cell's level, an id made of the factors and levels (``profile-local-careful--cap-64``)
and ``cell`` recording the levels. An extra cell may use levels outside a factor's list
(a checkpoint beyond the crossed range); it carries weight 0 in every factorial effect.
Then each ``extra_arms`` entry (issue 19: a study's fixed-menu lane, its switches) is an
arm beside the design: the base with the entry's fields merged in, its own id, no cell.

This module works on the document (plain dicts) before validation, so the schema can
expand a registration once and then check a frozen copy, which lists the arms it was
expanded to, against its design (:func:`expand`).
"""

from __future__ import annotations

import copy
import itertools
import re
from collections.abc import Mapping, Sequence
from typing import Any

from prereg.experiments.toolbottleneck.cells import CELL_FIELDS

#: The arm fields a factor may set, and the kind of value its levels must be.
SETTABLE: Mapping[str, str] = {
    "surface": "string",
    "system_prompt": "string",
    "host.driver": "string",
    "host.model": "string",
    "host.tool_search": "boolean",
    "budgets.completion_cap": "integer",
    "budgets.episode_tokens": "integer",
    "budgets.call_limit": "integer",
    "budgets.turn_limit": "integer",
    # a ToolBottleneckBench study's cell (issue 19): menu, workflow, encoding, menu mode,
    # simulated policy, handoffs
    **CELL_FIELDS,
}
#: ``host.params.<key>`` sets one provider or local-host parameter (any scalar).
PARAMS_PREFIX = "host.params."

Level = str | int | float | bool


class DesignError(ValueError):
    """A factorial design that cannot be expanded; ``field`` is the dotted path at fault."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(message)


def settable(path: str) -> bool:
    return path in SETTABLE or (path.startswith(PARAMS_PREFIX) and len(path) > len(PARAMS_PREFIX))


def level_problem(path: str, level: object) -> str | None:
    """Why ``level`` cannot be a value of the field at ``path``, or None."""
    kind = SETTABLE.get(path, "scalar")
    if kind == "string" and not isinstance(level, str):
        return "expected a string"
    if kind == "integer" and (isinstance(level, bool) or not isinstance(level, int)):
        return "expected an integer"
    if kind == "boolean" and not isinstance(level, bool):
        return "expected true or false"
    if kind == "scalar" and not isinstance(level, str | int | float | bool):
        return "expected a string, a number or a boolean"
    return None


def slug(level: object) -> str:
    """A level as it appears in a cell id: lowercase, runs of other characters as '-'."""
    text = str(level).lower() if not isinstance(level, bool) else ("on" if level else "off")
    return re.sub(r"[^a-z0-9]+", "-", text).strip("-") or "x"


def cell_id(factors: Sequence[str], cell: Mapping[str, object]) -> str:
    return "--".join(f"{factor}-{slug(cell[factor])}" for factor in factors)


def _set(arm: dict[str, Any], path: str, value: object) -> None:
    parts = path.split(".", 2) if path.startswith(PARAMS_PREFIX) else path.split(".")
    target = arm
    for part in parts[:-1]:
        child = target.get(part)
        if child is None:
            child = {}
        elif not isinstance(child, dict):
            raise DesignError(f"factorial.base.{part}", f"'{part}' must be a mapping")
        else:
            child = dict(child)
        target[part] = child
        target = child
    target[parts[-1]] = value


def cells(design: Mapping[str, Any]) -> list[dict[str, Level]]:
    """The design's cells in order: the crossed levels, then the extra cells."""
    factors = design.get("factors") or []
    ids = [f["id"] for f in factors]
    crossed = [dict(zip(ids, combo, strict=True)) for combo in _product(factors)]
    extra = []
    for index, cell in enumerate(design.get("extra_cells") or []):
        if set(cell) != set(ids):
            missing, unknown = sorted(set(ids) - set(cell)), sorted(set(cell) - set(ids))
            raise DesignError(
                f"factorial.extra_cells[{index}]",
                "an extra cell gives a level for every factor and nothing else"
                + (f" (missing: {', '.join(missing)})" if missing else "")
                + (f" (unknown factor: {', '.join(unknown)})" if unknown else ""),
            )
        extra.append({factor: cell[factor] for factor in ids})
    return crossed + extra


def _product(factors: Sequence[Mapping[str, Any]]) -> list[tuple[Level, ...]]:
    return list(itertools.product(*[f["levels"] for f in factors]))


def expand(design: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The arms of the design (see the module docstring); DesignError on a bad design."""
    factors = design.get("factors") or []
    ids = [f["id"] for f in factors]
    base = dict(design.get("base") or {})
    if "id" in base:
        raise DesignError("factorial.base.id", "the base arm has no id (cell ids are generated)")
    for index, factor in enumerate(factors):
        for level_index, level in enumerate(factor["levels"]):
            problem = level_problem(factor["sets"], level)
            if problem:
                raise DesignError(
                    f"factorial.factors[{index}].levels[{level_index}]",
                    f"{problem} for '{factor['sets']}' (got {level!r})",
                )
    arms: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for index, cell in enumerate(cells(design)):
        arm = copy.deepcopy(base)
        for factor in factors:
            _set(arm, factor["sets"], cell[factor["id"]])
        arm_id = cell_id(ids, cell)
        if arm_id in seen:
            raise DesignError(
                "factorial",
                f"cells {seen[arm_id]} and {index} get the same id '{arm_id}' "
                "(two levels read alike, or an extra cell repeats a crossed one)",
            )
        seen[arm_id] = index
        arms.append({"id": arm_id, **arm, "cell": dict(cell)})
    for index, extra in enumerate(design.get("extra_arms") or []):
        where = f"factorial.extra_arms[{index}]"
        if not isinstance(extra.get("id"), str) or "cell" in extra:
            raise DesignError(where, "an extra arm gives its id (and no cell: it is no cell)")
        if extra["id"] in seen:
            raise DesignError(f"{where}.id", f"'{extra['id']}' is already an arm's id")
        seen[extra["id"]] = len(arms)
        arms.append(_merged(base, extra))
    return arms


def _merged(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``extra``'s fields merged in (mappings key by key, the rest replaced)."""
    out = copy.deepcopy(dict(base))
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out
