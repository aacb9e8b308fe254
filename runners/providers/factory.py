"""Building a run's driver from its registration, with what ``create(model, params)`` lacks.

The generic factory (:func:`prereg.runners.drivers.base.create_driver`) passes a
driver its model and params. A provider driver also needs, from the
registration, ``host.tool_search`` (defer tools and record what the search
surfaced) and ``host.allow_sampling`` (checked again, defence in depth), and,
from the run store, the spend already recorded under the digest so that its
spend holds count against the registered ``budgets.spend_usd``. Every other
driver is built by the generic factory, unchanged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prereg.core.errors import BadInput
from prereg.registry.units import RunPlan
from prereg.runners.drivers.base import Driver, create_driver
from prereg.runners.providers.credentials import KEY_VARIABLES, MissingKey, api_key
from prereg.runners.providers.prices import PriceTable, load_prices
from prereg.runners.providers.settings import ProviderSettings
from prereg.runners.providers.spend import SpendMeter

PROVIDER_DRIVERS = ("anthropic", "openai")


def spent_so_far(runs: Path, digest: str) -> float:
    """Measured spend recorded under ``digest`` (0 when there is no store yet)."""
    from prereg.runners.store import RunStore

    store = RunStore(runs)
    try:
        return store.spent_usd(digest)
    finally:
        store.close()


def create_run_driver(
    plan: RunPlan,
    registration: Any,
    ws: Any,
    *,
    prices: Path | str | None = None,
    settings: dict[str, Any] | None = None,
    for_batch: bool = False,
) -> Driver:
    """The driver for ``plan``; provider drivers get tool search, sampling rule, spend.

    A registration with ``host.batch: true`` is refused on the synchronous path
    (``for_batch`` false): its records would say ``batch: true`` for requests that
    did not go through a batch.
    """
    if plan.driver not in PROVIDER_DRIVERS:
        return create_driver(plan.driver, plan.model, plan.params)
    if plan.batch and not for_batch:
        raise BadInput(
            "this registration runs through the provider's batch API (host.batch: "
            "true): run it with `prereg run --batch`",
            field="host.batch",
        )
    host = registration.host
    try:
        api_key(plan.driver)  # fail before anything is written, not once per unit
    except MissingKey as exc:
        raise BadInput(str(exc), field=KEY_VARIABLES[plan.driver]) from None
    chosen = ProviderSettings.from_env(plan.driver, settings or {})
    if prices is not None:
        chosen = chosen.with_overrides({"prices_path": str(prices)})
    table: PriceTable = load_prices(chosen.prices_path)
    if plan.budgets.spend_usd is not None and table.price(plan.driver, plan.model) is None:
        raise BadInput(
            f"budgets.spend_usd is set but the price table ({table.version}, "
            f"{table.origin}) has no price for {plan.driver} model '{plan.model}': "
            "the cap could not be enforced; add the model with --prices FILE or "
            "PREREG_PRICES",
            field="host.model",
        )
    spend = SpendMeter(plan.budgets.spend_usd, spent_so_far(ws.runs, plan.digest))
    if plan.driver == "anthropic":
        from prereg.runners.drivers import anthropic as module
    else:
        from prereg.runners.drivers import openai as module  # type: ignore[no-redef]
    driver: Driver = module.create(
        plan.model,
        dict(plan.params),
        tool_search=bool(getattr(host, "tool_search", False)),
        allow_sampling=bool(getattr(host, "allow_sampling", False)),
        settings=chosen,
        spend=spend,
        prices=table,
    )
    return driver
