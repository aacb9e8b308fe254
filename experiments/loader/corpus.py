"""The corpus: each task checked against the service (identity, remit, recorded solution,
goal, certification), and the tasks' clusters assigned to splits.

The splits are assigned here because they partition the corpus's clusters; the seeded
assignment itself is :mod:`prereg.experiments.splits`'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from prereg.experiments.loader.files import Doc, Loc
from prereg.experiments.models import (
    CollectionSpec,
    CorpusFile,
    Created,
    Deleted,
    ExperimentFile,
    OperationSpec,
    ServiceFile,
    Task,
    Updated,
)
from prereg.experiments.oracles import certification_problem
from prereg.experiments.refs import as_step_ref
from prereg.experiments.splits import assign_by_fractions
from prereg.experiments.text import normalise


def _check_corpus(corpus: CorpusFile, doc: Doc, service: ServiceFile) -> list[Task]:
    ops = service.operations
    colls = service.collections
    seen: dict[str, int] = {}
    cluster_key: dict[str, tuple[str, str, int]] = {}
    tasks: list[Task] = []
    for index, task in enumerate(corpus.tasks):
        loc: Loc = ("tasks", index)
        _check_task_identity(loc, index, task, corpus, seen, cluster_key, doc)
        task = _check_task_remit(loc, task, ops, doc)
        _check_solution(loc, task, ops, doc)
        _check_goal(loc, task, colls, doc)
        if task.solution.certified:
            problem = certification_problem(task, service)
            if problem is not None:
                raise doc.fail((*loc, "solution", "certified"), problem)
        tasks.append(task)
    return tasks


def _check_task_identity(
    loc: Loc,
    index: int,
    task: Task,
    corpus: CorpusFile,
    seen: dict[str, int],
    cluster_key: dict[str, tuple[str, str, int]],
    doc: Doc,
) -> None:
    """A new task id, a known intent, and one intent and polarity per cluster."""
    if task.id in seen:
        raise doc.fail(
            (*loc, "id"), f"duplicate task id '{task.id}' (first at tasks[{seen[task.id]}])"
        )
    seen[task.id] = index
    if task.intent not in corpus.intents:
        raise doc.fail(
            (*loc, "intent"),
            f"unknown intent '{task.intent}' (intents: {', '.join(corpus.intents)})",
        )
    key = (task.intent, task.polarity, index)
    first = cluster_key.setdefault(task.cluster, key)
    if first[:2] != key[:2]:
        raise doc.fail(
            (*loc, "cluster"),
            f"cluster '{task.cluster}' mixes intent/polarity "
            f"{first[0]}/{first[1]} (tasks[{first[2]}]) and {key[0]}/{key[1]}: "
            "paraphrases share an intent and a polarity",
        )


def _check_task_remit(loc: Loc, task: Task, ops: Mapping[str, OperationSpec], doc: Doc) -> Task:
    """Permitted and prohibited operations; a negative task comes back permitting none."""
    for fname in ("permits", "prohibits"):
        for j, op in enumerate(getattr(task, fname) or []):
            if op not in ops:
                raise doc.fail((*loc, fname, j), f"unknown operation '{op}'")
    both = set(task.permits or []) & set(task.prohibits)
    if both:
        raise doc.fail((*loc, "prohibits"), f"'{sorted(both)[0]}' is both permitted and prohibited")
    if task.polarity != "negative":
        return task
    if task.permits:
        raise doc.fail(
            (*loc, "permits"),
            "a negative task permits no operation (the right behaviour uses no tool)",
        )
    if task.solution.steps or task.goal.mutates:
        raise doc.fail(
            (*loc, "solution"), "a negative task has no solution steps and no state change"
        )
    return task.model_copy(update={"permits": []})


def _check_solution(loc: Loc, task: Task, ops: Mapping[str, OperationSpec], doc: Doc) -> None:
    """The recorded path: permitted operations, their params, references to earlier steps."""
    for j, step in enumerate(task.solution.steps):
        sloc = (*loc, "solution", "steps", j)
        if step.op not in ops:
            raise doc.fail((*sloc, "op"), f"unknown operation '{step.op}'")
        if not task.allows(step.op):
            raise doc.fail(
                (*sloc, "op"),
                f"the recorded path uses '{step.op}', which the task does not permit",
            )
        for pname, value in step.args.items():
            _check_step_arg((*sloc, "args", pname), j, step.op, pname, value, ops, doc)


def _check_step_arg(
    aloc: Loc,
    j: int,
    op: str,
    pname: str,
    value: Any,
    ops: Mapping[str, OperationSpec],
    doc: Doc,
) -> None:
    if pname not in ops[op].params:
        raise doc.fail(aloc, f"'{pname}' is not a parameter of '{op}'")
    try:
        ref = as_step_ref(value)
    except ValueError:
        raise doc.fail(aloc, "a reference is {step: N, path: a.b.0}") from None
    if ref is not None and ref.step >= j:
        raise doc.fail(aloc, f"step {ref.step} does not run before step {j}")


def _check_goal(loc: Loc, task: Task, colls: Mapping[str, CollectionSpec], doc: Doc) -> None:
    """The goal's changes name seed records and fields; its answer strings check something."""
    goal = task.goal
    for gname in ("created", "updated", "deleted"):
        for j, change in enumerate(getattr(goal, gname)):
            _check_change((*loc, "goal", gname, j), change, colls, doc)
    prompt = normalise(task.prompt)
    for j, text in enumerate(goal.answer_includes):
        if normalise(text) in prompt:
            raise doc.fail(
                (*loc, "goal", "answer_includes", j),
                f"'{text}' already appears in the prompt, so it checks nothing",
            )


