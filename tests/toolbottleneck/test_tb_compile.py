"""The compiler: matched variants differ only in their pressure, digests are deterministic,
the bundled families compile, and bad families are refused (exit 2) naming family and field."""

from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prereg.core.errors import BadInput
from prereg.experiments.toolbottleneck.compile import (
    COMPONENTS,
    VARYING,
    Cell,
    Variant,
    compile_cell,
    compile_family,
    digest,
    matched_problem,
)
from prereg.experiments.toolbottleneck.family import FamilyError, load_family
from tests.toolbottleneck.helpers import BUNDLED, family, family_doc

PRESSURE_COMPONENT = {"R": {"catalog", "menu"}, "V": {"menu"}, "W": {"workflow"}, "D": {"encoding"}}


def _assert_pairs_differ_only_in_their_pressure(compiled: Any) -> None:
    for set_name, members in compiled.sets.items():
        variants = [compiled.variant(i) for i in members]
        assert len(variants) >= 2
        allowed = PRESSURE_COMPONENT[set_name.split("-")[0]]
        for a, b in itertools.combinations(variants, 2):
            moved = {c for c in COMPONENTS if a.component(c) != b.component(c)}
            assert moved, f"{a.id} and {b.id} are the same variant"
            assert moved <= allowed, (a.id, b.id, moved)
    # facts, decision, operational tools and the answer's form are the same in every variant
    # of the family; the request and the permitted final state in every variant of a block,
    # the frontier being read-only (reading 4: no change, the request says so)
    cores = [v.component("core") for v in compiled.variants]
    for key in ("facts", "decision", "operational_tools"):
        assert all(core[key] == cores[0][key] for core in cores), key
    for frontier in (False, True):
        block = [
            v.component("core")
            for v in compiled.variants
            if (v.cell.block == "frontier") == frontier
        ]
        for key in ("permitted_final_state", "request"):
            assert all(core[key] == block[0][key] for core in block), key
        if frontier:
            assert block[0]["permitted_final_state"] == []


def test_every_matched_pair_differs_only_in_its_pressure() -> None:
    fam = family(family_doc())
    compiled = compile_family(fam)
    assert set(compiled.sets) == {"R", "V", "W", "D", "W-frontier"}
    _assert_pairs_differ_only_in_their_pressure(compiled)
    core = compiled.variants[0].component("core")
    assert core["facts"] == {n: {"value": f.value, "type": f.type} for n, f in fam.facts.items()}
    assert core["decision"] == "escalate"
    assert [(c["field"], c["before"], c["value"]) for c in core["permitted_final_state"]] == [
        ("escalation", "none", "requested")
    ]


@settings(max_examples=6, deadline=None)
@given(st.booleans(), st.integers(0, 2**31), st.permutations(["status", "due", "contact"]))
def test_pairs_differ_only_in_their_pressure_for_any_seed_and_layout(
    action: bool, seed: int, order: list[str]
) -> None:
    doc = family_doc(action=action)
    doc["layouts"]["medium"] = [order[:1], order[1:]]
    doc["layouts"]["high"] = [[name] for name in order]
    _assert_pairs_differ_only_in_their_pressure(compile_family(family(doc), seed=seed))


def test_matched_problem_catches_a_pair_that_moves_two_components() -> None:
    compiled = compile_family(family(family_doc()))
    low, medium, _ = compiled.members("W")
    assert matched_problem([low, medium], "W") is None
    doctored = copy.deepcopy(dict(medium.document))
    doctored["components"]["menu"]["functions"] = doctored["components"]["menu"]["functions"][1:]
    doctored["component_digests"]["menu"] = digest(doctored["components"]["menu"])
    problem = matched_problem([low, Variant(medium.id, medium.cell, doctored)], "W")
    assert problem is not None and "menu" in problem and "more than the W pressure" in problem
    assert set(VARYING) == {"R", "V", "W", "D", "W-frontier"}


def test_same_family_and_seed_give_the_same_digests_and_another_seed_other_ids() -> None:
    fam = family(family_doc())
    a, b = compile_family(fam, seed=7), compile_family(family(family_doc()), seed=7)
    assert [v.digest for v in a.variants] == [v.digest for v in b.variants]
    assert a.document() == b.document()
    c = compile_family(fam, seed=8)
    assert {v.digest for v in a.variants}.isdisjoint(v.digest for v in c.variants)
    ids_a = {r["id"] for v in a.variants for r in v.component("workflow")["records"]}
    ids_c = {r["id"] for v in c.variants for r in v.component("workflow")["records"]}
    assert ids_a.isdisjoint(ids_c)  # opaque ids: nothing carries over between seeds
    assert a.variants[0].component("core")["facts"] == c.variants[0].component("core")["facts"]


def test_the_digest_is_over_the_content() -> None:
    compiled = compile_family(family(family_doc()))
    for v in compiled.variants:
        for name in COMPONENTS:
            assert v.document["component_digests"][name] == digest(v.component(name))


