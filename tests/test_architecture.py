"""The architecture of docs/architecture.md, checked against the code.

- Imports point one way: a module imports only from its own layer or lower ones
  (module-level, function-level and ``TYPE_CHECKING`` imports alike).
- The kernel (``prereg.core``) imports nothing else of the project.
- No function-level import of a project module; a function-level import of a third-party
  module is allowed only with a ``# lazy: <reason>`` comment on its line.
- docs/architecture.md lists the same layers as this test.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Layers, lowest first (docs/architecture.md, "Layers"). Each entry: layer name and the
#: module prefixes that belong to it.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("kernel", ("prereg.core",)),
    ("stats", ("prereg.stats",)),
    ("experiments", ("prereg.experiments",)),
    ("registry", ("prereg.registry",)),
    ("runners", ("prereg.runners",)),
    ("reports", ("prereg.reports",)),
    ("cli", ("prereg.cli", "prereg.commands", "prereg.__main__")),
)
#: Where each package's files are (the root folders install as ``prereg.<name>``).
SOURCES: dict[str, Path] = {
    "prereg.core": ROOT / "prereg" / "core",
    "prereg.commands": ROOT / "prereg" / "commands",
    "prereg.stats": ROOT / "stats",
    "prereg.experiments": ROOT / "experiments",
    "prereg.registry": ROOT / "registry",
    "prereg.runners": ROOT / "runners",
    "prereg.reports": ROOT / "reports",
}
SINGLE_FILES: dict[str, Path] = {
    "prereg": ROOT / "prereg" / "__init__.py",
    "prereg.cli": ROOT / "prereg" / "cli.py",
    "prereg.__main__": ROOT / "prereg" / "__main__.py",
}
LAZY = re.compile(r"#\s*lazy:\s*\S")


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    path: Path
    line: int
    target: str  # the imported module (dotted, absolute)
    in_function: bool
    text: str


def layer_of(module: str) -> int | None:
    """Index of ``module``'s layer, None for the ``prereg`` package itself (its __init__)."""
    for index, (_, prefixes) in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return index
    return None


def _modules() -> Iterator[tuple[str, Path]]:
    for dotted, folder in SOURCES.items():
        for path in sorted(folder.rglob("*.py")):
            rel = path.relative_to(folder).with_suffix("").parts
            if "bundled" in rel:
                continue
            parts = rel[:-1] if rel[-1] == "__init__" else rel
            yield ".".join((dotted, *parts)), path
    yield from SINGLE_FILES.items()


def _absolute(module: str, path: Path, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(module: str, path: Path) -> Iterator[Import]:
    source = path.read_text()
    lines = source.splitlines()
    tree = ast.parse(source)
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    inside = {id(n) for f in functions for n in ast.walk(f) if n is not f}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(module, path, node)
            # ``from prereg import stats`` imports the subpackage prereg.stats
            targets = (
                [f"{base}.{alias.name}" for alias in node.names] if base == "prereg" else [base]
            )
        else:
            continue
        for target in targets:
            yield Import(
                module,
                path,
                node.lineno,
                target,
                id(node) in inside,
                lines[node.lineno - 1].strip(),
            )


ALL_IMPORTS = [imp for module, path in _modules() for imp in _imports(module, path)]
PROJECT = [imp for imp in ALL_IMPORTS if imp.target == "prereg" or imp.target.startswith("prereg.")]


def _where(imp: Import) -> str:
    return f"{imp.path.relative_to(ROOT)}:{imp.line}: {imp.text}"


def test_the_scan_sees_every_package() -> None:
    seen = {layer_of(imp.module) for imp in ALL_IMPORTS}
    assert seen >= set(range(len(LAYERS))), "a layer has no module with imports: scan broken?"
    assert len(PROJECT) > 200


def test_imports_point_one_way() -> None:
    wrong = []
    for imp in PROJECT:
        source, target = layer_of(imp.module), layer_of(imp.target)
        if imp.target in ("prereg", "prereg.__init__"):
            # the top package re-exports only the kernel's version
            target = 0
        if source is None or target is None:
            continue
        if target > source:
            wrong.append(f"{_where(imp)}  ({LAYERS[source][0]} -> {LAYERS[target][0]})")
    assert not wrong, "imports against the layer order:\n" + "\n".join(wrong)


def test_kernel_imports_nothing_of_the_project() -> None:
    wrong = [
        _where(imp)
        for imp in PROJECT
        if layer_of(imp.module) == 0 and not imp.target.startswith("prereg.core")
    ]
    assert not wrong, "\n".join(wrong)


def test_top_package_imports_only_the_kernel() -> None:
    wrong = [
        _where(imp)
        for imp in PROJECT
        if imp.module == "prereg" and not imp.target.startswith("prereg.core")
    ]
    assert not wrong, "\n".join(wrong)


def test_no_function_level_imports_of_the_project() -> None:
    wrong = [_where(imp) for imp in PROJECT if imp.in_function]
    assert not wrong, "move these to the top of the module:\n" + "\n".join(wrong)


def test_function_level_third_party_imports_say_why() -> None:
    third_party_lazy = [imp for imp in ALL_IMPORTS if imp.in_function and imp not in PROJECT]
    missing = [_where(imp) for imp in third_party_lazy if not LAZY.search(imp.text)]
    assert not missing, "add '# lazy: <reason>' to:\n" + "\n".join(missing)


def test_architecture_doc_lists_these_layers() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    match = re.search(r"^Layers, lowest first: (.+)$", text, re.M)
    assert match, "docs/architecture.md must state 'Layers, lowest first: a -> b -> ...'"
    assert [name.strip() for name in match.group(1).split("->")] == [n for n, _ in LAYERS]
    readme = (ROOT / "README.md").read_text()
    assert " -> ".join(n for n, _ in LAYERS) in readme, "README's architecture section"


@pytest.mark.parametrize(
    ("module", "target", "ok"),
    [
        ("prereg.reports.load", "prereg.runners.store", True),
        ("prereg.registry.units", "prereg.runners.offer", False),
        ("prereg.core.errors", "prereg.stats", False),
        ("prereg.commands.plan_cmds", "prereg.reports.planning", True),
        ("prereg.stats.paired", "prereg.core.errors", True),
    ],
)
def test_layer_rule_itself(module: str, target: str, ok: bool) -> None:
    source, dest = layer_of(module), layer_of(target)
    assert source is not None and dest is not None
    assert (dest <= source) is ok
