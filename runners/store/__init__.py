"""The run store: where run records live, append-only and hash-chained (issue 38).

Owns: the store interface every reader and writer uses (:mod:`.interface`), its two
implementations, SQLite in the workspace (:mod:`.sqlite`, the default) and PostgreSQL for
many machines with unit claims (:mod:`.postgres`), choosing one from ``--store`` /
``PREREG_STORE`` (:mod:`.choose`), the per-digest hash chain of the records
(:mod:`.chain`) and the verification of every chain, schema and anchor (:mod:`.verify`).

May import: the kernel (``prereg.core``), ``prereg.registry`` and the run record
(``prereg.runners.record``); nothing of the drivers, the harness or the orchestration,
which sit above the store.
"""
