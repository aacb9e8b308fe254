"""ToolSandbox's ``result_summary.json`` read as it is written, and checked against itself.

Seed 001 (ToolBottleneckBench), section 5.1 and appendix K: "In ToolSandbox, a larger
menu costs tokens more clearly than success", and "ToolSandbox rows are re-graded from
saved state, without running the tools again". ToolSandbox (github.com/apple/ToolSandbox)
is not on a package registry, so prereg never installs or runs it: this module reads the
summary its CLI saves, an evidence class of its own (:data:`EVIDENCE_CLASS`), never
pooled with prereg's run records.

The format, as ToolSandbox writes it (apple/ToolSandbox at commit 165848b9a78c):

- ``tool_sandbox/cli/__init__.py`` lines 64-88 (``write_result_summary``): one JSON object
  with ``per_scenario_results`` (a list), ``category_aggregated_results`` (category ->
  ``{"similarity": mean, "turn_count": mean}``, each ``sum(v) / len(v)``) and ``git_sha``
  (a string or null).
- ``tool_sandbox/cli/utils.py`` lines 184-207 (``run_scenario``): each scenario's object,
  ``name``, ``categories``, ``traceback``, ``exception_type``, ``milestone_similarity``,
  ``minefield_similarity``, ``similarity``, ``turn_count``, ``milestone_mapping`` and
  ``minefield_mapping`` (milestone index -> ``[snapshot index, similarity]``). A scenario
  that raised is saved with similarities 0, empty mappings, its traceback and its
  exception's type name.
- ``tool_sandbox/cli/utils.py`` lines 214-256 (``get_category_summary``): the category
  means, over every scenario carrying the category, and ``ALL_CATEGORIES`` over every
  scenario; ``THREE_DISTRACTION_TOOLS`` leaves out the scrambled variants built on it.
- ``tool_sandbox/common/evaluation.py`` lines 961-982 (``EvaluationResult``):
  ``similarity = int(minefield_similarity == 0) * milestone_similarity``.
- ``tool_sandbox/common/execution_context.py`` lines 54-99 (``ScenarioCategories``, a
  ``strenum.StrEnum`` whose ``auto()`` value is the member's name): the category names.
- ``tool_sandbox/scenarios/__init__.py`` lines 57-129 (``named_scenarios``): each base
  scenario ``NAME`` (tagged ``NO_DISTRACTION_TOOLS``) gets ``NAME_3_distraction_tools``,
  ``NAME_10_distraction_tools`` and ``NAME_all_tools`` (tagged ``THREE_DISTRACTION_TOOLS``,
  ``TEN_DISTRACTION_TOOLS``, ``ALL_TOOLS_AVAILABLE``), and five scrambled variants of the
  3-distraction menu (``NAME_3_distraction_tools_<what>_scrambled``).

No file ToolSandbox saves carries a token count (the summary above; a scenario's
``trajectories/<name>/conversation.json``, ``execution_context.json`` and
``pretty_print.txt`` hold messages and state, no usage): tokens are not measured here.

"Re-graded from saved state" (reading T2 in docs/toolbottleneck.md): the similarity itself
is ToolSandbox's evaluator over its saved execution context, which prereg cannot import;
what the summary lets prereg recompute without running anything is checked instead. A
summary whose scenario's similarity disagrees with its own milestone and minefield
similarities, whose raised scenario carries a score, whose category means differ from the
means of its scenarios, whose scenario's name disagrees with its menu category, or that
names a scenario twice is refused (exit 2, naming the file, the field and the scenario).
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    ValidationError,
)

from prereg.core.errors import BadInput
from prereg.core.safeio import MAX_EXCHANGE_BYTES, read_input
from prereg.registry.digest import file_digest

#: The evidence class of an imported ToolSandbox summary (never pooled with others).
EVIDENCE_CLASS = "toolsandbox-import"

#: ``ScenarioCategories`` (tool_sandbox/common/execution_context.py lines 54-99).
Category = Literal[
    "SINGLE_TOOL_CALL",
    "MULTIPLE_TOOL_CALL",
    "SINGLE_USER_TURN",
    "MULTIPLE_USER_TURN",
    "STATE_DEPENDENCY",
    "CANONICALIZATION",
    "COREFERENCE",
    "DISAMBIGUATION",
    "INSUFFICIENT_INFORMATION",
    "NO_DISTRACTION_TOOLS",
    "THREE_DISTRACTION_TOOLS",
    "TEN_DISTRACTION_TOOLS",
    "ALL_TOOLS_AVAILABLE",
    "TOOL_NAME_SCRAMBLED",
    "TOOL_DESCRIPTION_SCRAMBLED",
    "ARG_DESCRIPTION_SCRAMBLED",
    "ARG_NAME_SCRAMBLED",
    "ARG_TYPE_SCRAMBLED",
]
CATEGORIES: tuple[str, ...] = get_args(Category)
#: The key ``get_category_summary`` adds for every scenario.
ALL_CATEGORIES = "ALL_CATEGORIES"
#: The scrambled augmentations, built on the 3-distraction menu.
SCRAMBLED = frozenset(
    {
        "TOOL_NAME_SCRAMBLED",
        "TOOL_DESCRIPTION_SCRAMBLED",
        "ARG_DESCRIPTION_SCRAMBLED",
        "ARG_NAME_SCRAMBLED",
        "ARG_TYPE_SCRAMBLED",
    }
)

Menu = Literal["none", "3", "10", "all"]
#: The menu sizes, smallest first: (menu, its category, the suffix its name carries).
MENUS: tuple[tuple[Menu, str, str], ...] = (
    ("none", "NO_DISTRACTION_TOOLS", ""),
    ("3", "THREE_DISTRACTION_TOOLS", "_3_distraction_tools"),
    ("10", "TEN_DISTRACTION_TOOLS", "_10_distraction_tools"),
    ("all", "ALL_TOOLS_AVAILABLE", "_all_tools"),
)
MENU_LABELS: dict[Menu, str] = {
    "none": "no distraction tools",
    "3": "3 distraction tools",
    "10": "10 distraction tools",
    "all": "all tools",
}
#: Two saved numbers agree when they differ by less than this (both are Python floats
#: written with ``json.dump``, which round-trips them; the tolerance only forgives a
#: re-serialisation that shortened them).
TOLERANCE = 1e-9


def _number(value: Any) -> Any:
    """A JSON number as ToolSandbox writes it: no text, no true or false."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"a JSON number, not {json.dumps(value)[:40]}")
    return value


