"""``prereg compare A B`` across hosts and models (issue 13, item 7): allowed when the
experiment and split match, each change labelled by configuration; different
experiments, splits or evidence classes are still refused (exit 4)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.harness_rules.helpers import draft


def _run(ws: Path, cli: Any, name: str, **over: Any) -> None:
    assert cli("-w", ws, "register", draft(ws, name, **over), "--json").code == 0
    result = cli("-w", ws, "run", name, "--json")
    assert result.code == 0, result.stderr


def test_compare_works_across_local_profiles_and_labels_them(ws: Path, cli: Any) -> None:
    _run(ws, cli, "careful", host={"driver": "local", "model": "local-careful"})
    _run(ws, cli, "hasty", host={"driver": "local", "model": "local-hasty"})
    result = cli("-w", ws, "compare", "careful", "hasty", "--json")
    assert result.code == 0, result.stdout + result.stderr
    data = result.json()
    assert data["a"]["configurations"]["baseline"].startswith("local local-careful [")
    assert data["b"]["configurations"]["baseline"].startswith("local local-hasty [")
    change = next(c for c in data["changes"] if c["arm"] == "baseline")
    assert change["same_configuration"] is False
    assert change["configuration_a"] == data["a"]["configurations"]["baseline"]
    assert change["configuration_b"] == data["b"]["configurations"]["baseline"]
    assert change["tasks"] > 0
    assert any(d.startswith("host:") for d in data["differences"])
    assert "same experiment and split" in data["requirements"]
    human = cli("-w", ws, "compare", "careful", "hasty")
    assert human.code == 0 and "local local-careful" in human.stdout
    assert "-> local local-hasty" in human.stdout


def test_compare_still_refuses_other_splits_and_evidence_classes(ws: Path, cli: Any) -> None:
    _run(ws, cli, "dev-local")
    _run(ws, cli, "validation-local", split="validation")
    _run(ws, cli, "dev-replay", host={"driver": "replay"})
    split = cli("-w", ws, "compare", "dev-local", "validation-local", "--json")
    assert split.code == 4
    assert any("splits differ" in d for d in split.json()["details"])
    replay = cli("-w", ws, "compare", "dev-local", "dev-replay", "--json")
    assert replay.code == 4
    assert any("evidence classes differ" in d for d in replay.json()["details"])
