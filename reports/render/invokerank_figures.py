"""The InvokeRank section's figures as the seed draws them (issue 41, item 4): Figure 2
(the funnel with intervals), Figure 3 (the score per intent with intervals), Figure 5
(paired changes beside calls on negatives) and Figure 8 (rho per intent with intervals).

Each figure is drawn from numbers already in the report (nothing is computed here) by a
``*_figure`` function (what tests read), on the canvas :mod:`.figures` gives it
(``_canvas``, passed in: that module registers these in its ``FIGURES``, so this one does
not import it), which :mod:`.figures` saves as PNG. A figure that cannot be defended at the
report's size is not drawn, and :func:`withheld` says why (the report's tables print it):

- Figure 2 needs a measured funnel stage with its Jeffreys interval (it has width at
  every size). With run stages registered (``invokerank.hosts``) it is one figure per
  host (``ir_funnel_host_<n>``, the host named in its caption; the selection arms beside
  the execution arms at every stage), up to :data:`HOST_SLOTS` hosts; a registration
  with more hosts gets the one chart grouped by host (``ir_funnel``), and a report
  without stages the one chart per arm, as before;
- Figure 3 and Figure 8 need at least one interval that the small-sample rules let
  through; rows whose interval is withheld are drawn as open markers labelled
  "no interval", never as a point that looks certain;
- Figure 5 needs a paired change with an interval;
- Figure 7 (replicate run rates with the within-run range) needs replicate sessions
  (``design.sessions`` >= 2) and an arm with at least two prompts run in full in every
  session; with one session the section's ``replicates`` says why it is not drawn, and
  an arm whose sessions share too few prompts gives its own reason;
- the S-vs-T figure (seed 7.9, evidence class T): per arm named in
  ``invokerank.telemetry``, each tool's share of the arm's synthetic first calls (S)
  beside its share of the host's real calls (T), as paired horizontal bars, the total
  variation distance and Spearman's rank correlation in the title (one file per arm,
  ``ir_s_vs_t_<n>``, up to :data:`SVST_SLOTS` arms, in the block's order). It is drawn
  exactly when the block's figures are (:mod:`prereg.reports.invokerank.telemetry`,
  reading 3): below 30 calls a side the total variation distance is withheld, and so is
  the figure, with the same reason (a mix of a few calls drawn as bars looks like a
  measured mix); an arm with no telemetry row says so. A withheld Spearman alone (too few
  tools, all shares tied) leaves the bars drawn, the title saying why it is missing.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from prereg.reports.model import Interval, PairwiseChange, Report, SvsTComparison

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: ``figures._canvas``: a figure with one axes of the given size, room for ``labels``.
Canvas = Callable[[float, float, Sequence[str]], "tuple[Figure, Axes]"]

#: One row of a point-and-interval chart: label, estimate, (low, high) or None.
Row = tuple[str, float, tuple[float, float] | None]


def _outcome(report: Report) -> str:
    """The registered outcome (a hand-built fragment of a report may lack it)."""
    return str(getattr(report, "outcome", None) or "the outcome")


def _pairwise(report: Report) -> list[PairwiseChange]:
    """The report's paired changes (a hand-built fragment may lack them)."""
    return list(getattr(report, "pairwise", None) or [])


def _finite(*values: float | None) -> bool:
    return all(v is not None and math.isfinite(v) for v in values)


def _bounds(iv: Interval | None) -> tuple[float, float] | None:
    if iv is None or not _finite(iv.low, iv.high):
        return None
    return float(iv.low or 0.0), float(iv.high or 0.0)


#: Figure 2 per host: one figure file per host for up to this many hosts
#: (``ir_funnel_host_1`` ... in :data:`prereg.reports.render.figures.FIGURES`, whose names
#: are fixed); more hosts are drawn in one chart grouped by host (``ir_funnel``).
HOST_SLOTS = 8


def _hosts(report: Report) -> list[str]:
    ir = report.invokerank
    return [h.host for h in ir.hosts] if ir is not None else []


def per_host_files(report: Report) -> bool:
    """Whether Figure 2 is drawn as one file per host (run stages, at most
    :data:`HOST_SLOTS` hosts) rather than one chart."""
    return 0 < len(_hosts(report)) <= HOST_SLOTS


