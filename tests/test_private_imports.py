"""No module imports a library's private module at run time (a name starting with ``_``
after the package: ``typer._click``), save the one the project guards: a fresh install
resolves the newest versions the ranges allow, and a library may move its internals in
any release. Imports under ``if TYPE_CHECKING:`` are read by the type checker only."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = (
    "prereg/commands",
    "prereg/core",
    "registry",
    "reports",
    "runners",
    "stats",
    "experiments",
)
FILES = ("prereg/cli.py",)
#: imported only inside a ``try`` whose fallback keeps every command working
#: (prereg/commands/_common.py, ``plain_coercion``): typer's conversion internals
GUARDED = {"prereg/commands/plain_coercion.py"}


def _runtime_private_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            typing_only |= {id(n) for child in node.body for n in ast.walk(child)}
    found = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        names = (
            [node.module or ""]
            if isinstance(node, ast.ImportFrom) and node.level == 0
            else [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else []
        )
        for name in names:
            top, *rest = name.split(".")
            if top != "prereg" and any(part.startswith("_") for part in rest):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {name}")
    return found


def test_no_private_module_of_a_library_is_imported_at_run_time() -> None:
    paths = [ROOT / f for f in FILES]
    for package in PACKAGES:
        paths += sorted((ROOT / package).rglob("*.py"))
    found = [
        hit
        for path in paths
        if str(path.relative_to(ROOT)) not in GUARDED
        for hit in _runtime_private_imports(path)
    ]
    assert not found, "\n".join(found)
