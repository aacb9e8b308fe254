"""Exchange: a registration's run records out of the workspace and back in, intact.

Owns: ``prereg export``, the target checked and the records verified before any format
writes them (:mod:`.export`); JSON Lines and CSV (:mod:`.text_formats`), the flat row both
CSV and Parquet use (:mod:`.rows`), Parquet (:mod:`.parquet`, optional extra), ``prereg
import``, which accepts only whole, intact chains of planned units (:mod:`.importing`),
Inspect AI eval logs read as run records (:mod:`.inspect_log`), and ``prereg telemetry
import``: an integration's observed calls, the evidence class T, into their own
append-only log, never as run records (:mod:`.telemetry`), and ToolSandbox's saved
``result_summary.json`` read and checked against itself for the appendix-K check, its own
evidence class, never run records (:mod:`.toolsandbox`). Writing an Inspect log
needs the report and lives in :mod:`prereg.reports.inspect_export`.

May import: the lower layers; the run record, scoring (an imported Inspect sample is
scored as a run is), the run store and the run's preparation (the registry opened as a run
opens it).
"""

#: the project prefixes this subpackage may import (tests/test_architecture.py)
MAY_IMPORT: tuple[str, ...] = (
    "prereg.core",
    "prereg.stats",
    "prereg.experiments",
    "prereg.registry",
    "prereg.runners.extras",
    "prereg.runners.prepare",
    "prereg.runners.record",
    "prereg.runners.scoring",
    "prereg.runners.providers.credentials",
    "prereg.runners.store",
)
