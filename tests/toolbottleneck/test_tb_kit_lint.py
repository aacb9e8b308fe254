"""``prereg study lint`` (issue 42, item 5): a planted violation of each rule is refused,
naming the file and the field; a clean family passes; unreadable input exits 2.

The expectations are written by hand from the seed's rules (the certified minima 2/4/6
reads + 1 action, 2/6/14/30 on the read-only frontier; which field holds which text),
not read back from the lint or the compiler.
"""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import typer

from prereg.commands import study_cmds
from prereg.core.errors import BadInput, PreregError
from prereg.experiments.toolbottleneck.compile import CompiledFamily, Variant, compile_family
from prereg.experiments.toolbottleneck.family import FamilyFile
from prereg.experiments.toolbottleneck.lint import (
    RULES,
    compiled_findings,
    expected_minimum,
    lint_family,
    lint_files,
    offered_choices,
)
from tests.toolbottleneck.helpers import BUNDLED, as_yaml, family, family_doc

FILE = "planted.yaml"


def clean_doc(action: bool = True) -> dict[str, Any]:
    """The helpers' small family with a request and tool text the rules accept."""
    doc = family_doc(action=action)
    doc["request"] = (
        'Should case {ref} be escalated? Route {route}. Answer as JSON {"decision": '
        '"escalate" or "hold", "facts": {...}, "sources": [...]}.'
    )
    for tool in doc["tools"]:
        verb = {"search": "Find", "read": "Read", "act": "Flag"}[tool["operation"]]
        tool["description"] = f"{verb} a {tool['kind']} record."
    return doc


def lint(doc: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(f.rule, f.file, f.field) for f in lint_family(family(doc, FILE), FILE)]


def rules_at(doc: dict[str, Any]) -> set[tuple[str, str]]:
    found = lint(doc)
    assert all(file == FILE for _, file, _ in found)
    return {(rule, field) for rule, _, field in found}


def test_the_clean_family_has_no_finding() -> None:
    assert lint(clean_doc()) == []
    assert lint(clean_doc(action=False)) == []


# ---- the family's text ------------------------------------------------------------------


def test_a_fact_value_in_the_request_or_a_tool_is_a_leak() -> None:
    doc = clean_doc()
    doc["request"] = doc["request"].replace("Route {route}.", "Route {route}. It is overdue.")
    doc["tools"][1]["description"] = "Read a case of Dana Okafor."
    found = rules_at(doc)
    assert ("leak.fact", "request") in found
    assert ("leak.fact", "tools[1].description") in found
    # a date fact, matched as a whole term
    doc = clean_doc()
    doc["tools"][3]["description"] = "Read commitments due 2026-03-01."
    assert ("leak.fact", "tools[3].description") in rules_at(doc)


def test_the_decision_label_in_a_tool_or_alone_in_the_request_is_a_leak() -> None:
    doc = clean_doc()
    doc["tools"][0]["name"] = "search_escalate_cases"
    found = rules_at(doc)
    assert ("leak.decision", "tools[0].name") in found
    doc = clean_doc()
    doc["request"] = "Escalate case {ref}. Route {route}. Answer as JSON."
    assert ("leak.decision", "request") in rules_at(doc)


def test_a_request_that_offers_no_choice_of_labels_is_refused() -> None:
    doc = clean_doc()
    doc["request"] = "Look at case {ref} on {route} and answer as JSON."
    assert rules_at(doc) == {("options", "request")}


def test_offered_choices_are_quoted_labels_joined_by_or_or_commas() -> None:
    assert offered_choices('{"decision": "a" or "b", "facts": 1}') == [["a", "b"]]
    assert offered_choices('{"decision": "a", "b" or "c"}') == [["a", "b", "c"]]
    assert offered_choices('pick "x", "y" or "z" then "w"') == [["x", "y", "z"]]
    assert offered_choices('"decision": "a"') == []


def test_a_gold_record_id_in_the_tool_text_is_a_leak() -> None:
    doc = clean_doc()
    compiled = compile_family(family(doc, FILE), filename=FILE)
    records = compiled.variants[0].component("workflow")["records"]
    gold = records[0]["id"]
    doc["tools"][2]["description"] = f"Read commitment {gold} first."
    found = lint(doc)
    assert ("leak.id", FILE, "tools[2].description") in found


