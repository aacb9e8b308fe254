"""A percentile bootstrap over fewer than 20 units cannot decide (issue 14).

Simulated under no effect, the podcast draft's 5-task bootstrap primary rejects about
12% of the time at alpha 0.05 (`prereg calibrate`): its decision is not a test at the
registered level, so the report reads it inconclusive, whatever the data, and says why.
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
    assert f"fewer than {FEW_CLUSTERS}" in primary["reason"]
