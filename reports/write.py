"""Writing a report to ``reports/<id>/``: report.json, report.md, report.html, figures.

A confirmatory registration's exploratory reports (``--explore`` or
``--allow-incomplete``) go to ``reports/<id>/exploratory/`` so they can never
overwrite the confirmatory report. Files are written whole (temporary file,
then rename), so a reader never sees a half-written report.
"""

from __future__ import annotations

from pathlib import Path

from prereg.core.files import write_atomic
from prereg.core.output import dumps
from prereg.core.workspace import Workspace
from prereg.reports import render_html, render_md
from prereg.reports.figures import draw_all
from prereg.reports.model import Report


def output_dir(ws: Workspace, report: Report) -> Path:
    base = ws.reports / report.registration
    if report.kind == "confirmatory" and report.mode == "exploratory":
        return base / "exploratory"
    return base


def _write(path: Path, data: bytes) -> None:
    write_atomic(path, data, what=f"the report file {path.name}")


def write_report(ws: Workspace, report: Report) -> Path:
    """Draw the figures, then write every file; returns the folder."""
    out = output_dir(ws, report)
    figures = draw_all(report)
    report.figures = list(figures)
    for name, png in figures.items():
        _write(out / "figures" / f"{name}.png", png)
    _write(out / "report.json", (dumps(report.to_json()) + "\n").encode())
    _write(out / "report.md", render_md.render(report).encode())
    _write(out / "report.html", render_html.render(report, figures).encode())
    return out
