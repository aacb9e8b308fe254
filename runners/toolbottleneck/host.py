"""A simulated tool agent on ToolBottleneckBench sandboxes, under the seed's harness contract.

**Simulated.** No model runs here. The policy below is a documented mechanism with
seeded, pressure-sensitive error rates, so a study can be set up, run, scored and
reported offline end to end; its numbers describe the mechanism, never a model.

The harness (seed 3.3): completion cap per response (a response cut at the cap ends the
episode), episode token budget, call limit = certified minimum + ``call_slack`` (2),
turn limit = call limit + ``turn_slack`` (2), and the infeasibility stop (success has
become impossible within the call limit: the reference calls still missing outnumber
the calls left, or the records left the permitted final state; in Discovery, a required
tool missing from the shortlist stops the episode before any request). The routed menu
(``menu_mode: routed``) shows the full menu until the first executed call to an
operational tool, then only the operational tools; ``fixed`` keeps the full menu.

The policy reads only what a model would: the request, the schemas on the menu it is
shown (a function's operation, record kind, connector and route are in its
description) and the observations it gets back, decoded from the variant's encoding.
It is *told* the answer schema a request spells out: the decision label, the names of
the facts and whether the task asks for the action (never on the read-only frontier,
reading 4). It follows a record's ``next_handoff`` object (the seed's prompt: "A
next_handoff object identifies the connector and exact search query for the next
current record"): the next search is for its ``query`` with a search function of its
``connector``; an invalid or empty handoff is not followed. It stands in for
reasoning, which no simulation can do; ids, values, sources and where the records are
come only from the tools. Its errors, each drawn from the unit's seeded generator:

- **thinking**: every response spends ``think_per_kb`` x (KB of schemas shown) x
  lognormal(``think_sd``) reasoning tokens before its action (~60 tokens a call, ~150 an
  answer); past the completion cap it is cut. A bigger menu truncates more (V), most
  often before the first call (the routed menu narrows it after one);
- **route slips**: each call picks a route neighbour of the tool it means with
  probability ``route_slip`` x (share of the menu that is not operational) (V);
- **step slips**: each call is repeated identically with probability ``repeat_slip``,
  and after each record the policy stops following the chain with probability
  ``stop_slip`` (W: more records, more chances);
- **misreads**: each fact read is misread with probability ``misread[encoding]`` (D);
- **format slips**: the answer is wrapped in a Markdown fence with ``fence_slip``.

Tokens: input = (request + schemas shown + observations so far) / 4 characters per
token, output = the response's tokens; measured in this mechanism's own units.

**Delivery** (the structural holdout, docs/toolbottleneck.md reading H4): records return
in the cell's own encoding (``native``, the default) or in one canonical encoding
whatever the cell (``canonical``, :func:`~prereg.experiments.toolbottleneck.encoding.deliver`);
under canonical delivery the policy reads values with ``misread_raw``. ``Played.issuers``
says who issued each call (here always the model; the public-handoff controller,
:mod:`prereg.runners.toolbottleneck.controller`, issues most of its episodes' calls).

**The turn limit cannot fire** under the seed's contract (docs/toolbottleneck.md,
reading F3; :func:`turn_limit_reachable`). Every turn but the last is a call (a tool
call, or in a host's harness a malformed call, which counts as one), so when turn
``k + 1`` starts exactly ``k`` calls were made and ``k <= call limit``; a turn past the
call limit's is never started (the call limit stops the episode first). The turn limit
is call limit + ``turn_slack``, so it can end an episode only when ``turn_slack`` is 0
(then it stops the answer turn after the call limit's last call). The check is kept as a
guard for that case; at the seed's ``turn_slack`` of 2 the census's ``turn_limit`` row
is structurally 0 and says nothing about a policy or a model.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal

from prereg.experiments.toolbottleneck.encoding import Delivery, deliver, received
from prereg.experiments.toolbottleneck.family import EncodingName, FactValue
from prereg.experiments.toolbottleneck.sandbox import Sandbox
from prereg.experiments.toolbottleneck.verify import (
    LIMITS,
    Episode,
    EpisodeCall,
    Limit,
    Verification,
    verify,
)
from prereg.experiments.toolbottleneck.workflow import primary_ref
from prereg.experiments.toolbottleneck.world import Function, Returned, handoff_of

MenuMode = Literal["routed", "fixed"]
CHARS_PER_TOKEN = 4
#: an observation's envelope: identical in every encoding and every delivery
ENVELOPE = frozenset({"call", "tool", "source", "hash", "provenance"})


@dataclass(frozen=True)
class SimParams:
    """The simulated policy's settings (see the module docstring)."""

    think_per_kb: float = 4.0
    think_sd: float = 0.5
    call_tokens: int = 60
    answer_tokens: int = 150
    route_slip: float = 0.05
    repeat_slip: float = 0.03
    stop_slip: float = 0.02
    misread_raw: float = 0.0
    misread_compact: float = 0.03
    misread_typed: float = 0.01
    misread_linked: float = 0.01
    fence_slip: float = 0.02

    @classmethod
    def from_params(cls, params: Mapping[str, Any], base: SimParams | None = None) -> SimParams:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(params) - known)
        if unknown:
            raise ValueError(f"unknown simulated policy params {unknown} (known: {sorted(known)})")
        out = replace(base or cls(), **dict(params))
        for f in fields(out):
            value = getattr(out, f.name)
            if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
                raise ValueError(f"simulated policy param '{f.name}' must be a number >= 0")
        return out

    def misread(self, encoding: str) -> float:
        return float(getattr(self, f"misread_{encoding}"))


