"""The judged-outcome section as plain lines (the renderers escape them: untrusted text).

The unjudged count comes first on every line, and a judge's rate always carries its
label ("uncalibrated judge"), so no judge-only figure can be read as a finding; the
prediction-powered rate, the judge's agreement with gold and the annotators' with each
other follow it when gold labels exist.
"""

from __future__ import annotations

from typing import Any

from prereg.reports.model import Report


def judged_lines(report: Report) -> list[str]:
    """One header, one line per judge, one per judge and arm; empty without judges."""
    section = report.judged
    if section is None:
        return []
    added = {j.judge for j in section.judges if j.post_hoc is not None}
    judges = "registered judges" + (", and judges added post hoc" if added else "")
    out = [f"Judged outcomes ({judges}; never the verdict)"]
    for j in section.judges:
        declared = "; family confound declared" if j.confound_declared else ""
        arms = "" if j.arms is None else f"; decides arm(s) {', '.join(j.arms)}"
        trust = "" if j.trust is None else f"; trust: {_TRUST[j.trust.status]} ({j.trust.reason})"
        head = "judge"
        if j.post_hoc is not None:
            head = (
                f"{POST_HOC} judge (added {j.post_hoc.added_at}, ledger seq "
                f"{j.post_hoc.ledger_seq}: {j.post_hoc.reason})"
            )
        out.append(
            f"{head} {j.judge}: {j.outcome} by {j.driver} {j.model}, rubric {j.rubric} "
            f"{j.rubric_version} ({j.rubric_digest[:19]}){declared}{arms}{trust}"
        )
    for r in section.rates:
        rate = "no parsed verdict" if r.rate is None else f"{r.met}/{r.judged} = {r.rate:.1%}"
        if r.withheld is not None:
            rate = "withheld"
        corrected = "" if r.corrected is None else _corrected(r.corrected)
        oracle = ""
        if r.oracle_agreement is not None:
            a = r.oracle_agreement
            kappa = "undefined" if a["kappa"] is None else f"{a['kappa']:.2f}"
            oracle = f"; against the oracle: {a['agree']}/{a['runs']} agree, kappa {kappa}"
        mark = f" [{POST_HOC}]" if r.judge in added else ""
        out.append(
            f"  {r.arm} / {r.judge}{mark}: unjudged {r.unjudged} of {r.needed} "
            f"({r.unparseable} unparseable); judge rate {rate} [{r.label}]{corrected}{oracle}"
            f"{_consumed(r.provenance.parameters)}{_left_out(r.provenance.parameters)}"
        )
    return out + invokerank_judge_lines(report)


#: How a judge added after registration is labelled wherever it appears.
POST_HOC = "POST HOC (added after registration; exploratory, never the verdict)"

_TRUST = {"trusted": "trusted", "untrusted": "UNTRUSTED", "not_assessed": "not assessed"}


def _score(a: Any) -> str:
    """An arm's score in a judge's own InvokeRank, with its 90% interval when shown."""
    if a.q is None:
        return f"{a.arm}: {a.label} ({a.reason})"
    iv = a.intervals[0] if a.intervals else None
    if iv is None or iv.low is None or iv.high is None:
        why = f" (90% interval: {iv.reason})" if iv is not None and iv.reason else ""
        return f"{a.arm}: {a.symbol} {100 * a.q:.1f}{why}"
    return f"{a.arm}: {a.symbol} {100 * a.q:.1f} (90% {100 * iv.low:.1f} to {100 * iv.high:.1f})"


def invokerank_judge_lines(report: Report) -> list[str]:
    """Which judge fills the InvokeRank Completed stage, and each completion judge's own
    InvokeRank (issue 41, item 3), under its name; withheld for an untrusted judge."""
    ir = getattr(report, "invokerank", None)  # a partial report (the judged part) has none
    if ir is None:
        return []
    out = []
    if ir.completed_by:
        out.append(f"InvokeRank {ir.completed_by}")
    section = report.judged
    added = {j.judge for j in section.judges if j.post_hoc is not None} if section else set()
    for j in ir.by_judge:
        head = f"InvokeRank under judge {j.judge} (rubric {j.rubric_version}, {_TRUST[j.trust]})"
        if j.judge in added:
            head += f" [{POST_HOC}]"
        if j.withheld is not None:
            out.append(f"{head}: {j.withheld}")
        else:
            scores = "; ".join(_score(a) for a in j.arms) or "no arm scored"
            out.append(f"{head}: {scores}")
    return out


