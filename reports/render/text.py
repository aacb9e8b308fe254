"""Wording shared by the terminal, Markdown and HTML renderers.

One place decides how a verdict is announced, so that an exploratory report can
never announce a confirmatory claim in one format and not in another.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from typing import Any

from prereg.reports.model import (
    ArmInvokeRank,
    IntentScore,
    Interval,
    InvokeRating,
    NegativeRate,
    Report,
)
from prereg.reports.render.invokerank_figures import comparisons, svst_withheld, withheld

EXPLORATORY_BANNER = (
    "EXPLORATORY: not a confirmatory claim. Nothing in this report may be "
    "cited as confirming the hypothesis."
)


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
    """An interval as "low to high (level)"; a withheld one prints its reason."""
    if iv is None:
        return "null"
    if (iv.low is None or iv.high is None) and iv.reason:
        return iv.reason
    fmt = pct if scale == "pct" else num
    return f"{fmt(iv.low)} to {fmt(iv.high)} ({iv.level:.0%})"


def headline(report: Report) -> tuple[str, str]:
    """(label, text) announcing the outcome, worded by the report's mode."""
    v = report.verdict_detail
    if report.mode == "confirmatory":
        return "Verdict", report.verdict
    if report.verdict in ("incomplete", "not_runnable"):
        return "Verdict", report.verdict
    return (
        "Exploratory reading",
        f"the registered rule reads '{report.verdict}' on these runs "
        f"(exploratory: not a confirmatory claim; decided by {v.decided_by})",
    )


def primary_line(report: Report) -> str:
    p = report.primary
    if p is None:
        return "primary test: not computed (no completed run)"
    stat = (
        f"p = {pvalue(p.pvalue)}"
        if p.evalue is None
        else f"e = {num(p.evalue, 2)} (p = {pvalue(p.pvalue)})"
    )
    disc = ""
    if p.discordant is not None:
        disc = (
            f"; discordant pairs {p.discordant.n} (only {p.compare[0]}: {p.discordant.b}, "
            f"only {p.compare[1]}: {p.discordant.c})"
        )
        if p.min_discordant is not None:
            disc += f", needed at least {p.min_discordant}"
    on = f"{p.n} tasks" if p.unit == "task" else f"{p.n} tasks in {p.units} {p.unit}s"
    what = f"contrast '{p.contrast}' by " if p.contrast else ""
    return (
        f"{what}{p.test} ({p.sides}, alpha {p.alpha:g}) on {on}: estimate "
        f"{num(p.estimate)}, interval {interval(p.interval)}, {stat}{disc}"
    )


CONTROLS_NOTE = (
    "Registered control arms check the instrument, each by its fixed rule "
    "(InvokeRank, Figure 6); their verdicts never change the registration's "
    "verdict."
)


def control_interval(c: Any) -> str:
    """A control's interval: points for differences, percentages for shares."""
    iv = c.interval
    if iv is None or iv.low is None or iv.high is None:
        return "null"
    if c.control in ("placebo", "blinded"):
        return f"{100 * iv.low:+.1f} to {100 * iv.high:+.1f} points ({iv.level:.0%})"
    return f"{pct(iv.low)} to {pct(iv.high)} ({iv.level:.0%})"


def control_short(c: Any) -> str:
    """A one-line estimate for the terminal table."""
    d = c.details
    if c.estimate is None:
        return "no data"
    if c.control == "placebo":
        return f"{100 * c.estimate:+.1f} points"
    if c.control == "blinded":
        return f"{pct(d.get('reference_rate'))} -> {pct(d.get('blinded_rate'))}"
    if c.control == "decoy":
        every = d.get("all", {})
        return f"{every.get('successes')} of {every.get('trials')} runs"
    pair = d.get("pair_share", {})
    return f"copy a: {pair.get('successes')} of {pair.get('trials')} picks"


def control_rows(report: Report) -> list[list[str]]:
    """Figure 6's columns: check, arm (vs reference), statistic, estimate, interval, rule,
    verdict."""
    rows = []
    for c in report.controls:
        versus = f"{c.arm} vs {c.reference}" if c.reference else c.arm
        rows.append(
            [c.check, versus, c.statistic, c.summary, control_interval(c), c.rule, c.verdict]
        )
    return rows


STAGES = ("surfaced", "selected", "invoked", "executed", "completed")


