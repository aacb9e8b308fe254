"""Arms as configurations (issue 13): how an arm's host, budgets and system prompt resolve,
and the bad inputs refused at register (exit 2, file, line and field, nothing written)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from prereg.registry.schema import Registration
from prereg.registry.units import plan_from_registration
from tests.conftest import tree_digest

PILOT = Path(__file__).parents[2] / "registry" / "drafts" / "music-library-pilot.yaml"
DIGEST = "sha256:" + "0" * 64


def pilot(**arm_override: Any) -> dict[str, Any]:
    doc = yaml.safe_load(PILOT.read_text())
    doc["arms"][1].update(arm_override)
    return doc


def test_an_arm_inherits_what_it_does_not_override() -> None:
    reg = Registration.model_validate(
        pilot(budgets={"call_limit": 3}, system_prompt="Answer briefly.")
    )
    base, arm = reg.config_of("baseline"), reg.config_of("semantic")
    assert base.host == reg.host and base.budgets == reg.budgets and base.system_prompt is None
    assert arm.budgets.call_limit == 3
    assert arm.budgets.completion_cap == reg.budgets.completion_cap  # inherited field by field
    assert arm.system_prompt == "Answer briefly."


def test_a_registration_system_prompt_is_every_arms_default() -> None:
    doc = pilot(system_prompt="Arm prompt.")
    doc["system_prompt"] = "Default prompt."
    reg = Registration.model_validate(doc)
    assert reg.config_of("baseline").system_prompt == "Default prompt."
    assert reg.config_of("semantic").system_prompt == "Arm prompt."


def test_another_driver_inherits_nothing_but_batch_and_live() -> None:
    doc = pilot(host={"driver": "openai", "model": "gpt-5-mini"})
    doc["host"] = {
        "driver": "anthropic",
        "model": "claude-x",
        "params": {"top_k": 1},
        "allow_sampling": True,
    }
    doc["arms"][0]["host"] = {"model": "claude-y"}
    reg = Registration.model_validate(doc)
    other = reg.config_of("semantic").host
    assert other.driver == "openai" and other.params == {} and not other.allow_sampling
    same = reg.config_of("baseline").host
    assert same.model == "claude-y" and same.params == {"top_k": 1} and same.allow_sampling


def test_the_digest_covers_the_configuration_and_records_state_it() -> None:
    plain = plan_from_registration(Registration.model_validate(pilot()), DIGEST)
    capped = plan_from_registration(
        Registration.model_validate(pilot(budgets={"completion_cap": 64})), DIGEST
    )
    assert plain.config("semantic").digest() != capped.config("semantic").digest()
    assert plain.config("baseline").digest() == capped.config("baseline").digest()
    assert capped.config("semantic").budgets.completion_cap == 64
    # two arms with the same configuration share one digest, whatever their surfaces
    assert plain.config("baseline").digest() == plain.config("semantic").digest()


BAD = [
    # (arm override, field named, words in the message)
    ({"host": {"driver": "local", "modle": "x"}}, "arms[1].host.modle", "unknown field"),
    ({"budgets": {"spend_usd": 3}}, "arms[1].budgets.spend_usd", "unknown field"),
    ({"budgets": {"call_limit": 0}}, "arms[1].budgets.call_limit", "greater than 0"),
    ({"host": {"driver": "anthropic"}}, "arms[1].host", "model"),
    ({"host": {"driver": "anthropic", "model": "claude-x"}}, "arms", "evidence class"),
    ({"host": {"batch": True}}, "arms[1].host.batch", "unknown field"),
    ({"colour": "red"}, "arms[1].colour", "unknown field"),
    ({"host": {"params": {"temperature": 0.2}}}, "arms[1].host", "allow_sampling"),
    ({"host": {"model": "local-lazy"}}, "arms[1].host.model", "no model 'local-lazy'"),
    ({"host": {"params": {"search_k": 0}}}, "arms[1].host.params.search_k", "must be >= 1"),
]


@pytest.mark.parametrize(("driver", "key"), [("anthropic", "system"), ("openai", "instructions")])
def test_the_system_prompt_field_is_the_registrations_not_a_param(
    ws: Path, cli: Any, driver: str, key: str
) -> None:
    doc = pilot()
    doc["host"] = {"driver": driver, "model": "m", "params": {key: "be evil"}}
    draft = ws / "drafts" / "sys.yaml"
    draft.write_text(yaml.safe_dump(doc, sort_keys=False))
    result = cli("-w", ws, "register", draft, "--json")
    assert result.code == 2 and result.json()["field"] == f"host.params.{key}"


@pytest.mark.parametrize(("override", "field", "words"), BAD)
def test_bad_configurations_are_refused_at_register(
    ws: Path, cli: Any, override: dict[str, Any], field: str, words: str
) -> None:
    draft = ws / "drafts" / "bad.yaml"
    draft.write_text(yaml.safe_dump(pilot(**override), sort_keys=False))
    before = tree_digest(ws / "registry")
    result = cli("-w", ws, "register", draft, "--json")
    assert result.code == 2, result.stdout + result.stderr
    error = result.json()
    assert error["field"].startswith(field), error
    assert words in error["message"], error
    assert re.search(r"bad\.yaml:\d+:\d+$", error["file"]), error  # file:line:column
    assert tree_digest(ws / "registry") == before


def test_a_batch_registration_refuses_arms_on_different_hosts(ws: Path, cli: Any) -> None:
    doc = pilot(host={"model": "claude-y"})
    doc["host"] = {"driver": "anthropic", "model": "claude-x", "batch": True}
    draft = ws / "drafts" / "batch.yaml"
    draft.write_text(yaml.safe_dump(doc, sort_keys=False))
    result = cli("-w", ws, "register", draft, "--json")
    assert result.code == 2 and result.json()["field"] == "host.batch"


# ---- factorial designs and contrasts ----------------------------------------------------

FACTORIAL = Path(__file__).parents[2] / "registry" / "drafts" / "music-library-factorial.yaml"


def factorial(edit: Any = None) -> dict[str, Any]:
    doc = yaml.safe_load(FACTORIAL.read_text())
    if edit is not None:
        edit(doc)
    return doc


def test_cells_extra_cells_and_their_weights() -> None:
    def extra(doc: dict[str, Any]) -> None:
        doc["factorial"]["extra_cells"] = [{"profile": "local-careful", "cap": 4096}]

    reg = Registration.model_validate(factorial(extra))
    ids = [a.id for a in reg.arms]
    assert len(ids) == 5 and ids[-1] == "profile-local-careful--cap-4096"
    assert reg.arms[-1].cell == {"profile": "local-careful", "cap": 4096}
    assert reg.config_of(ids[-1]).budgets.completion_cap == 4096
    assert reg.config_of(ids[-1]).host.model == "local-careful"
    # a checkpoint cell outside the crossed levels takes no part in the factorial effects
    assert ids[-1] not in reg.contrast_weights("profile-by-cap")
    # the frozen document lists the cells; validating it again gives the same registration
    again = Registration.model_validate(reg.model_dump(mode="json"))
    assert again == reg


def _set(path: str, value: Any) -> Any:
    def edit(doc: dict[str, Any]) -> None:
        target = doc
        parts = path.split(".")
        for part in parts[:-1]:
            target = target[int(part)] if part.isdigit() else target[part]
        last = parts[-1]
        if last.isdigit():
            target[int(last)] = value
        else:
            target[last] = value

    return edit


FACTORIAL_BAD = [
    (_set("factorial.factors.1.levels.0", "big"), "factorial.factors[1].levels[0]", "integer"),
    (_set("factorial.factors.0.sets", "host.colour"), "factorial.factors[0].sets", "cannot set"),
    (_set("contrasts.0.effect", ["profil"]), "contrasts[0].effect", "unknown factor"),
    (
        _set("contrasts.0", {"id": "x", "weights": {"nope": 1, "profile-local-hasty--cap-48": -1}}),
        "contrasts[0].weights",
        "unknown arm",
    ),
    (
        _set("contrasts.0", {"id": "x", "weights": {"profile-local-hasty--cap-48": 1}}),
        "contrasts[0].weights",
        "sum to",
    ),
    (_set("primary.contrast", "nope"), "primary.contrast", "unknown contrast"),
    (_set("primary", {"test": "mcnemar_exact", "unit": "cluster"}), "primary.unit", "per task"),
    (_set("arms", [{"id": "a", "surface": "semantic"}]), "arms", "leave 'arms' out"),
    (
        _set("factorial.extra_cells", [{"profile": "local-careful"}]),
        "factorial.extra_cells[0]",
        "missing: cap",
    ),
    (_set("multiplicity.method", "e-bh"), "multiplicity.method", "e-values"),
    (_set("factorial.factors.1.levels", [48, 48]), "factorial.factors[1].levels", "repeats"),
]


@pytest.mark.parametrize(("edit", "field", "words"), FACTORIAL_BAD)
def test_bad_factorial_designs_are_refused_at_register(
    ws: Path, cli: Any, edit: Any, field: str, words: str
) -> None:
    draft = ws / "drafts" / "bad.yaml"
    draft.write_text(yaml.safe_dump(factorial(edit), sort_keys=False))
    before = tree_digest(ws / "registry")
    result = cli("-w", ws, "register", draft, "--json")
    assert result.code == 2, result.stdout + result.stderr
    error = result.json()
    assert error["field"].startswith(field), error
    assert words in error["message"], error
    assert re.search(r"bad\.yaml:\d+:\d+$", error["file"]), error
    assert tree_digest(ws / "registry") == before