def _interval(c: dict[str, Any], what: str, sign: bool = False) -> str:
    if c.get("estimate") is None:
        return f"; {what}: not computed ({c.get('reason')})"
    form = "+.1%" if sign else ".1%"
    return (
        f"; {what} {c['estimate']:{form}} (95% {c['low']:{form}} to {c['high']:{form}}, "
        f"{c['n_gold']} gold and {c['n_unlabelled']} other {c['unit']}s; gold labels "
        f"alone {c['gold_rate']:{form}}, {c['gold_low']:{form}} to {c['gold_high']:{form}})"
    )


def _kappa(k: dict[str, Any]) -> str:
    if k["kappa"] is None:
        return f"{k['agree']}/{k['runs']} agree, kappa undefined"
    if k["kappa_low"] is None or k["kappa_high"] is None:
        # a table no resample can vary (all agree, one cell, one rater constant)
        return f"{k['agree']}/{k['runs']} agree, kappa {k['kappa']:.2f} (no interval: {k['note']})"
    return (
        f"{k['agree']}/{k['runs']} agree, kappa {k['kappa']:.2f} "
        f"({k['kappa_low']:.2f} to {k['kappa_high']:.2f})"
    )


def _corrected(c: dict[str, Any]) -> str:
    """The gold part of a rate line: PPI rate (and difference), judge and annotators."""
    out = _interval(c, "prediction-powered rate")
    if "difference" in c:
        d = c["difference"]
        out += _interval(d, f"paired difference vs {d['control']}", sign=True)
    g = c["gold"]
    out += f"; gold: {g['runs']} runs by {len(g['annotators'])} annotator(s)"
    if g["disputed"]:
        out += f", {g['disputed']} disputed"
    if g.get("sample") is None:
        out += ", no registered gold draw (the correction assumes a random sample)"
    else:
        s = g["sample"]
        out += f", registered draw of {s['share']:.0%} of tasks (seed {s['seed']})"
        if g["off_sample"]:
            out += f", {g['off_sample']} labelled outside it (left out of the correction)"
    j = g["judge_vs_gold"]
    if j is not None:
        tpr = "n/a" if j["tpr"] is None else f"{j['tpr']:.1%}"
        fpr = "n/a" if j["fpr"] is None else f"{j['fpr']:.1%}"
        out += (
            f"; judge vs gold {_kappa(j)}, TPR {tpr} ({j['tpr_low']:.1%} to "
            f"{j['tpr_high']:.1%}), FPR {fpr} ({j['fpr_low']:.1%} to {j['fpr_high']:.1%})"
        )
    for a in g["annotator_agreement"]:
        out += f"; annotators {a['a']} vs {a['b']}: {_kappa(a)}"
    return out


def _consumed(parameters: dict[str, Any]) -> str:
    """Where the InvokeRank section uses these verdicts, said with their label."""
    filled = parameters.get("fills_invokerank_completed")
    if filled:
        return (
            f"; the InvokeRank Completed stage takes {filled} of these verdicts (runs no "
            "oracle decided): uncalibrated judge"
        )
    native = parameters.get("fills_native_class")
    if native:
        return (
            f"; the Agent Resolution Split's native self-service class rests on {native} of "
            "these verdicts: uncalibrated judge"
        )
    return ""


def _left_out(parameters: dict[str, Any]) -> str:
    """The negative-prompt runs the judge was asked about, which its rate leaves out."""
    n = parameters.get("negative_prompts_left_out")
    if not n:
        return ""
    return (
        f"; {n} run(s) on negative prompts judged and left out (a judged rate is on "
        "positive prompts)"
    )
