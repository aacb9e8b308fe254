"""prereg.reports: loading runs with refusal, the registered analysis, rendering.

Entry points: :func:`prereg.reports.analysis.analyse` (load, check, analyse one
registration), :func:`prereg.reports.render.write.write_report` (report.json / .md / .html and
figures), :func:`prereg.reports.compare.compare` (two registrations' runs, side by side
and paired). This package module imports none of them, so a command that needs one
submodule (``plan`` needs :mod:`prereg.reports.planning.from_runs`) does not load the whole
analysis with numpy, scipy and matplotlib behind it.
"""
