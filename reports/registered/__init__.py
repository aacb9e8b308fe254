"""The registered tests, applied exactly as registered, and the verdict they yield.

Owns: each registered test applied through :mod:`prereg.stats` only (:mod:`.apply`),
registered contrasts (:mod:`.contrasts`), per-intent rows and the multiplicity rule
(:mod:`.family`), the stopping rule's e-process (:mod:`.stopping`) and the mechanical
verdict (:mod:`.verdict`).

May import: the lower layers and the report's own data (the model, observations, pairs).
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
)
