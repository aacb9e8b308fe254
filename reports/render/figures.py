"""Figures of a report, drawn with matplotlib's Agg backend into PNG bytes.

PNG rather than SVG so that no string from the run data (arm or intent names)
ends up as markup in the HTML file: a raster cannot carry a script. Each figure
is drawn only from numbers already in the report (the renderers never compute);
a figure whose data were not measured or not registered is simply absent.

Each figure is built by a ``*_figure`` function (what tests read: labels, bars,
legend entries) and drawn once by :func:`_png`, which crops the drawing to what
``savefig(bbox_inches="tight")`` would save instead of drawing twice to find out.
"""

from __future__ import annotations

import io
import math
import re
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from prereg.core.forked import Forked
from prereg.reports.model import Interval, Report, TestReport
from prereg.reports.render import invokerank_figures as ir_figures
from prereg.reports.render import study_figures as tb_figures

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

_DPI = 110
#: the margin ``savefig(bbox_inches="tight")`` leaves around the drawing (its default)
PAD_IN = 0.1
#: room drawn around a figure's axes, cropped away (see :func:`_canvas`)
ROOM_IN = 0.6
#: room per character of the longest tick label left of the axes: more than any
#: lowercase or digit glyph of the default 10-point font needs (a wider label falls back)
CHAR_IN = 0.1
#: the smallest text a figure draws, in points: smaller text (a legend's, say) is raised to
#: it when the figure is drawn (:func:`_png`), so report.html can keep every figure's text
#: legible by one rule (:data:`MIN_TEXT_CSS_PX`)
MIN_FONT_PT = 9.0
#: the smallest height, in CSS px, report.html shows a figure's text at, at any viewport
#: width: a figure narrower than its box scales down no further than this and scrolls
#: sideways in its own box instead (docs/reports.md, "report.html on a phone")
MIN_TEXT_CSS_PX = 9.0
#: no "Software" text chunk (matplotlib's version in it would differ between installs)
_METADATA: dict[str, Any] = {"Software": None}


def prepare() -> None:
    """Import what drawing needs (matplotlib's figure and Agg canvas, about 0.4 s), ahead
    of the drawing: ``build_report`` calls it while forked children start on its
    sections (this process claims sections after), so the figures, drawn next, are
    drawn in processes that already have it."""
    import matplotlib.backends.backend_agg  # noqa: F401  # lazy: matplotlib, only figures need it
    import matplotlib.figure  # noqa: F401  # lazy: as above


def _canvas(width: float, height: float, labels: Sequence[str] = ()) -> tuple[Figure, Axes]:
    """A figure with one axes of the size and place, in inches, it has on a ``width`` x
    ``height`` figure under matplotlib's default subplot parameters, drawn on the Agg
    canvas at the saved resolution, with room around it for what sticks out (tick
    labels, ``labels`` the longest of them, a legend below): :func:`_png` crops it.

    Matplotlib is imported here, not at module import: it costs ~0.4 s and only the
    figures need it. The figure is not registered with pyplot (nothing to close)."""
    from matplotlib import rcParams  # lazy: matplotlib, only figures need it
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # lazy: as above
    from matplotlib.figure import Figure  # lazy: as above

    left = ROOM_IN + CHAR_IN * max(
        (len(line) for label in labels for line in label.split("\n")), default=0
    )
    full_w, full_h = width + left + ROOM_IN, height + 2 * ROOM_IN
    fig = Figure(figsize=(full_w, full_h), dpi=_DPI)
    FigureCanvasAgg(fig)
    fig.subplots_adjust(
        left=(left + rcParams["figure.subplot.left"] * width) / full_w,
        right=(left + rcParams["figure.subplot.right"] * width) / full_w,
        bottom=(ROOM_IN + rcParams["figure.subplot.bottom"] * height) / full_h,
        top=(ROOM_IN + rcParams["figure.subplot.top"] * height) / full_h,
    )
    return fig, fig.subplots()


