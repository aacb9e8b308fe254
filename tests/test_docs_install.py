"""Install lines name ``prereg-agents``, never ``prereg`` (issue 37).

On PyPI the name ``prereg`` belongs to an unrelated project (a pre-registration tool with
its own ``prereg`` command), so ``pip install 'prereg[inspect]'`` installs that project.
This distribution is ``prereg-agents``; the command and the import package stay
``prereg``. Every install command in README.md, docs/ and the code's own messages must
name ``prereg-agents`` (with its extras), a local path (``-e .``, ``-e '.[x]'``) or an
unrelated package. A bare ``prereg[extra]`` or ``prereg==1.0`` anywhere is a requirement
for the other project too, install command or not.
"""

from __future__ import annotations

import ast
import re
import shlex
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from prereg.core.version import DISTRIBUTION, package_version

ROOT = Path(__file__).resolve().parents[1]
#: The name on PyPI that belongs to the other project (PEP 503 normalised).
FOREIGN = "prereg"
#: Where the code's user-facing strings live (the real folders, not the prereg/ symlinks).
CODE_DIRS = ("prereg", "registry", "experiments", "runners", "stats", "reports", "bench")

# An install command (every argument a requirement) or a run-from-the-index command (its
# first argument the package, unless --from/--spec names it).
_INSTALL = re.compile(
    r"(?:\bpip3?|\buv\s+pip|\bpython3?\s+-m\s+pip)\s+install\b"
    r"|\bpipx\s+(?:install|inject\s+\S+)\b"
    r"|\buv\s+(?:add|tool\s+install)\b"
    r"|\b(?:poetry|pdm|hatch)\s+add\b"
    r"|(?P<run>\buvx|\buv\s+tool\s+run|\bpipx\s+run)\b"
)
# The command's arguments end at a shell separator, a comment or the end of a code span.
_END = re.compile(r"`|&&|\|\||[;|]|\s#")
# Options whose value is a requirement (uvx --from X, --with X; pipx run --spec X).
_REQUIREMENT_OPTION = frozenset({"--from", "--with", "--spec"})
# pip/uv options whose value is not a requirement.
_TAKES_VALUE = frozenset(
    "-e --editable -r --requirement -c --constraint -i --index-url --extra-index-url "
    "-f --find-links -t --target --prefix --root --python --python-version --platform "
    "--group -p --source --index --cache-dir --log".split()
)
# A requirement: a project name, then nothing, extras, a version, a marker or `@ url`.
_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")
# `prereg[extra]`, `prereg==1.0`, `prereg @ git+...` in any text (a requirement, whatever
# the command around it); `prereg-agents[...]`, `prereg_agents`, `.prereg[` do not match.
_FOREIGN_TOKEN = re.compile(
    r"(?<![\w.-])prereg(?:\[[^\]\s]*\]|\s*(?:===?|>=|<=|~=|!=)\s*[\w.*]|\s+@\s+\S)", re.I
)


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _arguments(segment: str) -> list[str]:
    try:
        return shlex.split(segment)
    except ValueError:  # an unbalanced quote (prose, a string literal's end)
        return [word.strip("'\",()") for word in segment.split()]


def _requirement_name(arg: str) -> str | None:
    """The project an argument asks the index for; None for a path, URL or option."""
    match = _NAME.match(arg)
    if match is None:  # ".", "./x", ".[dev]", "-e", "{extra}"...
        return None
    rest = arg[match.end() :]
    if rest[:1] in ("/", "\\", ":"):  # a folder (prereg/), a URL (https://...)
        return None
    if rest.endswith((".whl", ".tar.gz", ".zip")):  # a file
        return None
    return match.group()


