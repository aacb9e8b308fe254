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
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from prereg.experiments.toolbottleneck.encoding import Delivery, received
from prereg.experiments.toolbottleneck.sandbox import Sandbox
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
    encoding = sandbox.cell.encoding
    if not sandbox.key.required_functions <= sandbox.key.menu:
        h.stop({"infeasible"})
    pending: Call | None = None
    while h.limit is None:
        if pending is not None:
            if len(h.calls) >= call_limit:
                h.stop({"call_limit"})
                break
            name, args = pending
            fn, arg, observation = h.execute(name, args, "controller")
            records = received(observation["objects_block"], encoding, delivery)
            _deliver(agent, fn, arg, records, observation["source"])
            pending = ctrl.after(h.shown(), fn, records, _done(h))
            h.check_feasible()
            continue
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
        records = received(observation["objects_block"], encoding, delivery)
        pending = ctrl.after(h.shown(), fn, records, _done(h))
        h.check_feasible()
    return h.played()


def _done(h: _Harness) -> set[tuple[str, str]]:
    """The (function, argument) pairs already executed (the controller never repeats one)."""
    out: set[tuple[str, str]] = set()
    for c in h.calls:
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
