"""Per-intent intervals on too few tasks say so (issues 14 and 39).

An intent with fewer than MIN_INTENT_TASKS (FEW_CLUSTERS, 10: the cluster bootstrap keeps
its level from 10 clusters) tasks gets no interval: report.json has a null interval and
the reason, Markdown and HTML print "too few tasks" where the interval would be. An intent
with enough tasks but no discordant one gets no "0.000 to 0.000" either: its row says there
are too few discordant tasks. The other intents keep their paired bootstrap interval. The
calibration simulates only the intervals the report prints.
"""

from __future__ import annotations

import json
from pathlib import Path

from prereg.registry import calibration as cal
from prereg.registry.calibration import MIN_INTENT_TASKS, PER_INTENT, SplitTasks
from prereg.registry.schema import Registration
from prereg.stats.bootstrap import FEW_CLUSTERS
from tests.reports import append, make_lab, paired_records, register, registration


def test_intents_below_the_threshold_print_too_few_tasks(cli, ws: Path) -> None:
    assert MIN_INTENT_TASKS == FEW_CLUSTERS == 10
    # 38 tasks over 4 intents (task k in intent k mod 4): i1, i2 have 10 tasks, i3, i4 9
    tasks = make_lab(ws, n_tasks=38, n_intents=4)
    digest = register(cli, ws, registration("lab-intents"))
    control = [[True] if k % 3 else [False] for k in range(38)]
    treatment = [[not c[0]] if k == 0 else c for k, c in enumerate(control)]  # i1's task 0
    append(ws, paired_records("lab-intents", digest, tasks, control, treatment, n_intents=4))
    result = cli("-w", ws, "analyse", "lab-intents", "--json")
    assert result.code == 0, result.stderr
    rows = {r["intent"]: r for r in result.json()["per_intent"]}
    one = rows["i1"]  # one discordant task of ten: an interval with width, around -0.1
    assert one["tasks"] == 10 and one["interval_note"] is None
    assert one["interval"]["low"] < one["difference"] < one["interval"]["high"]
    none = rows["i2"]  # ten tasks, none discordant: no interval, and why
    assert none["tasks"] == 10 and none["interval"] is None
    assert none["interval_note"].startswith("no interval: too few discordant tasks")
    for intent in ("i3", "i4"):
        assert rows[intent]["tasks"] == 9
        assert rows[intent]["interval"] is None
        assert rows[intent]["interval_note"] == "too few tasks (9 < 10)"
        assert rows[intent]["difference"] == 0.0  # the point estimate is still shown
    folder = ws / "reports" / "lab-intents"
    assert json.loads((folder / "report.json").read_text())["per_intent"][2]["interval"] is None
    md = (folder / "report.md").read_text()
    assert md.count("too few tasks (9 &lt; 10)") == 2  # escaped as every cell is
    for intent in ("i2", "i3"):
        row = next(line for line in md.splitlines() if line.startswith(f"| {intent} |"))
        assert "too few" in row and " to " not in row  # no degenerate "0.000 to 0.000"
    assert (folder / "report.html").read_text().count("too few tasks (9 &lt; 10)") == 2


def test_calibration_simulates_only_the_printed_intervals() -> None:
    reg = Registration.model_validate(
        {
            **registration("lab-cal"),
            "design": {"repeats": 1, "seed": 3},
        }
    )
    intents = ("a",) * 10 + ("b",) * 9 + ("c",) * 12
    split = SplitTasks(ids=tuple(f"t{i}" for i in range(31)), intents=intents)
    plans, _, _ = cal.test_plans(reg, split)
    labels = [p.label for p in plans if p.label.startswith(PER_INTENT)]
    assert labels == [f"{PER_INTENT}: a", f"{PER_INTENT}: c"]
