"""ToolBottleneckBench runs (seed 001): a study's units played on the seed's sandboxes.

Owns: the offline study run, every (arm, task, repeat) scored by the seed's verified
success (:mod:`.study`), the simulated tool agent (:mod:`.host`), the public-handoff
controller (:mod:`.controller`) and a unit played by a driver under the seed's harness
contract (:mod:`.harness`). The task families, their
compiler and the sandboxes are :mod:`prereg.experiments.toolbottleneck`; the report is
:mod:`prereg.reports.toolbottleneck`.

May import: the lower layers, the run record, scoring, the driver protocol and the
credentials' redaction.
"""

#: the project prefixes this subpackage may import (tests/test_architecture.py)
MAY_IMPORT: tuple[str, ...] = (
    "prereg.core",
    "prereg.stats",
    "prereg.experiments",
    "prereg.registry",
    "prereg.runners.record",
    "prereg.runners.scoring",
    "prereg.runners.drivers.base",
    "prereg.runners.providers.credentials",
)
