"""Fixtures for the runner tests (helpers live in ``run_helpers``)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from run_helpers import record

from prereg.runners.record import RunRecord


@pytest.fixture
def make_record() -> Callable[..., RunRecord]:
    return record
