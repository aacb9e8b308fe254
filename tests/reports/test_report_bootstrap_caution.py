"""A registered bootstrap over fewer than FEW_CLUSTERS prompts prints no interval, and says
why (issue 39: an interval the data cannot support is withheld with its reason)."""

from __future__ import annotations

from pathlib import Path

from prereg.stats.bootstrap import FEW_CLUSTERS


def test_few_prompts_bootstrap_carries_a_caution(ws: Path, cli) -> None:
    draft = ws / "drafts" / "podcast-selection-controls.yaml"
    assert cli("-w", ws, "register", draft).code == 0
    assert cli("-w", ws, "run", "podcast-selection-controls", "--no-progress").code == 0
    report = cli("-w", ws, "analyse", "podcast-selection-controls", "--json").json()
    primary = report["primary"]
    assert primary["test"] == "paired_bootstrap"
    n = primary["n"]
    assert n < FEW_CLUSTERS
    assert f"too few tasks ({n} < {FEW_CLUSTERS}): interval withheld" in primary["note"]
    iv = primary["interval"]
    assert iv["low"] is None and iv["high"] is None
    assert iv["reason"].startswith(f"too few tasks ({n} < {FEW_CLUSTERS}): no interval")
    md = (ws / "reports" / "podcast-selection-controls" / "report.md").read_text()
    assert f"too few tasks ({n} &lt; {FEW_CLUSTERS}): no interval" in md


def test_enough_prompts_no_caution(ws: Path, cli) -> None:
    assert cli("-w", ws, "register", ws / "drafts" / "music-library-pilot.yaml").code == 0
    assert cli("-w", ws, "run", "music-library-pilot", "--no-progress").code == 0
    report = cli("-w", ws, "analyse", "music-library-pilot", "--json").json()
    boot = next(t for t in report["secondary"] if t["test"] == "paired_bootstrap")
    assert boot["n"] >= FEW_CLUSTERS and "too few" not in boot["note"]
    assert boot["interval"]["low"] < boot["interval"]["high"]
