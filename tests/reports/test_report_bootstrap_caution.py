"""A registered bootstrap over few prompts is reported with its known under-coverage."""

from __future__ import annotations

from pathlib import Path


def test_few_prompts_bootstrap_carries_a_caution(ws: Path, cli) -> None:
    draft = ws / "drafts" / "podcast-selection-controls.yaml"
    assert cli("-w", ws, "register", draft).code == 0
    assert cli("-w", ws, "run", "podcast-selection-controls", "--no-progress").code == 0
    report = cli("-w", ws, "analyse", "podcast-selection-controls", "--json").json()
    primary = report["primary"]
    assert primary["test"] == "paired_bootstrap"
    assert primary["n"] < 20
    assert f"caution: only {primary['n']} tasks" in primary["note"]


def test_enough_prompts_no_caution(ws: Path, cli) -> None:
    assert cli("-w", ws, "register", ws / "drafts" / "music-library-pilot.yaml").code == 0
    assert cli("-w", ws, "run", "music-library-pilot", "--no-progress").code == 0
    report = cli("-w", ws, "analyse", "music-library-pilot", "--json").json()
    boot = next(t for t in report["secondary"] if t["test"] == "paired_bootstrap")
    assert boot["n"] >= 20 and "caution" not in boot["note"]
