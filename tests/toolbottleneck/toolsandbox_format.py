"""ToolSandbox's ``result_summary.json``, written here as ToolSandbox's own code writes it.

Written from apple/ToolSandbox at commit 165848b9a78cead7ca7fe7c89c688b58e6501219 (read
in /work/.mirror/apple+ToolSandbox/repo), not from prereg's reader:

- a scenario's object: ``tool_sandbox/cli/utils.py`` lines 184-195 (played) and 197-207
  (raised: similarities 0, ``turn_count = scenario.max_messages`` (30 by default,
  ``tool_sandbox/common/scenario.py`` line 56), empty mappings);
- ``similarity = int(minefield_similarity == 0) * milestone_similarity``:
  ``tool_sandbox/common/evaluation.py`` lines 978-982;
- scenario names and categories: ``tool_sandbox/scenarios/__init__.py`` lines 57-129 (the
  base keeps its categories and gains ``NO_DISTRACTION_TOOLS``; ``NAME_3_distraction_tools``
  and the others gain their menu category; the scrambled variants copy the 3-distraction
  scenario and gain their scrambled category);
- the category means: ``get_category_summary`` (``tool_sandbox/cli/utils.py`` lines
  214-256, re-typed below as :func:`category_summary`) and ``write_result_summary``
  (``tool_sandbox/cli/__init__.py`` lines 64-88: ``sum(v) / len(v)``, ``json.dump(...,
  indent=4, ensure_ascii=False)``).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

SCRAMBLED = (
    "TOOL_NAME_SCRAMBLED",
    "TOOL_DESCRIPTION_SCRAMBLED",
    "ARG_DESCRIPTION_SCRAMBLED",
    "ARG_TYPE_SCRAMBLED",
    "ARG_NAME_SCRAMBLED",
)
#: menu -> (name suffix, category), tool_sandbox/scenarios/__init__.py lines 71-96
MENU_SUFFIX = {
    "none": ("", "NO_DISTRACTION_TOOLS"),
    "3": ("_3_distraction_tools", "THREE_DISTRACTION_TOOLS"),
    "10": ("_10_distraction_tools", "TEN_DISTRACTION_TOOLS"),
    "all": ("_all_tools", "ALL_TOOLS_AVAILABLE"),
}
MAX_MESSAGES = 30


def played(
    name: str,
    categories: list[str],
    milestone: float,
    minefield: float,
    turns: int,
) -> dict[str, Any]:
    """tool_sandbox/cli/utils.py lines 184-195, the EvaluationResult of evaluation.py."""
    return {
        "name": name,
        "categories": categories,
        "traceback": None,
        "exception_type": None,
        "milestone_similarity": milestone,
        "minefield_similarity": minefield,
        "similarity": int(minefield == 0) * milestone,
        "turn_count": turns,
        "milestone_mapping": {"0": [2, 1.0], "1": [turns - 1, milestone]},
        "minefield_mapping": {"0": [3, minefield]} if minefield else {},
    }


def raised(name: str, categories: list[str]) -> dict[str, Any]:
    """tool_sandbox/cli/utils.py lines 197-207."""
    return {
        "name": name,
        "categories": categories,
        "traceback": 'Traceback (most recent call last):\n  File "x.py"\nRuntimeError: boom\n',
        "exception_type": "RuntimeError",
        "milestone_similarity": 0,
        "minefield_similarity": 0,
        "similarity": 0,
        "turn_count": MAX_MESSAGES,
        "milestone_mapping": {},
        "minefield_mapping": {},
    }


def category_summary(rows: list[dict[str, Any]]) -> dict[str, dict[str, list[float]]]:
    """``get_category_summary``, tool_sandbox/cli/utils.py lines 214-256."""
    summary: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for current in rows:
        for category in current["categories"]:
            if category == "THREE_DISTRACTION_TOOLS" and set(current["categories"]) & set(
                SCRAMBLED
            ):
                continue
            summary[category]["similarity"].append(current["similarity"])
            summary[category]["turn_count"].append(current["turn_count"])
        summary["ALL_CATEGORIES"]["similarity"].append(current["similarity"])
        summary["ALL_CATEGORIES"]["turn_count"].append(current["turn_count"])
    return summary


def document(rows: list[dict[str, Any]], git_sha: str | None = "abc123") -> dict[str, Any]:
    """``write_result_summary``'s object, tool_sandbox/cli/__init__.py lines 76-85."""
    return {
        "per_scenario_results": rows,
        "category_aggregated_results": {
            category: {k: sum(v) / len(v) for k, v in aggregation.items()}
            for category, aggregation in category_summary(rows).items()
        },
        "git_sha": git_sha,
    }


def write(path: Path, doc: dict[str, Any]) -> Path:
    """As ``write_result_summary`` writes it (indent 4, ensure_ascii False)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        json.dump(doc, f, indent=4, ensure_ascii=False)
    return path


def scenarios(
    bases: int,
    *,
    seed: int,
    menu_penalty: float = 0.15,
    turn_cost: float = 1.5,
    drop: tuple[tuple[str, str], ...] = (),
    raise_at: tuple[tuple[str, str], ...] = (),
    scrambled: bool = True,
) -> list[dict[str, Any]]:
    """A run of ``bases`` base scenarios at the four menu sizes (and, with ``scrambled``,
    one scrambled variant each), a larger menu lowering the milestone similarity and
    adding turns on average; ``drop`` leaves out (base, menu) rows, ``raise_at`` saves
    them as raised. Rows shuffled, as ToolSandbox shuffles scenarios before playing."""
    rng = np.random.default_rng(seed)
    rows: list[dict[str, Any]] = []
    shift = {"none": 0.0, "3": 0.3, "10": 0.6, "all": 1.0}
    for b in range(bases):
        base = f"scenario_{b:02d}_send_message"
        tags = ["SINGLE_TOOL_CALL", "SINGLE_USER_TURN"] if b % 2 else ["MULTIPLE_TOOL_CALL"]
        level = float(rng.uniform(0.6, 1.0))
        for menu, (suffix, category) in MENU_SUFFIX.items():
            name = base + suffix
            if (base, menu) in drop:
                continue
            cats = [*tags, category]
            if (base, menu) in raise_at:
                rows.append(raised(name, cats))
                continue
            milestone = float(
                np.clip(level - menu_penalty * shift[menu] + rng.normal(0, 0.08), 0, 1)
            )
            minefield = 0.5 if rng.uniform() < 0.08 else 0.0
            turns = int(4 + rng.integers(0, 4) + round(turn_cost * shift[menu] * 3))
            rows.append(played(name, cats, milestone, minefield, turns))
        if scrambled:
            name = base + "_3_distraction_tools_tool_name_scrambled"
            cats = [*tags, "THREE_DISTRACTION_TOOLS", "TOOL_NAME_SCRAMBLED"]
            rows.append(played(name, cats, float(rng.uniform(0, 1)), 0.0, 9))
    order = rng.permutation(len(rows))
    return [rows[i] for i in order]
