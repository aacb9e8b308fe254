"""Paired changes between every two registered arms (issue 13, item 7), descriptive.

With three or more arms (configurations, factorial cells) the registered tests compare the
pairs and contrasts the registration names; this table shows every other pair too, each
labelled with both configurations, as the paired bootstrap of the difference in mean
outcome (treatment = the later arm minus the earlier one, every run, task as the unit,
2,000 draws, the registration's seed; the registered test's estimate and interval, without
the rest of its report). Descriptive only: no test, no multiplicity, never
the verdict. Control arms are left out (they are judged by the controls section).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from prereg.registry.schema import Registration, TestSpec
from prereg.reports.model import PairwiseChange
from prereg.reports.pairs import PairData
from prereg.reports.registered.apply import paired_difference

#: Bootstrap draws per pair (descriptive intervals; the registered tests keep theirs).
DRAWS = 2_000


def pairwise_changes(
    reg: Registration, pairs_for: Callable[[TestSpec], PairData], seed: int
) -> list[PairwiseChange]:
    """Every pair of plain arms, in registration order; empty with fewer than three."""
    arms = [a.id for a in reg.arms if a.control is None]
    if len(arms) < 3:
        return []
    digests = {a: reg.config_of(a).model_dump_json() for a in arms}
    out = []
    for control, treatment in itertools.combinations(arms, 2):
        spec = TestSpec(test="paired_bootstrap", compare=(control, treatment), draws=DRAWS)
        pairs = pairs_for(spec)
        if not pairs.n:
            continue
        estimate, interval = paired_difference(spec, pairs, seed)
        out.append(
            PairwiseChange(
                control=control,
                treatment=treatment,
                same_configuration=digests[control] == digests[treatment],
                tasks=pairs.n,
                control_rate=_mean(pairs.control_runs),
                treatment_rate=_mean(pairs.treatment_runs),
                estimate=estimate,
                interval=interval,
            )
        )
    return out


def _mean(runs: dict[str, dict[int, bool]]) -> float | None:
    values = [v for by_repeat in runs.values() for v in by_repeat.values()]
    return sum(values) / len(values) if values else None
