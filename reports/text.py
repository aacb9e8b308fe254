"""Wording shared by the terminal, Markdown and HTML renderers.

One place decides how a verdict is announced, so that an exploratory report can
never announce a confirmatory claim in one format and not in another.
"""

from __future__ import annotations

import math

from prereg.reports.model import Interval, Report

EXPLORATORY_BANNER = ("EXPLORATORY: not a confirmatory claim. Nothing in this report may be "
                      "cited as confirming the hypothesis.")


def num(value: float | None, digits: int = 3) -> str:
    if value is None or not math.isfinite(value):
        return "null"
    return f"{value:.{digits}f}"


def pct(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "null"
    return f"{100 * value:.1f}%"


def pvalue(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "null"
    if value < 1e-4:
        return f"{value:.2e}"
    return f"{value:.4f}"


def interval(iv: Interval | None, scale: str = "num") -> str:
    if iv is None:
        return "null"
    fmt = pct if scale == "pct" else num
    return f"{fmt(iv.low)} to {fmt(iv.high)} ({iv.level:.0%})"


def headline(report: Report) -> tuple[str, str]:
    """(label, text) announcing the outcome, worded by the report's mode."""
    v = report.verdict_detail
    if report.mode == "confirmatory":
        return "Verdict", report.verdict
    if report.verdict in ("incomplete", "not_runnable"):
        return "Verdict", report.verdict
    return ("Exploratory reading",
            f"the registered rule reads '{report.verdict}' on these runs "
            f"(exploratory: not a confirmatory claim; decided by {v.decided_by})")


def primary_line(report: Report) -> str:
    p = report.primary
    if p is None:
        return "primary test: not computed (no completed run)"
    stat = f"p = {pvalue(p.pvalue)}" if p.evalue is None else \
        f"e = {num(p.evalue, 2)} (p = {pvalue(p.pvalue)})"
    disc = ""
    if p.discordant is not None:
        disc = (f"; discordant pairs {p.discordant.n} (only {p.compare[0]}: {p.discordant.b}, "
                f"only {p.compare[1]}: {p.discordant.c})")
        if p.min_discordant is not None:
            disc += f", needed at least {p.min_discordant}"
    return (f"{p.test} ({p.sides}, alpha {p.alpha:g}) on {p.n} tasks: estimate "
            f"{num(p.estimate)}, interval {interval(p.interval)}, {stat}{disc}")
