"""Bad input to the calibration engine's public functions (issue 39, item 8).

ValueError naming the argument for non-positive counts, NaN, levels outside (0, 1),
mismatched shapes and unknown names, before any simulation runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from prereg.stats.calibration import (
    FamilyPlan,
    PlannedTest,
    bootstrap_intervals,
    calibrate,
    contrast_family_rejects,
    contrast_intervals,
    contrast_pvalues,
    family_levels,
    verdict,
)
from prereg.stats.calibration_model import population

POP = population(12, 2, 0.4)
W2 = (-1.0, 1.0)
CPLAN = PlannedTest("c", "paired_bootstrap", weights=W2)
FAM = FamilyPlan("multiplicity", "holm", 0.05, "contrasts", (CPLAN,), arms=2)
PLAN = PlannedTest("primary", "mcnemar_exact")
YC = np.zeros((3, 12, 2), dtype=bool)
YT = np.ones((3, 12, 2), dtype=bool)

CASES: list[tuple[str, Callable[[], Any], str]] = [
    ("no data set", lambda: calibrate(POP, [PLAN], effect=0.1, sims=0), "sims"),
    ("no draw", lambda: calibrate(POP, [PLAN], effect=0.1, draws=0), "draws"),
    ("nan effect", lambda: calibrate(POP, [PLAN], effect=math.nan), "effect"),
    ("power above 1", lambda: calibrate(POP, [PLAN], effect=0.1, power_target=1.5), "power_target"),
    ("negative seed", lambda: calibrate(POP, [PLAN], effect=0.1, seed=-1), "seed"),
    ("verdict without sets", lambda: verdict("coverage", 0.9, 0.95, 0), "sims"),
    ("verdict nominal above 1", lambda: verdict("coverage", 0.9, 1.5, 100), "nominal"),
    ("verdict nominal 0", lambda: verdict("type I error", 0.0, 0.0, 100), "nominal"),
    ("verdict infinite estimate", lambda: verdict("coverage", math.inf, 0.95, 100), "estimate"),
    (
        "nan outcomes",
        lambda: bootstrap_intervals(YC, np.where(YT, np.nan, 0.0), None, 9, 0, [0.9]),
        "yt",
    ),
    ("rates as outcomes", lambda: bootstrap_intervals(YT * 0.5, YT, None, 9, 0, [0.9]), "yc"),
    ("nan contrast", lambda: contrast_intervals(np.array([[0.1, np.nan]]), 0.9, W2), "d"),
    ("one unit", lambda: contrast_intervals(np.array([[0.1], [0.2]]), 0.9, W2), "d"),
    ("no data set", lambda: contrast_pvalues(CPLAN, np.zeros((0, 4))), "d"),
    ("infinite contrast", lambda: contrast_pvalues(CPLAN, np.array([[0.1, np.inf]])), "d"),
    ("level 0 (contrast)", lambda: contrast_intervals(np.array([[0.1, 0.2]]), 0.0, W2), "level"),
    (
        "nan weights",
        lambda: contrast_intervals(np.array([[0.1, 0.2]]), 0.9, (np.nan, 1.0)),
        "weights",
    ),
    ("no weights", lambda: contrast_intervals(np.array([[0.1, 0.2]]), 0.9, ()), "weights"),
    ("nan arms", lambda: contrast_family_rejects(FAM, np.full((2, 3, 6, 1), np.nan)), "arms"),
    ("no arms", lambda: contrast_family_rejects(FAM, np.zeros((2, 0, 6, 1))), "arms"),
    ("unknown rule", lambda: family_levels("sidak", 0.05, 3), "method"),
    ("q 0", lambda: family_levels("holm", 0.0, 3), "q"),
    ("no member", lambda: family_levels("holm", 0.05, 0), "m"),
    ("empty family", lambda: FamilyPlan("multiplicity", "holm", 0.05, "secondary", ()), "members"),
    (
        "shapes differ",
        lambda: bootstrap_intervals(YC, YT[:, :6], None, 100, 0, [0.95]),
        "yc and yt",
    ),
    ("no draw (intervals)", lambda: bootstrap_intervals(YC, YT, None, 0, 0, [0.95]), "draws"),
    ("level 1", lambda: bootstrap_intervals(YC, YT, None, 100, 0, [1.0]), "levels"),
    ("unit codes", lambda: bootstrap_intervals(YC, YT, np.arange(5), 100, 0, [0.95]), "units"),
    ("alpha 0", lambda: PlannedTest("t", "mcnemar_exact", alpha=0.0), "alpha"),
    ("level above 1", lambda: PlannedTest("t", "paired_bootstrap", level=1.2), "level"),
    ("zero draws", lambda: PlannedTest("t", "paired_bootstrap", draws=0), "draws"),
    ("unknown sides", lambda: PlannedTest("t", "paired_bootstrap", sides="up"), "sides"),
    ("negative seed (plan)", lambda: PlannedTest("t", "paired_bootstrap", seed=-2), "seed"),
    (
        "nan weight",
        lambda: PlannedTest("t", "paired_bootstrap", weights=(math.nan, 1.0)),
        "weights",
    ),
    ("zero weights", lambda: PlannedTest("t", "paired_bootstrap", weights=(0.0, 0.0)), "weights"),
]


@pytest.mark.parametrize(("case", "call", "name"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_raises_a_value_error_naming_the_argument(
    case: str, call: Callable[[], Any], name: str
) -> None:
    with pytest.raises(ValueError, match=name):
        call()


def test_a_row_without_data_sets_still_reads_no_verdict() -> None:
    assert verdict("coverage", math.nan, 0.95, 0) == "-"
    assert verdict("power", 0.8, None, 0) == "-"
