"""Menus (V) and catalogs (R): route neighbours differ in exactly one coordinate and never
return a record; menus and catalogs are nested; availability is fixed before any model
runs and kept apart from selection (success = A x S)."""

from __future__ import annotations

import itertools
import json

import pytest

from prereg.experiments.toolbottleneck.catalog import Availability, DiscoveryOutcome, shortlist
from prereg.experiments.toolbottleneck.compile import compile_family
from prereg.experiments.toolbottleneck.menu import route_neighbours
from prereg.experiments.toolbottleneck.workflow import build_workflow, operational_functions
from prereg.experiments.toolbottleneck.world import execute
from tests.toolbottleneck.helpers import family, family_doc

COORDINATES = ("workspace", "region", "collection")


def test_route_neighbours_differ_in_exactly_one_coordinate() -> None:
    fam = family(family_doc())
    ops = list(operational_functions(fam).values())
    neighbours = route_neighbours(ops, fam.id, 0)
    assert len({n.name for n in neighbours}) == len(neighbours) > 128
    for n in neighbours:
        base = next(o for o in ops if o.base == n.base)
        differing = [c for c in COORDINATES if getattr(n.route, c) != getattr(base.route, c)]
        assert len(differing) == 1
        assert (n.operation, n.kind, n.connector) == (base.operation, base.kind, base.connector)


def test_route_neighbours_never_return_a_record_when_executed() -> None:
    fam = family(family_doc(small=False))
    ops = list(operational_functions(fam).values())
    neighbours = route_neighbours(ops, fam.id, 0)
    for level, handoffs in (("low", 0), ("high", 0), ("low", 2)):
        wf = build_workflow(fam, 0, fam.layouts.of(level), handoffs, f"{level}{handoffs}")  # type: ignore[arg-type]
        # every argument anyone could pass: every id, lookup key and field value of the world
        args = {r.id for r in wf.world.records} | {r.ref for r in wf.world.records}
        args |= {str(v) for r in wf.world.records for v in r.fields.values()}
        calls = 0
        for fn, arg in itertools.product(neighbours, sorted(args)):
            out, changes = execute(fn, arg, wf.world, {})
            assert out == [] and changes == {}
            calls += 1
        assert calls > 1000
        # the operational tools do return the records (the audit is not vacuous)
        first = wf.program[0]
        assert execute(wf.world.functions[first.function], first.arg, wf.world, {})[0]


def test_menus_are_nested_and_always_hold_the_operational_tools() -> None:
    compiled = compile_family(family(family_doc(small=False)))
    menus = [v.component("menu") for v in compiled.members("V")]
    assert [m["size"] for m in menus] == [8, 32, 128]
    names = [{f["name"] for f in m["functions"]} for m in menus]
    assert [len(n) for n in names] == [8, 32, 128]
    assert names[0] < names[1] < names[2]
    operational = {
        t["name"] for t in compiled.members("V")[0].component("core")["operational_tools"]
    }
    assert operational <= names[0]


def test_catalogs_are_nested_and_availability_is_recorded_apart_from_selection() -> None:
    compiled = compile_family(family(family_doc(small=False)))
    discovery = compiled.members("R")
    assert {(v.cell.catalog, v.cell.retriever) for v in discovery} == {
        (n, r) for n in (32, 512, 2048) for r in ("flat-lexical", "connector-first")
    }
    by_size: dict[int, list[str]] = {}
    for v in discovery:
        catalog = v.component("catalog")
        by_size[catalog["size"]] = catalog["functions"]
        assert len(catalog["functions"]) == catalog["size"]
        assert len(catalog["shortlist"]) == 16 and set(catalog["shortlist"]) <= set(
            catalog["functions"]
        )
        required = {c["function"] for c in v.component("workflow")["program"]}
        assert catalog["availability"]["available"] == (required <= set(catalog["shortlist"]))
        assert set(catalog["availability"]["missing"]) == required - set(catalog["shortlist"])
        assert catalog["selection"] is None  # measured at run time, never at compile time
        assert [f["name"] for f in v.component("menu")["functions"]] == catalog["shortlist"]
    assert set(by_size[32]) < set(by_size[512]) < set(by_size[2048])
    assert by_size[512][:32] == by_size[32]


def test_a_shortlist_as_large_as_the_catalog_always_makes_the_tools_available() -> None:
    fam = family(family_doc())
    ops = list(operational_functions(fam).values())
    catalog = ops + route_neighbours(ops, fam.id, 0)[:9]
    for retriever in ("flat-lexical", "connector-first"):
        picked = shortlist(catalog, "anything at all", retriever, len(catalog), fam.id, 0)
        assert sorted(f.name for f in picked) == sorted(f.name for f in catalog)
        assert Availability(tuple(f.name for f in ops), tuple(f.name for f in picked)).available


def test_intention_to_treat_success_is_availability_times_selection() -> None:
    assert DiscoveryOutcome(True, True).itt_success
    assert not DiscoveryOutcome(True, False).itt_success
    assert not DiscoveryOutcome(True, None).itt_success
    assert not DiscoveryOutcome(False, None).itt_success
    with pytest.raises(ValueError, match="undefined"):
        DiscoveryOutcome(False, True)


def test_schema_bytes_grow_with_the_menu_as_in_the_seed() -> None:
    # seed table 1: 3,481 / 13,820 / 55,176 schema bytes at V = 8 / 32 / 128 (x4 per step)
    compiled = compile_family(family(family_doc(small=False)))
    sizes = [v.document["measures"]["schema_bytes"] for v in compiled.members("V")]
    for variant, size in zip(compiled.members("V"), sizes, strict=True):
        functions = variant.component("menu")["functions"]
        assert size == len(json.dumps(functions, sort_keys=True, separators=(",", ":")))
    assert 3.5 < sizes[1] / sizes[0] < 4.5 and 3.5 < sizes[2] / sizes[1] < 4.5


def test_the_flat_retriever_does_not_depend_on_catalog_order() -> None:
    fam = family(family_doc())
    ops = list(operational_functions(fam).values())
    catalog = ops + route_neighbours(ops, fam.id, 0)[:40]
    request = "Should case X be escalated? Route northwind/eu-west/support."
    for retriever in ("flat-lexical", "connector-first"):
        a = shortlist(catalog, request, retriever, 8, fam.id, 0)
        b = shortlist(catalog[::-1], request, retriever, 8, fam.id, 0)
        assert [f.name for f in a] == [f.name for f in b]
