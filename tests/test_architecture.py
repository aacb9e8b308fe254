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
from collections.abc import Iterable, Iterator
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
        ("prereg.reports.load", "prereg.runners.store.sqlite", True),
        ("prereg.registry.units", "prereg.runners.offer", False),
        ("prereg.core.errors", "prereg.stats", False),
        ("prereg.commands.plan_cmds", "prereg.reports.planning.from_runs", True),
        ("prereg.stats.paired", "prereg.core.errors", True),
    ],
)
def test_layer_rule_itself(module: str, target: str, ok: bool) -> None:
    source, dest = layer_of(module), layer_of(target)
    assert source is not None and dest is not None
    assert (dest <= source) is ok


# ---- no import circle between modules (issue 38) --------------------------------------

MODULES = {module for module, _ in _modules()}


def _edges(module: str, path: Path) -> Iterator[tuple[str, str]]:
    """(importer, imported module) for every project import of ``module``, at any level
    (module, function, ``TYPE_CHECKING``): ``from prereg.x import y`` is an edge to the
    module ``prereg.x.y`` where ``y`` is one, else to ``prereg.x``."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(module, path, node)
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
                for alias in node.names
            ]
        else:
            continue
        for target in targets:
            if target in MODULES and target != module:
                yield module, target


def circles(edges: Iterable[tuple[str, str]]) -> list[list[str]]:
    """The import circles of a graph: its strongly connected components of more than one
    module (Tarjan's algorithm, iterative), each sorted."""
    graph: dict[str, set[str]] = {}
    for source, target in edges:
        graph.setdefault(source, set()).add(target)
        graph.setdefault(target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_circle_between_modules() -> None:
    edges = [edge for module, path in _modules() for edge in _edges(module, path)]
    assert len(edges) > 200, "the scan sees too few imports: broken?"
    found = circles(edges)
    assert not found, "import circles (TYPE_CHECKING imports count):\n" + "\n".join(
        " <-> ".join(circle) for circle in found
    )


def test_the_circle_finder_finds_a_planted_circle() -> None:
    # a -> b -> c -> a is one circle; d -> a and c -> e hang off it; f <-> g is another
    planted = [("a", "b"), ("b", "c"), ("c", "a"), ("d", "a"), ("c", "e"), ("f", "g"), ("g", "f")]
    assert sorted(circles(planted)) == [["a", "b", "c"], ["f", "g"]]
    assert circles([("a", "b"), ("b", "c"), ("a", "c")]) == []  # a diamond is no circle


# ---- each subpackage imports only what its __init__ declares (issue 38) ---------------


def declared_imports() -> dict[str, tuple[str, ...]]:
    """Each subpackage's ``MAY_IMPORT`` (read from its ``__init__.py`` without importing it)."""
    declared: dict[str, tuple[str, ...]] = {}
    for module, path in _modules():
        if path.name != "__init__.py" or module.count(".") < 2:
            continue
        for node in ast.parse(path.read_text()).body:
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and node.target.id == "MAY_IMPORT"
                and node.value is not None
            ):
                declared[module] = tuple(ast.literal_eval(node.value))
    return declared


def undeclared(edges: Iterable[tuple[str, str]], declared: dict[str, tuple[str, ...]]) -> list[str]:
    """``importer -> imported`` for every import leaving a subpackage to a module its
    declaration does not cover (a prefix covers itself and everything below it)."""

    def inside(module: str, package: str) -> bool:
        return module == package or module.startswith(package + ".")

    wrong = []
    for source, target in edges:
        for package, allowed in declared.items():
            if inside(source, package) and not inside(target, package):
                if not any(inside(target, prefix) for prefix in allowed):
                    wrong.append(f"{source} -> {target}  (not in {package}.MAY_IMPORT)")
    return sorted(wrong)


SUBPACKAGES = (
    "prereg.runners.store",
    "prereg.runners.judging",
    "prereg.runners.exchange",
    "prereg.runners.toolbottleneck",
    "prereg.runners.providers",
    "prereg.runners.drivers",
    "prereg.runners.mcp",
    "prereg.reports.invokerank",
    "prereg.reports.judged",
    "prereg.reports.toolbottleneck",
    "prereg.reports.calibration",
    "prereg.reports.render",
    "prereg.reports.planning",
    "prereg.reports.registered",
)


def test_every_subpackage_declares_what_it_owns_and_may_import() -> None:
    declared = declared_imports()
    missing = [p for p in SUBPACKAGES if p not in declared]
    assert not missing, f"add MAY_IMPORT to these subpackages' __init__.py: {missing}"
    for package in SUBPACKAGES:
        init = ROOT.joinpath(*package.split(".")[1:], "__init__.py")
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert "May import" in doc, f"{init}: the docstring says what it may import"


def test_subpackages_import_only_what_they_declare() -> None:
    edges = [edge for module, path in _modules() for edge in _edges(module, path)]
    wrong = undeclared(edges, declared_imports())
    assert not wrong, "imports their subpackage does not declare:\n" + "\n".join(wrong)


def test_the_declaration_check_catches_an_undeclared_import() -> None:
    declared = {"prereg.runners.store": ("prereg.core", "prereg.runners.record")}
    edges = [
        ("prereg.runners.store.sqlite", "prereg.core.errors"),  # declared (a prefix)
        ("prereg.runners.store.sqlite", "prereg.runners.store.chain"),  # inside
        ("prereg.runners.store.sqlite", "prereg.runners.recorder"),  # a longer name: not covered
        ("prereg.runners.store.verify", "prereg.runners.harness"),  # undeclared
        ("prereg.runners.api", "prereg.runners.harness"),  # outside every subpackage
    ]
    assert undeclared(edges, declared) == [
        "prereg.runners.store.sqlite -> prereg.runners.recorder  (not in "
        "prereg.runners.store.MAY_IMPORT)",
        "prereg.runners.store.verify -> prereg.runners.harness  (not in "
        "prereg.runners.store.MAY_IMPORT)",
    ]


def test_runners_and_reports_keep_at_most_twelve_top_level_modules() -> None:
    for folder in ("runners", "reports"):
        top = sorted(p.name for p in (ROOT / folder).glob("*.py"))
        assert len(top) <= 12, f"{folder}/ has {len(top)} modules at its top level: {top}"


def test_no_module_name_repeats_its_folder_name() -> None:
    wrong = []
    for _, path in _modules():
        folder = path.parent.name
        if path.stem != "__init__" and path.stem.startswith(folder):
            wrong.append(str(path.relative_to(ROOT)))
    assert not wrong, "rename (the folder already says it):\n" + "\n".join(wrong)