def _png(fig: Figure) -> bytes:
    """The figure as ``savefig(..., bbox_inches="tight")`` saves it, from one drawing.

    The tight bounding box (every artist's extent, plus ``PAD_IN``) is taken from the
    drawn figure and the drawing cropped to it: the same picture as the tight save,
    which draws the figure once to measure it and again to save it (up to a fraction
    of a pixel in where the crop falls). Where the box reaches past the canvas (a
    label longer than the room :func:`_canvas` left), the tight save itself."""
    import numpy as np  # lazy: with matplotlib, only figures need it
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # lazy: as in _canvas
    from matplotlib.image import imsave  # lazy: matplotlib, only figures need it

    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    _floor_fonts(fig)
    canvas.draw()
    box = fig.get_tightbbox(canvas.get_renderer()).padded(PAD_IN)
    x0, y0 = round(box.x0 * _DPI), round(box.y0 * _DPI)
    x1, y1 = x0 + int(box.width * _DPI), y0 + int(box.height * _DPI)
    height = int(fig.bbox.height)
    buf = io.BytesIO()
    if x0 < 0 or y0 < 0 or x1 > int(fig.bbox.width) or y1 > height:
        fig.savefig(buf, format="png", dpi=_DPI, bbox_inches="tight", metadata=_METADATA)
        return buf.getvalue()
    # a copy in C order: matplotlib < 3.9 hands the slice to Pillow as it is, which
    # Pillow 12+ refuses ("ndarray is not C-contiguous"); the lower-bounds job found it
    pixels = np.ascontiguousarray(
        np.asarray(canvas.buffer_rgba())[height - y1 : height - y0, x0:x1]
    )
    imsave(buf, pixels, format="png", origin="upper", dpi=_DPI, metadata=_METADATA)
    return buf.getvalue()


def _floor_fonts(fig: Figure) -> None:
    """Raise every text smaller than :data:`MIN_FONT_PT` to it (before the drawing that
    lays legends out, so they make room)."""
    from matplotlib.text import Text  # lazy: matplotlib, only figures need it

    for text in fig.findobj(Text):
        size = text.get_fontsize()
        if text.get_text() and isinstance(size, int | float) and size < MIN_FONT_PT:
            text.set_fontsize(MIN_FONT_PT)


def min_text_px() -> float:
    """The smallest text of every figure, in the PNG's own pixels (:data:`MIN_FONT_PT`
    at the drawing's resolution)."""
    return MIN_FONT_PT * _DPI / 72.0


def min_display_scale() -> float:
    """The least report.html scales a figure's PNG by: its smallest text then stands
    :data:`MIN_TEXT_CSS_PX` high."""
    return MIN_TEXT_CSS_PX / min_text_px()


def _drawn(fig: Figure | None) -> bytes | None:
    return None if fig is None else _png(fig)


#: the width, in inches, a figure is drawn for (before its labels): with labels of a dozen
#: characters it fits a phone's column at a scale that keeps its text legible
NARROW_IN = 4.5
#: characters per line of a wrapped axis label, and of a wrapped row label
WRAP_CHARS, LABEL_CHARS = 44, 24


def _wrap(text: str, width: int = WRAP_CHARS) -> str:
    """An axis label or title on lines of at most ``width`` characters (words kept whole)."""
    return "\n".join(textwrap.wrap(text, width)) or text


def _wrap_label(label: str) -> str:
    """A row label on lines of at most :data:`LABEL_CHARS`: broken after a factorial
    cell's ``--`` or a comma or a space, never inside a word (an arm id without one stays
    whole)."""
    if len(label) <= LABEL_CHARS:
        return label
    if ", " in label:  # a clause a line ("primary: mcnemar_exact," / "per task")
        return "\n".join(_wrap_label(part) for part in label.replace(", ", ",\n").split("\n"))
    lines: list[str] = []
    for part in re.findall(r".+?(?:--| |$)", label):
        if lines and len(lines[-1]) + len(part.rstrip()) <= LABEL_CHARS:
            lines[-1] += part
        else:
            lines.append(part)
    return "\n".join(line.rstrip() for line in lines if line.strip())


def _narrow(labels: Sequence[str]) -> float:
    """The width to draw a figure of these row labels for: :data:`NARROW_IN`, less what
    labels longer than a dozen characters take, so the whole still fits a phone."""
    longest = max((len(line) for label in labels for line in label.split("\n")), default=0)
    return max(3.2, NARROW_IN - 0.09 * max(0, longest - 12))


def _lines(labels: Sequence[str]) -> float:
    """How much taller rows of these labels are than rows of one-line labels."""
    lines: int = max((label.count("\n") + 1 for label in labels), default=1)
    return math.sqrt(lines)


def _ok(*values: float | None) -> bool:
    return all(v is not None and math.isfinite(v) for v in values)


def arm_rates(report: Report) -> bytes | None:
    """Per-arm outcome rates with their intervals (PNG)."""
    return _drawn(arm_rates_figure(report))


