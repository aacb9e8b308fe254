"""A ToolBottleneckBench unit played by a host, under the seed's harness contract.

The simulated policy (:mod:`prereg.runners.toolbottleneck.host`) stands in for a model
offline; this module plays the same unit through a :class:`~prereg.runners.drivers.base.Driver`
(anthropic, openai, openai-chat, or the offline local host under a named profile,
:mod:`prereg.runners.drivers.local`, which reads the same menu, prompt and observations
and needs no network): the compiled variant's menu is offered as the tools
(the routed menu narrows it to the operational tools after the first executed
operational call; in Discovery the menu is the retriever's shortlist), the variant's
request is the user prompt and the arm's registered system prompt the provider's system
field. Each call runs against the variant's sandbox, never anything else: a name the
menu at that call does not list, or arguments that are not exactly the function's one
string argument, execute nothing and return an error (the protocol obligation fails;
nothing is repaired). The contract (seed 3.3) is the simulated policy's: completion
cap (a cut response ends the episode), episode token budget (the provider's reported
tokens), call limit = certified minimum + ``call_slack``, turn limit = call limit +
``turn_slack``, and the infeasibility stop (:func:`~prereg.runners.toolbottleneck.host.infeasible`).
As in the simulated policy's loop, every non-final turn is a call (a malformed call
counts as one), so the turn limit can end an episode only when ``turn_slack`` is 0; at
the seed's slack of 2 it is structurally unreachable
(:func:`~prereg.runners.toolbottleneck.host.turn_limit_reachable`, reading F3).
The grader is the same :func:`~prereg.experiments.toolbottleneck.verify.verify`.

**The structural holdout** (docs/toolbottleneck.md, readings H1 and H4). Under
``delivery: canonical`` every observation returns its records canonically
(:func:`~prereg.runners.toolbottleneck.host.delivered`: the envelope unchanged, the
records decoded in RFC 8785 key order, the same bytes whatever the cell's encoding).
Under ``controller: public-handoff`` the public-handoff controller
(:func:`~prereg.runners.toolbottleneck.controller.follow_handoffs`, the one the simulated
policy plays with) follows the public pointers after each call the model issues,
issuing each call itself with no model request; the records it read reach the model in
the tool result of the model's call it followed: that call's observation with
``controller_calls``, a list of ``{tool, arguments, result}`` in the order issued (each
``result`` the observation as delivered, or the error text). Its calls are in the trace
as ``tool_call`` events whose text is
:data:`~prereg.runners.toolbottleneck.controller.CONTROLLER_ISSUED`, each followed by
its ``tool_result``; they spend no model tokens, and the call limit and the
infeasibility stop hold for them as for the model's.

Everything the host returns is untrusted data: tool names, arguments and answers are
only compared and stored (redacted), never executed or interpreted beyond the sandbox's
lookup by name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from prereg.experiments.toolbottleneck.encoding import Delivery
from prereg.experiments.toolbottleneck.family import FactValue
from prereg.experiments.toolbottleneck.sandbox import Sandbox
from prereg.experiments.toolbottleneck.verify import (
    LIMITS,
    Episode,
    EpisodeCall,
    Limit,
    Verification,
    verify,
)
from prereg.experiments.toolbottleneck.world import Function, Returned
from prereg.runners.drivers.base import (
    CutAtCap,
    Driver,
    Exchange,
    FinalAnswer,
    Malformed,
    OfferedTool,
    ToolCall,
    ToolResult,
    Turn,
    render,
)
from prereg.runners.drivers.base import Episode as HostEpisode
from prereg.runners.providers.credentials import redact, redact_obj
from prereg.runners.record import Tokens, TraceEvent
from prereg.runners.toolbottleneck.controller import (
    CONTROLLER_ISSUED,
    Call,
    PublicHandoffController,
    follow_handoffs,
)
from prereg.runners.toolbottleneck.host import (
    Contract,
    delivered,
    delivered_records,
    infeasible,
)

MALFORMED = "<malformed>"


@dataclass(frozen=True)
class HostUnit:
    """What the host is told besides the menu: the arm's model, params and system prompt,
    and the unit's seeds and label (the drivers key their transcripts by them)."""

    model: str | None
    params: Mapping[str, Any]
    system: str | None
    seed: int
    prompt_seed: int
    label: str


@dataclass
class HostPlayed:
    """An episode played by a host: the grader's input, its verdicts and the measures."""

    episode: Episode
    verification: Verification
    turns: list[Turn]
    trace: list[TraceEvent]
    call_limit: int
    turn_limit: int

    @property
    def tokens(self) -> Tokens:
        out: dict[str, int | None] = {}
        for name in ("input", "output", "reasoning", "cached"):
            values = [None if t.usage is None else getattr(t.usage, name) for t in self.turns]
            out[name] = _sum_or_none(values)
        return Tokens(**out)

    @property
    def latency_ms(self) -> float | None:
        value: float | None = _sum_or_none([t.latency_ms for t in self.turns])
        return value

    @property
    def cost_usd(self) -> float | None:
        value: float | None = _sum_or_none([t.cost_usd for t in self.turns])
        return value

    @property
    def retries(self) -> int | None:
        value: int | None = _sum_or_none([t.retries for t in self.turns])
        return value

    @property
    def model_returned(self) -> str | None:
        models = [t.model_returned for t in self.turns if t.model_returned]
        return models[-1] if models else None


