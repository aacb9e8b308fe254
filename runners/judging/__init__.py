"""Judging: judges' verdicts on runs and people's gold labels, as chained records (issue 18).

Owns: what a judge is asked and how its answer is read (:mod:`.ask`, pure functions),
``prereg judge ID`` running every judge over the runs that need a verdict
(:mod:`.judge_runs`), the append-only verdict store (:mod:`.verdicts`), gold labels
(:mod:`.gold`), the verdict and gold chains pinned in the ledger (:mod:`.anchors`),
whether stored verdicts and labels belong to their registration's runs (:mod:`.belong`)
and their export and import (:mod:`.exchange`).

May import: the lower layers; the run record, the run store, the drivers and provider
plumbing a judge is called through, the run's preparation (a judge runs on a
registration's frozen experiment) and the export's target check and record formats. The
run store's verification reads :mod:`.verdicts` and :mod:`.anchors` (``prereg verify``
checks every chain), and :mod:`.belong`, so those import nothing of the store's
verification.
"""

#: the project prefixes this subpackage may import (tests/test_architecture.py)
MAY_IMPORT: tuple[str, ...] = (
    "prereg.core",
    "prereg.stats",
    "prereg.experiments",
    "prereg.registry",
    "prereg.runners.prepare",
    "prereg.runners.record",
    "prereg.runners.drivers.base",
    "prereg.runners.drivers.openai_chat",
    "prereg.runners.drivers.table",
    "prereg.runners.providers.credentials",
    "prereg.runners.providers.prices",
    "prereg.runners.providers.settings",
    "prereg.runners.providers.spend",
    "prereg.runners.exchange.export",
    "prereg.runners.exchange.text_formats",
    "prereg.runners.store",
)
