"""Building a run's driver from its registration, with what ``create(model, params)`` lacks.

The generic factory (:func:`prereg.runners.drivers.table.create_driver`, from the table
:data:`prereg.runners.drivers.table.FACTORIES`) passes a driver its model and params. A
provider driver also needs, from the registration, ``host.tool_search`` (defer tools
and record what the search surfaced) and ``host.allow_sampling`` (checked again,
defence in depth), and, from the run store, the spend already recorded under the
digest so that its spend holds count against the registered ``budgets.spend_usd``.
Every other driver is built by the generic factory, unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from prereg.core.errors import BadInput
from prereg.core.workspace import Workspace
from prereg.registry.hosts import DRIVERS, PROVIDER_DRIVERS
from prereg.registry.units import ArmConfig, RunPlan
from prereg.runners.drivers import openai_chat
from prereg.runners.drivers.base import Driver, InfraError
from prereg.runners.drivers.connector import connector_url
from prereg.runners.drivers.table import FACTORIES, create_driver
from prereg.runners.providers.credentials import KEY_VARIABLES, MissingKey, api_key, is_provider
from prereg.runners.providers.driver import ModelDriver
from prereg.runners.providers.prices import PriceTable, load_prices
from prereg.runners.providers.response_cache import ResponseCache
from prereg.runners.providers.settings import ProviderSettings
from prereg.runners.providers.spend import SpendMeter
from prereg.runners.share import WorkerShare
from prereg.runners.store.choose import StoreLocation, open_store


def spent_so_far(runs: StoreLocation, digest: str) -> float:
    """Measured spend recorded under ``digest`` in the run store at ``runs`` (SQLite or
    PostgreSQL; 0 when there is no store yet)."""
    store = open_store(runs)
    try:
        return store.spent_usd(digest)
    finally:
        store.close()


def _meter(
    plan: RunPlan, ws: Workspace, runs: StoreLocation | None, share: WorkerShare | None
) -> SpendMeter:
    """The spend meter every provider driver of the run shares."""
    if share is not None:
        return SpendMeter(share.cap(plan.budgets.spend_usd), share.spent_before)
    spent = spent_so_far(ws.runs if runs is None else runs, plan.digest)
    return SpendMeter(plan.budgets.spend_usd, spent)


def create_run_drivers(
    plan: RunPlan,
    ws: Workspace,
    *,
    prices: Path | str | None = None,
    settings: dict[str, Any] | None = None,
    for_batch: bool = False,
    runs: StoreLocation | None = None,
    share: WorkerShare | None = None,
) -> dict[str, Driver]:
    """Each arm's driver; arms with the same host (driver, model, params, tool search,
    sampling rule) share one. Provider drivers share one spend meter: the registered
    ``budgets.spend_usd`` caps the spend of every arm together, counting what the run
    store (``store``: ``--store``, else ``PREREG_STORE``, else the workspace's runs/)
    already holds under the digest.

    A registration with ``host.batch: true`` is refused on the synchronous path
    (``for_batch`` false): its records would say ``batch: true`` for requests that
    did not go through a batch.

    ``share``: the drivers of one worker of ``prereg run --workers N`` on a store without
    shared claims, whose meter caps its own part of the spend (:mod:`prereg.runners.share`).
    """
    configs = plan.arm_configs()
    if plan.batch and not for_batch and any(c.driver in PROVIDER_DRIVERS for c in configs.values()):
        raise BadInput(
            "this registration runs through the provider's batch API (host.batch: "
            "true): run it with `prereg run --batch`",
            field="host.batch",
        )
    built: dict[tuple[object, ...], Driver] = {}
    spend: SpendMeter | None = None
    out: dict[str, Driver] = {}
    for arm, config in configs.items():
        if config.host_key not in built:
            if config.driver in PROVIDER_DRIVERS and spend is None:
                spend = _meter(plan, ws, runs, share)
            built[config.host_key] = _build(config, plan, spend, prices, settings, for_batch)
        out[arm] = built[config.host_key]
    if plan.pilot is not None and plan.pilot.cache:  # run --cache (exploratory pilots)
        cache = ResponseCache(ws.root / ".cache" / "responses")
        for driver in built.values():
            if isinstance(driver, ModelDriver):
                driver.use_cache(cache)
    return out


def _build(
    config: ArmConfig,
    plan: RunPlan,
    spend: SpendMeter | None,
    prices: Path | str | None,
    settings: dict[str, Any] | None,
    for_batch: bool = False,
) -> Driver:
    provider = config.driver
    if provider not in PROVIDER_DRIVERS:
        return create_driver(provider, config.model, config.params)
    if for_batch and not DRIVERS[provider].batch_api:
        raise BadInput(
            f"the {provider} driver has no batch API: run without --batch "
            "(and register host.batch: false)",
            field="host.batch",
        )
    _check_credentials(provider, config.params)  # before anything is written
    chosen = ProviderSettings.from_env(provider.replace("-", "_"), settings or {})
    if prices is not None:
        chosen = chosen.with_overrides({"prices_path": str(prices)})
    table: PriceTable = load_prices(chosen.prices_path)
    if plan.budgets.spend_usd is not None and table.price(provider, config.model) is None:
        raise BadInput(
            f"budgets.spend_usd is set but the price table ({table.version}, "
            f"{table.origin}) has no price for {provider} model '{config.model}': "
            "the cap could not be enforced; add the model with --prices FILE or "
            "PREREG_PRICES",
            field="host.model",
        )
    assert spend is not None
    # host.tool_access: connector (docs/providers.md): the replay's public URL, from the
    # environment at run time (not digested: the replay is checked to serve the
    # registered snapshots), refused before anything is written when missing
    connector = {"connector_url": connector_url()} if config.tool_access == "connector" else {}
    return FACTORIES[provider](
        config.model,
        dict(config.params),
        **connector,
        tool_search=config.tool_search,
        allow_sampling=config.allow_sampling,
        settings=chosen,
        spend=spend,
        prices=table,
        cache_credit=plan.harness.cache_credit,
    )


def _check_credentials(provider: str, params: Mapping[str, Any]) -> None:
    """What the driver needs to send a request, checked once (BadInput naming the field).

    The Chat Completions driver needs a server (``host.params.base_url`` or
    ``OPENAI_BASE_URL``) and no key (a local server takes any); the others need their key.
    """
    if provider == openai_chat.NAME:
        openai_chat.resolve_base_url(params)
        return
    if not is_provider(provider):  # credentials.Provider lists every keyed provider driver
        raise InfraError(f"driver '{provider}' has no provider credentials in this installation")
    try:
        api_key(provider)
    except MissingKey as exc:
        raise BadInput(str(exc), field=KEY_VARIABLES[provider]) from None
