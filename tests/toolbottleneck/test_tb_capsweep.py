"""The completion-cap sweep table (seed appendix E.1) on hand-made records.

Four tasks. At cap 1024 the large menu fails three of them at the cap (the small menu
succeeds on all four): menu effect -75 pp, truncation 75%. At cap 16384 the large menu
fails one, on a wrong conclusion: -25 pp, no truncation. Interaction: +50 pp.
"""

from __future__ import annotations

import pytest

from prereg.reports.toolbottleneck.study import cap_sweep, study_markdown
from prereg.runners.toolbottleneck.study import StudyRecord
from tests.toolbottleneck.test_tb_decoder import _rec

SMALL = {"V": 8, "W": "low", "D": "raw"}
LARGE = {"V": 128, "W": "low", "D": "raw"}


def _records() -> list[StudyRecord]:
    out = []
    for i in range(4):
        task = f"f{i}@0"
        out.append(_rec("v8", SMALL, True, task=task))
        out.append(_rec("v8-big", SMALL, True, task=task, cap=16384))
        cut = i < 3
        out.append(_rec("v128", LARGE, not cut, task=task, flag="completion_cap", calls=0))
        wrong = i == 3
        out.append(_rec("v128-big", LARGE, not wrong, task=task, cap=16384))
    return out


def test_the_menu_contrast_at_each_cap_by_hand() -> None:
    rows = cap_sweep(_records(), "v8")
    assert [(r.cap, r.small, r.large) for r in rows] == [
        (1024, "v8", "v128"),
        (16384, "v8-big", "v128-big"),
    ]
    assert rows[0].effect == pytest.approx(-0.75)
    assert rows[0].truncated == pytest.approx(0.75)
    assert rows[1].effect == pytest.approx(-0.25)
    assert rows[1].truncated == pytest.approx(0.0)
    text = study_markdown(_records(), "v8", digest="sha256:" + "0" * 64, draws=200)
    assert "Interaction (largest cap minus smallest): +50.0 pp." in text
