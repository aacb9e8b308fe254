"""The ToolBottleneckBench study's figures as the seed draws them (issue 42, item 4):
Figure 2a (the contrasts with their family-cluster intervals), Figures 6 and 7 (each
configuration's V effect against its largest-menu truncation), Figure 3c (Discovery
availability by retriever) and Figure 11 (the decoder's paired gains).

Each figure is drawn from the numbers the study section carries beside its tables
(:class:`prereg.reports.toolbottleneck.model.StudyFigure`: the same numbers as the
tables' rows; nothing is computed here) by a ``*_figure`` function (what tests read),
on the canvas :mod:`.figures` gives it (``_canvas``, passed in: that module registers
these in its ``FIGURES``, so this one does not import it), which :mod:`.figures` saves
as PNG. What the tables withhold is withheld here too:

- Figures 2a and 11 draw a point whose interval is withheld (too few families, or no
  spread) as an open marker labelled "no interval", never as a point that looks
  certain; it is not drawn when no contrast has an interval;
- Figures 6/7 draw the points only (no fitted line, no correlation: the table prints the
  coefficients, or why they are withheld);
- Figure 3c draws shares without intervals (availability is fixed by the task's variant);
- Figure 3a (``tb_census``, the failure census) draws each terminal flag's share of the
  failures without an interval (a census, not an estimate; the caption says so);
- Figure 4b (``tb_decision``) draws the decision matrix's success differences as Figure
  2a draws the contrasts;
- Figure 7 (``tb_configurations``) draws Table 4's point estimates as open markers (no
  interval: the table prints none), the organisation-equal reweighting as diamonds;
- Figure 5 (``tb_family``) is text panels, not data: one family's compiled variants
  (``StudyReport.example``) under V (the menu's tool names, the gold tools marked), W (the
  certified minimum and the reference program's calls) and D (the same returned record
  in each encoding), each shortened to a few lines, in monospace, no number drawn.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from prereg.reports.model import Report

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: ``figures._canvas``: a figure with one axes of the given size, room for ``labels``.
Canvas = Callable[[float, float, Sequence[str]], "tuple[Figure, Axes]"]

BLUE, GREY = "#1f4e79", "#7f7f7f"


class StudyPoint(Protocol):
    """What a figure reads of :class:`prereg.reports.toolbottleneck.model.StudyPoint`
    (read through the report: rendering imports only the report model)."""

    @property
    def label(self) -> str: ...
    @property
    def value(self) -> float: ...
    @property
    def x(self) -> float | None: ...
    @property
    def low(self) -> float | None: ...
    @property
    def high(self) -> float | None: ...
    @property
    def reason(self) -> str | None: ...


class StudyFigure(Protocol):
    """What a figure reads of :class:`prereg.reports.toolbottleneck.model.StudyFigure`."""

    @property
    def name(self) -> str: ...
    @property
    def points(self) -> Sequence[StudyPoint]: ...
    @property
    def level(self) -> float | None: ...


def study_figure(report: Report, name: str) -> StudyFigure | None:
    """The study section's numbers for one figure (None: not in this report)."""
    study = getattr(report, "toolbottleneck", None)
    if study is None:
        return None
    found: StudyFigure | None = next(
        (f for f in study.figures if f.name == name and f.points), None
    )
    return found


def _interval_chart(
    report: Report, canvas: Canvas, name: str, xlabel: str, title: str
) -> Figure | None:
    """Points (pp) with their intervals; open markers for the points whose interval the
    table withholds. Not drawn when none has one."""
    data = study_figure(report, name)
    if data is None or not any(p.low is not None for p in data.points):
        return None
    labels = [p.label if p.low is not None else f"{p.label} (no interval)" for p in data.points]
    fig, ax = canvas(4.0, 0.6 + 0.32 * len(labels), labels)
    for y, p in enumerate(data.points):
        est = 100 * p.value
        if p.low is None or p.high is None:
            ax.plot([est], [y], "o", mfc="white", color=GREY, clip_on=False)
            continue
        lo, hi = 100 * p.low, 100 * p.high
        ax.errorbar(
            [est],
            [y],
            xerr=[[max(est - lo, 0.0)], [max(hi - est, 0.0)]],
            fmt="o",
            color=BLUE,
            capsize=3,
            clip_on=False,
        )
    ax.axvline(0.0, color="#999999", lw=1)
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    level = f"{data.level:.0%} " if data.level is not None else ""
    ax.set_xlabel(xlabel.format(level=level))
    ax.grid(axis="x", alpha=0.3)
    ax.set_title(title, fontsize=9)
    return fig


