"""Fixtures of the provider tests: the local fake of both wire formats."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.providers.fakes import FakeProviders, provider_env


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProviders]:
    """A running fake, with the providers' key and base-URL variables pointing at it."""
    with FakeProviders() as server:
        provider_env(monkeypatch, server)
        yield server
