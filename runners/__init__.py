"""prereg.runners: run units, drivers, harness, run store, resume.

Entry points: :func:`prereg.runners.api.run_registration` (what ``prereg run``
calls), :class:`prereg.runners.store.sqlite.RunStore` and
:class:`prereg.runners.record.RunRecord` (what analysis reads).
"""