def host_funnel_rows(report: Report, index: int) -> list[Row]:
    """Figure 2 of host ``index`` (0-based, ``invokerank.hosts`` order): at every funnel
    stage, the host's selection arms beside its execution arms, runs reaching the stage
    over positive runs with the stage's interval; labels ``stage: stage kind (arm)``."""
    ir = report.invokerank
    if ir is None or not 0 <= index < len(ir.hosts):
        return []
    arms = {a.arm: a for a in ir.arms}
    h = ir.hosts[index]
    order = [arms[a] for a in h.selection + h.execution if a in arms]
    rows: list[Row] = []
    for stage in dict.fromkeys(s.stage for a in order for s in a.funnel):
        for a in order:
            s = next((x for x in a.funnel if x.stage == stage), None)
            if s is not None and s.trials and s.displayed is not None:
                label = f"{stage}: {a.stage} ({a.arm})"
                rows.append((label, s.successes / s.trials, _bounds(s.displayed)))
    return rows


def funnel_rows(report: Report) -> list[Row]:
    """Figure 2: each arm's pooled stages, runs reaching over positive runs; with run
    stages registered, per host, each funnel stage's selection arms beside its execution
    arms (the seed's Figure 2 per host; labels prefixed by the host)."""
    ir = report.invokerank
    rows: list[Row] = []
    if ir is not None and ir.hosts:
        for index, h in enumerate(ir.hosts):
            rows += [
                (f"{h.host}: {label}", est, b) for label, est, b in host_funnel_rows(report, index)
            ]
        return rows
    for a in ir.arms if ir is not None else []:
        for s in a.funnel:
            if s.trials and s.displayed is not None:
                rows.append((f"{a.arm}: {s.stage}", s.successes / s.trials, _bounds(s.displayed)))
    return rows


def intent_rows(report: Report) -> list[Row]:
    """Figure 3: each arm's score per intent with the score's 90% interval."""
    ir = report.invokerank
    rows: list[Row] = []
    for a in ir.arms if ir is not None else []:
        for i in a.intents:
            first = next((iv for iv in i.intervals if round(iv.level, 2) == 0.9), None)
            rows.append((f"{i.intent}: {a.arm}", i.q, _bounds(first)))
    return rows


def replicate_rows(report: Report) -> list[Row]:
    """Figure 7: each arm's replicate sessions, Selected rate with its within-run range."""
    ir = report.invokerank
    rows: list[Row] = []
    for a in ir.arms if ir is not None else []:
        rr = a.replicate_runs
        for r in rr.rows if rr is not None else []:
            rows.append((f"{a.arm}: session {r.session + 1}", r.rate, _bounds(r.within_range)))
    return rows


def rho_rows(report: Report) -> list[Row]:
    """Figure 8: each cell's rho (defined ones) with its bootstrap interval."""
    ir = report.invokerank
    rows: list[Row] = []
    for a in ir.arms if ir is not None else []:
        for r in a.rho.rows if a.rho is not None else []:
            if r.kind == "cell" and r.rho is not None:
                rows.append((f"{a.arm}: {r.stage}: {r.intent}", r.rho, _bounds(r.interval)))
    return rows


@dataclass(frozen=True)
class Comparison:
    """One paired change between two arms of the registration, as the report prints it:
    a placebo or blinded control against its reference, or a descriptive pairwise change."""

    baseline: str
    candidate: str
    source: str
    estimate: float | None
    interval: Interval | None
    baseline_rate: float | None = None
    candidate_rate: float | None = None
    tasks: int | None = None
    intent: str | None = None  # a row of the primary comparison's per-intent table
    note: str | None = None  # why the interval is null, when the report says


def comparisons(report: Report) -> list[Comparison]:
    """Figure 5's comparisons: the placebo and blinded controls (each against its
    reference), the pairwise changes between plain arms, and the registered primary
    comparison (unless a control pairs the same arms) with its per-intent rows (none
    without InvokeRank)."""
    if report.invokerank is None:
        return []
    out = [
        Comparison(c.reference, c.arm, f"{c.control} control", c.estimate, c.interval)
        for c in getattr(report, "controls", None) or []
        if c.control in ("placebo", "blinded") and c.reference is not None
    ]
    out += [
        Comparison(
            p.control,
            p.treatment,
            "pairwise (descriptive)",
            p.estimate,
            p.interval,
            p.control_rate,
            p.treatment_rate,
            p.tasks,
        )
        for p in _pairwise(report)
    ]
    primary = getattr(report, "primary", None)
    if primary is not None and len(primary.compare) == 2:
        base, cand = primary.compare
        if not any({c.baseline, c.candidate} == {base, cand} for c in out):
            out.append(
                Comparison(
                    base,
                    cand,
                    f"primary ({primary.test}, per {primary.unit})",
                    primary.estimate,
                    primary.interval,
                )
            )
        out += [
            Comparison(
                base,
                cand,
                "primary, per intent",
                r.difference,
                r.interval,
                r.control_rate,
                r.treatment_rate,
                r.tasks,
                intent=r.intent,
                note=r.interval_note,
            )
            for r in getattr(report, "per_intent", None) or []
        ]
    return out


