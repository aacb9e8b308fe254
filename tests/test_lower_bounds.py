"""The lower-bounds constraints stay the lower bounds of pyproject.toml's ranges.

``.ci/run`` installs the project with ``lower-bounds.txt`` as constraints and runs the
provider, MCP and exchange tests on it (issue 37). That proves the lowest versions work
only while each pin there is its dependency's lowest allowed version: a range raised in
pyproject.toml without the file, or a new dependency left out of it, fails here.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]


def _pins() -> dict[str, Version]:
    pins: dict[str, Version] = {}
    for line in (ROOT / "lower-bounds.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, pinned = line.partition("==")
            pins[canonicalize_name(name)] = Version(pinned)
    return pins


def _lowest(requirement: Requirement) -> Version:
    floors = [Version(s.version) for s in requirement.specifier if s.operator in (">=", "==")]
    assert len(floors) == 1, f"{requirement} needs exactly one lower bound"
    return floors[0]


def _runtime() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    wanted = [
        *project["dependencies"],
        *(r for name in extras if name != "dev" for r in extras[name]),
    ]
    return [Requirement(text) for text in wanted]


def test_each_runtime_dependency_is_pinned_at_its_lower_bound() -> None:
    pins = _pins()
    for requirement in _runtime():
        name = canonicalize_name(requirement.name)
        assert name in pins, f"lower-bounds.txt has no pin for {requirement}"
        assert pins[name] == _lowest(requirement), (
            f"lower-bounds.txt pins {name}=={pins[name]}, but pyproject.toml allows {requirement}"
        )


def test_nothing_else_is_pinned() -> None:
    runtime = {canonicalize_name(r.name) for r in _runtime()}
    assert set(_pins()) <= runtime, set(_pins()) - runtime


def test_the_check_sees_a_bound_raised_without_the_file() -> None:
    # the comparison itself: a raised range no longer matches the old pin
    assert _lowest(Requirement("scipy>=1.12")) != _pins()["scipy"]
    assert _lowest(Requirement("anthropic[aiohttp]>=2.10,<3")) == Version("2.10")