def arm_rates_figure(report: Report) -> Figure | None:
    arms = [a for a in report.arms if _ok(a.rate, a.interval.low, a.interval.high)]
    if not arms:
        return None
    labels = [_wrap_label(a.id) for a in arms]
    fig, ax = _canvas(_narrow(labels), 0.6 + 0.55 * len(arms) * _lines(labels), labels)
    for i, arm in enumerate(arms):
        rate = float(arm.rate or 0.0)
        lo, hi = float(arm.interval.low or 0.0), float(arm.interval.high or 0.0)
        ax.errorbar(
            [rate],
            [i],
            xerr=[[rate - lo], [hi - rate]],
            fmt="o",
            color="#1f4e79",
            capsize=4,
            clip_on=False,  # a rate of 0 or 1 is drawn whole, not cut at the frame
        )
    ax.set_yticks(range(len(arms)), labels)
    ax.set_xlim(-0.03, 1.03)
    ax.invert_yaxis()
    level = arms[0].interval.level
    ax.set_xlabel(_wrap(f"{report.outcome} rate per run ({level:.0%} Jeffreys, deflated by DEFF)"))
    ax.grid(axis="x", alpha=0.3)
    return fig


def _pooled_rows(report: Report) -> list[tuple[str, float | None, Interval]]:
    """The whole-design effects, each labelled with what it pairs and resamples: the
    registered primary (its own unit and aggregation) and the run-level bootstrap. They
    answer different questions and can differ; the labels say which is which."""
    rows: list[tuple[str, float | None, Interval]] = []
    for test, label in (
        (report.primary, "primary"),
        (report.difference, "all runs"),
    ):
        iv = test.interval if test is not None else None
        if test is None or iv is None or not _ok(test.estimate, iv.low, iv.high):
            continue
        if len(test.compare) != 2 or not -1.0 <= float(test.estimate or 0.0) <= 1.0:
            continue  # a contrast of several arms, or another scale (an odds ratio, say)
        rows.append((f"{label}: {test.test}, per {test.unit}", test.estimate, iv))
    return rows


def forest(report: Report) -> bytes | None:
    """Paired differences per intent and for the whole design (PNG)."""
    return _drawn(forest_figure(report))


def forest_figure(report: Report) -> Figure | None:
    rows: list[tuple[str, float | None, Interval]] = [
        (r.intent, r.difference, r.interval)
        for r in report.per_intent
        if r.interval is not None and _ok(r.difference, r.interval.low, r.interval.high)
    ]
    pooled = _pooled_rows(report)
    if not rows and not pooled:
        return None
    first_pooled = len(rows)
    rows += pooled
    labels = [_wrap_label(r[0]) for r in rows]
    fig, ax = _canvas(_narrow(labels), 0.7 + 0.45 * len(rows) * _lines(labels), labels)
    for i, (_, diff, interval) in enumerate(rows):
        d = float(diff or 0.0)
        lo, hi = float(interval.low or 0.0), float(interval.high or 0.0)
        whole = i >= first_pooled
        ax.errorbar(
            [d],
            [i],
            xerr=[[max(d - lo, 0.0)], [max(hi - d, 0.0)]],
            fmt="D" if whole else "s",
            color="#7f2704" if whole else "#444444",
            capsize=3,
            clip_on=False,
        )
    ax.axvline(0.0, color="#999999", lw=1)
    ax.set_yticks(range(len(rows)), labels)
    ax.invert_yaxis()
    ax.set_xlim(-1.05, 1.05)
    compare = list(report.primary.compare) if report.primary is not None else []
    if len(compare) != 2:  # a registered contrast over several arms: the plain pair
        compare = [a.id for a in report.arms[:2]]
    what = f"{compare[1]} - {compare[0]}" if len(compare) == 2 else "between arms"
    level = rows[0][2].level
    ax.set_xlabel(
        _wrap(f"paired difference {what} ({level:.0%} intervals; intents listed, not flagged)")
    )
    ax.grid(axis="x", alpha=0.3)
    return fig


def funnel(report: Report) -> bytes | None:
    """Each arm's share of positive runs reaching each measured stage (PNG)."""
    return _drawn(funnel_figure(report))


def funnel_figure(report: Report) -> Figure | None:
    data = report.exploratory.get("funnel") or {}
    arms = [(arm, f) for arm, f in data.items() if f]
    if not arms:
        return None
    stages = ["surfaced", "selected", "invoked", "executed", "completed"]
    fig, ax = _canvas(NARROW_IN + 0.5, 3.0)
    width = 0.8 / len(arms)
    for j, (arm, f) in enumerate(arms):
        xs, ys = [], []
        for i, stage in enumerate(stages):
            cell = f["stages"].get(stage)
            if cell is not None:
                xs.append(i + j * width)
                ys.append(cell["rate"])
        ax.bar(xs, ys, width=width, label=arm)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(stages))], stages, rotation=30)
    ax.set_ylim(0, 1)
    ax.set_ylabel(_wrap("share of positive runs reaching the stage", 30))
    ax.legend(frameon=False)
    ax.set_title(_wrap("Funnel per arm (measured stages only; exploratory)"), fontsize=9)
    return fig


