"""Returned-state encodings: every encoding decodes to the values the records hold, the
envelope is identical across encodings, and a value that cannot round-trip is refused."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prereg.experiments.toolbottleneck.compile import compile_family
from prereg.experiments.toolbottleneck.encoding import decode, encode, round_trip_problem
from prereg.experiments.toolbottleneck.family import ENCODINGS, FactValue, FamilyError
from prereg.experiments.toolbottleneck.world import Returned
from tests.toolbottleneck.helpers import family, family_doc

_TYPES: dict[str, st.SearchStrategy[FactValue]] = {
    "string": st.text(max_size=12),
    "integer": st.integers(-(2**40), 2**40),
    "boolean": st.booleans(),
    "number": st.floats(allow_nan=False, allow_infinity=False, width=32).filter(
        lambda x: x != int(x)
    ),
}
_NAMES = st.text("abcdefgh-", min_size=1, max_size=6)


@st.composite
def observations(draw: st.DrawFn) -> list[Returned]:
    kinds = draw(st.lists(st.sampled_from(["case", "invoice", "file"]), min_size=0, max_size=4))
    # a field keeps one type within a kind (the typed dictionary declares one per field)
    shape = {
        k: {
            name: draw(st.sampled_from(sorted(_TYPES)))
            for name in draw(st.lists(_NAMES, min_size=1, max_size=4, unique=True))
        }
        for k in sorted(set(kinds))
    }
    return [
        Returned(f"rec_{i}", k, {name: draw(_TYPES[t]) for name, t in shape[k].items()})
        for i, k in enumerate(kinds)
    ]


@settings(max_examples=40, deadline=None)
@given(observations())
def test_every_encoding_decodes_to_the_same_values(results: list[Returned]) -> None:
    expected = [{"id": r.id, "kind": r.kind, "fields": dict(r.fields)} for r in results]
    for encoding in ENCODINGS:
        assert round_trip_problem(results, encoding, {}) is None
        assert decode(encode(results, encoding, {}), encoding) == expected


def test_declared_types_round_trip_and_money_travels_in_minor_units() -> None:
    rows = [Returned("rec_1", "invoice", {"amount": "4820.00", "due": "2026-05-15", "n": 3})]
    declared = {"amount": "money", "due": "date", "n": "integer"}
    typed = encode(rows, "typed", declared)
    assert typed["objects"][0]["fields"]["amount"] == 482000
    assert typed["type_dictionary"] == {
        "invoice": {"amount": "money", "due": "date", "n": "integer"}
    }
    for encoding in ENCODINGS:
        assert round_trip_problem(rows, encoding, declared) is None


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ("12.5", "money"),
        ("12.345", "money"),
        ("2026-3-1", "date"),
        ("14", "integer"),
        (1, "boolean"),
    ],
)
def test_values_that_do_not_survive_their_type_are_found(value: Any, kind: str) -> None:
    rows = [Returned("rec_1", "invoice", {"x": value})]
    problem = round_trip_problem(rows, "typed", {"x": kind})
    assert problem is not None and problem.field == "x"
    assert round_trip_problem(rows, "raw", {"x": kind}) is None


def test_typed_cannot_carry_a_field_whose_type_changes_within_a_kind() -> None:
    rows = [Returned("a", "case", {"x": ""}), Returned("b", "case", {"x": 0})]
    problem = round_trip_problem(rows, "typed", {})
    assert problem is not None and problem.field == "x"


def test_compact_cannot_carry_a_record_missing_a_field_of_its_type() -> None:
    rows = [Returned("a", "case", {"x": "1", "y": "2"}), Returned("b", "case", {"x": "3"})]
    problem = round_trip_problem(rows, "compact", {})
    assert problem is not None and problem.field == "y"


def test_compiled_observations_decode_to_the_records_at_every_call() -> None:
    compiled = compile_family(family(family_doc()))
    variants = compiled.members("D")
    assert [v.cell.encoding for v in variants] == list(ENCODINGS)
    raw = variants[0].document["observations"]
    envelope = ("call", "tool", "source", "hash", "provenance")
    for variant in variants:
        observations = variant.document["observations"]
        assert len(observations) == len(raw) == len(variant.component("workflow")["program"])
        for mine, reference in zip(observations, raw, strict=True):
            assert {k: mine[k] for k in envelope} == {k: reference[k] for k in envelope}
            assert decode(mine, variant.cell.encoding) == decode(reference, "raw")
    # the read of the primary record returns exactly the stored record (independent reference)
    record = variants[0].component("workflow")["records"][0]
    decoded = decode(variants[-1].document["observations"][1], "linked")
    assert decoded == [
        {
            "id": record["id"],
            "kind": record["kind"],
            "fields": {"ref": record["ref"], **record["fields"]},
        }
    ]


def test_an_encoding_that_does_not_round_trip_is_refused_naming_family_and_field() -> None:
    doc = family_doc()
    doc["facts"]["amount"] = {"value": "12.5", "type": "money"}
    doc["layouts"]["low"][0].append("amount")
    doc["layouts"]["medium"][0].append("amount")
    doc["layouts"]["high"][0].append("amount")
    with pytest.raises(FamilyError) as info:
        compile_family(family(doc), filename="fam.yaml")
    err = info.value
    assert err.exit_code == 2
    assert err.field == "facts.amount" and err.file == "fam.yaml"
    assert "test-escalation" in err.message and "round-trip" in err.message
