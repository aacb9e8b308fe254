"""The completion-cap sweep in a registered study's report (issue 19, reading 33; seed
appendix E.1): arms at the smallest and largest menu under two caps (an arm's own
``budgets.completion_cap``), run on the simulated policy offline; the table's menu
effect and truncation at each cap, and their interaction, are recomputed here from the
stored records by hand (pairs on task and repeat)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from prereg.runners.store.choose import open_store
from tests.toolbottleneck.helpers import as_yaml, family_doc

STUDY = "cap-study"
CAPS = (64, 16384)


@pytest.fixture
def study_ws(ws: Path) -> Path:
    folder = ws / "experiments" / STUDY
    (folder / "families").mkdir(parents=True)
    first = family_doc(action=True)
    second = family_doc(action=False)
    second["id"], second["intent"] = "test-review", "review"
    names = []
    for doc in (first, second):
        (folder / "families" / f"{doc['id']}.yaml").write_text(as_yaml(doc))
        names.append(f"families/{doc['id']}.yaml")
    entry = {"name": STUDY, "kind": "toolbottleneck", "families": names, "seeds": [0, 1]}
    (folder / "experiment.yaml").write_text(yaml.safe_dump(entry))
    return ws


def _arm(menu: int, cap: int) -> dict[str, Any]:
    return {
        "id": f"v{menu}-cap{cap}",
        "surface": "variants",
        "toolbottleneck": {"menu": menu, "policy": "sim-truncating"},
        "budgets": {"completion_cap": cap},
    }


def test_the_registered_report_shows_the_cap_sweep(study_ws: Path, cli: Any) -> None:
    doc = {
        "id": "caps",
        "title": "t",
        "hypothesis": "h",
        "falsification": "f",
        "experiment": STUDY,
        "kind": "exploratory",
        "split": "dev",
        "arms": [_arm(menu, cap) for cap in CAPS for menu in (8, 12)],
        "host": {"driver": "local"},
        "budgets": {"call_limit_over_certified": 2, "turn_limit_over_calls": 2},
        "design": {"repeats": 2, "seed": 2},
        "primary": {"test": "mcnemar_exact", "compare": ["v8-cap64", "v12-cap64"]},
    }
    path = study_ws / "reg.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    assert cli("-w", study_ws, "register", path, "--json").code == 0
    assert cli("-w", study_ws, "run", "caps", "--json").code == 0
    out = cli("-w", study_ws, "analyse", "caps", "--json")
    assert out.code == 0, out.stderr
    tables = out.json()["toolbottleneck"]["tables"]
    sweep = next(t for t in tables if t["title"].startswith("Completion-cap sweep"))

    store = open_store(study_ws / "runs")
    try:
        records = [r for r in store.records() if r.registration_id == "caps"]
    finally:
        store.close()
    effects = []
    for cap, row in zip(CAPS, sweep["rows"], strict=True):
        small = {(r.task_id, r.repeat): r for r in records if r.arm == f"v8-cap{cap}"}
        large = {(r.task_id, r.repeat): r for r in records if r.arm == f"v12-cap{cap}"}
        assert small.keys() == large.keys() and len(small) == 4 * 2
        diffs = [int(bool(large[k].success)) - int(bool(small[k].success)) for k in small]
        effect = sum(diffs) / len(diffs)
        cut = sum(r.terminal_flag == "completion_cap" for r in large.values()) / len(large)
        effects.append(effect)
        assert row == [
            str(cap),
            f"v12-cap{cap} - v8-cap{cap}",
            f"{100 * effect:+.1f} pp",
            f"{100 * cut:.1f}%",
        ]
    assert sweep["note"] == (
        f"Interaction (largest cap minus smallest): {100 * (effects[1] - effects[0]):+.1f} pp."
    )
    # the small cap truncates the large menu at all (else the table shows nothing of interest)
    assert sweep["rows"][0][3] != "0.0%"