#: Named settings of the mechanism (not models): ``sim-steady`` rarely slips;
#: ``sim-truncating`` spends a large share of its cap thinking over a large menu.
PROFILES: Mapping[str, SimParams] = {
    "sim-steady": SimParams(),
    "sim-truncating": SimParams(think_per_kb=18.0, think_sd=0.6, route_slip=0.15),
    "sim-exact": SimParams(
        think_per_kb=0.0,
        think_sd=0.0,
        route_slip=0.0,
        repeat_slip=0.0,
        stop_slip=0.0,
        misread_compact=0.0,
        misread_typed=0.0,
        misread_linked=0.0,
        fence_slip=0.0,
    ),
}


@dataclass(frozen=True)
class Contract:
    """The harness budgets (seed 3.3) and the menu mode."""

    completion_cap: int = 1024
    episode_tokens: int = 128_000
    call_slack: int = 2
    turn_slack: int = 2
    menu_mode: MenuMode = "routed"


def turn_limit_reachable(contract: Contract) -> bool:
    """Whether the turn limit can ever end an episode of this harness (reading F3): only
    when it equals the call limit (``turn_slack`` 0). Every non-final turn is a call, so
    an episode reaches at most call limit + 1 turns, and the turn limit is call limit +
    ``turn_slack``: at the seed's slack of 2 the turn limit is structurally unreachable."""
    return contract.turn_slack == 0


@dataclass
class Played:
    """An episode as played: the grader's input and what the census needs besides."""

    episode: Episode
    verification: Verification
    turns: int
    call_limit: int
    turn_limit: int
    input_tokens: int
    output_tokens: int
    stop: str | None
    trace: list[dict[str, Any]] = field(default_factory=list)
    #: who issued each executed call, in order: ``model``, or ``controller`` (the
    #: public-handoff controller, :mod:`prereg.runners.toolbottleneck.controller`)
    issuers: tuple[str, ...] = ()


def unit_rng(*parts: object) -> random.Random:
    """A generator seeded from sha256 of the parts: the same unit, the same draws."""
    seed = hashlib.sha256("\x00".join(str(p) for p in parts).encode()).digest()
    return random.Random(int.from_bytes(seed[:8], "big"))


