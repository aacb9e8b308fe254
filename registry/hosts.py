"""The hosts a registration may name: one table of drivers, read by the schema and the runners.

The schema (this package) must validate ``host.driver`` and decide, at register time,
what a driver needs (a model) and which evidence class its runs carry; the runners, one
layer up, build the driver. So the table of what may be named lives here, and
:data:`prereg.runners.drivers.table.FACTORIES` maps each name to its implementation; a test
(tests/test_architecture.py) checks that the two agree and that every driver built
reports the evidence class declared here. Adding a driver: docs/extending.md.

The table also says which ``host.params`` each driver accepts (:func:`params_problem`),
so a registration whose params the driver would refuse at run is refused at register
(:func:`prereg.registry.resolve.check_host_params`); the test
tests/registry/test_registry_hostile_input_params.py checks that the drivers agree.
Likewise which ``host.model`` names a driver knows, when it has a closed set (the local
host's named profiles, :data:`LOCAL_PROFILES`; :func:`model_problem`, checked at register
by :func:`prereg.registry.resolve.check_host_model`); tests/test_extension_tables.py
checks that they are the driver's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal, get_args
from urllib.parse import urlsplit

#: Runs of different evidence classes are never pooled (DESIGN.md, invariant 8).
#: ``inspect``: runs imported from Inspect AI logs (``prereg import --from inspect``).
#: ``cached``: provider runs of an exploratory pilot made with ``prereg run --cache``
#: (responses may come from the response cache; never a driver's registered class).
#: ``telemetry``: an integration's observed calls (InvokeRank's class T, ``prereg telemetry
#: import``); never a driver's class and never a run record, only compared (S vs T).
EvidenceClass = Literal["replay", "local", "api", "inspect", "cached", "telemetry"]
DriverName = Literal["replay", "local", "anthropic", "openai", "openai-chat", "inspect"]
#: How a host reaches the offered tools: ``client`` (the harness sends them as client-side
#: tools and executes the calls) or ``connector`` (the provider connects to the replay
#: server's URL itself: the Anthropic MCP connector, the OpenAI remote MCP tool).
ToolAccess = Literal["client", "connector"]


@dataclass(frozen=True)
class ParamRule:
    """One ``host.params`` key a driver with a closed set of params accepts.

    ``kind``: ``integer`` (an int, not a bool), ``number`` (an int or a float, not a
    bool) or ``boolean``. ``minimum`` bounds a number from below, inclusively unless
    ``exclusive``; ``maximum`` bounds it from above, inclusively.
    """

    kind: Literal["integer", "number", "boolean"]
    minimum: float | None = None
    exclusive: bool = False
    maximum: float | None = None

    def problem(self, value: object) -> str | None:
        """Why ``value`` is refused, or None."""
        if self.kind == "boolean":
            return None if isinstance(value, bool) else "expected true or false"
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"expected {'an integer' if self.kind == 'integer' else 'a number'}"
        if self.kind == "integer" and not isinstance(value, int):
            return "expected an integer"
        if self.minimum is not None:
            if self.exclusive and not value > self.minimum:
                return f"must be > {self.minimum:g}"
            if not self.exclusive and not value >= self.minimum:
                return f"must be >= {self.minimum:g}"
        if self.maximum is not None and not value <= self.maximum:
            return f"must be <= {self.maximum:g}"
        return None


@dataclass(frozen=True)
class DriverSpec:
    """What the registry knows about a driver without building it."""

    evidence_class: EvidenceClass
    #: ``host.model`` is required (a provider needs to be told which model)
    needs_model: bool
    #: speaks to a provider API: keys, price table, spend cap, batches
    provider: bool
    summary: str
    #: the ``host.params`` the driver accepts: exactly these keys (``{}``: none at all),
    #: or None for a provider driver, which sends any other key to the provider verbatim
    params: Mapping[str, ParamRule] | None = None
    #: keys a provider driver sets itself from the registration, so ``host.params`` may
    #: not (the driver refuses them at run; the schema refuses them at register)
    reserved_params: frozenset[str] = field(default_factory=frozenset)
    #: the ``host.model`` names the driver knows, or None: any name (a provider's model,
    #: or a driver that ignores it)
    models: tuple[str, ...] | None = None
    #: a provider driver's own check of the params it reads itself (key, why), or None
    params_check: Callable[[Mapping[str, object]], tuple[str, str] | None] | None = None
    #: the provider has a batch API (``run --batch``)
    batch_api: bool = False
    #: runs come only from ``prereg import`` (another harness ran them): ``prereg run``
    #: refuses the registration (exit 4)
    imported: bool = False
    #: the provider can connect to a remote MCP server itself (``host.tool_access:
    #: connector``)
    connector: bool = False


#: The local host's settings (``prereg.runners.drivers.local.LocalParams``), with the
#: bounds ``LocalParams.from_params`` enforces at run.
LOCAL_PARAMS: Mapping[str, ParamRule] = {
    "search_k": ParamRule("integer", minimum=1),
    "threshold": ParamRule("number"),
    "sharpness": ParamRule("number"),
    "prompt_sd": ParamRule("number", minimum=0),
    "temperature": ParamRule("number", minimum=0, exclusive=True),
    "second_goal_ratio": ParamRule("number"),
    "server_text": ParamRule("boolean"),
    "bm25_k1": ParamRule("number", minimum=0),
    "bm25_b": ParamRule("number", minimum=0, maximum=1),
}


def base_url_problem(value: object) -> str | None:
    """Why a Chat Completions server's base URL is refused, or None.

    An http(s) URL with a host; no credentials, query or fragment (a URL is recorded and
    shown, so it may not carry a secret: the key comes from ``OPENAI_API_KEY``).
    """
    if not isinstance(value, str) or not value.strip():
        return f"a base URL is an http(s) URL such as http://localhost:8000/v1 (got {value!r})"
    try:
        parts = urlsplit(value.strip())
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        return f"the base URL is not a valid URL (got {value!r})"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return (
            "a base URL is an http(s) URL with a host, such as http://localhost:8000/v1 "
            f"(got {value!r})"
        )
    if parts.username is not None or parts.password is not None:
        return (
            "the base URL may not carry credentials (user:password@): it is recorded and "
            "shown; put the key in OPENAI_API_KEY"
        )
    if parts.query or parts.fragment:
        return "the base URL may not carry a query or a fragment (it is recorded and shown)"
    return None


def _chat_params(params: Mapping[str, object]) -> tuple[str, str] | None:
    """The openai-chat driver reads ``base_url`` itself (never sent to the server)."""
    if "base_url" not in params:
        return None
    problem = base_url_problem(params["base_url"])
    return None if problem is None else ("base_url", f"host.params.base_url: {problem}")


#: The local host's named profiles (``prereg.runners.drivers.local.PROFILES``, where their
#: values live): simulated hosts, not models. ``host.model`` may name one, or be absent.
LOCAL_PROFILES: tuple[str, ...] = ("local-default", "local-careful", "local-hasty")


DRIVERS: Mapping[DriverName, DriverSpec] = {
    "replay": DriverSpec(
        "replay",
        needs_model=False,
        provider=False,
        summary="follows each task's recorded solution path (no model)",
        params={},
    ),
    "local": DriverSpec(
        "local",
        needs_model=False,
        provider=False,
        summary="offline BM25 tool-search host (a simulated host, no model; "
        "host.model may name a profile)",
        params=LOCAL_PARAMS,
        models=LOCAL_PROFILES,
    ),
    "anthropic": DriverSpec(
        "api",
        needs_model=True,
        provider=True,
        summary="the Anthropic Messages API",
        batch_api=True,
        connector=True,
        reserved_params=frozenset(
            {"model", "max_tokens", "messages", "system", "tools", "tool_choice", "stream"}
        ),
    ),
    "openai": DriverSpec(
        "api",
        needs_model=True,
        provider=True,
        summary="the OpenAI Responses API",
        batch_api=True,
        connector=True,
        reserved_params=frozenset(
            {
                "model",
                "input",
                "instructions",
                "tools",
                "tool_choice",
                "parallel_tool_calls",
                "max_output_tokens",
                "stream",
                "background",
                "previous_response_id",
                "conversation",
            }
        ),
    ),
    "openai-chat": DriverSpec(
        "api",
        needs_model=True,
        provider=True,
        summary="an OpenAI-compatible Chat Completions server (vLLM, SGLang, llama.cpp, "
        "Ollama, gateways); host.params.base_url or OPENAI_BASE_URL names it",
        reserved_params=frozenset(
            {
                "model",
                "messages",
                "tools",
                "tool_choice",
                "parallel_tool_calls",
                "max_tokens",
                "max_completion_tokens",
                "functions",
                "function_call",
                "n",
                "stream",
                "stream_options",
            }
        ),
        params_check=_chat_params,
    ),
    "inspect": DriverSpec(
        "inspect",
        needs_model=True,
        provider=False,
        summary="runs imported from Inspect AI eval logs (prereg import --from inspect); "
        "host.model is the model as Inspect names it (provider/model); not run by prereg",
        params={},
        imported=True,
    ),
}


def params_problem(driver: DriverName, params: Mapping[str, object]) -> tuple[str, str] | None:
    """(key, why) for the first ``host.params`` entry the driver would refuse at run, or None.

    A closed driver (replay, local) accepts exactly its table's keys, each of its type and
    range; a provider driver accepts any key but the ones it sets itself.
    """
    spec = DRIVERS[driver]
    if spec.params is None:
        for key in sorted(spec.reserved_params & set(params)):
            return key, (
                f"host.params may not set '{key}': the {driver} driver sets it from the "
                "registration (model, budgets, tools)"
            )
        return None if spec.params_check is None else spec.params_check(params)
    for key, value in params.items():
        rule = spec.params.get(key)
        if rule is None:
            known = ", ".join(spec.params) or "none"
            return key, f"the {driver} driver takes no param '{key}' (it takes: {known})"
        problem = rule.problem(value)
        if problem is not None:
            return key, f"{driver} host param '{key}': {problem} (got {value!r})"
    return None


def model_problem(driver: DriverName, model: str | None) -> str | None:
    """Why the driver would refuse ``host.model`` at run, or None.

    Only a driver with a closed set of names (:attr:`DriverSpec.models`) refuses one; an
    absent model is the driver's own concern (the schema requires one where needed).
    """
    known = DRIVERS[driver].models
    if model is None or known is None or model in known:
        return None
    return (
        f"the {driver} driver has no model '{model}' (it takes: {', '.join(known)}; "
        "or leave host.model out)"
    )


def tool_access_problem(
    driver: DriverName, tool_access: ToolAccess, *, tool_search: bool, batch: bool, live: bool
) -> str | None:
    """Why ``host.tool_access`` is refused for this host, or None.

    ``connector`` needs a driver whose provider connects to MCP servers itself, and
    excludes what only the client path implements: the harness's tool search (the
    provider lists the server's tools), batches (one synchronous request per episode)
    and a live integration (the provider, not the harness, would have to call it).
    """
    if tool_access == "client":
        return None
    if not DRIVERS[driver].connector:
        having = ", ".join(n for n, s in DRIVERS.items() if s.connector)
        return f"the {driver} driver has no MCP connector (tool_access: connector is for: {having})"
    if tool_search:
        return "tool_access: connector cannot be combined with tool_search"
    if batch:
        return "tool_access: connector cannot run through a batch API (host.batch)"
    if live:
        return "tool_access: connector cannot be combined with a live integration (host.live)"
    return None


#: Names of the drivers that call a provider API, in table order.
PROVIDER_DRIVERS: tuple[DriverName, ...] = tuple(n for n, s in DRIVERS.items() if s.provider)

assert tuple(DRIVERS) == get_args(DriverName), "DRIVERS and DriverName must list the same names"
