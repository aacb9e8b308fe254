"""Terminal output: a short rich summary table and the verdict.

Every string is printed as a ``rich.text.Text`` made by
:func:`prereg.core.untrusted.display` (never parsed for markup), so ``[bold]`` in a
title or a tool description is printed, never interpreted, and escape sequences
(clear-screen, colour, OSC 8 links) and other control characters in it are shown as
escapes, never sent to the terminal.
"""

from __future__ import annotations

from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from prereg.core.untrusted import display
from prereg.reports.calibration_text import calibration_line
from prereg.reports.judged_text import judged_lines
from prereg.reports.model import Report
from prereg.reports.text import (
    EXPLORATORY_BANNER,
    configuration_table,
    configurations_differ,
    contrast_table,
    control_interval,
    control_short,
    drop_columns,
    headline,
    invokerank_choice_lines,
    invokerank_leaderboard,
    pct,
    primary_line,
)


def _span(low: float | None, high: float | None) -> str:
    if low is None or high is None:
        return "null"
    return f"{100 * low:.1f}-{100 * high:.1f}%"


def _invokerank(report: Report, console: Console) -> None:
    """The InvokeRank leaderboard (short; the full section is in report.md/html)."""
    if report.invokerank is None:
        return
    header, rows = drop_columns(invokerank_leaderboard(report), {"95% interval", "evidence"})
    table = Table(*header, title=display("InvokeRank score per arm (descriptive; points)"))
    for row in rows:
        table.add_row(*(display(str(cell)) for cell in row))
    console.print(table)
    for line in invokerank_choice_lines(report):
        console.print(display(line))


#: The study tables the terminal shows (the rest are in report.md and report.html).
STUDY_TERMINAL = ("Contrasts by resampling unit", "Failure census", "Decision matrix")


def _toolbottleneck(report: Report, console: Console) -> None:
    """A ToolBottleneckBench study (issue 19): its label, then the key tables."""
    study = report.toolbottleneck
    if study is None:
        return
    for t in study.tables:
        if not t.columns or not t.title.startswith(STUDY_TERMINAL):
            continue
        table = Table(title=display(t.title))
        for column in t.columns:
            table.add_column(display(column))
        for row in t.rows:
            table.add_row(*(display(cell) for cell in row))
        console.print(table)


def render(report: Report, console: Console, where: str | None = None) -> None:
    r = report
    console.print(display(f"{r.registration}: {r.title}", style="bold"))
    if r.toolbottleneck is not None:  # a study on the simulated policy says so first
        console.print(display(r.toolbottleneck.label, style="bold yellow"))
    console.print(
        display(
            f"digest {r.digest}  ({r.kind}, split {r.split}, evidence class "
            f"{r.runs.evidence_class or '-'})",
            style="dim",
        )
    )
    if r.mode == "exploratory":
        console.print(
            display(
                EXPLORATORY_BANNER + " (" + "; ".join(r.exploratory_reasons) + ")",
                style="bold yellow",
            )
        )
    level = f" ({r.arms[0].interval.level:.0%})" if r.arms else ""
    table = Table(
        "arm",
        "surface",
        "ok",
        "infra",
        "successes",
        "rate",
        "interval",
        "DEFF",
        title=display(f"outcome: {r.outcome}; Jeffreys intervals{level} deflated by DEFF"),
    )
    for a in r.arms:
        table.add_row(
            display(a.id),
            display(a.surface),
            str(a.runs_ok),
            str(a.infra_errors),
            f"{a.successes}/{a.measured}",
            pct(a.rate),
            _span(a.interval.low, a.interval.high),
            f"{a.design_effect:.2f}",
        )
    console.print(table)
    if configurations_differ(r):
        header, rows = drop_columns(configuration_table(r), {"configuration", "params"})
        configs = Table(*header, title=display("configurations (the arms differ)"))
        for row in rows:
            configs.add_row(*(display(str(cell)) for cell in row))
        console.print(configs)
    console.print(display(primary_line(r)))
    if r.contrasts:
        header, rows = drop_columns(contrast_table(r), {"weights", "test"})
        contrasts = Table(*header, title=display("registered contrasts"))
        for row in rows:
            contrasts.add_row(*(display(str(cell)) for cell in row))
        console.print(contrasts)
    if r.controls:
        controls = Table(
            "check",
            "arm",
            "estimate",
            "interval",
            "rule",
            "verdict",
            title=display("instrument controls (registered; never change the verdict)"),
        )
        for c in r.controls:
            style = {"pass": "green", "fail": "bold red"}.get(c.verdict, "yellow")
            controls.add_row(
                display(c.check),
                display(c.arm),
                display(control_short(c)),
                display(control_interval(c)),
                display(c.rule),
                display(c.verdict, style=style),
            )
        console.print(controls)
    _toolbottleneck(r, console)
    _invokerank(r, console)
    for line in judged_lines(r):
        console.print(display(line))
    calibration = calibration_line(r)
    if calibration is not None:
        console.print(display(calibration, style="dim"))
    comp = r.completeness
    console.print(
        display(
            f"runs: {comp.completed} of {comp.planned} planned units"
            f"{'' if comp.complete else ' (INCOMPLETE)'}; infrastructure failures "
            f"{r.runs.infra_errors}; spend "
            + ("null (not measured)" if r.runs.spend_usd is None else f"${r.runs.spend_usd:.4f}")
        )
    )
    label, text = headline(r)
    style = "bold green" if r.mode == "confirmatory" and r.verdict == "supported" else "bold"
    console.print(
        Panel(
            display(f"{label}: {text}").append("\n").append_text(display(r.verdict_detail.reason)),
            style=style,
            expand=False,
        )
    )
    if where:
        console.print(display(f"report: {where}"))
