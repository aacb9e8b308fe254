"""``report.html``: one self-contained file (inline CSS, figures as base64 PNG).

At the top, under the title: a summary block (the verdict, the primary test's estimate
and interval or the reason it has none, the n) and a table of contents linking every
section's heading (each ``h2`` has an ``id``). Each figure sits in a box of its own that
scrolls sideways: it scales down to fit the column, but never below the scale at which
its smallest text stands :data:`~prereg.reports.render.figures.MIN_TEXT_CSS_PX` CSS px
high (docs/reports.md, "report.html on a phone"); every figure drawn is shown.

Escaping is by construction: markup is only ever produced by :func:`el`, which
runs every text child and every attribute value through
:func:`prereg.core.untrusted.html_text` (control, bidi and other invisible characters
shown as escapes, as in report.md and on the terminal, then ``html.escape``). The
only unescaped content is :class:`Raw`, used for markup :func:`el` itself
produced and for the base64 data of our own figures. Tool metadata, prompts,
hypotheses and any run field are data, never markup (invariant 10).
"""

from __future__ import annotations

import base64
import json
import math
import re
import struct
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from prereg.core.untrusted import html_text
from prereg.reports.calibration.text import TITLE as CALIBRATION_TITLE
from prereg.reports.calibration.text import calibration_caption, calibration_table
from prereg.reports.judged.text import judged_lines
from prereg.reports.model import Report, TestReport
from prereg.reports.render.figures import caption as figure_caption
from prereg.reports.render.figures import min_display_scale, min_text_px
from prereg.reports.render.text import (
    CONTROLS_NOTE,
    EXPLORATORY_BANNER,
    arm_table,
    bootstrap_line,
    configuration_table,
    configurations_differ,
    contrast_table,
    control_rows,
    exploratory_tables,
    flat_rows,
    headline,
    intent_table,
    interval,
    invokerank_tables,
    lint_waivers,
    multiplicity_table,
    num,
    pairwise_table,
    primary_line,
    pvalue,
)

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:1000px;margin:2em auto;
padding:0 1em;color:#1b1b1b;line-height:1.45}
h1{font-size:1.5em}h2{font-size:1.2em;border-bottom:1px solid #ddd;padding-bottom:.2em}
table{border-collapse:collapse;margin:.5em 0 1em;font-size:.9em}
td,th{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top}
th{background:#f3f3f3}.verdict{font-size:1.3em;padding:.6em;border-radius:4px;background:#eef3f8}
.banner{background:#fff3cd;border:1px solid #e0c36a;padding:.6em;font-weight:bold}
blockquote{border-left:4px solid #ccc;margin:.5em 0;padding:.2em .8em;white-space:pre-wrap}
code{background:#f5f5f5;padding:0 .2em}.muted{color:#666;font-size:.9em}
.scroll{overflow-x:auto;max-width:100%}
table.nested{margin:0;font-size:1em}table.nested th{font-weight:normal;white-space:nowrap}
img{max-width:100%;height:auto}figure{margin:1em 0}
figure .scroll img{display:block}
.summary{border:1px solid #c9d6e3;border-radius:4px;padding:.4em .9em;background:#f8fafc}
.summary dt{font-weight:bold;margin-top:.3em}.summary dd{margin:0 0 0 1em}
nav.toc ul{margin:.2em 0;padding-left:1.2em}nav.toc{font-size:.95em;margin:1em 0}
"""


class Raw(str):
    """Markup that is already safe (produced by :func:`el`, or our own base64)."""


class Heading(Raw):
    """A section heading (``h2``) with its anchor; the table of contents links each."""

    text: str
    anchor: str


def _slug(text: str) -> str:
    """An ``id`` from a heading's text: ASCII letters, digits and hyphens only."""
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:48].strip("-")
    return "sec-" + (slug or "section")


def _h2(text: str, anchor: str | None = None) -> Heading:
    anchor = anchor or _slug(text)
    heading = Heading(el("h2", text, id=anchor))
    heading.text, heading.anchor = text, anchor
    return heading


def el(tag: str, *children: Any, **attrs: Any) -> Raw:
    parts = []
    for key, value in attrs.items():
        if value is None:
            continue
        name = key.rstrip("_").replace("_", "-")
        parts.append(f' {name}="{html_text(value)}"')
    inner = "".join(c if isinstance(c, Raw) else html_text(c) for c in children if c is not None)
    return Raw(f"<{tag}{''.join(parts)}>{inner}</{tag}>")


def join(items: Sequence[Any]) -> Raw:
    return Raw("".join(i if isinstance(i, Raw) else html_text(i) for i in items))


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> Raw:
    """A table in a box that scrolls sideways on a narrow screen, never the page."""
    head = el("tr", *[el("th", h) for h in header])
    body = [el("tr", *[el("td", c) for c in row]) for row in rows]
    return el("div", el("table", el("thead", head), el("tbody", *body)), class_="scroll")


def _nested(value: Any) -> Raw:
    """A JSON object (the host, the feasibility gate) as a small key/value table."""
    rows = [el("tr", el("th", key), el("td", text)) for key, text in flat_rows(value)]
    return el("table", el("tbody", *rows), class_="nested")


def _tests(tests: Sequence[TestReport]) -> Raw:
    return table(
        ["field", "test", "arms", "estimate", "interval", "p", "e", "decision", "note"],
        [
            [
                t.registration_field,
                t.test,
                " vs ".join(t.compare),
                num(t.estimate),
                interval(t.interval),
                pvalue(t.pvalue),
                num(t.evalue, 2),
                t.decision,
                t.note or t.reason,
            ]
            for t in tests
        ],
    )


def png_width(png: bytes) -> int:
    """A PNG's width in pixels (its IHDR chunk)."""
    width: int = struct.unpack(">I", png[16:20])[0]
    return width


def _figure(name: str, png: bytes, r: Report) -> Raw:
    """A figure in a box of its own: it scales down to the column, to no less than the
    scale that keeps its smallest text legible, and the box scrolls sideways past that
    (never the page). ``data-text-px``: its smallest text's height in the PNG's pixels,
    what the browser test scales to measure the text as shown."""
    caption = figure_caption(name, r)
    data = base64.b64encode(png).decode("ascii")
    width = png_width(png)
    floor = math.ceil(width * min_display_scale())
    style = f"width:100%;max-width:{width}px;min-width:{min(floor, width)}px;height:auto"
    img = Raw(
        f'<img alt="{html_text(caption)}" style="{html_text(style)}" '
        f'data-text-px="{min_text_px():.2f}" src="data:image/png;base64,{data}">'
    )
    return el(
        "figure", el("div", img, class_="scroll"), el("figcaption", caption), data_figure=name
    )


def _title(r: Report) -> list[Any]:
    body: list[Any] = [el("h1", f"Report: {r.registration}: {r.title}")]
    if r.mode == "exploratory":
        body.append(
            el(
                "p",
                EXPLORATORY_BANNER
                + " Labelled exploratory because: "
                + "; ".join(r.exploratory_reasons),
                class_="banner",
            )
        )
    label, text = headline(r)
    body.append(el("p", el("strong", f"{label}: "), text, class_="verdict"))
    body.append(el("p", f"Decided by: {r.verdict_detail.decided_by}. {r.verdict_detail.reason}"))
    return body


def _registration(r: Report) -> list[Any]:
    body: list[Any] = []
    prov = r.provenance
    body += [
        _h2("Registration"),
        table(
            ["field", "value"],
            [
                ["id", r.registration],
                ["digest", r.digest],
                ["kind", r.kind],
                ["split", r.split],
                ["experiment", r.experiment],
                ["outcome", r.outcome],
                ["host", _nested(r.host)],
                ["registered at", f"{prov.registered_at} (ledger seq {prov.ledger_seq})"],
                [
                    "ledger head at analysis",
                    f"seq {prov.ledger_head.get('seq')}, {prov.ledger_head.get('hash')}",
                ],
                ["superseded by", prov.superseded_by or "-"],
                ["feasibility", _nested(r.feasibility) if r.feasibility else "-"],
                *[["corpus lint", line] for line in lint_waivers(r)],
                ["prereg version", prov.prereg_version],
                ["analysed at", prov.analysed_at],
            ],
        ),
    ]
    body += [
        el("p", el("strong", "Hypothesis"), " (verbatim, never evaluated):"),
        el("blockquote", r.hypothesis),
        el("p", el("strong", "Falsification"), " (verbatim, never evaluated):"),
        el("blockquote", r.falsification),
    ]
    return body


def _runs(r: Report) -> list[Any]:
    body: list[Any] = []
    runs, comp = r.runs, r.completeness
    body += [
        _h2("Runs"),
        table(
            ["", ""],
            [
                ["evidence class", runs.evidence_class or "-"],
                ["drivers", ", ".join(runs.drivers)],
                ["records / used", f"{runs.records} / {runs.used}"],
                [
                    "infrastructure failures",
                    f"{runs.infra_errors} (open: {comp.infra_errors_open})",
                ],
                [
                    "completeness",
                    f"{comp.completed} of {comp.planned} planned units; "
                    f"{'complete' if comp.complete else 'INCOMPLETE'} ({comp.basis})",
                ],
                ["missing (first ones)", ", ".join(comp.missing_units) or "-"],
                ["models asked for", ", ".join(runs.models_requested) or "none"],
                ["models returned", ", ".join(runs.models_returned) or "none"],
                [
                    "spend",
                    "null (not measured)"
                    if runs.spend_usd is None
                    else f"${runs.spend_usd:.4f} over {runs.spend_measured_runs} run(s)",
                ],
                ["tokens", json.dumps(runs.tokens) if runs.tokens else "null (not measured)"],
            ],
        ),
    ]
    return body


def _arms(r: Report, figures: Mapping[str, bytes]) -> list[Any]:
    body: list[Any] = []
    body += [
        _h2(f"Per-arm rates (registered outcome: {r.outcome})"),
        table(*arm_table(r)),
    ]
    if configurations_differ(r):
        body += [
            el("h3", "Configurations (the arms differ in host, model, budgets or prompt)"),
            table(*configuration_table(r)),
        ]
    if "arm_rates" in figures:
        body.append(_figure("arm_rates", figures["arm_rates"], r))
    return body


def _primary(r: Report, figures: Mapping[str, bytes]) -> list[Any]:
    body: list[Any] = []
    body += [_h2("Primary test (registered)"), el("p", primary_line(r))]
    if r.primary is not None:
        body.append(el("p", f"Reading: {r.primary.reading}: {r.primary.reason}"))
    if r.difference is not None:
        body.append(el("p", bootstrap_line(r)))
    if PRIMARY_FIGURE in figures:
        body.append(_figure(PRIMARY_FIGURE, figures[PRIMARY_FIGURE], r))
    return body


#: the figure of the registered primary effect (render.figures.FIGURES)
PRIMARY_FIGURE = "primary_effect"


def summary_rows(r: Report) -> list[tuple[str, str]]:
    """The summary block's rows (label, text): the verdict, the primary test's estimate
    and interval (or why it has none), and the n. Also what the tests read."""
    label, text = headline(r)
    rows = [(label, text)]
    p = r.primary
    if p is None:
        rows.append(("Primary test", "not computed (no completed run)"))
    else:
        iv = p.interval
        withheld = iv is None or iv.low is None or iv.high is None
        shown = (
            "no interval: " + ((iv.reason if iv is not None else None) or p.reason)
            if withheld
            else interval(iv)
        )
        what = f"contrast '{p.contrast}'" if p.contrast else " - ".join(reversed(p.compare))
        rows.append(("Primary test", f"{p.test}, {what}: estimate {num(p.estimate)}"))
        rows.append(("Interval", shown))
        on = f"{p.n} tasks" if p.unit == "task" else f"{p.n} tasks in {p.units} {p.unit}s"
        rows.append(("n", f"{on}; {r.runs.used} runs used of {r.runs.records} records"))
    return rows


def _summary(r: Report) -> Raw:
    items: list[Any] = []
    for label, text in summary_rows(r):
        items += [el("dt", label), el("dd", text)]
    return el("section", el("dl", *items), class_="summary", id="summary")


def _contents(headings: Sequence[Heading]) -> Raw:
    links = [el("li", el("a", "Summary", href="#summary"))]
    links += [el("li", el("a", h.text, href=f"#{h.anchor}")) for h in headings]
    return el("nav", el("strong", "Contents"), el("ul", *links), class_="toc", id="contents")


def _anchored(body: list[Any]) -> tuple[list[Any], list[Heading]]:
    """The body with every heading's anchor unique (a repeated one numbered), and the
    headings in order."""
    seen: Counter[str] = Counter()
    out: list[Any] = []
    headings: list[Heading] = []
    for item in body:
        if isinstance(item, Heading):
            seen[item.anchor] += 1
            if seen[item.anchor] > 1:
                item = _h2(item.text, f"{item.anchor}-{seen[item.anchor]}")
            headings.append(item)
        out.append(item)
    return out, headings


def _other_figures(r: Report, figures: Mapping[str, bytes], body: list[Any]) -> list[Any]:
    """Every drawn figure no section holds (report.md lists every figure; so does this)."""
    shown = "".join(str(b) for b in body)
    rest = [n for n in figures if f'data-figure="{html_text(n)}"' not in shown]
    if not rest:
        return []
    return [_h2("Figures"), *[_figure(n, figures[n], r) for n in rest]]


def _stopping(r: Report, figures: Mapping[str, bytes]) -> list[Any]:
    body: list[Any] = []
    if r.stopping is not None:
        s = r.stopping
        crossed = (
            f"crossed at task {s.stop_at} (e = {num(s.evalue, 2)})"
            if s.crossed
            else f"never crossed (max e = {num(s.max_evalue, 2)})"
        )
        body += [
            _h2("Stopping rule (registered; decides the verdict)"),
            el(
                "p",
                f"{s.rule}, threshold {s.threshold:g}, min prompts {s.min_prompts}, "
                f"{s.n_stream} tasks in {s.order}: {crossed}; anytime-valid p = "
                f"{pvalue(s.pvalue)}. Reading: {s.reading}: {s.reason}",
            ),
        ]
        if "eprocess" in figures:
            body.append(_figure("eprocess", figures["eprocess"], r))
    return body


def _secondary(r: Report) -> list[Any]:
    body: list[Any] = []
    if r.secondary:
        body += [
            _h2("Secondary tests (registered; never change the verdict)"),
            _tests(r.secondary),
        ]
    return body


def _multiplicity(r: Report) -> list[Any]:
    body: list[Any] = []
    if r.pairwise:
        body += [
            _h2("Paired changes between the arms (descriptive)"),
            table(*pairwise_table(r)),
        ]
    if r.contrasts:
        body += [_h2("Registered contrasts"), table(*contrast_table(r))]
        body += [el("p", f"{c.id}: {c.note}") for c in r.contrasts if c.note]
    if r.multiplicity is not None:
        m = r.multiplicity
        body += [
            _h2(f"Multiplicity (registered: {m.method}, q = {m.q:g}, family {m.family})"),
            el("p", m.note),
            table(*multiplicity_table(r)),
        ]
    return body


def _intents(r: Report, figures: Mapping[str, bytes]) -> list[Any]:
    intents: list[Any] = []
    if r.per_intent:
        intents = [table(*intent_table(r))]
        if "forest" in figures:
            intents.append(_figure("forest", figures["forest"], r))
    return intents


def _whole_design(r: Report, figures: Mapping[str, bytes]) -> list[Any]:
    """The forest plot of the whole design when there are no intent rows to hold it (the
    Markdown lists every figure; the HTML must show it too)."""
    if r.per_intent or "forest" not in figures:
        return []
    return [_figure("forest", figures["forest"], r)]


def _registered_intents(r: Report, intents: list[Any]) -> list[Any]:
    body: list[Any] = []
    if intents and r.per_intent_registered:
        body += [_h2("Per-intent paired differences (listed, not flagged)"), *intents]
    return body


def _calibration(r: Report) -> list[Any]:
    """The stored ``prereg calibrate`` table of this digest, or why one is not shown."""
    if r.calibration is None:
        note = r.calibration_note
        return [] if note is None else [el("p", f"Calibration: {note}", class_="muted")]
    return [
        _h2(CALIBRATION_TITLE),
        el("p", calibration_caption(r.calibration), class_="muted"),
        table(*calibration_table(r.calibration)),
    ]


def _controls(r: Report) -> list[Any]:
    body: list[Any] = []
    if r.controls:
        body += [
            _h2("Instrument controls (registered)"),
            el("p", CONTROLS_NOTE),
            table(
                ["check", "arm", "statistic", "estimate", "interval", "rule", "verdict"],
                control_rows(r),
            ),
            el(
                "ul",
                *[
                    el(
                        "li",
                        el("code", c.arm),
                        f" ({c.check}): ",
                        el("strong", c.verdict),
                        f": {c.reason}",
                    )
                    for c in r.controls
                ],
            ),
        ]
    return body


def _judged(r: Report) -> list[Any]:
    """The judged-outcome section (issue 18): unjudged counts first, rates labelled."""
    lines = judged_lines(r)
    if not lines:
        return []
    return [_h2(lines[0]), el("ul", *[el("li", line.strip()) for line in lines[1:]])]


def _invokerank(r: Report) -> list[Any]:
    """The InvokeRank section (descriptive; IR_DS labelled; evidence classes apart)."""
    if r.invokerank is None:
        return []
    body: list[Any] = [
        _h2("InvokeRank score (descriptive, not registered)"),
        el("p", r.invokerank.note, class_="muted"),
        el("p", f"Display rule: {r.invokerank.display_rule}."),
        el(
            "ul",
            *[
                el("li", el("code", a.arm), f": {a.label} ({a.symbol}): {a.reason}")
                for a in r.invokerank.arms
            ],
        ),
    ]
    for title, header, rows in invokerank_tables(r):
        body += [el("h3", title), table(header, rows)]
    return body


def _exploratory(r: Report, figures: Mapping[str, bytes], intents: list[Any]) -> list[Any]:
    body: list[Any] = []
    body += [_h2("Exploratory"), el("p", r.exploratory.get("note", ""), class_="muted")]
    if intents and not r.per_intent_registered:
        body += [
            el("p", "Per-intent paired differences (not registered; listed, not flagged):"),
            *intents,
        ]
    if "funnel" in figures:
        body.append(_figure("funnel", figures["funnel"], r))
    for title, header, rows in exploratory_tables(r.exploratory):
        body += [el("h3", title), table(header, rows)]
    return body


def _surfaces(r: Report) -> list[Any]:
    body: list[Any] = []
    body.append(_h2("Surfaces and tasks (untrusted content, shown as data)"))
    for s in r.surfaces:
        control = f" (control {s['control']})" if s.get("control") else ""
        body += [
            el("p", f"Arm {s['arm']}, surface {s['surface']}{control}: {s.get('title') or ''}"),
            table(
                ["tool", "title", "description"],
                [[t["name"], t["title"], t["description"]] for t in s["tools"]],
            ),
        ]
        if s.get("servers"):
            body += [
                el("p", "Servers offered (digest of each surface as offered):", class_="muted"),
                table(
                    ["key", "role", "server name", "transform", "digest"],
                    [
                        [x["key"], x["role"], x["name"], x.get("transform") or "-", x["digest"]]
                        for x in s["servers"]
                    ],
                ),
            ]
    body.append(
        table(
            ["task", "intent", "polarity", "prompt"],
            [[t["id"], t["intent"], t["polarity"], t["prompt"]] for t in r.tasks],
        )
    )
    return body


def _provenance(r: Report) -> list[Any]:
    body: list[Any] = []
    body += [
        _h2("Provenance"),
        el(
            "p",
            "Every number's provenance (runs used, function, parameters, registration "
            "field) is in report.json.",
            class_="muted",
        ),
        el("p", "Command: ", el("code", r.provenance.command)),
    ]
    return body


def _simulated(r: Report) -> list[Any]:
    """A study on the simulated policy says so under the title (issue 19)."""
    return [] if r.toolbottleneck is None else [el("p", el("strong", r.toolbottleneck.label))]


def _toolbottleneck(r: Report) -> list[Any]:
    """A ToolBottleneckBench study's tables (issue 19); the label first says which host
    played it (SIMULATED POLICY or MODEL HOST), so the heading names neither."""
    study = r.toolbottleneck
    if study is None:
        return []
    body: list[Any] = [
        _h2("ToolBottleneckBench study"),
        el("p", el("strong", study.label)),
    ]
    for t in study.tables:
        body.append(el("h3", t.title))
        if t.columns:
            body.append(table(t.columns, t.rows))
        if t.note:
            body.append(el("p", t.note, class_="muted"))
    return body


def render(report: Report, figures: dict[str, bytes]) -> str:
    """The self-contained HTML report: every string through html_text (see ``el``)."""
    r = report
    intents = _intents(r, figures)
    body = _title(r) + _simulated(r) + _registration(r) + _runs(r) + _arms(r, figures)
    body += _primary(r, figures) + _whole_design(r, figures)
    body += _stopping(r, figures) + _secondary(r) + _multiplicity(r)
    body += _registered_intents(r, intents) + _calibration(r) + _controls(r)
    body += _toolbottleneck(r)
    body += _invokerank(r) + _judged(r)
    body += _exploratory(r, figures, intents)
    body += _other_figures(r, figures, body)
    body += _surfaces(r) + _provenance(r)
    body, headings = _anchored(body)
    top = len(_title(r)) + len(_simulated(r))
    body = [*body[:top], _summary(r), _contents(headings), *body[top:]]

    head = join(
        [
            Raw('<meta charset="utf-8">'),
            Raw('<meta name="viewport" content="width=device-width, initial-scale=1">'),
            el("title", f"prereg report {r.registration}"),
            Raw(f"<style>{CSS}</style>"),
        ]
    )
    return (
        "<!DOCTYPE html>\n"
        + el("html", Raw(f"<head>{head}</head>"), el("body", *body), lang="en")
        + "\n"
    )
