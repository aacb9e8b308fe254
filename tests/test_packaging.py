"""Packaging: every package folder is installed as a ``prereg`` subpackage."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAPPED = {
    "prereg": "prereg",
    "registry": "prereg.registry",
    "experiments": "prereg.experiments",
    "runners": "prereg.runners",
    "stats": "prereg.stats",
    "reports": "prereg.reports",
}


def test_every_package_folder_is_listed_in_pyproject() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(config["tool"]["setuptools"]["packages"])
    found = set()
    for top, dotted in MAPPED.items():
        for init in (ROOT / top).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / top).parts
            if "bundled" in rel:
                continue
            found.add(".".join((dotted, *rel)))
    assert found <= listed, f"add to [tool.setuptools] packages: {sorted(found - listed)}"


def test_cli_entry_point_runs() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "prereg", "--version"], capture_output=True, text=True, check=True
    )
    assert out.stdout.startswith("prereg ")


def test_no_generic_top_level_names_installed() -> None:
    import importlib.util

    for generic in ("registry", "stats", "runners", "reports", "experiments"):
        spec = importlib.util.find_spec(generic)
        # running from the repo root puts the folder on sys.path; it must not be an install
        assert spec is None or Path(spec.origin or "").parent.parent == ROOT


def test_usage_errors_exit_2() -> None:
    for args in (["register"], ["no-such-command"], ["show"]):
        out = subprocess.run(
            [sys.executable, "-m", "prereg", *args], capture_output=True, text=True
        )
        assert out.returncode == 2, (args, out.stderr)