def eprocess(report: Report) -> bytes | None:
    """The registered stopping rule's e-process against its threshold (PNG)."""
    return _drawn(eprocess_figure(report))


def eprocess_figure(report: Report) -> Figure | None:
    stop = report.stopping
    if stop is None or not stop.path:
        return None
    fig, ax = _canvas(NARROW_IN, 3.0)
    xs = list(range(1, len(stop.path) + 1))
    ax.plot(xs, stop.path, color="#1f4e79", lw=1.5)
    ax.axhline(
        stop.threshold, color="#b22222", ls="--", lw=1, label=f"threshold {stop.threshold:g}"
    )
    ax.axvline(
        stop.min_prompts, color="#999999", ls=":", lw=1, label=f"min prompts {stop.min_prompts}"
    )
    if stop.stop_at is not None:
        ax.plot(
            [stop.stop_at],
            [stop.path[stop.stop_at - 1]],
            "o",
            color="#b22222",
            label=f"crossed at task {stop.stop_at}",
        )
    ax.set_yscale("log")
    ax.set_xlabel(_wrap("tasks, in the registered stopping order (seeded)"))
    ax.set_ylabel("beta-mixture e-value")
    ax.legend(frameon=False, fontsize=8)
    return fig


# --- The registered primary effect (issue 43, item 4) ------------------------------------


@dataclass(frozen=True)
class Reference:
    """A registered reference value drawn as vertical lines: the equivalence margin of a
    registered TOST of the same comparison, or the registered plan's MDE."""

    label: str
    values: tuple[float, ...]


@dataclass(frozen=True)
class PrimaryEffect:
    """What the primary-effect figure plots, read from the report model only: the
    registered primary test's estimate and interval as report.json holds them (the
    contrast, the paired difference or, with one arm and no test, the rate), never an
    interval the report withheld (``low``/``high`` None, ``reason`` says why)."""

    kind: str  # "contrast", "paired difference" or "rate"
    label: str  # what is estimated, as the figure names it
    estimate: float
    low: float | None
    high: float | None
    level: float
    method: str
    reason: str | None  # why the bounds are withheld, or why the interval has no width
    support: tuple[float, float] | None
    references: tuple[Reference, ...] = ()
    #: what the estimate is, in the report's words (the test's estimate label, or the
    #: contrast's registered description); the figure's axis says it
    detail: str | None = None

    @property
    def withheld(self) -> bool:
        return self.low is None or self.high is None


def _support(report: Report, contrast: str | None) -> tuple[float, float] | None:
    if contrast is None:
        return (-1.0, 1.0)
    c = next((c for c in report.contrasts if c.id == contrast), None)
    if c is None or not c.weights:
        return None
    return (
        sum(w for w in c.weights.values() if w < 0),
        sum(w for w in c.weights.values() if w > 0),
    )


def _references(report: Report, test: TestReport) -> tuple[Reference, ...]:
    """The registered margin of a TOST of the same comparison (the primary itself, or a
    secondary), and the registered plan's MDE on the primary's side(s)."""
    refs: list[Reference] = []
    for t in (test, *report.secondary):
        if t.test != "tost_paired" or t.margin is None or not math.isfinite(t.margin):
            continue
        if list(t.compare) != list(test.compare) or t.contrast != test.contrast:
            continue
        m = float(t.margin)
        refs.append(Reference(f"equivalence margin ±{m:g} (TOST, {t.registration_field})", (-m, m)))
        break
    plan = report.registration_document.get("plan") or {}
    mde = plan.get("mde") if isinstance(plan, dict) else None
    if isinstance(mde, int | float) and math.isfinite(mde) and mde > 0:
        sides = {"greater": (float(mde),), "less": (-float(mde),)}
        refs.append(
            Reference(f"planning MDE {mde:g} (registered plan)", sides.get(test.sides, (-mde, mde)))
        )
    return tuple(refs)


