"""Bad registrations: exit 2, a message naming file and field, registry untouched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import tree_digest

PILOT = "drafts/music-library-pilot.yaml"


def _variant(ws: Path, old: str, new: str) -> Path:
    text = (ws / PILOT).read_text()
    assert old in text, old
    path = ws / "drafts" / "variant.yaml"
    path.write_text(text.replace(old, new, 1))
    return path


CASES = [
    # (name, old, new, expected fragments in the message)
    ("malformed-yaml", "arms:\n", "arms: [\n", ["variant.yaml:", "malformed YAML"]),
    (
        "unknown-field",
        "outcome: success",
        "outcome: success\nrepeets: 3",
        ["unknown field 'repeets'"],
    ),
    ("unknown-field-suggestion", "budgets:", "bugdets:", ["did you mean 'budgets'"]),
    ("wrong-type", "repeats: 3", "repeats: three", ["design.repeats"]),
    ("out-of-range-alpha", "alpha: 0.05", "alpha: 1.5", ["primary.alpha"]),
    (
        "duplicate-arms",
        "{id: semantic, surface: semantic}",
        "{id: baseline, surface: semantic}",
        ["arms", "duplicate arm id(s): baseline"],
    ),
    (
        "unknown-test",
        "test: mcnemar_exact",
        "test: mcnemar_exakt",
        ["primary.test", "did you mean 'mcnemar_exact'"],
    ),
    (
        "confirmatory-on-dev",
        "kind: exploratory",
        "kind: confirmatory",
        ["split", "confirmatory registration must use split 'test'"],
    ),
    ("exploratory-on-test", "split: dev", "split: test", ["split", "may not use split 'test'"]),
    ("bad-id", "id: music-library-pilot", "id: Music_Library", ["id"]),
    (
        "unknown-experiment",
        "experiment: music-library",
        "experiment: no-such-experiment",
        ["experiment", "not found"],
    ),
    (
        "unknown-surface",
        "{id: semantic, surface: semantic}",
        "{id: semantic, surface: nope}",
        ["arms[1].surface", "surface 'nope'"],
    ),
    (
        "sampling-param",
        "host: {driver: local}",
        "host: {driver: local, params: {temperature: 0}}",
        ["host.params", "allow_sampling"],
    ),
    ("favours-unknown-arm", "favours: semantic", "favours: other", ["primary.favours"]),
]


@pytest.mark.parametrize(("name", "old", "new", "fragments"), CASES, ids=[c[0] for c in CASES])
def test_bad_registration(
    ws: Path, cli, name: str, old: str, new: str, fragments: list[str]
) -> None:
    cli("-w", ws, "register", ws / PILOT)  # a populated registry must stay untouched
    before = tree_digest(ws / "registry")
    path = _variant(ws, old, new)
    result = cli("-w", ws, "register", path, "--json")
    assert result.code == 2, (result.stdout, result.stderr)
    assert "variant.yaml" in result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr
    error = json.loads(result.stdout)
    assert error["exit_code"] == 2
    assert tree_digest(ws / "registry") == before


def test_malformed_yaml_names_line_and_column(ws: Path, cli) -> None:
    path = _variant(ws, "arms:\n", "arms: [\n")
    result = cli("-w", ws, "register", path)
    line = next(i for i, t in enumerate(path.read_text().splitlines(), 1) if t == "arms: [")
    assert f"variant.yaml:{line}:" in result.stderr or f"variant.yaml:{line + 1}:" in result.stderr


def test_field_error_names_its_line(ws: Path, cli) -> None:
    path = _variant(ws, "alpha: 0.05", "alpha: 1.5")
    line = next(i for i, t in enumerate(path.read_text().splitlines(), 1) if "alpha: 1.5" in t)
    result = cli("-w", ws, "register", path)
    assert f"variant.yaml:{line}:" in result.stderr


def test_missing_registration_file(ws: Path, cli) -> None:
    before = tree_digest(ws / "registry")
    result = cli("-w", ws, "register", ws / "drafts" / "absent.yaml")
    assert result.code == 2 and "absent.yaml" in result.stderr
    assert tree_digest(ws / "registry") == before


def test_missing_referenced_file(ws: Path, cli) -> None:
    experiment = ws / "experiments" / "music-library"
    referenced = [p for p in sorted(experiment.rglob("*.yaml")) if p.name != "experiment.yaml"]
    victim = referenced[0]
    victim.unlink()
    before = tree_digest(ws / "registry")
    result = cli("-w", ws, "register", ws / PILOT)
    assert result.code == 2
    assert victim.name in result.stderr
    assert tree_digest(ws / "registry") == before


def test_nothing_written_in_a_fresh_registry(ws: Path, cli) -> None:
    before = tree_digest(ws / "registry")
    cli("-w", ws, "register", _variant(ws, "budgets:", "bugdets:"))
    assert tree_digest(ws / "registry") == before
    assert not (ws / "registry" / "ledger.jsonl").exists()


def test_unknown_decoy_surface_is_refused_at_register(ws: Path, cli) -> None:
    draft = ws / "drafts" / "podcast-selection-controls.yaml"
    text = draft.read_text()
    assert "decoy: tidewatch" in text
    bad = ws / "drafts" / "variant.yaml"
    bad.write_text(text.replace("decoy: tidewatch", "decoy: no-such-server"))
    before = tree_digest(ws / "registry")
    result = cli("-w", ws, "register", bad)
    assert result.code == 2
    assert "decoy" in result.stderr and "no-such-server" in result.stderr
    assert tree_digest(ws / "registry") == before


def test_a_control_that_cannot_apply_is_refused_at_register(ws: Path, cli) -> None:
    """A decoy already in the reference's pool adds nothing: refused before recording."""
    draft = ws / "drafts" / "podcast-selection-controls.yaml"
    bad = ws / "drafts" / "variant.yaml"
    bad.write_text(draft.read_text().replace("decoy: tidewatch", "decoy: weather"))
    before = tree_digest(ws / "registry")
    result = cli("-w", ws, "register", bad)
    assert result.code == 2
    assert "variant.yaml" in result.stderr and "already offered" in result.stderr
    assert tree_digest(ws / "registry") == before
