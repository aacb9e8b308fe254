"""Judged outcomes in the report (issue 18): the verdicts, checked, and what consumes them.

Owns: loading every verdict and gold label with its chain checked, agreement with gold,
and the judged outcomes the registered tests read (:mod:`.section`); the section as plain
lines for every renderer (:mod:`.text`).

May import: the lower layers, the report's own data and the judging records
(:mod:`prereg.runners.judging`).
"""

#: the project prefixes this subpackage may import (tests/test_architecture.py)
MAY_IMPORT: tuple[str, ...] = (
    "prereg.core",
    "prereg.stats",
    "prereg.experiments",
    "prereg.registry",
    "prereg.reports.model",
    "prereg.reports.observations",
    "prereg.reports.pairs",
    "prereg.runners.judging.anchors",
    "prereg.runners.judging.gold",
    "prereg.runners.judging.verdicts",
)
