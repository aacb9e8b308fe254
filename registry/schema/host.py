"""Where the arms run: the host (driver, model, params), its live calls, an arm's override.

Apart from the harness budgets (:mod:`.harness`) because a host is checked against the
driver table (:mod:`prereg.registry.hosts`), and budgets are not.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from prereg.core.yamlio import FieldRuleError
from prereg.registry.hosts import DRIVERS, DriverName, ToolAccess, tool_access_problem
from prereg.registry.schema.base import Strict

#: Host parameters that change sampling; refused unless the registration allows them.
SAMPLING_PARAMS = frozenset(
    {
        "temperature",
        "top_p",
        "top_k",
        "seed",
        "frequency_penalty",
        "presence_penalty",
        "min_p",
        "typical_p",
        "repetition_penalty",
    }
)


class Live(Strict):
    """One integration whose calls execute on its live MCP server (an execution run).

    ``surface`` names a snapshot surface of the experiment: hosts are offered the
    frozen snapshot's tools as always, and only the calls go live (InvokeRank, 5.5).
    Before the first unit, the live server is snapshotted again and must serve
    exactly the registered snapshot (same digest), or the run is refused. Every
    other integration replays; competitors are only ever replayed. Give ``command``
    (a local stdio server, started by ``prereg run``) or ``url`` (streamable HTTP).
    """

    surface: str = Field(min_length=1)
    command: list[str] | None = Field(None, min_length=1)
    url: str | None = Field(None, pattern=r"^https?://")
    timeout_s: float = Field(30.0, gt=0, le=600)

    @model_validator(mode="after")
    def _one_target(self) -> Live:
        if (self.command is None) == (self.url is None):
            raise FieldRuleError(
                "command",
                "give exactly one of 'command' (a stdio server) or 'url' (streamable HTTP)",
            )
        return self


class Host(Strict):
    """Where the arms run. Sampling parameters need ``allow_sampling: true``.

    ``params`` are also checked against the driver's table at register
    (:func:`prereg.registry.resolve.check_host_params`): what the driver would refuse at
    run is refused then. Not here: a frozen copy registered before a driver's table
    changed must still load.
    """

    driver: DriverName
    model: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    allow_sampling: bool = False
    tool_search: bool = False
    batch: bool = False
    live: Live | None = None
    #: ``connector``: the provider reaches the tools through the replay server's URL
    #: (docs/providers.md); absent or ``client``: left out of the digested document
    tool_access: ToolAccess = "client"

    @model_serializer(mode="wrap")
    def _omit_client_access(self, handler: SerializerFunctionWrapHandler) -> Any:
        """The default ``tool_access: client`` is left out of the document, so a host that
        does not set it digests exactly as before the field existed."""
        data = handler(self)
        if isinstance(data, dict) and data.get("tool_access") == "client":
            data.pop("tool_access")
        return data

    @model_validator(mode="after")
    def _tool_access(self) -> Host:
        problem = tool_access_problem(
            self.driver,
            self.tool_access,
            tool_search=self.tool_search,
            batch=self.batch,
            live=self.live is not None,
        )
        if problem is not None:
            raise FieldRuleError("tool_access", problem)
        return self

    @model_validator(mode="after")
    def _sampling(self) -> Host:
        sampling = sorted(SAMPLING_PARAMS & set(self.params))
        if sampling and not self.allow_sampling:
            raise FieldRuleError(
                "params",
                f"sampling parameter(s) {', '.join(sampling)} in host.params are "
                "refused unless host.allow_sampling is true (the registration must say so "
                "explicitly)",
            )
        if DRIVERS[self.driver].needs_model and not self.model:
            raise FieldRuleError("model", f"host.model is required for driver '{self.driver}'")
        return self


class HostOverride(Strict):
    """An arm's host, over the registration's ``host``.

    Fields given replace the registration's. An arm that names another ``driver`` than
    the registration's gets a fresh host: nothing else is inherited (another provider's
    model or params would be meaningless), so it gives its own ``model`` and ``params``.
    ``params`` given replace the inherited params whole (no key-by-key merge: what an arm
    sends is what its ``params`` say). ``batch`` and ``live`` stay registration-wide.
    """

    driver: DriverName | None = None
    model: str | None = Field(None, min_length=1)
    params: dict[str, Any] | None = None
    allow_sampling: bool | None = None
    tool_search: bool | None = None
    tool_access: ToolAccess | None = None

    @model_serializer(mode="wrap")
    def _omit_absent_access(self, handler: SerializerFunctionWrapHandler) -> Any:
        """An absent ``tool_access`` is left out of the document (digests unchanged)."""
        data = handler(self)
        if isinstance(data, dict) and data.get("tool_access") is None:
            data.pop("tool_access", None)
        return data

    def apply(self, base: Host) -> Host:
        """The arm's host: ``base`` with this override's fields (see the class docstring)."""
        given = self.model_dump(exclude_none=True)
        if self.driver is not None and self.driver != base.driver:
            fresh = {"driver": self.driver, "batch": base.batch, "live": base.live}
            return Host.model_validate({**fresh, **given})
        return Host.model_validate({**base.model_dump(), **given})