def exploratory_tables(exploratory: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    """The exploratory block as (title, header, rows) tables, for every renderer.

    One place for how funnel, negatives, selection rate and terminal outcomes read,
    so the Markdown and HTML reports say the same thing.
    """
    out: list[tuple[str, list[str], list[list[str]]]] = []
    funnel = exploratory.get("funnel") or {}
    if funnel:
        rows, shares = [], []
        for arm, data in funnel.items():
            data = data or {}
            stages = data.get("stages") or {}
            row = [arm, str(data.get("positive_runs", "-"))]
            for stage in STAGES:
                s = stages.get(stage) or {}
                row.append(
                    "not measured"
                    if s.get("rate") is None
                    else f"{pct(s['rate'])} ({s.get('reached')}/{s.get('of')})"
                )
            rows.append(row)
            loss = data.get("loss_shares") or {}
            shares.append([arm] + [num(loss.get(stage), 2) for stage in STAGES])
        out.append(
            (
                "Funnel over positive tasks (share of runs reaching each stage)",
                ["arm", "positive runs", *STAGES],
                rows,
            )
        )
        out.append(
            (
                "Loss shares by stage (-ln conditional rate, normalised; prereg.stats.loss_shares)",
                ["arm", *STAGES],
                shares,
            )
        )
    negatives = exploratory.get("negatives") or {}
    if negatives:
        out.append(
            (
                "Negative tasks (the right behaviour uses no tool)",
                ["arm", "runs", "success", "false invocations"],
                [
                    [
                        arm,
                        str(d.get("runs")),
                        str(d.get("success")),
                        f"{d.get('false_invokes')} of {d.get('false_invokes_measured')}",
                    ]
                    for arm, d in negatives.items()
                    if d
                ],
            )
        )
    selection = exploratory.get("selection_rate") or {}
    if selection:
        out.append(
            (
                "Selection rate (against each task's permitted operations; null on "
                "tasks that rule nothing out; not a success measure)",
                ["arm", "mean", "runs"],
                [
                    [arm, num(d.get("mean")), str(d.get("runs"))]
                    for arm, d in selection.items()
                    if d
                ],
            )
        )
    terminal = {arm: d for arm, d in (exploratory.get("terminal") or {}).items() if d}
    for key, title in (
        ("terminal_classes", "Terminal class (runs)"),
        ("terminal_flags", "Terminal flag of failed runs (runs)"),
    ):
        names = sorted({n for d in terminal.values() for n in (d.get(key) or {})})
        if names:
            out.append(
                (
                    title,
                    ["arm", *names],
                    [
                        [arm, *[str((d.get(key) or {}).get(n, 0)) for n in names]]
                        for arm, d in terminal.items()
                    ],
                )
            )
    return out


#: A table as both renderers draw it: header, then rows of cells (untrusted cells are
#: escaped by the renderer).
Table = tuple[list[str], list[list[Any]]]


def arm_table(report: Report) -> Table:
    """Per-arm rates, intervals and design effects."""
    header = [
        "arm",
        "surface",
        "runs ok",
        "infra errors",
        "successes / measured",
        "rate",
        "interval",
        "ICC (source)",
        "DEFF",
    ]
    rows = [
        [
            a.id,
            a.surface,
            a.runs_ok,
            a.infra_errors,
            f"{a.successes} / {a.measured}",
            pct(a.rate),
            interval(a.interval, "pct"),
            f"{num(a.icc, 2)} ({a.icc_source})",
            num(a.design_effect, 2),
        ]
        for a in report.arms
    ]
    return header, rows


def configurations_differ(report: Report) -> bool:
    """Whether the arms run on different configurations (host, model, budgets, prompt)."""
    digests = {a.configuration.digest for a in report.arms if a.configuration is not None}
    return len(digests) > 1


#: Short names of the budgets in the configuration table.
BUDGET_WORDS = {
    "completion_cap": "cap",
    "episode_tokens": "tokens",
    "call_limit": "calls",
    "turn_limit": "turns",
}


def drop_columns(table: Table, names: set[str]) -> Table:
    """The table without the named columns (the terminal shows a narrower table)."""
    header, rows = table
    keep = [i for i, name in enumerate(header) if name not in names]
    return [header[i] for i in keep], [[row[i] for i in keep] for row in rows]


def configuration_table(report: Report) -> Table:
    """Per-arm configuration: driver, model, params, budgets, system prompt (by digest)."""
    header = ["arm", "driver", "model", "params", "budgets", "system prompt", "configuration"]
    rows = []
    for a in report.arms:
        c = a.configuration
        if c is None:
            continue
        budgets = ", ".join(
            f"{BUDGET_WORDS.get(k, k)} {v}" for k, v in c.budgets.items() if v is not None
        )
        params = ", ".join(f"{k}={v}" for k, v in sorted(c.params.items())) or "-"
        search = "; tool search" if c.tool_search else ""
        prompt = "-" if c.system_prompt_sha256 is None else c.system_prompt_sha256[:19]
        rows.append(
            [a.id, c.driver + search, c.model or "-", params, budgets, prompt, c.digest[:19]]
        )
    return header, rows


def contrast_table(report: Report) -> Table:
    """The registered contrasts: weights, unit, estimate, interval, p, family's reading."""
    header = ["contrast", "weights", "test", "unit (n)", "estimate", "interval", "p"]
    family = report.multiplicity is not None and report.multiplicity.family == "contrasts"
    if family:
        header += ["adjusted", "rejected"]
    rows = []
    for c in report.contrasts:
        weights = (
            f"effect of {' x '.join(c.effect)}" if c.effect else ""
        ) + f" ({', '.join(f'{w:+g} {arm}' for arm, w in c.weights.items())})"
        row = [
            c.id,
            weights.strip(),
            f"{c.test}, {c.sides}",
            f"{c.unit} ({c.units})",
            num(c.estimate),
            interval(c.interval),
            pvalue(c.pvalue),
        ]
        if family:
            row += [pvalue(c.adjusted), "yes" if c.reject else "no"]
        rows.append(row)
    return header, rows


def pairwise_table(report: Report) -> Table:
    """Paired changes between every two plain arms (descriptive)."""
    header = ["control", "treatment", "configuration", "tasks", "rates", "change", "interval"]
    rows = [
        [
            x.control,
            x.treatment,
            "same" if x.same_configuration else "differs",
            x.tasks,
            f"{pct(x.control_rate)} → {pct(x.treatment_rate)}",
            num(x.estimate),
            interval(x.interval),
        ]
        for x in report.pairwise
    ]
    return header, rows


def multiplicity_table(report: Report) -> Table:
    """The registered family's members, adjusted values and decisions."""
    assert report.multiplicity is not None
    header = ["hypothesis", "tasks", "estimate", "p", "e", "adjusted", "rejected"]
    rows = [
        [
            x.hypothesis,
            x.n,
            num(x.estimate),
            pvalue(x.pvalue),
            num(x.evalue, 2),
            pvalue(x.adjusted),
            "yes" if x.reject else "no",
        ]
        for x in report.multiplicity.members
    ]
    return header, rows


def intent_table(report: Report) -> Table:
    """Per-intent paired differences."""
    header = [
        "intent",
        "tasks",
        "control rate",
        "treatment rate",
        "difference",
        "interval",
        "discordant (b, c)",
    ]
    rows = [
        [
            x.intent,
            x.tasks,
            pct(x.control_rate),
            pct(x.treatment_rate),
            num(x.difference),
            x.interval_note if x.interval is None and x.interval_note else interval(x.interval),
            "-" if x.discordant is None else f"{x.discordant.b}, {x.discordant.c}",
        ]
        for x in report.per_intent
    ]
    return header, rows


# --- The InvokeRank section (issue 17) -----------------------------------------------

STAGE_LETTER = {"surfaced": "D", "selected": "S", "invoked": "I", "executed": "E", "completed": "C"}


def points(value: float | None) -> str:
    """A proportion as InvokeRank points (100 x)."""
    if value is None or not math.isfinite(value):
        return "null"
    return f"{100 * value:.1f}"


def _labelled(text: str, iv: Interval) -> str:
    """An InvokeRank interval's text with its reason (a withheld interval is its reason;
    a zero-width or extended one says why beside it)."""
    reason = getattr(iv, "reason", None)
    if iv.low is None or iv.high is None:
        return reason or "null"
    return f"{text} ({reason})" if reason else text


def points_interval(iv: Interval | None) -> str:
    """An InvokeRank score interval in points, with its reason when it has one."""
    if iv is None:
        return "null"
    return _labelled(f"{points(iv.low)} to {points(iv.high)}", iv)


def ir_interval(iv: Interval | None, scale: str = "num") -> str:
    """An InvokeRank interval (a rate, a share) as :func:`interval` prints it, with its
    reason when it has one."""
    if iv is None:
        return "null"
    return _labelled(interval(iv, scale), iv)


def _by_stage(values: dict[str, float | None], scale: str) -> str:
    fmt = pct if scale == "pct" else points
    return ", ".join(f"{STAGE_LETTER.get(s, s)} {fmt(v)}" for s, v in values.items()) or "-"


def _beside(report: Report) -> str:
    """The interval method shown beside the score's (the one not registered)."""
    ir = report.invokerank
    return "published" if ir is not None and ir.interval_method == "calibrated" else "calibrated"


def _other(report: Report, score: ArmInvokeRank | IntentScore) -> Interval | None:
    """The first (90%) interval of the method not registered, of an arm or an intent."""
    other = score.published if _beside(report) == "published" else score.calibrated
    return other[0] if other else None


def invokerank_leaderboard(report: Report) -> Table:
    """Per arm: the roll-up score with its 90% and 95% intervals (by the registered
    interval method), the other method's 90% interval beside them, and the tie rule."""
    header = [
        "arm",
        "evidence",
        "score",
        "value",
        "90% interval",
        "95% interval",
        f"{_beside(report)} 90%",
        "runs",
        "tied with (90% intervals overlap)",
    ]
    rows = []
    ir = report.invokerank
    for a in ir.arms if ir is not None else []:
        ivs = {round(iv.level, 2): iv for iv in a.intervals}
        rows.append(
            [
                a.arm,
                a.evidence_class or "-",
                a.symbol if a.level != "not_computed" else f"not computed: {a.reason}",
                points(a.q),
                points_interval(ivs.get(0.9)),
                points_interval(ivs.get(0.95)),
                points_interval(_other(report, a)),
                a.positive_runs,
                ", ".join(a.tied_with) or a.ties_note or "-",
            ]
        )
    return header, rows


def invokerank_tables(report: Report) -> list[tuple[str, list[str], list[list[Any]]]]:
    """The InvokeRank section as (title, header, rows) tables for Markdown and HTML."""
    ir = report.invokerank
    if ir is None:
        return []
    scored = [a for a in ir.arms if a.level != "not_computed"]
    out: list[tuple[str, list[str], list[list[Any]]]] = [
        (
            "Score per arm (roll-up over intents; weights per arm below; intervals: "
            f"{ir.interval_method}, {_beside(report)} beside)",
            *invokerank_leaderboard(report),
        )
    ]
    intents, stages, shares, priors, funnel, negatives = [], [], [], [], [], []
    for a in scored:
        fir = {x.intent: x.false_invoke for x in a.false_invoke_by_intent}
        needs = a.need_test.coding if a.need_test is not None else {}
        for i in a.intents:
            ivs = {round(iv.level, 2): iv for iv in i.intervals}
            neg = fir.get(i.intent)
            intents.append(
                [
                    i.intent,
                    a.arm,
                    a.symbol,
                    i.prompts,
                    i.runs,
                    points(i.q),
                    points_interval(ivs.get(0.9)),
                    points_interval(ivs.get(0.95)),
                    points_interval(_other(report, i)),
                    pct(i.pass_k) + f" ({i.pass_k_prompts} prompts)",
                    "no negative runs"
                    if neg is None
                    else f"{pct(neg.rate)} ({neg.calls} / {neg.runs})",
                    needs.get(i.intent, "not coded"),
                ]
            )
            shares.append(
                [a.arm, i.intent, _by_stage(i.loss_shares, "pct"), _by_stage(i.lever, "points")]
            )
            for s in i.stages:
                stages.append(
                    [
                        a.arm,
                        i.intent,
                        s.stage,
                        f"{s.successes} / {s.trials}",
                        f"{num(s.rho, 2)} ({s.rho_source})",
                        num(s.design_effect, 2),
                        pct(s.posterior_mean),
                        ir_interval(s.posterior, "pct"),
                        "yes" if s.capped else "no",
                    ]
                )
        for p in a.priors:
            priors.append(
                [
                    a.arm,
                    p.stage,
                    p.method,
                    num(p.mu),
                    num(p.kappa, 1),
                    ", ".join(p.capped_cells) or "-",
                    num(p.pooled_rho, 2),
                ]
            )
        for s in a.funnel:
            funnel.append(
                [
                    a.arm,
                    s.stage,
                    f"{s.successes} / {s.trials}",
                    pct(s.successes / s.trials if s.trials else None),
                    ir_interval(s.displayed, "pct"),
                    f"{num(s.rho, 2)} ({s.rho_source})",
                    num(s.design_effect, 2),
                ]
            )
        funnel.append(
            [
                a.arm,
                "loss shares (pooled rates)",
                "",
                _by_stage(a.loss_shares_pooled, "pct"),
                "",
                "",
                "",
            ]
        )
        for neg in (a.false_invoke, a.any_external):
            if neg is not None:
                negatives.append(
                    [
                        a.arm,
                        neg.definition,
                        f"{neg.calls} / {neg.runs}",
                        pct(neg.rate),
                        ir_interval(neg.interval, "pct"),
                        f"{num(neg.rho, 2)} ({neg.rho_source})",
                    ]
                )
    out += [
        (
            "Score per intent (Figure 3)",
            [
                "intent",
                "arm",
                "score",
                "prompts",
                "runs",
                "value",
                "90% interval",
                "95% interval",
                f"{_beside(report)} 90%",
                f"pass^{ir.pass_k}",
                "False-Invoke Rate (negatives)",
                "need type",
            ],
            intents,
        ),
        (
            "Funnel over all positive runs (Figure 2; Jeffreys on deflated counts)",
            ["arm", "stage", "reached / runs", "rate", "interval", "rho (source)", "DEFF"],
            funnel,
        ),
        (
            "Stage posteriors per intent (sequential counts, capped prior)",
            [
                "arm",
                "intent",
                "stage",
                "reached / parent",
                "rho (source)",
                "DEFF",
                "posterior mean",
                "posterior interval",
                "capped",
            ],
            stages,
        ),
        (
            "Loss shares (posterior means) and Lever in points (against the intent median)",
            ["arm", "intent", "loss shares", "Lever"],
            shares,
        ),
        (
            "Shared priors per stage",
            ["arm", "stage", "method", "mu", "kappa", "capped intents", "pooled rho"],
            priors,
        ),
        (
            "Calls on negative runs (two definitions, never conflated)",
            ["arm", "definition", "calls / runs", "rate", "interval", "rho_S (source)"],
            negatives,
        ),
    ]
    out += invokerank_choice_tables(report)
    out.append(server_funnel_table(report))
    out += analysis_tables(report)  # the seed's further analyses (issue 41, item 4)
    return [t for t in out if t[2]]


def server_funnel_table(report: Report) -> tuple[str, list[str], list[list[Any]]]:
    """Per arm and listed integration: each stage's runs among the runs that listed it,
    with its rate and interval ('not measured' where the records cannot say)."""
    ir = report.invokerank
    rows = []
    for a in ir.arms if ir is not None else []:
        for f in a.server_funnel:
            cells = [
                "not measured"
                if st.reached is None
                else f"{st.reached} ({pct(st.rate)}; {ir_interval(st.interval, 'pct')})"
                for st in f.stages
            ]
            rows.append([a.arm, f.integration, f.role, f.listed, *cells, f.note])
    first = next((f for a in (ir.arms if ir else []) for f in a.server_funnel), None)
    stages = [st.stage for st in first.stages] if first is not None else []
    return (
        "Funnel per listed integration (runs reaching each stage among the runs listing it)",
        ["arm", "integration", "role", "listed", *stages, "note"],
        rows,
    )


def _rating(value: float | None) -> str:
    return "null" if value is None or not math.isfinite(value) else f"{value:.0f}"


def _rating_interval(iv: Interval) -> str:
    return _labelled(f"{_rating(iv.low)} to {_rating(iv.high)} ({iv.level:.0%})", iv)


def _rating_terms(arm: str, rating: InvokeRating) -> list[list[Any]]:
    """The position and branded-prompt coefficients (logit scale) as rows of the rating
    table, when fitted."""
    out = []
    for name, value, se in (
        ("position term (gamma, per place down the list)", rating.position, rating.position_se),
        ("branded-prompt term (lambda)", rating.branded, rating.branded_se),
    ):
        if value is not None:
            out.append([arm, name, "term", "-", f"{num(value, 3)} (SE {num(se, 3)})", "", ""])
    return out


def invokerank_choice_tables(report: Report) -> list[tuple[str, list[str], list[list[Any]]]]:
    """First choices (Invoke Rating, shares, Lever against the best competitor), terminal
    classes (Figure 4) and the Agent Resolution Split, per arm."""
    ir = report.invokerank
    rating, shares, lever, terminal, split = [], [], [], [], []
    for a in ir.arms if ir is not None else []:
        if a.rating is not None:
            rating += [
                [a.arm, r.integration, r.role, f"{r.chosen} / {r.listed}", _rating(r.rating)]
                + [_rating_interval(iv) for iv in r.intervals]
                for r in a.rating.rows
            ] + _rating_terms(a.arm, a.rating)
        if a.shares is not None:
            shares += [
                [a.arm, a.shares.label, r.intent, r.integration, r.hits, pct(r.share)]
                + [ir_interval(iv, "pct") for iv in r.intervals]
                for r in a.shares.rows
            ]
        lever += [
            [a.arm, x.intent, x.best_competitor or "-", pct(x.focal_rate)]
            + [pct(x.competitor_rate), points(x.lever)]
            for x in a.lever_competitor
        ]
        terminal += [[a.arm, t.polarity, t.intent, t.runs, *t.counts.values()] for t in a.terminal]
        if a.resolution is not None:
            res = a.resolution
            rates = [
                "unknown" if r is None else f"{pct(r.rate)} ({ir_interval(r.interval, 'pct')})"
                for r in (res.host_self_serve, res.no_tool_decline)
            ]
            shares_text = ", ".join(f"{k} {pct(v)}" for k, v in res.shares.items() if v)
            split.append([a.arm, res.runs, shares_text, *rates, res.note])
    classes = next((list(t.counts) for a in ir.arms for t in a.terminal), []) if ir else []
    return [
        (
            "Invoke Rating per listed integration (conditional logit over first choice; "
            "R = 1000 + 400 beta / ln 10, 1000 = as likely as no tool)",
            ["arm", "integration", "role", "chosen / listed", "R", "interval", "interval"],
            rating,
        ),
        (
            "Selection Share per contested intent (eligible: the registered pool)",
            ["arm", "metric", "intent", "integration", "first choices", "share"]
            + ["interval", "interval"],
            shares,
        ),
        (
            "Lever at Surfaced x Selected against the best competitor (points)",
            ["arm", "intent", "best competitor", "focal r_D r_S", "competitor", "Lever"],
            lever,
        ),
        (
            "Terminal classes per intent (Figure 4; positive runs, negatives apart)",
            ["arm", "runs of", "intent", "runs", *classes],
            terminal,
        ),
        (
            "Agent Resolution Split (positive runs)",
            ["arm", "runs", "class shares", "Host Self-Serve Rate", "No-tool Decline Rate"]
            + ["note"],
            split,
        ),
    ]


def invokerank_choice_lines(report: Report) -> list[str]:
    """Per arm, one line of Invoke Ratings and one of the resolution split (terminal)."""
    ir = report.invokerank
    out = []
    for a in ir.arms if ir is not None else []:
        if a.rating is not None and a.rating.rows:
            ratings = ", ".join(f"{r.integration} {_rating(r.rating)}" for r in a.rating.rows)
            out.append(f"{a.arm}: Invoke Rating (1000 = no tool) {ratings}")
        if a.resolution is not None:
            res = a.resolution
            hss = res.host_self_serve
            out.append(
                f"{a.arm}: resolution of {res.runs} positive runs: focal "
                f"{pct(res.shares.get('focal'))}, competitor {pct(res.shares.get('competitor'))}"
                f", unjudged no-tool {res.unjudged}; Host Self-Serve Rate "
                + ("unknown (no native judge)" if hss is None else pct(hss.rate))
            )
    return out + analysis_lines(report)


# --- The seed's further analyses in the InvokeRank section (issue 41, item 4) ----------
# Tables appended by invokerank_tables (report.md, report.html) and lines printed under the
# terminal's leaderboard (invokerank_choice_lines). Nothing computes: every number is read
# from the report model (the Figure 5 table joins the report's paired changes with the
# arms' calls on negatives, via render.invokerank_figures.comparisons).


IRTable = tuple[str, list[str], list[list[Any]]]


def _outcome(report: Report) -> str:
    """The registered outcome (a hand-built fragment of a report may lack it)."""
    return str(getattr(report, "outcome", None) or "the outcome")


def _calls(neg: NegativeRate | None) -> str:
    return "no negative runs" if neg is None else f"{neg.calls} / {neg.runs}"


def _rate(neg: NegativeRate | None) -> str:
    if neg is None:
        return "-"
    return f"{pct(neg.rate)} ({ir_interval(neg.interval, 'pct')})"


def need_table(report: Report) -> IRTable:
    ir = report.invokerank
    rows = []
    for a in ir.arms if ir is not None else []:
        t = a.need_test
        if t is None:
            continue
        coding = ", ".join(f"{k}: {v}" for k, v in t.coding.items()) or "-"
        if t.reason is not None:
            rows.append([a.arm, coding, "-", "-", "-", "-", t.reason])
            continue
        rows.append(
            [
                a.arm,
                coding,
                points(t.mean_tool_need),
                points(t.mean_answerable),
                points(t.difference),
                f"{pvalue(t.pvalue)} (exact, {t.relabelings} relabelings; smallest "
                f"possible {pvalue(t.smallest_p)})",
                "uncoded: " + ", ".join(t.uncoded) if t.uncoded else "",
            ]
        )
    return (
        "Need type per intent and the exact intent-level permutation test (seed 6.2; "
        "one-sided: tool-need intents score higher)",
        [
            "arm",
            "need type per intent",
            "mean score, tool-need",
            "mean score, knowledge",
            "difference (points)",
            "p",
            "note",
        ],
        rows,
    )


def negatives_table(report: Report) -> IRTable:
    ir = report.invokerank
    rows = []
    for a in ir.arms if ir is not None else []:
        for x in a.false_invoke_by_intent:
            rows.append(
                [
                    a.arm,
                    x.intent,
                    _calls(x.false_invoke),
                    _rate(x.false_invoke),
                    _calls(x.any_external),
                    _rate(x.any_external),
                ]
            )
    return (
        "False-Invoke Rate per intent (negative runs; Jeffreys at the arm's rho_S, as the "
        "arm-level rate)",
        [
            "arm",
            "intent",
            "focal calls / runs",
            "False-Invoke Rate",
            "any external / runs",
            "any external rate",
        ],
        rows,
    )


def _rho_interval(iv: Interval | None) -> str:
    return "-" if iv is None else ir_interval(iv)


def rho_table(report: Report) -> IRTable:
    ir = report.invokerank
    rows = []
    for a in ir.arms if ir is not None else []:
        if a.rho is None:
            continue
        for r in a.rho.rows:
            label = {"pooled": "pooled", "within_intent": "within intent"}.get(r.kind, r.intent)
            rows.append(
                [
                    a.arm,
                    r.stage,
                    label,
                    "undefined" if r.rho is None else num(r.rho, 2),
                    _rho_interval(r.interval),
                    r.groups,
                ]
            )
    return (
        "Intra-prompt correlation rho per intent (Figure 8; sequential counts, prompts as "
        "groups; 90% percentile bootstrap over the intent's prompts)",
        ["arm", "stage", "estimate", "rho", "interval", "groups (prompts)"],
        rows,
    )


def factor_table(report: Report) -> IRTable:
    ir = report.invokerank
    rows = []
    for a in ir.arms if ir is not None else []:
        for f in a.choice_factors:
            rows.append(
                [
                    a.arm,
                    f.intent,
                    f.runs,
                    f"{f.external} ({pct(f.p_external)})",
                    f"{f.focal} / {f.external} ({pct(f.p_focal_given_external)})",
                    f"{f.focal} ({pct(f.p_focal)})",
                    f.answered_without_search,
                    f.searched_then_declined,
                    f.other_no_tool,
                ]
            )
    return (
        "Two-level choice, eq. (4): P(focal) = P(external) x P(focal | external) "
        "(positive runs; counts, no interval)",
        [
            "arm",
            "intent",
            "runs",
            "external call",
            "focal | external",
            "focal",
            "no search",
            "searched, declined",
            "other no tool",
        ],
        rows,
    )


def _arm_negatives(report: Report) -> dict[str, NegativeRate | None]:
    ir = report.invokerank
    return {a.arm: a.false_invoke for a in (ir.arms if ir is not None else [])}


def metadata_table(report: Report) -> IRTable:
    """Figure 5: each paired change beside both arms' focal calls on negative runs; no
    table when no arm has a negative run (it would repeat the paired changes shown above
    beside "no negative runs")."""
    negatives = _arm_negatives(report)
    if all(n is None for n in negatives.values()):
        return ("", [], [])
    rows = [
        [
            c.baseline,
            c.candidate,
            c.source if c.intent is None else f"{c.source}: {c.intent}",
            "-" if c.tasks is None else c.tasks,
            pct(c.baseline_rate) if c.baseline_rate is not None else "-",
            pct(c.candidate_rate) if c.candidate_rate is not None else "-",
            num(c.estimate),
            c.note if c.interval is None and c.note else interval(c.interval),
            "-" if c.intent is not None else _calls(negatives.get(c.baseline)),
            "-" if c.intent is not None else _calls(negatives.get(c.candidate)),
        ]
        for c in comparisons(report)
    ]
    return (
        f"Paired changes in {_outcome(report)} beside calls on negatives (Figure 5; focal "
        "calls on negative runs per arm)",
        [
            "baseline",
            "candidate",
            "comparison",
            "tasks",
            "baseline rate",
            "candidate rate",
            "change",
            "interval",
            "focal calls on negatives, baseline",
            "focal calls on negatives, candidate",
        ],
        rows,
    )


def withheld_table(report: Report) -> IRTable:
    return (
        "InvokeRank figures not drawn",
        ["figure", "why"],
        [[name, why] for name, why in withheld(report)],
    )


def replicates_table(report: Report) -> IRTable:
    """Figure 7's table: each arm's replicate sessions (``design.sessions``), or why not."""
    ir = report.invokerank
    if ir is not None and ir.replicates:
        return ("Replicate run rates (Figure 7)", ["not shown"], [[ir.replicates]])
    rows: list[list[Any]] = []
    for a in ir.arms if ir is not None else []:
        rr = a.replicate_runs
        if rr is None:
            continue
        if rr.reason is not None:
            rows.append([a.arm, "-", "-", "-", rr.reason, "-", "-"])
            continue
        for r in rr.rows:
            rows.append(
                [
                    a.arm,
                    r.session + 1,
                    r.runs,
                    pct(r.rate),
                    ir_interval(r.within_range, "pct"),
                    pct(rr.sigma_run) if r.session == 0 else "",
                    pvalue(rr.pvalue) if r.session == 0 else "",
                ]
            )
    header = [
        "arm",
        "session",
        "runs (common prompts)",
        "Selected rate",
        "within-run 90% range",
        "between-run SD",
        "permutation p",
    ]
    return ("Replicate run rates (Figure 7)", header, rows)


def host_funnel_table(report: Report) -> IRTable:
    """Figure 2 per host (run stages registered): each host's selection arms beside its
    execution arms, stage by stage of the funnel."""
    ir = report.invokerank
    rows: list[list[Any]] = []
    arms = {a.arm: a for a in ir.arms} if ir is not None else {}
    for h in ir.hosts if ir is not None else []:
        stages = [s.stage for a in h.selection + h.execution for s in arms[a].funnel]
        for stage in dict.fromkeys(stages):
            for arm in h.selection + h.execution:
                a = arms[arm]
                s = next((x for x in a.funnel if x.stage == stage), None)
                if s is None:
                    rows.append([h.host, stage, f"{arm} ({a.stage})", "not measured", "", ""])
                    continue
                rows.append(
                    [
                        h.host,
                        stage,
                        f"{arm} ({a.stage})",
                        f"{s.successes} / {s.trials}",
                        pct(s.successes / s.trials if s.trials else None),
                        ir_interval(s.displayed, "pct"),
                    ]
                )
    return (
        "Figure 2 per host: selection (replayed) beside execution (focal integration live)",
        ["host", "funnel stage", "arm (run stage)", "reached / runs", "rate", "interval"],
        rows,
    )


def _telemetry_figure(value: float | None, why: str | None) -> str:
    return f"{value:.3f}" if value is not None else f"withheld: {why}"


def _telemetry_head(report: Report) -> str:
    ir = report.invokerank
    t = ir.telemetry if ir is not None else None
    if t is None:
        return ""
    log = t.log
    return f"{log.path}: {log.events} import(s), {log.calls} call(s), head seq {log.seq} {log.hash}"


def telemetry_tables(report: Report) -> list[IRTable]:
    """The S-vs-T block (issue 41 item 5): each named arm's tool mix beside its host's
    telemetry, then the two figures (each withheld with its reason), the log's head in the
    title; an arm with no telemetry is one row saying so. Empty without the block."""
    ir = report.invokerank
    t = ir.telemetry if ir is not None else None
    if t is None:
        return []
    mix: list[list[Any]] = []
    figures: list[list[Any]] = []
    for c in t.comparisons:
        for tool in c.tools:
            mix.append(
                [
                    c.arm,
                    f"{c.integration} on {c.host}",
                    tool.tool,
                    tool.s_calls,
                    pct(tool.s_share),
                    tool.t_calls,
                    pct(tool.t_share),
                ]
            )
        figures.append(
            [
                c.arm,
                c.integration,
                c.host,
                f"{c.s_calls} ({c.s_evidence_class or 'mixed'})",
                f"{c.t_calls} ({c.t_basis})",
                _telemetry_figure(c.total_variation, c.total_variation_withheld),
                _telemetry_figure(c.spearman, c.spearman_withheld),
            ]
        )
    for line in t.absent:
        figures.append([line, "", "", "", "", "no telemetry", "no telemetry"])
    return [
        (
            "S vs T: synthetic tool mix beside real calls (telemetry, evidence class T, "
            "never pooled)",
            ["arm", "integration on host", "tool", "S calls", "S share", "T calls", "T share"],
            mix,
        ),
        (
            f"S vs T figures (telemetry log {_telemetry_head(report)})",
            [
                "arm",
                "integration",
                "telemetry host",
                "S calls (class)",
                "T calls (basis)",
                "total variation distance",
                "Spearman rank correlation",
            ],
            figures,
        ),
    ]


def telemetry_lines(report: Report) -> list[str]:
    """The S-vs-T block for the terminal: one line per named arm and the log's head."""
    ir = report.invokerank
    t = ir.telemetry if ir is not None else None
    if t is None:
        return []
    out = [
        f"S vs T (telemetry, evidence class T, never pooled; {c.arm}: {c.integration} on "
        f"{c.host}): S {c.s_calls} first calls ({c.s_evidence_class or 'mixed'}), T "
        f"{c.t_calls} {c.t_basis}; total variation distance "
        f"{_telemetry_figure(c.total_variation, c.total_variation_withheld)}; Spearman "
        f"{_telemetry_figure(c.spearman, c.spearman_withheld)}"
        for c in t.comparisons
    ]
    out += [f"S vs T (telemetry): {line}" for line in t.absent]
    out.append(f"telemetry log read: {_telemetry_head(report)}")
    drawn = set(getattr(report, "figures", None) or [])
    for index, c in enumerate(t.comparisons):  # the S-vs-T figures, drawn or why not
        if f"ir_s_vs_t_{index + 1}" in drawn:
            out.append(f"S vs T figure, arm {c.arm}: figures/ir_s_vs_t_{index + 1}.png")
    out += [f"{name} not drawn: {why}" for name, why in svst_withheld(report)]
    return out


def _session_state(s: Any) -> str:
    return "complete" if s.complete else "not run" if not s.completed else "partial"


def sessions_table(report: Report) -> IRTable:
    """Each replicate session's units (``design.sessions``; ``prereg run --session K``)."""
    comp = getattr(report, "completeness", None)
    rows = [
        [s.session, s.planned, s.completed, _session_state(s)]
        for s in (comp.sessions if comp is not None else [])
    ]
    return (
        "Replicate sessions (design.sessions; a session not run withholds the calibrated interval)",
        ["session", "planned units", "with an ok record", "state"],
        rows,
    )


def sessions_line(report: Report) -> list[str]:
    """The replicate sessions' progress in one line for the terminal (none without)."""
    comp = getattr(report, "completeness", None)
    sessions = comp.sessions if comp is not None else []
    if not sessions:
        return []
    parts = [f"{s.session}: {s.completed}/{s.planned} ({_session_state(s)})" for s in sessions]
    return ["replicate sessions (units with an ok record): " + "; ".join(parts)]


def analysis_tables(report: Report) -> list[IRTable]:
    """The tables of this module that have rows."""
    tables = [
        sessions_table(report),
        host_funnel_table(report),
        need_table(report),
        negatives_table(report),
        rho_table(report),
        factor_table(report),
        metadata_table(report),
        replicates_table(report),
        *telemetry_tables(report),
        withheld_table(report),
    ]
    return [t for t in tables if t[2]]


def analysis_lines(report: Report) -> list[str]:
    """Per arm, the need-type test and the largest per-intent False-Invoke Rate, for the
    terminal (the tables are in report.md and report.html)."""
    ir = report.invokerank
    out: list[str] = []
    said: set[str | None] = set()
    for a in ir.arms if ir is not None else []:
        t = a.need_test
        if t is not None and t.reason is None:
            out.append(
                f"{a.arm}: need type: tool-need minus knowledge intents {points(t.difference)} "
                f"points, exact permutation p = {pvalue(t.pvalue)} ({t.relabelings} relabelings)"
            )
        elif t is not None and t.reason not in said:
            said.add(t.reason)
            out.append(f"need-type test (seed 6.2) {t.reason}")
        fir = [x for x in a.false_invoke_by_intent if x.false_invoke is not None]
        if fir:
            top = max(fir, key=lambda x: x.false_invoke.rate if x.false_invoke else 0.0)
            neg = top.false_invoke
            assert neg is not None
            out.append(
                f"{a.arm}: highest False-Invoke Rate by intent: {top.intent} "
                f"{neg.calls} / {neg.runs} ({pct(neg.rate)}; {ir_interval(neg.interval, 'pct')})"
            )
    if ir is not None and ir.replicates:
        out.append(ir.replicates)
    out += sessions_line(report)
    arms = {a.arm: a for a in ir.arms} if ir is not None else {}
    for h in ir.hosts if ir is not None else []:
        parts = []
        for arm in h.selection + h.execution:
            last = arms[arm].funnel[-1] if arms[arm].funnel else None
            reached = (
                "no funnel" if last is None else f"{last.stage} {last.successes} / {last.trials}"
            )
            parts.append(f"{arm} ({arms[arm].stage}): {reached}")
        out.append(f"Figure 2, host {h.host}: " + "; ".join(parts))
    for a in ir.arms if ir is not None else []:
        rr = a.replicate_runs
        if rr is not None and rr.reason is None:
            rates = ", ".join(pct(r.rate) for r in rr.rows)
            out.append(
                f"{a.arm}: {rr.sessions} replicate sessions, Selected {rates}; between-run SD "
                f"{pct(rr.sigma_run)}, within-run SD {pct(rr.within_sd)}, permutation "
                f"p = {pvalue(rr.pvalue)}"
            )
        elif rr is not None:
            out.append(f"{a.arm}: replicate sessions (Figure 7) not shown: {rr.reason}")
    for a in ir.arms if ir is not None else []:
        out += rho_line(a)
    return out + telemetry_lines(report)


def rho_line(arm: Any) -> list[str]:
    """Figure 8 in one terminal line per arm: how many intent cells have an interval
    (the withheld cells' reasons, counted), and the within-intent rho per stage."""
    if arm.rho is None:
        return []
    cells = [r for r in arm.rho.rows if r.kind == "cell"]
    shown = sum(1 for r in cells if r.interval is not None and r.interval.reason is None)
    withheld = Counter(  # by kind of reason: its text before the cell's own figures
        ((r.interval.reason if r.interval is not None else r.note) or "undefined").split(" (")[0]
        for r in cells
        if r.interval is None or r.interval.reason is not None
    )
    within = ", ".join(
        f"{r.stage} {'undefined' if r.rho is None else num(r.rho, 2)}"
        for r in arm.rho.rows
        if r.kind == "within_intent"
    )
    line = f"{arm.arm}: rho per intent (Figure 8): {shown} of {len(cells)} cell(s) with an interval"
    if withheld:
        line += " (withheld: " + "; ".join(f"{n} {why}" for why, n in withheld.items()) + ")"
    return [line + (f"; within-intent rho {within}" if within else "")]


def flat_rows(value: Any, prefix: str = "") -> list[tuple[str, str]]:
    """A nested JSON object as (dotted key, value) rows, for a readable host table.

    Objects nest into dotted keys (``params.temperature``); lists and scalars are shown
    as compact JSON, so a string stays quoted only where quoting disambiguates nothing
    (plain strings are shown bare). An empty object shows as ``{}`` on its own key.
    """
    if isinstance(value, dict):
        if not value and prefix:
            return [(prefix, "{}")]
        rows: list[tuple[str, str]] = []
        for key in sorted(value):
            rows += flat_rows(value[key], f"{prefix}.{key}" if prefix else str(key))
        return rows
    if isinstance(value, str):
        return [(prefix, value)]
    return [(prefix, json.dumps(value, sort_keys=True, separators=(", ", ": ")))]


def bootstrap_line(r: Report) -> str:
    """The run-level bootstrap beside the primary, saying why the two may differ."""
    d = r.difference
    if d is None:
        return ""
    line = (
        f"Paired prompt-and-run bootstrap of the same comparison: {num(d.estimate)} "
        f"({interval(d.interval)}), descriptive"
    )
    p = r.primary
    if p is None or p.estimate is None:
        return line + "."
    return (
        f"{line}: {d.estimate_label}. The primary estimate is another quantity "
        f"({p.estimate_label}, per {p.unit}), so the two can differ; the forest plot "
        "shows both, labelled."
    )


def lint_waivers(r: Report) -> list[str]:
    """The corpus lint's registered waivers (issue 41, item 5), one line each, as report.md
    and report.html show them: "waived: RULE (scope); reason: REASON"."""
    block = r.registration_document.get("corpus_lint") or {}
    return [
        f"corpus lint waived: {w.get('rule')} ({w.get('task') or w.get('tool') or 'every finding'}"
        f"); reason: {w.get('reason')}"
        for w in block.get("waive") or []
        if isinstance(w, dict)
    ]
