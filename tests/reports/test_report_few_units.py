"""A cluster bootstrap over fewer than FEW_CLUSTERS (10) units cannot decide (issues 14, 39).

Below 10 clusters the bootstrap's level is not established (bench/cluster_coverage.py: its
worst designs under-cover), so the podcast draft's 5-task bootstrap primary is not a test
at the registered level: the report reads it inconclusive, whatever the data, and says why.
"""

from __future__ import annotations

from pathlib import Path

from prereg.stats.bootstrap import FEW_CLUSTERS

DRAFT = "drafts/podcast-selection-controls.yaml"


def test_a_bootstrap_primary_over_few_tasks_reads_inconclusive(ws: Path, cli) -> None:
    assert cli("-w", ws, "register", ws / DRAFT).code == 0
    reg_id = "podcast-selection-controls"
    assert cli("-w", ws, "run", reg_id, "--no-progress").code == 0
    result = cli("-w", ws, "analyse", reg_id, "--json")
    assert result.code == 0, result.stderr
    primary = result.json()["primary"]
    assert primary["test"] == "paired_bootstrap" and primary["units"] < FEW_CLUSTERS
    assert primary["decision"] in ("reject", "no_reject")  # the interval is still computed
    assert primary["reading"] == "inconclusive"
    assert primary["reason"].startswith(f"too few tasks ({primary['units']} < {FEW_CLUSTERS})")
