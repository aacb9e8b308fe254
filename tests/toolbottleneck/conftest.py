"""Fixtures shared by the ToolBottleneckBench tests, built once per test session (per
xdist worker): the bundled study's demo and the infrastructure-counting reports are each
read by several modules, and rebuilding them per module cost most of this folder's time."""

from __future__ import annotations

from typing import Any

import pytest

from tests.toolbottleneck.test_tb_infra_counting import run_infra_reports


@pytest.fixture(scope="session")
def demo(toolbottleneck_demo: dict[str, Any]) -> dict[str, Any]:
    """``prereg demo --study toolbottleneck`` and its exported records (read only; the
    session's ``toolbottleneck_demo``, tests/conftest.py)."""
    return toolbottleneck_demo


@pytest.fixture(scope="session")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """The ITT and retry registrations with injected infrastructure failures (read only)."""
    return run_infra_reports(tmp_path_factory.mktemp("infra") / "ws")
