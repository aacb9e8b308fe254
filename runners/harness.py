"""The harness: one episode of one run unit, under the registered budgets.

The harness asks the driver for one turn at a time, executes tool calls against
a fresh copy of the service, and stops at the first of: a final answer, a
response cut at the completion cap, the episode token budget, the call limit,
the turn limit, or an infeasibility stop (success has become impossible: a
prohibited operation was reached for, a destructive call lacked its
confirmation, a read-only task mutated the store, a negative task used a tool).

Tool metadata, prompts and arguments are untrusted data: arguments are only
validated against the tool's JSON schema and passed to the typed store; nothing
from a tool or a prompt can change how the harness behaves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.validators import validator_for

from prereg.experiments import Experiment, Task
from prereg.experiments.models import ArgRef, Const
from prereg.experiments.offers import ArmOffer, Server, arm_offer, offered_items, plain_offer
from prereg.experiments.refs import as_step_ref
from prereg.experiments.service import OperationError, ServiceStore, State
from prereg.experiments.surfaces import Role, Surface, Tool, ToolRefused, execute_tool
from prereg.registry.units import ArmConfig, Budgets, RunUnit, unit_budgets
from prereg.runners.drivers.base import (
    CutAtCap,
    Driver,
    Episode,
    Exchange,
    FinalAnswer,
    Malformed,
    OfferedTool,
    RecordedCall,
    RecordedPath,
    ToolCall,
    ToolResult,
    Turn,
    render,
)
from prereg.runners.live import LiveSession
from prereg.runners.record import Tokens as TokensModel
from prereg.runners.record import TraceEvent


@dataclass
class CallInfo:
    """One tool call as the harness saw and handled it."""

    tool: str
    arguments: Any
    role: Role | None  # None: the name matches no offered tool
    operations: tuple[str, ...]
    valid: bool  # the arguments validate against the input schema
    ok: bool  # ran without error
    empty: bool  # returned nothing (None, {}, [] or no items)
    error: str | None
    result: Any
    server: str | None = None  # the offered integration's key (None: no such tool)
    live: bool = False  # executed on the registered live server


@dataclass
class EpisodeResult:
    """Everything the scoring needs about an episode."""

    calls: list[CallInfo] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    trace: list[TraceEvent] = field(default_factory=list)
    answer: str | None = None
    stop: str | None = None  # completion_cap | episode_budget | call_limit | ...
    surfaced_before_first_call: set[str] | None = None
    searched: bool | None = None
    before: State = field(default_factory=dict)
    after: State = field(default_factory=dict)
    store: ServiceStore | None = None
    focal_tools: frozenset[str] = frozenset()
    offer: ArmOffer | None = None
    servers: list[Server] = field(default_factory=list)  # as listed in this unit
    live_servers: frozenset[str] = frozenset()


def _is_empty(content: Any) -> bool:
    if content is None or content == {} or content == []:
        return True
    return isinstance(content, dict) and content.get("items") == []


def _tokens_of(turn: Turn) -> int | None:
    if turn.usage is None or (turn.usage.input is None and turn.usage.output is None):
        return None
    u = turn.usage
    return (u.input or 0) + (u.output or 0) + (u.reasoning or 0)


def recorded_path(task: Task, surface: Surface) -> RecordedPath:
    """The task's solution as calls on ``surface``: each operation through a tool that
    runs exactly that operation, with the tool's argument mapping inverted."""
    calls: list[RecordedCall] = []
    for index, step in enumerate(task.solution.steps):
        chosen: RecordedCall | None = None
        for tool in surface.tools:
            if len(tool.steps) != 1 or tool.steps[0].op != step.op:
                continue
            mapping = tool.steps[0].args
            arguments: dict[str, Any] = {}
            fits = True
            for param, value in step.args.items():
                source = mapping.get(param)
                ref = as_step_ref(value)
                if isinstance(source, ArgRef):
                    arguments[source.arg] = ref if ref is not None else value
                elif isinstance(source, Const) and ref is None and source.value == value:
                    continue
                else:
                    fits = False
                    break
            if fits:
                chosen = RecordedCall(tool=tool.name, arguments=arguments)
                break
        if chosen is None:
            return RecordedPath(
                calls=(),
                answer=None,
                problem=(
                    f"step {index} ({step.op}): surface '{surface.id}' has no tool that runs "
                    "exactly this operation with these arguments"
                ),
            )
        calls.append(chosen)
    return RecordedPath(calls=tuple(calls), answer=task.solution.answer)