def _sum_or_none(values: Sequence[Any]) -> Any:
    """The sum, or None when any value was not measured (invariant 7)."""
    if not values or any(v is None for v in values):
        return None
    return sum(values)


def offered(functions: Sequence[Function]) -> tuple[OfferedTool, ...]:
    """The menu as the host is shown it: each function's schema, as the variant digests it."""
    out = []
    for fn in functions:
        schema = fn.schema()
        out.append(
            OfferedTool(
                name=schema["name"],
                title=schema["name"],
                description=schema["description"],
                input_schema=schema["input_schema"],
                integration=fn.connector,
            )
        )
    return tuple(out)


def _tokens(turn: Turn) -> int:
    u = turn.usage
    if u is None:
        return 0
    return (u.input or 0) + (u.output or 0) + (u.reasoning or 0)


@dataclass
class _State:
    s: Sandbox
    contract: Contract
    call_limit: int
    turn_limit: int
    calls: list[EpisodeCall] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    trace: list[TraceEvent] = field(default_factory=list)
    changes: dict[tuple[str, str], FactValue] = field(default_factory=dict)
    spent: int = 0
    answer: str | None = None
    limits: set[Limit] = field(default_factory=set)
    routed: bool = False
    delivery: Delivery = "native"
    #: the function and the records (decoded, as delivered) of the last call executed
    last: tuple[Function | None, list[dict[str, Any]]] = (None, [])
    #: the turn the controller issues its calls in, and what it delivered there
    turn: int = 0
    delivered: list[dict[str, Any]] = field(default_factory=list)

    @property
    def stopped(self) -> bool:
        return bool(self.limits)

    def stop(self, limits: set[Limit], turn: int) -> None:
        """End the episode; the stop event names every limit that fired at once, in the
        precedence order (a cut response over the episode budget names both, so the
        record says the budget fired, as the simulated policy's records do)."""
        self.limits |= limits
        text = ", ".join(x for x in LIMITS if x in limits)
        self.trace.append(TraceEvent(kind="stop", turn=turn, text=text))

    # ---- the public-handoff controller's view (controller.Harness) -----------------------

    def executed(self) -> Sequence[EpisodeCall]:
        return self.calls

    def stop_at_call_limit(self) -> None:
        self.stop({"call_limit"}, self.turn)

    def issue(self, call: Call) -> tuple[Function | None, list[dict[str, Any]]]:
        """One call the controller issues (no model request): traced as issued by it,
        executed on the sandbox, its result kept for the model's next request."""
        name, args = call
        self.trace.append(
            TraceEvent(
                kind="tool_call",
                turn=self.turn,
                tool=redact(name),
                arguments=redact_obj(args),
                text=CONTROLLER_ISSUED,
            )
        )
        result = self.execute(name, args, self.turn)
        self.delivered.append(
            {
                "tool": name,
                "arguments": dict(args),
                "result": result.content if not result.is_error else result.text,
            }
        )
        if not self.feasible():
            self.stop({"infeasible"}, self.turn)
        return self.last

    def shown(self) -> tuple[Function, ...]:
        return self.s.operational if self.routed else self.s.menu

    def over_budget(self) -> bool:
        return self.spent > self.contract.episode_tokens

    def execute(self, name: str, args: Any, turn: int) -> ToolResult:
        """One call on the sandbox (an unlisted name or a wrong argument executes nothing)."""
        listed = any(f.name == name for f in self.shown())
        fn = self.s.function(name) if listed else None
        valid = (
            fn is not None
            and isinstance(args, dict)
            and set(args) == {fn.arg}
            and isinstance(args[fn.arg], str)
        )
        results: list[Returned] = []
        if fn is not None and valid:
            results, self.changes = self.s.call(name, args[fn.arg], self.changes)
        encoding = self.s.cell.encoding
        observation = delivered(
            self.s.observation(len(self.calls), name, results), encoding, self.delivery
        )
        ok = fn is not None and valid
        self.last = (
            fn if ok else None,
            delivered_records(observation, encoding, self.delivery) if ok else [],
        )
        self.calls.append(
            EpisodeCall(name, args, listed, None if fn is None else fn.operation, tuple(results))
        )
        if fn is not None and fn.operational and results and self.contract.menu_mode == "routed":
            self.routed = True
        if fn is None:
            result = ToolResult(None, True, "error: no tool of that name is offered")
        elif not valid:
            result = ToolResult(
                None, True, f"error: the arguments must be exactly {{'{fn.arg}': <string>}}"
            )
        else:
            result = ToolResult(observation, False, render(observation))
        self.trace.append(
            TraceEvent(
                kind="tool_result",
                turn=turn,
                tool=redact(name),
                result=result.content,
                is_error=result.is_error,
                text=result.text if result.is_error else None,
            )
        )
        return result

    def feasible(self) -> bool:
        return not infeasible(self.s, self.calls, self.changes, self.call_limit)