def tb_contrasts_figure(report: Report, canvas: Canvas) -> Figure | None:
    """Figure 2a: each contrast (pp) with its 95% family-cluster interval; open markers
    for the contrasts whose interval the table withholds. Not drawn when none has one."""
    return _interval_chart(
        report,
        canvas,
        "tb_contrasts",
        "contrast, pp ({level}family-cluster bootstrap; open: no interval)",
        "Capacity contrasts (Figure 2a)",
    )


def tb_decoder_gains_figure(report: Report, canvas: Canvas) -> Figure | None:
    """Figure 11: the decoder's five paired gains in balanced accuracy (pp) with their
    Bonferroni intent-cluster intervals; open markers where the table withholds them."""
    return _interval_chart(
        report,
        canvas,
        "tb_decoder_gains",
        "gain in balanced accuracy, pp ({level}intent-cluster; open: no interval)",
        "Decoder: paired gains (Figure 11)",
    )


def tb_v_truncation_figure(report: Report, canvas: Canvas) -> Figure | None:
    """Figures 6 and 7: each configuration's V effect (pp) against the share of its
    largest-menu episodes truncated at the completion cap, points only, numbered (the
    key in the axis title: a configuration name is too long for a point's label)."""
    data = study_figure(report, "tb_v_truncation")
    if data is None:
        return None
    fig, ax = canvas(4.0, 3.0, ())
    for i, p in enumerate(data.points, start=1):
        x, y = 100 * float(p.x or 0.0), 100 * p.value
        ax.plot([x], [y], "o", color=BLUE, clip_on=False)
        ax.annotate(
            str(i), (x, y), textcoords="offset points", xytext=(6, 4 if i % 2 else -12), fontsize=9
        )
    ax.axhline(0.0, color="#999999", lw=1)
    ax.set_xlim(-3.0, 103.0)
    ax.set_xlabel("largest-menu episodes truncated at the cap, %")
    ax.set_ylabel("V effect, pp")
    ax.grid(alpha=0.3)
    ax.set_title("V effect against truncation (Figures 6, 7)", fontsize=9)
    return fig


def tb_v_truncation_key(report: Report) -> list[str]:
    """The numbered points' configurations, in order (the figure's caption lists them)."""
    data = study_figure(report, "tb_v_truncation")
    return [] if data is None else [p.label for p in data.points]


def tb_availability_figure(report: Report, canvas: Canvas) -> Figure | None:
    """Figure 3c: the share of Discovery episodes whose shortlist held the required
    tools, per retriever and catalog size (no interval)."""
    return _share_bars(
        report,
        canvas,
        "tb_availability",
        "episodes with the required tools shortlisted, % (no interval)",
        "Discovery availability by retriever (Figure 3c)",
    )


def _share_bars(
    report: Report, canvas: Canvas, name: str, xlabel: str, title: str
) -> Figure | None:
    """A study figure of shares (0-1) as horizontal bars on a 0-100% axis, no interval."""
    data = study_figure(report, name)
    if data is None:
        return None
    labels = [p.label for p in data.points]
    fig, ax = canvas(4.0, 0.6 + 0.35 * len(labels), labels)
    ax.barh(range(len(labels)), [100 * p.value for p in data.points], color=BLUE, height=0.6)
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    ax.set_xlim(0.0, 100.0)
    ax.set_xlabel(xlabel)
    ax.grid(axis="x", alpha=0.3)
    ax.set_title(title, fontsize=9)
    return fig


def tb_cap_sweep_figure(report: Report, canvas: Canvas) -> Figure | None:
    """Figure 2b: the paired menu contrast (pp) of each configuration and pooled stratum
    at each completion cap (log2 axis), joined by a line, with the sweep table's 95%
    family-cluster intervals; open markers where the table withholds an interval. Not
    drawn when no point has an interval (as Figure 2a)."""
    return _cap_chart(report, canvas, "tb_cap_sweep", "Completion-cap sweep (Figure 2b)")


