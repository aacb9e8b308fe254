"""A run record's episode as an Inspect AI transcript: messages and events (optional extra).

``prereg export --format inspect`` writes each sample's whole episode, rebuilt from the
record's trace (:class:`prereg.runners.record.TraceEvent`) and nothing else, so the viewer
shows what the run record holds, no more:

- messages: the arm's system prompt (when it has one), the task's prompt, then per host
  turn the assistant's message (its tool call, or its text: the answer, a reply cut at
  the completion cap, an unparseable call; a record imported from Inspect may hold several
  calls in one turn, which stay one message) and, for a call answered, the tool
  message with the result as the host was shown it (JSON) or the harness's error;
- events, in trace order: a ``ModelEvent`` per host turn (its input messages, the tools
  offered, its output with the turn's token usage, its latency as working time, its
  retries), a ``ToolEvent`` per answered call (function, arguments, result or error), and
  an ``InfoEvent`` for a tool search's surfaced tools, an unparseable call and the stop
  that ended the episode (a harness limit, an infeasibility stop).

The record times the host's turns (latency) but neither when each event happened nor
how long a tool took: every event carries the episode's start as its timestamp, a model
event its measured latency as ``working_time`` and the measured latency of the turns
before it as ``working_start``; a tool event has no working time (not measured, never
estimated, invariant 7). Token usage is absent where the host reports none (the replay).
Identifiers (messages, tool calls) derive from the sample, so an export is reproducible.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from prereg.runners.drivers.base import render
from prereg.runners.record import RunRecord, Tokens, TraceEvent

if TYPE_CHECKING:
    from inspect_ai.event import Event
    from inspect_ai.model import ChatMessage, ModelUsage
    from inspect_ai.tool import ToolInfo

#: ``InfoEvent.source`` of the events prereg writes
INFO_SOURCE = "prereg"
#: trace kinds that are a host turn (one model event each)
TURN_KINDS = frozenset({"tool_call", "final", "cut", "malformed"})
#: a turn's kind -> Inspect's stop reason of its output
STOP_REASONS = {
    "tool_call": "tool_calls",
    "final": "stop",
    "cut": "max_tokens",
    "malformed": "unknown",
}


@dataclass(frozen=True)
class OfferedTool:
    """One tool as a unit offered it: what the host could read, and where it came from."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    integration: str
    role: str


@dataclass
class Transcript:
    """A sample's messages and events."""

    messages: list[ChatMessage] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)


def model_usage(tokens: Tokens | None, cost: float | None) -> ModelUsage | None:
    """Inspect's usage for measured tokens and cost; None when nothing was measured."""
    from inspect_ai.model import ModelUsage  # lazy: optional extra prereg-agents[inspect]

    if tokens is None or (tokens.input is None and tokens.output is None):
        if cost is None:
            return None  # not measured: no usage rather than zeros
        tokens = tokens or Tokens()
    return ModelUsage(
        input_tokens=tokens.input or 0,
        output_tokens=tokens.output or 0,
        total_tokens=tokens.total or 0,
        reasoning_tokens=tokens.reasoning,
        input_tokens_cache_read=tokens.cached,
        total_cost=cost,
    )


def tool_infos(tools: Sequence[OfferedTool]) -> list[ToolInfo]:
    """The offered tools as Inspect's tool list (a schema Inspect cannot type is kept
    whole in the description's place of record: the sample metadata)."""
    from inspect_ai.tool import ToolInfo, ToolParams  # lazy: optional extra
    from pydantic import ValidationError  # lazy: with the optional extra's models

    infos = []
    for tool in tools:
        try:
            params = ToolParams.model_validate(dict(tool.input_schema))
        except ValidationError:
            params = ToolParams()
        infos.append(ToolInfo(name=tool.name, description=tool.description, parameters=params))
    return infos


def _arguments(value: Any) -> tuple[dict[str, Any], str | None]:
    """(arguments, parse error): Inspect's tool calls take an object."""
    if isinstance(value, dict):
        return dict(value), None
    return {}, f"the arguments are not a JSON object: {render(value)}"


def _seconds(latency_ms: float | None) -> float | None:
    return None if latency_ms is None else latency_ms / 1000.0


def _steps(trace: Sequence[TraceEvent]) -> list[list[TraceEvent] | TraceEvent]:
    """The trace with each host turn as a list: its one event, or its calls (a record
    imported from Inspect may hold several calls of one turn)."""
    steps: list[list[TraceEvent] | TraceEvent] = []
    for event in trace:
        if event.kind not in TURN_KINDS:
            steps.append(event)
            continue
        last = steps[-1] if steps else None
        if (
            event.kind == "tool_call"
            and isinstance(last, list)
            and last[0].kind == "tool_call"
            and last[0].turn == event.turn
        ):
            last.append(event)
        else:
            steps.append([event])
    return steps