def install_requirements(line: str) -> Iterator[str]:
    """Every requirement given to an install or run command in one line of text."""
    for command in _INSTALL.finditer(line):
        tail = line[command.end() :]
        end = _END.search(tail)
        args = _arguments(tail[: end.start()] if end else tail)
        runs = command.group("run") is not None
        package_named = False  # a run command's package, once named, ends the scan
        option: str | None = None
        for arg in args:
            if option is not None:
                if option in _REQUIREMENT_OPTION:
                    package_named |= option != "--with"
                    yield arg
                option = None
            elif arg.startswith("-"):
                name = arg.split("=", 1)[0]
                if "=" in arg and name in _REQUIREMENT_OPTION:
                    package_named |= name != "--with"
                    yield arg.split("=", 1)[1]
                elif "=" not in arg and name in _TAKES_VALUE | _REQUIREMENT_OPTION:
                    option = name
            elif runs and package_named:
                break  # the command and its own arguments
            elif arg != "@" and _requirement_name(arg) is not None:
                yield arg
                package_named = runs


def foreign_requirements(text: str) -> list[str]:
    """The requirements in ``text`` that would install the other project ``prereg``."""
    joined = re.sub(r"\\\n\s*", " ", text)  # a command continued over lines
    found: list[str] = []
    for line in joined.splitlines():
        for req in install_requirements(line):
            name = _requirement_name(req)
            if name is not None and _normalise(name) == FOREIGN:
                found.append(req)
        found += [m.group() for m in _FOREIGN_TOKEN.finditer(line)]
    return list(dict.fromkeys(found))


def _doc_files() -> list[Path]:
    docs = sorted((ROOT / "docs").rglob("*.md"))
    return [ROOT / "README.md", *docs, ROOT / ".ci" / "run"]


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring nodes (developer text; a command's help is a help= string)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
        ):
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _string_text(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):  # an f-string: its fields as {...}
        return "".join(
            part.value if isinstance(part, ast.Constant) else "{...}" for part in node.values
        )
    return None


