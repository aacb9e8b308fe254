"""Rendering a report: from the report model to the terminal, report.md, report.html, figures.

Owns: wording every renderer shares (:mod:`.text`), the terminal summary (:mod:`.terminal`)
and its width-fitting tables (:mod:`.table`), Markdown (:mod:`.markdown`), self-contained
HTML (:mod:`.html`), the figures (:mod:`.figures`, matplotlib's Agg backend; the
InvokeRank Figures 2, 3, 5 and 8 in :mod:`.invokerank_figures`, the ToolBottleneckBench
study's Figures 2a, 3c, 6 and 11 in :mod:`.study_figures`) and writing
them all to ``reports/<id>/`` (:mod:`.write`). Rendering computes nothing: every figure
comes from the model.

May import: the kernel, the report model and the plain-text forms of the judged and
calibration sections.
"""

#: the project prefixes this subpackage may import (tests/test_architecture.py)
MAY_IMPORT: tuple[str, ...] = (
    "prereg.core",
    "prereg.reports.model",
    "prereg.reports.judged.text",
    "prereg.reports.calibration.text",
)
