"""The stored calibration as every renderer shows it: one table, its caption, one line.

Shared by the terminal, Markdown and HTML renderers so the three say the same thing;
each escapes the strings itself (labels and notes come from the registration).
"""

from __future__ import annotations

import math

from prereg.reports.model import CalibrationReport, Report

TITLE = "Calibration of the registered analysis (simulated; never changes the verdict)"
#: verdicts of a row that are worth a reader's attention
FLAGGED = ("inflated", "under-covers", "below target")


def _num(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.3f}"


def calibration_table(cal: CalibrationReport) -> tuple[list[str], list[list[str]]]:
    header = ["analysis", "test", "quantity", "scenario", "nominal", "achieved", "MC SE", "verdict"]
    rows = [
        [
            row.label,
            row.test,
            row.quantity,
            row.scenario,
            _num(row.nominal),
            _num(row.estimate),
            _num(row.mc_se),
            row.verdict,
        ]
        for row in cal.rows
    ]
    return header, rows


def calibration_caption(cal: CalibrationReport) -> str:
    design = cal.design
    what = ""
    if design.get("prompts") is not None:
        what = (
            f" on {design.get('prompts')} tasks x {design.get('runs_per_arm')} run(s) per arm, "
            f"planned effect {design.get('effect', math.nan):+.3f}"
        )
    return (
        f"prereg calibrate: {cal.sims} simulated data sets per scenario (replications), "
        f"seed {cal.seed}, {cal.bootstrap_draws} bootstrap resamples{what}; computed "
        f"{cal.computed_at} by prereg {cal.prereg_version or '?'} ({cal.file}, digest "
        f"{cal.digest}). Verdicts are judged against the Monte Carlo error."
    )


def calibration_line(report: Report) -> str | None:
    """The terminal's one-line summary (None when there is nothing to say)."""
    cal = report.calibration
    if cal is None:
        return (
            None if report.calibration_note is None else f"calibration: {report.calibration_note}"
        )
    flagged = [r for r in cal.rows if r.verdict in FLAGGED]
    head = f"calibration (seed {cal.seed}, {cal.sims} replications): {len(cal.rows)} figure(s)"
    if not flagged:
        return f"{head}, none flagged"
    named = "; ".join(
        f"{r.label} {r.quantity} ({r.scenario}) {_num(r.estimate)} {r.verdict}" for r in flagged[:3]
    )
    more = f"; and {len(flagged) - 3} more" if len(flagged) > 3 else ""
    return f"{head}, {len(flagged)} flagged: {named}{more}"
