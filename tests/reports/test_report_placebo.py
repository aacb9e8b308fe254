"""Placebo control: an A/A registration under the local host is almost never supported.

Two arms on the same surface differ only in their per-unit random seeds (the
local host's seeded choice between tools and answering by itself), so every
difference between them is noise. The registered primary test is the exact
sign-flip test on per-task mean outcomes over K = 2 repeats: under A/A the two
arms' labels are exchangeable within each task, so the test is exact and
"supported" should appear in at most one seed in twenty; we require at most 3
of 20. (InvokeRank's placebo uses a paired bootstrap interval instead, which
with two runs per arm is only approximately calibrated; the exact test is the
sharper instrument check.) The seeds are fixed, so the test is deterministic:
it fails only if the
instrument or the analysis starts manufacturing effects (for example by treating
repeats as independent prompts, or by an unpaired test on paired outcomes).

Each seed is registered through the CLI, then run and analysed through the library
calls the commands make (``run_registration``, ``analyse``): the verdict is the same,
and twenty reports' rendering and figures, which the other report tests cover, are not
drawn twenty times.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from prereg.core.workspace import Workspace
from prereg.reports.analysis import analyse
from prereg.runners.api import run_registration

SEEDS = range(20)


def test_a_over_a_is_not_supported_in_the_great_majority_of_seeds(cli, ws: Path) -> None:
    verdicts: Counter[str] = Counter()
    mcnemar: Counter[str] = Counter()
    for seed in SEEDS:
        reg_id = f"placebo-{seed:02d}"
        doc = {
            "id": reg_id,
            "title": "A/A placebo on the local host",
            "hypothesis": "Two identical arms differ in task success.",
            "falsification": "McNemar's exact test does not reject at alpha 0.05.",
            "experiment": "music-library",
            "kind": "exploratory",
            "split": "dev",
            "arms": [{"id": "left", "surface": "semantic"}, {"id": "right", "surface": "semantic"}],
            "host": {"driver": "local"},
            "design": {"repeats": 2, "seed": seed},
            "outcome": "success",
            "primary": {
                "test": "sign_flip_test",
                "alpha": 0.05,
                "sides": "two-sided",
                "aggregate": "mean",
            },
            "secondary": [{"test": "mcnemar_exact", "alpha": 0.05}],
        }
        path = ws / "drafts" / f"{reg_id}.yaml"
        path.write_text(json.dumps(doc))
        assert cli("-w", ws, "register", path, "--json").code == 0
        summary = run_registration(Workspace(ws), reg_id, concurrency=8)
        assert summary.remaining == 0
        report = analyse(Workspace(ws), reg_id)
        assert report.runs is not None and report.runs.evidence_class == "local"
        verdicts[str(report.verdict)] += 1
        mcnemar[str(report.secondary[0].decision)] += 1

    assert verdicts["supported"] <= 3, (verdicts, mcnemar)
    assert mcnemar["reject"] <= 3, (verdicts, mcnemar)
    # the control is informative only if the test could have rejected: the arms must
    # disagree somewhere, so most seeds read not_supported rather than inconclusive
    assert verdicts["not_supported"] >= 12, verdicts
