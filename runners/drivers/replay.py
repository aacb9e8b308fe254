"""The replay driver: follows the recorded solution path, deterministically.

It needs no model and no network. It receives the task's recorded path already
translated to the focal surface's tools (only a replay driver is ever given it)
and issues those calls in order, filling identifiers from earlier results, then
answers with the recorded answer or, if there is none, the last result.

Nothing is measured, so latency, tokens and cost are None (invariant 7): a
fabricated number next to measured ones would be indistinguishable from them.
By construction its selection rate is 1.0 wherever a task rules anything out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from prereg.experiments.refs import RefError
from prereg.registry.hosts import EvidenceClass
from prereg.runners.drivers.base import (
    Episode,
    Exchange,
    FinalAnswer,
    InfraError,
    ToolCall,
    Turn,
    resolve_recorded,
)


class ReplayDriver:
    name = "replay"
    evidence_class: EvidenceClass = "replay"
    sees_solution = True
    loads_all_tools = True

    async def next_turn(self, episode: Episode, history: Sequence[Exchange]) -> Turn:
        path = episode.solution
        if path is None:
            raise InfraError("the replay driver was given no recorded path")
        if path.problem is not None:
            raise InfraError(f"cannot replay: {path.problem}")
        results = [ex.result.content if ex.result is not None else None for ex in history]
        step = len(history)
        if step < len(path.calls):
            call = path.calls[step]
            try:
                arguments = resolve_recorded(call.arguments, results)
            except (RefError, IndexError) as exc:
                # the path broke (an earlier call failed): stop and let the oracles judge
                return Turn(FinalAnswer(f"The recorded path could not continue: {exc}"))
            return Turn(ToolCall(name=call.tool, arguments=arguments))
        if path.answer is not None:
            return Turn(FinalAnswer(path.answer))
        last = history[-1].result if history else None
        return Turn(FinalAnswer(last.text if last is not None else ""))

    async def aclose(self) -> None:
        return None


def create(
    model: str | None = None, params: Mapping[str, Any] | None = None, **options: Any
) -> ReplayDriver:
    """The replay driver takes no model, no parameters and no options."""
    if options:
        raise TypeError(f"the replay driver takes no options (got {sorted(options)})")
    if params:
        raise ValueError(f"the replay driver takes no params (got {sorted(params)})")
    return ReplayDriver()
