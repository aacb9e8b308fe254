"""Shared fixtures: run the CLI in-process and snapshot folders byte for byte."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from prereg.cli import main

# No test depends on the machine's speed (issue 37): hypothesis neither times examples
# (no deadline) nor gives up on slow data generation (the too_slow health check), which
# a loaded 2-core machine trips. A test's own @settings keep these unless they set them.
settings.register_profile("prereg", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("prereg")


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str

    def json(self) -> object:
        return json.loads(self.stdout)


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    """Run ``prereg ARGS`` in-process; returns exit code and captured output."""

    def run(*args: str | Path) -> CliResult:
        capsys.readouterr()
        try:
            main([str(a) for a in args])
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        out, err = capsys.readouterr()
        return CliResult(code, out, err)

    return run


def tree_digest(root: Path) -> dict[str, str]:
    """Path -> sha256 of every file under ``root`` (byte-identity checks)."""
    if not root.exists():
        return {}
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def ws(tmp_path: Path, cli: Callable[..., CliResult]) -> Path:
    """A fresh workspace made by ``prereg init``."""
    root = tmp_path / "ws"
    result = cli("init", root)
    assert result.code == 0, result.stderr
    return root


def skip_unless_ci(reason: str) -> None:
    """Skip on a machine that lacks what the test needs; in CI (``CI`` set, as .ci/run is
    run) fail instead: CI installs everything, so a missing piece there is a defect."""
    if os.environ.get("CI"):
        pytest.fail(f"required in CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def toolbottleneck_demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """``prereg demo --study toolbottleneck --json`` (the capacity study and its
    companions) with the capacity registration's exported records, built once per session
    (per xdist worker) for every module that reads it (read only)."""
    from tests.toolbottleneck.test_tb_registered_demo import run_demo

    return run_demo(tmp_path_factory.mktemp("tb-demo") / "ws")