def metadata_rows(report: Report) -> list[Row]:
    """Figure 5: paired changes with an interval, labelled with both arms' focal calls
    on negative runs."""
    ir = report.invokerank
    if ir is None:
        return []
    negatives = {a.arm: a.false_invoke for a in ir.arms}
    if all(n is None for n in negatives.values()):
        return []  # Figure 5 sets changes beside calls on negatives: none here

    def calls(arm: str) -> str:
        neg = negatives.get(arm)
        return "-" if neg is None else f"{neg.calls}/{neg.runs}"

    rows: list[Row] = []
    for c in comparisons(report):
        bounds = _bounds(c.interval)
        if c.estimate is None or bounds is None:
            continue
        level = c.interval.level if c.interval is not None else 0.0
        if c.intent is not None:  # the seed gives calls on negatives for whole arms only
            label = f"{c.candidate} vs {c.baseline}: {c.intent}, {level:.0%}"
        else:
            label = (
                f"{c.candidate} vs {c.baseline}, {level:.0%} "
                f"(negatives {calls(c.baseline)} -> {calls(c.candidate)})"
            )
        rows.append((label, c.estimate, bounds))
    return rows


def withheld(report: Report) -> list[tuple[str, str]]:
    """(figure, why it is not drawn) for the section's figures without defensible data."""
    if report.invokerank is None:
        return []
    out = []
    if not funnel_rows(report):
        out.append(("Figure 2 (funnel)", "no measured funnel stage with an interval"))
    elif per_host_files(report):
        out += [
            (f"Figure 2 (funnel), host {host}", "no measured funnel stage with an interval")
            for index, host in enumerate(_hosts(report))
            if not host_funnel_rows(report, index)
        ]
    if not any(b is not None for _, _, b in intent_rows(report)):
        out.append(
            (
                "Figure 3 (score per intent)",
                "no intent has a 90% interval (the small-sample rule withholds them: "
                "see the score table's reasons)",
            )
        )
    if not any(b is not None for _, _, b in rho_rows(report)):
        out.append(
            (
                "Figure 8 (rho per intent)",
                "no intent has a rho interval (too few prompts, undefined or degenerate: "
                "see the rho table)",
            )
        )
    if all(a.false_invoke is None for a in report.invokerank.arms):
        out.append(("Figure 5 (paired changes)", "no arm has a negative run"))
    elif comparisons(report) and not metadata_rows(report):
        out.append(("Figure 5 (paired changes)", "no paired change has an interval"))
    if report.invokerank.replicates:
        out.append(("Figure 7 (replicate runs)", "one run per arm in this registration"))
    for a in report.invokerank.arms:
        if a.replicate_runs is not None and a.replicate_runs.reason is not None:
            out.append(("Figure 7 (replicate runs)", f"{a.arm}: {a.replicate_runs.reason}"))
    return out + svst_withheld(report)


def _chart(
    canvas: Canvas, rows: list[Row], xlabel: str, title: str, xlim: tuple[float, float]
) -> Figure:
    labels = [label if b is not None else f"{label} (no interval)" for label, _, b in rows]
    fig, ax = canvas(6.0, 0.6 + 0.32 * len(rows), labels)
    for y, (_, est, bounds) in enumerate(rows):
        if bounds is None:
            ax.plot([est], [y], "o", mfc="white", color="#7f7f7f", clip_on=False)
            continue
        lo, hi = bounds
        ax.errorbar(
            [est],
            [y],
            xerr=[[max(est - lo, 0.0)], [max(hi - est, 0.0)]],
            fmt="o",
            color="#1f4e79",
            capsize=3,
            clip_on=False,
        )
    ax.set_yticks(range(len(rows)), labels)
    ax.invert_yaxis()
    ax.set_xlim(*xlim)
    ax.set_xlabel(xlabel)
    ax.grid(axis="x", alpha=0.3)
    ax.set_title(title, fontsize=9)
    return fig


