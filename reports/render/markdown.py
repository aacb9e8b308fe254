"""``report.md``: the report as Markdown, from the report model only (no computation).

Every string that reaches the file goes through :mod:`prereg.core.untrusted`, the one
place that makes text safe for Markdown: :func:`esc` (inline text and table cells),
:func:`code` (code spans) and :func:`quote` (verbatim free text as a block quote). No
link, image, autolink, HTML tag or raw control character of a tool description, a
prompt, a title or anything else from a registration, a snapshot or a provider
survives as markup; the only images are the report's own figures.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from prereg.core.untrusted import markdown_block, markdown_code, markdown_text
from prereg.reports.calibration.text import TITLE as CALIBRATION_TITLE
from prereg.reports.calibration.text import calibration_caption, calibration_table
from prereg.reports.judged.text import judged_lines
from prereg.reports.model import Report, TestReport
from prereg.reports.render.figures import FIGURES
from prereg.reports.render.figures import caption as figure_caption
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

#: Inline text (a paragraph, a list item, a table cell), shown literally.
esc = markdown_text
#: A code span, shown literally (not in table cells).
code = markdown_code


def quote(value: str) -> str:
    """Free text as a block quote, line by line, shown literally."""
    return "\n".join(("> " + line).rstrip() for line in markdown_block(value))


def code_block(data: Any) -> list[str]:
    """JSON in a fenced block: literal in every viewer; json.dumps keeps it fence-safe."""
    return ["```json", json.dumps(data, sort_keys=True, indent=1), "```"]


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    out = [
        "| " + " | ".join(esc(h) for h in header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
    ]
    out += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
    return out


def _test_rows(tests: Sequence[TestReport]) -> list[list[Any]]:
    return [
        [
            t.registration_field,
            t.test,
            " vs ".join(t.compare),
            num(t.estimate),
            interval(t.interval),
            pvalue(t.pvalue),
            num(t.evalue, 2),
            t.decision,
            t.reading or "-",
            t.note or t.reason,
        ]
        for t in tests
    ]


def _title(r: Report) -> list[str]:
    out: list[str] = [f"# Report: {esc(r.registration)}: {esc(r.title)}", ""]
    if r.mode == "exploratory":
        out += [
            f"**{EXPLORATORY_BANNER}**",
            "",
            "Labelled exploratory because: " + esc("; ".join(r.exploratory_reasons)),
            "",
        ]
    label, text = headline(r)
    out += [
        f"**{label}: {esc(text)}**",
        "",
        f"Decided by: {esc(r.verdict_detail.decided_by)}. {esc(r.verdict_detail.reason)}",
        "",
    ]
    return out


def _registration(r: Report) -> list[str]:
    out: list[str] = []
    out += [
        "## Registration",
        "",
        f"- id: {code(r.registration)}; kind: {esc(r.kind)}; split: {esc(r.split)}; "
        f"experiment: {esc(r.experiment)}",
        f"- digest: {code(r.digest)}",
        f"- registered at {esc(r.provenance.registered_at)} (ledger seq "
        f"{r.provenance.ledger_seq}); ledger head at analysis: seq "
        f"{esc(r.provenance.ledger_head.get('seq'))}, "
        f"{code(r.provenance.ledger_head.get('hash'))}",
        "- host: " + "; ".join(f"{esc(k)} = {esc(v)}" for k, v in flat_rows(r.host)),
        f"- outcome: {esc(r.outcome)}; prereg {esc(r.provenance.prereg_version)}; analysed "
        f"at {esc(r.provenance.analysed_at)}",
    ]
    if r.provenance.superseded_by:
        out.append(f"- superseded by {code(r.provenance.superseded_by)} (this record stands)")
    if r.feasibility:
        out.append(f"- feasibility: {esc(json.dumps(r.feasibility, sort_keys=True))}")
    out += [f"- {esc(line)}" for line in lint_waivers(r)]
    out += [
        "",
        "Hypothesis (verbatim, never evaluated):",
        "",
        quote(r.hypothesis),
        "",
        "Falsification (verbatim, never evaluated):",
        "",
        quote(r.falsification),
        "",
    ]
    return out


def _runs(r: Report) -> list[str]:
    out: list[str] = []
    runs = r.runs
    comp = r.completeness
    spend = "null (not measured)" if runs.spend_usd is None else f"${runs.spend_usd:.4f}"
    out += [
        "## Runs",
        "",
        f"- evidence class: {esc(runs.evidence_class)}; drivers: {esc(', '.join(runs.drivers))}",
        f"- records: {runs.records}; used: {runs.used}; infrastructure failures: "
        f"{runs.infra_errors} (open: {comp.infra_errors_open})",
        f"- completeness: {comp.completed} of {comp.planned} planned units; "
        f"{'complete' if comp.complete else 'INCOMPLETE'} ({esc(comp.basis)})",
        f"- models asked for: {esc(', '.join(runs.models_requested) or 'none')}; returned: "
        f"{esc(', '.join(runs.models_returned) or 'none')}",
        f"- spend: {esc(spend)}"
        f" over {runs.spend_measured_runs} run(s) with a measured cost; tokens: "
        f"{esc(json.dumps(runs.tokens) if runs.tokens else 'null (not measured)')}",
        "",
    ]
    if comp.missing_units:
        out += ["Missing units (first ones): " + esc(", ".join(comp.missing_units)), ""]
    return out


def _arms(r: Report) -> list[str]:
    out: list[str] = []
    out += [f"## Per-arm rates (registered outcome: {esc(r.outcome)})", ""]
    out += table(*arm_table(r))
    out.append("")
    if configurations_differ(r):
        out += ["### Configurations (the arms differ in host, model, budgets or prompt)", ""]
        out += table(*configuration_table(r))
        out.append("")
    return out


def _primary(r: Report) -> list[str]:
    out: list[str] = []
    out += ["## Primary test (registered)", "", esc(primary_line(r)), ""]
    if r.primary is not None:
        out += [f"Reading: **{esc(r.primary.reading)}**: {esc(r.primary.reason)}", ""]
    if r.difference is not None:
        out += [esc(bootstrap_line(r)), ""]
    return out


def _stopping(r: Report) -> list[str]:
    out: list[str] = []
    if r.stopping is not None:
        s = r.stopping
        out += [
            "## Stopping rule (registered; decides the verdict)",
            "",
            f"{esc(s.rule)}, threshold {s.threshold:g}, min prompts {s.min_prompts}, over "
            f"{s.n_stream} tasks in {esc(s.order)}: "
            + (
                f"crossed at task {s.stop_at} (e = {num(s.evalue, 2)})"
                if s.crossed
                else f"never crossed (max e = {num(s.max_evalue, 2)})"
            )
            + f"; anytime-valid p = {pvalue(s.pvalue)}. Reading: **{esc(s.reading)}**: "
            f"{esc(s.reason)}",
            "",
        ]
    return out


def _secondary(r: Report) -> list[str]:
    out: list[str] = []
    if r.secondary:
        out += ["## Secondary tests (registered; never change the verdict)", ""]
        out += table(
            [
                "field",
                "test",
                "arms",
                "estimate",
                "interval",
                "p",
                "e",
                "decision",
                "reading",
                "note",
            ],
            _test_rows(r.secondary),
        )
        out.append("")
    return out


def _contrasts(r: Report) -> list[str]:
    if not r.contrasts:
        return []
    out = ["## Registered contrasts", ""]
    out += table(*contrast_table(r))
    out.append("")
    out += [f"- {esc(c.id)}: {esc(c.note)}" for c in r.contrasts if c.note]
    return out


def _pairwise(r: Report) -> list[str]:
    if not r.pairwise:
        return []
    out = ["## Paired changes between the arms (descriptive)", ""]
    out += table(*pairwise_table(r))
    return [*out, ""]


def _multiplicity(r: Report) -> list[str]:
    out: list[str] = _pairwise(r) + _contrasts(r)
    if r.multiplicity is not None:
        m = r.multiplicity
        out += [
            f"## Multiplicity (registered: {esc(m.method)}, q = {m.q:g}, family {esc(m.family)})",
            "",
            esc(m.note),
            "",
        ]
        out += table(*multiplicity_table(r))
        out.append("")
    return out


def _intent_table(r: Report) -> list[str]:
    """The per-intent table (shown registered or exploratory)."""
    return table(*intent_table(r))


def _registered_intents(r: Report, intents: list[str]) -> list[str]:
    out: list[str] = []
    if r.per_intent and r.per_intent_registered:
        out += ["## Per-intent paired differences (listed, not flagged)", ""] + intents + [""]
    return out


def _calibration(r: Report) -> list[str]:
    """The stored ``prereg calibrate`` table of this digest, or why one is not shown."""
    if r.calibration is None:
        return [] if r.calibration_note is None else [f"Calibration: {esc(r.calibration_note)}", ""]
    out = [f"## {esc(CALIBRATION_TITLE)}", "", esc(calibration_caption(r.calibration)), ""]
    out += table(*calibration_table(r.calibration)) + [""]
    return out


def _controls(r: Report) -> list[str]:
    out: list[str] = []
    if r.controls:
        out += ["## Instrument controls (registered)", "", esc(CONTROLS_NOTE), ""]
        out += table(
            ["check", "arm", "statistic", "estimate", "interval", "rule", "verdict"],
            control_rows(r),
        )
        out.append("")
        for c in r.controls:
            out.append(f"- {code(c.arm)} ({esc(c.check)}): **{esc(c.verdict)}**: {esc(c.reason)}")
        out.append("")
    return out


def _judged(r: Report) -> list[str]:
    """The judged-outcome section (issue 18): unjudged counts first, rates labelled."""
    lines = judged_lines(r)
    if not lines:
        return []
    return [f"## {esc(lines[0])}", ""] + [f"- {esc(line.strip())}" for line in lines[1:]] + [""]


def _invokerank(r: Report) -> list[str]:
    """The InvokeRank section (descriptive; IR_DS labelled; evidence classes apart)."""
    if r.invokerank is None:
        return []
    out = ["## InvokeRank score (descriptive, not registered)", "", esc(r.invokerank.note), ""]
    out += [f"Display rule: {esc(r.invokerank.display_rule)}.", ""]
    for a in r.invokerank.arms:
        out.append(f"- {code(a.arm)}: {esc(a.label)} ({esc(a.symbol)}): {esc(a.reason)}")
    out.append("")
    for title, header, rows in invokerank_tables(r):
        out += [f"### {esc(title)}", ""] + table(header, rows) + [""]
    return out


def _exploratory(r: Report, intents: list[str]) -> list[str]:
    out: list[str] = []
    out += ["## Exploratory", "", esc(r.exploratory.get("note", "")), ""]
    if r.per_intent and not r.per_intent_registered:
        out += ["Per-intent paired differences (not registered; listed, not flagged):", ""]
        out += intents + [""]
    for title, header, rows in exploratory_tables(r.exploratory):
        out += [f"### {esc(title)}", ""] + table(header, rows) + [""]
    return out


def _surfaces(r: Report) -> list[str]:
    out: list[str] = []
    out += ["## Surfaces and tasks (untrusted content, shown as data)", ""]
    for s in r.surfaces:
        control = f" (control {esc(s['control'])})" if s.get("control") else ""
        out += [
            f"Arm {code(s['arm'])}, surface {code(s['surface'])}{control}: "
            f"{esc(s.get('title') or '')}"
        ]
        out += table(
            ["tool", "title", "description"],
            [[t["name"], t["title"], t["description"]] for t in s["tools"]],
        )
        if s.get("servers"):
            out += ["", "Servers offered (digest of each surface as offered):", ""]
            out += table(
                ["key", "role", "server name", "transform", "digest"],
                [
                    [x["key"], x["role"], x["name"], x.get("transform") or "-", x["digest"]]
                    for x in s["servers"]
                ],
            )
        out.append("")
    out += table(
        ["task", "intent", "polarity", "prompt"],
        [[t["id"], t["intent"], t["polarity"], t["prompt"]] for t in r.tasks],
    )
    out.append("")
    return out


def _figures(r: Report) -> list[str]:
    out: list[str] = []
    if r.figures:
        out += ["## Figures", ""]
        for name in r.figures:
            if name not in FIGURES:  # only the report's own figures, by their fixed names
                continue
            out += [f"![{esc(figure_caption(name, r))}](figures/{name}.png)", ""]
    return out


def _provenance(r: Report) -> list[str]:
    out: list[str] = []
    out += [
        "## Provenance",
        "",
        "Every number's provenance (runs, function, parameters, registration field) is in "
        "`report.json`.",
        f"Command: {code(r.provenance.command)}",
        "",
    ]
    return out


def _simulated(r: Report) -> list[str]:
    """A study on the simulated policy says so under the title (issue 19)."""
    return [] if r.toolbottleneck is None else [f"**{esc(r.toolbottleneck.label)}**", ""]


def _toolbottleneck(r: Report) -> list[str]:
    """A ToolBottleneckBench study's tables (issue 19); the label first says which host
    played it (SIMULATED POLICY or MODEL HOST), so the heading names neither."""
    study = r.toolbottleneck
    if study is None:
        return []
    out = ["## ToolBottleneckBench study", "", f"**{esc(study.label)}**", ""]
    for t in study.tables:
        out += [f"### {esc(t.title)}", ""]
        if t.columns:
            out += [*table(t.columns, t.rows), ""]
        if t.note:
            out += [esc(t.note), ""]
    return out


def render(report: Report) -> str:
    """The Markdown report: every section in order, every untrusted string escaped."""
    r = report
    intents = _intent_table(r)
    out = _title(r) + _simulated(r) + _registration(r) + _runs(r) + _arms(r) + _primary(r)
    out += _stopping(r)
    out += _secondary(r) + _multiplicity(r) + _registered_intents(r, intents) + _calibration(r)
    out += _controls(r) + _toolbottleneck(r)
    out += _invokerank(r)
    out += _judged(r)
    out += _exploratory(r, intents) + _surfaces(r) + _figures(r) + _provenance(r)
    return "\n".join(out)