Score = Annotated[
    float, BeforeValidator(_number), Field(ge=0.0, le=1.0, allow_inf_nan=False, strict=False)
]
MilestoneMap = dict[Annotated[str, Field(pattern=r"^[0-9]+$")], tuple[StrictInt, Score]]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ScenarioResult(_Model):
    """One object of ``per_scenario_results`` (tool_sandbox/cli/utils.py lines 184-207)."""

    name: StrictStr = Field(min_length=1)
    categories: list[Category]
    traceback: StrictStr | None
    exception_type: StrictStr | None
    milestone_similarity: Score
    minefield_similarity: Score
    similarity: Score
    turn_count: StrictInt = Field(ge=0)
    milestone_mapping: MilestoneMap
    minefield_mapping: MilestoneMap


class CategoryMean(_Model):
    """One value of ``category_aggregated_results`` (tool_sandbox/cli/__init__.py 80)."""

    similarity: Annotated[float, BeforeValidator(_number), Field(allow_inf_nan=False)]
    turn_count: Annotated[float, BeforeValidator(_number), Field(allow_inf_nan=False)]


class ResultSummary(_Model):
    """The whole ``result_summary.json`` (tool_sandbox/cli/__init__.py lines 75-88)."""

    per_scenario_results: list[ScenarioResult]
    category_aggregated_results: dict[StrictStr, CategoryMean]
    git_sha: StrictStr | None