def tb_crossover_figure(report: Report, canvas: Canvas) -> Figure | None:
    """Figure 8: the crossover's menu contrasts at its caps, drawn as Figure 2b."""
    return _cap_chart(report, canvas, "tb_crossover", "Crossover (Figure 8)")


def _cap_chart(report: Report, canvas: Canvas, name: str, title: str) -> Figure | None:
    data = study_figure(report, name)
    if data is None or not any(p.low is not None for p in data.points):
        return None
    groups: dict[str, list[StudyPoint]] = {}
    for p in data.points:
        groups.setdefault(p.label.rsplit(" at cap ", 1)[0], []).append(p)
    fig, ax = canvas(4.0, 3.0, ())
    for i, (name, points) in enumerate(groups.items()):
        xs = [float(p.x or 1.0) for p in points]
        ys = [100 * p.value for p in points]
        colour = BLUE if not name.startswith(("Stratum", "All")) else "#b35900"
        line = "-" if not name.startswith(("Stratum", "All")) else "--"
        ax.plot(xs, ys, line, color=colour, lw=1, alpha=0.7, label=f"{i + 1} {name}")
        for x, y, p in zip(xs, ys, points, strict=True):
            if p.low is None or p.high is None:
                ax.plot([x], [y], "o", mfc="white", color=GREY, clip_on=False)
                continue
            lo, hi = 100 * p.low, 100 * p.high
            ax.errorbar(
                [x],
                [y],
                yerr=[[max(y - lo, 0.0)], [max(hi - y, 0.0)]],
                fmt="o",
                color=colour,
                capsize=3,
                clip_on=False,
            )
        ax.annotate(
            str(i + 1), (xs[-1], ys[-1]), textcoords="offset points", xytext=(6, 0), fontsize=9
        )
    ax.set_xscale("log", base=2)
    caps = sorted({float(p.x or 1.0) for p in data.points})
    ax.set_xticks(caps, [f"{c:,.0f}" for c in caps])
    ax.axhline(0.0, color="#999999", lw=1)
    level = f"{data.level:.0%} " if data.level is not None else ""
    ax.set_xlabel("completion cap, tokens per request")
    ax.set_ylabel(f"menu contrast, pp ({level}family-cluster)")
    ax.grid(alpha=0.3)
    ax.set_title(title, fontsize=9)
    return fig


def tb_cap_sweep_key(report: Report, name: str = "tb_cap_sweep") -> list[str]:
    """The numbered lines' configurations and strata, in order (the caption lists them)."""
    data = study_figure(report, name)
    if data is None:
        return []
    names: list[str] = []
    for p in data.points:
        name = p.label.rsplit(" at cap ", 1)[0]
        if name not in names:
            names.append(name)
    return names


def tb_frontier_figure(report: Report, canvas: Canvas) -> Figure | None:
    """Figure 3b: success (%) by the public handoffs in front of the low workflow, one
    numbered line per configuration and cell (points only: the contrasts' intervals are
    in the frontier contrasts table)."""
    data = study_figure(report, "tb_frontier")
    if data is None:
        return None
    groups: dict[str, list[StudyPoint]] = {}
    for p in data.points:
        groups.setdefault(p.label, []).append(p)
    fig, ax = canvas(4.0, 3.0, ())
    for i, points in enumerate(groups.values(), start=1):
        xs = [float(p.x or 0.0) for p in points]
        ys = [100 * p.value for p in points]
        ax.plot(xs, ys, "o-", color=BLUE, lw=1, clip_on=False)
        ax.annotate(str(i), (xs[-1], ys[-1]), textcoords="offset points", xytext=(6, 0), fontsize=9)
    levels = sorted({float(p.x or 0.0) for p in data.points})
    ax.set_xticks(levels, [f"{x:.0f}" for x in levels])
    ax.set_ylim(-3.0, 103.0)
    ax.set_xlabel("public handoffs in front of the low workflow")
    ax.set_ylabel("success, % (no interval)")
    ax.grid(alpha=0.3)
    ax.set_title("Workflow frontier (Figure 3b)", fontsize=9)
    return fig


def tb_frontier_key(report: Report) -> list[str]:
    """The numbered lines' configurations and cells, in order (the caption lists them)."""
    data = study_figure(report, "tb_frontier")
    if data is None:
        return []
    return list(dict.fromkeys(p.label for p in data.points))


