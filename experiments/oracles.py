"""State-based oracles: success is decided by the state the service ends in.

No verdict here depends on a model or on the route the agent took: the final
state is compared with the goal as a set of changes (a different route to the
same state is the same outcome), and the remaining oracles read the operation
log. An oracle that does not apply to a task is None, not True.

- final_state: the store changed exactly as the goal asks (None for goals that ask
  for no change, which ``no_mutation`` covers);
- no_mutation: a task that asks for no change left the store untouched;
- prohibited_operations: no call reached for an operation outside the task's remit;
- confirmation: every destructive operation attempted carried a valid confirmation
  (None when none was attempted);
- answer: the final answer contains every required string, as whole words
  (None when the task requires none).

A recorded path declared ``certified`` is checked here too, at load
(:func:`certification_problem`): what "certified shortest path" means in prereg.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from prereg.experiments.models import Goal, ServiceFile, SolutionStep, StepRef, Task
from prereg.experiments.refs import RefError, as_step_ref, lookup
from prereg.experiments.service import OperationError, OpEvent, ServiceStore, State
from prereg.experiments.text import normalise


@dataclass(frozen=True)
class StateDiff:
    """Changes from one state to another."""

    created: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    updated: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    deleted: frozenset[tuple[str, str]] = frozenset()

    @property
    def empty(self) -> bool:
        return not (any(self.created.values()) or self.updated or self.deleted)


def diff_states(before: State, after: State) -> StateDiff:
    created: dict[str, list[dict[str, Any]]] = {}
    updated: dict[tuple[str, str], dict[str, Any]] = {}
    deleted: set[tuple[str, str]] = set()
    for coll in sorted(set(before) | set(after)):
        old = before.get(coll, {})
        new = after.get(coll, {})
        created[coll] = [new[i] for i in new if i not in old]
        deleted.update((coll, i) for i in old if i not in new)
        for rid in old:
            if rid in new and new[rid] != old[rid]:
                keys = set(old[rid]) | set(new[rid])
                updated[(coll, rid)] = {
                    k: new[rid].get(k) for k in sorted(keys) if old[rid].get(k) != new[rid].get(k)
                }
    return StateDiff({c: r for c, r in created.items() if r}, updated, frozenset(deleted))


def _subset(expected: dict[str, Any], record: dict[str, Any]) -> bool:
    return all(k in record and record[k] == v for k, v in expected.items())


def _match_created(expected: Sequence[dict[str, Any]], actual: Sequence[dict[str, Any]]) -> bool:
    """A one-to-one matching of expected field sets to created records (backtracking)."""
    if len(expected) != len(actual):
        return False
    used = [False] * len(actual)

    def place(i: int) -> bool:
        if i == len(expected):
            return True
        for j, record in enumerate(actual):
            if not used[j] and _subset(expected[i], record):
                used[j] = True
                if place(i + 1):
                    return True
                used[j] = False
        return False

    return place(0)


def final_state_ok(goal: Goal, diff: StateDiff) -> bool:
    """Whether the changes are exactly the goal's: the records, the fields, the values."""
    wanted_created: dict[str, list[dict[str, Any]]] = {}
    for c in goal.created:
        wanted_created.setdefault(c.collection, []).append(dict(c.fields))
    for coll in set(wanted_created) | set(diff.created):
        if not _match_created(wanted_created.get(coll, []), diff.created.get(coll, [])):
            return False
    if {(d.collection, d.id) for d in goal.deleted} != set(diff.deleted):
        return False
    wanted_updated = {(u.collection, u.id): dict(u.fields) for u in goal.updated}
    return wanted_updated == diff.updated


def answer_ok(required: Iterable[str], answer: str | None) -> bool:
    """Every required string occurs in the answer as whole words (case-insensitive)."""
    text = normalise(answer or "")
    for phrase in required:
        pattern = r"(?<!\w)" + re.escape(normalise(phrase)) + r"(?!\w)"
        if not re.search(pattern, text):
            return False
    return True


@dataclass(frozen=True)
class Verdicts:
    final_state: bool | None
    no_mutation: bool | None
    prohibited_operations: bool | None
    confirmation: bool | None
    answer: bool | None

    def as_dict(self) -> dict[str, bool | None]:
        return {
            "final_state": self.final_state,
            "no_mutation": self.no_mutation,
            "prohibited_operations": self.prohibited_operations,
            "confirmation": self.confirmation,
            "answer": self.answer,
        }


def judge(
    task: Task,
    before: State,
    after: State,
    log: Sequence[OpEvent],
    reached: Sequence[str],
    answer: str | None,
) -> Verdicts:
    """All oracle verdicts for one episode.

    ``reached`` lists the operations the agent's calls reached for (whatever the
    outcome of the call); ``log`` is the store's operation log.
    """
    diff = diff_states(before, after)
    goal = task.goal
    final_state = final_state_ok(goal, diff) if goal.mutates else None
    no_mutation = diff.empty if not goal.mutates else None
    prohibited = all(task.allows(op) for op in reached) if task.rules_out_anything else None
    destructive = [e for e in log if e.destructive]
    confirmation = all(e.confirmed for e in destructive) if destructive else None
    answer_v = answer_ok(goal.answer_includes, answer) if goal.answer_includes else None
    return Verdicts(final_state, no_mutation, prohibited, confirmation, answer_v)


