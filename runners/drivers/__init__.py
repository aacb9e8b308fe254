"""Drivers: the hosts a run talks to, one turn at a time (protocol in ``base``).

``replay`` follows the recorded solution path (evidence class ``replay``);
``local`` is the offline BM25 tool-search host (evidence class ``local``);
provider drivers (``anthropic``, ``openai``) carry evidence class ``api``.

:data:`FACTORIES` is the one table from a driver's name (the names the registry
accepts, :data:`prereg.registry.hosts.DRIVERS`, which also says what each needs and
which evidence class its runs carry) to the function that builds it. The provider
drivers import their SDKs only when they first make a request, so importing this
table costs no SDK import.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from prereg.registry.hosts import DRIVERS, DriverName
from prereg.runners.drivers import anthropic, local, openai, replay
from prereg.runners.drivers.base import Driver, InfraError


class DriverFactory(Protocol):
    """``create(model, params, **options)`` of a driver module.

    Every driver takes the registered model (None when it needs none) and
    ``host.params``; a provider driver also takes the keyword options of
    :class:`prereg.runners.providers.driver.ModelDriver` (tool_search, allow_sampling,
    settings, spend, prices, http_client_factory), the others take none.
    """

    def __call__(
        self, model: str | None = None, params: Mapping[str, Any] | None = None, **options: Any
    ) -> Driver: ...


FACTORIES: Mapping[DriverName, DriverFactory] = {
    "replay": replay.create,
    "local": local.create,
    "anthropic": anthropic.create,
    "openai": openai.create,
}

assert set(FACTORIES) == set(DRIVERS), "FACTORIES and registry.hosts.DRIVERS must agree"


def create_driver(name: str, model: str | None, params: Mapping[str, Any]) -> Driver:
    """Build driver ``name`` from its model and params (no provider options)."""
    if not name.isidentifier():
        raise ValueError(f"invalid driver name '{name}'")
    for known, factory in FACTORIES.items():
        if known == name:
            return factory(model=model, params=dict(params))
    raise InfraError(f"driver '{name}' is not available in this installation")