class _Agent:
    """The simulated policy's state over one episode."""

    def __init__(
        self,
        sandbox: Sandbox,
        params: SimParams,
        rng: random.Random,
        delivery: Delivery = "native",
    ) -> None:
        self.s, self.p, self.rng = sandbox, params, rng
        self.delivery: Delivery = delivery
        family = sandbox.family
        self.route = family.route.text
        self.fact_names = set(family.facts)
        self.act = sandbox.workflow.acts  # the request asks for the action (reading 4)
        self.facts: dict[str, FactValue] = {}
        self.sources: list[str] = []
        # the request names the primary record's lookup key (its kind's prefix leads it)
        first = primary_ref(family, sandbox.seed)
        self.todo: list[tuple[str, str, str | None]] = [("search", first, None)]
        self.primary: str | None = None
        self.acted = False
        self.last: tuple[str, dict[str, str]] | None = None

    def _on_route(self, shown: list[Function], operation: str, match: Any) -> list[Function]:
        return [f for f in shown if f.operation == operation and match(f)]

    def pick(self, shown: list[Function], operation: str, match: Any) -> Function | None:
        """The function meant (on the request's route), or a route neighbour by a slip."""
        meant = [f for f in self._on_route(shown, operation, match) if f.where == self.route]
        if not meant:
            return None
        fn = meant[0]
        others = [f for f in shown if f.base == fn.base and f.where != self.route]
        share = 1.0 - sum(1 for f in shown if f.operational) / max(len(shown), 1)
        if others and self.rng.random() < self.p.route_slip * share:
            return self.rng.choice(others)
        return fn

    def next_call(self, shown: list[Function]) -> tuple[str, dict[str, str]] | None:
        if self.last is not None and self.rng.random() < self.p.repeat_slip:
            return self.last  # an identical call again (a wasted call)
        while self.todo:
            op, value, kind = self.todo[0]
            fn = self._choose(shown, op, value, kind)
            if fn is None:
                self.todo.pop(0)
                continue
            self.last = (fn.name, {fn.arg: value})
            return self.last
        if self.act and not self.acted and self.primary is not None:
            fn = self.pick(shown, "act", lambda f: f.kind == self.s.family.sources[0])
            if fn is not None:
                self.acted = True
                self.last = (fn.name, {"id": self.primary})
                return self.last
        return None

    def _choose(self, shown: list[Function], op: str, value: str, kind: str | None) -> Any:
        if op == "search":
            prefix, connector = value[:3], kind
            return self.pick(
                shown,
                "search",
                lambda f: f.kind[:3].upper() == prefix and connector in (None, f.connector),
            )
        return self.pick(shown, "read", lambda f: f.kind == kind)

    def observe(self, fn: Function | None, arg: str, observation: Mapping[str, Any]) -> None:
        """Read an observation (decoded from its encoding) and plan the next calls."""
        objects = received(observation["objects_block"], self.s.cell.encoding, self.delivery)
        if fn is None or not objects:
            return  # nothing came back: the planned step stays, retried by the next call
        step = self.todo[0] if self.todo else None
        if fn.operation == "search" and step is not None and step[1] == arg:
            self.todo.pop(0)
            self.todo.insert(0, ("read", objects[0]["id"], objects[0]["kind"]))
        elif fn.operation == "read" and step is not None and step[1] == arg:
            self.todo.pop(0)
            self._read(objects[0], observation["source"])

    def misread_rate(self) -> float:
        """The misread rate of what the policy reads: the cell's encoding's, or under
        canonical delivery the plain values' (``misread_raw``)."""
        if self.delivery == "canonical":
            return self.p.misread("raw")
        return self.p.misread(self.s.cell.encoding)

    def _read(self, obj: Mapping[str, Any], source: str, *, follow: bool = True) -> None:
        """Read a record; ``follow`` False when a controller follows its handoff."""
        fields_ = obj["fields"]
        hop = handoff_of(fields_)
        if self.primary is None and obj["kind"] == self.s.family.sources[0] and hop is None:
            self.primary = obj["id"]  # the first record of the request's kind (no handoff)
        held = [n for n in fields_ if n in self.fact_names]
        for name in held:
            value = fields_[name]
            if self.rng.random() < self.misread_rate():
                value = f"{value}?"  # a misread value
            self.facts[name] = value
        if held:
            self.sources.append(source)
        if self.rng.random() < self.p.stop_slip:
            return  # stops following the chain
        if hop is not None and follow:
            connector, query = hop
            self.todo.append(("search", query, connector))
        for name, value in fields_.items():
            if name.endswith("_ref") and isinstance(value, str):
                self.todo.append(("search", value, None))

    def answer(self) -> str:
        doc = {"decision": self.s.family.decision, "facts": self.facts, "sources": self.sources}
        text = json.dumps(doc)
        if self.rng.random() < self.p.fence_slip:
            return "```json\n" + text + "\n```"
        return text