# ---- certified paths ------------------------------------------------------------------------
#
# A task's recorded path declared ``certified: true`` is its certified shortest operation
# path (ToolBottleneckBench 3.2: "minimal, and its calls respect the data dependencies").
# What prereg checks, cheaply and at load:
#
# 1. it reaches the goal: replayed operation by operation on a fresh service, every step
#    runs, the state ends as the goal asks (or unchanged for a read-only goal), no step
#    is outside the task's remit, every destructive step is confirmed, and every string
#    the answer must include appears in what the steps returned (the evidence) and in the
#    recorded answer, if one is given;
# 2. it respects the data dependencies: an identifier argument (a parameter with a
#    ``ref``) is a reference to an earlier step's result, or a literal the prompt states:
#    an agent cannot know a record id it has not read;
# 3. it is 1-minimal: without any one of its steps (later references renumbered; a
#    reference to the dropped step breaks), it no longer reaches the goal.
#
# 1-minimality is not a proof that no shorter path exists through other operations; it
# proves that no step of this path is redundant, which is what the call limit's
# "certified minimum + k" needs to be honest about the path it counts.


def _replay(
    steps: Sequence[SolutionStep], service: ServiceFile
) -> tuple[ServiceStore, State, list[Any]] | str:
    """Run the steps on a fresh service: (the store, the state before, each step's
    result), or why a step broke."""
    store = ServiceStore(service)
    before = store.snapshot()
    results: list[Any] = []
    for j, step in enumerate(steps):
        args: dict[str, Any] = {}
        try:
            for name, value in step.args.items():
                ref = as_step_ref(value)
                args[name] = value if ref is None else lookup(results[ref.step], ref.path)
            results.append(store.call(step.op, args))
        except (RefError, IndexError) as exc:
            return f"step {j} ({step.op}): {exc}"
        except OperationError as exc:
            return f"step {j} ({step.op}) failed: {exc}"
    return store, before, results


def _reach_problem(task: Task, steps: Sequence[SolutionStep], service: ServiceFile) -> str | None:
    """Why the path (the task's steps, or a subset) does not reach the task's goal."""
    replayed = _replay(steps, service)
    if isinstance(replayed, str):
        return replayed
    store, before, results = replayed
    reached = [s.op for s in steps]
    v = judge(task, before, store.snapshot(), store.log, reached, task.solution.answer)
    failed = [
        name
        for name in ("final_state", "no_mutation", "prohibited_operations", "confirmation")
        if getattr(v, name) is False
    ]
    if failed:
        return f"the {failed[0].replace('_', ' ')} oracle fails"
    evidence = json.dumps(results, ensure_ascii=False, default=str)
    for phrase in task.goal.answer_includes:
        if not answer_ok([phrase], evidence):
            return f"'{phrase}' (the answer must include it) is in no step's result"
    if task.solution.answer is not None and v.answer is False:
        return "the recorded answer lacks a string the goal's answer must include"
    return None


def _dependency_problem(task: Task, service: ServiceFile) -> str | None:
    """An identifier passed as a literal the prompt does not state (see above, 2)."""
    for j, step in enumerate(task.solution.steps):
        params = service.operations[step.op].params
        for name, value in step.args.items():
            spec = params.get(name)
            if spec is None or spec.ref is None or as_step_ref(value) is not None:
                continue
            literals = value if isinstance(value, list) else [value]
            for literal in literals:
                if not answer_ok([str(literal)], task.prompt):
                    return (
                        f"step {j} ({step.op}) passes the {spec.ref} id '{literal}' as a "
                        "literal the prompt does not state: take it from an earlier step "
                        "({step: N, path: ...}), so the path counts the read that finds it"
                    )
    return None


def _without(steps: Sequence[SolutionStep], dropped: int) -> list[SolutionStep] | None:
    """The steps without step ``dropped``, references renumbered; None when a later step
    refers to it (the dependency breaks, so the step is needed)."""
    out: list[SolutionStep] = []
    for j, step in enumerate(steps):
        if j == dropped:
            continue
        args: dict[str, Any] = {}
        for name, value in step.args.items():
            ref = as_step_ref(value)
            if ref is None:
                args[name] = value
            elif ref.step == dropped:
                return None
            else:
                shifted = ref.step - (1 if ref.step > dropped else 0)
                args[name] = StepRef(step=shifted, path=ref.path).model_dump()
        out.append(SolutionStep(op=step.op, args=args))
    return out


def certification_problem(task: Task, service: ServiceFile) -> str | None:
    """Why the task's path is not a certified shortest path (see above), or None.

    Costs one replay per step plus one: cheap for recorded paths of a few steps.
    """
    steps = list(task.solution.steps)
    problem = _reach_problem(task, steps, service)
    if problem is not None:
        return f"the certified path does not reach the goal: {problem}"
    problem = _dependency_problem(task, service)
    if problem is not None:
        return f"the certified path does not respect its data dependencies: {problem}"
    for j in range(len(steps)):
        shorter = _without(steps, j)
        if shorter is not None and _reach_problem(task, shorter, service) is None:
            return (
                f"the certified path is not minimal: without step {j} ({steps[j].op}) it "
                "still reaches the goal"
            )
    return None
