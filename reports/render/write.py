"""Writing a report to ``reports/<id>/``: report.json, report.md, report.html, figures.

The figures folder holds exactly the report's figures: a PNG an earlier analysis drew
and this one does not name is deleted.

A confirmatory registration's exploratory reports (``--explore`` or
``--allow-incomplete``) go to ``reports/<id>/exploratory/`` so they can never
overwrite the confirmatory report. Files are written whole (temporary file,
then rename), so a reader never sees a half-written report.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from prereg.core.files import write_atomic
from prereg.core.output import dumps
from prereg.core.workspace import Workspace
from prereg.reports.model import Report
from prereg.reports.render import html as render_html
from prereg.reports.render import markdown as render_md
from prereg.reports.render.figures import Drawing


def output_dir(ws: Workspace, report: Report) -> Path:
    base = ws.reports / report.registration
    if report.kind == "confirmatory" and report.mode == "exploratory":
        return base / "exploratory"
    return base


def _write(path: Path, data: bytes) -> None:
    write_atomic(path, data, what=f"the report file {path.name}")


def write_report(
    ws: Workspace,
    report: Report,
    meanwhile: Callable[[dict[str, Any]], object] | None = None,
) -> Path:
    """Draw the figures, then write every file; returns the folder.

    The largest figure is drawn in a forked child (:class:`Drawing`) while this process
    draws the others, then makes report.json and report.md (they name the figures, and
    hold no picture) and calls ``meanwhile`` with report.json's data (the caller's own
    work on the finished report, such as its printed JSON, with no second dump of the
    report); report.html, which embeds the pictures, is made once all are in. Files are
    written last, each whole."""
    out = output_dir(ws, report)
    drawing = Drawing(report)
    report.figures = drawing.names
    data = report.to_json()
    document = (dumps(data) + "\n").encode()
    markdown = render_md.render(report).encode()
    if meanwhile is not None:
        meanwhile(data)
    figures = drawing.result()
    for name, png in figures.items():
        _write(out / "figures" / f"{name}.png", png)
    _write(out / "report.json", document)
    _write(out / "report.md", markdown)
    _write(out / "report.html", render_html.render(report, figures).encode())
    _remove_stale(out / "figures", set(figures))
    return out


def _remove_stale(folder: Path, drawn: set[str]) -> None:
    """Delete the PNGs an earlier analysis drew that this report does not name (a figure
    now withheld, or one this version no longer draws), so the folder holds this report's
    figures only and never a picture of numbers the report no longer prints."""
    if not folder.is_dir():
        return
    for path in folder.glob("*.png"):
        if path.stem not in drawn and path.is_file():
            path.unlink()
