"""False invokes on an arm's negative runs, two definitions kept apart (seed 6.5, 7.1):
the published False-Invoke Rate (the first external call went to the focal integration)
and any external call, each with a Jeffreys interval deflated at the arm's rho_S.

Negative runs are never part of the score; this is their own block of the section.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence

from prereg import stats
from prereg.reports.invokerank.intervals import LEVELS, _iv
from prereg.reports.model import NegativeRate, Provenance
from prereg.reports.observations import Obs
from prereg.reports.pairs import runset

EXTERNAL = frozenset({"focal", "competitor", "other_external"})


def negative_rate(
    observations: Sequence[Obs], arm: str, classes: frozenset[str], definition: str, rho_s: float
) -> NegativeRate | None:
    """Calls on the arm's negative runs (terminal class in ``classes``), Jeffreys at rho_S."""
    runs = [
        o
        for o in observations
        if o.arm == arm and o.polarity == "negative" and o.ok and o.terminal_class is not None
    ]
    if not runs:
        return None
    calls: dict[str, int] = defaultdict(int)
    sizes: dict[str, int] = defaultdict(int)
    for o in runs:
        sizes[o.task_id] += 1
        calls[o.task_id] += o.terminal_class in classes
    rho, source = rho_s, "pooled rho_S of the arm's positive runs"
    if math.isnan(rho):
        rho, source = stats.RHO_DEFAULTS["selected"], "stage default rho_S (not estimable)"
    tasks = list(sizes)
    ji = stats.false_invoke_rate(
        [calls[t] for t in tasks], [sizes[t] for t in tasks], rho, level=LEVELS[0]
    )
    return NegativeRate(
        definition=definition,
        calls=int(ji.successes),
        runs=int(ji.trials),
        prompts=len(tasks),
        rate=float(ji.estimate),
        interval=_iv(ji.low, ji.high, LEVELS[0], ji.method),
        rho=rho,
        rho_source=source,
        design_effect=float(ji.deff),
        provenance=Provenance(
            function="prereg.stats.false_invoke_rate",
            parameters={"rho": rho, "level": LEVELS[0], "terminal_classes": sorted(classes)},
            registration_field=None,
            runs=runset([o.unit for o in runs], f"arm {arm}; negative tasks; status ok"),
        ),
    )


def _negatives(
    observations: Sequence[Obs], arm: str, rho_s: float
) -> tuple[NegativeRate | None, NegativeRate | None]:
    focal = negative_rate(
        observations,
        arm,
        frozenset({"focal"}),
        "False-Invoke Rate: the first external call went to the focal integration",
        rho_s,
    )
    external = negative_rate(
        observations, arm, EXTERNAL, "any external call (focal, competitor or other)", rho_s
    )
    return focal, external