def test_every_bundled_family_compiles_with_the_seeds_sizes() -> None:
    paths = sorted(BUNDLED.glob("*.yaml"))
    assert len(paths) >= 4
    domains = set()
    for path in paths:
        fam = load_family(path)
        domains.add(fam.domain)
        compiled = compile_family(fam, filename=str(path))
        _assert_pairs_differ_only_in_their_pressure(compiled)
        assert len(compiled.variants) == 3 + 2 + 3 + 6 + 4  # V, W (+ base), D, R, frontier
        menus = [v.component("menu")["size"] for v in compiled.members("V")]
        assert menus == [8, 32, 128]
        action = fam.action is not None
        minima = [v.component("workflow")["certified_minimum"] for v in compiled.members("W")]
        assert minima == [2 + action, 4 + action, 6 + action]
        frontier = [
            v.component("workflow")["certified_minimum"] for v in compiled.members("W-frontier")
        ]
        assert frontier == [2, 6, 14, 30]  # read-only frontier tasks (reading 4)
        for v in compiled.variants:  # record ids are opaque: nothing of the kind or the facts
            for record in v.component("workflow")["records"]:
                assert record["id"].startswith("rec_") and len(record["id"]) == 20
                assert record["kind"] not in record["id"]
    assert domains == {"accounting", "email", "files", "calendar"}


# ---- bad input ----------------------------------------------------------------------------


def _refusal(doc: dict[str, Any]) -> FamilyError:
    with pytest.raises(FamilyError) as info:
        compile_family(family(doc), filename="fam.yaml")
    err = info.value
    assert isinstance(err, BadInput) and err.exit_code == 2
    assert err.file == "fam.yaml" and "family 'test-escalation'" in err.message
    return err


def test_a_family_whose_variants_would_differ_in_more_than_one_pressure_is_refused() -> None:
    doc = family_doc()
    doc["facts"]["owner"] = {"value": "Ira"}
    doc["layouts"]["low"][0].append("owner")
    doc["layouts"]["medium"][1].append("owner")
    # high leaves 'owner' out: its workflow would decide on other facts than the others
    err = _refusal(doc)
    assert err.field == "layouts.high"
    assert "more than one pressure" in err.message and "facts" in err.message


def test_a_workflow_the_checker_cannot_certify_is_refused() -> None:
    doc = family_doc()
    # the second record of 'medium' holds no fact: reading it is not needed, so the
    # 5-call program is not minimal (3 calls reach the goal)
    doc["layouts"]["medium"] = [["status", "due", "contact"], []]
    err = _refusal(doc)
    assert err.field == "layouts.medium"
    assert "cannot certify" in err.message and "not minimal: 3 calls suffice" in err.message


def test_a_shortlist_larger_than_the_catalog_is_refused() -> None:
    doc = family_doc()
    doc["sizes"]["catalogs"] = [12, 48]
    doc["sizes"]["shortlist"] = 16
    err = _refusal(doc)
    assert err.field == "sizes.shortlist" and "larger than the catalog of 12" in err.message


@pytest.mark.parametrize(
    ("fact", "field"),
    [
        ({"value": "2026-3-1", "type": "date"}, "facts.due"),
        ({"value": "14", "type": "integer"}, "facts.due"),
    ],
)
def test_an_encoding_that_does_not_round_trip_is_refused(fact: dict[str, Any], field: str) -> None:
    doc = family_doc()
    doc["facts"]["due"] = fact
    err = _refusal(doc)
    assert err.field == field and "does not round-trip" in err.message


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (("layouts", "high"), [["status"], ["due"], ["nope"]], "layouts.high[2]"),
        (("request",), "Should it be escalated?", "request"),
        (("sizes", "menus"), [32, 8], "sizes.menus"),
        (("sources",), ["case", "ghost"], "sources[1]"),
        (("layouts", "low"), [["status", "due"], ["contact"]], "layouts.low"),
    ],
)
def test_malformed_families_are_refused_at_load_naming_the_field(
    path: tuple[str, ...], value: Any, field: str
) -> None:
    doc = family_doc()
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(BadInput) as info:
        compile_family(family(doc), filename="fam.yaml")
    assert info.value.exit_code == 2
    assert info.value.field == field, info.value


def test_a_crossed_cell_is_made_of_the_single_pressure_components() -> None:
    # the capacity factorial crosses pressures: a cell at (V=12, high, linked) must carry
    # exactly the V=12 menu, the high workflow and the linked encoding of the matched sets
    fam = family(family_doc())
    compiled = compile_family(fam)
    crossed = compile_cell(fam, Cell("capacity", 12, "high", 0, "linked"))
    menu_12 = next(v for v in compiled.members("V") if v.cell.menu == 12)
    high = next(v for v in compiled.members("W") if v.cell.workflow == "high")
    linked = next(v for v in compiled.members("D") if v.cell.encoding == "linked")
    assert crossed.component("menu") == menu_12.component("menu")
    assert crossed.component("workflow") == high.component("workflow")
    assert crossed.component("encoding") == linked.component("encoding")
    assert crossed.component("core") == high.component("core")
    assert crossed.id == "test-escalation/capacity.V12.Whigh.Dlinked"


@pytest.mark.parametrize(
    ("cell", "field"),
    [
        (Cell("capacity", 4, "low", 0, "raw"), "sizes.menus"),
        (Cell("discovery", 8, "low", 0, "raw", 1024, "flat-lexical"), "sizes.catalogs"),
    ],
)
def test_a_cell_outside_the_family_sizes_is_refused(cell: Cell, field: str) -> None:
    with pytest.raises(FamilyError) as info:
        compile_cell(family(family_doc()), cell, filename="fam.yaml")
    assert info.value.field == field and info.value.exit_code == 2