def tb_frontier_episodes_figure(report: Report, canvas: Canvas) -> Figure | None:
    """Figure 9: each frontier episode's executed calls against its tokens, one marker
    per level (filled: ended at the episode budget), showing which limit an episode
    reaches first."""
    data = study_figure(report, "tb_frontier_episodes")
    if data is None:
        return None
    fig, ax = canvas(4.0, 3.0, ())
    markers = "os^Dv<>p"
    levels = sorted(
        {p.label.removesuffix(" (episode budget)") for p in data.points},
        key=lambda s: int(s.split()[0]),
    )
    for i, level in enumerate(levels):
        for budget in (False, True):
            pts = [
                p for p in data.points if p.label == level + (" (episode budget)" if budget else "")
            ]
            if not pts:
                continue
            ax.plot(
                [float(p.x or 0.0) for p in pts],
                [p.value for p in pts],
                markers[i % len(markers)],
                mfc=BLUE if budget else "white",
                color=BLUE,
                ls="none",
                label=level + (", episode budget" if budget else ""),
                clip_on=False,
            )
    ax.set_xlabel("executed calls")
    ax.set_ylabel("tokens per episode")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title("Frontier episodes: calls and tokens (Figure 9)", fontsize=9)
    return fig


def tb_repairs_figure(report: Report, canvas: Canvas) -> Figure | None:
    """Figure 4a: each repair's L, Gamma and Sigma (pp) with their 95% family-cluster
    intervals; open markers where the repair table withholds them. Not drawn when none
    has one."""
    return _interval_chart(
        report,
        canvas,
        "tb_repairs",
        "pp ({level}family-cluster bootstrap; open: no interval)",
        "Repairs: loss, stress gain and specificity (Figure 4a)",
    )


def tb_holdout_figure(report: Report, canvas: Canvas) -> Figure | None:
    """Figure 10: the structural holdout's executed calls per episode by issuer (the
    model, the public-handoff controller), one stacked bar per Table 10 row with its VTS
    in the label (arm means: no interval)."""
    data = study_figure(report, "tb_holdout")
    if data is None:
        return None
    labels = [p.label for p in data.points]
    fig, ax = canvas(4.0, 0.8 + 0.36 * len(labels), labels)
    ys = list(range(len(labels)))
    model = [p.value for p in data.points]
    ctrl = [float(p.x or 0.0) for p in data.points]
    ax.barh(ys, model, color=GREY, label="issued by the model")
    ax.barh(ys, ctrl, left=model, color=BLUE, label="issued by the controller")
    ax.set_yticks(ys, labels)
    ax.invert_yaxis()
    ax.set_xlabel("executed calls per episode (mean; no interval)")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")  # beside the short 2-call bars, listed first
    ax.set_title("Structural holdout: who issues the calls (Figure 10)", fontsize=9)
    return fig


def tb_census_figure(report: Report, canvas: Canvas) -> Figure | None:
    """Figure 3a: how the failed episodes end, each terminal flag's share of the failures
    pooled over every arm (the census table's "(all)" row), as bars without intervals (a
    census of what was observed; the caption says so). Not drawn without a failure."""
    return _share_bars(
        report,
        canvas,
        "tb_census",
        "share of failed episodes, % (no interval)",
        "Failure census: how failed episodes end (Figure 3a)",
    )


def tb_configurations_figure(report: Report, canvas: Canvas) -> Figure | None:
    """Figure 7: each contrast's effect (pp) within each configuration, then its
    organisation-equal reweighting (a diamond), the numbers of Table 4's rows. Every
    point is an open marker: the table prints point estimates only (the caption gives
    the reason). Not drawn without a separable contrast."""
    data = study_figure(report, "tb_configurations")
    if data is None:
        return None
    labels = [p.label for p in data.points]
    fig, ax = canvas(4.0, 0.6 + 0.32 * len(labels), labels)
    for y, p in enumerate(data.points):
        reweighted = p.label.endswith(": organisation-equal reweighting")
        ax.plot(
            [100 * p.value],
            [y],
            "D" if reweighted else "o",
            mfc="white",
            color=BLUE if reweighted else GREY,
            clip_on=False,
        )
    ax.axvline(0.0, color="#999999", lw=1)
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    ax.set_xlabel("effect within the configuration, pp (open: no interval)")
    ax.grid(axis="x", alpha=0.3)
    ax.set_title("Per-configuration effects (Figure 7)", fontsize=9)
    return fig


