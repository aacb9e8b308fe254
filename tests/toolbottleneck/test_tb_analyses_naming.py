"""Model-host reports name configurations as configurations (issue 42, item 6): only a
study on the simulated policy says "simulated". A registered study on a model host (the
local provider fake behind the real SDK client, as tests/toolbottleneck/test_tb_host.py)
is analysed and every string of its study section and of report.md is searched.

The same run checks Table 8 (truncated first responses, issue 42 item 4), recounted here
from the stored records' traces: its "cut" arm is cut at the cap on its first request."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from prereg.runners.store.choose import open_store
from tests.providers.fakes import FakeProviders
from tests.toolbottleneck.test_tb_host import _arm, fake, study_ws

__all__ = ["fake", "study_ws"]  # fixtures, used here


def _strings(node: Any) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [s for v in node.values() for s in _strings(v)]
    if isinstance(node, list):
        return [s for v in node for s in _strings(v)]
    return []


def test_a_model_host_report_never_says_simulated(
    study_ws: Path, cli: Any, fake: FakeProviders
) -> None:
    doc = {
        "id": "named",
        "title": "t",
        "hypothesis": "h",
        "falsification": "f",
        "experiment": "one-family",
        "kind": "exploratory",
        "split": "dev",
        "arms": [_arm("correct"), _arm("neighbour", "fixed"), _arm("waste"), _arm("cut")],
        "host": {"driver": "anthropic", "model": "claude-haiku-4-5"},
        "budgets": {
            "completion_cap": 512,
            "episode_tokens": 100000,
            "call_limit_over_certified": 2,
            "turn_limit_over_calls": 2,
            "spend_usd": 5,
        },
        "design": {"repeats": 1, "seed": 3},
        "primary": {"test": "mcnemar_exact"},
        "contrasts": [
            {"id": "c", "unit": "cluster", "weights": {"correct": 1, "waste": -1}},
        ],
    }
    path = study_ws / "named.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    assert cli("-w", study_ws, "register", path, "--json").code == 0
    assert cli("-w", study_ws, "run", "named", "--json", "--concurrency", "1").code == 0
    out = cli("-w", study_ws, "analyse", "named", "--json")
    assert out.code == 0, out.stderr
    study = out.json()["toolbottleneck"]
    assert study["label"].startswith("MODEL HOST")
    notes = [t["note"] or "" for t in study["tables"]]
    assert any("a model host (driver and model), menu mode and completion cap" in n for n in notes)
    text = " ".join(_strings(study))
    assert "simulat" not in text.lower()
    md = (study_ws / "reports" / "named" / "report.md").read_text()
    assert "simulat" not in md.lower(), [ln for ln in md.splitlines() if "simulat" in ln.lower()]
    report = json.loads((study_ws / "reports" / "named" / "report.json").read_text())
    assert "simulat" not in json.dumps(report["toolbottleneck"]).lower()

    # Table 8, recounted from the stored traces
    table = next(t for t in study["tables"] if "seed Table 8" in t["title"])
    store = open_store(study_ws / "runs")
    try:
        records = [r for r in store.records() if r.registration_id == "named"]
    finally:
        store.close()
    ok = [r for r in records if r.status == "ok" and r.turns >= 1]
    cuts = [[e for e in r.trace if e.kind == "cut" and e.turn == 0] for r in ok]
    cut_texts = [c[0].text or "" for c in cuts if c]
    telemetry = any(
        e.usage is not None and e.usage.reasoning is not None for r in records for e in r.trace
    )
    assert len(table["rows"]) == 2  # the routed and the fixed-menu configurations
    first = sum(int(row[2]) for row in table["rows"])
    truncated = sum(int(row[3]) for row in table["rows"])
    assert first == len(ok) == 4
    assert truncated == len(cut_texts) == 1
    visible = sum(1 for t in cut_texts if t.strip())
    assert sum(int(row[5]) for row in table["rows"]) == visible
    assert all(row[1] == ("yes" if telemetry else "no") for row in table["rows"])
    assert all(row[7] == "withheld" for row in table["rows"])
    assert "not told apart" in table["note"]
    # routed versus fixed: 'correct' (routed, the first routed arm) against 'neighbour'
    lanes = next(t for t in study["tables"] if t["title"].startswith("Routed- versus fixed"))
    row = lanes["rows"][0]
    by_arm = {r.arm: r for r in records}
    assert row[0] == "correct vs neighbour"
    diff = int(bool(by_arm["correct"].success)) - int(bool(by_arm["neighbour"].success))
    assert row[2] == f"{100 * diff:+.1f} pp; too few families (1 < 10): no interval"
    assert row[6] == f"{8 * by_arm['neighbour'].turns:,.1f}"
    assert row[4] == f"{float(by_arm['neighbour'].tokens.total or 0):,.1f}"
    # the new tables in every rendering
    folder = study_ws / "reports" / "named"
    terminal = cli("-w", study_ws, "analyse", "named")
    assert terminal.code == 0
    for title in ("Routed- versus fixed-menu lanes", "Truncated first responses"):
        assert title in md and title in (folder / "report.html").read_text()
        assert title in terminal.stdout
    assert "simulat" not in terminal.stdout.lower()