def ir_funnel_figure(report: Report, canvas: Canvas) -> Figure | None:
    """Figure 2 as one chart: per arm without run stages, grouped by host with more than
    :data:`HOST_SLOTS` hosts; None when it is drawn one file per host instead."""
    rows = funnel_rows(report)
    if not rows or per_host_files(report):
        return None
    staged = report.invokerank is not None and bool(report.invokerank.hosts)
    return _chart(
        canvas,
        rows,
        "share of positive runs reaching the stage (90% Jeffreys, deflated by DEFF)",
        "InvokeRank funnel per host, selection beside execution (Figure 2)"
        if staged
        else "InvokeRank funnel per arm (Figure 2)",
        (-0.03, 1.03),
    )


def host_funnel_caption(report: Report, index: int) -> str | None:
    """The caption of host ``index``'s Figure 2 (None when there is no such host)."""
    hosts = _hosts(report)
    if not 0 <= index < len(hosts):
        return None
    return (
        f"InvokeRank funnel, host {hosts[index]}: selection beside execution, with 90% "
        "Jeffreys intervals (Figure 2)"
    )


def ir_host_funnel_figure(index: int) -> Callable[[Report, Canvas], Figure | None]:
    """The drawer of host ``index``'s Figure 2 (0-based; None without such a host, or
    when Figure 2 is one chart: see :func:`per_host_files`)."""

    def draw(report: Report, canvas: Canvas) -> Figure | None:
        rows = host_funnel_rows(report, index)
        if not rows or not per_host_files(report):
            return None
        return _chart(
            canvas,
            rows,
            "share of positive runs reaching the stage (90% Jeffreys, deflated by DEFF)",
            f"InvokeRank funnel, host {_hosts(report)[index]}: selection beside execution "
            "(Figure 2)",
            (-0.03, 1.03),
        )

    return draw


def ir_intents_figure(report: Report, canvas: Canvas) -> Figure | None:
    rows = intent_rows(report)
    if not any(b is not None for _, _, b in rows):
        return None
    scaled: list[Row] = [
        (label, 100 * q, None if b is None else (100 * b[0], 100 * b[1])) for label, q, b in rows
    ]
    method = report.invokerank.interval_method if report.invokerank is not None else "published"
    return _chart(
        canvas,
        scaled,
        f"score per intent, points (90% interval, {method}; open: withheld, too few prompts)",
        "InvokeRank score per intent (Figure 3)",
        (-3.0, 103.0),
    )


def ir_rho_figure(report: Report, canvas: Canvas) -> Figure | None:
    rows = rho_rows(report)
    if not any(b is not None for _, _, b in rows):
        return None
    return _chart(
        canvas,
        rows,
        "intra-prompt rho (90% percentile bootstrap over prompts; open: no interval)",
        "Repeat clustering per intent (Figure 8)",
        (-0.03, 1.03),
    )


def ir_replicates_figure(report: Report, canvas: Canvas) -> Figure | None:
    rows = replicate_rows(report)
    if not rows:
        return None
    return _chart(
        canvas,
        rows,
        "share of positive runs reaching Selected on the common prompts "
        "(bars: within-run 90% range)",
        "Replicate sessions' run rates (Figure 7)",
        (-0.03, 1.03),
    )


def ir_metadata_figure(report: Report, canvas: Canvas) -> Figure | None:
    rows = metadata_rows(report)
    if not rows:
        return None
    fig = _chart(
        canvas,
        rows,
        f"paired change in {_outcome(report)} (candidate - baseline)",
        "Paired changes beside focal calls on negatives (Figure 5)",
        (-1.05, 1.05),
    )
    fig.axes[0].axvline(0.0, color="#999999", lw=1)
    return fig


# --- S vs T (seed 7.9; issue 41, item 5): the tool mix beside the telemetry's ----------

#: S vs T: one figure file per compared arm for up to this many arms (``ir_s_vs_t_1`` ...
#: in :data:`prereg.reports.render.figures.FIGURES`, whose names are fixed); the tables
#: hold every arm, and an arm past the slots is listed among the figures not drawn.
SVST_SLOTS = 8

#: the colours of S (the runs) and T (the telemetry)
SVST_COLOURS = ("#1f4e79", "#c55a11")


def svst_comparisons(report: Report) -> list[SvsTComparison]:
    """The S-vs-T block's comparisons, in its order (none without the block)."""
    ir = report.invokerank
    t = ir.telemetry if ir is not None else None
    return list(t.comparisons) if t is not None else []


