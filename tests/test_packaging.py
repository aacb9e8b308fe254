"""Packaging: the root folders install as ``prereg`` subpackages, through symlinks."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from setuptools import find_packages

ROOT = Path(__file__).resolve().parents[1]
ROOT_PACKAGES = ("registry", "experiments", "runners", "stats", "reports")


def test_each_root_package_is_linked_into_prereg() -> None:
    for name in ROOT_PACKAGES:
        link = ROOT / "prereg" / name
        assert link.is_symlink(), f"prereg/{name} must be a symlink to ../{name}"
        assert os.readlink(link) == f"../{name}"
        assert link.resolve() == (ROOT / name).resolve()


def test_every_package_folder_is_found_for_installation() -> None:
    found = set(
        find_packages(where=str(ROOT), include=["prereg*"], exclude=["prereg.experiments.bundled*"])
    )
    expected = {"prereg", "prereg.core", "prereg.commands"}
    for name in ROOT_PACKAGES:
        for init in (ROOT / name).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / name).parts
            if "bundled" not in rel:
                expected.add(".".join(("prereg", name, *rel)))
    assert expected <= found, sorted(expected - found)


def test_cli_entry_point_runs() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "prereg", "--version"], capture_output=True, text=True, check=True
    )
    assert out.stdout.startswith("prereg ")
    assert "(src " in out.stdout  # the source digest names the code that runs


def test_no_generic_top_level_names_installed() -> None:
    for generic in ROOT_PACKAGES:
        spec = importlib.util.find_spec(generic)
        # running from the repo root puts the folder on sys.path; it must not be an install
        assert spec is None or Path(spec.origin or "").parent.parent == ROOT


def test_usage_errors_exit_2() -> None:
    for args in (["register"], ["no-such-command"], ["show"]):
        out = subprocess.run(
            [sys.executable, "-m", "prereg", *args], capture_output=True, text=True
        )
        assert out.returncode == 2, (args, out.stderr)


@pytest.mark.slow
def test_wheel_holds_real_files_for_every_subpackage(tmp_path: Path) -> None:
    """A built wheel follows the symlinks: real modules, package data and ``py.typed``."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    # the distribution is prereg-agents (issue 37: `prereg` on PyPI is another project)
    (wheel,) = tmp_path.glob("prereg_agents-*.whl")
    archive = zipfile.ZipFile(wheel)
    names = set(archive.namelist())
    (metadata,) = (n for n in names if n.endswith(".dist-info/METADATA"))
    assert "\nName: prereg-agents\n" in archive.read(metadata).decode()
    (entry_points,) = (n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "prereg = prereg.cli:run" in archive.read(entry_points).decode()
    for required in (
        "prereg/py.typed",
        "prereg/core/errors.py",
        "prereg/stats/__init__.py",
        "prereg/registry/drafts/music-library-pilot.yaml",
        "prereg/runners/providers/prices.yaml",
        "prereg/experiments/bundled/music-library/experiment.yaml",
    ):
        assert required in names, required
    assert not any(n.split("/")[0] in ROOT_PACKAGES for n in names)