def primary_effect(report: Report) -> PrimaryEffect | None:
    """The registered primary effect as plotted (None: nothing was estimated)."""
    p = report.primary
    if p is None:
        arms = report.arms
        if len(arms) != 1 or not _ok(arms[0].rate):
            return None
        a, rate_iv = arms[0], arms[0].interval
        bounded = _ok(rate_iv.low, rate_iv.high)
        return PrimaryEffect(
            kind="rate",
            label=f"{report.outcome} rate of {a.id}",
            estimate=float(a.rate or 0.0),
            low=float(rate_iv.low or 0.0) if bounded else None,
            high=float(rate_iv.high or 0.0) if bounded else None,
            level=rate_iv.level,
            method=rate_iv.method,
            reason=rate_iv.reason,
            support=(0.0, 1.0),
        )
    if not _ok(p.estimate):
        return None
    iv = p.interval
    bounded = iv is not None and _ok(iv.low, iv.high)
    reason = iv.reason if iv is not None else None
    if not bounded and not reason:
        reason = p.reason
    if p.contrast is not None:
        kind, label = "contrast", f"contrast '{p.contrast}'"
        described = next((c.description for c in report.contrasts if c.id == p.contrast), None)
        detail = f"{label}: {described}" if described else p.estimate_label
    else:
        kind = "paired difference"
        label = f"{p.compare[1]} - {p.compare[0]}" if len(p.compare) == 2 else "between arms"
        detail = p.estimate_label
    return PrimaryEffect(
        kind=kind,
        label=label,
        estimate=float(p.estimate or 0.0),
        low=float(iv.low or 0.0) if bounded and iv is not None else None,
        high=float(iv.high or 0.0) if bounded and iv is not None else None,
        level=iv.level if iv is not None else 1 - p.alpha,
        method=iv.method if iv is not None else p.method,
        reason=reason,
        support=_support(report, p.contrast) if kind == "contrast" else (-1.0, 1.0),
        references=_references(report, p),
        detail=detail or None,
    )


def _x_range(effect: PrimaryEffect) -> tuple[float, float]:
    """The x range: the estimate, its bounds, zero (a difference) and every reference,
    with room around them, inside the quantity's support (a little past its ends, so a
    point on an end is drawn whole)."""
    xs = [effect.estimate]
    xs += [v for v in (effect.low, effect.high) if v is not None]
    xs += [v for ref in effect.references for v in ref.values]
    if effect.kind != "rate":
        xs.append(0.0)
    lo, hi = min(xs), max(xs)
    pad = max(0.12 * (hi - lo), 0.05)
    lo, hi = lo - pad, hi + pad
    if effect.support is not None:
        s_lo, s_hi = effect.support
        edge = 0.03 * (s_hi - s_lo)
        lo, hi = max(lo, s_lo - edge), min(hi, s_hi + edge)
    return lo, hi


#: colours and line styles of the references, in order (margin, MDE)
_REFERENCE_STYLES = (("#b22222", "--"), ("#555555", ":"))


def primary_effect_png(report: Report) -> bytes | None:
    """The registered primary effect with its interval (PNG)."""
    return _drawn(primary_effect_figure(report))


def primary_effect_figure(report: Report) -> Figure | None:
    """The primary effect: a point with its interval on the quantity's own axis; where
    the interval is withheld, the point alone and the reason written in the figure;
    the registered margin or MDE as reference lines, in the legend."""
    effect = primary_effect(report)
    if effect is None:
        return None
    fig, ax = _canvas(4.0, 1.6 if effect.reason else 1.2)
    y = 0.0
    colour = "#7f2704"
    if effect.withheld:
        ax.plot([effect.estimate], [y], "D", color=colour, clip_on=False)
        numbers = f"estimate {effect.estimate:.3f}; no interval"
    else:
        lo, hi = float(effect.low or 0.0), float(effect.high or 0.0)
        ax.errorbar(
            [effect.estimate],
            [y],
            xerr=[[max(effect.estimate - lo, 0.0)], [max(hi - effect.estimate, 0.0)]],
            fmt="D",
            color=colour,
            capsize=5,
            clip_on=False,
        )
        numbers = f"{effect.estimate:.3f} [{lo:.3f}, {hi:.3f}]"
    x_lo, x_hi = _x_range(effect)
    where = (effect.estimate - x_lo) / (x_hi - x_lo)  # the numbers stay inside the frame
    ax.annotate(
        numbers,
        (effect.estimate, y),
        xytext=(0, 8),
        textcoords="offset points",
        ha="left" if where < 0.3 else "right" if where > 0.7 else "center",
    )
    if effect.reason:
        ax.text(
            0.5,
            0.96,
            textwrap.fill(effect.reason, 44),
            transform=ax.transAxes,
            ha="center",
            va="top",
            fontsize=MIN_FONT_PT,
            color="#333333",
        )
    if effect.kind != "rate":
        ax.axvline(0.0, color="#999999", lw=1)
    for ref, (ref_colour, style) in zip(effect.references, _REFERENCE_STYLES, strict=False):
        for i, value in enumerate(ref.values):
            ax.axvline(
                value, color=ref_colour, ls=style, lw=1.2, label=ref.label if i == 0 else None
            )
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(-0.8, 2.0 if effect.reason else 0.9)
    ax.set_yticks([])
    interval = "no interval" if effect.withheld else f"{effect.level:.0%} interval"
    ax.set_xlabel(textwrap.fill(f"{effect.detail or effect.label} ({interval})", 48))
    ax.grid(axis="x", alpha=0.3)
    if effect.references:
        below = LEGEND_GAP_IN / (ax.get_position().height * fig.get_figheight())
        ax.legend(frameon=False, loc="upper center", bbox_to_anchor=(0.5, -below), ncol=1)
    return fig


