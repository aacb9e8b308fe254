"""prereg.reports: loading runs with refusal, the registered analysis, rendering.

Public entry points: :func:`analyse` (load, check, analyse one registration),
:func:`write_report` (report.json / .md / .html and figures), :func:`compare`
(two registrations' runs, side by side and paired).
"""

from prereg.reports.analysis import Options, analyse
from prereg.reports.model import Report
from prereg.reports.write import output_dir, write_report

__all__ = ["Options", "Report", "analyse", "output_dir", "write_report"]
