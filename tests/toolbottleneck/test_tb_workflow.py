"""Certified workflows: minimal (checked by brute-force enumeration of every shorter
program) and dependency-respecting (checked by an independent walk of the results);
the seed's certified lengths (2, 4, 6 reads plus an action; frontier minima 2, 6, 14, 30)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prereg.experiments.toolbottleneck.compile import compile_family
from prereg.experiments.toolbottleneck.workflow import (
    Workflow,
    build_workflow,
    certify,
    dependency_problem,
    passes,
)
from prereg.experiments.toolbottleneck.world import Call, World, execute
from tests.toolbottleneck.helpers import family, family_doc


def _strings(value: Any) -> Iterator[str]:
    """Every string anywhere in a JSON-like value (independent of the module's helper)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _programs_shorter_than(world: World, n: int) -> Iterator[list[Call]]:
    """Every program of fewer than ``n`` operational calls whose arguments were all
    revealed before the call (brute force, depth first)."""
    functions = sorted(f.name for f in world.functions.values() if f.operational)

    def extend(
        prefix: list[Call], known: frozenset[str], changes: dict[Any, Any]
    ) -> Iterator[list[Call]]:
        yield prefix
        if len(prefix) + 1 >= n:
            return
        for name in functions:
            for arg in sorted(known):
                out, after = execute(world.functions[name], arg, world, changes)
                seen = set(_strings([r.value() for r in out]))
                yield from extend([*prefix, Call(name, arg)], known | seen, after)

    yield from extend([], world.request_literals, {})


def _assert_minimal_by_enumeration(wf: Workflow) -> int:
    count = 0
    for program in _programs_shorter_than(wf.world, len(wf.program)):
        count += 1
        assert not passes(wf.world, wf.goal, program), program
    return count


def _assert_respects_dependencies(wf: Workflow) -> None:
    known = set(wf.world.request_literals)
    changes: dict[Any, Any] = {}
    for call in wf.program:
        assert call.arg in known, f"{call} uses a value nothing revealed before it"
        out, changes = execute(wf.world.functions[call.function], call.arg, wf.world, changes)
        known |= set(_strings([r.value() for r in out]))


@pytest.mark.parametrize(
    ("level", "action", "expected"),
    [
        ("low", True, 3),
        ("low", False, 2),
        ("medium", False, 4),
        ("medium", True, 5),
        ("high", False, 6),
    ],
)
def test_certified_programs_are_minimal_by_brute_force(
    level: str, action: bool, expected: int
) -> None:
    fam = family(family_doc(action=action))
    wf = build_workflow(fam, 0, fam.layouts.of(level), 0, level)  # type: ignore[arg-type]
    assert certify(wf.world, wf.goal, wf.program) == expected == len(wf.program)
    assert passes(wf.world, wf.goal, wf.program)
    _assert_respects_dependencies(wf)
    if expected <= 5:  # enumeration of every shorter program stays small up to here
        assert _assert_minimal_by_enumeration(wf) > 1


def test_frontier_minima_are_the_seeds() -> None:
    # seed 3.2: 0, 2, 6, 14 public handoffs give certified minima of 2, 6, 14, 30 calls
    fam = family(family_doc(action=False, small=False))
    minima = []
    for h in (0, 2, 6, 14):
        wf = build_workflow(fam, 0, fam.layouts.low, h, f"f{h}")
        minima.append(certify(wf.world, wf.goal, wf.program))
        _assert_respects_dependencies(wf)
    assert minima == [2, 6, 14, 30]
    wf = build_workflow(fam, 0, fam.layouts.low, 1, "f1")
    assert certify(wf.world, wf.goal, wf.program) == 4
    _assert_minimal_by_enumeration(wf)  # one handoff: every program of up to 3 calls fails


def test_every_handoff_only_points_to_the_next_record() -> None:
    fam = family(family_doc(action=False))
    wf = build_workflow(fam, 0, fam.layouts.low, 3, "f3")
    hops = [r for r in wf.world.records if "next_handoff" in r.fields]
    assert len(hops) == 3
    for hop in hops:
        assert set(hop.fields) == {"next_handoff"}  # the seed's next_handoff object, only
        assert set(hop.fields["next_handoff"]) == {"connector", "query"}  # type: ignore[arg-type]
        assert not set(hop.fields) & set(fam.facts)


def test_the_checker_rejects_shuffled_and_padded_programs() -> None:
    fam = family(family_doc(action=True))
    wf = build_workflow(fam, 0, fam.layouts.medium, 0, "medium")
    swapped = [wf.program[1], wf.program[0], *wf.program[2:]]  # read before its search
    assert dependency_problem(wf.world, swapped) is not None
    assert not passes(wf.world, wf.goal, swapped)
    padded = [*wf.program, wf.program[1]]  # a repeated read: passes, but is not minimal
    assert passes(wf.world, wf.goal, padded)
    with pytest.raises(Exception, match="not minimal"):
        certify(wf.world, wf.goal, padded)


_FACTS = ["alpha", "beta", "gamma", "delta"]


@st.composite
def layouts(draw: st.DrawFn) -> tuple[dict[str, Any], bool]:
    facts = draw(st.lists(st.sampled_from(_FACTS), min_size=3, max_size=4, unique=True))
    action = draw(st.booleans())
    doc = family_doc(action=action)
    doc["facts"] = {
        name: {"value": draw(st.sampled_from(["x", "y", "2026-01-02"]))} for name in facts
    }
    out: dict[str, list[list[str]]] = {}
    for level, records in (("low", 1), ("medium", 2), ("high", 3)):
        order = draw(st.permutations(facts))
        cuts = sorted(
            draw(
                st.lists(
                    st.integers(1, len(facts) - 1),
                    min_size=records - 1,
                    max_size=records - 1,
                    unique=True,
                )
            )
        )
        bounds = [0, *cuts, len(facts)]
        out[level] = [list(order[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)]
    doc["layouts"] = out
    return doc, action


@settings(max_examples=12, deadline=None)
@given(layouts())
def test_any_layout_compiles_to_certified_workflows_of_the_seeds_lengths(
    case: tuple[dict[str, Any], bool],
) -> None:
    doc, action = case
    compiled = compile_family(family(doc))
    for variant in compiled.members("W"):
        workflow = variant.component("workflow")
        reads = {"low": 2, "medium": 4, "high": 6}[variant.cell.workflow]
        assert workflow["certified_minimum"] == reads + int(action)
        assert len(workflow["evidence"]["sources"]) == reads // 2  # sources grow 1 -> 3
    for variant in compiled.members("W-frontier"):
        assert (
            variant.component("workflow")["certified_minimum"] == 2 + 2 * variant.cell.handoffs
        )  # read-only frontier tasks (reading 4)