def _answered(
    calls: list[tuple[str, str | None, dict[str, Any]]], result: TraceEvent, prefix: str
) -> tuple[str, dict[str, Any]]:
    """(call id, arguments) of the turn's first unanswered call of the result's tool."""
    for index, (call_id, tool, arguments) in enumerate(calls):
        if tool == result.tool:
            del calls[index]
            return call_id, arguments
    return f"{prefix}-call{result.turn}", {}


def _info(event: TraceEvent, when: datetime, working: float, **data: Any) -> Event:
    from inspect_ai.event import InfoEvent  # lazy: optional extra prereg-agents[inspect]

    return InfoEvent(
        timestamp=when,
        working_start=working,
        source=INFO_SOURCE,
        data={"kind": event.kind, "turn": event.turn, **data},
    )


def build_transcript(
    record: RunRecord,
    prompt: str,
    system: str | None,
    tools: Sequence[OfferedTool],
    model: str,
) -> Transcript:
    """The record's episode as messages and events (see the module docstring)."""
    from inspect_ai.event import ModelEvent, ToolEvent  # lazy: optional extra
    from inspect_ai.model import (  # lazy: optional extra prereg-agents[inspect]
        ChatCompletionChoice,
        ChatMessageAssistant,
        ChatMessageSystem,
        ChatMessageTool,
        ChatMessageUser,
        GenerateConfig,
        ModelOutput,
    )
    from inspect_ai.tool import ToolCall, ToolCallError  # lazy: optional extra

    prefix = f"{record.task_id}-{record.repeat + 1}"
    out = Transcript()

    def message_id() -> str:
        return f"{prefix}-m{len(out.messages)}"

    if system:
        out.messages.append(ChatMessageSystem(id=message_id(), content=system))
    out.messages.append(ChatMessageUser(id=message_id(), content=prompt))
    infos = tool_infos(tools)
    when = record.started_at
    working = 0.0  # measured host latency before the event, in seconds
    pending: dict[int, list[tuple[str, str | None, dict[str, Any]]]] = {}  # turn -> calls
    for item in _steps(record.trace):
        if isinstance(item, list):  # one host turn: its text, or its call(s)
            event = item[0]
            returned = event.model_returned or record.model_returned or model
            tool_calls = None
            if event.kind == "tool_call":
                tool_calls = []
                for k, call in enumerate(item):
                    arguments, problem = _arguments(call.arguments)
                    call_id = f"{prefix}-call{call.turn}" + (f"-{k}" if k else "")
                    pending.setdefault(call.turn, []).append((call_id, call.tool, arguments))
                    tool_calls.append(
                        ToolCall(
                            id=call_id,
                            function=call.tool or "",
                            arguments=arguments,
                            parse_error=problem,
                        )
                    )
            assistant = ChatMessageAssistant(
                id=message_id(), content=event.text or "", tool_calls=tool_calls, model=returned
            )
            latency = _seconds(event.latency_ms)
            output = ModelOutput(
                model=returned,
                choices=[
                    ChatCompletionChoice(message=assistant, stop_reason=STOP_REASONS[event.kind])
                ],
                usage=model_usage(event.usage, event.cost_usd),
                time=latency,
            )
            out.events.append(
                ModelEvent(
                    timestamp=when,
                    working_start=working,
                    model=returned,
                    input=list(out.messages),
                    tools=infos,
                    tool_choice="auto",
                    config=GenerateConfig(),
                    output=output,
                    retries=event.retries,
                    working_time=latency,
                    metadata={"turn": event.turn, "latency_ms": event.latency_ms},
                )
            )
            working += latency or 0.0
            out.messages.append(assistant)
            if event.kind == "malformed":
                out.events.append(_info(event, when, working, text=event.text))
            continue
        event = item
        if event.kind == "tool_result":
            call_id, arguments = _answered(pending.get(event.turn, []), event, prefix)
            text = (event.text or "") if event.is_error else render(event.result)
            error = ToolCallError("unknown", event.text or "") if event.is_error else None
            out.messages.append(
                ChatMessageTool(
                    id=message_id(),
                    content=text,
                    tool_call_id=call_id,
                    function=event.tool,
                    error=error,
                )
            )
            out.events.append(
                ToolEvent(
                    timestamp=when,
                    working_start=working,
                    id=call_id,
                    function=event.tool or "",
                    arguments=arguments,
                    result=text,
                    error=error,
                    failed=bool(event.is_error) or None,
                    metadata={"turn": event.turn},
                )
            )
        elif event.kind == "search":
            out.events.append(_info(event, when, working, surfaced=event.surfaced or []))
        else:  # stop, error: how the episode ended
            out.events.append(_info(event, when, working, text=event.text))
    return out