async def play_host(
    sandbox: Sandbox,
    driver: Driver,
    unit: HostUnit,
    contract: Contract,
    *,
    controller: bool = False,
    delivery: Delivery = "native",
) -> HostPlayed:
    """One episode of ``driver`` on ``sandbox`` under ``contract``, records delivered as
    ``delivery`` says and, with ``controller``, the public-handoff controller issuing the
    calls the public pointers name (see the module docstring); driver exceptions
    propagate (the caller records them as infrastructure failures)."""
    call_limit = sandbox.key.certified_minimum + contract.call_slack
    turn_limit = call_limit + contract.turn_slack
    st = _State(sandbox, contract, call_limit, turn_limit, delivery=delivery)
    ctrl = PublicHandoffController(sandbox.family.route.text) if controller else None
    if not sandbox.key.required_functions <= sandbox.key.menu:
        st.stop({"infeasible"}, 0)  # A fails: stopped before any request (seed, Discovery)
    history: list[Exchange] = []
    while not st.stopped:
        index = len(st.turns)
        if index >= turn_limit:  # reachable only at turn_slack 0 (turn_limit_reachable)
            st.stop({"turn_limit"}, max(index - 1, 0))
            break
        episode = HostEpisode(
            prompt=sandbox.request,
            tools=offered(st.shown()),
            completion_cap=contract.completion_cap,
            model=unit.model,
            params=dict(unit.params),
            seed=unit.seed,
            prompt_seed=unit.prompt_seed,
            label=unit.label,
            system=unit.system,
        )
        turn = await driver.next_turn(episode, history)
        st.turns.append(turn)
        st.spent += _tokens(turn)
        result = _act(st, turn, index)
        if result is None:
            break
        if ctrl is not None and not st.stopped:
            result = _follow(st, ctrl, result, index)
        if not st.stopped and st.over_budget():
            st.stop({"episode_budget"}, index)
        history.append(Exchange(turn=turn, result=result))
    episode_ = Episode(tuple(st.calls), st.answer, dict(st.changes), frozenset(st.limits))
    return HostPlayed(
        episode=episode_,
        verification=verify(sandbox.key, episode_),
        turns=st.turns,
        trace=st.trace,
        call_limit=call_limit,
        turn_limit=turn_limit,
    )


def _follow(
    st: _State, ctrl: PublicHandoffController, result: ToolResult, index: int
) -> ToolResult:
    """The controller after the model's call (reading H1): the calls it issues are
    executed now, and the records they returned travel with the model's result."""
    st.turn, st.delivered = index, []
    fn, records = st.last
    if not follow_handoffs(ctrl, st, fn, records):
        return result
    content = {**result.content, "controller_calls": st.delivered}
    return ToolResult(content, False, render(content))


def _act(st: _State, turn: Turn, index: int) -> ToolResult | None:
    """Handle one turn's action; None when the episode ended with it."""
    action = turn.action
    common: dict[str, Any] = dict(
        turn=index,
        latency_ms=turn.latency_ms,
        cost_usd=turn.cost_usd,
        model_returned=None if turn.model_returned is None else redact(turn.model_returned),
        retries=turn.retries,
        usage=None if turn.usage is None else Tokens(**vars(turn.usage)),
    )
    if isinstance(action, CutAtCap):
        st.trace.append(TraceEvent(kind="cut", text=redact(action.text), **common))
        limits: set[Limit] = {"completion_cap"}
        if st.over_budget():
            limits.add("episode_budget")
        st.stop(limits, index)
        return None
    if isinstance(action, FinalAnswer):
        st.trace.append(TraceEvent(kind="final", text=redact(action.text), **common))
        if st.over_budget():
            st.stop({"episode_budget"}, index)
        else:
            st.answer = action.text
        return None
    if isinstance(action, Malformed):
        st.trace.append(TraceEvent(kind="malformed", text=redact(action.text), **common))
        name, args = MALFORMED, action.text
    else:
        assert isinstance(action, ToolCall)
        name, args = action.name, action.arguments
        st.trace.append(
            TraceEvent(kind="tool_call", tool=redact(name), arguments=redact_obj(args), **common)
        )
    if st.over_budget():
        st.stop({"episode_budget"}, index)
        return None
    if len(st.calls) >= st.call_limit:
        st.stop({"call_limit"}, index)
        return None
    result = st.execute(name, args, index)
    if not st.feasible():
        st.stop({"infeasible"}, index)
    return result
