"""The bundled model-host draft (registry/drafts/toolbottleneck-api.yaml, issue 19): it
registers, its workflow-prompt repair changes only the system prompt, and ``prereg run
--dry-run`` shows each arm's units, requests and spend bound without sending anything.

The request bound is worked out here from the family files and the seed's contract: a
unit's turn limit is its variant's certified minimum (at its arm's workflow) + 2 + 2, and
an arm's bound is the sum over its units, the certified minimum being a search and a
read per record of the layout plus the action (readings 2, 4 and 38).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from prereg.experiments.toolbottleneck.compile import Cell, compile_cell
from prereg.experiments.toolbottleneck.family import load_family
from prereg.experiments.toolbottleneck.registrable import reference_length
from prereg.experiments.toolbottleneck.verify import answer_key
from tests.conftest import tree_digest
from tests.toolbottleneck.helpers import BUNDLED

DRAFT = "drafts/toolbottleneck-api.yaml"
#: the bundled study experiment's seeds (read from its file: issue 42 changed them)
SEEDS = len(yaml.safe_load((BUNDLED.parent / "experiment.yaml").read_text())["seeds"])


def test_the_api_draft_registers_and_dry_runs_per_arm(
    ws: Path, cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "PREREG_PRICES"):
        monkeypatch.delenv(name, raising=False)
    result = cli("-w", ws, "register", ws / DRAFT, "--json")
    assert result.code == 0, result.stderr
    frozen = json.loads((ws / "registry" / "frozen" / "toolbottleneck-api.json").read_text())
    registration = frozen["document"]["registration"]
    arms = {a["id"]: a for a in registration["arms"]}
    repair = registration["repairs"][0]
    for side in ("stressed", "unstressed"):
        fixed = arms[repair["repaired"][side]]
        control = arms[repair["control"][side]]
        assert fixed["toolbottleneck"] == control["toolbottleneck"]
        assert fixed.get("host") == control.get("host")
        assert fixed["system_prompt"] != registration["system_prompt"]
        assert control.get("system_prompt") is None  # the registration's prompt

    runs = tree_digest(ws / "runs")
    out = cli("-w", ws, "run", "toolbottleneck-api", "--dry-run", "--json")
    assert out.code == 0, out.stderr
    data = out.json()
    assert tree_digest(ws / "runs") == runs  # nothing written
    families = [yaml.safe_load(p.read_text()) for p in sorted(BUNDLED.glob("*.yaml"))]
    assert set(data["arms"]) == set(arms)
    for arm_id, arm in data["arms"].items():
        workflow = arms[arm_id]["toolbottleneck"]["workflow"]
        per_task = [
            2 * len(f["layouts"][workflow]) + ("action" in f) + 2 + 2
            for f in families
            for _ in range(SEEDS)
        ]
        assert arm["units_to_run"] == len(per_task)
        # each unit's own turn limit (its variant's certified minimum + 2 + 2), summed
        assert arm["requests"] == {"min": len(per_task), "max": sum(per_task)}
        assert arm["per_unit_max"]["requests"] == max(per_task)
        assert arm["spend_upper_bound_usd"] is not None and arm["spend_upper_bound_usd"] > 0
    assert data["driver"] == "anthropic"


@pytest.mark.parametrize("workflow", ["low", "medium", "high"])
def test_the_certified_minimum_formula_is_the_compilers(workflow: str) -> None:
    for path in sorted(BUNDLED.glob("*.yaml")):
        family = load_family(path)
        for handoffs in (0, 2) if workflow == "low" else (0,):
            block = "frontier" if handoffs else "capacity"
            variant = compile_cell(family, Cell(block, 8, workflow, handoffs, "raw"))
            certified = answer_key(variant.document).certified_minimum
            if handoffs:  # the read-only frontier (reading 4): reads only, no action call
                assert reference_length(family, workflow, handoffs, read_only=True) == certified
                # the seed's count by hand: a search and a read per record and per handoff
                assert certified == 2 * len(family.layouts.of(workflow)) + 2 * handoffs
            else:
                assert reference_length(family, workflow, handoffs) == certified
