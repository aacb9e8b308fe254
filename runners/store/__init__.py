"""The run store: where run records live, append-only and hash-chained (issue 38).

Owns: the store interface every reader and writer uses (:mod:`.interface`), its two
implementations, SQLite in the workspace (:mod:`.sqlite`, the default) and PostgreSQL for
many machines with unit claims (:mod:`.postgres`), choosing one from ``--store`` /
``PREREG_STORE`` (:mod:`.choose`), the per-digest hash chain of the records
(:mod:`.chain`) and the verification of every chain, schema and anchor (:mod:`.verify`).

May import: the lower layers, the run record (``prereg.runners.record``) and the
verdict and gold records whose chains ``prereg verify`` checks beside the runs'
(:mod:`prereg.runners.judging.verdicts`, :mod:`prereg.runners.judging.anchors`,
:mod:`prereg.runners.judging.belong`); nothing
of the drivers, the harness or the orchestration, which sit above the store.
"""

#: the project prefixes this subpackage may import (tests/test_architecture.py)
MAY_IMPORT: tuple[str, ...] = (
    "prereg.core",
    "prereg.stats",
    "prereg.experiments",
    "prereg.registry",
    "prereg.runners.record",
    "prereg.runners.judging.anchors",
    "prereg.runners.judging.belong",
    "prereg.runners.judging.verdicts",
)