def code_strings(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of every string literal and f-string in a module but its docstrings."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    docstrings = _docstrings(tree)
    inside_fstring: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            inside_fstring.update(id(part) for part in node.values)
        text = _string_text(node)
        if text is not None and id(node) not in docstrings and id(node) not in inside_fstring:
            yield node.lineno, text


def _code_files() -> list[Path]:
    seen: dict[Path, Path] = {}
    for folder in CODE_DIRS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            real = path.resolve()
            if ROOT in real.parents and "bundled" not in real.parts:
                seen.setdefault(real, real)
    return sorted(seen)


# -- the parser, on the lines issue 37 found -------------------------------------------

OLD_LINES = [
    # README.md, docs/inspect.md, docs/scaling.md before the rename
    "writes one Inspect eval log per arm for `inspect view` (`pip install 'prereg[inspect]'`;",
    "Parquet with `prereg[parquet]`); see [docs/inspect.md](docs/inspect.md).",
    "`pip install 'prereg[postgres]'`. `python bench/analyse_scale.py --runs 27000` times",
    "    pip install 'prereg[inspect]'    # export --format inspect, import --from inspect",
    "    pip install 'prereg[parquet]'    # export --format parquet, import of .parquet",
    "Install the driver with `pip install 'prereg[postgres]'` (psycopg 3).",
    "      - run: pip install 'prereg[postgres]'",
    # runners/extras.py, runners/store/postgres.py (as the AST gives the f-string)
    "installed); install it with: pip install 'prereg[{...}]'",
    "a PostgreSQL run store needs psycopg: pip install 'prereg[postgres]'",
]

FOREIGN_LINES = [
    "pip install prereg",
    "pip install prereg[inspect]",
    'pip install "prereg[inspect,parquet]>=0.1"',
    "pip3 install -U prereg",
    "python -m pip install --quiet prereg==0.1.0",
    "uv pip install prereg",
    "uv add 'prereg[postgres]'",
    "uv tool install prereg",
    "uvx prereg demo",
    "pipx install prereg",
    "pipx run prereg demo",
    "uvx --with numpy prereg",
    "uvx --from 'prereg[inspect]' prereg demo",
    "poetry add prereg",
    "pip install -e . && pip install prereg",
    "pip install PREREG",
    "pip install 'prereg @ git+https://github.com/prereg/prereg.git'",
    "pip install numpy \\\n    prereg",
    'dependencies = ["prereg>=0.1"]',
    "prereg[inspect]",
]

ALLOWED_LINES = [
    "pip install 'prereg-agents[inspect]'",
    "pip install prereg-agents",
    "pip install prereg_agents==0.2",
    "pip install 'prereg-agents[postgres] @ git+https://github.com/prereg/prereg.git'",
    "uv add prereg-agents",
    "uvx --from prereg-agents prereg demo",
    "pipx install prereg-agents",
    "pip install -e '.[dev]' && prereg demo",
    "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[dev]'",
    "pip install -e .",
    "pip install '.[parquet]'",
    "pip install ./prereg",
    "pip install -e prereg",
    "pip install pre-commit",
    "python -m pip install --quiet 'mcp>=1.12,<1.13' 'pydantic>=2.11,<2.12'",
    "git clone https://github.com/prereg/prereg.git && cd prereg",
    "prereg -w ./ws run music-library-pilot  # pip install is not needed",
    "pip install prereg-agents && prereg demo",
    "`prereg export --format parquet` needs `prereg-agents[parquet]`",
    "prereg [OPTIONS] COMMAND",
]


@pytest.mark.parametrize("line", OLD_LINES + FOREIGN_LINES)
def test_parser_catches_a_requirement_for_the_other_project(line: str) -> None:
    assert foreign_requirements(line), line


@pytest.mark.parametrize("line", ALLOWED_LINES)
def test_parser_allows_prereg_agents_local_paths_and_other_packages(line: str) -> None:
    assert foreign_requirements(line) == [], line


def test_parser_finds_the_requirements_of_an_install_line() -> None:
    line = "pip install -q -r req.txt 'prereg-agents[inspect]' numpy -e . && prereg demo"
    assert list(install_requirements(line)) == ["prereg-agents[inspect]", "numpy"]


def test_code_strings_join_an_fstring_and_skip_docstrings(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        '"""Needs prereg[parquet]."""\n'
        "def f(extra: str) -> str:\n"
        '    """pip install prereg."""\n'
        "    return (\n"
        "        f\"install it with: pip install 'prereg[{extra}]'\"\n"
        "        \" (or -e '.[x]')\"\n"
        "    )\n"
    )
    texts = [text for _, text in code_strings(module)]
    assert texts == ["install it with: pip install 'prereg[{...}]' (or -e '.[x]')"]
    assert foreign_requirements(texts[0]) == ["prereg[{...}]"]


# -- the project ---------------------------------------------------------------------


def test_the_distribution_is_prereg_agents_and_the_command_prereg() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == DISTRIBUTION == "prereg-agents"
    assert project["scripts"] == {"prereg": "prereg.cli:run"}
    # the installed metadata is found under the new name (else: reinstall the venv with
    # `pip uninstall prereg && pip install -e '.[dev]'`)
    assert package_version() != "0+unknown"


@pytest.mark.parametrize("path", _doc_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_docs_install_prereg_agents_never_prereg(path: Path) -> None:
    bad = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if foreign_requirements(line)
    ]
    # a command continued over lines with a backslash, read as one
    if not bad and foreign_requirements(path.read_text(encoding="utf-8")):
        bad.append(f"{path.relative_to(ROOT)}: a continued install command")
    assert not bad, "installs the unrelated PyPI project `prereg`:\n" + "\n".join(bad)


def test_code_messages_install_prereg_agents_never_prereg() -> None:
    bad = [
        f"{path.relative_to(ROOT)}:{number}: {text!r}"
        for path in _code_files()
        for number, text in code_strings(path)
        if foreign_requirements(text)
    ]
    assert not bad, "tells users to install the unrelated PyPI project `prereg`:\n" + "\n".join(bad)
