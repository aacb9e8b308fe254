"""The public-handoff controller (seed 001, section 4.3 and 5.5, appendix "Structural
holdout"): a deterministic program, not the model, that follows the public handoffs and
issues the calls itself, then gives the model the gathered records for its answer.

**Simulated.** The model here is the simulated policy (:mod:`.host`); the controller is
the same program whatever the host. Reading H1 (docs/toolbottleneck.md, "Controller,
delivery and the structural holdout"):

- The model makes the episode's first request and its first call (the search of the key
  its request names). After every call the *model* issues, the controller follows the
  public pointers of what came back, issuing each call itself (no model request):

  * a search that returned records: the read of the first record returned, with the read
    function of that record's kind on the request's route;
  * a read whose record carries a valid ``next_handoff`` object: the search the handoff
    names, with the search function of the handoff's ``connector`` whose kind prefixes
    the handoff's ``query`` (the lookup keys' public convention), on the request's route;
    then the read of its first hit, and so on;
  * a read whose record carries no handoff (a content record), an invalid or empty
    handoff, no function or more than one matching on the menu shown, a call that
    returns nothing, or a call it already executed: it stops (safely: it issues
    nothing) and the model continues.

- Every record the controller read is delivered to the model before its next request
  (the model reads its facts and its own ``_ref`` pointers, never the handoffs, which the
  controller followed); the model then continues (its own calls, its answer).

The controller reads only public information: the menu shown (names, operations, kinds,
connectors, routes in the descriptions), the request's route, and the observations as
delivered (decoded from the delivery's encoding). It never reads the hidden program, the
answer or the grader (``sandbox.workflow``, ``sandbox.key``); the harness's contract
applies to its calls as to the model's (call limit, infeasibility stop), and its calls
spend no model tokens, but what they return enters the model's next prompt.

**One controller, two hosts.** :func:`follow_handoffs` is the controller's loop after a
model's call, written once against a :class:`Harness` (what it may ask of the episode: the
menu shown, the calls made, the call limit, and issuing one call). The simulated policy's
episode (:func:`play_controlled`) and the model-host loop
(:func:`prereg.runners.toolbottleneck.harness.play_host`) both call it; they differ only
in how a record read is delivered to the model (the simulated policy reads it; a model
host is sent it in the tool result of its call that the controller followed, reading H1).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from prereg.experiments.toolbottleneck.encoding import Delivery, received
from prereg.experiments.toolbottleneck.sandbox import Sandbox
from prereg.experiments.toolbottleneck.verify import EpisodeCall
from prereg.experiments.toolbottleneck.world import Function, handoff_of
from prereg.runners.toolbottleneck.host import (
    Contract,
    Played,
    SimParams,
    _Agent,
    _Harness,
)

#: the registrable value of a study arm's ``controller`` field
Controller = Literal["public-handoff"]
CONTROLLERS: tuple[str, ...] = ("public-handoff",)

Call = tuple[str, dict[str, str]]
#: the text of a record's ``tool_call`` trace event the public-handoff controller issued
#: (the model's calls carry none): how a registered record says who issued each call
CONTROLLER_ISSUED = "issued by the public-handoff controller"


@dataclass
class PublicHandoffController:
    """The controller's decision rule over the menu shown and the delivered records."""

    route: str

    def after(
        self,
        shown: Sequence[Function],
        fn: Function | None,
        records: Sequence[Mapping[str, Any]],
        done: set[tuple[str, str]],
    ) -> Call | None:
        """The call the controller issues after a call of ``fn`` returned ``records``
        (decoded), or None when it stops."""
        if fn is None or not records:
            return None
        first = records[0]
        if fn.operation == "search":
            call = self._read(shown, str(first["id"]), str(first["kind"]))
        elif fn.operation == "read":
            hop = handoff_of(first["fields"])
            call = None if hop is None else self._search(shown, *hop)
        else:
            call = None
        if call is None or (call[0], next(iter(call[1].values()))) in done:
            return None
        return call

    def _only(self, matches: list[Function]) -> Function | None:
        return matches[0] if len(matches) == 1 else None

    def _read(self, shown: Sequence[Function], rid: str, kind: str) -> Call | None:
        fn = self._only(
            [f for f in shown if f.operation == "read" and f.kind == kind and f.where == self.route]
        )
        return None if fn is None else (fn.name, {fn.arg: rid})

    def _search(self, shown: Sequence[Function], connector: str, query: str) -> Call | None:
        fn = self._only(
            [
                f
                for f in shown
                if f.operation == "search"
                and f.connector == connector
                and f.where == self.route
                and f.kind[:3].upper() == query[:3]
            ]
        )
        return None if fn is None else (fn.name, {fn.arg: query})


