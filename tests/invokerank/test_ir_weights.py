"""Intent weights in the registration (issue 17, item 7): an optional field that leaves
every earlier digest unchanged, refused precisely when bad, and used by the roll-up."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from prereg.registry.digest import document_digest
from prereg.registry.resolve import build_document
from prereg.registry.schema import Registration
from prereg.reports.invokerank.section import ArmMeta, invokerank_section
from prereg.reports.observations import from_record
from tests.conftest import tree_digest

REGISTRATION: dict[str, Any] = {
    "id": "weights-digest",
    "title": "Digest stability of a registration without intent weights",
    "hypothesis": "h",
    "falsification": "f",
    "experiment": "music-library",
    "kind": "exploratory",
    "split": "dev",
    "arms": [{"id": "baseline", "surface": "baseline"}, {"id": "semantic", "surface": "semantic"}],
    "host": {"driver": "local"},
    "budgets": {
        "completion_cap": 1024,
        "episode_tokens": 32000,
        "call_limit": 12,
        "turn_limit": 16,
    },
    "design": {"repeats": 3, "rotations": 1, "seed": 7},
    "outcome": "success",
    "primary": {
        "test": "mcnemar_exact",
        "alpha": 0.05,
        "sides": "two-sided",
        "favours": "semantic",
    },
    "secondary": [{"test": "paired_bootstrap", "level": 0.95, "draws": 10000}],
    "multiplicity": {"method": "bh", "q": 0.10, "family": "per-intent"},
}
#: the digest of REGISTRATION with one file, computed by the code at commit def726a,
#: before ``intent_weights`` existed
DIGEST_BEFORE = "sha256:a5d0ffab432f779a9959ee35037b1c17948a5108f394ac28593ecb2eeaf83c50"
FILES = {"corpus.yaml": b"x"}


def _digest(data: dict[str, Any]) -> str:
    return document_digest(build_document(Registration.model_validate(data), FILES))


def test_a_registration_without_weights_digests_as_before_the_field_existed() -> None:
    assert _digest(REGISTRATION) == DIGEST_BEFORE
    document = build_document(Registration.model_validate(REGISTRATION), FILES)
    assert "intent_weights" not in document["registration"]
    weighted = {**REGISTRATION, "intent_weights": {"browse": 2.0, "edit": 1.0}}
    assert _digest(weighted) != DIGEST_BEFORE  # weights decide a result: digested
    reloaded = Registration.model_validate(
        build_document(Registration.model_validate(weighted), FILES)["registration"]
    )
    assert reloaded.intent_weights == {"browse": 2.0, "edit": 1.0}


@pytest.mark.parametrize(
    ("weights", "fragment"),
    [
        ("{browse: 0}", "intent_weights"),
        ("{browse: -1}", "intent_weights"),
        ("[1, 2]", "intent_weights"),
    ],
)
def test_bad_weights_exit_2_naming_the_field(
    ws: Path, cli: Any, weights: str, fragment: str
) -> None:
    text = (ws / "drafts" / "music-library-pilot.yaml").read_text()
    path = ws / "drafts" / "weights.yaml"
    path.write_text(text + f"intent_weights: {weights}\n")
    before = tree_digest(ws / "registry")
    result = cli("-w", ws, "register", path, "--json")
    assert result.code == 2, (result.stdout, result.stderr)
    assert "weights.yaml" in result.stderr and fragment in result.stderr
    assert json.loads(result.stdout)["exit_code"] == 2
    assert tree_digest(ws / "registry") == before


def _runs() -> list[Any]:
    """Three intents, 4 prompts x 2 runs each; selected in 2, 4 and 6 of 8 runs."""
    out = []
    for intent, hits in (("a", 2), ("b", 4), ("c", 6)):
        for t in range(8):
            sel = t < hits
            out.append(
                from_record(
                    {
                        "arm": "x",
                        "task_id": f"{intent}-{t // 2}",
                        "intent": intent,
                        "repeat": t % 2,
                        "funnel": {"surfaced": sel or t % 3 == 0, "selected": sel},
                        "terminal_class": "focal" if sel else "searched_then_declined",
                    }
                )
            )
    return out


def test_registered_weights_set_the_roll_up() -> None:
    equal = invokerank_section(_runs(), [ArmMeta("x", "s")], seed=1)
    weighted = invokerank_section(
        _runs(), [ArmMeta("x", "s")], seed=1, intent_weights={"a": 3.0, "c": 1.0}
    )
    assert equal is not None and weighted is not None
    arm, flat = weighted.arms[0], equal.arms[0]
    q = {i.intent: i.q for i in arm.intents}
    # normalised over the scored intents; b is not listed, so it weighs 0
    assert [i.weight for i in arm.intents] == pytest.approx([0.75, 0.0, 0.25])
    assert arm.q == pytest.approx(0.75 * q["a"] + 0.25 * q["c"], rel=1e-9)
    assert flat.q == pytest.approx(sum(q.values()) / 3, rel=1e-9)
    assert "weight 0: b" in arm.weights and "equal" in flat.weights
    # the calibrated roll-up uses the same weights: the plug-in 0.75 x 2/8 + 0.25 x 6/8
    assert arm.calibrated[0].low < 0.75 * 2 / 8 + 0.25 * 6 / 8 < arm.calibrated[0].high
