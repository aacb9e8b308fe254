"""Per-intent intervals on too few tasks say so (issue 14, item 4).

An intent with fewer than MIN_INTENT_TASKS (5) tasks gets no interval: report.json has a
null interval and the reason, Markdown and HTML print "too few tasks" where the
interval would be; intents at or above the threshold keep their paired bootstrap
interval. The calibration simulates only the intervals the report prints.
"""

from __future__ import annotations

import json
from pathlib import Path

from prereg.registry import calibration as cal
from prereg.registry.calibration import MIN_INTENT_TASKS, PER_INTENT, SplitTasks
from prereg.registry.schema import Registration
from tests.reports import append, make_lab, paired_records, register, registration


def test_intents_below_the_threshold_print_too_few_tasks(cli, ws: Path) -> None:
    # 18 tasks over 4 intents (task k in intent k mod 4): i1 and i2 have 5 tasks, i3 and i4 4
    tasks = make_lab(ws, n_tasks=18, n_intents=4)
    digest = register(cli, ws, registration("lab-intents"))
    same = [[True] if k % 3 else [False] for k in range(18)]  # no discordant pair at all
    append(ws, paired_records("lab-intents", digest, tasks, same, same, n_intents=4))
    result = cli("-w", ws, "analyse", "lab-intents", "--json")
    assert result.code == 0, result.stderr
    rows = {r["intent"]: r for r in result.json()["per_intent"]}
    assert MIN_INTENT_TASKS == 5
    for intent in ("i1", "i2"):
        assert rows[intent]["tasks"] == 5 and rows[intent]["interval"] is not None
        assert rows[intent]["interval_note"] is None
    for intent in ("i3", "i4"):
        assert rows[intent]["tasks"] == 4
        assert rows[intent]["interval"] is None
        assert rows[intent]["interval_note"] == "too few tasks (4 < 5)"
        assert rows[intent]["difference"] == 0.0  # the point estimate is still shown
    folder = ws / "reports" / "lab-intents"
    assert json.loads((folder / "report.json").read_text())["per_intent"][2]["interval"] is None
    md = (folder / "report.md").read_text()
    assert md.count("too few tasks (4 &lt; 5)") == 2  # escaped as every cell is
    row = next(line for line in md.splitlines() if line.startswith("| i3 |"))
    assert "too few tasks" in row and " to " not in row  # no degenerate "0.000 to 0.000"
    assert (folder / "report.html").read_text().count("too few tasks (4 &lt; 5)") == 2


def test_calibration_simulates_only_the_printed_intervals() -> None:
    reg = Registration.model_validate(
        {
            **registration("lab-cal"),
            "design": {"repeats": 1, "seed": 3},
        }
    )
    intents = ("a",) * 5 + ("b",) * 4 + ("c",) * 6
    split = SplitTasks(ids=tuple(f"t{i}" for i in range(15)), intents=intents)
    plans, _, _ = cal.test_plans(reg, split)
    labels = [p.label for p in plans if p.label.startswith(PER_INTENT)]
    assert labels == [f"{PER_INTENT}: a", f"{PER_INTENT}: c"]