class Harness(Protocol):
    """What :func:`follow_handoffs` asks of an episode's harness (the simulated policy's
    or a model host's): the contract's state and the execution of one call."""

    @property
    def stopped(self) -> bool:
        """The episode has ended (a limit fired)."""
        ...

    @property
    def call_limit(self) -> int: ...

    def shown(self) -> Sequence[Function]:
        """The menu shown now (the routed menu narrows after an operational call)."""
        ...

    def executed(self) -> Sequence[EpisodeCall]:
        """The calls executed so far, by either issuer."""
        ...

    def stop_at_call_limit(self) -> None: ...

    def issue(self, call: Call) -> tuple[Function | None, list[dict[str, Any]]]:
        """Execute ``call`` for the controller, deliver what it returned to the model and
        check feasibility; the function called (None: not on the menu) and the records
        as delivered (decoded)."""
        ...


def follow_handoffs(
    ctrl: PublicHandoffController,
    harness: Harness,
    fn: Function | None,
    records: Sequence[Mapping[str, Any]],
) -> int:
    """After the model's call of ``fn`` returned ``records`` (as delivered, decoded): the
    controller issues the calls the public pointers name until it stops or the harness
    does (reading H1; the call limit holds for its calls too). The number it issued."""
    issued = 0
    call = ctrl.after(harness.shown(), fn, records, _done(harness.executed()))
    while call is not None and not harness.stopped:
        if len(harness.executed()) >= harness.call_limit:
            harness.stop_at_call_limit()
            break
        fn, got = harness.issue(call)
        issued += 1
        call = ctrl.after(harness.shown(), fn, got, _done(harness.executed()))
    return issued


@dataclass
class _Simulated:
    """The simulated policy's harness as :func:`follow_handoffs` sees it: a record the
    controller read is read by the policy (:func:`_deliver`)."""

    h: _Harness
    agent: _Agent

    @property
    def stopped(self) -> bool:
        return self.h.limit is not None

    @property
    def call_limit(self) -> int:
        return self.h.call_limit

    def shown(self) -> Sequence[Function]:
        return self.h.shown()

    def executed(self) -> Sequence[EpisodeCall]:
        return self.h.calls

    def stop_at_call_limit(self) -> None:
        self.h.stop({"call_limit"})

    def issue(self, call: Call) -> tuple[Function | None, list[dict[str, Any]]]:
        name, args = call
        fn, arg, observation = self.h.execute(name, args, "controller")
        records = received(observation["objects_block"], self.h.s.cell.encoding, self.h.delivery)
        _deliver(self.agent, fn, arg, records, observation["source"])
        self.h.check_feasible()
        return fn, records


def play_controlled(
    sandbox: Sandbox,
    params: SimParams,
    contract: Contract,
    rng: random.Random,
    delivery: Delivery = "native",
) -> Played:
    """One episode under the public-handoff controller: the model (the simulated policy)
    makes the requests, the controller issues the calls the public pointers name (see
    the module docstring); ``Played.issuers`` says who issued each call."""
    call_limit = sandbox.key.certified_minimum + contract.call_slack
    turn_limit = call_limit + contract.turn_slack
    agent = _Agent(sandbox, params, rng, delivery)
    h = _Harness(sandbox, params, contract, rng, call_limit, turn_limit, delivery=delivery)
    ctrl = PublicHandoffController(sandbox.family.route.text)
    side = _Simulated(h, agent)
    if not sandbox.key.required_functions <= sandbox.key.menu:
        h.stop({"infeasible"})
    while h.limit is None:
        if len(h.turns) >= turn_limit:  # reachable only at turn_slack 0
            h.stop({"turn_limit"})
            break
        shown = h.shown()
        planned = agent.next_call(shown)
        if not h.respond(shown, planned is not None):
            break
        if planned is None:
            h.answer = agent.answer()
            break
        if len(h.calls) >= call_limit:
            h.stop({"call_limit"})
            break
        name, args = planned
        fn, arg, observation = h.execute(name, args, "model")
        agent.observe(fn, arg, observation)
        records = received(observation["objects_block"], sandbox.cell.encoding, delivery)
        h.check_feasible()
        follow_handoffs(ctrl, side, fn, records)
    return h.played()


def _done(calls: Sequence[EpisodeCall]) -> set[tuple[str, str]]:
    """The (function, argument) pairs already executed (the controller never repeats one)."""
    out: set[tuple[str, str]] = set()
    for c in calls:
        if isinstance(c.arguments, dict) and c.arguments:
            out.add((c.function, str(next(iter(c.arguments.values())))))
    return out


def _deliver(
    agent: _Agent,
    fn: Function | None,
    arg: str,
    records: Sequence[Mapping[str, Any]],
    source: str,
) -> None:
    """The records of a controller's call, delivered to the model: a read the model had
    planned is done; a record read is read for its facts and its own pointers (its
    handoff is the controller's)."""
    if fn is None or not records:
        return
    step = agent.todo[0] if agent.todo else None
    if step is not None and step[0] == fn.operation and step[1] == arg:
        agent.todo.pop(0)
    if fn.operation == "read":
        agent._read(records[0], source, follow=False)
