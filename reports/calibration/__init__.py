"""Calibration in the report: ``prereg calibrate`` and what ``analyse`` shows of it.

Owns: the simulated population calibrated to a pilot (:mod:`.from_runs`), the stored
calibration of a registration (:mod:`.stored`) and the one table, caption and line every
renderer shows (:mod:`.text`). The simulation is :mod:`prereg.stats.calibration`.

May import: the lower layers, the report model and the pilot estimates of
:mod:`prereg.reports.planning`.
"""

#: the project prefixes this subpackage may import (tests/test_architecture.py)
MAY_IMPORT: tuple[str, ...] = (
    "prereg.core",
    "prereg.stats",
    "prereg.experiments",
    "prereg.registry",
    "prereg.reports.model",
    "prereg.reports.planning.from_runs",
)
