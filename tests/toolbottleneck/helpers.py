"""Small task families for the ToolBottleneckBench tests, built as plain documents."""

from __future__ import annotations

import contextlib
import copy
import io
from pathlib import Path
from typing import Any

import yaml

from prereg.experiments.toolbottleneck.family import FamilyFile, parse_family

ROOT = Path(__file__).resolve().parents[2]
BUNDLED = ROOT / "experiments" / "bundled" / "toolbottleneck" / "families"
#: Small pressure levels so that the property tests stay fast; the bundled test uses the
#: seed's defaults.
SMALL_SIZES: dict[str, Any] = {
    "catalogs": [16, 48],
    "shortlist": 8,
    "menus": [8, 12],
    "handoffs": [0, 1, 2],
}


def tools(kinds: list[str], action: bool) -> list[dict[str, Any]]:
    out = []
    for kind in kinds:
        base = kind.replace("-", "_")
        out.append(
            {
                "name": f"search_{base}s",
                "operation": "search",
                "kind": kind,
                "connector": f"{kind}-hub",
            }
        )
        out.append(
            {"name": f"read_{base}", "operation": "read", "kind": kind, "connector": f"{kind}-hub"}
        )
    if action:
        out.append(
            {
                "name": f"flag_{kinds[0].replace('-', '_')}",
                "operation": "act",
                "kind": kinds[0],
                "connector": f"{kinds[0]}-hub",
            }
        )
    return out


def family_doc(*, action: bool = True, small: bool = True) -> dict[str, Any]:
    kinds = ["case", "commitment", "contact"]
    doc: dict[str, Any] = {
        "id": "test-escalation",
        "intent": "escalation",
        "domain": "email",
        "request": "Should case {ref} be escalated? Route {route}.",
        "route": {"workspace": "northwind", "region": "eu-west", "collection": "support"},
        "sources": kinds,
        "facts": {
            "status": {"value": "overdue"},
            "due": {"value": "2026-03-01", "type": "date"},
            "contact": {"value": "Dana Okafor"},
        },
        "decision": "escalate",
        "tools": tools(kinds, action),
        "layouts": {
            "low": [["status", "due", "contact"]],
            "medium": [["status"], ["due", "contact"]],
            "high": [["status"], ["due"], ["contact"]],
        },
    }
    if action:
        doc["action"] = {
            "tool": "flag_case",
            "field": "escalation",
            "before": "none",
            "value": "requested",
        }
    if small:
        doc["sizes"] = copy.deepcopy(SMALL_SIZES)
    return doc


def as_yaml(doc: dict[str, Any]) -> str:
    return yaml.safe_dump(doc, sort_keys=False)


def family(doc: dict[str, Any], filename: str = "fam.yaml") -> FamilyFile:
    return parse_family(as_yaml(doc), filename)


def run_cli(*args: str | Path) -> tuple[int, str]:
    """``prereg ARGS`` in-process outside a test's ``capsys`` (module-scoped fixtures):
    the exit code and what it printed on stdout."""
    from prereg.cli import main  # the CLI only where a test runs it

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        try:
            main([str(a) for a in args])
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return code, out.getvalue()
