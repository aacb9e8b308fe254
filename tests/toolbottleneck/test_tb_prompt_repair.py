"""Prompt repairs (issue 19, seed 4.3: a workflow prompt for W): the repaired arm differs
from the incumbent only in its registered system prompt.

On the simulated policy a system prompt is refused at register (it cannot read one);
a repair whose arm changes more than the prompt is refused; on a model host (the local
provider fake through the real Anthropic SDK, tests/toolbottleneck/tb_agent.py) the
repair runs and the report gives L, Gamma, Sigma, Sigma^k and Delta, with wall time and
cost measured. Expected values are worked out from the scripted model: without the
workflow prompt (``sloppy``) it reads only the first record, so on the high workflow it
misses two facts and fails, on the low one (all facts in one record) it succeeds; with
the prompt it follows the chain and succeeds on both; the switch (another model) follows
the chain unprompted. So L = 1, Gamma = 1, Sigma = 1 - 0 = 1. Specificity is measured
against the other pressures' repairs (issue 42): an interface guide (a D repair) run on
the same W cells leaves the model sloppy, so its Sigma^k = 0 and Delta = Sigma - Sigma^k =
1; the switch enters only the decision matrix.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from prereg.runners.store.choose import open_store
from tests.conftest import tree_digest
from tests.providers.fakes import FakeProviders, provider_env
from tests.toolbottleneck.helpers import BUNDLED
from tests.toolbottleneck.tb_agent import StudyBrain

STUDY = "two-families"
FAMILIES = ["overdue-case-escalation", "invoice-payment-approval"]
PROMPT = "Workflow guide: follow every record's lookup key to the next record. mode: correct"
GUIDE = "Interface guide: raw records place values under payload. mode: sloppy"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProviders]:
    with FakeProviders(StudyBrain()) as server:  # type: ignore[arg-type]
        provider_env(monkeypatch, server)
        yield server


@pytest.fixture
def study_ws(ws: Path) -> Path:
    folder = ws / "experiments" / STUDY
    (folder / "families").mkdir(parents=True)
    for name in FAMILIES:
        shutil.copy(BUNDLED / f"{name}.yaml", folder / "families" / f"{name}.yaml")
    entry = {
        "name": STUDY,
        "kind": "toolbottleneck",
        "families": [f"families/{n}.yaml" for n in FAMILIES],
        "seeds": [0],
    }
    (folder / "experiment.yaml").write_text(yaml.safe_dump(entry))
    return ws


def _arm(arm_id: str, workflow: str, **extra: Any) -> dict[str, Any]:
    cell = {"menu": 8, "workflow": workflow, "menu_mode": "fixed"}
    return {"id": arm_id, "surface": "variants", "toolbottleneck": cell, **extra}


def _doc(driver: str = "anthropic", **over: Any) -> dict[str, Any]:
    sonnet = {"host": {"driver": "anthropic", "model": "claude-sonnet-4-5"}}
    doc: dict[str, Any] = {
        "id": "prompt-repair",
        "title": "t",
        "hypothesis": "h",
        "falsification": "f",
        "experiment": STUDY,
        "kind": "exploratory",
        "split": "dev",
        "arms": [
            _arm("wp-high", "high", system_prompt=PROMPT),
            _arm("wp-low", "low", system_prompt=PROMPT),
            _arm("base-high", "high"),
            _arm("base-low", "low"),
            _arm("sw-high", "high", **sonnet),
            _arm("sw-low", "low", **sonnet),
            _arm("ig-high", "high", system_prompt=GUIDE),
            _arm("ig-low", "low", system_prompt=GUIDE),
        ],
        "system_prompt": "You are an agent. mode: sloppy",
        "repairs": [
            {
                "id": "workflow-prompt",
                "pressure": "W",
                "repaired": {"stressed": "wp-high", "unstressed": "wp-low"},
                "control": {"stressed": "base-high", "unstressed": "base-low"},
                "switches": [{"id": "sonnet", "stressed": "sw-high", "unstressed": "sw-low"}],
                "other_repairs": [
                    {"id": "guide", "pressure": "D", "stressed": "ig-high", "unstressed": "ig-low"}
                ],
                "equivalence_margin": 0.05,
            }
        ],
        "host": {"driver": driver, "model": "claude-haiku-4-5"},
        "budgets": {
            "completion_cap": 512,
            "episode_tokens": 100000,
            "call_limit_over_certified": 2,
            "turn_limit_over_calls": 2,
            "spend_usd": 5,
        },
        "design": {"repeats": 1, "seed": 5},
        "primary": {"test": "mcnemar_exact", "compare": ["wp-high", "base-high"]},
    }
    doc.update(over)
    return doc


def _register(ws: Path, cli: Any, doc: dict[str, Any]) -> Any:
    path = ws / "reg.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return cli("-w", ws, "register", path, "--json")


def test_a_system_prompt_is_refused_on_the_simulated_policy(study_ws: Path, cli: Any) -> None:
    doc = _doc(host={"driver": "local"})
    for arm in doc["arms"]:
        arm.pop("host", None)
    doc.pop("system_prompt")
    before = tree_digest(study_ws / "registry")
    result = _register(study_ws, cli, doc)
    assert result.code == 2
    assert "arms[0].system_prompt" in result.stderr and "simulated policy" in result.stderr
    assert tree_digest(study_ws / "registry") == before
    # the registration-wide prompt is named as such
    doc = _doc(host={"driver": "local"})
    for arm in doc["arms"]:
        arm.pop("host", None)
        arm.pop("system_prompt", None)
    result = _register(study_ws, cli, doc)
    assert result.code == 2 and "system_prompt" in result.stderr
    assert tree_digest(study_ws / "registry") == before


def test_a_prompt_repair_changes_only_the_prompt(study_ws: Path, cli: Any) -> None:
    doc = _doc()
    doc["arms"][0]["toolbottleneck"]["menu_mode"] = "routed"  # the prompt and the menu
    before = tree_digest(study_ws / "registry")
    result = _register(study_ws, cli, doc)
    assert result.code == 2
    assert "repairs[0].repaired.stressed" in result.stderr
    assert tree_digest(study_ws / "registry") == before


def test_a_prompt_repair_runs_on_a_model_host(
    study_ws: Path, cli: Any, fake: FakeProviders
) -> None:
    assert _register(study_ws, cli, _doc()).code == 0
    result = cli("-w", study_ws, "run", "prompt-repair", "--json", "--concurrency", "2")
    assert result.code == 0, result.stderr
    assert result.json()["completed"] == 16
    # the registered prompts went out as the provider's system field
    systems = {str(b.get("system")) for b in fake.model_bodies("anthropic")}
    assert PROMPT in systems and "You are an agent. mode: sloppy" in systems
    store = open_store(study_ws / "runs")
    try:
        records = [r for r in store.records() if r.registration_id == "prompt-repair"]
    finally:
        store.close()
    success = {(r.arm, r.cluster): r.success for r in records}
    for family in FAMILIES:  # the scripted behaviour, checked before it is relied on
        assert success[("base-high", family)] is False
        assert all(success[(a, family)] for a in ("wp-high", "wp-low", "base-low", "sw-high"))
    mean = {a: sum(bool(success[(a, f)]) for f in FAMILIES) / 2 for a, _ in success}
    loss = mean["base-low"] - mean["base-high"]
    gain = mean["wp-high"] - mean["base-high"]
    specific = gain - (mean["wp-low"] - mean["base-low"])
    other = (mean["ig-high"] - mean["base-high"]) - (mean["ig-low"] - mean["base-low"])
    expected = [loss, gain, specific, other, specific - other]
    assert expected == [1.0, 1.0, 1.0, 0.0, 1.0]

    out = cli("-w", study_ws, "analyse", "prompt-repair", "--json", "--allow-incomplete")
    assert out.code == 0, out.stderr
    study = out.json()["toolbottleneck"]
    assert study["label"].startswith("MODEL HOST")
    table = next(t for t in study["tables"] if t["title"].startswith("Repairs against"))
    row = table["rows"][0]
    assert row[:2] == ["workflow-prompt", "W"] and row[-1] == "2"  # two families
    assert "too few families (2 < 10)" in row[2]  # no interval at two families
    spec = next(t for t in study["tables"] if t["title"].startswith("Specificity"))
    (srow,) = spec["rows"]
    assert srow[3:5] == ["guide", "D"]
    shown = [row[2], row[3], row[4], srow[5], srow[6]]
    assert [float(cell.split(" pp")[0].split(";")[0]) / 100 for cell in shown] == expected
    tost = next(t for t in study["tables"] if t["title"].startswith("Equivalence"))
    assert tost["rows"][0][2] == "±5.0 pp"
    matrix = next(t for t in study["tables"] if t["title"].startswith("Decision matrix at"))
    assert matrix["rows"][0][1] == "sonnet"
    wall, cost = matrix["rows"][0][4], matrix["rows"][0][5]
    assert "not measured" not in wall and "not measured" not in cost  # the provider's