def test_tool_signatures_must_say_what_the_tool_does() -> None:
    doc = clean_doc()
    doc["tools"][1]["description"] = ""
    doc["tools"][3]["description"] = doc["tools"][2]["description"]
    doc["tools"][5]["name"] = "search_contact_record"  # a read tool named as a search
    doc["layouts"] = copy.deepcopy(doc["layouts"])
    found = rules_at(doc)
    assert ("signature", "tools[1].description") in found
    assert ("signature", "tools[3].description") in found
    assert ("signature", "tools[5].name") in found


def test_a_record_kind_on_two_connectors_is_refused() -> None:
    doc = clean_doc()
    doc["tools"][3]["connector"] = "elsewhere"  # read_commitment off search_commitments'
    assert ("connectors", "tools[3].connector") in rules_at(doc)


def test_a_level_that_does_not_spread_the_facts_further_is_refused() -> None:
    doc = clean_doc()
    doc["sizes"]["workflow_reads"] = {"low": 2, "medium": 2, "high": 6}
    doc["layouts"]["medium"] = [["status", "due", "contact"]]
    assert ("layout", "layouts.medium") in rules_at(doc)


def test_a_fact_dropped_from_a_level_is_refused_and_the_compiler_refuses_it_too() -> None:
    doc = clean_doc()
    doc["layouts"]["high"] = [["status"], ["due"], []]
    found = rules_at(doc)
    assert ("layout", "layouts.high") in found
    assert any(rule == "compile" and field.startswith("layouts") for rule, field in found)


def test_a_compiler_refusal_is_a_finding_naming_its_field() -> None:
    doc = clean_doc()
    doc["sizes"]["menus"] = [4, 12]  # fewer schemas than the family's 7 tools
    assert ("compile", "sizes.menus") in rules_at(doc)


# ---- the compiled variants (planted into an honest compilation) ---------------------------


def _compiled(action: bool = True) -> tuple[FamilyFile, CompiledFamily]:
    fam = family(clean_doc(action), FILE)
    return fam, compile_family(fam, filename=FILE)


def _edit(compiled: CompiledFamily, code: str, edit: Any) -> CompiledFamily:
    """The compilation with one variant's document changed by ``edit`` (in place on a copy)."""
    variants = []
    for v in compiled.variants:
        if v.cell.code == code:
            document = copy.deepcopy(dict(v.document))
            edit(document)
            v = Variant(v.id, v.cell, document)
        variants.append(v)
    return replace(compiled, variants=tuple(variants))


def _found(fam: FamilyFile, compiled: CompiledFamily) -> set[tuple[str, str]]:
    return {(f.rule, f.field) for f in compiled_findings(fam, FILE, compiled)}


def test_the_honest_compilation_has_no_finding() -> None:
    fam, compiled = _compiled()
    assert _found(fam, compiled) == set()


def test_hand_computed_certified_minima() -> None:
    """2 calls per source record (1, 2, 3 records at low, medium, high) + 1 action; the
    frontier is read-only: 2, 4, 6 calls at 0, 1, 2 handoffs (the small sizes)."""
    fam, compiled = _compiled()
    want = {
        "capacity.V8.Wlow.Draw": 3,
        "capacity.V8.Wmedium.Draw": 5,
        "capacity.V8.Whigh.Draw": 7,
        "frontier.H0": 2,
        "frontier.H1": 4,
        "frontier.H2": 6,
    }
    got = {v.cell.code: expected_minimum(fam, v) for v in compiled.variants}
    assert {k: got[k] for k in want} == want
    for v in compiled.variants:
        assert v.component("workflow")["certified_minimum"] == got[v.cell.code]


def test_a_variant_with_another_answer_is_refused() -> None:
    fam, compiled = _compiled()

    def decide(document: dict[str, Any]) -> None:
        document["components"]["core"]["decision"] = "hold"

    def fact(document: dict[str, Any]) -> None:
        document["components"]["workflow"]["reference_answer"]["facts"]["due"] = "2026-03-02"

    def final(document: dict[str, Any]) -> None:
        document["components"]["core"]["permitted_final_state"] = []

    assert ("answer", "decision") in _found(fam, _edit(compiled, "capacity.V12.Wlow.Draw", decide))
    assert ("answer", "facts.due") in _found(fam, _edit(compiled, "capacity.V8.Wlow.Dtyped", fact))
    assert ("answer", "action") in _found(fam, _edit(compiled, "capacity.V8.Whigh.Draw", final))


