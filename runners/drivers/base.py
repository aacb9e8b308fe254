"""The driver protocol: how the harness talks to a host, one turn at a time.

A driver is turn-based: given the episode and the exchanges so far, it returns
the host's next turn, which is exactly one of

- :class:`ToolCall`: one tool call, with the tool name and the parsed arguments;
- :class:`Malformed`: raw text that was meant as a tool call but did not parse;
- :class:`FinalAnswer`: the host's answer, ending the episode;
- :class:`CutAtCap`: the response was cut at the completion cap (ends the episode).

One turn is one decision (no parallel tool calls), because no agent can name an
identifier that a lookup has not yet returned. The harness owns everything else:
executing calls, budgets, oracles, scoring. A driver never sees the service.

Measurements ride on the :class:`Turn`: usage, the model the provider returned,
latency, cost, and the tools a tool search surfaced. Anything the host does not
report is None, never an estimate (invariant 7).

Only a driver that declares ``sees_solution`` *and* evidence class ``replay``
receives the recorded solution path; a model-backed driver never does.

A failure of the infrastructure (network, rate limit after retries, a provider
error that is not the model's behaviour) is raised as :class:`InfraError`; the
harness records it as ``status: infra_error`` and the next run retries the unit.

Server text is a per-host capability, declared by ``server_text`` (read with
:func:`server_text`; ``"none"`` when a driver does not declare it). Every
:class:`OfferedTool` carries its integration's name and description; a driver
whose host path has a field for them (the OpenAI path: a namespace with the MCP
server's name and description) declares ``"name_and_description"`` and sends
them, one whose path has none (the Claude API path) declares ``"none"`` and
sends only tools. The harness records the capability on every run, so a report
can say what the host could have read.

Drivers live in ``prereg/runners/drivers/<name>.py`` and expose
``create(model: str | None, params: Mapping[str, Any]) -> Driver``, listed by name in
:data:`prereg.runners.drivers.table.FACTORIES`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, cast, runtime_checkable

from prereg.experiments.models import StepRef
from prereg.experiments.refs import lookup
from prereg.registry.hosts import EvidenceClass

#: What of an integration's server text a host path transmits (see the module docstring).
ServerText = Literal["none", "name", "name_and_description"]
SERVER_TEXT_VALUES: tuple[str, ...] = ("none", "name", "name_and_description")


class InfraError(Exception):
    """The host could not produce a turn for reasons outside the agent's behaviour."""


# ---- what the driver is given --------------------------------------------------------------


@dataclass(frozen=True)
class OfferedTool:
    """A tool as the host is shown it. All text here is untrusted data.

    ``integration`` and ``integration_description`` are the server's name and
    description; a driver transmits them only if its ``server_text`` says so.
    """

    name: str
    title: str
    description: str
    input_schema: Mapping[str, Any]
    integration: str
    integration_description: str = ""
    #: the digest of the MCP snapshot the tool's integration serves as offered (None: not
    #: a snapshot, or transformed by a control): what a connector host must be served
    snapshot_digest: str | None = None


@dataclass(frozen=True)
class RecordedCall:
    """One step of the recorded path as a call on this surface.

    Argument values are literals or :class:`StepRef` (the result of an earlier
    call of the path, looked up by the replay driver).
    """

    tool: str
    arguments: Mapping[str, Any]


@dataclass(frozen=True)
class RecordedPath:
    """The recorded solution path translated to the focal surface's tools.

    ``problem`` says why it could not be translated (the surface has no tool for
    an operation of the path).
    """

    calls: tuple[RecordedCall, ...]
    answer: str | None = None
    problem: str | None = None


@dataclass(frozen=True)
class Episode:
    """One run unit as the host sees it: the prompt and the offered tools, in order.

    ``seed`` is specific to the unit (arm, task, repeat); ``prompt_seed`` is shared
    by every unit of the same prompt (across arms and repeats), which is what
    lets a simulated host's repeats be correlated.
    """

    prompt: str
    tools: tuple[OfferedTool, ...]
    completion_cap: int | None
    model: str | None
    params: Mapping[str, Any]
    seed: int
    prompt_seed: int
    label: str = ""
    solution: RecordedPath | None = None
    #: the registered system prompt (sent as the provider's system field), or None
    system: str | None = None


# ---- what the driver returns ---------------------------------------------------------------


@dataclass(frozen=True)
class ToolCall:
    """One call. ``host_result`` is set when the host executed it itself (an MCP
    connector): the harness records that result and executes nothing."""

    name: str
    arguments: Any
    call_id: str | None = None
    host_result: ToolResult | None = None


@dataclass(frozen=True)
class Malformed:
    text: str


@dataclass(frozen=True)
class FinalAnswer:
    text: str


@dataclass(frozen=True)
class CutAtCap:
    text: str = ""


Action = ToolCall | Malformed | FinalAnswer | CutAtCap


@dataclass(frozen=True)
class Usage:
    """Tokens of one request as reported; None where the host does not report it."""

    input: int | None = None
    output: int | None = None
    reasoning: int | None = None
    cached: int | None = None


@dataclass(frozen=True)
class Turn:
    """The host's next turn and what was measured about it.

    ``surfaced``: tool names a tool search put in the host's candidate set during
    this turn (None when not measured). ``searched``: whether the host searched
    for tools this turn (None when not measured). ``retries``: requests retried
    behind this turn (rate limits, 5xx, timeouts); None for hosts that make no
    requests, so a retried turn is visible on the record, never silent.
    """

    action: Action
    usage: Usage | None = None
    model_returned: str | None = None
    latency_ms: float | None = None
    cost_usd: float | None = None
    surfaced: tuple[str, ...] | None = None
    searched: bool | None = None
    retries: int | None = None


@dataclass(frozen=True)
class ToolResult:
    """What the harness returns for a call: the JSON content, or an error message."""

    content: Any
    is_error: bool
    text: str


@dataclass(frozen=True)
class Exchange:
    """One past turn and, for a tool call or malformed call, the harness's result."""

    turn: Turn
    result: ToolResult | None = None


@runtime_checkable
class Driver(Protocol):
    """A host. ``loads_all_tools``: every offered tool is in context (no search)."""

    name: str
    evidence_class: EvidenceClass
    sees_solution: bool
    loads_all_tools: bool

    async def next_turn(self, episode: Episode, history: Sequence[Exchange]) -> Turn:
        """The host's next turn given the exchanges so far."""
        ...

    async def aclose(self) -> None:
        """Release connections (called once after the run)."""
        ...


# ---- helpers --------------------------------------------------------------------------------


def server_text(driver: object) -> ServerText:
    """The driver's declared server-text capability; ``"none"`` when undeclared."""
    value = getattr(driver, "server_text", "none")
    if value not in SERVER_TEXT_VALUES:
        raise ValueError(
            f"driver {getattr(driver, 'name', driver)!r} declares an unknown "
            f"server_text {value!r} (expected one of {SERVER_TEXT_VALUES})"
        )
    return cast(ServerText, value)


def render(content: Any) -> str:
    """The text a host is shown for a tool result (JSON, data only)."""
    return json.dumps(content, ensure_ascii=False, sort_keys=False, default=str)


def resolve_recorded(arguments: Mapping[str, Any], results: Sequence[Any]) -> dict[str, Any]:
    """Fill a recorded call's StepRef arguments from the results of earlier calls."""
    out: dict[str, Any] = {}
    for key, value in arguments.items():
        out[key] = lookup(results[value.step], value.path) if isinstance(value, StepRef) else value
    return out