class Harness:
    """Runs episodes for one run of one experiment.

    Each unit runs under its arm's configuration (``configs``: arm id -> ArmConfig, from
    :meth:`prereg.registry.units.RunPlan.arm_configs`): budgets, model, params and
    system prompt; ``budgets``, ``model`` and ``params`` serve an arm without one. A
    registered limit rule is resolved per task (:meth:`budgets_of`).

    ``offers`` (arm id -> :class:`ArmOffer`, from :func:`prereg.registry.units.build_offers`)
    say what each arm offers, controls applied; an arm without one offers its surface
    and the pool. ``live`` executes calls to the registered live integration (see
    :mod:`prereg.runners.live`); every other replay-only tool is refused.
    """

    def __init__(
        self,
        experiment: Experiment,
        budgets: Budgets,
        model: str | None,
        params: dict[str, Any],
        rotations: int,
        offers: dict[str, ArmOffer] | None = None,
        live: LiveSession | None = None,
        configs: Mapping[str, ArmConfig] | None = None,
    ) -> None:
        self.experiment = experiment
        self.budgets = budgets
        self.model = model
        self.params = params
        self.rotations = rotations
        self.offers = dict(offers or {})
        self.live = live
        self.configs = dict(configs or {})
        self._validators: dict[tuple[str, str], Any] = {}

    def config_of(self, unit: RunUnit) -> ArmConfig:
        """The unit's arm's configuration; the harness-wide defaults for an arm without one."""
        found = self.configs.get(unit.arm)
        if found is not None:
            return found
        return ArmConfig("", self.model, self.params, budgets=self.budgets)

    def budgets_of(self, unit: RunUnit) -> Budgets:
        """The limits the unit runs under: its arm's budgets, with a registered rule
        (``call_limit_over_certified``, ``turn_limit_over_calls``) resolved for its task."""
        return unit_budgets(self.config_of(unit).budgets, unit.task)

    def _validator(self, tool: Tool) -> Any:
        key = (tool.surface, tool.name)
        if key not in self._validators:
            schema = dict(tool.input_schema)
            cls = validator_for(schema, default=Draft202012Validator)
            self._validators[key] = cls(schema)
        return self._validators[key]

    def offer_of(self, unit: RunUnit) -> ArmOffer:
        """The unit's arm's offer: as given, else built from the unit's arm spec."""
        if unit.arm not in self.offers:
            self.offers[unit.arm] = (
                plain_offer(self.experiment, unit.surface)
                if unit.spec is None
                else arm_offer(unit.spec, self.experiment, unit.design_seed)
            )
        return self.offers[unit.arm]

    def listing(self, unit: RunUnit) -> tuple[list[Server], list[tuple[Tool, Role, Surface]]]:
        """(servers, tools) the unit lists, in its rotation's (and clone cell's) order."""
        return offered_items(self.offer_of(unit), unit.rotation, self.rotations, unit.cell)

    def offered(self, unit: RunUnit) -> list[tuple[Tool, Role, Surface]]:
        return self.listing(unit)[1]

    def _live_servers(self, servers: Sequence[Server]) -> frozenset[str]:
        """Keys of the listed servers whose calls go live: the registered live surface,
        offered untransformed (a blinded or relabelled copy is never called live)."""
        if self.live is None:
            return frozenset()
        return frozenset(
            s.key for s in servers if s.source == self.live.surface and s.surface.transform is None
        )

    def episode_for(
        self, unit: RunUnit, driver: Driver, offered: Sequence[tuple[Tool, Role, Surface]]
    ) -> Episode:
        tools = tuple(
            OfferedTool(
                name=t.name,
                title=t.title,
                description=t.description,
                input_schema=t.input_schema,
                integration=s.name,
                integration_description=s.description,
                snapshot_digest=s.snapshot_digest if s.transform is None else None,
            )
            for t, _, s in offered
        )
        solution = None
        # only a replay driver may see the recorded path; a model-backed one never does
        if driver.sees_solution and driver.evidence_class == "replay":
            offer = self.offer_of(unit)
            focal = offer.clones[unit.cell & 1][0] if offer.clones else offer.servers[0]
            solution = recorded_path(unit.task, focal.surface)
        config = self.config_of(unit)
        return Episode(
            prompt=unit.task.prompt,
            tools=tools,
            completion_cap=config.budgets.completion_cap,
            model=config.model,
            params=dict(config.params),
            system=config.system_prompt,
            seed=unit.seed,
            prompt_seed=unit.prompt_seed,
            label=unit.label,
            solution=solution,
        )

    async def run(self, unit: RunUnit, driver: Driver) -> EpisodeResult:
        """Play one episode; driver exceptions propagate (they are infrastructure failures)."""
        task = unit.task
        servers, offered = self.listing(unit)
        by_name = {t.name: (t, role) for t, role, _ in offered}
        episode = self.episode_for(unit, driver, offered)
        store = ServiceStore(self.experiment.service)
        out = EpisodeResult(
            before=store.snapshot(),
            store=store,
            focal_tools=frozenset(t.name for t, r, _ in offered if r == "focal"),
            offer=self.offer_of(unit),
            servers=servers,
            live_servers=self._live_servers(servers),
        )
        history: list[Exchange] = []
        spent_tokens = 0
        b = self.budgets_of(unit)
        while True:
            if b.turn_limit is not None and len(out.turns) >= b.turn_limit:
                out.stop = "turn_limit"
                break
            turn = await driver.next_turn(episode, history)
            index = len(out.turns)
            out.turns.append(turn)
            if turn.searched is not None:
                out.searched = bool(out.searched) or turn.searched
            if turn.surfaced is not None:
                out.trace.append(
                    TraceEvent(kind="search", turn=index, surfaced=list(turn.surfaced))
                )
                if not out.calls:
                    out.surfaced_before_first_call = (
                        out.surfaced_before_first_call or set()
                    ) | set(turn.surfaced)
                out.searched = True if turn.searched is None else out.searched
            measured = _tokens_of(turn)
            spent_tokens += measured or 0
            action = turn.action
            common: dict[str, Any] = dict(
                turn=index,
                latency_ms=turn.latency_ms,
                cost_usd=turn.cost_usd,
                model_returned=turn.model_returned,
                retries=turn.retries,
                usage=None if turn.usage is None else TokensModel(**vars(turn.usage)),
            )
            if isinstance(action, CutAtCap):
                out.trace.append(TraceEvent(kind="cut", text=action.text, **common))
                out.stop = "completion_cap"
                break
            if isinstance(action, FinalAnswer):
                out.trace.append(TraceEvent(kind="final", text=action.text, **common))
                if b.episode_tokens is not None and spent_tokens > b.episode_tokens:
                    out.stop = "episode_budget"
                    break
                out.answer = action.text
                break
            if isinstance(action, Malformed):
                out.trace.append(TraceEvent(kind="malformed", text=action.text, **common))
                result = ToolResult(None, True, "error: the tool call could not be parsed")
            else:
                assert isinstance(action, ToolCall)
                out.trace.append(
                    TraceEvent(
                        kind="tool_call", tool=action.name, arguments=action.arguments, **common
                    )
                )
                if b.episode_tokens is not None and spent_tokens > b.episode_tokens:
                    out.stop = "episode_budget"
                    break
                if b.call_limit is not None and len(out.calls) >= b.call_limit:
                    out.stop = "call_limit"
                    break
                info, result = await self._call(action, by_name, store, out.live_servers)
                out.calls.append(info)
                out.trace[-1] = out.trace[-1].model_copy(
                    update={"operations": list(info.operations)}
                )
                out.trace.append(
                    TraceEvent(
                        kind="tool_result",
                        turn=index,
                        tool=action.name,
                        result=result.content,
                        is_error=result.is_error,
                        text=result.text if result.is_error else None,
                    )
                )
                infeasible = self._infeasible(task, out, store)
                if infeasible:
                    out.trace.append(TraceEvent(kind="stop", turn=index, text=infeasible))
                    out.stop = "infeasible"
                    break
            if b.episode_tokens is not None and spent_tokens > b.episode_tokens:
                out.stop = "episode_budget"
                break
            history.append(Exchange(turn=turn, result=result))
        if out.stop is not None and out.stop != "infeasible":
            out.trace.append(
                TraceEvent(kind="stop", turn=max(len(out.turns) - 1, 0), text=out.stop)
            )
        out.after = store.snapshot()
        return out

    async def _call(
        self,
        call: ToolCall,
        by_name: dict[str, tuple[Tool, Role]],
        store: ServiceStore,
        live_servers: frozenset[str] = frozenset(),
    ) -> tuple[CallInfo, ToolResult]:
        if call.host_result is not None:
            return self._host_executed(call, call.host_result, by_name), call.host_result
        found = by_name.get(call.name)
        if found is None:
            msg = f"error: no tool named '{call.name}' is offered"
            return (
                CallInfo(call.name, call.arguments, None, (), False, False, True, msg, None),
                ToolResult(None, True, msg),
            )
        tool, role = found
        server = tool.surface
        args = call.arguments
        valid = isinstance(args, dict) and self._validator(tool).is_valid(args)
        if not valid:
            detail = "arguments must be a JSON object"
            if isinstance(args, dict):
                problem = next(iter(self._validator(tool).iter_errors(args)), None)
                detail = problem.message if problem is not None else "invalid arguments"
            msg = f"error: the arguments do not match the input schema: {detail}"
            return (
                CallInfo(
                    tool.name, args, role, tool.operations, False, False, True, msg, None, server
                ),
                ToolResult(None, True, msg),
            )
        if server in live_servers and self.live is not None:  # (live_servers is empty without)
            # the registered live integration: the call runs on its server (never the store)
            content, is_error, text, empty = await self.live.call(tool.name, args)
            info = CallInfo(
                tool.name,
                args,
                role,
                (),
                True,
                not is_error,
                empty,
                text if is_error else None,
                None if is_error else content,
                server,
                live=True,
            )
            return info, ToolResult(None if is_error else content, is_error, text)
        try:
            content = execute_tool(tool, args, store)
        except ToolRefused as exc:
            msg = f"error: {exc}"
            return (
                CallInfo(
                    tool.name, args, role, tool.operations, True, False, True, msg, None, server
                ),
                ToolResult(None, True, msg),
            )
        except OperationError as exc:
            msg = f"error: {exc}"
            return (
                CallInfo(
                    tool.name, args, role, tool.operations, True, False, True, msg, None, server
                ),
                ToolResult(None, True, msg),
            )
        info = CallInfo(
            tool.name,
            args,
            role,
            tool.operations,
            True,
            True,
            _is_empty(content),
            None,
            content,
            server,
        )
        return info, ToolResult(content, False, render(content))

    def _host_executed(
        self, call: ToolCall, result: ToolResult, by_name: dict[str, tuple[Tool, Role]]
    ) -> CallInfo:
        """A call the host executed itself (an MCP connector): classified and validated
        like any call, with the host's result; nothing runs here, the store is untouched."""
        error = result.text if result.is_error else None
        content = None if result.is_error else result.content
        empty = result.is_error or _is_empty(content)
        found = by_name.get(call.name)
        if found is None:
            return CallInfo(
                call.name,
                call.arguments,
                None,
                (),
                False,
                not result.is_error,
                empty,
                error,
                content,
            )
        tool, role = found
        args = call.arguments
        valid = isinstance(args, dict) and self._validator(tool).is_valid(args)
        return CallInfo(
            tool.name,
            args,
            role,
            tool.operations,
            valid,
            not result.is_error,
            empty,
            error,
            content,
            tool.surface,
        )

    @staticmethod
    def _infeasible(task: Task, out: EpisodeResult, store: ServiceStore) -> str | None:
        """Why success has become impossible, or None."""
        if task.polarity == "negative":
            return "a tool was used on a task whose right behaviour uses no tool"
        last = out.calls[-1]
        if task.rules_out_anything:
            bad = [op for op in last.operations if not task.allows(op)]
            if bad:
                return f"reached for '{bad[0]}', which the task does not permit"
        if any(e.destructive and not e.confirmed for e in store.log):
            return "a destructive operation was attempted without a valid confirmation"
        if not task.goal.mutates and store.state != out.before:
            return "a task that asks for no change mutated the store"
        return None