def test_a_variant_that_loses_the_certified_minimum_is_refused() -> None:
    fam, compiled = _compiled()

    def shorter(document: dict[str, Any]) -> None:
        workflow = document["components"]["workflow"]
        workflow["program"] = workflow["program"][:-1]
        workflow["certified_minimum"] -= 1
        document["measures"]["certified_minimum"] -= 1

    assert ("minimum", "layouts.high") in _found(
        fam, _edit(compiled, "capacity.V8.Whigh.Draw", shorter)
    )
    assert ("minimum", "sizes.menus") in _found(
        fam, _edit(compiled, "capacity.V12.Wlow.Draw", shorter)
    )
    assert ("minimum", "sizes.handoffs") in _found(fam, _edit(compiled, "frontier.H2", shorter))


def test_a_variant_that_moves_two_pressures_is_refused() -> None:
    fam, compiled = _compiled()

    def menu_and_records(document: dict[str, Any]) -> None:
        document["components"]["workflow"]["records"][0]["fields"]["status"] = "closed"

    def cell(document: dict[str, Any]) -> None:
        document["cell"]["D"] = "compact"

    found = _found(fam, _edit(compiled, "capacity.V12.Wlow.Draw", menu_and_records))
    assert ("one-pressure", "sizes.menus") in found
    found = _found(fam, _edit(compiled, "capacity.V12.Wlow.Draw", cell))
    assert ("one-pressure", "sizes.menus") in found

    # in the D set, the menu may not move
    def menu(document: dict[str, Any]) -> None:
        document["components"]["menu"]["size"] = 99

    assert ("one-pressure", "sizes.encodings") in _found(
        fam, _edit(compiled, "capacity.V8.Wlow.Dlinked", menu)
    )


def test_a_compiler_that_does_not_regenerate_is_refused() -> None:
    fam = family(clean_doc(), FILE)
    calls = {"n": 0}

    def flaky(f: FamilyFile, filename: str) -> CompiledFamily:
        calls["n"] += 1
        compiled = compile_family(f, filename=filename)
        if calls["n"] == 1:
            return compiled
        return _edit(compiled, "frontier.H1", lambda d: d.__setitem__("digest", "sha256:0"))

    found = lint_family(fam, FILE, compiler=flaky)
    assert [(f.rule, f.field) for f in found] == [("regeneration", "family")]


# ---- files and the command ----------------------------------------------------------------


def _run(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str]:
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """The root of a test app (prereg/cli.py's own callback in production)."""

    study_cmds.register(app)
    capsys.readouterr()
    try:
        # standalone_mode=False: typer.Exit(n) comes back as the return value
        code = app(args=[str(a) for a in args], standalone_mode=False) or 0
    except PreregError as exc:
        print(exc.render())
        code = exc.exit_code
    return int(code), capsys.readouterr().out


def test_the_command_exits_1_naming_file_and_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(as_yaml(clean_doc()))
    doc = clean_doc()
    doc["tools"][1]["description"] = "Read a case of Dana Okafor."
    bad.write_text(as_yaml(doc))
    assert _run(capsys, "study", "lint", good)[0] == 0
    code, out = _run(capsys, "study", "lint", good, bad, "--json")
    assert code == 1
    data = json.loads(out)
    assert data["clean"] is False and data["files"] == [str(good), str(bad)]
    assert data["findings"] == [
        {
            "rule": "leak.fact",
            "file": str(bad),
            "field": "tools[1].description",
            "message": "names the value of fact 'contact' ('Dana Okafor')",
            "family": "test-escalation",
        }
    ]
    assert data["counts"] == {"leak.fact": 1}
    code, out = _run(capsys, "study", "lint", bad)
    assert code == 1 and f"{bad}: tools[1].description: [leak.fact]" in out


def test_unreadable_input_exits_2_naming_the_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out = _run(capsys, "study", "lint", tmp_path / "nope.yaml")
    assert code == 2 and "no such file" in out and "nope.yaml" in out
    broken = tmp_path / "broken.yaml"
    doc = clean_doc()
    doc["layouts"]["low"] = [["status", "due", "unknown-fact"]]
    broken.write_text(as_yaml(doc))
    code, out = _run(capsys, "study", "lint", broken)
    assert code == 2 and str(broken) in out and "layouts.low" in out
    with pytest.raises(BadInput):
        lint_files([str(tmp_path)])


def test_every_rule_is_documented() -> None:
    docs = (BUNDLED.parents[3] / "docs" / "toolbottleneck.md").read_text()
    for rule in RULES:
        assert f"`{rule}`" in docs