TERMINAL_COLOURS = {
    "focal": "#1f4e79",
    "competitor": "#c55a11",
    "other_external": "#7f6000",
    "answered_without_search": "#a5a5a5",
    "searched_then_declined": "#d9d9d9",
    "unresolved": "#7f2704",
}


#: inches between the terminal figure's axes and its legend (below the axis label)
LEGEND_GAP_IN = 0.75


def terminal_breakdown(report: Report) -> bytes | None:
    """Figure 4 (PNG): see :func:`terminal_breakdown_figure`."""
    return _drawn(terminal_breakdown_figure(report))


def terminal_rows(report: Report) -> list[tuple[str, Any]]:
    """Figure 4's rows: (label, the arm's terminal row of an intent), positive intents
    with runs; no rows, no figure."""
    ir = report.invokerank
    return [
        (f"{a.arm}: {t.intent}", t)
        for a in (ir.arms if ir is not None else [])
        for t in a.terminal
        if t.polarity == "positive" and t.runs > 0
    ]


def terminal_breakdown_figure(report: Report) -> Figure | None:
    """Figure 4: each intent's positive runs by terminal class, per arm (negatives apart,
    in the report's table), as stacked shares of the row's runs."""
    rows = terminal_rows(report)
    if not rows:
        return None
    from matplotlib.collections import PolyCollection  # lazy: matplotlib, as in _canvas

    height = 0.8 + 0.35 * len(rows)
    fig, ax = _canvas(7.0, height, [label for label, _ in rows])
    left = [0.0] * len(rows)
    half = 0.4  # half a bar's height (barh's default height 0.8)
    for name, colour in TERMINAL_COLOURS.items():
        # one collection per class, not one rectangle per row and class: the figure of
        # a large programme has many rows, and each artist costs its draw and layout
        widths = [t.counts.get(name, 0) / t.runs for _, t in rows]
        boxes = [
            [(x, y - half), (x + w, y - half), (x + w, y + half), (x, y + half)]
            for y, (x, w) in enumerate(zip(left, widths, strict=True))
        ]
        ax.add_collection(
            PolyCollection(
                boxes, facecolors=colour, edgecolors="none", label=name.replace("_", " ")
            )
        )
        left = [a + b for a, b in zip(left, widths, strict=True)]
    margin = 0.05 * (len(rows) - 1 + 2 * half)  # the margins barh's autoscaling leaves
    ax.set_ylim(-half - margin, len(rows) - 1 + half + margin)
    ax.set_yticks(range(len(rows)), [label for label, _ in rows])
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of the row's positive runs (first external call, or why none)")
    # the legend a fixed distance below the axes (a share of the axes' height would leave
    # inches of blank canvas, to draw and encode, under a programme's many rows)
    below = LEGEND_GAP_IN / (ax.get_position().height * fig.get_figheight())
    ax.legend(frameon=False, fontsize=7, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -below))
    ax.set_title("Terminal classes per intent (Figure 4; unjudged: no native judge)", fontsize=9)
    return fig


def _on_canvas(draw: Callable[[Report, Any], Figure | None]) -> Callable[[Report], bytes | None]:
    """A figure of another module drawn on this module's canvas (:func:`_canvas`): the
    section modules take the canvas as an argument, so they need not import this one."""
    return lambda report: _drawn(draw(report, _canvas))