def svst_comparison(report: Report, index: int) -> SvsTComparison | None:
    """Comparison ``index`` (0-based) when its figure is drawn: a slot of its own and the
    block's figures not withheld (the total variation distance stands for both: it is
    withheld exactly when a side has too few calls)."""
    shown = svst_comparisons(report)
    if not 0 <= index < min(len(shown), SVST_SLOTS):
        return None
    c = shown[index]
    return c if c.total_variation_withheld is None and c.total_variation is not None else None


def svst_rows(report: Report, index: int) -> list[tuple[str, float, float]]:
    """The bars of comparison ``index``'s figure: (tool, S share, T share), the tools in
    the block's order (the integration's tools first); [] when it is not drawn."""
    c = svst_comparison(report, index)
    return [] if c is None else [(t.tool, t.s_share, t.t_share) for t in c.tools]


def svst_title(c: SvsTComparison) -> str:
    """The figure's title: the arm, the integration on the host, and the two figures (the
    correlation's reason when it alone is withheld)."""
    rho = f"{c.spearman:.3f}" if c.spearman is not None else f"withheld ({c.spearman_withheld})"
    tvd = f"{c.total_variation:.3f}" if c.total_variation is not None else "withheld"
    return (
        f"S vs T, arm {c.arm} ({c.integration} on {c.host}): total variation distance "
        f"{tvd}, Spearman {rho}"
    )


def svst_caption(report: Report, index: int) -> str | None:
    """The caption of comparison ``index``'s figure (None when it is not drawn)."""
    c = svst_comparison(report, index)
    if c is None:
        return None
    return (
        f"{svst_title(c)}. S: the arm's first calls to the integration "
        f"({c.s_calls}, evidence class {c.s_evidence_class or 'mixed'}); T: the host's "
        f"{c.t_basis} in the telemetry ({c.t_calls}, evidence class T); never pooled"
    )


def svst_withheld(report: Report) -> list[tuple[str, str]]:
    """(figure, why) for each named arm whose S-vs-T figure is not drawn."""
    ir = report.invokerank
    t = ir.telemetry if ir is not None else None
    if t is None:
        return []
    out = []
    for index, c in enumerate(t.comparisons):
        what = f"S vs T figure, arm {c.arm}"
        if c.total_variation_withheld is not None or c.total_variation is None:
            out.append((what, c.total_variation_withheld or "no total variation distance"))
        elif index >= SVST_SLOTS:
            out.append(
                (
                    what,
                    f"only the first {SVST_SLOTS} compared arms are drawn; the S vs T "
                    "tables hold every arm",
                )
            )
    out += [("S vs T figure", line) for line in t.absent]
    return out


def ir_svst_figure(index: int) -> Callable[[Report, Canvas], Figure | None]:
    """The drawer of comparison ``index``'s S-vs-T figure (0-based; None when it is not
    drawn: :func:`svst_comparison`)."""

    def draw(report: Report, canvas: Canvas) -> Figure | None:
        c = svst_comparison(report, index)
        rows = svst_rows(report, index)
        if c is None or not rows:
            return None
        labels = [tool for tool, _, _ in rows]
        fig, ax = canvas(4.5, 0.8 + 0.5 * len(rows), labels)
        ys = list(range(len(rows)))
        ax.barh(
            [y - 0.2 for y in ys],
            [s for _, s, _ in rows],
            height=0.4,
            color=SVST_COLOURS[0],
            label=f"S: {c.s_calls} first calls of the arm's runs",
        )
        ax.barh(
            [y + 0.2 for y in ys],
            [t for _, _, t in rows],
            height=0.4,
            color=SVST_COLOURS[1],
            label=f"T: {c.t_calls} {c.t_basis} (telemetry)",
        )
        ax.set_yticks(ys, labels, parse_math=False)  # tool names are data: no mathtext
        ax.invert_yaxis()
        ax.set_xlim(0.0, 1.0)
        ax.set_xlabel("share of the side's calls to the integration")
        ax.grid(axis="x", alpha=0.3)
        below = 0.6 / (ax.get_position().height * fig.get_figheight())  # under the label
        legend = ax.legend(frameon=False, loc="upper center", bbox_to_anchor=(0.5, -below))
        for text in legend.get_texts():
            text.set_parse_math(False)  # the telemetry's host and basis are data
        ax.set_title(textwrap.fill(svst_title(c), 60), fontsize=9, parse_math=False)
        return fig

    return draw