@dataclass(frozen=True)
class Scenario:
    """One saved scenario as the menu contrast reads it: ``base`` is the base scenario's
    name, ``menu`` its menu size (None for a scrambled variant, which varies the tool
    text, not the menu)."""

    name: str
    base: str | None
    menu: Menu | None
    similarity: float
    turn_count: int
    raised: bool


@dataclass(frozen=True)
class SummaryFile:
    """A checked summary: where it was read, its sha256, ToolSandbox's git SHA."""

    path: str
    digest: str
    git_sha: str | None
    scenarios: tuple[Scenario, ...]
    summary: ResultSummary


def _location(loc: Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", part):
            out += ("." if out else "") + part
        else:
            out += f"[{json.dumps(part)}]"
    return out


def _parse(path: Path, data: bytes) -> ResultSummary:
    try:
        document = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise BadInput(f"not UTF-8 text ({exc})", file=str(path)) from None
    except (ValueError, RecursionError) as exc:
        raise BadInput(f"not JSON ({exc})", file=str(path)) from None
    if not isinstance(document, dict):
        raise BadInput("not a JSON object (ToolSandbox's result_summary.json)", file=str(path))
    try:
        return ResultSummary.model_validate(document)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = [p for p in err["loc"] if not (isinstance(p, str) and p.startswith("literal"))]
        message = err["msg"]
        if err["type"] == "extra_forbidden":
            message = "not a field of ToolSandbox's result_summary.json"
        elif err["type"] == "missing":
            message = "missing (ToolSandbox writes it)"
        where = _location(loc) or None
        rows = document.get("per_scenario_results")
        if len(loc) >= 2 and loc[0] == "per_scenario_results" and isinstance(rows, list):
            index = loc[1]
            if isinstance(index, int) and 0 <= index < len(rows) and isinstance(rows[index], dict):
                name = rows[index].get("name")
                if isinstance(name, str):
                    message += f" (scenario {json.dumps(name)})"
        raise BadInput(message, file=str(path), field=where) from None


def menu_of(row: ScenarioResult) -> tuple[Menu | None, str | None]:
    """(menu size, base name) of a saved scenario, or a ValueError saying why its
    categories or its name do not fit ``named_scenarios``' naming."""
    tags = set(row.categories)
    menus = [(menu, category, suffix) for menu, category, suffix in MENUS if category in tags]
    if len(menus) != 1:
        found = ", ".join(c for _, c, _ in menus) or "none"
        raise ValueError(
            "a ToolSandbox scenario carries exactly one menu category "
            f"({', '.join(c for _, c, _ in MENUS)}); found {found}"
        )
    menu, category, suffix = menus[0]
    scrambled = tags & SCRAMBLED
    if scrambled:
        if menu != "3":
            raise ValueError(f"a scrambled variant is built on {MENUS[1][1]}, not {category}")
        return None, None
    if suffix:
        if not row.name.endswith(suffix) or len(row.name) == len(suffix):
            raise ValueError(
                f"tagged {category}, so ToolSandbox names it BASE{suffix}; the name does not end so"
            )
        return menu, row.name[: -len(suffix)]
    return menu, row.name


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=TOLERANCE, abs_tol=TOLERANCE)


def category_means(rows: Sequence[ScenarioResult]) -> dict[str, dict[str, float]]:
    """``get_category_summary`` and the means ``write_result_summary`` saves
    (tool_sandbox/cli/utils.py lines 214-256, cli/__init__.py line 80), summed in the
    scenarios' order as ToolSandbox sums them."""
    lists: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        keys = [
            c
            for c in row.categories
            if not (c == "THREE_DISTRACTION_TOOLS" and set(row.categories) & SCRAMBLED)
        ]
        for key in [*keys, ALL_CATEGORIES]:
            lists[key]["similarity"].append(row.similarity)
            lists[key]["turn_count"].append(float(row.turn_count))
    return {key: {k: sum(v) / len(v) for k, v in agg.items()} for key, agg in lists.items()}


def _refuse(path: Path, field: str, message: str) -> BadInput:
    return BadInput(message, file=str(path), field=field)