FIGURES = {
    "primary_effect": (primary_effect_png, "The registered primary effect with its interval"),
    "arm_rates": (arm_rates, "Per-arm outcome rates with intervals"),
    "forest": (forest, "Paired differences per intent (forest plot)"),
    "funnel": (funnel, "Funnel per arm (where measured)"),
    "eprocess": (eprocess, "E-process of the registered stopping rule"),
    "terminal_breakdown": (terminal_breakdown, "Terminal classes per intent (Figure 4)"),
    "ir_funnel": (
        _on_canvas(ir_figures.ir_funnel_figure),
        "InvokeRank funnel per arm with intervals (Figure 2)",
    ),
    # Figure 2 per host: one file per host with run stages (names fixed: HOST_SLOTS slots)
    **{
        f"ir_funnel_host_{n + 1}": (
            _on_canvas(ir_figures.ir_host_funnel_figure(n)),
            "InvokeRank funnel of one host, selection beside execution (Figure 2)",
        )
        for n in range(ir_figures.HOST_SLOTS)
    },
    "ir_intents": (
        _on_canvas(ir_figures.ir_intents_figure),
        "InvokeRank score per intent with intervals (Figure 3)",
    ),
    "ir_metadata": (
        _on_canvas(ir_figures.ir_metadata_figure),
        "Paired changes beside calls on negatives (Figure 5)",
    ),
    "ir_rho": (
        _on_canvas(ir_figures.ir_rho_figure),
        "Intra-prompt rho per intent with intervals (Figure 8)",
    ),
    "ir_replicates": (
        _on_canvas(ir_figures.ir_replicates_figure),
        "Replicate sessions' run rates with the within-run range (Figure 7)",
    ),
    # S vs T per compared arm (invokerank.telemetry; names fixed: SVST_SLOTS slots)
    **{
        f"ir_s_vs_t_{n + 1}": (
            _on_canvas(ir_figures.ir_svst_figure(n)),
            "S vs T: an arm's tool mix beside its host's telemetry (seed 7.9)",
        )
        for n in range(ir_figures.SVST_SLOTS)
    },
    "tb_contrasts": (
        _on_canvas(tb_figures.tb_contrasts_figure),
        "Study contrasts with 95% family-cluster intervals (seed Figure 2a)",
    ),
    "tb_v_truncation": (
        _on_canvas(tb_figures.tb_v_truncation_figure),
        "V effect against largest-menu truncation per configuration (seed Figures 6, 7)",
    ),
    "tb_availability": (
        _on_canvas(tb_figures.tb_availability_figure),
        "Discovery availability by retriever (seed Figure 3c)",
    ),
    "tb_decoder_gains": (
        _on_canvas(tb_figures.tb_decoder_gains_figure),
        "Decoder: paired gains in balanced accuracy with intent-cluster intervals (seed Figure 11)",
    ),
    "tb_cap_sweep": (
        _on_canvas(tb_figures.tb_cap_sweep_figure),
        "Menu contrast at each completion cap with 95% family-cluster intervals (seed Figure 2b)",
    ),
    "tb_crossover": (
        _on_canvas(tb_figures.tb_crossover_figure),
        "Crossover: menu contrast at each cap with 95% family-cluster intervals (seed Figure 8)",
    ),
    "tb_repairs": (
        _on_canvas(tb_figures.tb_repairs_figure),
        "Repairs: loss L, stress gain Gamma and specificity Sigma with 95% family-cluster "
        "intervals (seed Figure 4a)",
    ),
    "tb_frontier": (
        _on_canvas(tb_figures.tb_frontier_figure),
        "Success by public handoffs in front of the low workflow (seed Figure 3b)",
    ),
    "tb_frontier_episodes": (
        _on_canvas(tb_figures.tb_frontier_episodes_figure),
        "Frontier episodes: executed calls against tokens by level; filled markers ended at "
        "the episode budget (seed Figure 9)",
    ),
    "tb_decision": (
        _on_canvas(tb_figures.tb_decision_figure),
        "Decision matrix: each repair's success against every configuration switch at the "
        "stressed cell, pp, with 95% family-cluster intervals (seed Figure 4b)",
    ),
    "tb_census": (
        _on_canvas(tb_figures.tb_census_figure),
        "Failure census: each terminal flag's share of the failed episodes, all arms "
        "pooled; no interval (a census of the failures observed) (seed Figure 3a)",
    ),
    "tb_configurations": (
        _on_canvas(tb_figures.tb_configurations_figure),
        "Per-configuration effects of each contrast, pp, with the organisation-equal "
        "reweighting (diamonds) (seed Table 4, Figure 7)",
    ),
    "tb_holdout": (
        _on_canvas(tb_figures.tb_holdout_figure),
        "Structural holdout: executed calls by issuer (model, public-handoff controller) per "
        "arm, with its VTS (seed Figure 10)",
    ),
    "tb_family": (
        _on_canvas(tb_figures.tb_family_figure),
        "One task family compiled under the V, W and D pressures: each menu's tools with the "
        "gold tools marked, each workflow's certified minimum and calls, the same returned "
        "record in each encoding; an illustration of the compiled variants (seed Figure 5)",
    ),
}