def _check_change(
    gloc: Loc, change: Created | Updated | Deleted, colls: Mapping[str, CollectionSpec], doc: Doc
) -> None:
    """One change of the goal: a known collection, a seed record (but for created), fields."""
    if change.collection not in colls:
        raise doc.fail((*gloc, "collection"), f"unknown collection '{change.collection}'")
    coll = colls[change.collection]
    if not isinstance(change, Created):
        if change.id not in _seed_ids(coll):
            raise doc.fail((*gloc, "id"), f"no seed record '{change.id}' in '{change.collection}'")
    for fname in getattr(change, "fields", {}) or {}:
        if fname not in coll.fields:
            raise doc.fail((*gloc, "fields", fname), f"unknown field '{fname}'")


#: Seed record ids per collection spec (by identity), so a corpus of n tasks checks its
#: goals in O(n), not O(n * records) (issue 40).
_SEED_IDS: dict[int, tuple[CollectionSpec, frozenset[Any]]] = {}


def _seed_ids(coll: CollectionSpec) -> frozenset[Any]:
    cached = _SEED_IDS.get(id(coll))
    if cached is None or cached[0] is not coll:
        if len(_SEED_IDS) >= 256:
            _SEED_IDS.clear()
        cached = (coll, frozenset(r["id"] for r in coll.records))
        _SEED_IDS[id(coll)] = cached
    return cached[1]


def _assign_splits(spec: ExperimentFile, entry: Doc, tasks: Sequence[Task]) -> dict[str, str]:
    clusters = [(t.cluster, t.intent) for t in tasks]
    names = {c for c, _ in clusters}
    if spec.splits.fractions is not None:
        # a Mapping is invariant in its keys: copy the SplitName-keyed dict as str-keyed
        fractions: dict[str, float] = dict(spec.splits.fractions.items())
        return assign_by_fractions(clusters, spec.splits.seed, fractions)
    assert spec.splits.assign is not None
    out: dict[str, str] = {}
    for split, listed in spec.splits.assign.items():
        for j, cluster in enumerate(listed):
            loc = ("splits", "assign", split, j)
            if cluster not in names:
                raise entry.fail(loc, f"unknown cluster '{cluster}'")
            if cluster in out:
                raise entry.fail(
                    loc,
                    f"cluster '{cluster}' is already in split "
                    f"'{out[cluster]}': a cluster goes to one split",
                )
            out[cluster] = split
    missing = sorted(names - set(out))
    if missing:
        raise entry.fail(
            ("splits", "assign"), f"clusters not assigned to any split: {', '.join(missing[:5])}"
        )
    return out


def _check_eligible(
    corpus: CorpusFile, doc: Doc, pool: Sequence[tuple[str, str]], focal: Sequence[str]
) -> dict[str, frozenset[str]]:
    """The corpus's per-intent eligible sets (``eligible``), checked against the intents
    and the pool: ``pool`` is (member id, role), ``focal`` the experiment's surfaces.

    Every id must be a competitor of the pool: a decoy is never eligible, and the focal
    integration (an experiment surface) is eligible for every intent of its corpus, so
    it is not listed. An intent not given keeps the default (every competitor).
    """
    if corpus.eligible is None:
        return {}
    roles = dict(pool)
    competitors = [m for m, role in pool if role == "competitor"]
    out: dict[str, frozenset[str]] = {}
    for intent, members in corpus.eligible.items():
        if intent not in corpus.intents:
            raise doc.fail(
                ("eligible", intent),
                f"unknown intent '{intent}' (intents: {', '.join(corpus.intents)})",
            )
        seen: set[str] = set()
        for j, member in enumerate(members):
            loc = ("eligible", intent, j)
            if member in seen:
                raise doc.fail(loc, f"'{member}' is listed twice")
            seen.add(member)
            if roles.get(member) == "competitor":
                continue
            if roles.get(member) == "decoy":
                why = "a decoy of the pool, never eligible"
            elif member in focal:
                why = (
                    "a surface of the focal integration, which is eligible for every intent "
                    "of its corpus (list competitors only)"
                )
            else:
                why = "not an integration of the pool"
            known = ", ".join(competitors) if competitors else "none: the experiment has no pool"
            raise doc.fail(loc, f"'{member}' is {why} (competitors: {known})")
        out[intent] = frozenset(members)
    return out
