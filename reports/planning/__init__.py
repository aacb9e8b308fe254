"""Planning: what a paired design can detect, from options or from a pilot's runs.

Owns: a plan from its inputs alone (:mod:`.design`), planning inputs estimated from a
pilot registration's runs (:mod:`.pilot`) and planning from runs, pilots and replicates
(:mod:`.from_runs`). The formulas are :mod:`prereg.stats.planning`.

May import: the lower layers, the observations and the run store (a pilot's runs are read
verified).
"""

#: the project prefixes this subpackage may import (tests/test_architecture.py)
MAY_IMPORT: tuple[str, ...] = (
    "prereg.core",
    "prereg.stats",
    "prereg.experiments",
    "prereg.registry",
    "prereg.reports.observations",
    "prereg.runners.store.choose",
)