def caption(name: str, report: Report) -> str:
    """A figure's caption, saying what it shows (the forest plot without intent rows shows
    the whole design's difference only, and is titled so; the primary effect names what
    it is and whether its interval is withheld)."""
    if name == "primary_effect":
        effect = primary_effect(report)
        if effect is not None:
            shown = (
                "no interval: " + (effect.reason or "withheld")
                if effect.withheld
                else f"{effect.level:.0%} interval"
            )
            what = effect.label if effect.kind == "contrast" else f"{effect.kind} {effect.label}"
            return f"Registered primary effect: {what} ({shown})"
    if name == "tb_v_truncation" and (key := tb_figures.tb_v_truncation_key(report)):
        points = "; ".join(f"{i} {label}" for i, label in enumerate(key, start=1))
        return f"{FIGURES[name][1]}: {points}"
    if name == "tb_frontier" and (key := tb_figures.tb_frontier_key(report)):
        lines = "; ".join(f"{i} {label}" for i, label in enumerate(key, start=1))
        return f"{FIGURES[name][1]}: {lines}"
    if name in ("tb_cap_sweep", "tb_crossover") and (
        key := tb_figures.tb_cap_sweep_key(report, name)
    ):
        lines = "; ".join(f"{i} {label}" for i, label in enumerate(key, start=1))
        data = tb_figures.study_figure(report, name)
        withheld = sorted({p.reason for p in data.points if p.reason}) if data else []
        more = f"; open markers: {'; '.join(withheld)}" if withheld else ""
        return f"{FIGURES[name][1]}: {lines}{more}"
    if name in (
        "tb_contrasts",
        "tb_decoder_gains",
        "tb_repairs",
        "tb_configurations",
        "tb_decision",
    ) and (data := tb_figures.study_figure(report, name)):
        withheld = sorted({p.reason for p in data.points if p.reason})
        if withheld:
            return f"{FIGURES[name][1]}; open markers: {'; '.join(withheld)}"
    if name.startswith("ir_funnel_host_") and (
        host := ir_figures.host_funnel_caption(report, int(name.rsplit("_", 1)[1]) - 1)
    ):
        return host
    if name.startswith("ir_s_vs_t_") and (
        svst := ir_figures.svst_caption(report, int(name.rsplit("_", 1)[1]) - 1)
    ):
        return svst
    if name == "forest" and not any(
        r.interval is not None and _ok(r.difference, r.interval.low, r.interval.high)
        for r in report.per_intent
    ):
        return "Paired difference between the arms, whole design (no intent with an interval)"
    return FIGURES.get(name, (None, name))[1]


#: The figure whose drawing grows with the programme (a row per arm and intent): drawn
#: in a forked child while this process draws the others (:class:`Drawing`).
LARGEST = "terminal_breakdown"


def _has_largest(report: Report) -> bool:
    """Whether :data:`LARGEST` has data (it is drawn exactly then), known before it is."""
    return bool(terminal_rows(report))


class Drawing:
    """A report's figures being drawn: :data:`LARGEST` in a forked child from the start
    (:mod:`prereg.core.forked`; in this process, at :meth:`result`, where forking is not
    used), the others here. :attr:`names` (every figure that has data, in
    :data:`FIGURES` order) is known once the others are drawn, before the largest is
    in: the report's JSON and Markdown, which name the figures but hold no picture, are
    written meanwhile."""

    def __init__(self, report: Report) -> None:
        self._largest = Forked(partial(FIGURES[LARGEST][0], report), fork=_has_largest(report))
        self._drawn = {n: draw(report) for n, (draw, _) in FIGURES.items() if n != LARGEST}
        self.names = [
            n
            for n in FIGURES
            if (self._drawn[n] is not None if n != LARGEST else _has_largest(report))
        ]

    def result(self) -> dict[str, bytes]:
        """Every figure that has data, by name (in :data:`FIGURES` order)."""
        drawn = {**self._drawn, LARGEST: self._largest.result()}
        return {name: png for name in FIGURES if (png := drawn[name]) is not None}
