"""The cost policy (issue 13, item 6): ``harness.cache_credit``; seed 001 prices at frozen
rates with no cache credit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from prereg.core.workspace import Workspace
from prereg.registry.schema import Registration
from prereg.registry.units import plan_from_registration
from prereg.runners.providers.driver import ModelDriver
from prereg.runners.providers.factory import create_run_drivers
from prereg.runners.providers.prices import ModelPrice, Priced, cost_usd
from tests.harness_rules.helpers import PILOT

PRICE = ModelPrice(input=5.0, output=25.0, cached_input=0.5, cache_write=6.25)
# 1M uncached, 2M cache reads, 0.4M cache writes, 0.1M output
TOKENS = Priced(
    uncached_input=1_000_000, cached_input=2_000_000, cache_write=400_000, output=100_000
)


def test_cache_credit_prices_each_kind_of_input_at_its_rate() -> None:
    assert cost_usd(PRICE, TOKENS) == pytest.approx(5.0 + 2 * 0.5 + 0.4 * 6.25 + 0.1 * 25)


def test_without_cache_credit_every_input_token_is_uncached() -> None:
    # 3.4M input tokens at 5.00, whatever the cache did; output unchanged
    assert cost_usd(PRICE, TOKENS, cache_credit=False) == pytest.approx(3.4 * 5.0 + 0.1 * 25)
    assert cost_usd(PRICE, TOKENS, cache_credit=False, discount=0.5) == pytest.approx(
        (3.4 * 5.0 + 0.1 * 25) * 0.5
    )


@pytest.mark.parametrize("credit", [True, False])
def test_the_run_drivers_price_as_registered(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, credit: bool
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-a-key")
    doc: dict[str, Any] = yaml.safe_load(PILOT.read_text())
    doc["host"] = {"driver": "anthropic", "model": "claude-opus-4-5"}
    doc["harness"] = {"cache_credit": credit}
    plan = plan_from_registration(Registration.model_validate(doc), "sha256:" + "0" * 64)
    assert plan.harness.cache_credit is credit
    drivers = create_run_drivers(plan, Workspace(tmp_path))
    driver = drivers["baseline"]
    assert isinstance(driver, ModelDriver)
    expected = cost_usd(PRICE, TOKENS, cache_credit=credit)
    assert driver.cost(TOKENS, "claude-opus-4-5", batch=False) == pytest.approx(expected)