def tb_decision_figure(report: Report, canvas: Canvas) -> Figure | None:
    """Figure 4b: each repair's repaired lane minus every configuration switch (success,
    pp) with the decision matrix's 95% family-cluster intervals; open markers where the
    matrix withholds one. Not drawn when none has one (as Figure 2a)."""
    return _interval_chart(
        report,
        canvas,
        "tb_decision",
        "repaired lane minus switch, success pp ({level}family-cluster bootstrap; "
        "open: no interval)",
        "Against every configuration switch (Figure 4b)",
    )


#: Figure 5's text: characters a line, the menu lines a V panel shows (its gold tools
#: first, then the menu's first others), the lines of a D panel's record
FAMILY_CHARS, MENU_LINES, RECORD_LINES = 58, 8, 4


def tb_family_lines(report: Report) -> list[tuple[str, str]]:
    """Figure 5's lines, each with its kind (``head``: a panel's heading, ``gold``: a gold
    tool, ``text``): every panel of ``StudyReport.example`` shortened to a few lines (a
    long menu lists its gold tools with their places, then its first other tools and how
    many more; a record wraps to :data:`RECORD_LINES` lines). [] without an example."""
    study = report.toolbottleneck
    example = None if study is None else study.example
    if example is None or example.withheld is not None or not example.panels:
        return []
    out: list[tuple[str, str]] = []
    for p in example.panels:
        if out:
            out.append(("", "text"))  # a blank line between panels
        if p.pressure == "V":
            out.append((f"V = {p.level}: a menu of {len(p.menu)} tools (* gold)", "head"))
            gold = [(p.menu.index(g) + 1, g) for g in p.gold if g in p.menu]
            others = [(i + 1, n) for i, n in enumerate(p.menu) if n not in p.gold]
            room = max(MENU_LINES - len(gold), 0)
            shown = sorted(gold + others[:room])
            out += [
                (f"{'*' if n in p.gold else ' '} {i:>3}. {n}", "gold" if n in p.gold else "text")
                for i, n in shown
            ]
            if len(p.menu) > len(shown):
                out.append((f"      ... and {len(p.menu) - len(shown)} more tools", "text"))
        elif p.pressure == "W":
            out.append((f"W = {p.level}: certified minimum {p.certified_minimum} calls", "head"))
            out += [
                (textwrap.shorten(f"{i}. {c}", FAMILY_CHARS, placeholder=" ..."), "text")
                for i, c in enumerate(p.program, start=1)
            ]
        else:
            out.append((f"D = {p.level}: the record of call {example.record_call}", "head"))
            wrapped = textwrap.wrap(p.record, FAMILY_CHARS - 2, break_on_hyphens=False)
            more = len(wrapped) > RECORD_LINES
            lines = wrapped[:RECORD_LINES]
            if more:
                lines[-1] = lines[-1][: FAMILY_CHARS - 6] + " ..."
            out += [(f"  {line}", "text") for line in lines]
    return out


def tb_family_figure(report: Report, canvas: Canvas) -> Figure | None:
    """Figure 5: the example family's compiled variants as text panels (monospace; the
    gold tools in blue), from ``StudyReport.example`` (every line is the compiler's
    output, shortened). Not drawn without an example."""
    lines = tb_family_lines(report)
    if not lines:
        return None
    study = report.toolbottleneck
    assert study is not None and study.example is not None
    fig, ax = canvas(4.6, 0.18 * len(lines), ())
    ax.set_axis_off()
    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(len(lines), 0.0)
    for y, (text, kind) in enumerate(lines):
        ax.text(
            0.0,
            y + 0.5,
            text,
            family="monospace",
            fontsize=9,
            va="center",
            color=BLUE if kind == "gold" else "black",
            weight="bold" if kind in ("head", "gold") else "normal",
            parse_math=False,  # tool names and records are data: no mathtext
        )
    title = f"Family {study.example.family}, compiled under V, W and D (Figure 5)"
    ax.set_title(textwrap.fill(title, FAMILY_CHARS), fontsize=9, loc="left", parse_math=False)
    return fig