def check_consistency(path: Path, summary: ResultSummary) -> tuple[Scenario, ...]:
    """The scenarios of a summary that agrees with itself; BadInput naming the first
    disagreement (the scenario, its field) otherwise."""
    seen: dict[str, int] = {}
    out: list[Scenario] = []
    for i, row in enumerate(summary.per_scenario_results):
        at = f"per_scenario_results[{i}]"
        quoted = json.dumps(row.name)
        if row.name in seen:
            raise _refuse(
                path,
                f"{at}.name",
                f"scenario {quoted} is saved twice (also at per_scenario_results"
                f"[{seen[row.name]}]); ToolSandbox names each scenario once",
            )
        seen[row.name] = i
        expected = float(row.minefield_similarity == 0) * row.milestone_similarity
        if not _close(row.similarity, expected):
            raise _refuse(
                path,
                f"{at}.similarity",
                f"scenario {quoted}: similarity {row.similarity!r} disagrees with its own "
                f"milestone ({row.milestone_similarity!r}) and minefield "
                f"({row.minefield_similarity!r}) similarities: ToolSandbox saves "
                f"int(minefield == 0) * milestone = {expected!r}",
            )
        raised = row.traceback is not None or row.exception_type is not None
        if raised and (
            row.traceback is None
            or row.exception_type is None
            or row.similarity != 0
            or row.milestone_similarity != 0
            or row.minefield_similarity != 0
            or row.milestone_mapping
            or row.minefield_mapping
        ):
            raise _refuse(
                path,
                f"{at}.traceback",
                f"scenario {quoted} raised, and ToolSandbox saves a raised scenario with "
                "both traceback and exception_type, similarities 0 and empty mappings",
            )
        try:
            menu, base = menu_of(row)
        except ValueError as exc:
            raise _refuse(path, f"{at}.categories", f"scenario {quoted}: {exc}") from None
        out.append(Scenario(row.name, base, menu, row.similarity, row.turn_count, raised))
    if not out:
        raise _refuse(path, "per_scenario_results", "no scenario in the summary")
    recomputed = category_means(summary.per_scenario_results)
    saved = summary.category_aggregated_results
    for key in sorted(set(saved) | set(recomputed)):
        field = f"category_aggregated_results[{json.dumps(key)}]"
        if key not in saved:
            raise _refuse(
                path, field, "missing: a scenario carries this category, so ToolSandbox saves it"
            )
        if key not in recomputed:
            raise _refuse(path, field, "no scenario carries this category")
        for measure in ("similarity", "turn_count"):
            mine, theirs = recomputed[key][measure], getattr(saved[key], measure)
            if not _close(mine, theirs):
                raise _refuse(
                    path,
                    f"{field}.{measure}",
                    f"the saved mean {theirs!r} disagrees with the mean of the scenarios "
                    f"carrying {key} ({mine!r})",
                )
    return tuple(out)


def read_result_summary(path: Path) -> SummaryFile:
    """A ToolSandbox ``result_summary.json``, parsed and checked against itself;
    BadInput (exit 2) naming the file and the JSON field for anything else."""
    data = read_input(path, limit=MAX_EXCHANGE_BYTES, what="a ToolSandbox result_summary.json")
    summary = _parse(path, data)
    scenarios = check_consistency(path, summary)
    return SummaryFile(str(path), file_digest(data), summary.git_sha, scenarios, summary)


def read_result_summaries(paths: Sequence[Path]) -> list[SummaryFile]:
    """Every file checked before any is used; the same content given twice is refused
    (it would count its scenarios twice)."""
    files: list[SummaryFile] = []
    for path in paths:
        read = read_result_summary(path)
        for other in files:
            if other.digest == read.digest:
                raise BadInput(
                    f"the same summary as {other.path} (sha256 equal): each run counts once",
                    file=str(path),
                )
        files.append(read)
    if not files:
        raise BadInput("give at least one result_summary.json", field="RESULT_SUMMARY_JSON")
    return files
