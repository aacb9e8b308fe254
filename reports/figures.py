"""Figures of a report, drawn with matplotlib's Agg backend into PNG bytes.

PNG rather than SVG so that no string from the run data (arm or intent names)
ends up as markup in the HTML file: a raster cannot carry a script. Each figure
is drawn only from numbers already in the report (the renderers never compute);
a figure whose data were not measured or not registered is simply absent.
"""

from __future__ import annotations

import io
import math
from types import ModuleType
from typing import TYPE_CHECKING

from prereg.reports.model import Interval, Report

if TYPE_CHECKING:
    from matplotlib.figure import Figure

_DPI = 110


def _plt() -> ModuleType:
    """matplotlib.pyplot on the Agg backend."""
    import matplotlib  # lazy: matplotlib costs ~0.5 s to import and only figures need it

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt  # lazy: as above, after choosing the Agg backend

    return plt


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=_DPI, bbox_inches="tight", metadata={"Software": None})
    _plt().close(fig)
    return buf.getvalue()


def _ok(*values: float | None) -> bool:
    return all(v is not None and math.isfinite(v) for v in values)


def arm_rates(report: Report) -> bytes | None:
    arms = [a for a in report.arms if _ok(a.rate, a.interval.low, a.interval.high)]
    if not arms:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.0, 0.6 + 0.55 * len(arms)))
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
    ax.set_yticks(range(len(arms)), [a.id for a in arms])
    ax.set_xlim(-0.03, 1.03)
    ax.invert_yaxis()
    level = arms[0].interval.level
    ax.set_xlabel(f"{report.outcome} rate per run ({level:.0%} Jeffreys, deflated by DEFF)")
    ax.grid(axis="x", alpha=0.3)
    return _png(fig)


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
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.0, 0.7 + 0.45 * len(rows)))
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
    ax.set_yticks(range(len(rows)), [r[0] for r in rows])
    ax.invert_yaxis()
    ax.set_xlim(-1.05, 1.05)
    compare = list(report.primary.compare) if report.primary is not None else []
    if len(compare) != 2:  # a registered contrast over several arms: the plain pair
        compare = [a.id for a in report.arms[:2]]
    what = f"{compare[1]} - {compare[0]}" if len(compare) == 2 else "between arms"
    level = rows[0][2].level
    ax.set_xlabel(f"paired difference {what} ({level:.0%} intervals; intents listed, not flagged)")
    ax.grid(axis="x", alpha=0.3)
    return _png(fig)


def funnel(report: Report) -> bytes | None:
    data = report.exploratory.get("funnel") or {}
    arms = [(arm, f) for arm, f in data.items() if f]
    if not arms:
        return None
    stages = ["surfaced", "selected", "invoked", "executed", "completed"]
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 3.0))
    width = 0.8 / len(arms)
    for j, (arm, f) in enumerate(arms):
        xs, ys = [], []
        for i, stage in enumerate(stages):
            cell = f["stages"].get(stage)
            if cell is not None:
                xs.append(i + j * width)
                ys.append(cell["rate"])
        ax.bar(xs, ys, width=width, label=arm)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(stages))], stages)
    ax.set_ylim(0, 1)
    ax.set_ylabel("share of positive runs reaching the stage")
    ax.legend(frameon=False)
    ax.set_title("Funnel per arm (measured stages only; exploratory)", fontsize=9)
    return _png(fig)


def eprocess(report: Report) -> bytes | None:
    stop = report.stopping
    if stop is None or not stop.path:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.0, 3.0))
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
    ax.set_xlabel("tasks, in the registered stopping order (seeded)")
    ax.set_ylabel("beta-mixture e-value")
    ax.legend(frameon=False, fontsize=8)
    return _png(fig)


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
    """Figure 4: each intent's positive runs by terminal class, per arm (negatives apart,
    in the report's table), as stacked shares of the row's runs."""
    ir = report.invokerank
    rows = [
        (f"{a.arm}: {t.intent}", t)
        for a in (ir.arms if ir is not None else [])
        for t in a.terminal
        if t.polarity == "positive" and t.runs > 0
    ]
    if not rows:
        return None
    plt = _plt()
    from matplotlib.collections import PolyCollection  # lazy: matplotlib, as in _plt

    height = 0.8 + 0.35 * len(rows)
    fig, ax = plt.subplots(figsize=(7.0, height))
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
    below = LEGEND_GAP_IN / (height * (fig.subplotpars.top - fig.subplotpars.bottom))
    ax.legend(frameon=False, fontsize=7, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -below))
    ax.set_title("Terminal classes per intent (Figure 4; unjudged: no native judge)", fontsize=9)
    return _png(fig)


FIGURES = {
    "arm_rates": (arm_rates, "Per-arm outcome rates with intervals"),
    "forest": (forest, "Paired differences per intent (forest plot)"),
    "funnel": (funnel, "Funnel per arm (where measured)"),
    "eprocess": (eprocess, "E-process of the registered stopping rule"),
    "terminal_breakdown": (terminal_breakdown, "Terminal classes per intent (Figure 4)"),
}


def draw_all(report: Report) -> dict[str, bytes]:
    """Every figure that has data, by name."""
    out = {}
    for name, (draw, _) in FIGURES.items():
        png = draw(report)
        if png is not None:
            out[name] = png
    return out