def play(
    sandbox: Sandbox,
    params: SimParams,
    contract: Contract,
    rng: random.Random,
    delivery: Delivery = "native",
) -> Played:
    """One episode of the simulated policy on ``sandbox`` under ``contract``, records
    delivered as ``delivery`` says (native: the cell's encoding)."""
    call_limit = sandbox.key.certified_minimum + contract.call_slack
    turn_limit = call_limit + contract.turn_slack
    agent = _Agent(sandbox, params, rng, delivery)
    h = _Harness(sandbox, params, contract, rng, call_limit, turn_limit, delivery=delivery)
    if not sandbox.key.required_functions <= sandbox.key.menu:
        h.stop({"infeasible"})  # A fails: stopped before any request (seed, Discovery)
    while h.limit is None:
        # reachable only at turn_slack 0 (every earlier turn was a call: turn_limit_reachable)
        if len(h.turns) >= turn_limit:
            h.stop({"turn_limit"})
            break
        shown = h.shown()
        planned = agent.next_call(shown)
        if not h.respond(shown, planned is not None):
            break
        if planned is None:
            h.answer = agent.answer()
            break
        name, args = planned
        if len(h.calls) >= call_limit:
            h.stop({"call_limit"})
            break
        fn, arg, observation = h.execute(name, args)
        agent.observe(fn, arg, observation)
        h.check_feasible()
    return h.played()


