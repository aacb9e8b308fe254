"""Figures are titled by what they show, in both report.md and report.html (issue 43).

With every intent below the per-intent minimum the forest plot holds only the whole
design's paired difference: it must not be captioned "per intent". With intents that have
intervals it is. The two renderers caption each figure the same way.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.reports import append, make_lab, paired_records, register, registration

WHOLE = "Paired difference between the arms, whole design (no intent with an interval)"
PER_INTENT = "Paired differences per intent (forest plot)"


def _captions(ws: Path, reg_id: str) -> tuple[list[str], list[str]]:
    folder = ws / "reports" / reg_id
    md = re.findall(r"!\[([^\]]*)\]\(figures/forest\.png\)", (folder / "report.md").read_text())
    html = (folder / "report.html").read_text()
    forest = re.findall(
        r"<figure data-figure=\"forest\"><div class=\"scroll\"><img alt=\"([^\"]*)\"[^>]*>"
        r"</div><figcaption>([^<]*)<",
        html,
    )
    return md, [c for alt, c in forest if alt == c and "aired difference" in c]


def _lab(ws: Path, cli: Any, reg_id: str, n_tasks: int, n_intents: int) -> None:
    tasks = make_lab(ws, n_tasks=n_tasks, n_intents=n_intents, split="dev")
    digest = register(cli, ws, registration(reg_id, kind="exploratory"))
    control = [[k % 3 == 0] for k in range(n_tasks)]
    treatment = [[k % 3 == 0 or k % 4 == 1] for k in range(n_tasks)]
    append(ws, paired_records(reg_id, digest, tasks, control, treatment, n_intents=n_intents))
    result = cli("-w", ws, "analyse", reg_id, "--json")
    assert result.code == 0, result.stderr


def test_a_forest_without_intent_intervals_is_titled_by_what_it_shows(ws: Path, cli: Any) -> None:
    _lab(ws, cli, "few-per-intent", n_tasks=24, n_intents=4)  # 6 tasks an intent: < 10
    md, html = _captions(ws, "few-per-intent")
    assert md == [WHOLE] and html == [WHOLE]


def test_a_forest_with_intent_intervals_is_titled_per_intent(ws: Path, cli: Any) -> None:
    _lab(ws, cli, "enough-per-intent", n_tasks=24, n_intents=2)  # 12 tasks an intent
    md, html = _captions(ws, "enough-per-intent")
    assert md == [PER_INTENT] and html == [PER_INTENT]
