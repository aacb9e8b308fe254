"""Terminal output: a short rich summary table and the verdict.

Every string is printed as a ``rich.text.Text`` made by
:func:`prereg.core.untrusted.display` (never parsed for markup), so ``[bold]`` in a
title or a tool description is printed, never interpreted, and escape sequences
(clear-screen, colour, OSC 8 links) and other control characters in it are shown as
escapes, never sent to the terminal.

Tables go through :func:`prereg.reports.render.table.print_table`: on a narrow terminal
(80 columns in every pipe and CI log) columns give way or rows become paragraphs, and
no identifier or number is ever cut. The verdict and its reason print whole.
"""

from __future__ import annotations

from rich.console import Console
from rich.panel import Panel
from rich.rule import Rule
from rich.text import Text

from prereg.core.untrusted import display
from prereg.reports.calibration.text import calibration_line
from prereg.reports.judged.text import judged_lines
from prereg.reports.model import Report
from prereg.reports.render.table import longest_word, print_table
from prereg.reports.render.text import (
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
    arms = report.invokerank.arms
    reasons = {a.reason for a in arms}
    if arms and all(a.level == "not_computed" for a in arms) and len(reasons) == 1:
        # one line, not a row per arm repeating it
        console.print(display(f"InvokeRank: not computed for any arm: {reasons.pop()}"))
        return
    header, rows = drop_columns(invokerank_leaderboard(report), {"95% interval", "evidence"})
    print_table(
        console,
        "InvokeRank score per arm (descriptive; points)",
        header,
        [[str(cell) for cell in row] for row in rows],
        prose={"score", TIED},
        drop=(*(h for h in header if h.endswith(" 90%")), "runs", TIED),  # other method's first
    )
    for line in invokerank_choice_lines(report):
        console.print(display(line))


#: The InvokeRank column listing the arms an arm is tied with (names, wrapped between).
TIED = "tied with (90% intervals overlap)"

#: The study tables the terminal shows (the rest are in report.md and report.html).
STUDY_TERMINAL = (
    "Contrasts by resampling unit",
    "Failure census",
    "Decision matrix",
    "Repairs against",  # specificity, activation and equivalence (seed 4.3, 5.4)
    "Per-configuration effects",  # seed Table 4
    "The V effect against truncation",  # seed Figure 6
    "Discovery availability by retriever",  # seed Figure 3c
    "Does the failure record reveal the pressure?",  # the decoder (seed appendix H)
    "Decoder comparisons",
    "Completion-cap sweep in full",  # seed appendix E.1, Table 9
    "Crossover at cap",  # seed Table 7
    "Interaction decomposition",  # seed appendix D
    "Truncated first responses",  # seed Table 8
    "Routed- versus fixed-menu lanes",  # seed appendix D
    "Sentinel repeats: each repair's",  # seed appendix H
    "Workflow frontier",  # seed Figure 3b
    "Frontier contrasts",
)


def _toolbottleneck(report: Report, console: Console) -> None:
    """A ToolBottleneckBench study (issue 19): its label, then the key tables."""
    study = report.toolbottleneck
    if study is None:
        return
    for t in study.tables:
        if not t.columns or not t.title.startswith(STUDY_TERMINAL):
            continue
        print_table(console, t.title, t.columns, t.rows)
    example = study.example
    if example is not None:  # Figure 5's panels are pictures of text: one line here
        console.print(
            display(
                f"Example task family (seed Figure 5): {example.family} compiled under V, W "
                "and D, in figures/tb_family.png and report.md"
                if example.withheld is None
                else f"Example task family (seed Figure 5) not drawn: {example.withheld}"
            )
        )


def _verdict(r: Report, console: Console) -> None:
    """The verdict, what decided it and why, whole: in a panel when its longest word fits
    inside one, else between two rules (a panel would fold a long id between borders)."""
    label, text = headline(r)
    style = "bold green" if r.mode == "confirmatory" and r.verdict == "supported" else "bold"
    detail = r.verdict_detail
    why = (
        detail.reason
        if label == "Exploratory reading"  # its headline names what decided it
        else f"Decided by: {detail.decided_by}. {detail.reason}"
    )
    body = display(f"{label}: {text}").append("\n").append_text(display(why))
    if longest_word(body.plain) <= console.width - 4:
        console.print(Panel(body, style=style, expand=False))
        return
    console.print(Rule(style=style))
    console.print(Text.assemble(body, style=style))
    console.print(Rule(style=style))


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
    print_table(
        console,
        f"outcome: {r.outcome}; Jeffreys intervals{level} deflated by DEFF",
        ["arm", "surface", "ok", "infra", "successes", "rate", "interval", "DEFF"],
        [
            [
                a.id,
                a.surface,
                str(a.runs_ok),
                str(a.infra_errors),
                f"{a.successes}/{a.measured}",
                pct(a.rate),
                _span(a.interval.low, a.interval.high),
                f"{a.design_effect:.2f}",
            ]
            for a in r.arms
        ],
        drop=("infra", "ok", "surface", "DEFF"),
    )
    if configurations_differ(r):
        header, rows = drop_columns(configuration_table(r), {"configuration", "params"})
        print_table(
            console,
            "configurations (the arms differ)",
            header,
            [[str(cell) for cell in row] for row in rows],
            prose={"budgets"},
            drop=("system prompt", "driver"),
        )
    console.print(display(primary_line(r)))
    if r.contrasts:
        header, rows = drop_columns(contrast_table(r), {"weights", "test"})
        print_table(
            console,
            "registered contrasts",
            header,
            [[str(cell) for cell in row] for row in rows],
            drop=("unit (n)", "p"),
        )
    if r.controls:
        print_table(
            console,
            "instrument controls (registered; never change the verdict)",
            ["check", "arm", "estimate", "interval", "rule", "verdict"],
            [
                [
                    c.check,
                    c.arm,
                    control_short(c),
                    control_interval(c),
                    c.rule,
                    display(
                        c.verdict,
                        style={"pass": "green", "fail": "bold red"}.get(c.verdict, "yellow"),
                    ),
                ]
                for c in r.controls
            ],
            prose={"estimate", "rule"},
        )
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
    _verdict(r, console)
    if where:
        console.print(display(f"report: {where}"))
