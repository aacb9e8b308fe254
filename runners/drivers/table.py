"""The driver table: from a driver's name to the function that builds it.

:data:`FACTORIES` maps each name the registry accepts (:data:`prereg.registry.hosts.DRIVERS`,
which also says what each driver needs and which evidence class its runs carry) to its
factory. The provider drivers import their SDKs only when they first make a request, so
importing this table costs no SDK import. It is a module of its own, not the package's
``__init__``, so that importing the driver protocol (``base``) never imports the concrete
drivers, which themselves build on the provider plumbing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from prereg.registry.hosts import DRIVERS, DriverName
from prereg.runners.drivers import anthropic, inspect_host, local, openai, openai_chat, replay
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
    "openai-chat": openai_chat.create,
    "inspect": inspect_host.create,
}

assert set(FACTORIES) == set(DRIVERS), "FACTORIES and registry.hosts.DRIVERS must agree"


def create_driver(name: str, model: str | None, params: Mapping[str, Any]) -> Driver:
    """Build driver ``name`` from its model and params (no provider options)."""
    if not name.replace("-", "_").isidentifier():
        raise ValueError(f"invalid driver name '{name}'")
    for known, factory in FACTORIES.items():
        if known == name:
            return factory(model=model, params=dict(params))
    raise InfraError(f"driver '{name}' is not available in this installation")
