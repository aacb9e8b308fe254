"""Certified workflows (seed 3.2, W) and the handoff frontier, with their checker.

A program is *certified* when the checker proves two things (seed 3.2):

- it respects the data dependencies: every argument it passes is in the request or was
  returned by an earlier call (an id comes from a search, a lookup key from a read);
- it is minimal: no shorter dependency-respecting program reaches the goal. The proof
  is an exhaustive breadth-first search over knowledge states (what is known, which
  records were read, what was changed). Calls only ever add knowledge, so two programs
  reaching the same state are interchangeable, and the first depth at which a goal
  state appears is the shortest length of any program.

The goal is the conjunction the grader checks on the tool side: every decision fact
was read with its value, every evidence source was read, and the records ended in
exactly the permitted final state.

Layout of a level: group ``i`` of ``layouts.<level>`` is a record of kind
``sources[i]``; record ``i`` carries the lookup key of record ``i+1`` (a dependency
chain: search, read, search with what was read, ...). The frontier puts ``h`` public
handoffs (records whose only content is a ``next_handoff`` object naming the connector
and the exact search query of the next record) in front of the low layout: a certified
minimum of ``2h`` more calls.

**Frontier tasks are read-only** (docs/toolbottleneck.md, reading 4). The seed certifies
the frontier at 2, 6, 14 and 30 calls at 0, 2, 6 and 14 handoffs: ``2 + 2h`` reads and no
action call, while its workflow levels add "one call when the task requires a reversible
action". So a frontier variant of a family with an action drops the action: the request
says the task is read-only (:data:`READ_ONLY_NOTE`), the permitted final state is the
seed records unchanged, and the reference program has no action call. The answer
(decision, facts, sources) is graded exactly as in every other variant.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from prereg.experiments.toolbottleneck.family import FactValue, FamilyFile, Route
from prereg.experiments.toolbottleneck.world import (
    HANDOFF_FIELD,
    Call,
    Changes,
    FieldValue,
    Function,
    Record,
    Returned,
    World,
    derive,
    execute,
    exposed_name,
    handoff,
    strings_in,
)

#: The breadth-first proof gives up beyond this many knowledge states (a family that
#: large is refused rather than searched for minutes).
MAX_STATES = 200_000


class NotCertified(Exception):
    """The checker cannot certify a program; the message says which property fails."""


@dataclass(frozen=True)
class Goal:
    """What a passing program achieves on the tool side."""

    facts: Mapping[str, FactValue]
    sources: frozenset[str]
    final_state: Mapping[tuple[str, str], FactValue]


@dataclass(frozen=True)
class Trace:
    """A program run: the result of each call and what it left behind."""

    results: tuple[tuple[Returned, ...], ...]
    changes: Mapping[tuple[str, str], FactValue]
    facts_read: Mapping[str, FactValue]
    records_read: frozenset[str]


@dataclass(frozen=True)
class Workflow:
    """A world, its reference program, the goal and the certified minimum."""

    world: World
    program: tuple[Call, ...]
    goal: Goal
    primary_id: str
    #: whether the task requires the family's action (False on the read-only frontier)
    acts: bool = False

    @property
    def certified_minimum(self) -> int:
        return len(self.program)


def dependency_problem(world: World, program: Sequence[Call]) -> str | None:
    """The first call that passes a value nothing before it revealed, or None."""
    known = set(world.request_literals)
    changes: Changes = {}
    for index, call in enumerate(program):
        fn = world.functions.get(call.function)
        if fn is None:
            return f"call {index + 1} names an unknown function '{call.function}'"
        if call.arg not in known:
            return f"call {index + 1} passes '{call.arg}', which no earlier call returned"
        results, changes = execute(fn, call.arg, world, changes)
        known |= strings_in(results)
    return None


def run(world: World, program: Sequence[Call], fact_names: frozenset[str]) -> Trace:
    changes: Changes = {}
    results: list[tuple[Returned, ...]] = []
    facts: dict[str, FactValue] = {}
    read: set[str] = set()
    for call in program:
        fn = world.functions[call.function]
        out, changes = execute(fn, call.arg, world, changes)
        results.append(tuple(out))
        if fn.operation == "read":
            for item in out:
                read.add(item.id)
                facts.update(_facts_in(item, fact_names))
    return Trace(tuple(results), dict(changes), facts, frozenset(read))


def _facts_in(item: Returned, names: Collection[str]) -> dict[str, FactValue]:
    """The decision facts a read returned (a handoff object is never a fact)."""
    return {k: v for k, v in item.fields.items() if k in names and not isinstance(v, Mapping)}


def reaches(goal: Goal, trace: Trace) -> bool:
    facts_ok = all(
        name in trace.facts_read and _same(trace.facts_read[name], value)
        for name, value in goal.facts.items()
    )
    return facts_ok and goal.sources <= trace.records_read and trace.changes == goal.final_state


def _same(a: FactValue, b: FactValue) -> bool:
    return type(a) is type(b) and a == b


def passes(world: World, goal: Goal, program: Sequence[Call]) -> bool:
    """Whether a program respects dependencies and reaches the goal (the checker's verdict)."""
    if dependency_problem(world, program) is not None:
        return False
    return reaches(goal, run(world, program, frozenset(goal.facts)))


#: (known strings, records read, facts read, changes made): all a later call can depend on.
_State = tuple[
    frozenset[str],
    frozenset[str],
    frozenset[tuple[str, FactValue]],
    frozenset[tuple[str, str, FactValue]],
]


def _expand(world: World, goal: Goal, state: _State, usable: Sequence[Function]) -> list[_State]:
    known, read, facts, changes_items = state
    changes = {(rid, name): value for rid, name, value in changes_items}
    nexts: list[_State] = []
    for fn in usable:
        for arg in sorted(known):
            out, after = execute(fn, arg, world, changes)
            if not out and after == changes:
                continue  # the call found nothing and changed nothing: the same state
            new_read, new_facts = set(read), set(facts)
            if fn.operation == "read":
                for item in out:
                    new_read.add(item.id)
                    new_facts.update(_facts_in(item, goal.facts).items())
            nexts.append(
                (
                    known | strings_in(out),
                    frozenset(new_read),
                    frozenset(new_facts),
                    frozenset((rid, name, value) for (rid, name), value in after.items()),
                )
            )
    return nexts


def _is_goal(goal: Goal, state: _State) -> bool:
    _, read, facts, changes_items = state
    trace = Trace((), {(rid, name): v for rid, name, v in changes_items}, dict(facts), read)
    return reaches(goal, trace)


def shortest_length(world: World, goal: Goal, limit: int) -> int | None:
    """Length of the shortest dependency-respecting program reaching the goal (None: none
    within ``limit`` calls). Exhaustive breadth-first search over knowledge states."""
    usable = [fn for fn in world.functions.values() if fn.operational]
    start: _State = (world.request_literals, frozenset(), frozenset(), frozenset())
    frontier, seen = [start], {start}
    for depth in range(limit + 1):
        if any(_is_goal(goal, s) for s in frontier):
            return depth
        following: list[_State] = []
        for state in frontier:
            for nxt in _expand(world, goal, state, usable):
                if nxt not in seen:
                    seen.add(nxt)
                    following.append(nxt)
        if len(seen) > MAX_STATES:
            raise NotCertified(f"the proof needs more than {MAX_STATES} knowledge states")
        frontier = following
    return None


def certify(world: World, goal: Goal, program: Sequence[Call]) -> int:
    """The certified minimum, or NotCertified naming the property that fails."""
    problem = dependency_problem(world, program)
    if problem is not None:
        raise NotCertified(f"not dependency-respecting: {problem}")
    for call in program:
        if not world.functions[call.function].operational:
            raise NotCertified(f"calls '{call.function}', which is not an operational tool")
    if not reaches(goal, run(world, program, frozenset(goal.facts))):
        raise NotCertified("the program does not reach the goal")
    best = shortest_length(world, goal, len(program))
    if best is not None and best < len(program):
        raise NotCertified(f"not minimal: {best} calls suffice, the program makes {len(program)}")
    return len(program)


# ---- building the reference worlds ----------------------------------------------------------


def operational_functions(family: FamilyFile) -> dict[str, Function]:
    """The family's operational tools as exposed functions on the family's route."""
    out: dict[str, Function] = {}
    for tool in family.tools:
        sets = None
        if tool.operation == "act" and family.action is not None:
            sets = (family.action.field, family.action.value)
        fn = Function(
            name=exposed_name(tool.name, family.route),
            base=tool.name,
            operation=tool.operation,
            kind=tool.kind,
            connector=tool.connector,
            route=family.route,
            summary=tool.description,
            operational=True,
            sets=sets,
        )
        out[fn.name] = fn
    return out


def lookup_key(family: FamilyFile, seed: int, kind: str, tag: str) -> str:
    return f"{kind[:3].upper()}-{derive('ref', family.id, seed, tag).upper()[:10]}"


def record_id(family: FamilyFile, seed: int, tag: str) -> str:
    return "rec_" + derive("record", family.id, seed, tag)[:16]


def primary_ref(family: FamilyFile, seed: int) -> str:
    """The lookup key the request names; the same in every variant of the family."""
    return lookup_key(family, seed, family.sources[0], "request")


#: What a read-only frontier variant of a family with an action adds to its request.
READ_ONLY_NOTE = (
    "This task is read-only: answer with the decision and the facts, and change no "
    "record (do not carry out the action the request mentions)."
)


def acts(family: FamilyFile, read_only: bool) -> bool:
    """Whether a variant's task requires the family's action (never on the frontier)."""
    return family.action is not None and not read_only


def task_request(family: FamilyFile, seed: int, *, read_only: bool = False) -> str:
    """The rendered request of a variant: the family's, plus :data:`READ_ONLY_NOTE` when
    a family with an action is played read-only (the frontier, reading 4). The request is
    the same in every variant of a matched set."""
    text = family.request.replace("{ref}", primary_ref(family, seed)).replace(
        "{route}", family.route.text
    )
    if read_only and family.action is not None:
        text = f"{text} {READ_ONLY_NOTE}"
    return text


@dataclass(frozen=True)
class _Link:
    kind: str
    ref: str
    rid: str


def build_workflow(
    family: FamilyFile,
    seed: int,
    groups: Sequence[Sequence[str]],
    handoffs: int,
    tag: str,
    *,
    read_only: bool = False,
) -> Workflow:
    """The world and reference program for one layout behind ``handoffs`` handoffs.

    ``read_only`` (the frontier block) drops the family's action from the task: no
    action call, the seed records unchanged. The records and the tools stay as they are
    (the primary record keeps the action's field at ``before``; the action tool stays
    on the menu, and calling it leaves the permitted final state)."""
    route, kinds = family.route, family.sources
    primary = record_id(family, seed, "primary")
    request_ref = primary_ref(family, seed)  # the request names it: the first record's key
    hops = [
        _Link(
            kinds[j % len(kinds)],
            request_ref
            if j == 0
            else lookup_key(family, seed, kinds[j % len(kinds)], f"{tag}:h{j}"),
            record_id(family, seed, f"{tag}:h{j}"),
        )
        for j in range(handoffs)
    ]
    links = [
        _Link(
            kinds[i],
            request_ref
            if i == 0 and not hops
            else lookup_key(family, seed, kinds[i], f"{tag}:{i}"),
            primary if i == 0 else record_id(family, seed, f"{tag}:{i}"),
        )
        for i in range(len(groups))
    ]
    records = _hop_records(family, route, hops, links[0]) + _chain_records(
        family, route, groups, links
    )
    functions = operational_functions(family)
    program = [call for x in [*hops, *links] for call in _search_read(family, x, route)]
    final_state: dict[tuple[str, str], FactValue] = {}
    if family.action is not None and acts(family, read_only):
        program.append(Call(exposed_name(family.action.tool, route), primary))
        final_state[(primary, family.action.field)] = family.action.value
    goal = Goal(
        facts={name: family.facts[name].value for group in groups for name in group},
        sources=frozenset(links[i].rid for i, g in enumerate(groups) if g),
        final_state=final_state,
    )
    world = World(tuple(records), functions, frozenset({request_ref}))
    return Workflow(world, tuple(program), goal, primary, bool(final_state))


def _search_read(family: FamilyFile, link: _Link, route: Route) -> list[Call]:
    search = family.tool_for(link.kind, "search").name
    read = family.tool_for(link.kind, "read").name
    return [Call(exposed_name(search, route), link.ref), Call(exposed_name(read, route), link.rid)]


def _hop_records(
    family: FamilyFile, route: Route, hops: Sequence[_Link], first: _Link
) -> list[Record]:
    out = []
    for j, hop in enumerate(hops):
        nxt = hops[j + 1] if j + 1 < len(hops) else first
        connector = family.tool_for(nxt.kind, "search").connector
        fields: dict[str, FieldValue] = {HANDOFF_FIELD: handoff(connector, nxt.ref)}
        out.append(Record(hop.rid, hop.kind, route, hop.ref, fields))
    return out


def _chain_records(
    family: FamilyFile, route: Route, groups: Sequence[Sequence[str]], links: Sequence[_Link]
) -> list[Record]:
    out = []
    for i, group in enumerate(groups):
        fields: dict[str, FieldValue] = {name: family.facts[name].value for name in group}
        if i == 0 and family.action is not None:
            fields[family.action.field] = family.action.before
        if i + 1 < len(groups):
            fields[f"{links[i + 1].kind.replace('-', '_')}_ref"] = links[i + 1].ref
        out.append(Record(links[i].rid, links[i].kind, route, links[i].ref, fields))
    return out