@dataclass
class _Harness:
    s: Sandbox
    p: SimParams
    c: Contract
    rng: random.Random
    call_limit: int
    turn_limit: int
    calls: list[EpisodeCall] = field(default_factory=list)
    turns: list[int] = field(default_factory=list)
    changes: dict[tuple[str, str], FactValue] = field(default_factory=dict)
    observed_bytes: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    answer: str | None = None
    limits: set[Limit] = field(default_factory=set)
    limit: str | None = None
    routed: bool = False
    trace: list[dict[str, Any]] = field(default_factory=list)
    delivery: Delivery = "native"
    issuers: list[str] = field(default_factory=list)

    def stop(self, limits: set[Limit]) -> None:
        self.limits |= limits
        self.limit = next(x for x in LIMITS if x in self.limits)
        self.trace.append({"kind": "stop", "limits": sorted(limits)})

    def shown(self) -> list[Function]:
        if self.routed:
            return list(self.s.operational)
        return list(self.s.menu)

    def respond(self, shown: list[Function], calling: bool) -> bool:
        """Spend one response; False if it was cut at the cap or broke the budget."""
        schema_bytes = len(json.dumps([f.schema() for f in shown]))
        think = 0.0
        if self.p.think_per_kb > 0:
            z = self.rng.gauss(0.0, 1.0)
            think = self.p.think_per_kb * schema_bytes / 1000 * math.exp(self.p.think_sd * z)
        out = int(think) + (self.p.call_tokens if calling else self.p.answer_tokens)
        prompt = (len(self.s.request) + schema_bytes + self.observed_bytes) // CHARS_PER_TOKEN
        self.turns.append(out)
        self.trace.append({"kind": "response", "schemas": len(shown), "tokens": out})
        self.input_tokens += prompt
        self.output_tokens += min(out, self.c.completion_cap)
        limits: set[Limit] = set()
        if out > self.c.completion_cap:
            limits.add("completion_cap")
        if self.input_tokens + self.output_tokens > self.c.episode_tokens:
            limits.add("episode_budget")
        if limits:
            self.stop(limits)
            return False
        return True

    def execute(
        self, name: str, args: dict[str, str], issuer: str = "model"
    ) -> tuple[Function | None, str, dict[str, Any]]:
        """One executed call by ``issuer``; the observation as delivered (its bytes are
        what the policy's later prompts carry)."""
        listed = any(f.name == name for f in self.shown())
        fn = self.s.function(name) if listed else None
        arg = next(iter(args.values()))
        results: list[Returned] = []
        if fn is not None:
            results, self.changes = self.s.call(name, arg, self.changes)
        index = len(self.calls)
        encoded = self.s.observation(index, name, results)
        observation = delivered(encoded, self.s.cell.encoding, self.delivery)
        self.observed_bytes += len(json.dumps(observation))
        self.issuers.append(issuer)
        self.calls.append(
            EpisodeCall(
                name, dict(args), listed, None if fn is None else fn.operation, tuple(results)
            )
        )
        self.trace.append(
            {
                "kind": "call",
                "tool": name,
                "arguments": dict(args),
                "hits": len(results),
                "issuer": issuer,
            }
        )
        if fn is not None and fn.operational and results and self.c.menu_mode == "routed":
            self.routed = True
        body = {k: v for k, v in observation.items() if k not in ("call", "tool", "hash")}
        return fn, arg, {"source": observation["source"], "objects_block": body}

    def check_feasible(self) -> None:
        if infeasible(self.s, self.calls, self.changes, self.call_limit):
            self.stop({"infeasible"})

    def played(self) -> Played:
        episode = Episode(
            tuple(self.calls), self.answer, dict(self.changes), frozenset(self.limits)
        )
        return Played(
            episode=episode,
            verification=verify(self.s.key, episode),
            turns=len(self.turns),
            call_limit=self.call_limit,
            turn_limit=self.turn_limit,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            stop=self.limit,
            trace=self.trace,
            issuers=tuple(self.issuers),
        )


def delivered(
    encoded: Mapping[str, Any], encoding: EncodingName, delivery: Delivery
) -> dict[str, Any]:
    """An encoded observation as delivered (reading H4): the envelope unchanged, the
    varying blocks as encoded (``native``: the same object) or canonical."""
    if delivery == "native":
        return dict(encoded)
    envelope = {k: v for k, v in encoded.items() if k in ENVELOPE}
    blocks = {k: v for k, v in encoded.items() if k not in ENVELOPE}
    return {**envelope, **deliver(blocks, encoding, delivery)}


def delivered_records(
    observation: Mapping[str, Any], encoding: EncodingName, delivery: Delivery
) -> list[dict[str, Any]]:
    """The records a delivered observation carries, decoded (``[{id, kind, fields}]``)."""
    blocks = {k: v for k, v in observation.items() if k not in ENVELOPE}
    return received(blocks, encoding, delivery)


def infeasible(
    sandbox: Sandbox,
    calls: Sequence[EpisodeCall],
    changes: Mapping[tuple[str, str], FactValue],
    call_limit: int,
) -> bool:
    """The seed's infeasibility stop: the reference calls still missing outnumber the
    calls left, or the records left the permitted final state (shared by every host)."""
    done = {(c.function, _arg(c)) for c in calls if c.returned}
    missing = sum(1 for c in sandbox.workflow.program if (c.function, c.arg) not in done)
    permitted = sandbox.key.permitted_final_state
    stray = any(permitted.get(k) != v for k, v in changes.items())
    return stray or missing > call_limit - len(calls)


def _arg(call: EpisodeCall) -> str | None:
    args = call.arguments
    return next(iter(args.values()), None) if isinstance(args, dict) else None
